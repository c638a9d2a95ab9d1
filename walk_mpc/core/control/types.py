"""Core types between the stages of the control loop (the nodes' messages, without ROS).

* :class:`WalkPlan`: a footstep plan (``FootstepPlan``): the walk behavior's output, the planner's and the
  whole-body stage's input.
* :class:`CoMReference`: the planner's output at one control tick (``ComReference``).
* :class:`JointCommand`: the whole-body stage's output (``JointTrajectory``, two points).
* :class:`Log`: where a controller reports what it decided (a :class:`logging.Logger` fits; the nodes pass
  an adapter to their rclpy logger).

Stamps are integer nanoseconds, as in the messages (no float rounding); times relative to a stamp are
seconds. The sensor sample is :class:`walk_mpc.core.sensors.SensorSample`.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import math
from typing import Optional, Protocol

import numpy as np

from walk_mpc.core.errors import InputError, ShapeError
from walk_mpc.core.walk.timeline import Timeline

NS_PER_S = 1_000_000_000
#: The plan id of a planner's references while it has no plan (it stands at the measured feet).
NO_PLAN = 0


def _frozen(values, shape: tuple) -> np.ndarray:
    array = np.array(values, dtype=float)
    if array.shape != shape:
        raise ShapeError("array", array.shape, shape)
    array.setflags(write=False)
    return array


class Log(Protocol):
    """What a controller logs through (``logging.Logger`` and the nodes' adapter satisfy it)."""

    def debug(self, msg: str) -> object: ...

    def info(self, msg: str) -> object: ...

    def warning(self, msg: str) -> object: ...

    def error(self, msg: str) -> object: ...


def default_log(component: str) -> Log:
    """The standard library logger ``walk_mpc.<component>`` (the in-process loop's default)."""
    return logging.getLogger(f"walk_mpc.{component}")


@dataclasses.dataclass(frozen=True)
class WalkPlan:
    """A validated footstep plan.

    Attributes:
        plan_id: Identifier (> 0); a new id replaces the plan.
        walking: Whether the plan walks; False: only its initial feet are used (standing).
        stamp_ns: Stamp [ns] of the timeline's t = 0.
        timeline: Gait timeline (t0 = 0).
    """

    plan_id: int
    walking: bool
    stamp_ns: int
    timeline: Timeline

    def __post_init__(self) -> None:
        if not isinstance(self.timeline, Timeline):
            raise InputError("timeline", type(self.timeline).__name__, "a Timeline")
        if not isinstance(self.stamp_ns, int) or isinstance(self.stamp_ns, bool):
            raise InputError("stamp_ns", self.stamp_ns, "integer nanoseconds")
        if not isinstance(self.plan_id, int) or self.plan_id < 0:
            raise InputError("plan_id", self.plan_id, "a non-negative integer")


class PlannerStatus(enum.IntEnum):
    """Outcome of a planner tick (``mpc/timing`` status)."""

    OK = 0
    INFEASIBLE = 1  # no ZMP inside the support regions: the previous plan is followed
    SOLVER_FAILED = 2  # the QP solver failed: the previous plan is followed
    PLANNER_ERROR = 3  # the planner refused its inputs: no reference this tick
    REFERENCE_OUT_OF_REACH = 4  # the CoM/ZMP targets left the support feet (max_com_distance): no reference


class WholeBodyStatus(enum.IntEnum):
    """Outcome of a whole-body tick (``ik/timing`` status)."""

    OK = 0
    IK_FAILED = 1  # a solve did not converge: last command held
    BAD_REFERENCE = 2  # NaN/inf or malformed CoM reference: last command held
    TARGETS_ERROR = 3  # targets could not be built: last command held
    REFERENCE_STALE = 4  # a walk started but its CoM references never came: last (standing) command held
    SAFE_STOP = 5  # the CoM references stopped mid-walk: the stage lands the step in progress and settles in
    # double support on a CoM reference of its own (a command, not a hold)
    PLAN_REFUSED = 6  # a walk plan heard while standing puts the feet where the robot does not stand (a plan
    # made on stale feet): not walked, the robot keeps standing where it is (a command, not a hold)
    WAITING_FOR_REFERENCES = 7  # a walk started and its first CoM references have not come yet (at most
    # reference_timeout): a report without a command, the last one goes on (see TickReport)


@dataclasses.dataclass(frozen=True)
class CoMReference:
    """The planner's reference of one control tick (arrays read-only).

    Attributes:
        stamp_ns: Stamp [ns] of the sample the tick ran on.
        plan_id: The plan it follows (0 before any plan).
        times: Times [s] after the stamp of the two targets (T, 2T).
        com_position: CoM positions [m] at those times, shape (2, 3).
        com_velocity: CoM velocities [m/s], shape (2, 3).
        zmp: ZMP [m], shape (2, 3).
        sole_tilt: Roll and pitch [rad] of the left and right soles at those times, shape (2, 2, 2) (time,
            foot, (roll, pitch)): their ground's on known sloped terrain (StepData normal,
            :func:`~walk_mpc.core.body.targets.sole_tilts_at`), for the stabilizer's sole offsets; None on
            level ground.
    """

    stamp_ns: int
    plan_id: int
    times: tuple[float, float]
    com_position: np.ndarray
    com_velocity: np.ndarray
    zmp: np.ndarray
    sole_tilt: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "times", tuple(float(t) for t in self.times))
        if len(self.times) != 2:
            raise InputError("times", self.times, "two times (T, 2T)")
        for name in ("com_position", "com_velocity", "zmp"):
            try:
                object.__setattr__(self, name, _frozen(getattr(self, name), (2, 3)))
            except ShapeError:
                raise ShapeError(name, np.shape(getattr(self, name)), (2, 3)) from None
        if self.sole_tilt is not None:
            try:
                tilt = _frozen(self.sole_tilt, (2, 2, 2))
            except (ShapeError, TypeError, ValueError):
                raise ShapeError("sole_tilt", np.shape(self.sole_tilt), (2, 2, 2)) from None
            if not np.all(np.isfinite(tilt)) or np.any(np.abs(tilt) > 0.5 * math.pi):
                raise InputError("sole_tilt", tilt.tolist(),
                                 "finite roll and pitch angles within +-pi/2 [rad]")
            object.__setattr__(self, "sole_tilt", None if not np.any(tilt) else tilt)

    def check(self) -> None:
        """Raise :class:`InputError` unless times and positions are finite with 0 < T < 2T."""
        if not all(math.isfinite(t) for t in self.times) or not np.all(np.isfinite(self.com_position)):
            raise InputError("reference", f"times {list(self.times)}, CoM {self.com_position.tolist()}",
                             "finite times and CoM positions")
        if not 0.0 < self.times[0] < self.times[1]:
            raise InputError("times", list(self.times), "0 < T < 2T")


@dataclasses.dataclass(frozen=True)
class JointCommand:
    """The whole-body stage's command of one tick: two trajectory points, and in single support two more, the
    landing tail (arrays read-only).

    Attributes:
        stamp_ns: Stamp [ns] the point times are relative to (the tick's sample).
        times: Times [s] after the stamp of the points (T, 2T; with a landing tail, the end of the hold of
            the second point and the planned touchdown).
        positions: Joint positions [rad], shape (2 or 4, n), in the stage's joint order.
        velocities: Joint velocities [rad/s], shape (2 or 4, n).
        status: :class:`WholeBodyStatus` of the tick (OK; SAFE_STOP: a tick of a safe stop; PLAN_REFUSED: a
            standing tick while the references follow a refused plan; else a hold of the last command).
        source: ``"reference"`` (ticked by a CoM reference) or ``"sensor"`` (by a sample, no references:
            standing, or a safe stop).
        solve_time: IK time of both solutions [s].
        reason: Why the tick held, why it stops safely or refuses the plan (empty when OK).
    """

    stamp_ns: int
    times: tuple[float, ...]
    positions: np.ndarray
    velocities: np.ndarray
    status: WholeBodyStatus = WholeBodyStatus.OK
    source: str = "reference"
    solve_time: float = 0.0
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "times", tuple(float(t) for t in self.times))
        if len(self.times) not in (2, 4):
            raise ShapeError("times", (len(self.times),), (2,))
        n = np.shape(self.positions)[-1] if np.ndim(self.positions) == 2 else -1
        for name in ("positions", "velocities"):
            try:
                object.__setattr__(self, name, _frozen(getattr(self, name), (len(self.times), n)))
            except ShapeError:
                raise ShapeError(name, np.shape(getattr(self, name)), (len(self.times), n)) from None

    @property
    def held(self) -> bool:
        """Whether the command holds the last one (a failure status: neither OK, SAFE_STOP nor
        PLAN_REFUSED)."""
        return self.status not in (WholeBodyStatus.OK, WholeBodyStatus.SAFE_STOP,
                                   WholeBodyStatus.PLAN_REFUSED)


@dataclasses.dataclass(frozen=True)
class TickReport:
    """A tick of the whole-body stage that gave no command but has a status to report (``ik/timing``), so
    that the stage is not silent: e.g. waiting for the planner's first references of a walk.

    Attributes:
        stamp_ns: Stamp [ns] of the sample of the tick.
        status: :class:`WholeBodyStatus` (WAITING_FOR_REFERENCES).
        reason: What the stage waits for, in its words (names the component it waits for).
    """

    stamp_ns: int
    status: WholeBodyStatus
    reason: str


def optional_steady(steady_ns: Optional[int]) -> Optional[int]:
    """``steady_ns`` checked: integer nanoseconds or None."""
    if steady_ns is not None and (not isinstance(steady_ns, int) or isinstance(steady_ns, bool)):
        raise InputError("steady_ns", steady_ns, "integer nanoseconds or None")
    return steady_ns


__all__ = ["NS_PER_S", "CoMReference", "JointCommand", "Log", "PlannerStatus", "TickReport", "WalkPlan",
           "WholeBodyStatus", "default_log", "optional_steady"]
