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


__all__ = ["CDR_LE", "SensorStateReader", "sensor_input", "sensor_state_cdr"]
