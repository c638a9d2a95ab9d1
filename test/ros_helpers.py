"""Helpers shared by the node tests: waiting on a condition while a node process runs."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_until(condition: Callable[[], bool], what: str, process=None, timeout: float = 30.0,
               poll: Callable[[], None] | None = None) -> None:
    """Run ``poll()`` until ``condition()`` holds; fail the test on timeout or if the node exits.

    Args:
        condition: Checked before each ``poll()``.
        what: What is awaited, for the failure message.
        process: The node process (``start_node`` fixture); its output goes into the failure message.
        timeout: Time limit [s].
        poll: One round of work (e.g. spinning an executor once); by default a 2 ms pause while another
            thread spins.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.proc.poll() is not None:
            pytest.fail(f"node exited ({process.proc.returncode}) while waiting for {what}:\n"
                        f"{process.output()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timeout waiting for {what}" + (f":\n{process.output()}" if process else ""))
        if poll is None:
            time.sleep(0.002)
        else:
            poll()
