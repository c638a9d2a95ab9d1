"""Simulator backend interface shared by every simulated robot, with its sample types and joint servo.

Every simulator (the kinematic plant, the wheel plant, MuJoCo) implements :class:`SimBackend`, so the
``sim`` node (and tests, benchmarks, demos) drive them the same way, as upkie's mock / simulator / real
backends share one interface:

* ``reset(q0)``: back to an initial state, time 0;
* ``set_trajectory(command)`` or ``set_command(names, positions, ...)``: position commands, with
  ros2_control ``JointTrajectory`` semantics (see :class:`JointServo`);
* ``step(dt)``: advance the simulated time by one hardware period, return a :class:`SimState`;
* ``sensor_sample()``: the HAPTIX ``hxSensor`` fields of the last step, as a :class:`SensorSample`.

Times are simulated seconds since the last reset; command stamps use the same clock.

Sign conventions: gravity is ``(0, 0, -GRAVITY)`` in the world frame; the accelerometer reads
``a - g`` in the IMU frame (HAPTIX), so an IMU at rest and level reads ``(0, 0, +GRAVITY)``.
Quaternions are ordered (x, y, z, w) as in pinocchio and geometry_msgs (HAPTIX's arrays are w first).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from walk_mpc.core.errors import InputError, JointNotFound, ShapeError
from walk_mpc.core.params import check_nonnegative
from walk_mpc.core.sensors import SensorSample, _frozen

#: Standard gravity [m/s^2] (pinocchio's model gravity is (0, 0, -GRAVITY)).
GRAVITY = 9.81


@dataclasses.dataclass(frozen=True)
class SimState:
    """Ground truth of a simulator after a step (arrays read-only; empty when a backend has no such data).

    Attributes:
        time: Simulated time [s] since reset.
        step_count: Hardware steps since reset.
        q: Configuration (pinocchio order: base position, base quaternion xyzw, joints).
        v: Generalised velocity (base twist in the base frame, joint velocities).
        com: Centre of mass in the world [m].
        zmp: Dynamic ZMP on the ground from the CoM motion [m] (before clipping).
        cop: Centre of pressure of the distributed contact forces [m] (the ZMP clipped into the support).
        contact_bodies: Names of the bodies that can touch the ground (feet, wheels).
        in_contact: Whether each body of ``contact_bodies`` touches the ground.
        zmp_clip_count: Steps since reset at which the ZMP left the support area (the robot would tip).
        fallen: Whether the robot fell (latched until reset).
    """

    time: float
    step_count: int
    q: np.ndarray
    v: np.ndarray
    com: np.ndarray
    zmp: np.ndarray
    cop: np.ndarray
    contact_bodies: tuple[str, ...]
    in_contact: tuple[bool, ...]
    zmp_clip_count: int = 0
    fallen: bool = False

    def __post_init__(self) -> None:
        for name in ("q", "v", "com", "zmp", "cop"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "in_contact", tuple(bool(c) for c in self.in_contact))


@dataclasses.dataclass(frozen=True)
class JointTrajectoryCommand:
    """Position command for named joints, with ros2_control ``JointTrajectory`` semantics.

    Attributes:
        joint_names: Commanded joints (a subset of the simulator's joints; the others keep their setpoint).
        times_from_stamp: Time of each point after ``stamp`` [s], strictly increasing, >= 0.
        positions: Positions of each point [rad], shape (points, joints).
        stamp: Start time [s] of the trajectory on the simulator's clock; None = when it is received.
        velocities: Velocities of each point [rad/s] or None; informative only (the plants track positions).
    """

    joint_names: tuple[str, ...]
    times_from_stamp: tuple[float, ...]
    positions: np.ndarray
    stamp: float | None = None
    velocities: np.ndarray | None = None

    def __post_init__(self) -> None:
        names = tuple(self.joint_names)
        object.__setattr__(self, "joint_names", names)
        if not names or len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
            raise InputError("joint_names", names, "distinct joint names, at least one")
        try:
            times = tuple(float(t) for t in self.times_from_stamp)
        except (TypeError, ValueError):
            raise InputError("times_from_stamp", self.times_from_stamp, "numbers") from None
        object.__setattr__(self, "times_from_stamp", times)
        if not times or not all(math.isfinite(t) and t >= 0.0 for t in times) or any(
                b <= a for a, b in zip(times, times[1:])):
            raise InputError("times_from_stamp", times, "at least one time >= 0 [s], strictly increasing")
        for name in ("positions", "velocities"):
            value = getattr(self, name)
            if value is None or (name == "velocities" and np.size(value) == 0):
                object.__setattr__(self, name, None)
                continue
            try:
                array = np.array(value, dtype=float).reshape(len(times), -1) if np.size(value) else None
            except (TypeError, ValueError):
                raise InputError(name, value, f"{len(times)} x {len(names)} numbers") from None
            if array is None or array.shape != (len(times), len(names)):
                raise ShapeError(name, np.shape(value), (len(times), len(names)))
            if not np.all(np.isfinite(array)):
                raise InputError(name, array, "finite values")
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        if self.positions is None:
            raise InputError("positions", None, f"{len(times)} x {len(names)} numbers")
        if self.stamp is not None:
            if isinstance(self.stamp, bool) or not math.isfinite(float(self.stamp)):
                raise InputError("stamp", self.stamp, "a finite time [s] or None")
            object.__setattr__(self, "stamp", float(self.stamp))


def check_command_stamp(command: JointTrajectoryCommand, now: float, max_age: float, max_lead: float) -> None:
    """Raise :class:`InputError` unless ``command``'s stamp is plausible at simulated time ``now`` [s].

    A command is for the near present: stamped at most ``max_age`` [s] before ``now`` (older: its points
    are all past and the servo would jump to the last one) and at most ``max_lead`` [s] after it (a stamp
    far ahead would stretch the interpolation over hours). A command without stamp (None) is for now.
    """
    if command.stamp is None:
        return
    if not now - max_age <= command.stamp <= now + max_lead:
        raise InputError("stamp", command.stamp, f"a time within [-{max_age}, +{max_lead}] s of the "
                         f"simulated time {now:.3f} s (a command for the present)")


class JointServo:
    """Position servos of a set of joints: trajectory setpoints, a pure latency, then a first-order lag.

    Setpoint (ros2_control ``JointTrajectoryController`` semantics): when a command is received at time
    ``t_r``, each of its joints interpolates linearly in time from its current setpoint at ``t_r`` to the
    points at ``stamp + times_from_stamp``, then holds the last point; points already past at ``t_r``
    are skipped (if all are past, the joint jumps to the last one). Joints left out of a command keep
    their current trajectory. The servo tracks the setpoint delayed by ``latency``: the motor target at
    time ``t`` is the setpoint at ``t - latency``, of the commands received up to ``t - latency``.
    Joint positions then follow the target through ``x' = (target - x) / lag_time_constant``
    (``lag_time_constant = 0`` tracks it exactly) and are clipped to the joint limits; velocities are
    finite differences over the step. The lag is integrated exactly (the delayed setpoint is piecewise
    linear), so the positions do not depend on the step size.

    Args:
        joint_names: Servoed joints.
        lag_time_constant: Time constant of the first-order lag [s] (0 = none).
        latency: Delay between a command's reception and its effect [s].
        lower: Lower position limits [rad] (None = unbounded).
        upper: Upper position limits [rad] (None = unbounded).
    """

    def __init__(self, joint_names: Sequence[str], lag_time_constant: float, latency: float,
                 lower: np.ndarray | None = None, upper: np.ndarray | None = None) -> None:
        check_nonnegative("lag_time_constant", lag_time_constant)
        check_nonnegative("latency", latency)
        self.joint_names = tuple(joint_names)
        self._index = {name: i for i, name in enumerate(self.joint_names)}
        n = len(self.joint_names)
        self.lag_time_constant = float(lag_time_constant)
        self.latency = float(latency)
        self._lower = np.full(n, -np.inf) if lower is None else np.asarray(lower, dtype=float)
        self._upper = np.full(n, np.inf) if upper is None else np.asarray(upper, dtype=float)
        self.reset(np.zeros(n))

    def reset(self, positions: np.ndarray, time: float = 0.0) -> None:
        """Hold ``positions`` [rad] from ``time`` [s] on, with no pending command."""
        positions = np.array(positions, dtype=float)
        if positions.shape != (len(self.joint_names),):
            raise ShapeError("positions", positions.shape, (len(self.joint_names),))
        self._positions = positions
        self._velocities = np.zeros_like(positions)
        self._time = float(time)
        self._pending: list[tuple[float, np.ndarray, JointTrajectoryCommand]] = []
        # Active trajectories: (joint indices, knot times, knot values (knots, joints)).
        self._active: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [
            (np.arange(len(positions)), np.array([self._time]), positions[None, :].copy())]

    @property
    def positions(self) -> np.ndarray:
        """Joint positions [rad] (copy)."""
        return self._positions.copy()

    @property
    def velocities(self) -> np.ndarray:
        """Joint velocities [rad/s] over the last step (copy)."""
        return self._velocities.copy()

    def indices(self, joint_names: Sequence[str]) -> np.ndarray:
        """Indices of ``joint_names`` among the servoed joints.

        Raises:
            JointNotFound: For a name that is not a servoed joint (lists the valid ones).
        """
        out = np.empty(len(joint_names), dtype=int)
        for k, name in enumerate(joint_names):
            try:
                out[k] = self._index[name]
            except (KeyError, TypeError):
                raise JointNotFound(name, self.joint_names) from None
        return out

    def command(self, command: JointTrajectoryCommand, receive_time: float) -> None:
        """Queue ``command``, received at ``receive_time`` [s]; it acts ``latency`` later.

        Raises:
            JointNotFound: A commanded joint is not servoed (the command is dropped as a whole).
        """
        indices = self.indices(command.joint_names)
        self._pending.append((float(receive_time), indices, command))

    def setpoint(self, time: float) -> np.ndarray:
        """Setpoint [rad] at ``time`` [s] from the active trajectories (pending commands excluded)."""
        out = np.empty(len(self.joint_names))
        for indices, times, values in self._active:
            out[indices] = _interpolate(times, values, time)
        return out

    def _activate(self, receive_time: float, indices: np.ndarray, command: JointTrajectoryCommand) -> None:
        start = self.setpoint(receive_time)[indices]
        stamp = receive_time if command.stamp is None else command.stamp
        times = stamp + np.asarray(command.times_from_stamp)
        future = times > receive_time
        if np.any(future):
            knot_times = np.concatenate(([receive_time], times[future]))
            knot_values = np.vstack((start[None, :], command.positions[future]))
        else:
            knot_times = np.array([receive_time])
            knot_values = command.positions[-1:].copy()
        taken = np.zeros(len(self.joint_names), dtype=bool)
        taken[indices] = True
        active = []
        for idx, t, v in self._active:
            keep = ~taken[idx]
            if np.any(keep):
                active.append((idx[keep], t, v[:, keep]))
        active.append((indices, knot_times, knot_values))
        self._active = active

    def step(self, time: float) -> tuple[np.ndarray, np.ndarray]:
        """Advance to ``time`` [s]: positions [rad] and velocities [rad/s] at that time.

        The lag is integrated exactly for the piecewise-linear delayed setpoint: the interval is split at
        command activations and trajectory knots, and each piece uses the exact first-order-hold update.

        Raises:
            InputError: If ``time`` is not after the current time.
        """
        time = float(time)
        if not time > self._time:
            raise InputError("time", time, f"a time after the servo's current time {self._time!r} s")
        latency, tau = self.latency, self.lag_time_constant
        start_positions = self._positions
        x = self._positions
        t = self._time
        while t < time:
            while self._pending and self._pending[0][0] + latency <= t + 1e-12:
                self._activate(*self._pending.pop(0))
            end = time
            if self._pending:
                end = min(end, self._pending[0][0] + latency)
            for _, times, _ in self._active:
                k = int(np.searchsorted(times, t - latency, side="right"))
                if k < len(times):
                    end = min(end, times[k] + latency)
            if end <= t + 1e-12:
                end = min(time, t + 1e-9)
            h = end - t
            target0, target1 = self.setpoint(t - latency), self.setpoint(end - latency)
            if tau > 0.0:
                decay = math.exp(-h / tau)
                slope_tau = (target1 - target0) * (tau / h)
                x = target1 - slope_tau + (x - target0 + slope_tau) * decay
            else:
                x = target1
            t = end
        positions = np.clip(x, self._lower, self._upper)
        self._velocities = (positions - start_positions) / (time - self._time)
        self._positions = positions
        self._time = time
        return self.positions, self.velocities


def _interpolate(times: np.ndarray, values: np.ndarray, t: float) -> np.ndarray:
    """Piecewise-linear interpolation of knot rows ``values`` at times ``times``, held outside."""
    if t <= times[0]:
        return values[0]
    if t >= times[-1]:
        return values[-1]
    k = int(np.searchsorted(times, t, side="right")) - 1
    s = (t - times[k]) / (times[k + 1] - times[k])
    return values[k] + s * (values[k + 1] - values[k])


class SimBackend(abc.ABC):
    """A simulated robot: position commands in, sensor samples out, one hardware step at a time."""

    @property
    @abc.abstractmethod
    def joint_names(self) -> tuple[str, ...]:
        """Commandable joints, in the order of the sensor samples."""

    @property
    @abc.abstractmethod
    def hardware_period(self) -> float:
        """Default step [s]."""

    @property
    @abc.abstractmethod
    def time(self) -> float:
        """Simulated time [s] since reset."""

    @abc.abstractmethod
    def reset(self, q0: np.ndarray | None = None) -> None:
        """Back to time 0 at configuration ``q0`` (None = the backend's initial configuration)."""

    @abc.abstractmethod
    def step(self, dt: float | None = None) -> SimState:
        """Advance by ``dt`` [s] (None = the hardware period) and return the new state."""

    @abc.abstractmethod
    def set_trajectory(self, command: JointTrajectoryCommand) -> None:
        """Queue a position command, received now (see :class:`JointServo` for the semantics).

        Raises:
            JointNotFound: A commanded joint is unknown; the command is rejected as a whole.
        """

    @property
    @abc.abstractmethod
    def state(self) -> SimState:
        """State after the last step (or the reset)."""

    @abc.abstractmethod
    def sensor_sample(self) -> SensorSample:
        """Sensor data of the last step (or the reset)."""

    def set_command(self, joint_names: Sequence[str], positions: Sequence[float],
                    velocities: Sequence[float] | None = None, stamp: float | None = None) -> None:
        """Command positions [rad] reached at ``stamp`` [s] (None = now): a one-point trajectory.

        Raises:
            JointNotFound: A joint is unknown; the command is rejected as a whole.
            InputError: Arrays of the wrong length or non-finite values.
        """
        positions = np.asarray(positions, dtype=float)
        if positions.shape != (len(joint_names),):
            raise ShapeError("positions", positions.shape, (len(joint_names),))
        vel = None if velocities is None else np.asarray(velocities, dtype=float)[None, :]
        command = JointTrajectoryCommand(tuple(joint_names), (0.0,), positions[None, :], stamp, vel)
        self.set_trajectory(command)


class ServoedBackend(SimBackend):
    """A :class:`SimBackend` whose joints follow a :class:`JointServo`: the bookkeeping backends share.

    Subclasses keep ``_servo`` (a :class:`JointServo`), ``_time`` [s], ``_state`` and ``_sample`` up to
    date in ``reset`` and ``step``.
    """

    _servo: JointServo
    _time: float
    _state: SimState
    _sample: SensorSample

    @property
    def time(self) -> float:
        """Simulated time [s] since reset."""
        return self._time

    @property
    def state(self) -> SimState:
        """State after the last step."""
        return self._state

    def sensor_sample(self) -> SensorSample:
        """Sensor data of the last step."""
        return self._sample

    def set_trajectory(self, command: JointTrajectoryCommand) -> None:
        """Queue a position command received now (see :class:`JointServo`).

        Raises:
            JointNotFound: A commanded joint is not servoed; the command is rejected as a whole.
        """
        self._servo.command(command, self._time)


class ScriptedWheelsBackend(ServoedBackend):
    """A :class:`ServoedBackend` whose ``wheels`` follow a script: commands name ``legs`` joints only."""

    wheels: tuple[str, ...]
    legs: tuple[str, ...]

    def set_trajectory(self, command: JointTrajectoryCommand) -> None:
        """Queue a leg position command received now.

        Raises:
            JointNotFound: A joint is not in the model.
            InputError: A joint is a wheel (wheels follow their script).
        """
        wheels = [n for n in command.joint_names if n in self.wheels]
        if wheels:
            raise InputError("joint_names", wheels, f"leg joints {list(self.legs)} (wheels are scripted)")
        super().set_trajectory(command)


def check_dt(dt: float | None, default: float) -> float:
    """The step ``dt`` [s] (``default`` when None), checked finite and > 0.

    Raises:
        InputError: If ``dt`` is not a finite number > 0.
    """
    if dt is None:
        return default
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0.0:
        raise InputError("dt", dt, "a finite time step > 0 [s]")
    return float(dt)


__all__ = [
    "check_command_stamp",
    "GRAVITY",
    "JointServo",
    "JointTrajectoryCommand",
    "SensorSample",
    "SimBackend",
    "ServoedBackend",
    "ScriptedWheelsBackend",
    "SimState",
    "check_dt",
]
