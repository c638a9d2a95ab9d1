"""SensorState in its serialized form: the sim writes it, the control nodes read it, without message objects.

A ``SensorState`` of a 32-joint robot is about 200 Python objects once rclpy has converted it (names, the
Vector3 and Quaternion of the IMUs, the pose and twist), built for every 10 ms sample in the sim and again in
each node that reads it. Here the message goes over the wire as the same CDR bytes, written and read with
numpy (Talos, one core of the reference machine: 10 us to write against 43 us to build and serialize the
message, 13 us to read against 52 us to deserialize and convert it):

* :func:`sensor_state_cdr` serializes a :class:`~walk_mpc.core.sensors.SensorSample` as the CDR of the
  ``SensorState`` that :func:`walk_mpc.nodes.sim.sensor_state_msg` builds (what rclpy's ``serialize_message``
  makes of it, up to the padding bytes, which carry no value); a publisher of ``SensorState`` sends it as it
  is (``Publisher.publish`` takes serialized bytes);
* :class:`SensorStateReader` reads those bytes (a ``raw=True`` subscription's messages, from any publisher:
  the bytes on the wire are the same) into the stamp and the sample that
  :func:`~walk_mpc.nodes.conversions.sensor_sample_from_msg` gives for the message, with the same checks.
  The names, the same from sample to sample, are decoded once and reused while their bytes do not change.

The control loop's other messages go the same way: the mpc_planner writes its ``ComReference`` with
:func:`com_reference_cdr` and the ik reads it with :func:`read_com_reference`; the sim reads the ik's
``JointTrajectory`` with :func:`read_joint_trajectory`; the walk_behavior reads the ``TickTiming`` of the
planner and the ik with :func:`read_tick_timing`.

The encoding is XCDR1 little endian (``CDR_LE``, what rmw_fastrtps and rmw_cyclonedds write for ROS 2
messages): the payload follows a 4-byte encapsulation header; each primitive is aligned on its size from the
payload's start; a sequence is a uint32 count, then its elements (nothing, not even the alignment of its
elements, when it is empty); a string is a uint32 length counting its NUL, the bytes and the NUL. Bytes in
another encoding are read through rclpy's ``deserialize_message``.
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Tuple

import numpy as np

from walk_mpc.core.errors import InputError
from walk_mpc.core.sensors import SensorSample, immutable_float64
from walk_mpc.msg import SensorState

#: Encapsulation header of little-endian plain CDR (XCDR1).
CDR_LE = b"\x00\x01\x00\x00"

_U32 = struct.Struct("<I")
_STAMP = struct.Struct("<iI")
_PAD = (b"", b"\0", b"\0\0", b"\0\0\0", b"\0\0\0\0", b"\0\0\0\0\0", b"\0\0\0\0\0\0", b"\0\0\0\0\0\0\0")


# ------------------------------------------------------------------------------------------------ writing
class _Writer:
    """Serialized bytes as a list of parts; ``pos`` counts from the start of the payload."""

    __slots__ = ("parts", "pos")

    def __init__(self) -> None:
        self.parts: List[bytes] = [CDR_LE]
        self.pos = 0

    def align(self, size: int) -> None:
        pad = -self.pos % size
        if pad:
            self.parts.append(_PAD[pad])
            self.pos += pad

    def raw(self, data: bytes) -> None:
        self.parts.append(data)
        self.pos += len(data)

    def doubles(self, values: np.ndarray) -> None:
        """A float64 sequence."""
        self.align(4)
        self.raw(_U32.pack(values.size))
        if values.size:
            self.align(8)
            self.raw(values.tobytes())

    def rows(self, values: np.ndarray) -> None:
        """A sequence of structures of float64 members (Vector3, Quaternion): one row per element."""
        self.align(4)
        self.raw(_U32.pack(len(values)))
        if len(values):
            self.align(8)
            self.raw(values.tobytes())


_NAMES_CACHE: Dict[tuple, bytes] = {}


def _names_bytes(names: Tuple[str, ...]) -> bytes:
    """A string sequence from a 4-aligned position (its bytes do not depend on where that is)."""
    data = _NAMES_CACHE.get(names)
    if data is None:
        parts, pos = [_U32.pack(len(names))], 4
        for name in names:
            pad = -pos % 4
            text = name.encode()
            parts += (_PAD[pad], _U32.pack(len(text) + 1), text, b"\0")
            pos += pad + 4 + len(text) + 1
        data = b"".join(parts)
        if len(_NAMES_CACHE) >= 64:
            _NAMES_CACHE.clear()
        _NAMES_CACHE[names] = data
    return data


def _f64(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype="<f8")


def sensor_state_cdr(sample: SensorSample, stamp_ns: int, frame_id: str = "world") -> bytes:
    """The serialized ``SensorState`` (CDR_LE) of a sensor sample stamped ``stamp_ns`` [ns]: the message
    :func:`walk_mpc.nodes.sim.sensor_state_msg` builds, as ``serialize_message`` writes it."""
    w = _Writer()
    w.raw(_STAMP.pack(*divmod(int(stamp_ns), 1_000_000_000)))
    w.raw(_names_bytes((frame_id,))[4:])  # a string: as one element of a sequence
    for names, arrays in ((sample.joint_names, (sample.joint_pos, sample.joint_vel)),
                          (sample.motor_names, (sample.motor_pos, sample.motor_vel, sample.motor_torque)),
                          (sample.contact_names, (sample.contact,))):
        w.align(4)
        w.raw(_names_bytes(tuple(names)))
        for values in arrays:
            w.doubles(_f64(values))
    w.align(4)
    w.raw(_names_bytes(tuple(sample.imu_names)))
    w.rows(_f64(sample.imu_linear_acc).reshape(-1, 3))
    w.rows(_f64(sample.imu_angular_vel).reshape(-1, 3))
    w.rows(_f64(sample.imu_orientation_xyzw).reshape(-1, 4))
    w.raw(b"\x01" if sample.base_estimate_valid else b"\x00")
    w.align(8)
    w.raw(np.concatenate([_f64(sample.base_position), _f64(sample.base_orientation_xyzw),
                          _f64(sample.base_linear_velocity), _f64(sample.base_angular_velocity)]).tobytes())
    return b"".join(w.parts)


# ------------------------------------------------------------------------------------------------ reading
class _Malformed(Exception):
    """The bytes do not parse as a CDR_LE SensorState."""


class SensorStateReader:
    """Reads serialized ``SensorState`` messages into ``(stamp_ns, SensorSample)`` (see the module docstring).

    One reader per subscription: it keeps the names of the previous message to reuse them.
    """

    def __init__(self) -> None:
        # Per string sequence of the message: (payload position, its bytes, the decoded names).
        self._names: List[Optional[Tuple[int, bytes, Tuple[str, ...]]]] = [None] * 5

    def read(self, data: bytes) -> Tuple[int, SensorSample]:
        """The stamp [ns] and the sensor sample of a serialized SensorState.

        Raises:
            ShapeError: An array whose length does not match its names (as ``sensor_sample_from_msg``).
            InputError: The bytes are not a SensorState.
        """
        if data[:2] == CDR_LE[:2]:
            try:
                return self._read_cdr_le(data)
            except _Malformed:
                pass
        from rclpy.serialization import deserialize_message

        from walk_mpc.nodes.conversions import sensor_sample_from_msg, stamp_ns

        try:
            msg = deserialize_message(data, SensorState)
        except Exception as exc:  # noqa: BLE001 (rclpy raises several kinds)
            raise InputError("SensorState", f"{len(data)} bytes that do not deserialize ({exc})",
                             "a serialized SensorState") from None
        return stamp_ns(msg.header.stamp), sensor_sample_from_msg(msg)

    def _strings(self, data: bytes, pos: int, slot: int) -> Tuple[Tuple[str, ...], int]:
        """The string sequence at (4-aligned) absolute position ``pos``, and the position after it."""
        known = self._names[slot]
        if known is not None and known[0] == pos and data.startswith(known[1], pos):
            return known[2], pos + len(known[1])
        start = pos
        (count,) = _U32.unpack_from(data, pos)
        pos += 4
        if count > len(data):
            raise _Malformed
        names = []
        for _ in range(count):
            pos += -(pos - 4) % 4
            (size,) = _U32.unpack_from(data, pos)
            end = pos + 4 + size
            if size == 0 or end > len(data) or data[end - 1] != 0:
                raise _Malformed
            names.append(data[pos + 4:end - 1].decode())
            pos = end
        names = tuple(names)
        self._names[slot] = (start, data[start:pos], names)
        return names, pos

    def _read_cdr_le(self, data: bytes) -> Tuple[int, SensorSample]:
        try:
            return self._parse(data)
        except (struct.error, UnicodeDecodeError, ValueError, IndexError):
            raise _Malformed from None

    def _parse(self, data: bytes) -> Tuple[int, SensorSample]:
        size = len(data)
        sec, nanosec = _STAMP.unpack_from(data, 4)
        (length,) = _U32.unpack_from(data, 12)
        pos = 16 + length  # after frame_id
        chunks: List[bytes] = []  # the float64 values, in the order of the sample's arrays
        counts: List[int] = []
        names_of: List[Tuple[str, ...]] = []
        for slot, arrays in enumerate((2, 3, 1)):  # joint, motor, contact: names then float64 sequences
            pos += -(pos - 4) % 4
            names, pos = self._strings(data, pos, slot)
            names_of.append(names)
            for _ in range(arrays):
                pos += -(pos - 4) % 4
                (count,) = _U32.unpack_from(data, pos)
                pos += 4
                if count:
                    pos += -(pos - 4) % 8
                end = pos + 8 * count
                if end > size:
                    raise _Malformed
                chunks.append(data[pos:end])
                counts.append(count)
                pos = end
        pos += -(pos - 4) % 4
        imu_names, pos = self._strings(data, pos, 3)
        rows = []
        for width in (3, 3, 4):  # linear accelerations, angular velocities, orientations (x, y, z, w)
            pos += -(pos - 4) % 4
            (count,) = _U32.unpack_from(data, pos)
            pos += 4
            if count:
                pos += -(pos - 4) % 8
            end = pos + 8 * width * count
            if end > size:
                raise _Malformed
            rows.append((data[pos:end], count))
            pos = end
        valid = data[pos]
        pos += 1
        pos += -(pos - 4) % 8
        if pos + 104 > size or valid > 1:
            raise _Malformed
        (acc, n_acc), (rates, n_rates), (orientations, n_orientations) = rows
        joint_names, motor_names, contact_names = names_of
        if not counts[1]:  # no joint velocities: zeros
            chunks[1], counts[1] = bytes(8 * len(joint_names)), len(joint_names)
        values = immutable_float64(np.frombuffer(b"".join(
            [*chunks, data[pos:pos + 104], orientations, rates, acc]), dtype=np.float64))
        views = []
        start = 0
        for count in counts:
            views.append(values[start:start + count])
            start += count
        joint_pos, joint_vel, motor_pos, motor_vel, motor_torque, contact = views
        imu = start + 13
        rate = imu + 4 * n_orientations
        accel = rate + 3 * n_rates
        return sec * 1_000_000_000 + nanosec, SensorSample(
            time=(sec * 1_000_000_000 + nanosec) / 1e9,
            joint_names=joint_names, joint_pos=joint_pos, joint_vel=joint_vel,
            motor_names=motor_names, motor_pos=motor_pos, motor_vel=motor_vel, motor_torque=motor_torque,
            contact_names=contact_names, contact=contact,
            imu_names=imu_names,
            imu_orientation_xyzw=values[imu:rate].reshape(n_orientations, 4),
            imu_angular_vel=values[rate:accel].reshape(n_rates, 3),
            imu_linear_acc=values[accel:accel + 3 * n_acc].reshape(n_acc, 3),
            base_estimate_valid=bool(valid),
            base_position=values[start:start + 3], base_orientation_xyzw=values[start + 3:start + 7],
            base_linear_velocity=values[start + 7:start + 10], base_angular_velocity=values[start + 10:imu],
        )


# ------------------------------------------------------------------------------- the other control messages
class _Cursor:
    """Reads CDR_LE bytes from the payload's start (raises ``struct.error``/``_Malformed`` past the end)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        if data[:2] != CDR_LE[:2]:
            raise _Malformed
        self.data, self.pos = data, 4

    def u32(self) -> int:
        self.pos += -(self.pos - 4) % 4
        (value,) = _U32.unpack_from(self.data, self.pos)
        self.pos += 4
        return value

    def stamp(self) -> Tuple[int, int]:
        sec, nanosec = _STAMP.unpack_from(self.data, self.pos)  # at 4 (the header) or 4-aligned
        self.pos += 8
        return sec, nanosec

    def string(self) -> str:
        size = self.u32()
        end = self.pos + size
        if size == 0 or end > len(self.data) or self.data[end - 1] != 0:
            raise _Malformed
        text = self.data[self.pos:end - 1].decode()
        self.pos = end
        return text

    def doubles(self, width: int = 1) -> np.ndarray:
        """A sequence of float64 (``width`` 1) or of structures of ``width`` float64 members: (n, width)."""
        count = self.u32()
        if count:
            self.pos += -(self.pos - 4) % 8
        end = self.pos + 8 * width * count
        if count > len(self.data) or end > len(self.data):
            raise _Malformed
        values = np.frombuffer(self.data[self.pos:end], dtype="<f8")
        self.pos = end
        return values if width == 1 else values.reshape(count, width)


def _read(data: bytes, parse):
    """``parse(_Cursor(data))``, or ``None`` when the bytes are not plain CDR_LE of the expected layout (then
    the caller deserializes them with rclpy)."""
    try:
        return parse(_Cursor(data))
    except (_Malformed, struct.error, UnicodeDecodeError, ValueError, IndexError):
        return None


def deserialized(data: bytes, msg_type):
    """rclpy's message of serialized bytes.

    Raises:
        InputError: The bytes do not deserialize as ``msg_type``.
    """
    from rclpy.serialization import deserialize_message

    try:
        return deserialize_message(data, msg_type)
    except Exception as exc:  # noqa: BLE001 (rclpy raises several kinds)
        raise InputError(msg_type.__name__, f"{len(data)} bytes that do not deserialize ({exc})",
                         f"a serialized {msg_type.__name__}") from None


def com_reference_cdr(stamp_ns: int, frame_id: str, plan_id: int, times, com_position, com_velocity,
                      zmp, sole_tilt=()) -> bytes:
    """The serialized ``ComReference`` (CDR_LE) of a reference stamped ``stamp_ns`` [ns] (>= 0): the message
    ``ComReference(plan_id, time_from_stamp=times, com_position=..., com_velocity=..., zmp=...,
    sole_tilt=...)`` as ``serialize_message`` writes it (the arrays of positions and velocities are (n, 3);
    ``sole_tilt`` flattened, empty on level ground)."""
    w = _Writer()
    w.raw(_STAMP.pack(*divmod(int(stamp_ns), 1_000_000_000)))
    w.raw(_names_bytes((frame_id,))[4:])
    w.align(4)
    w.raw(_U32.pack(int(plan_id)))
    w.doubles(_f64(times))
    for rows in (com_position, com_velocity, zmp):
        w.rows(_f64(rows).reshape(-1, 3))
    w.doubles(_f64(() if sole_tilt is None else sole_tilt).reshape(-1))
    return b"".join(w.parts)


class ComReferenceFields:
    """The fields of a serialized ``ComReference`` the ik reads: ``stamp_ns``, ``plan_id``, ``times`` (list),
    ``com_position``, ``com_velocity``, ``zmp`` ((n, 3) float64 arrays), ``sole_tilt`` (flat float64
    array)."""

    __slots__ = ("stamp_ns", "plan_id", "times", "com_position", "com_velocity", "zmp", "sole_tilt")

    def __init__(self, cursor: _Cursor) -> None:
        sec, nanosec = cursor.stamp()
        cursor.string()  # frame_id
        self.stamp_ns = sec * 1_000_000_000 + nanosec
        self.plan_id = cursor.u32()
        self.times = cursor.doubles().tolist()
        self.com_position, self.com_velocity, self.zmp = (cursor.doubles(3) for _ in range(3))
        self.sole_tilt = cursor.doubles()


def read_com_reference(data: bytes) -> Optional[ComReferenceFields]:
    """The fields of a serialized ComReference, or None when the bytes must go through rclpy."""
    return _read(data, ComReferenceFields)


class TrajectoryFields:
    """The fields of a serialized ``trajectory_msgs/JointTrajectory`` the sim reads: ``sec``, ``nanosec``,
    ``frame_id``, ``joint_names`` (tuple), ``points``: (positions, velocities, time_from_start sec,
    nanosec) each, the arrays as lists of floats."""

    __slots__ = ("sec", "nanosec", "frame_id", "joint_names", "points")

    def __init__(self, cursor: _Cursor) -> None:
        self.sec, self.nanosec = cursor.stamp()
        self.frame_id = cursor.string()
        count = cursor.u32()
        if count > len(cursor.data):
            raise _Malformed
        self.joint_names = tuple(cursor.string() for _ in range(count))
        points = cursor.u32()
        if points > len(cursor.data):
            raise _Malformed
        self.points = []
        for _ in range(points):
            positions, velocities = cursor.doubles().tolist(), cursor.doubles().tolist()
            cursor.doubles(), cursor.doubles()  # accelerations, effort
            cursor.pos += -(cursor.pos - 4) % 4
            sec, nanosec = cursor.stamp()
            self.points.append((positions, velocities, sec, nanosec))


def read_joint_trajectory(data: bytes) -> Optional[TrajectoryFields]:
    """The fields of a serialized JointTrajectory, or None when the bytes must go through rclpy."""
    return _read(data, TrajectoryFields)


def _tick_timing(cursor: _Cursor) -> Tuple[int, int, str]:
    sec, nanosec = cursor.stamp()
    cursor.string()  # frame_id
    cursor.string()  # component
    cursor.pos += -(cursor.pos - 4) % 8
    cursor.pos += 16  # solve_time, tick_time
    status = cursor.u32()
    cursor.string()  # trigger
    reason = cursor.string()
    return sec * 1_000_000_000 + nanosec, status, reason


def read_tick_timing(data: bytes) -> Optional[Tuple[int, int, str]]:
    """The stamp [ns], status and reason of a serialized ``TickTiming``, or None when the bytes must go
    through rclpy."""
    return _read(data, _tick_timing)


def tick_timing_input(msg) -> Tuple[int, int, str]:
    """The stamp [ns], status and reason of a ``TickTiming`` subscription's message: serialized bytes (a
    ``raw`` subscription, read here, or through rclpy when they must be) or a message object.

    Raises:
        InputError: Bytes that are no TickTiming.
    """
    if isinstance(msg, bytes):
        read = read_tick_timing(msg)
        if read is not None:
            return read
        from walk_mpc.msg import TickTiming

        msg = deserialized(msg, TickTiming)
    from walk_mpc.nodes.conversions import stamp_ns

    return stamp_ns(msg.header.stamp), int(msg.status), str(msg.reason)


def sensor_input(msg, reader: SensorStateReader) -> Tuple[int, SensorSample]:
    """The stamp [ns] and sample of a ``SensorState`` subscription's message: serialized bytes (a ``raw``
    subscription) read by ``reader``, or a message object (tests, in-process callers) converted as before.

    Raises:
        WalkMpcError: A malformed sample (ShapeError) or bytes that are no SensorState (InputError).
    """
    if isinstance(msg, bytes):
        return reader.read(msg)
    from walk_mpc.nodes.conversions import sensor_sample_from_msg, stamp_ns

    return stamp_ns(msg.header.stamp), sensor_sample_from_msg(msg)


__all__ = ["CDR_LE", "ComReferenceFields", "SensorStateReader", "TrajectoryFields", "com_reference_cdr",
           "deserialized", "read_com_reference", "read_joint_trajectory", "read_tick_timing", "sensor_input",
           "sensor_state_cdr", "tick_timing_input"]
