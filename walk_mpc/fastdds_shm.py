"""Zombie Fast DDS shared-memory files (what a SIGKILLed participant leaves) marked dead and removed.

A Fast DDS participant listens on shared-memory ports (``/dev/shm/fastdds_port<N>``, one segment each) that
it holds with an exclusive lock file (``fastdds_port<N>_el``, flock), and sends from its own data segment
(``fastdds_<16 hex>``, lock file ``fastdds_<16 hex>_el``). Killed, it leaves all of them behind, its lock
files unlocked. The other participants keep the dead port mapped and push into it until a check of theirs
marks it not ok (``is_port_ok``), and only then reopen the port by its name. Their checks catch a dead
listener that was waiting for data or processing a message, not one killed between two messages: that port
stays ok in their eyes for ever. A node restarted with the same participant id takes the same port number,
Fast DDS replaces the zombie segment under that name, and the others go on pushing into the old, unlinked
segment: the restarted node never hears them (restart_stress.py ``--kill-while planted-between``; README,
"When a node dies").

:func:`clean_zombies` does, before a node starts or once one died, what Fast DDS misses: for each port whose
lock file no live process holds, it unlinks the port's segment and marks it not ok (the flag the others'
checks would set: their next push reopens the port by its name, the restarted node's), then removes its lock
file, as ``fastdds shm clean`` does; and it removes the data segments of dead participants. A file a live
process holds (its lock taken), or one created in the last ``min_age`` seconds (a participant starting: it
creates the lock file, then takes it), is never touched; the lock file is held while its port is cleaned,
and the ports' named mutexes are left alone. With another RMW (``RMW_IMPLEMENTATION``),
``WALK_MPC_SHM_CLEAN=0``, or no ``/dev/shm``, nothing is done. Fast DDS 2's files (``fastrtps_``, ROS 2
Humble to Jazzy) are removed but their ports not marked: their layout was not measured here.

This module never imports rclpy (the nodes call it before ``rclpy.init``).
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import re
import struct
import sys
import time
from pathlib import Path
from typing import Iterator, List, Mapping, Optional, Tuple

#: The RMW implementations that use Fast DDS ("" is ROS 2's default, rmw_fastrtps_cpp).
FASTDDS_RMWS = ("", "rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")

#: Environment variable: "0" (or "false", "off") turns the cleaning off.
SHM_CLEAN_ENV = "WALK_MPC_SHM_CLEAN"

#: Where Fast DDS keeps its shared-memory files on Linux.
SHM_DIRECTORY = Path("/dev/shm")

#: A port's or a participant segment's exclusive lock file (Fast DDS 3: ``fastdds_``, 2: ``fastrtps_``).
_PORT_LOCK = re.compile(r"^(fastdds|fastrtps)_port(\d{1,5})_el$")
_SEGMENT_LOCK = re.compile(r"^(fastdds|fastrtps)_([0-9a-f]{16})_el$")

#: Fast DDS 3.x ``SharedMemGlobal::PortNode`` in a port segment (ABI 5; measured on 3.2.2): the node's offset,
#: the offsets in it of ``port_id``, ``healthy_check_timeout_ms``, ``port_wait_timeout_ms`` and of the word
#: whose lowest bit is ``is_port_ok``, and the offset of its ``domain_name`` in the segment.
_NODE = 256
_PORT_ID, _HEALTHY_TIMEOUT, _WAIT_TIMEOUT, _FLAGS = 20, 28, 32, 44
_DOMAIN_NAME = 41368
_NODE_NAME = b"port_node_abi5\x00"
#: ``PortNode.listeners_status``: 1024 slots of 20 bytes before ``domain_name``; in the first byte of a slot,
#: bit 0 ``is_in_use``, bit 1 ``is_waiting``, bit 2 ``is_processing``.
_LISTENERS, _LISTENER_SIZE = _DOMAIN_NAME - 1024 * 20, 20
_MAPPING = re.compile(r"([0-9a-f]+-[0-9a-f]+) \S+ \S+ \S+ (\d+)\s+/dev/shm/fastdds_port(\d+)( \(deleted\))?$")


@dataclasses.dataclass
class ZombieCleaning:
    """What :func:`clean_zombies` found and did.

    Attributes:
        ports: The dead ports cleaned (port numbers).
        marked: Of those, the ports whose segment was marked not ok (its layout recognised).
        segments: The number of dead participants' data segments removed.
        live: The number of lock files held by live processes (left alone).
    """

    ports: Tuple[int, ...] = ()
    marked: Tuple[int, ...] = ()
    segments: int = 0
    live: int = 0

    def __bool__(self) -> bool:
        return bool(self.ports or self.segments)

    def summary(self) -> str:
        """One line for a log."""
        return (f"cleaned {len(self.ports)} dead Fast DDS shared-memory ports {list(self.ports)} "
                f"({len(self.marked)} marked not ok for their writers) and {self.segments} dead participant "
                f"segments; {self.live} held by live processes")


def cleaning_enabled(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether :func:`clean_zombies` acts: Fast DDS is the RMW and :data:`SHM_CLEAN_ENV` is not "0"."""
    env = os.environ if environ is None else environ
    return (env.get(SHM_CLEAN_ENV, "").lower() not in ("0", "false", "off")
            and env.get("RMW_IMPLEMENTATION", "") in FASTDDS_RMWS)


def mark_port_dead(segment: int, port: int) -> bool:
    """Mark the port segment open as ``segment`` (a descriptor, read and write) of port ``port`` not ok
    (``PortNode.is_port_ok`` = 0), as Fast DDS's own port checks do; True if done. Nothing is written unless
    the segment is a Fast DDS 3 port node of this port (its object name, port id, timeouts and domain name
    where that layout has them)."""
    try:
        data = os.pread(segment, _DOMAIN_NAME + 64, 0)
    except OSError:
        return False
    if len(data) < _DOMAIN_NAME + 64 or _NODE_NAME not in data[_DOMAIN_NAME:]:
        return False
    port_id, = struct.unpack_from("<I", data, _NODE + _PORT_ID)
    healthy, wait = struct.unpack_from("<II", data, _NODE + _HEALTHY_TIMEOUT)
    domain = data[_DOMAIN_NAME:_DOMAIN_NAME + 17].split(b"\x00", 1)[0]
    if port_id != port or wait != healthy // 3 or domain not in (b"fastdds", b"fastrtps"):
        return False
    try:
        os.pwrite(segment, bytes([data[_NODE + _FLAGS] & 0xFE]), _NODE + _FLAGS)
    except OSError:
        return False
    return True


def _take_if_dead(lock_file: Path, min_age: float, now: float) -> Optional[int]:
    """Open and lock ``lock_file`` if no live process holds it and it is older than ``min_age`` seconds;
    returns the descriptor (locked: the caller removes the files, then closes it), or None."""
    try:
        fd = os.open(lock_file, os.O_RDONLY | os.O_CLOEXEC)  # never created here
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise _Live() from None
    try:
        held = os.fstat(fd)
        named = os.stat(lock_file)
    except OSError:
        os.close(fd)
        return None
    if (held.st_ino, held.st_dev) != (named.st_ino, named.st_dev) or now - held.st_mtime < min_age:
        os.close(fd)  # replaced meanwhile, or just created by a participant that has not locked it yet
        return None
    return fd


class _Live(Exception):
    """A lock file held by a live process."""


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def clean_zombies(directory: Path = SHM_DIRECTORY, min_age: float = 1.0, now: Optional[float] = None,
                  environ: Optional[Mapping[str, str]] = None) -> ZombieCleaning:
    """Mark dead and remove the shared-memory ports, and remove the data segments, that dead Fast DDS
    participants left in ``directory`` (see the module's docstring); nothing with another RMW.

    Args:
        directory: Fast DDS's shared-memory directory.
        min_age: [s] Lock files younger than this are left alone (a participant creating its files).
        now: [s] The current time, as file modification times (default: ``time.time()``).
        environ: The environment deciding :func:`cleaning_enabled` (default: ``os.environ``).

    Returns:
        What was cleaned (empty when disabled or nothing was dead).
    """
    if not cleaning_enabled(environ):
        return ZombieCleaning()
    now = time.time() if now is None else now
    try:
        names = os.listdir(directory)
    except OSError:
        return ZombieCleaning()
    ports, marked, segments, live = [], [], 0, 0
    for name in sorted(names):
        port_match, segment_match = _PORT_LOCK.match(name), _SEGMENT_LOCK.match(name)
        if not (port_match or segment_match):
            continue
        lock_file = Path(directory) / name
        try:
            fd = _take_if_dead(lock_file, min_age, now)
        except _Live:
            live += 1
            continue
        if fd is None:
            continue
        try:
            segment = Path(directory) / name[:-len("_el")]
            if port_match:
                port = int(port_match.group(2))
                ports.append(port)
                try:
                    segment_fd = os.open(segment, os.O_RDWR | os.O_CLOEXEC)
                except OSError:
                    segment_fd = None
                if segment_fd is not None:
                    try:
                        _remove(segment)  # first: a writer that reopens the port after the mark creates anew
                        if mark_port_dead(segment_fd, port):
                            marked.append(port)
                    finally:
                        os.close(segment_fd)
            else:
                segments += 1
                _remove(segment)
            _remove(lock_file)  # while locked: a participant opening it now fails to lock it, takes another
        finally:
            os.close(fd)
    return ZombieCleaning(tuple(ports), tuple(marked), segments, live)


def clean_zombies_reported(source: str, environ: Optional[Mapping[str, str]] = None,
                           report: bool = True) -> Optional[ZombieCleaning]:
    """:func:`clean_zombies` as housekeeping that never stops its caller (a node starting, a graph
    restarting one): a failure is printed on stderr after ``source`` (e.g. ``"[walk_mpc]"``) and gives None;
    with ``report``, what was cleaned is printed too."""
    try:
        cleaning = clean_zombies(environ=environ)
    except Exception as exc:  # noqa: BLE001 (housekeeping: the caller goes on)
        print(f"{source} Fast DDS shared-memory cleaning failed: {exc!r}", file=sys.stderr, flush=True)
        return None
    if report and cleaning:
        print(f"{source} {cleaning.summary()}", file=sys.stderr, flush=True)
    return cleaning


# Inspection (Linux /proc; the drills and tests read what a process maps, as a port's writers see it).

@dataclasses.dataclass(frozen=True)
class PortView:
    """A Fast DDS 3 port segment as one process maps it.

    Attributes:
        port: Port number.
        inode: The segment's inode (a port reopened under its name gets another one).
        unlinked: The segment's name was removed since (the process maps a segment nobody can open).
        ok: ``is_port_ok``: writers push into it (False: their next push reopens the port by name).
        free_cells: Free cells of its ring buffer (0: every push is dropped).
        listeners: Per listener slot in use: "W" waiting for data, "P" processing a message, "-" neither.
    """

    port: int
    inode: int
    unlinked: bool
    ok: bool
    free_cells: int
    listeners: str


def listener_states(data: bytes) -> str:
    """The listener slots in use of a port segment's bytes: "W", "P" or "-" each (see :class:`PortView`)."""
    states = ""
    for k in range(1024):
        flags = data[_LISTENERS + k * _LISTENER_SIZE]
        if flags & 1:
            states += "W" if flags & 2 else "P" if flags & 4 else "-"
    return states


def mapped_ports(pid: int) -> Iterator[PortView]:
    """The Fast DDS port segments process ``pid`` maps (root or the same user: /proc/<pid>/map_files); one
    it unmaps meanwhile is left out."""
    seen = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        match = _MAPPING.match(line)
        if not match or (match.group(3), match.group(2)) in seen:
            continue
        seen.add((match.group(3), match.group(2)))
        try:
            with open(f"/proc/{pid}/map_files/{match.group(1)}", "rb") as segment:
                data = segment.read(_DOMAIN_NAME + 64)
                buffer_node, = struct.unpack_from("<I", data, _NODE + 16)
                segment.seek(buffer_node + 4)
                free_cells, = struct.unpack("<I", segment.read(4))
        except (OSError, struct.error):
            continue  # unmapped meanwhile
        yield PortView(int(match.group(3)), int(match.group(2)), bool(match.group(4)),
                       bool(data[_NODE + _FLAGS] & 1), free_cells, listener_states(data))


def listening_ports(pid: int) -> List[int]:
    """The shared-memory ports process ``pid`` listens on (the ``_el`` lock files it holds open)."""
    ports = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            match = re.match(r"/dev/shm/fast(?:dds|rtps)_port(\d+)_el$", os.readlink(fd))
        except OSError:
            continue
        if match:
            ports.append(int(match.group(1)))
    return sorted(ports)


def plant_listener_state(port: int, state: str, directory: Path = SHM_DIRECTORY) -> int:
    """Set the listener slots in use of port ``port``'s segment to ``state`` ("P" processing, "-" neither
    waiting nor processing): what a process killed at such a moment leaves (drills and tests; stop the
    listening process first). Returns the number of slots set."""
    masks = {"P": (0b100, 0b010), "-": (0, 0b110)}
    set_bits, clear_bits = masks[state]
    count = 0
    with open(Path(directory) / f"fastdds_port{port}", "r+b") as segment:
        data = segment.read(_DOMAIN_NAME)
        for k in range(1024):
            offset = _LISTENERS + k * _LISTENER_SIZE
            if data[offset] & 1:
                os.pwrite(segment.fileno(), bytes([(data[offset] | set_bits) & ~clear_bits & 0xFF]), offset)
                count += 1
    return count
