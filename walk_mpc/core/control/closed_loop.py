"""In-process closed walking loop without ROS: timeline -> MPC planner -> IK -> simulator backend.

One :class:`ClosedLoopWalk` runs the graph's control loop in a single process on any
:class:`~walk_mpc.core.sim.backend.SimBackend` (kinematic plant, MuJoCo). Every control tick (every
``control_period / hardware_period``-th sensor sample, seed 001):

1. **Support-foot correction** (seed 001, second feedback):
   :class:`~walk_mpc.core.mpc.support_correction.SupportCorrector`, the policy the mpc_planner and ik nodes
   share: at each lift-off the stance foot, settled during the double support, takes its measured pose
   (position, yaw and height) in place of its planned one; later steps keep their planned world poses
   (``shift_later_steps`` False), so the planner and the IK aim each swing foot at its planned world
   position from where the stance foot really is, and landing errors do not accumulate. The planner and
   the IK use the same corrected timeline.
2. **CoM feedback** (seed 001, first feedback): the planner steps with the measured CoM (ground truth
   of the backend: the model's CoM at the measured configuration with the measured base pose); the
   planner adds ``feedback_gain`` times the error to its initial state when the error exceeds
   ``feedback_threshold``. The default planner parameters use a feedback gain of 0.1: on MuJoCo the
   measured CoM trails the plan by 0.5-1 cm (servo lag), and the planner's default 0.3 then drags the
   plan back every tick until Talos falls (measured: 0.3 and 0.6 fall, 0.1 walks).
3. **IK twice per loop** (seed 001): ``walk_targets`` at ``t + T`` and ``t + 2T``, solved by
   :meth:`IKSolver.solve_two` from the previous first solution (the IK's own model), re-synchronised on
   the measured configuration at each support change (seed 001).
4. The two solutions become a two-point joint trajectory stamped at the sample's time.

The outcome (:class:`WalkOutcome`) reports falls, tilt, base height, where each foot landed compared
with the original plan and the corrected one, the final CoM error and the real-time factor.

Pure numpy / pinocchio: no ROS import (the in-process demo and examples use it).
"""

from __future__ import annotations

import dataclasses
import math
import time as _time
from typing import Callable, Optional

import numpy as np
import pinocchio as pin

from walk_mpc.core.body.ik import IKSolver
from walk_mpc.core.body.robot import RobotModel, yaw_of
from walk_mpc.core.body.targets import walk_targets, yaw_free
from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.mpc.planner import MpcPlanner, PlannerOutput, PlannerParameters
from walk_mpc.core.mpc.problem import MpcParameters
from walk_mpc.core.mpc.support_correction import SupportCorrectionParameters, SupportCorrector
from walk_mpc.core.params import check_nonnegative, check_positive
from walk_mpc.core.sim.backend import JointTrajectoryCommand, SimBackend, SimState
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Timeline

#: CoM feedback gain of :func:`default_planner_parameters` (see the module docstring).
DEFAULT_FEEDBACK_GAIN = 0.1


@dataclasses.dataclass(frozen=True)
class ClosedLoopParameters:
    """Options of the in-process loop.

    Attributes:
        control_period: Period of the planner + IK ticks [s], a multiple of the backend's hardware period.
        com_feedback: Step the planner with the measured CoM (False: open loop on the plan).
        support_correction: At each lift-off, replace the stance foot's planned pose by the measured
            one (seed 001; :class:`SupportCorrector`).
        shift_later_steps: With the support correction, also translate every later step by the same
            offset; False keeps their planned positions, so landing errors do not accumulate along the
            walk.
        measured_support_height: The corrected pose takes the measured sole height (else the planned).
        resync_at_support_change: Restart the IK from the measured configuration at support changes.
        settle_time: Time simulated after the timeline's end [s] (catch and stand).
        fall_tilt: Base tilt [rad] above which the walk counts as a fall.
        fall_height_ratio: Base height, as a fraction of the initial one, below which the walk counts
            as a fall.
    """

    control_period: float = 0.02
    com_feedback: bool = True
    support_correction: bool = True
    shift_later_steps: bool = False
    measured_support_height: bool = False
    resync_at_support_change: bool = True
    settle_time: float = 0.5
    fall_tilt: float = math.radians(10.0)
    fall_height_ratio: float = 0.9

    def __post_init__(self) -> None:
        check_positive("control_period", self.control_period)
        check_nonnegative("settle_time", self.settle_time)
        check_positive("fall_tilt", self.fall_tilt)
        check_positive("fall_height_ratio", self.fall_height_ratio)
        for name in ("com_feedback", "support_correction", "shift_later_steps", "measured_support_height",
                     "resync_at_support_change"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")


@dataclasses.dataclass(frozen=True)
class WalkOutcome:
    """What a closed-loop walk did.

    Attributes:
        fallen: Whether the base tilted more than ``fall_tilt`` or dropped below ``fall_height_ratio``
            (or the backend reported a fall); the walk stops there.
        max_tilt: Largest base tilt from the vertical [rad].
        min_base_height_ratio: Lowest base height over its initial height [-].
        landing_errors: Step index -> horizontal distance [m] of the landed sole, measured when it has
            settled (the next lift-off, or CATCH for the last step), to its position in the original
            timeline.
        corrected_landing_errors: Step index -> the same, to its position in the corrected plan at
            that time (what the support-foot correction then absorbs).
        final_com_error: Horizontal distance [m] of the final CoM to the middle of the final planned
            feet of the original timeline.
        ik_failures: Control ticks whose IK did not converge.
        sim_time: Simulated time [s].
        wall_time: Wall time of the run [s].
        landing_yaw_errors: Step index -> landed minus planned yaw [rad] (original timeline).
    """

    fallen: bool
    max_tilt: float
    min_base_height_ratio: float
    landing_errors: dict[int, float]
    corrected_landing_errors: dict[int, float]
    final_com_error: float
    ik_failures: int
    sim_time: float
    wall_time: float

    landing_yaw_errors: dict[int, float] = dataclasses.field(default_factory=dict)

    @property
    def real_time_factor(self) -> float:
        """Simulated time per wall time [-]."""
        return self.sim_time / self.wall_time if self.wall_time > 0.0 else math.inf


@dataclasses.dataclass(frozen=True)
class TickRecord:
    """One control tick, for tracing (arrays read-only).

    Attributes:
        t: Time of the tick [s].
        state: Backend state at ``t``.
        output: Planner output.
        q_command: First IK solution (configuration commanded for ``t + T``).
        ik_success: Whether both IK solutions converged.
    """

    t: float
    state: SimState
    output: PlannerOutput
    q_command: np.ndarray
    ik_success: bool


def standing_com_height(robot: RobotModel, q: np.ndarray) -> float:
    """CoM height [m] above the mean height of the soles at configuration ``q`` (the LIPM's h)."""
    soles = [p[2] for p, _ in robot.foot_poses(q).values()]
    return float(robot.com(q)[2] - np.mean(soles))


def default_planner_parameters(robot: RobotModel, q: np.ndarray, control_period: float) -> PlannerParameters:
    """Planner parameters of the loop: LIPM height of ``q`` (:func:`standing_com_height`), the loop's
    control period, CoM feedback gain 0.1 (threshold 4 mm), the rest default."""
    return PlannerParameters(mpc=MpcParameters(com_height=standing_com_height(robot, q)),
                             control_period=control_period, feedback_gain=DEFAULT_FEEDBACK_GAIN)


class ClosedLoopWalk:
    """Walk a timeline on a simulator backend, closed in process (see the module docstring).

    Args:
        robot: Robot model (the one the backend simulates).
        backend: Simulator, at the start pose (its time origin is the timeline's).
        timeline: Gait timeline.
        planner_params: Planner parameters; None = :func:`default_planner_parameters` at the
            backend's current configuration.
        ik_params: IK parameters (None = defaults).
        params: Loop options.

    Raises:
        ParameterError: The control period is not a multiple of the hardware period, or differs from
            the planner's.
    """

    def __init__(self, robot: RobotModel, backend: SimBackend, timeline: Timeline,
                 planner_params: Optional[PlannerParameters] = None,
                 ik_params: Optional[IKSolver.Parameters] = None,
                 params: Optional[ClosedLoopParameters] = None) -> None:
        self.params = params if params is not None else ClosedLoopParameters()
        p = self.params
        ratio = p.control_period / backend.hardware_period
        if round(ratio) < 1 or abs(ratio - round(ratio)) > 1e-6:
            raise ParameterError("control_period", p.control_period,
                                 f"a multiple of the hardware period {backend.hardware_period} s")
        self._ticks_per_control = int(round(ratio))
        self.robot = robot
        self.backend = backend
        self.original_timeline = timeline
        q = np.array(backend.state.q)
        if planner_params is None:
            planner_params = default_planner_parameters(robot, q, p.control_period)
        if abs(planner_params.control_period - p.control_period) > 1e-9:
            raise ParameterError("planner_params.control_period", planner_params.control_period,
                                 f"the loop's control period {p.control_period} s")
        self.corrector = SupportCorrector(SupportCorrectionParameters(
            enabled=p.support_correction, shift_later_steps=p.shift_later_steps,
            measured_height=p.measured_support_height))
        self.planner = MpcPlanner(planner_params)
        self.planner.set_timeline(self.corrector.set_plan(timeline))
        self.solver = IKSolver(robot, ik_params)
        self._tilt = yaw_free(robot.frame_pose(robot.reference_configuration(), robot.torso_frame)[1])
        self._frames = {Foot.LEFT: robot.left_foot_frame, Foot.RIGHT: robot.right_foot_frame}
        self._q_model = q.copy()
        self._stance: Optional[tuple] = None
        self._standing_height = float(q[2])
        self._ik_failures = 0
        self._fallen = False
        self._max_tilt = 0.0
        self._min_height = 1.0
        self._landing: dict[int, float] = {}
        self._corrected_landing: dict[int, float] = {}
        self._landing_yaw: dict[int, float] = {}
        self._samples = 0

    @property
    def timeline(self) -> Timeline:
        """The planner's current (corrected) timeline."""
        return self.planner.timeline

    @property
    def fallen(self) -> bool:
        """Whether the walk fell (see :class:`WalkOutcome`)."""
        return self._fallen

    def step(self) -> Optional[TickRecord]:
        """One hardware period: a control tick first when one is due, then the backend steps.

        Returns:
            The tick's record, or None when no control tick ran.
        """
        record = None
        if self._samples % self._ticks_per_control == 0:
            record = self._control_tick()
        state = self.backend.step()
        self._samples += 1
        self._observe(state)
        return record

    def run(self, until: Optional[float] = None,
            on_tick: Optional[Callable[[TickRecord], None]] = None) -> WalkOutcome:
        """Step until ``until`` [s] (default: end of the timeline + ``settle_time``) or a fall.

        Args:
            until: End time [s] on the backend's clock.
            on_tick: Called with each control tick's record (tracing, plots).
        """
        if until is None:
            until = self.original_timeline.t_end + self.params.settle_time
        start = _time.perf_counter()
        while self.backend.time < until - 1e-9 and not self._fallen:
            record = self.step()
            if record is not None and on_tick is not None:
                on_tick(record)
        return self.outcome(_time.perf_counter() - start)

    def outcome(self, wall_time: float = 0.0) -> WalkOutcome:
        """The outcome so far (``wall_time`` [s] as measured by the caller)."""
        last = self.original_timeline.phases[-1]
        middle = (np.asarray(last.left.position)[:2] + np.asarray(last.right.position)[:2]) / 2
        com = np.asarray(self.backend.state.com)[:2]
        return WalkOutcome(self._fallen, self._max_tilt, self._min_height, dict(self._landing),
                           dict(self._corrected_landing), float(np.linalg.norm(com - middle)),
                           self._ik_failures, float(self.backend.time), float(wall_time),
                           dict(self._landing_yaw))

    # ------------------------------------------------------------------ internals
    def _control_tick(self) -> TickRecord:
        p = self.params
        backend, planner = self.backend, self.planner
        t = float(backend.time)
        state = backend.state
        self._correct_support(t, state)
        phase = planner.timeline.phase_at(t)
        if p.resync_at_support_change and self._stance is not None and phase.stance_feet != self._stance:
            self._q_model = np.array(state.q)  # support change: re-synchronise on the measured joints
        self._stance = phase.stance_feet
        out = planner.step(t, np.array(state.com) if p.com_feedback else None)
        T = p.control_period
        targets = [walk_targets(planner.timeline, t + dt, com, self._tilt)
                   for dt, com in zip((T, 2.0 * T), out.com_targets)]
        first, second = self.solver.solve_two(targets[0], targets[1], self._q_model)
        success = bool(first.success and second.success)
        self._ik_failures += not success
        self._q_model = np.array(first.q)
        backend.set_trajectory(JointTrajectoryCommand(backend.joint_names, (T, 2.0 * T),
                                                      [first.q[7:], second.q[7:]], stamp=t))
        return TickRecord(t, state, out, first.q, success)

    def _observe(self, state: SimState) -> None:
        p = self.params
        rotation = pin.Quaternion(np.asarray(state.q[3:7])).toRotationMatrix()
        tilt = math.acos(max(-1.0, min(1.0, float(rotation[2, 2]))))
        self._max_tilt = max(self._max_tilt, tilt)
        ratio = float(state.q[2]) / self._standing_height
        self._min_height = min(self._min_height, ratio)
        if state.fallen or tilt > p.fall_tilt or ratio < p.fall_height_ratio:
            self._fallen = True

    def _correct_support(self, t: float, state: SimState) -> None:
        """Support-foot correction of the tick (the shared policy) and the landing it measured."""
        q = np.asarray(state.q)

        def measure(foot: Foot) -> FootPose:
            position, rotation = self.robot.frame_pose(q, self._frames[foot])
            return FootPose(tuple(float(v) for v in position), yaw_of(rotation))

        before = self.corrector.timeline
        correction = self.corrector.observe(t, measure)
        if correction is None:
            return
        if correction.step_index > 0:
            index = correction.step_index
            current = next(s for s in before.steps if s.step_index == index)
            offset = np.asarray(correction.measured.position)[:2] - np.asarray(current.position)[:2]
            self._landing[index] = correction.position_error
            self._landing_yaw[index] = correction.yaw_error
            self._corrected_landing[index] = float(np.linalg.norm(offset))
        if correction.applied:
            self.planner.set_timeline(self.corrector.timeline)


def walk(robot: RobotModel, backend: SimBackend, timeline: Timeline, **kwargs) -> WalkOutcome:
    """Run :class:`ClosedLoopWalk` (same arguments) to the end of the timeline; the outcome."""
    if not isinstance(timeline, Timeline):
        raise InputError("timeline", timeline, "a Timeline")
    return ClosedLoopWalk(robot, backend, timeline, **kwargs).run()


__all__ = ["DEFAULT_FEEDBACK_GAIN", "ClosedLoopParameters", "ClosedLoopWalk", "TickRecord", "WalkOutcome",
           "default_planner_parameters", "standing_com_height", "walk"]
