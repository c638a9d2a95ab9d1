"""What a robot measures: one hardware sample of its sensors (HAPTIX ``hxSensor``, seed 004).

:class:`SensorSample` is the core type of a ``SensorState`` message: the simulators produce it, the
controllers of :mod:`walk_mpc.core.control` consume it (never the simulator's ground truth), and the nodes
convert messages to and from it. :func:`check_sample` validates a sample completely (finite values, a
usable base pose) before a controller lets it touch any state.
"""

from __future__ import annotations

import array
import dataclasses
import math
import operator

import numpy as np

from walk_mpc.core.errors import InputError, ShapeError

_FLOAT64 = np.dtype(np.float64)


def _immutable_memory(value) -> np.ndarray | None:
    """The array over an immutable ``bytes`` object that ``value`` is (a view of), when ``value`` is a
    float64 ndarray that nothing can write (read-only, and no other reference can write its memory or make
    it writable again); None otherwise."""
    if type(value) is not np.ndarray:
        return None
    memory = value
    while type(memory.base) is np.ndarray:
        memory = memory.base
    if type(memory.base) is bytes and value.dtype is _FLOAT64 and not value.flags.writeable:
        return memory
    return None


def _immutable(value) -> bool:
    """Whether ``value`` is a float64 ndarray that nothing can write (see :func:`_immutable_memory`)."""
    return _immutable_memory(value) is not None


def _frozen(values) -> np.ndarray:
    """An immutable float64 copy of ``values`` (see :func:`_immutable`): read-only, over its own bytes."""
    if type(values) is np.ndarray and values.dtype is _FLOAT64:
        out = np.frombuffer(values.tobytes(), _FLOAT64)  # C order
        return out if values.ndim == 1 else out.reshape(values.shape)
    if type(values) is array.array and values.typecode == "d":  # a float64[] message field
        return np.frombuffer(values.tobytes(), _FLOAT64)
    values = np.asarray(values, dtype=float)
    out = np.frombuffer(values.tobytes(), _FLOAT64)
    return out if values.ndim == 1 else out.reshape(values.shape)


def immutable_float64(values) -> np.ndarray:
    """``values`` as an array :class:`SensorSample` keeps without a copy: float64, read-only, over bytes.

    For converters that build a sample's arrays themselves: an array made here (or a view of one) is taken
    as it is by the constructor, any other is copied. Arrays already immutable are returned as they are.
    """
    return values if _immutable(values) else _frozen(values)


_NAME_FIELDS = ("joint_names", "motor_names", "contact_names", "imu_names")
# Arrays sized by names: (field, names field, row width, 0 for a vector).
_NAMED_ARRAYS = (("joint_pos", "joint_names", 0), ("joint_vel", "joint_names", 0),
                 ("motor_pos", "motor_names", 0), ("motor_vel", "motor_names", 0),
                 ("motor_torque", "motor_names", 0), ("contact", "contact_names", 0),
                 ("imu_orientation_xyzw", "imu_names", 4), ("imu_angular_vel", "imu_names", 3),
                 ("imu_linear_acc", "imu_names", 3))
_BASE_ARRAYS = (("base_position", (3,)), ("base_orientation_xyzw", (4,)), ("base_linear_velocity", (3,)),
                ("base_angular_velocity", (3,)))
_EMPTY_VECTOR = _frozen(())
_NO_ORIENTATION = _frozen(np.zeros((0, 4)))
_NO_VECTOR3 = _frozen(np.zeros((0, 3)))
_ZERO3 = _frozen(np.zeros(3))
_IDENTITY_XYZW = _frozen([0.0, 0.0, 0.0, 1.0])


@dataclasses.dataclass(frozen=True)
class SensorSample:
    """Sensor data of one hardware step (HAPTIX ``hxSensor``), arrays read-only.

    The constructor makes the names tuples and every array a float64 copy that nothing can write (read-only
    over its own ``bytes``, so neither the caller's array nor anything else can change it afterwards; an
    array that is already such, from :func:`immutable_float64` or another sample, is kept as it is), and
    checks the shapes: ``(len(names),)`` for the named vectors, ``(len(imu_names), 4 or 3)`` for the IMU
    arrays, ``(3,)`` / ``(4,)`` for the base (:class:`ShapeError` naming the field otherwise).

    Attributes:
        time: Simulated time of the sample [s] since reset.
        joint_names: Joint names, ordering ``joint_pos`` and ``joint_vel``.
        joint_pos: Joint positions [rad].
        joint_vel: Joint velocities [rad/s].
        motor_names: Motor names, ordering the motor arrays (motor = joint in our simulators).
        motor_pos: Motor positions [rad].
        motor_vel: Motor velocities [rad/s].
        motor_torque: Torque applied by the embedded controller [N m].
        contact_names: Contact sensor names, ordering ``contact``.
        contact: Contact normal force per sensor [N].
        imu_names: IMU names (frame names), ordering the IMU arrays.
        imu_orientation_xyzw: Orientation of each IMU in the world, shape (n, 4), (x, y, z, w).
        imu_angular_vel: Angular velocity in each IMU frame [rad/s], shape (n, 3).
        imu_linear_acc: Accelerometer output ``a - g`` in each IMU frame [m/s^2], shape (n, 3).
        base_estimate_valid: Whether the base fields hold a pose (ground truth in simulation).
        base_position: Base position in the world [m].
        base_orientation_xyzw: Base orientation in the world (x, y, z, w).
        base_linear_velocity: Base linear velocity, world frame [m/s].
        base_angular_velocity: Base angular velocity, world frame [rad/s].
    """

    time: float
    joint_names: tuple[str, ...]
    joint_pos: np.ndarray
    joint_vel: np.ndarray
    motor_names: tuple[str, ...]
    motor_pos: np.ndarray
    motor_vel: np.ndarray
    motor_torque: np.ndarray
    contact_names: tuple[str, ...] = ()
    # Defaults: immutable arrays, shared by the samples.
    contact: np.ndarray = dataclasses.field(default_factory=lambda: _EMPTY_VECTOR)
    imu_names: tuple[str, ...] = ()
    imu_orientation_xyzw: np.ndarray = dataclasses.field(default_factory=lambda: _NO_ORIENTATION)
    imu_angular_vel: np.ndarray = dataclasses.field(default_factory=lambda: _NO_VECTOR3)
    imu_linear_acc: np.ndarray = dataclasses.field(default_factory=lambda: _NO_VECTOR3)
    base_estimate_valid: bool = False
    base_position: np.ndarray = dataclasses.field(default_factory=lambda: _ZERO3)
    base_orientation_xyzw: np.ndarray = dataclasses.field(default_factory=lambda: _IDENTITY_XYZW)
    base_linear_velocity: np.ndarray = dataclasses.field(default_factory=lambda: _ZERO3)
    base_angular_velocity: np.ndarray = dataclasses.field(default_factory=lambda: _ZERO3)

    def __post_init__(self) -> None:
        # Names as tuples; every array an immutable float64 copy (taken as it is when it already is one: see
        # immutable_float64) of the shape its names (or its meaning, for the base) give it.
        fields = self.__dict__
        for name in _NAME_FIELDS:
            if type(fields[name]) is not tuple:
                object.__setattr__(self, name, tuple(fields[name]))
        # The last immutable memory seen (an array over bytes): its float64 views are immutable too, which
        # spares the full test for a converter's arrays, all views of one such memory.
        memory = None
        for name, names, width in _NAMED_ARRAYS:
            value = fields[name]
            if (memory is None or type(value) is not np.ndarray or value.base is not memory
                    or value.dtype is not _FLOAT64):
                memory = _immutable_memory(value)
                if memory is None:
                    value = _frozen(value)
                    object.__setattr__(self, name, value)
            n = len(fields[names])
            if value.shape != ((n, width) if width else (n,)):
                raise ShapeError(name, value.shape, (n, width) if width else (n,))
        for name, expected in _BASE_ARRAYS:
            value = fields[name]
            if (memory is None or type(value) is not np.ndarray or value.base is not memory
                    or value.dtype is not _FLOAT64):
                memory = _immutable_memory(value)
                if memory is None:
                    value = _frozen(value)
                    object.__setattr__(self, name, value)
            if value.shape != expected:
                raise ShapeError(name, value.shape, expected)

    def zmp_from_contacts(self, corner_positions: dict[str, np.ndarray]) -> np.ndarray | None:
        """Centre of pressure [m] of the contact forces, given each sensor's world position.

        Args:
            corner_positions: World position [m] of each contact sensor by name.

        Returns:
            The force-weighted mean of the sensor positions, or None when no force is measured.
        """
        total = float(np.sum(self.contact))
        if total <= 0.0:
            return None
        points = np.array([corner_positions[name] for name in self.contact_names], dtype=float)
        return (self.contact @ points) / total

    @property
    def base_pose(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(position [m], quaternion (x, y, z, w))`` of the base estimate, or None when not valid."""
        if not self.base_estimate_valid:
            return None
        return self.base_position, self.base_orientation_xyzw


_MEASUREMENTS = operator.attrgetter(*(name for name, _, _ in _NAMED_ARRAYS))
_MEASUREMENTS_AND_BASE = operator.attrgetter(*(name for name, _, _ in _NAMED_ARRAYS),
                                             *(name for name, _ in _BASE_ARRAYS))


def check_sample(sample: SensorSample) -> None:
    """Raise :class:`InputError` unless every value a controller reads is finite and usable.

    Checked: joint, motor, contact and IMU arrays finite; with ``base_estimate_valid``, a finite base pose
    and twist with a quaternion of norm near 1 (0.9 to 1.1). Shapes are checked by the constructor.

    A good sample costs one ``np.isfinite`` over all its values, concatenated, and the norm of its
    quaternion; only a sample that fails it is searched value by value for the value to name.
    """
    if not isinstance(sample, SensorSample):
        raise InputError("sample", type(sample).__name__, "a SensorSample")
    valid = sample.base_estimate_valid
    values = np.concatenate((_MEASUREMENTS_AND_BASE if valid else _MEASUREMENTS)(sample), axis=None)
    if np.isfinite(values).all():
        if not valid:
            return
        quaternion = sample.base_orientation_xyzw
        if 0.9 <= math.sqrt(quaternion.dot(quaternion)) <= 1.1:  # np.linalg.norm of a vector, exactly
            return
    _check_in_detail(sample)  # the value-by-value check: raises, naming the first bad value


def _check_in_detail(sample: SensorSample) -> None:
    """check_sample value by value, naming the first bad value."""
    for name in ("joint_pos", "joint_vel", "motor_pos", "motor_vel", "motor_torque", "contact",
                 "imu_orientation_xyzw", "imu_angular_vel", "imu_linear_acc"):
        values = getattr(sample, name)
        if values.size and not np.all(np.isfinite(values)):
            flat = values.reshape(-1)
            bad = next(i for i, v in enumerate(flat.tolist()) if not math.isfinite(v))
            where = (f"{name}[{sample.joint_names[bad]!r}]" if name.startswith("joint_")
                     and values.ndim == 1 else f"{name}[{bad}]")
            raise InputError(where, float(flat[bad]), "a finite value")
    if sample.base_estimate_valid:
        for name in ("base_position", "base_orientation_xyzw", "base_linear_velocity",
                     "base_angular_velocity"):
            values = getattr(sample, name)
            if not np.all(np.isfinite(values)):
                raise InputError(name, values.tolist(), "finite values")
        norm = float(np.linalg.norm(sample.base_orientation_xyzw))
        if not 0.9 <= norm <= 1.1:
            raise InputError("base_orientation_xyzw", sample.base_orientation_xyzw.tolist(),
                             "a unit quaternion (x, y, z, w)")


__all__ = ["SensorSample", "check_sample", "immutable_float64"]
