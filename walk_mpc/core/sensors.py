"""What a robot measures: one hardware sample of its sensors (HAPTIX ``hxSensor``, seed 004).

:class:`SensorSample` is the core type of a ``SensorState`` message: the simulators produce it, the
controllers of :mod:`walk_mpc.core.control` consume it (never the simulator's ground truth), and the nodes
convert messages to and from it. :func:`check_sample` validates a sample completely (finite values, a
usable base pose) before a controller lets it touch any state.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from walk_mpc.core.errors import InputError, ShapeError


def _frozen(array, dtype=float) -> np.ndarray:
    out = np.array(array, dtype=dtype)
    out.setflags(write=False)
    return out


@dataclasses.dataclass(frozen=True)
class SensorSample:
    """Sensor data of one hardware step (HAPTIX ``hxSensor``), arrays read-only.

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
    contact: np.ndarray = dataclasses.field(default_factory=lambda: _frozen(()))
    imu_names: tuple[str, ...] = ()
    imu_orientation_xyzw: np.ndarray = dataclasses.field(default_factory=lambda: _frozen(np.zeros((0, 4))))
    imu_angular_vel: np.ndarray = dataclasses.field(default_factory=lambda: _frozen(np.zeros((0, 3))))
    imu_linear_acc: np.ndarray = dataclasses.field(default_factory=lambda: _frozen(np.zeros((0, 3))))
    base_estimate_valid: bool = False
    base_position: np.ndarray = dataclasses.field(default_factory=lambda: _frozen(np.zeros(3)))
    base_orientation_xyzw: np.ndarray = dataclasses.field(default_factory=lambda: _frozen([0, 0, 0, 1]))
    base_linear_velocity: np.ndarray = dataclasses.field(default_factory=lambda: _frozen(np.zeros(3)))
    base_angular_velocity: np.ndarray = dataclasses.field(default_factory=lambda: _frozen(np.zeros(3)))

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, np.ndarray) or field.name in ("joint_pos", "joint_vel", "motor_pos",
                                                                 "motor_vel", "motor_torque", "contact"):
                object.__setattr__(self, field.name, _frozen(value))
            elif field.name.endswith("_names"):
                object.__setattr__(self, field.name, tuple(value))
        pairs = (("joint_names", "joint_pos"), ("joint_names", "joint_vel"), ("motor_names", "motor_pos"),
                 ("motor_names", "motor_vel"), ("motor_names", "motor_torque"), ("contact_names", "contact"))
        for names, values in pairs:
            n = len(getattr(self, names))
            if getattr(self, values).shape != (n,):
                raise ShapeError(values, getattr(self, values).shape, (n,))
        n_imu = len(self.imu_names)
        for name, width in (("imu_orientation_xyzw", 4), ("imu_angular_vel", 3), ("imu_linear_acc", 3)):
            if getattr(self, name).shape != (n_imu, width):
                raise ShapeError(name, getattr(self, name).shape, (n_imu, width))

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


def check_sample(sample: SensorSample) -> None:
    """Raise :class:`InputError` unless every value a controller reads is finite and usable.

    Checked: joint, motor, contact and IMU arrays finite; with ``base_estimate_valid``, a finite base pose
    and twist with a quaternion of norm near 1 (0.9 to 1.1). Shapes are checked by the constructor.
    """
    if not isinstance(sample, SensorSample):
        raise InputError("sample", type(sample).__name__, "a SensorSample")
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


__all__ = ["SensorSample", "check_sample"]
