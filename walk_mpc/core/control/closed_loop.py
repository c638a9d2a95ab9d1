"""In-process closed walking loop without ROS: the graph's controllers on a simulator backend.

One :class:`ClosedLoopWalk` runs the control loop of the graph in a single process on any
:class:`~walk_mpc.core.sim.backend.SimBackend` (kinematic plant, MuJoCo), with the very controllers the
nodes wrap: :class:`~walk_mpc.core.control.planner_stage.PlannerStage` (the ``mpc_planner`` node) and
:class:`~walk_mpc.core.control.whole_body_stage.WholeBodyStage` (the ``ik`` node). Each hardware period:

1. the backend steps and its sensor sample (what a real robot measures: joint encoders, contact forces,
   IMU and base estimate, :class:`~walk_mpc.core.sensors.SensorSample`) is stamped
   ``origin + step * hardware_period``, as the ``sim`` node stamps its ``SensorState``;
2. the whole-body stage observes the sample (it prepares the coming tick, or ticks on its own when no
   references come);
3. the planner stage observes it: on every ``control_period / hardware_period``-th sample a control tick
   (seed 001: support-foot correction at lift-off, CoM feedback with threshold and gain, the MPC step)
   gives a :class:`~walk_mpc.core.control.types.CoMReference`, which the whole-body stage turns into two
   IK solutions (seed 001: at T and 2T, re-synchronised on the measurement at support changes); on the
   sample before a tick the planner announces the tick's reference solved ahead and the whole-body stage
   solves it ahead too;
4. the command's two points go to the backend as a joint trajectory stamped at the sample.

The messages of the graph carry the same values (integer nanosecond stamps, float64 arrays), so the graph
and this loop produce identical commands (``test_graph_equivalence``).

The outcome (:class:`WalkOutcome`) reports falls, tilt, base height (simulator truth: scoring only), where
each foot landed compared with the original plan and the corrected one (the planner stage's support-foot
corrections), the final CoM error and the real-time factor.

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
from walk_mpc.core.control.planner_stage import PlannerStage, PlannerStageParameters
from walk_mpc.core.control.recovery_step import RecoveryStepParameters, RecoveryStepper
from walk_mpc.core.control.step_adjustment import StepAdjuster, StepAdjustmentParameters
from walk_mpc.core.control.types import NS_PER_S, JointCommand, WalkPlan, WholeBodyStatus
from walk_mpc.core.control.whole_body_stage import WholeBodyStage, WholeBodyStageParameters
from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.mpc.planner import PlannerOutput, PlannerParameters
from walk_mpc.core.mpc.problem import MpcParameters
from walk_mpc.core.mpc.support_correction import SupportCorrectionParameters, SupportCorrector
from walk_mpc.core.params import check_nonnegative, check_positive
from walk_mpc.core.sim.backend import JointTrajectoryCommand, SimBackend, SimState
from walk_mpc.core.walk.saturation import StepLimits
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Timeline

#: CoM feedback gain of :func:`default_planner_parameters` (on MuJoCo the measured CoM trails the plan by
#: 0.5-1 cm (servo lag) and the planner's default 0.3 then drags the plan back every tick until Talos falls:
#: 0.3 and 0.6 fall, 0.1 walks).
DEFAULT_FEEDBACK_GAIN = 0.1

#: Stamp [ns] of the backend's time 0 (any positive value: stamps are integer nanoseconds, as in the graph).
ORIGIN_NS = 1_000 * NS_PER_S


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
        settle_time: Time simulated after the timeline's end [s] (catch and stand).
        fall_tilt: Base tilt [rad] above which the walk counts as a fall.
        fall_height_ratio: Base height, as a fraction of the initial one, below which the walk counts
            as a fall.
        torso_fall_tilt: Tilt [rad] of the torso frame from its reference posture's (the IK regulates it,
            unlike the base, which pitches a few degrees per step by design) above which the walk counts
            as a fall.
        fall_com_distance: Horizontal distance [m] of the CoM to the nearest sole beyond which the walk
            counts as a fall (out of any reachable support).
        airborne_time: Time [s] without any sole in contact after which the walk counts as a fall (0: not
            checked).
        settled_speed: After ``settle_time``, the run goes on while the CoM moves faster than this [m/s]
            or the base turns faster than 10 times this [rad/s] (a late fall is watched to its end) ...
        settle_wait: ... for at most this long [s] (0: stop at ``settle_time``).
    """

    control_period: float = 0.02
    com_feedback: bool = True
    support_correction: bool = True
    shift_later_steps: bool = False
    measured_support_height: bool = False
    settle_time: float = 0.5
    fall_tilt: float = math.radians(10.0)
    fall_height_ratio: float = 0.9
    torso_fall_tilt: float = math.radians(10.0)
    fall_com_distance: float = 0.3
    airborne_time: float = 0.3
    settled_speed: float = 0.05
    settle_wait: float = 3.0

    def __post_init__(self) -> None:
        check_positive("control_period", self.control_period)
        check_nonnegative("settle_time", self.settle_time)
        check_positive("fall_tilt", self.fall_tilt)
        check_positive("fall_height_ratio", self.fall_height_ratio)
        check_positive("torso_fall_tilt", self.torso_fall_tilt)
        check_positive("fall_com_distance", self.fall_com_distance)
        check_nonnegative("airborne_time", self.airborne_time)
        check_positive("settled_speed", self.settled_speed)
        check_nonnegative("settle_wait", self.settle_wait)
        for name in ("com_feedback", "support_correction", "shift_later_steps", "measured_support_height"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")


@dataclasses.dataclass(frozen=True)
class WalkOutcome:
    """What a closed-loop walk did.

    Attributes:
        fallen: Whether the base tilted more than ``fall_tilt`` or dropped below ``fall_height_ratio``,
            the torso tilted more than ``torso_fall_tilt``, the CoM left every sole by more than
            ``fall_com_distance``, no sole touched the ground for ``airborne_time`` (or the backend
            reported a fall); the walk stops there. Watched until the robot has settled (``settle_wait``).
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


class FallDetector:
    """The loop's fall detection on the simulator's truth (scoring, never a controller input): the criteria
    of :class:`ClosedLoopParameters` (base and torso tilt, base height, CoM distance to the nearest sole,
    time without any sole on the ground) and the backend's own fall flag, latched at the first sample that
    meets one.

    Args:
        robot: Robot model of the backend.
        params: The loop options carrying the criteria.
        standing_height: Base height [m] of the initial standing posture (``fall_height_ratio`` of it).
        ground_height: ``(x, y) -> z`` [m], the ground under the base its height is measured from (a
            backend's ``ground_height``: a ramp down lowers the floor); None: z = 0.
    """

    def __init__(self, robot: RobotModel, params: ClosedLoopParameters, standing_height: float,
                 ground_height: Optional[Callable[[float, float], float]] = None) -> None:
        self.robot = robot
        self._ground_height = ground_height
        self.params = params
        self.standing_height = float(standing_height)
        torso = robot.frame_pose(robot.reference_configuration(), robot.torso_frame)[1]
        self._torso_up = np.asarray(torso)[:, 2].copy()  # the reference torso's z axis (yaw-free)
        self._frames = (robot.left_foot_frame, robot.right_foot_frame) if robot.is_biped \
            else tuple(robot.foot_frames)
        self.fallen = False
        self.reason = ""  # why it counts as a fall ("" if it did not fall)
        self.max_tilt = 0.0  # largest base tilt [rad]
        self.min_height_ratio = 1.0  # lowest base height over the standing one [-]
        self._airborne_since: Optional[float] = None

    def observe(self, state: SimState) -> bool:
        """One backend state; whether the robot has fallen (now or before)."""
        p = self.params
        q = np.asarray(state.q)
        rotation = pin.Quaternion(q[3:7]).toRotationMatrix()
        tilt = math.acos(max(-1.0, min(1.0, float(rotation[2, 2]))))
        self.max_tilt = max(self.max_tilt, tilt)
        base_z = float(state.q[2])
        if self._ground_height is not None:
            base_z -= float(self._ground_height(float(q[0]), float(q[1])))
        ratio = base_z / self.standing_height
        self.min_height_ratio = min(self.min_height_ratio, ratio)
        reasons = []
        if state.fallen:
            reasons.append("the simulator reports a fall")
        if tilt > p.fall_tilt:
            reasons.append(f"base tilt {math.degrees(tilt):.1f} deg")
        if ratio < p.fall_height_ratio:
            reasons.append(f"base height {ratio:.2f} of its initial height")
        torso = self.robot.frame_pose(q, self.robot.torso_frame)[1]
        torso_tilt = math.acos(max(-1.0, min(1.0, float(np.asarray(torso)[:, 2] @ self._torso_up))))
        if torso_tilt > p.torso_fall_tilt:
            reasons.append(f"torso tilt {math.degrees(torso_tilt):.1f} deg")
        soles = [np.asarray(self.robot.frame_pose(q, frame)[0]) for frame in self._frames]
        com = np.asarray(state.com)
        distance = min(float(np.hypot(*(com[:2] - sole[:2]))) for sole in soles)
        if distance > p.fall_com_distance:
            reasons.append(f"CoM {distance:.2f} m from the nearest sole")
        if p.airborne_time > 0.0 and len(state.in_contact) and not any(state.in_contact):
            if self._airborne_since is None:
                self._airborne_since = state.time
            if state.time - self._airborne_since >= p.airborne_time:
                reasons.append(f"no sole on the ground for {state.time - self._airborne_since:.2f} s")
        else:
            self._airborne_since = None
        if reasons and not self.fallen:
            self.fallen = True
            self.reason = f"t = {state.time:.2f} s: " + ", ".join(reasons)
        return self.fallen


def standing_com_height(robot: RobotModel, q: np.ndarray) -> float:
    """CoM height [m] above the mean height of the soles at configuration ``q`` (the LIPM's h)."""
    soles = [p[2] for p, _ in robot.foot_poses(q).values()]
    return float(robot.com(q)[2] - np.mean(soles))


def default_planner_parameters(robot: RobotModel, q: np.ndarray, control_period: float) -> PlannerParameters:
    """Planner parameters of the loop: LIPM height of ``q`` (:func:`standing_com_height`), the sole region
    of the robot's description (:meth:`RobotModel.planner_sole`; the default without one), the loop's
    control period, CoM feedback gain 0.1 (threshold 4 mm), the rest default."""
    given = robot.description is not None and robot.description.sole.given
    extra = {"sole": robot.planner_sole()} if given else {}
    return PlannerParameters(mpc=MpcParameters(com_height=standing_com_height(robot, q)),
                             control_period=control_period, feedback_gain=DEFAULT_FEEDBACK_GAIN, **extra)


class ClosedLoopWalk:
    """Walk a timeline on a simulator backend with the graph's controllers, in process (module docstring).

    Args:
        robot: Robot model (the one the backend simulates).
        backend: Simulator, at the start pose (its time origin is the timeline's).
        timeline: Gait timeline.
        planner_params: Planner parameters; None = :func:`default_planner_parameters` at the
            backend's current configuration.
        ik_params: IK parameters (None = defaults).
        params: Loop options.
        stage_options: Further options of the two stages (``prepare_ahead``, ``solve_ahead``): a dict with
            keys ``planner`` and ``whole_body`` of keyword arguments for their parameters.
        step_adjustment: Step adjustment from the measured DCM (:mod:`.step_adjustment`, the walk
            behavior's in the graph), within ``step_limits`` (default: the walk behavior's); None or disabled:
            the plan is never changed. Enabled, an adjusted plan goes to both stages as a new plan (plan id
            + 1) after the sample it was decided on, as the ``walk_behavior`` node publishes it.
        step_limits: The step limits of step adjustment and recovery steps (default: the walk behavior's).
        recovery_step: Standing recovery steps from the measured DCM (:mod:`.recovery_step`, the walk
            behavior's in the graph); None or disabled: never. Enabled, while the plan stands and the DCM
            leaves the support polygon, a recovery walk from the standing feet goes to both stages as a new
            plan (plan id + 1, stamped at the sample it was decided on).

    Raises:
        ParameterError: The control period is not a multiple of the hardware period, or differs from
            the planner's.
    """

    def __init__(self, robot: RobotModel, backend: SimBackend, timeline: Timeline,
                 planner_params: Optional[PlannerParameters] = None,
                 ik_params: Optional[IKSolver.Parameters] = None,
                 params: Optional[ClosedLoopParameters] = None,
                 stage_options: Optional[dict] = None,
                 step_adjustment: Optional[StepAdjustmentParameters] = None,
                 step_limits: Optional[StepLimits] = None,
                 recovery_step: Optional[RecoveryStepParameters] = None) -> None:
        if not isinstance(timeline, Timeline):
            raise InputError("timeline", timeline, "a Timeline")
        self.params = params if params is not None else ClosedLoopParameters()
        p = self.params
        ratio = p.control_period / backend.hardware_period
        if round(ratio) < 1 or abs(ratio - round(ratio)) > 1e-6:
            raise ParameterError("control_period", p.control_period,
                                 f"a multiple of the hardware period {backend.hardware_period} s")
        self.robot = robot
        self.backend = backend
        self.original_timeline = timeline
        q = np.array(backend.state.q)
        if planner_params is None:
            planner_params = default_planner_parameters(robot, q, p.control_period)
        if abs(planner_params.control_period - p.control_period) > 1e-9:
            raise ParameterError("planner_params.control_period", planner_params.control_period,
                                 f"the loop's control period {p.control_period} s")
        options = dict(stage_options or {})
        unknown = sorted(set(options) - {"planner", "whole_body"})
        if unknown:
            raise ParameterError("stage_options", unknown, "keys 'planner' and 'whole_body'")
        correction = SupportCorrectionParameters(enabled=p.support_correction,
                                                 shift_later_steps=p.shift_later_steps,
                                                 measured_height=p.measured_support_height)
        self.planner_stage = PlannerStage(robot, PlannerStageParameters(
            planner=planner_params, hardware_period=backend.hardware_period, feedback_enabled=p.com_feedback,
            support_correction=correction, **options.get("planner", {})))
        self.whole_body = WholeBodyStage(robot, WholeBodyStageParameters(
            solver=ik_params if ik_params is not None else IKSolver.Parameters(),
            control_period=p.control_period, support_correction=correction, **options.get("whole_body", {})))
        self._hardware_ns = int(round(backend.hardware_period * NS_PER_S))
        self.plan = WalkPlan(1, True, ORIGIN_NS, timeline)
        self.planner_stage.set_plan(self.plan)
        self.whole_body.set_plan(self.plan)
        self._ik_failures = 0
        self.falls = FallDetector(robot, self.params, float(q[2]), getattr(backend, "ground_height", None))
        self._landing: dict[int, float] = {}
        self._corrected_landing: dict[int, float] = {}
        self._landing_yaw: dict[int, float] = {}
        # Scoring only: where each foot landed, measured on the simulator's truth when it has settled (the
        # next lift-off, or CATCH for the last step), by the correction policy's own rule.
        self._scorer = SupportCorrector(dataclasses.replace(correction, enabled=True))
        self._scorer.set_plan(timeline)
        self._frames = {Foot.LEFT: robot.left_foot_frame, Foot.RIGHT: robot.right_foot_frame}
        self.commands: list[JointCommand] = []  # every command applied, in order (``keep_commands``)
        self.adjuster = (StepAdjuster(robot, step_adjustment, step_limits)
                         if step_adjustment is not None and step_adjustment.enabled else None)
        self.recovery = (RecoveryStepper(robot, recovery_step, step_limits)
                         if recovery_step is not None and recovery_step.enabled else None)
        self.plans: list[WalkPlan] = [self.plan]  # every plan given to the stages, in order
        self.keep_commands = False

    @property
    def planner(self):
        """The planner stage's MPC planner (:class:`~walk_mpc.core.mpc.planner.MpcPlanner`)."""
        return self.planner_stage.planner

    @property
    def corrector(self) -> SupportCorrector:
        """The planner stage's support-foot corrector."""
        return self.planner_stage.corrector

    @property
    def timeline(self) -> Timeline:
        """The planner's current (corrected) timeline."""
        return self.planner_stage.timeline

    @property
    def fallen(self) -> bool:
        """Whether the walk fell (see :class:`WalkOutcome`)."""
        return self.falls.fallen

    def stamp_ns(self, step_count: int) -> int:
        """Stamp [ns] of the sample after ``step_count`` hardware steps (the ``sim`` node's stamps)."""
        return ORIGIN_NS + step_count * self._hardware_ns

    def step(self) -> Optional[TickRecord]:
        """One hardware period: the backend steps, the stages observe its sample, a command is applied.

        Returns:
            The record of the control tick this sample made, or None.
        """
        state = self.backend.step()
        stamp = self.stamp_ns(state.step_count)
        sample = self.backend.sensor_sample()
        self._observe(state)
        command = self.whole_body.observe(stamp, sample)
        if command is not None:
            self._apply(command)
        before = self.planner_stage.timeline
        tick = self.planner_stage.observe(stamp, sample)
        if tick.ticked:
            self._score_landings((stamp - ORIGIN_NS) / NS_PER_S, state, before)
        record = None
        if tick.reference is not None:
            command = self.whole_body.on_reference(tick.reference)
            if command is not None:
                self._apply(command)
                q = self.whole_body.configuration
                record = TickRecord((stamp - ORIGIN_NS) / NS_PER_S, state, tick.output, q, not command.held)
        if tick.ahead is not None:
            self.whole_body.on_reference_ahead(tick.ahead)
        if self.adjuster is not None and not (self.recovery is not None and self.recovery.recovering):
            self._adjust_steps(stamp, sample)  # (a recovery walk's steps are the recovery's)
        if self.recovery is not None:
            self._recover(stamp, sample)
        return record

    def _recover(self, stamp: int, sample) -> None:
        """Standing recovery steps on this sample: a recovery walk from the standing feet, or its steps moved,
        to both stages (as the walk behavior publishes it after the sample)."""
        plan = self.plan
        t = (stamp - plan.stamp_ns) / NS_PER_S
        steps = self.recovery.observe(t, plan.timeline, sample)
        if steps is None:
            return
        if plan.timeline.walking_at(t):  # the recovery walk's steps moved: the same walk (stamp)
            first = plan.timeline.phases[0]
            timeline = Timeline(first.left, first.right, steps, plan.timeline.timing, first.t_start)
            self._set_plan(WalkPlan(plan.plan_id + 1, True, plan.stamp_ns, timeline))
            return
        phase = plan.timeline.phase_at(t)
        timeline = Timeline(phase.left, phase.right, steps, self.recovery.timing())
        self._set_plan(WalkPlan(plan.plan_id + 1, True, stamp, timeline))

    def _set_plan(self, plan: WalkPlan) -> None:
        """``plan`` to both stages (a new plan id)."""
        self.plan = plan
        self.plans.append(plan)
        self.planner_stage.set_plan(plan)
        self.whole_body.set_plan(plan)

    def _adjust_steps(self, stamp: int, sample) -> None:
        """Step adjustment on this sample: an adjusted plan to both stages (as the walk behavior publishes
        it after the sample)."""
        plan = self.plan
        steps = self.adjuster.observe((stamp - plan.stamp_ns) / NS_PER_S, plan.timeline, sample)
        if steps is None:
            return
        first = plan.timeline.phases[0]
        timeline = Timeline(first.left, first.right, steps, plan.timeline.timing, first.t_start)
        self._set_plan(WalkPlan(plan.plan_id + 1, True, plan.stamp_ns, timeline))

    def run(self, until: Optional[float] = None,
            on_tick: Optional[Callable[[TickRecord], None]] = None) -> WalkOutcome:
        """Step until ``until`` [s] (default: end of the timeline + ``settle_time``) or a fall.

        Args:
            until: End time [s] on the backend's clock.
            on_tick: Called with each control tick's record (tracing, plots).
        """
        watch = until is None
        if until is None:
            until = self.original_timeline.t_end + self.params.settle_time
        start = _time.perf_counter()
        while self.backend.time < until - 1e-9 and not self.fallen:
            record = self.step()
            if record is not None and on_tick is not None:
                on_tick(record)
        # A late fall: watched until the robot has settled (or settle_wait has passed).
        deadline = self.backend.time + self.params.settle_wait
        while watch and not self.fallen and not self.settled() and self.backend.time < deadline - 1e-9:
            record = self.step()
            if record is not None and on_tick is not None:
                on_tick(record)
        return self.outcome(_time.perf_counter() - start)

    @property
    def fall_reason(self) -> str:
        """Why the walk counts as a fall ("" if it did not fall)."""
        return self.falls.reason

    def settled(self) -> bool:
        """Whether the CoM and the base are nearly still (simulator truth)."""
        state = self.backend.state
        q, v = np.asarray(state.q), np.asarray(state.v)
        pin.centerOfMass(self.robot.model, self.robot.data, q, v, False)
        speed = float(np.linalg.norm(self.robot.data.vcom[0]))
        turning = float(np.linalg.norm(v[3:6]))
        return speed < self.params.settled_speed and turning < 10.0 * self.params.settled_speed

    def outcome(self, wall_time: float = 0.0) -> WalkOutcome:
        """The outcome so far (``wall_time`` [s] as measured by the caller)."""
        last = self.original_timeline.phases[-1]
        middle = (np.asarray(last.left.position)[:2] + np.asarray(last.right.position)[:2]) / 2
        com = np.asarray(self.backend.state.com)[:2]
        falls = self.falls
        return WalkOutcome(falls.fallen, falls.max_tilt, falls.min_height_ratio, dict(self._landing),
                           dict(self._corrected_landing), float(np.linalg.norm(com - middle)),
                           self._ik_failures, float(self.backend.time), float(wall_time),
                           dict(self._landing_yaw))

    # ------------------------------------------------------------------ internals
    def _apply(self, command: JointCommand) -> None:
        """The command to the backend, as the sim node applies a joint trajectory stamped at the sample."""
        self._ik_failures += command.status == WholeBodyStatus.IK_FAILED
        if self.keep_commands:
            self.commands.append(command)
        self.backend.set_trajectory(JointTrajectoryCommand(
            self.whole_body.joint_names, command.times, command.positions,
            stamp=(command.stamp_ns - ORIGIN_NS) / NS_PER_S, velocities=command.velocities))

    def _observe(self, state: SimState) -> None:
        """Fall detection on the simulator's truth (scoring)."""
        self.falls.observe(state)

    def _score_landings(self, t: float, state: SimState, before: Optional[Timeline]) -> None:
        """Landing errors (simulator truth) of a step that has settled at this tick, to the original plan and
        to the planner's corrected plan before this tick."""
        q = np.asarray(state.q)

        def measure(foot: Foot) -> FootPose:
            position, rotation = self.robot.frame_pose(q, self._frames[foot])
            return FootPose(tuple(float(v) for v in position), yaw_of(rotation))

        correction = self._scorer.observe(t, measure)
        if correction is None or correction.step_index <= 0:
            return
        index = correction.step_index
        self._landing[index] = correction.position_error
        self._landing_yaw[index] = correction.yaw_error
        planned = [s for s in (before.steps if before is not None else ()) if s.step_index == index]
        if planned:
            offset = np.asarray(correction.measured.position)[:2] - np.asarray(planned[0].position)[:2]
            self._corrected_landing[index] = float(np.linalg.norm(offset))


def walk(robot: RobotModel, backend: SimBackend, timeline: Timeline, **kwargs) -> WalkOutcome:
    """Run :class:`ClosedLoopWalk` (same arguments) to the end of the timeline; the outcome."""
    if not isinstance(timeline, Timeline):
        raise InputError("timeline", timeline, "a Timeline")
    return ClosedLoopWalk(robot, backend, timeline, **kwargs).run()


__all__ = ["DEFAULT_FEEDBACK_GAIN", "ClosedLoopParameters", "ClosedLoopWalk", "FallDetector", "TickRecord",
           "WalkOutcome", "default_planner_parameters", "standing_com_height", "walk"]
