"""walk_mpc.fastdds_shm: the shared-memory files of dead Fast DDS participants are marked dead and removed,
those of live ones never touched; and a reader SIGKILLed between two messages, restarted, is heard again."""

from __future__ import annotations

import fcntl
import mmap
import os
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from walk_mpc.fastdds_shm import (
    SHM_CLEAN_ENV,
    clean_zombies,
    listener_states,
    listening_ports,
    mapped_ports,
    plant_listener_state,
)

FASTDDS = {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}
NOW = 1_800_000_000.0  # [s] the cleaning's clock, as file modification times
OLD = NOW - 60.0
PORT = 7100


def port_segment(port: int = PORT, flags: int = 0b111, listeners: str = "W") -> bytes:
    """A Fast DDS 3.2 port segment's bytes (the fields the cleaning reads; the rest zero)."""
    data = bytearray(52400)
    struct.pack_into("<6I", data, 276, port, len(listeners), 300, 100, 512, 0)  # port id ... waiting count
    data[300] = flags  # is_port_ok, is_opened_read_exclusive, is_opened_for_reading
    for k, state in enumerate(listeners):
        data[41368 - 1024 * 20 + 20 * k] = 1 | {"W": 2, "P": 4, "-": 0}[state]
    data[41368:41376] = b"fastdds\x00"
    data[41392:41407] = b"port_node_abi5\x00"
    return bytes(data)


def make_files(directory: Path, files: dict, mtime: float = OLD) -> None:
    for name, content in files.items():
        (directory / name).write_bytes(content)
        os.utime(directory / name, (mtime, mtime))


def held(path: Path):
    """An exclusive lock on ``path`` as a live participant holds its lock file (another open file)."""
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_a_dead_port_is_marked_not_ok_for_its_writers_then_removed(tmp_path):
    make_files(tmp_path, {f"fastdds_port{PORT}": port_segment(listeners="-"), f"fastdds_port{PORT}_el": b""})
    with open(tmp_path / f"fastdds_port{PORT}", "rb") as file:  # a writer's mapping of the dead port
        writer = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    cleaning = clean_zombies(tmp_path, now=NOW, environ=FASTDDS)
    assert (cleaning.ports, cleaning.marked, cleaning.segments, cleaning.live) == ((PORT,), (PORT,), 0, 0)
    assert writer[300] == 0b110  # is_port_ok cleared, the other flags kept
    assert sorted(os.listdir(tmp_path)) == []


def test_a_lock_file_held_by_a_live_process_is_left_alone(tmp_path):
    segment = port_segment(listeners="-")
    make_files(tmp_path, {f"fastdds_port{PORT}": segment, f"fastdds_port{PORT}_el": b"",
                          "fastdds_0123456789abcdef": b"x" * 64, "fastdds_0123456789abcdef_el": b""})
    locks = [held(tmp_path / f"fastdds_port{PORT}_el"), held(tmp_path / "fastdds_0123456789abcdef_el")]
    try:
        cleaning = clean_zombies(tmp_path, now=NOW, environ=FASTDDS)
    finally:
        for fd in locks:
            os.close(fd)
    assert (cleaning.ports, cleaning.segments, cleaning.live) == ((), 0, 2)
    assert not cleaning
    assert (tmp_path / f"fastdds_port{PORT}").read_bytes() == segment
    assert len(os.listdir(tmp_path)) == 4


def test_a_lock_file_younger_than_min_age_is_left_alone(tmp_path):
    make_files(tmp_path, {f"fastdds_port{PORT}": port_segment(), f"fastdds_port{PORT}_el": b""},
               mtime=NOW - 0.5)  # a participant that created its lock file and has not taken it yet
    cleaning = clean_zombies(tmp_path, min_age=1.0, now=NOW, environ=FASTDDS)
    assert not cleaning
    assert len(os.listdir(tmp_path)) == 2


def test_a_segment_of_another_layout_is_removed_without_being_written(tmp_path):
    other = port_segment(port=PORT + 2)  # not the port of its name: not a port node this module knows
    make_files(tmp_path, {f"fastdds_port{PORT}": other, f"fastdds_port{PORT}_el": b""})
    with open(tmp_path / f"fastdds_port{PORT}", "rb") as file:
        writer = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    cleaning = clean_zombies(tmp_path, now=NOW, environ=FASTDDS)
    assert (cleaning.ports, cleaning.marked) == ((PORT,), ())
    assert writer[:] == other
    assert os.listdir(tmp_path) == []


def test_dead_participant_segments_are_removed(tmp_path):
    make_files(tmp_path, {"fastdds_0123456789abcdef": b"x" * 64, "fastdds_0123456789abcdef_el": b"",
                          "fastrtps_fedcba9876543210": b"x" * 64, "fastrtps_fedcba9876543210_el": b""})
    cleaning = clean_zombies(tmp_path, now=NOW, environ=FASTDDS)
    assert (cleaning.ports, cleaning.segments) == ((), 2)
    assert os.listdir(tmp_path) == []


def test_files_without_a_lock_file_are_left_alone(tmp_path):
    files = {f"fastdds_port{PORT}": port_segment(), f"sem.fastdds_port{PORT}_mutex": b"m",
             "fastdds_0123456789abcdef": b"x", "fastdds_port7101_sl": b"", "other_el": b""}
    make_files(tmp_path, files)
    assert not clean_zombies(tmp_path, now=NOW, environ=FASTDDS)
    assert sorted(os.listdir(tmp_path)) == sorted(files)


@pytest.mark.parametrize("environ", [{"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},
                                     {"RMW_IMPLEMENTATION": "rmw_zenoh_cpp"},
                                     {**FASTDDS, SHM_CLEAN_ENV: "0"}, {SHM_CLEAN_ENV: "off"}])
def test_another_rmw_or_the_opt_out_cleans_nothing(tmp_path, environ):
    make_files(tmp_path, {f"fastdds_port{PORT}": port_segment(), f"fastdds_port{PORT}_el": b""})
    assert not clean_zombies(tmp_path, now=NOW, environ=environ)
    assert len(os.listdir(tmp_path)) == 2


def test_the_default_rmw_is_fast_dds(tmp_path):
    make_files(tmp_path, {f"fastdds_port{PORT}_el": b""})
    assert clean_zombies(tmp_path, now=NOW, environ={}).ports == (PORT,)


def test_listener_states_reads_each_slot_in_use():
    assert listener_states(port_segment(listeners="W-P")) == "W-P"


# A real reader and writer (rclpy, Fast DDS's shared memory).

READER = textwrap.dedent("""
    import rclpy, sys
    from std_msgs.msg import Int32
    rclpy.init()
    node = rclpy.create_node("shm_reader")
    node.create_subscription(Int32, "shm_clean_test", lambda m: print(m.data, flush=True), 10)
    rclpy.spin(node)
""")


@pytest.mark.ros
def test_a_reader_killed_between_two_messages_is_heard_again_once_restarted(tmp_path):
    """The reader's ports are left as a death between two messages leaves them (no listener waiting nor
    processing: Fast DDS's checks never mark such a port dead); the cleaning marks them not ok in the
    writer's mapping, and the restarted reader hears the writer."""
    import threading

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from ros_helpers import wait_until
    from std_msgs.msg import Int32

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("shm_writer", context=context)
    publisher = node.create_publisher(Int32, "shm_clean_test", 10)
    count = [0]

    def publish():
        count[0] += 1
        publisher.publish(Int32(data=count[0]))

    node.create_timer(0.01, publish)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    readers = []

    def start_reader():
        out = open(tmp_path / f"reader{len(readers)}.txt", "w")
        proc = subprocess.Popen([sys.executable, "-P", "-c", READER], stdout=out, stderr=subprocess.STDOUT)
        readers.append((proc, out))
        return proc, tmp_path / f"reader{len(readers) - 1}.txt"

    def heard(path):
        return lambda: len(path.read_text().split()) >= 3

    try:
        first, first_out = start_reader()
        wait_until(heard(first_out), "the first reader hearing the writer")
        ports = listening_ports(first.pid)
        assert ports, "the reader listens on no shared-memory port"
        first.send_signal(signal.SIGSTOP)
        for port in ports:
            plant_listener_state(port, "-")
        first.send_signal(signal.SIGKILL)
        first.wait()
        cleaning = clean_zombies(min_age=0.0)  # the reader may have lived less than the default 1 s
        assert set(ports) <= set(cleaning.marked)
        dead = [view for view in mapped_ports(os.getpid()) if view.port in ports and "-" in view.listeners]
        assert not any(view.ok for view in dead), dead  # the writer's next push there reopens the port
        second, second_out = start_reader()
        wait_until(heard(second_out), lambda: f"the restarted reader hearing the writer (ports "
                                              f"{listening_ports(second.pid)}, before {ports})")
    finally:
        for proc, out in readers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            out.close()
        executor.shutdown(timeout_sec=5.0)
        node.destroy_node()
        context.try_shutdown()
