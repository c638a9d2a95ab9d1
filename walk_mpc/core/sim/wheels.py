"""Scripted wheeled-biped plant (upkie): rolling, lifted, touchdown, repeated; legs servoed in place.

The wheels are not commanded: each one replays :func:`walk_mpc.core.wheel.plant.simulate_wheel` (its own
seeded generator per wheel and per cycle) over cycles of ``ground`` seconds rolling, ``air`` seconds
lifted (the wheels spin freely) and ``touchdown`` seconds rolling again, giving the torque [N m] and
velocity [rad/s] a wheel contact observer needs. The legs track position commands through
:class:`~walk_mpc.core.sim.backend.JointServo`; the base does not move (no base estimate is published).
Motors are the joints of the URDF, in model order (upkie: left_hip, left_knee, left_wheel, right_hip,
right_knee, right_wheel); wheels are the joints named like a wheel unless listed.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.errors import InputError, ModelError, ParameterError
from walk_mpc.core.params import check_int_range, check_nonnegative, check_positive
from walk_mpc.core.sim.backend import (
    GRAVITY,
    JointServo,
    ScriptedWheelsBackend,
    SensorSample,
    SimState,
    check_dt,
)
from walk_mpc.core.wheel.plant import simulate_wheel


def upkie_urdf() -> str:
    """Path of upkie's URDF from the ``upkie_description`` package.

    Raises:
        ModelError: If the package is not installed.
    """
    try:
        import upkie_description
    except ImportError as exc:
        raise ModelError("upkie_description is not installed (pip install upkie_description)") from exc
    return str(upkie_description.URDF_PATH)


class WheelPlant(ScriptedWheelsBackend):
    """Wheeled biped whose wheels replay a scripted ground / lift / touchdown scenario."""

    @dataclasses.dataclass(frozen=True)
    class Parameters:
        """Wheel plant configuration.

        Attributes:
            urdf: URDF of the robot ('' = upkie from upkie_description).
            hardware_period: Default step [s] (upkie's 1 kHz).
            lag_time_constant: First-order lag of the leg servos [s].
            latency: Delay from a leg command's reception to its effect [s].
            ground: Rolling time at the start of each cycle [s].
            air: Lifted time after it [s] (0 = never lifted).
            touchdown: Rolling time after touchdown, until the cycle repeats [s].
            seed: Seed of the wheel simulations (wheel i, cycle c use ``default_rng([seed, i, c])``).
            wheels: Wheel joints (empty = the joints whose name contains 'wheel').
        """

        urdf: str = ""
        wheels: tuple[str, ...] = ()
        hardware_period: float = 0.001
        lag_time_constant: float = 0.01
        latency: float = 0.0
        ground: float = 1.5
        air: float = 1.0
        touchdown: float = 1.5
        seed: int = 0

        def __post_init__(self) -> None:
            if not isinstance(self.urdf, str):
                raise ParameterError("urdf", self.urdf, "a URDF path or ''")
            check_positive("hardware_period", self.hardware_period)
            for name in ("lag_time_constant", "latency", "ground", "air", "touchdown"):
                check_nonnegative(name, getattr(self, name))
            if self.ground + self.air + self.touchdown < self.hardware_period:
                raise ParameterError("touchdown", self.touchdown,
                                     "ground + air + touchdown >= hardware_period [s]")
            check_int_range("seed", self.seed, 0)
            object.__setattr__(self, "wheels", tuple(self.wheels))

    def __init__(self, params: WheelPlant.Parameters | None = None) -> None:
        """Load the robot and reset.

        Raises:
            ModelError: The URDF cannot be loaded or has no wheel joint.
            JointNotFound: A configured wheel is not a joint of the model.
        """
        self.params = params if params is not None else WheelPlant.Parameters()
        p = self.params
        self.robot = RobotModel(RobotModel.Parameters(robot=p.urdf or upkie_urdf()))
        model = self.robot.model
        for name in p.wheels:
            self.robot.joint_index_q(name)  # JointNotFound lists the joints
        self.wheels = p.wheels or tuple(n for n in self.robot.joint_names if "wheel" in n)
        if not self.wheels:
            raise ModelError(f"'{self.robot.name}' has no joint named like a wheel; set 'wheels'")
        self.legs = tuple(n for n in self.robot.joint_names if n not in self.wheels)
        lower = np.array([model.lowerPositionLimit[self.robot.joint_index_q(n)] for n in self.legs])
        upper = np.array([model.upperPositionLimit[self.robot.joint_index_q(n)] for n in self.legs])
        self._servo = JointServo(self.legs, p.lag_time_constant, p.latency, lower, upper)
        self._cycle_steps = max(1, round((p.ground + p.air + p.touchdown) / p.hardware_period))
        self.reset()

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Every joint (legs and wheels), in model order."""
        return self.robot.joint_names

    @property
    def hardware_period(self) -> float:
        """Default step [s] (the scenario's sampling period)."""
        return self.params.hardware_period

    @property
    def in_air(self) -> bool:
        """Whether the robot is lifted at the current step."""
        return bool(self._in_air[self._k % self._cycle_steps])

    def reset(self, q0: np.ndarray | None = None) -> None:
        """Back to time 0, legs at ``q0``'s positions (the reference posture if None), wheels at 0."""
        q0 = self.robot.reference_configuration() if q0 is None else self.robot.check_configuration(q0, "q0")
        positions = self.robot.joint_positions(q0)
        self._servo.reset(np.array([positions[n] for n in self.legs]), 0.0)
        self._time = 0.0
        self._k = 0
        self._wheel_position = np.zeros(len(self.wheels))
        self._load_cycle(0)
        self._publish(np.zeros(len(self.wheels)), np.zeros(len(self.wheels)))

    def _load_cycle(self, cycle: int) -> None:
        p = self.params
        duration = self._cycle_steps * p.hardware_period
        air = ((p.ground, p.ground + p.air),) if p.air > 0.0 else ()
        torque, velocity = [], []
        for i in range(len(self.wheels)):
            tau, vel, in_air = simulate_wheel(np.random.default_rng([p.seed, i, cycle]), duration=duration,
                                              dt=p.hardware_period, air_intervals=air)
            torque.append(tau)
            velocity.append(vel)
        self._torque, self._velocity, self._in_air = np.array(torque), np.array(velocity), in_air
        self._cycle = cycle

    def step(self, dt: float | None = None) -> SimState:
        """Advance one scenario sample (``dt`` must be the hardware period, the scenario's sampling).

        Raises:
            InputError: If ``dt`` differs from the hardware period.
        """
        dt = check_dt(dt, self.params.hardware_period)
        if not math.isclose(dt, self.params.hardware_period, rel_tol=1e-9):
            raise InputError("dt", dt, f"the hardware period {self.params.hardware_period!r} s")
        self._k += 1
        cycle, k = divmod(self._k, self._cycle_steps)
        if cycle != self._cycle:
            self._load_cycle(cycle)
        self._time = self._k * dt
        self._servo.step(self._time)
        velocity = self._velocity[:, k]
        self._wheel_position = self._wheel_position + velocity * dt
        self._publish(velocity, self._torque[:, k])
        return self._state

    def _publish(self, wheel_velocity: np.ndarray, wheel_torque: np.ndarray) -> None:
        names = self.robot.joint_names
        pos, vel, torque = {}, {}, {}
        for i, name in enumerate(self.legs):
            pos[name], vel[name], torque[name] = self._servo.positions[i], self._servo.velocities[i], 0.0
        for i, name in enumerate(self.wheels):
            pos[name] = math.remainder(self._wheel_position[i], 2.0 * math.pi)
            vel[name], torque[name] = wheel_velocity[i], wheel_torque[i]
        joint_pos = np.array([pos[n] for n in names])
        joint_vel = np.array([vel[n] for n in names])
        self._sample = SensorSample(
            time=self._time, joint_names=names, joint_pos=joint_pos, joint_vel=joint_vel,
            motor_names=names, motor_pos=joint_pos, motor_vel=joint_vel,
            motor_torque=np.array([torque[n] for n in names]),
            imu_names=(self.robot.base_frame,), imu_orientation_xyzw=np.array([[0.0, 0.0, 0.0, 1.0]]),
            imu_angular_vel=np.zeros((1, 3)), imu_linear_acc=np.array([[0.0, 0.0, GRAVITY]]),
        )
        q = self.robot.configuration_from_joints(pos)
        v = np.zeros(self.robot.nv)
        for name in names:
            v[self.robot.joint_index_v(name)] = vel[name]
        in_air = bool(self._in_air[self._k % self._cycle_steps])
        self._state = SimState(
            time=self._time, step_count=self._k, q=q, v=v, com=self.robot.com(q), zmp=np.zeros(3),
            cop=np.zeros(3), contact_bodies=self.wheels, in_contact=(not in_air,) * len(self.wheels),
        )


__all__ = ["WheelPlant", "upkie_urdf"]
