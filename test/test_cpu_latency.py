"""The CPU latency request: the value written as the kernel reads it, held open for the block, refused
values, and a device that cannot be opened (no permission) warned about, never raised."""

from __future__ import annotations

import os
import struct

import pytest

from walk_mpc.tools.cpu_latency import cpu_latency_request


def test_the_request_is_written_as_a_native_int32_and_held_until_the_block_ends(tmp_path, monkeypatch):
    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")
    closed = []
    real_close = os.close
    monkeypatch.setattr(os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    with cpu_latency_request(0, str(device)) as held:
        assert held and not closed  # open while the block runs
        assert struct.unpack("=i", device.read_bytes()) == (0,)
    assert len(closed) == 1
    with cpu_latency_request(125, str(device)):
        pass
    assert struct.unpack("=i", device.read_bytes()[-4:]) == (125,)


def test_a_device_that_cannot_be_opened_is_warned_about_and_not_held(tmp_path, capsys):
    with cpu_latency_request(0, str(tmp_path / "missing")) as held:
        assert held is False
    assert "CPU latency request of 0 us not held" in capsys.readouterr().err


@pytest.mark.parametrize("value", [-1, 2**31, 1.5, True, "0"])
def test_a_value_other_than_microseconds_is_refused_naming_it(value):
    with pytest.raises(ValueError, match="max_latency_us"):
        with cpu_latency_request(value, "/nonexistent"):
            pass
