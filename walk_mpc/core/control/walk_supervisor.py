"""The walk behavior on the sensor time base, watched: what the ``walk_behavior`` node decides, without ROS.

:class:`WalkSupervisor` wraps the Atlas-style state machine
(:class:`~walk_mpc.core.walk.behavior.WalkBehavior`) with everything a tick of the graph decides around it:

* **Time base** (seed 001: the hardware cycle drives the loop): the behavior advances on every accepted
  sample to its stamp (core time = stamp - stamp of the first sample, integer nanoseconds). Stamps go
  through a :class:`~walk_mpc.core.control.stamps.StampGuard`: a rogue stamp (far ahead of the steady
  clock, or not later than the last one) is rejected and leaves the time base as it was; a consistent new
  time base (a restarted simulator's clock) is re-anchored on, as after an outage.
* **Control ticks**: the samples whose stamp reaches the next multiple of ``control_period`` after the
  previous tick publish the status (``walk/status``) and the goal's feedback.
* **Measured feet**: sole poses by forward kinematics of the tick's sample (joints + base estimate), for
  the feedback and as the start of a walk from Stand.
* **Outages**: a walk ends with SENSOR_TIMEOUT when no sample arrives for ``sensor_timeout`` of steady time
  (:meth:`check_timeouts`), or when two consecutive stamps are further apart (the samples resume after an
  outage); Stand is then re-anchored at the measured feet.
* **Liveness of the chain** (``watch_links``): every watched component (``mpc_planner``, ``ik``) reports
  each tick (:meth:`report`). While walking, a component silent for ``link_timeout`` of steady time or of
  sensor time ends the walk ("no ik/timing for 0.30 s: is the ik running?"), and a goal is refused while
  one is silent; a component reporting a failure ends it too, with its reason. The ik waiting for a walk's
  first references (WAITING_FOR_REFERENCES) is alive; when they never come (REFERENCE_STALE) the walk
  ends as the planner's failure (PLANNER_FAILURE, "... is the mpc_planner running?").
* **Deadlines** (:meth:`deadlines`): the hardware's count of samples whose command came after the next
  sample was due (the sim node's ``sim/deadlines``). While walking, when more than
  ``max_missed_deadline_share`` of the last ``deadline_window`` samples missed their deadline, the walk
  ends (DEADLINES_MISSED: the swinging step finishes, then catch and Stand) rather than walk on stale
  commands.
* **Plans**: a changed timeline or behavior gives a new :class:`~walk_mpc.core.control.types.WalkPlan`
  (``plan_id`` + 1, stamped at the timeline's t = 0); in Stand after a walk, the final feet without steps.
* **Velocity walking** (:meth:`velocity`, ``cmd_vel``): the command is stamped with the sensor time of the
  last sample and followed by a :class:`~walk_mpc.core.walk.velocity.VelocityWalk`, streamed into the same
  step queue before the behavior advances on each sample: from Stand a fresh nonzero command starts an
  open walk (goal id a :class:`VelocityWalkId`, look-ahead ``velocity.lookahead``) at the measured feet;
  while it walks, the one uncommitted step follows the latest command; a zero or timed-out command closes
  the stance and the walk ends normally (NONE). Coexistence with Walk goals, latest wins:

  - a nonzero command while a Walk goal walks preempts it at once (the goal ends PREEMPTED "preempted by
    cmd_vel"; its committed steps are walked, the velocity steps follow them without stopping); while the
    goal is stopping (cancel, error, last step), the velocity walk starts from Stand after it;
  - a Walk goal while a velocity walk runs: if it follows on (Atlas preemption rule) it preempts at once;
    otherwise (a goal planned from step 1, the usual case) the velocity walk closes its stance (its
    committed steps cannot change) and ends PREEMPTED "preempted by goal ...", and the goal starts from
    Stand at the measured feet right after (it waits, accepted; a cancel or a newer nonzero command ends
    it, CANCELED or PREEMPTED "preempted by cmd_vel"). A goal clears the command: only a later cmd_vel
    preempts it.
* **Goal poses** (:meth:`goal_pose`, ``walk/goal_pose``): footsteps to a pose by
  :func:`~walk_mpc.core.walk.footsteps.walk_to_pose` from the measured feet, a goal with a
  :class:`GoalPoseId`; a running walk is stopped first (see the method).

Every call returns a :class:`SupervisorOutput`: the status to publish (on control ticks), the plan to
publish if it changed, and the goals that ended.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Hashable, Optional, Sequence

from walk_mpc.core.body.robot import RobotModel, yaw_of
from walk_mpc.core.control.landings import LandingMonitor, LandingParameters
from walk_mpc.core.control.recovery_step import RecoveryStepParameters, RecoveryStepper, check_crossing
from walk_mpc.core.control.stamps import StampGuard, StampGuardParameters, StampVerdict
from walk_mpc.core.control.step_adjustment import StepAdjuster, StepAdjustmentParameters
from walk_mpc.core.control.types import (
    NS_PER_S,
    Log,
    PlannerStatus,
    WalkPlan,
    WholeBodyStatus,
    default_log,
    optional_steady,
)
from walk_mpc.core.errors import InputError, ParameterError, WalkMpcError
from walk_mpc.core.params import check_nonnegative, check_positive
from walk_mpc.core.sensors import SensorSample, check_sample
from walk_mpc.core.walk.behavior import (
    NUM_REQUIRED_WALK_STEPS,
    Behavior,
    GoalAnswer,
    QueueAnswer,
    Rejection,
    WalkBehavior,
    WalkErrorCode,
    WalkResult,
    WalkStatus,
    steps_from_records,
)
from walk_mpc.core.walk.footsteps import walk_to_pose
from walk_mpc.core.walk.saturation import wrap_angle
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, Timeline
from walk_mpc.core.walk.velocity import VelocityCommand, VelocityWalk, VelocityWalkParameters

#: Error code of a walk ended by each watchable component.
LINK_ERRORS = {"mpc_planner": WalkErrorCode.PLANNER_FAILURE, "ik": WalkErrorCode.IK_FAILURE}

#: What a component's failure status means, in words (the walk's result names the component and the cause,
#: never a bare status number).
STATUS_CAUSES = {
    ("mpc_planner", PlannerStatus.INFEASIBLE): "no ZMP inside the support regions",
    ("mpc_planner", PlannerStatus.SOLVER_FAILED): "the MPC's QP solver failed",
    ("mpc_planner", PlannerStatus.PLANNER_ERROR): "the planner refused its inputs",
    ("mpc_planner", PlannerStatus.REFERENCE_OUT_OF_REACH): "its CoM targets left the reach of the feet",
    ("ik", WholeBodyStatus.IK_FAILED): "an IK solve did not converge, the last command is held",
    ("ik", WholeBodyStatus.BAD_REFERENCE): "it rejected a CoM reference, the last command is held",
    ("ik", WholeBodyStatus.TARGETS_ERROR): "its targets could not be built, the last command is held",
    ("ik", WholeBodyStatus.REFERENCE_STALE): "no CoM reference came for the walk, the robot stands",
    ("ik", WholeBodyStatus.PLAN_REFUSED): "the plan puts the feet where the robot does not stand, it stands",
}

#: Message of a Walk goal preempted by a velocity command.
PREEMPTED_BY_CMD_VEL = "preempted by cmd_vel"


@dataclasses.dataclass(frozen=True)
class VelocityWalkId:
    """Goal id of a velocity walk (``cmd_vel``), numbered from 1 in each supervisor."""

    number: int

    def __str__(self) -> str:
        return f"cmd_vel walk {self.number}"


@dataclasses.dataclass(frozen=True)
class GoalPoseId:
    """Goal id of a walk to a goal pose (``walk/goal_pose``), numbered from 1 in each supervisor."""

    number: int

    def __str__(self) -> str:
        return f"goal pose {self.number}"


@dataclasses.dataclass(frozen=True)
class RecoveryStepId:
    """Goal id of a standing recovery walk (:mod:`.recovery_step`), numbered from 1 in each supervisor."""

    number: int

    def __str__(self) -> str:
        return f"recovery step {self.number}"


@dataclasses.dataclass(frozen=True)
class GoalPoseParameters:
    """Step sizes of the walks to a goal pose (:func:`~walk_mpc.core.walk.footsteps.walk_to_pose`; the step
    duration, swing height and width are the velocity walk's).

    Attributes:
        step_length: Largest forward advance of the stance center per step [m].
        lateral_step: Largest sideways advance per step [m].
        max_step_yaw: Largest turn per step [rad].
    """

    step_length: float = 0.2
    lateral_step: float = 0.05
    max_step_yaw: float = 0.3

    def __post_init__(self) -> None:
        check_positive("step_length", self.step_length)
        check_positive("lateral_step", self.lateral_step)
        check_positive("max_step_yaw", self.max_step_yaw)


@dataclasses.dataclass(frozen=True)
class WalkSupervisorParameters:
    """Parameters of :class:`WalkSupervisor`.

    Attributes:
        behavior: Gait timing and step limits of the state machine.
        control_period: Period of the status ticks in sensor-stamp time [s].
        sensor_timeout: Steady time without samples that ends a walk [s]; consecutive stamps further apart
            are an outage (Stand re-anchored at the measured feet).
        initial_feet: (left, right) sole poses until a measurement replaces them.
        watch_links: Components whose reports (:meth:`WalkSupervisor.report`) must keep coming while walking:
            any of ``mpc_planner`` and ``ik``.
        link_timeout: Steady or sensor time [s] without a report of a watched component that ends a walk.
        link_topics: Topic of each watched component's reports, for the messages (default
            ``<component>/timing``).
        stamps: The sample stamp guard.
        landings: Touchdowns from the contact forces: a walk the clock completed succeeds only when every step
            lifted off, landed and (with measured feet) landed within tolerance (else LANDING_NOT_MEASURED).
        sensor_topic: Name of the sample stream, for the messages.
        fall_topic: Name of the fall detector's output, for the messages.
        first_plan_id: ``plan_id`` of the first plan (a restarted node should not reuse the ids of its
            previous run: the consumers install a plan whose id differs from the one they follow).
        max_missed_deadline_share: Share of missed control deadlines over ``deadline_window`` samples
            beyond which a walk ends (DEADLINES_MISSED); 1.0 never ends one.
        deadline_window: Number of measured samples [-] the share is taken over (100 = 1 s at 10 ms).
        deadline_topic: Name of the deadline accounting input, for the messages.
        velocity: Velocity walking (``cmd_vel``): speed limits, gait, command timeout, look-ahead.
        goal_pose: Step sizes of the walks to a goal pose (``walk/goal_pose``).
        stand_follow_distance: Standing on both feet (both carry weight), a measured sole this far [m] from
            Stand's (3D: a sole Stand has in the air too) for ``stand_follow_time`` re-anchors Stand at the
            measured feet (the robot stands elsewhere than planned: a walk_behavior restarted mid-walk
            measured a foot in the air, a stage stopped safely off the plan); 0: Stand never follows.
        stand_follow_yaw: The same for a sole's yaw [rad].
        stand_follow_time: How long [s] (sensor time) the feet must stay off Stand's before it follows.
        initial_stance_wait: At its start (its first samples), Stand is anchored at the measured feet once
            both carry weight, and no plan goes out before: a walk_behavior restarted while the mpc_planner
            and ik finish its predecessor's walk would otherwise stop that walk with Stand's foot where the
            swinging sole happened to be. After this long [s] (sensor time) with a foot still unloaded (the
            robot stands on one foot), Stand is anchored anyway.
        step_adjustment: Step adjustment from the measured DCM (:mod:`.step_adjustment`; needs the robot):
            on every sample of a walk, a swinging step the DCM error needs elsewhere is moved (within the
            behavior's step limits; committed indices stay) and the adjusted plan published; with its
            ``adapt_timing``, its touchdown also moved in time (its duration) and the next step moved out.
            Disabled by default: never called.
        recovery_step: Standing recovery steps from the measured DCM (:mod:`.recovery_step`; needs the robot):
            standing, when the DCM leaves the support polygon, a recovery walk (goal id a
            :class:`RecoveryStepId`, its own quick timing, within the behavior's step limits) starts at once;
            its steps follow the DCM until they land, then the robot stands again. Goals are refused while
            it walks. Disabled by default: never called.
    """

    behavior: WalkBehavior.Parameters = dataclasses.field(default_factory=WalkBehavior.Parameters)
    control_period: float = 0.02
    sensor_timeout: float = 0.1
    initial_feet: tuple = (FootPose((0.0, 0.085, 0.0), 0.0), FootPose((0.0, -0.085, 0.0), 0.0))
    watch_links: tuple = ()
    link_timeout: float = 0.3
    link_topics: tuple = ()
    stamps: StampGuardParameters = dataclasses.field(default_factory=StampGuardParameters)
    landings: LandingParameters = dataclasses.field(default_factory=LandingParameters)
    sensor_topic: str = "sensor_state"
    fall_topic: str = "fall"
    first_plan_id: int = 1
    max_missed_deadline_share: float = 0.3
    deadline_window: int = 100
    deadline_topic: str = "sim/deadlines"
    velocity: VelocityWalkParameters = dataclasses.field(default_factory=VelocityWalkParameters)
    goal_pose: GoalPoseParameters = dataclasses.field(default_factory=GoalPoseParameters)
    stand_follow_distance: float = 0.02
    stand_follow_yaw: float = 0.05
    stand_follow_time: float = 0.2
    initial_stance_wait: float = 1.0
    step_adjustment: StepAdjustmentParameters = dataclasses.field(default_factory=StepAdjustmentParameters)
    recovery_step: RecoveryStepParameters = dataclasses.field(default_factory=RecoveryStepParameters)

    def __post_init__(self) -> None:
        if not isinstance(self.step_adjustment, StepAdjustmentParameters):
            raise ParameterError("step_adjustment", self.step_adjustment, "a StepAdjustmentParameters")
        if not isinstance(self.recovery_step, RecoveryStepParameters):
            raise ParameterError("recovery_step", self.recovery_step, "a RecoveryStepParameters")
        recovery, shortest = self.recovery_step, self.behavior.limits.min_duration
        if recovery.enabled and recovery.double_support_duration >= shortest:
            raise ParameterError("recovery_step.double_support_duration", recovery.double_support_duration,
                                 f"less than behavior.limits.min_duration = {shortest} s")
        if not isinstance(self.goal_pose, GoalPoseParameters):
            raise ParameterError("goal_pose", self.goal_pose, "a GoalPoseParameters")
        if not isinstance(self.behavior, WalkBehavior.Parameters):
            raise ParameterError("behavior", self.behavior, "a WalkBehavior.Parameters")
        if not isinstance(self.velocity, VelocityWalkParameters):
            raise ParameterError("velocity", self.velocity, "a VelocityWalkParameters")
        try:
            self.velocity.check_against(self.behavior.limits, self.behavior.timing)
        except ParameterError as exc:
            raise ParameterError(f"velocity.{exc.name}", exc.value, exc.expected) from None
        check_positive("control_period", self.control_period)
        check_positive("sensor_timeout", self.sensor_timeout)
        check_positive("link_timeout", self.link_timeout)
        if len(self.initial_feet) != 2 or not all(isinstance(f, FootPose) for f in self.initial_feet):
            raise ParameterError("initial_feet", self.initial_feet, "(left, right) FootPose")
        object.__setattr__(self, "watch_links", tuple(self.watch_links))
        unknown = [name for name in self.watch_links if name not in LINK_ERRORS]
        if unknown:
            raise ParameterError("watch_links", list(self.watch_links), f"names among {sorted(LINK_ERRORS)}")
        object.__setattr__(self, "link_topics", tuple(self.link_topics))
        if self.link_topics and len(self.link_topics) != len(self.watch_links):
            raise ParameterError("link_topics", list(self.link_topics), "one topic per watched link")
        if not isinstance(self.stamps, StampGuardParameters):
            raise ParameterError("stamps", self.stamps, "a StampGuardParameters")
        if isinstance(self.first_plan_id, bool) or not isinstance(self.first_plan_id, int) or not (
                1 <= self.first_plan_id < 2**31):
            raise ParameterError("first_plan_id", self.first_plan_id, "an integer in [1, 2^31)")
        if not isinstance(self.landings, LandingParameters):
            raise ParameterError("landings", self.landings, "a LandingParameters")
        check_nonnegative("stand_follow_distance", self.stand_follow_distance)
        check_positive("stand_follow_yaw", self.stand_follow_yaw)
        check_positive("stand_follow_time", self.stand_follow_time)
        check_nonnegative("initial_stance_wait", self.initial_stance_wait)
        share = self.max_missed_deadline_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
            raise ParameterError("max_missed_deadline_share", share, "a share in [0, 1]")
        window = self.deadline_window
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ParameterError("deadline_window", window, "a positive number of samples")


@dataclasses.dataclass(frozen=True)
class SupervisorOutput:
    """What one call of :class:`WalkSupervisor` produced.

    Attributes:
        status: The status of a control tick (publish it and the goal's feedback), else None.
        plan: The new plan when the timeline or behavior changed, else None.
        results: Goals that ended during the call.
        rejected: Why a sample was not used ("" if used or not a sample).
        velocity: The command taken by :meth:`WalkSupervisor.velocity` (its ``message`` says what was
            clamped), else None.
    """

    status: Optional[WalkStatus] = None
    plan: Optional[WalkPlan] = None
    results: tuple = ()
    rejected: str = ""
    velocity: Optional[VelocityCommand] = None


@dataclasses.dataclass
class _Link:
    topic: str
    steady_ns: Optional[int] = None  # steady clock of the last report
    stamp_ns: Optional[int] = None  # stamp of the last report (sensor time)
    silent_ns: int = 0  # sensor time the samples flowed without a report (gaps of the stream excluded)
    reported: bool = False  # a report came since the previous sample


class WalkSupervisor:
    """The walk behavior on the sensor time base, with outages and liveness (see the module docstring).

    Args:
        params: Parameters.
        robot: Model for the measured feet (a biped), or None not to measure them.
        log: Where decisions are logged (default: the ``walk_mpc.walk_supervisor`` logger).

    Raises:
        ParameterError: A robot that is not a biped.
    """

    Parameters = WalkSupervisorParameters

    def __init__(self, params: Optional[WalkSupervisorParameters] = None, robot: Optional[RobotModel] = None,
                 log: Optional[Log] = None) -> None:
        self.params = params if params is not None else WalkSupervisorParameters()
        if robot is not None and not robot.is_biped:
            raise ParameterError("robot", robot.name,
                                 "a biped (left and right sole frames) to measure the feet")
        self.robot = robot
        if robot is not None and self.params.behavior.limits.max_crossover_width > 0.0:
            check_crossing(robot, self.params.behavior.limits.max_crossover_width,
                           "behavior.limits.max_crossover_width")
        self._log = log if log is not None else default_log("walk_supervisor")
        self._period_ns = int(round(self.params.control_period * NS_PER_S))
        self._timeout_ns = int(round(self.params.sensor_timeout * NS_PER_S))
        self._link_ns = int(round(self.params.link_timeout * NS_PER_S))
        topics = self.params.link_topics or tuple(f"{name}/timing" for name in self.params.watch_links)
        self._topics = dict(zip(self.params.watch_links, topics))
        self.reset()

    def reset(self) -> None:
        """Back to Stand at the initial feet, no time base, no measurement."""
        left, right = self.params.initial_feet
        self._core = WalkBehavior(self.params.behavior, left, right)
        self._guard = StampGuard(self.params.stamps)
        self._landings = LandingMonitor(self.params.landings)
        self._origin_ns: Optional[int] = None
        self._next_tick_ns = 0
        self._last_sample_steady: Optional[int] = None
        self._last_check_steady: Optional[int] = None
        self._check_deferred = False  # the last check decided nothing (it came late)
        self.starved_checks = 0
        self._last_stamp_ns: Optional[int] = None
        self._measured: Optional[dict] = None
        self._loads: Optional[dict] = None  # foot -> carries weight, in the last sample (None: unknown)
        self._anchored = False  # Stand anchored at the first measured stance (initial_stance_wait)
        self._off_stand_since: Optional[float] = None  # sensor time [s] the feet stand off Stand's since
        self._fallen = False
        self._plan_id = self.params.first_plan_id - 1
        self._plan_timeline: Optional[Timeline] = None
        self._plan_walking: Optional[bool] = None
        self._rejecting = ""
        self._links = {name: _Link(topic) for name, topic in self._topics.items()}
        self._deadline_counts: list = []  # (measured, missed) totals reported, oldest first
        self.rejected_samples = 0
        behavior = self.params.behavior
        self._velocity = VelocityWalk(self.params.velocity, behavior.limits, behavior.timing)
        self._velocity_walks = 0  # velocity walks started (their ids)
        self._velocity_sent: Optional[tuple] = None  # (steps, plan_complete) last queued by the stream
        self._velocity_stopping_logged = False
        self._deferred: Optional[tuple] = None  # (goal_id, steps, plan_complete, pose) waiting for Stand
        self._goal_poses = 0  # goal poses received (their ids)
        adjust = self.params.step_adjustment
        self._adjuster = (StepAdjuster(self.robot, adjust, self.params.behavior.limits)
                          if adjust.enabled and self.robot is not None else None)
        recovery = self.params.recovery_step
        self._recovery = (RecoveryStepper(self.robot, recovery, self.params.behavior.limits)
                          if recovery.enabled and self.robot is not None else None)
        self._recoveries = 0  # recovery walks started (their ids)

    # ------------------------------------------------------------------ read-only state
    @property
    def behavior(self) -> WalkBehavior:
        """The state machine (read-only use)."""
        return self._core

    @property
    def walking(self) -> bool:
        """Whether a walk is in progress."""
        return self._core.behavior is Behavior.WALK

    @property
    def measured_feet(self) -> Optional[dict]:
        """Foot -> measured sole pose of the last control tick, or None."""
        return None if self._measured is None else dict(self._measured)

    @property
    def plan_id(self) -> int:
        """Id of the last plan produced (``first_plan_id - 1``: none yet)."""
        return self._plan_id

    @property
    def velocity_walk(self) -> VelocityWalk:
        """The velocity command follower (read-only use)."""
        return self._velocity

    @property
    def recovering(self) -> bool:
        """Whether the walk in progress is a standing recovery walk."""
        return self.walking and isinstance(self._core.goal_id, RecoveryStepId)

    @property
    def velocity_walking(self) -> bool:
        """Whether the walk in progress is a velocity walk."""
        return self.walking and isinstance(self._core.goal_id, VelocityWalkId)

    @property
    def waiting_goal(self) -> Optional[Hashable]:
        """The Walk goal waiting for a velocity walk to close its stance, else None."""
        return None if self._deferred is None else self._deferred[0]

    # ------------------------------------------------------------------ sensor samples
    def observe(self, stamp_ns: int, sample: SensorSample,
                steady_ns: Optional[int] = None) -> SupervisorOutput:
        """One sensor sample: advance the behavior to its stamp; on control ticks measure the feet and report.

        A sample that fails :func:`~walk_mpc.core.sensors.check_sample` or the stamp guard changes nothing
        (``rejected`` says why).
        """
        steady_ns = optional_steady(steady_ns)
        try:
            check_sample(sample)
        except WalkMpcError as exc:
            return self._reject(f"sample rejected: {exc}")
        verdict = self._guard.check(int(stamp_ns), steady_ns)
        if not verdict.accepted:
            return self._reject(f"sample stamped {stamp_ns / NS_PER_S:.9f} s rejected: {verdict.value} "
                                f"(last accepted {self._guard.last_stamp_ns / NS_PER_S:.9f} s)")
        if self._rejecting:
            self._log.info(f"sensor samples accepted again after {self._rejecting}")
            self._rejecting = ""
        results: list = []
        self._last_sample_steady = steady_ns
        first = self._origin_ns is None
        if first:
            self._origin_ns = self._next_tick_ns = stamp_ns
        gap_ns = 0 if first else stamp_ns - self._last_stamp_ns
        self._last_stamp_ns = stamp_ns
        tick = stamp_ns + self._period_ns // 4 >= self._next_tick_ns
        if tick or verdict is StampVerdict.REANCHORED:
            self._next_tick_ns += self._period_ns
            if self._next_tick_ns <= stamp_ns or verdict is StampVerdict.REANCHORED:
                self._next_tick_ns = stamp_ns + self._period_ns  # a gap in the stream: restart the ticks
            self._measure(sample)
        if not self._anchored:
            self._anchor_initial_stance(stamp_ns, sample)
        if verdict is StampVerdict.REANCHORED:
            self._resume(results, "the sample stamps jumped to a new time base "
                         f"({stamp_ns / NS_PER_S:.3f} s; a restarted clock)")
            self._origin_ns = stamp_ns - round(self._core.time * NS_PER_S)
        elif gap_ns > self._timeout_ns:
            self._resume(results, f"no SensorState on '{self.params.sensor_topic}' for "
                         f"{gap_ns / NS_PER_S:.3f} s (two stamps that far apart; sensor_timeout "
                         f"{self.params.sensor_timeout} s)")
        self._check_links_by_stamp(min(gap_ns, self._period_ns), results)
        t = (stamp_ns - self._origin_ns) / NS_PER_S
        self._stream(t, results)  # the velocity walk's steps are queued before the touchdowns that need them
        walking = self.walking
        self._loads = self._landings.loads(sample)
        if tick and not walking:
            self._follow_measured_stance(t)
        status = self._core.step(max(0.0, t - self._core.time))
        if walking:
            self._landings.observe(status.t, status.phase, self._loads, self._measured if tick else None)
        if status.result is not None:
            results.append(self._checked(status.result))
        elif self._recovery is not None and (self.recovering or not walking):
            status = self._recover(status, sample)
        elif self._adjuster is not None and walking:
            status = self._adjust_steps(status, sample)
        if self._recovery is not None and walking and not self.recovering:
            self._recovery.other_walk()  # not standing: no decision
        started = self._after_results(results)
        if tick and status.support_foot is not None and self._measured is not None:
            measured = self._measured[status.support_foot]
            status = dataclasses.replace(status, measured_support_foot_pose=measured)
        plan = self._plan_if_changed() if started else self._plan_if_changed(status.timeline)
        return SupervisorOutput(status if tick else None, plan, tuple(results))

    @property
    def step_adjuster(self) -> Optional[StepAdjuster]:
        """The step adjuster (None when disabled)."""
        return self._adjuster

    @property
    def recovery_stepper(self) -> Optional[RecoveryStepper]:
        """The standing recovery stepper (None when disabled)."""
        return self._recovery

    def _recover(self, status: WalkStatus, sample: SensorSample) -> WalkStatus:
        """Standing recovery on this sample: standing, a recovery walk when the DCM has left the support
        polygon (none after a fall, or while a goal waits); recovering, its steps moved as the DCM needs."""
        core = self._core
        if not self.walking and (self._fallen or self._deferred is not None or self._origin_ns is None):
            return status
        steps = self._recovery.observe(core.time, status.timeline, sample)
        if steps is None:
            return status
        if self.walking:
            if core.adjust_steps(steps):
                return dataclasses.replace(core.status, t_step_rem=status.t_step_rem, result=status.result)
            return status
        gid = RecoveryStepId(self._recoveries + 1)
        answer = core.submit_goal(steps, True, goal_id=gid, timing=self._recovery.timing(),
                                  limits=self._recovery.walk_limits())
        if not answer.accepted:
            self._log.warning(f"{gid} refused: {answer.rejection.message}")
            return status
        self._recoveries += 1
        self._landings.reset()
        last = self._recovery.last
        where = ", ".join(f"{foot.lower()} to ({x:.3f}, {y:.3f}) m" for foot, x, y in last["steps"])
        self._log.warning(f"{gid}: the DCM ({last['dcm'][0]:.3f}, {last['dcm'][1]:.3f}) m is "
                          f"{last['outside']:.3f} m outside the support polygon at t = {core.time:.3f} s: "
                          f"stepping {where}")
        return dataclasses.replace(core.status, result=status.result)

    def _adjust_steps(self, status: WalkStatus, sample: SensorSample) -> WalkStatus:
        """Step adjustment on this sample: the moved steps into the behavior (the status shows them)."""
        core = self._core
        steps = self._adjuster.observe(core.time, status.timeline, sample)
        if steps is None:
            return status
        moved = core.adjust_steps(steps)
        if not moved:
            return status
        dx, dy = self._adjuster.last["shift"]
        touchdown = self._adjuster.last.get("touchdown_in")
        timing = "" if touchdown is None else f", touchdown in {touchdown:.3f} s"
        self._log.info(f"goal {goal_name(core.goal_id)}: step {', '.join(map(str, moved))} moved by the DCM "
                       f"error (shift {dx:.3f}, {dy:.3f} m{timing} at t = {core.time:.3f} s)")
        return dataclasses.replace(core.status, t_step_rem=status.t_step_rem, result=status.result)

    def reject(self, reason: str) -> SupervisorOutput:
        """A sample the caller could not even convert (e.g. arrays of mismatched lengths): reported like a
        rejected sample, nothing changes."""
        return self._reject(reason)

    @property
    def landings(self) -> LandingMonitor:
        """The touchdowns and landing errors measured in the current (or last) walk (read-only use)."""
        return self._landings

    def _checked(self, result: WalkResult) -> WalkResult:
        """A walk the clock completed, checked against the touchdowns seen in the contact forces."""
        if result.error_code != WalkErrorCode.NONE:
            return result
        problems = self._landings.problems(range(1, result.last_completed_step_index + 1))
        if not problems:
            return result
        message = f"the steps ran out by the clock, but {'; '.join(problems)}"
        self._log.error(f"goal {goal_name(result.goal_id)}: LANDING_NOT_MEASURED: {message}")
        return dataclasses.replace(result, error_code=WalkErrorCode.LANDING_NOT_MEASURED, error_msg=message)

    def _reject(self, reason: str) -> SupervisorOutput:
        self.rejected_samples += 1
        if not self._rejecting:
            self._log.warning(f"{reason}; the time base is kept")
            self._rejecting = reason
        return SupervisorOutput(rejected=reason)

    def _measure(self, sample: SensorSample) -> None:
        """Measured sole poses of the sample by forward kinematics (None without robot or base estimate)."""
        if self.robot is None:
            return
        self._measured = None
        base = sample.base_pose
        if base is None:
            return
        try:
            names = self.robot.joint_names
            joints = {n: v for n, v in zip(sample.joint_names, sample.joint_pos.tolist()) if n in names}
            q = self.robot.configuration_from_joints(joints, base[0], base[1])
            poses = self.robot.foot_poses(q)
        except WalkMpcError as exc:
            self._log.warning(f"feet not measured: {exc}")
            return
        frames = {Foot.LEFT: self.robot.left_foot_frame, Foot.RIGHT: self.robot.right_foot_frame}
        self._measured = {foot: FootPose(tuple(float(v) for v in poses[frame][0]), yaw_of(poses[frame][1]))
                          for foot, frame in frames.items()}

    def _anchor_initial_stance(self, stamp_ns: int, sample: SensorSample) -> None:
        """Stand at the measured feet once both carry weight (or after ``initial_stance_wait``); nothing
        measured (no robot, no base pose): Stand stays at the initial feet."""
        if self._measured is None:
            self._anchored = True
            return
        loads = self._landings.loads(sample)
        waited = (stamp_ns - self._origin_ns) / NS_PER_S
        if loads is not None and not all(loads.values()) and waited < self.params.initial_stance_wait:
            return  # a sole in the air: a walk of the former walk_behavior may still be landing it
        if loads is not None and not all(loads.values()):
            self._log.warning(f"a foot still carries no weight after {waited:.2f} s: Stand anchored at the "
                              "measured feet all the same")
        self._core.reset(self._measured[Foot.LEFT], self._measured[Foot.RIGHT])
        self._anchored = True

    def _follow_measured_stance(self, t: float) -> None:
        """Standing on both measured feet away from Stand's for ``stand_follow_time``: Stand moves there."""
        params = self.params
        measured, loads = self._measured, self._loads
        if (params.stand_follow_distance <= 0.0 or measured is None or loads is None
                or not all(loads.values()) or self._deferred is not None):
            self._off_stand_since = None
            return
        distance, off = self._off_stand()
        if not off:
            self._off_stand_since = None
            return
        if self._off_stand_since is None:
            self._off_stand_since = t
        if t - self._off_stand_since < params.stand_follow_time:
            return
        self._off_stand_since = None
        moved = ", ".join(f"{foot.name.lower()} {distance[foot]:.3f} m" for foot in off)
        self._core.reset(measured[Foot.LEFT], measured[Foot.RIGHT])
        self._log.warning(f"standing {params.stand_follow_time} s on feet away from Stand's ({moved}): Stand "
                          "re-anchored at the measured feet")

    def _stop_stance(self) -> tuple:
        """Where to stand when a walk stops at once (a dead node, a lost sensor stream): the measured soles,
        a sole in the air put down below where it is (at its planned height), so that nothing has to step
        to a target the robot never reached (the planned feet of a step that did not happen are up to a step
        length away); (None, None) without a measurement: the planned feet."""
        if self._measured is None:
            return None, None
        phase = self._core.status.phase
        loads = self._loads
        feet = []
        for foot in (Foot.LEFT, Foot.RIGHT):
            measured = self._measured[foot]
            if loads is not None and not loads[foot]:
                planned_z = phase.foot(foot).position[2]
                measured = FootPose((measured.position[0], measured.position[1], planned_z), measured.yaw)
            feet.append(measured)
        return tuple(feet)

    def _resume(self, results: list, why: str) -> None:
        """The samples resumed after an outage: stop a walk, re-anchor Stand at the measured feet."""
        if self.walking:
            self._stop(results, WalkErrorCode.SENSOR_TIMEOUT, why)
        where = "the planned feet (not measured)"
        if self._measured is not None:
            self._core.reset(self._measured[Foot.LEFT], self._measured[Foot.RIGHT])
            where = "the measured feet"
        self._log.warning(f"sensor samples resumed ({why}): standing at {where}")

    def _stop(self, results: list, code: WalkErrorCode, why: str) -> None:
        """End the walk in progress at once with ``code``: Stand where the feet are (:meth:`_stop_stance`)."""
        goal, current = self._core.goal_id, self._core.status.current_step_index
        self._core.reset(*self._stop_stance())
        message = f"{why}: walk stopped at once, behavior Stand"
        self._log.error(f"goal {goal_name(goal)}: {code.name}: {message}")
        results.append(WalkResult(goal, code, message, current))

    # ------------------------------------------------------------------ steady clock
    def check_timeouts(self, steady_ns: int) -> SupervisorOutput:
        """Steady-clock checks while walking (call every control period): the sensor stream and the links.

        While walking, a check more than ``sensor_timeout / 2`` after the previous one decides nothing
        (counted in ``starved_checks``, logged): its caller was busy or starved, and what arrived meanwhile
        is still queued behind it; the next check decides, whenever it comes. A real outage is then reported
        one check later."""
        steady_ns = optional_steady(steady_ns)
        results: list = []
        previous, self._last_check_steady = self._last_check_steady, steady_ns
        late = previous is not None and steady_ns - previous > self._timeout_ns // 2
        if late and self.walking and not self._check_deferred:  # standing, a check decides nothing anyway
            # This check comes late: the caller itself was starved of the CPU (e.g. a node's process under
            # load). The samples and reports that arrived meanwhile wait in its queues and are handled after
            # this call: the next check decides (late or not, so a process starved for good still decides).
            self._check_deferred = True
            self.starved_checks += 1
            late_s = (steady_ns - previous) / NS_PER_S
            self._log.warning(f"timeout check {late_s:.3f} s after the previous one (every "
                              f"{self.params.control_period} s): this process was busy or starved of the "
                              "CPU; the next check decides, after the samples queued meanwhile")
            return SupervisorOutput(plan=self._plan_if_changed())
        self._check_deferred = False
        if self.walking and self._last_sample_steady is not None:
            age = (steady_ns - self._last_sample_steady) / NS_PER_S
            if age > self.params.sensor_timeout:
                self._stop(results, WalkErrorCode.SENSOR_TIMEOUT, f"no SensorState on "
                           f"'{self.params.sensor_topic}' for {age:.3f} s (sensor_timeout "
                           f"{self.params.sensor_timeout} s)")
        # A link is silent when the samples kept coming for link_timeout after its last report (a stalled
        # stream silences every link: the sensor timeout decides then).
        last = self._last_sample_steady
        if self.walking and last is not None:
            for name, link in self._links.items():
                if link.steady_ns is not None and last - link.steady_ns > self._link_ns:
                    self._abort_link(name, (steady_ns - link.steady_ns) / NS_PER_S, results)
                    break
        self._after_results(results)
        return SupervisorOutput(plan=self._plan_if_changed(), results=tuple(results))

    # ------------------------------------------------------------------ the chain
    def report(self, component: str, status: int, stamp_ns: int, reason: str = "",
               steady_ns: Optional[int] = None) -> SupervisorOutput:
        """A component's tick report (``mpc/timing``, ``ik/timing``): it is alive; a non-zero ``status``
        ends the walk with the component's error code and ``reason``."""
        steady_ns = optional_steady(steady_ns)
        link = self._links.get(component)
        if link is not None:
            link.steady_ns, link.stamp_ns = steady_ns, int(stamp_ns)
            link.silent_ns, link.reported = 0, True
        if status == 0 or (component == "ik" and status == WholeBodyStatus.WAITING_FOR_REFERENCES):
            return SupervisorOutput()  # alive (the ik waits for the planner's first references of a walk)
        if component == "ik" and status == WholeBodyStatus.REFERENCE_STALE:
            # The planner's references for the walk never reached the ik: the planner's failure (dead, or
            # following another plan), not the ik's.
            return self.abort(WalkErrorCode.PLANNER_FAILURE, f"the ik got no CoM reference for the walk at "
                              f"stamp {stamp_ns / NS_PER_S:.3f} s: "
                              f"{reason or STATUS_CAUSES[component, status]}")
        if component == "ik" and status == WholeBodyStatus.SAFE_STOP:
            # The ik lost the planner's references and lands the step in progress: the planner's failure.
            return self.abort(WalkErrorCode.PLANNER_FAILURE, "the ik is safe-stopping at stamp "
                              f"{stamp_ns / NS_PER_S:.3f} s: no CoM references: is the mpc_planner running?")
        code = LINK_ERRORS.get(component, WalkErrorCode.PLANNER_FAILURE)
        statuses = PlannerStatus if component == "mpc_planner" else WholeBodyStatus
        try:
            name = statuses(status).name
        except ValueError:
            name = f"unknown status {status}"
        when = f"at stamp {stamp_ns / NS_PER_S:.3f} s"
        if component == "ik" and status == WholeBodyStatus.PLAN_REFUSED:
            return self.abort(code, f"ik refused the plan: {reason or STATUS_CAUSES[component, status]} "
                              f"(ik reported {name} {when})")
        cause = STATUS_CAUSES.get((component, status), "")
        cause = ": ".join(text for text in (cause, reason) if text)
        return self.abort(code, f"{component} reported {name}{': ' + cause if cause else ''} {when}")

    def _check_links_by_stamp(self, step_ns: int, results: list) -> None:
        """Sensor time the samples flowed without a report of each link (``step_ns`` since the previous
        sample, at most a control period: a gap of the stream is the sensor timeout's business, and the links
        need a moment to answer the first sample after it)."""
        for link in self._links.values():
            if link.reported:
                link.reported = False
            elif link.stamp_ns is not None:
                link.silent_ns += step_ns
        if not self.walking:
            return
        for name, link in self._links.items():
            if link.silent_ns > self._link_ns:
                self._abort_link(name, link.silent_ns / NS_PER_S, results, "of sensor samples")
                return

    def _silence(self, name: str, age: float, what: str = "") -> str:
        what = f" {what}" if what else ""
        return f"no {self._links[name].topic} for {age:.2f} s{what}: is the {name} running?"

    def _abort_link(self, name: str, age: float, results: list, what: str = "") -> None:
        self._stop(results, LINK_ERRORS[name], self._silence(name, age, what))

    def silent_link(self, steady_ns: Optional[int]) -> Optional[str]:
        """Why a watched component is silent now (never reported, or not for ``link_timeout``), else None."""
        for name, link in self._links.items():
            if link.steady_ns is None and link.stamp_ns is None:
                return f"no {link.topic} received yet: is the {name} running?"
            if (steady_ns is not None and link.steady_ns is not None
                    and steady_ns - link.steady_ns > self._link_ns):
                return self._silence(name, (steady_ns - link.steady_ns) / NS_PER_S)
        return None

    def deadlines(self, missed: int, measured: int) -> SupervisorOutput:
        """The hardware's deadline accounting: totals of ``missed`` deadlines over ``measured`` samples
        since it started (totals that go down: a restarted counter, counted afresh). While walking, a share
        of misses over the last ``deadline_window`` samples above ``max_missed_deadline_share`` ends the walk
        (DEADLINES_MISSED).

        Raises:
            InputError: Counts that are not integers with ``0 <= missed <= measured`` (nothing changed).
        """
        for name, value in (("missed", missed), ("measured", measured)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(name, value, "a count (integer >= 0)")
        if missed > measured:
            raise InputError("missed", missed, f"at most the {measured} samples measured")
        counts = self._deadline_counts
        if counts and (measured < counts[-1][0] or missed < counts[-1][1]):
            counts.clear()  # the counter restarted
        counts.append((measured, missed))
        window = self.params.deadline_window
        while len(counts) > 1 and measured - counts[1][0] >= window:
            counts.pop(0)  # counts[0] is the newest total at least a window back
        span = measured - counts[0][0]
        if span < window or not self.walking:
            return SupervisorOutput()
        share = (missed - counts[0][1]) / span
        if share <= self.params.max_missed_deadline_share:
            return SupervisorOutput()
        return self.abort(WalkErrorCode.DEADLINES_MISSED,
                          f"{missed - counts[0][1]} of the last {span} sensor samples missed their control "
                          f"deadline ({100 * share:.0f} % > max_missed_deadline_share "
                          f"{100 * self.params.max_missed_deadline_share:.0f} %, "
                          f"'{self.params.deadline_topic}'): the commands are stale, is the machine "
                          "overloaded?")

    def fall(self, fallen: bool) -> SupervisorOutput:
        """The fall detector's state: a fall ends the walk (FALL_DETECTED) and refuses goals until cleared."""
        was, self._fallen = self._fallen, bool(fallen)
        if fallen and not was:
            self._log.error(f"fall detected on '{self.params.fall_topic}'")
        if fallen:
            return self.abort(WalkErrorCode.FALL_DETECTED, f"fall detected ('{self.params.fall_topic}')")
        return SupervisorOutput()

    # ------------------------------------------------------------------ goals
    def refusal(self, steady_ns: Optional[int] = None) -> Optional[tuple]:
        """``(code, message)`` of why no walk can start now (no or stale samples, a fall, a silent
        component), else None."""
        if self._origin_ns is None:
            return (WalkErrorCode.SENSOR_TIMEOUT, f"no SensorState received on '{self.params.sensor_topic}' "
                    "yet: the walk needs the sensor stream (its stamps are the time base)")
        if steady_ns is not None and self._last_sample_steady is not None and not self.walking:
            age = (steady_ns - self._last_sample_steady) / NS_PER_S
            if age > self.params.sensor_timeout:
                return (WalkErrorCode.SENSOR_TIMEOUT, f"no SensorState on '{self.params.sensor_topic}' for "
                        f"{age:.3f} s (sensor_timeout {self.params.sensor_timeout} s)")
        if self._fallen:
            return WalkErrorCode.FALL_DETECTED, f"the robot has fallen ('{self.params.fall_topic}' is true)"
        if not self._anchored:
            return WalkErrorCode.INCONSISTENT_STEPS, (
                "walk_behavior is starting and a foot carries no weight yet (a walk may still be landing "
                "it): send the goal again once walk/plan shows the stance")
        if self.recovering:
            return WalkErrorCode.INVALID_STEP, (f"{self._core.goal_id} is in progress (a push): send the "
                                                "goal again once the robot stands")
        if not self.walking:
            silent = self.silent_link(steady_ns)
            if silent is not None:
                name = next(n for n in self._links if f"is the {n} running" in silent)
                return LINK_ERRORS[name], silent
            unsettled = self._unsettled()
            if unsettled is not None:
                return WalkErrorCode.INCONSISTENT_STEPS, (
                    f"the robot does not stand on Stand's feet yet ({unsettled}): a walk starts from where "
                    "it stands; send the goal again once walk/plan shows its stance")
        return None

    def _unsettled(self) -> Optional[str]:
        """Which measured soles are off Stand's (a robot still moving, or about to be followed), else None
        (or nothing measured)."""
        if self._measured is None or self.params.stand_follow_distance <= 0.0:
            return None
        distance, off = self._off_stand()
        if not off:
            return None
        return ", ".join(f"{foot.name.lower()} sole {distance[foot]:.3f} m off" for foot in off)

    def _off_stand(self) -> tuple:
        """(foot -> distance [m] of the measured sole to Stand's, the feet off by more than the follow
        distance or yaw)."""
        params, measured = self.params, self._measured
        planned = dict(zip((Foot.LEFT, Foot.RIGHT), self._core.feet))
        distance = {foot: math.dist(measured[foot].position, planned[foot].position) for foot in planned}
        off = [foot for foot in planned if distance[foot] > params.stand_follow_distance
               or abs(wrap_angle(measured[foot].yaw - planned[foot].yaw)) > params.stand_follow_yaw]
        return distance, off

    def submit_goal(self, goal_id: Hashable, steps: Sequence[Step], plan_complete: bool,
                    steady_ns: Optional[int] = None) -> tuple[GoalAnswer, SupervisorOutput]:
        """Start or preempt with a goal (refused as the state machine or :meth:`refusal` says).

        Returns:
            The state machine's answer (a refusal before it has ``accepted`` False and a rejection), and the
            output (the preempted goal's result, the new plan).
        """
        refusal = self.refusal(optional_steady(steady_ns))
        if refusal is not None:
            return GoalAnswer(goal_id, False, Rejection(refusal[0], refusal[1])), SupervisorOutput()
        if self._deferred is not None:  # the newer goal replaces the waiting one
            waiting = self._deferred[0]
            self._deferred = None
            message = f"preempted by goal {goal_name(goal_id)}"
            self._log.info(f"goal {goal_name(waiting)}: {message} before it started")
            preempted = (WalkResult(waiting, WalkErrorCode.PREEMPTED, message, 0),)
            answer, output = self.submit_goal(goal_id, steps, plan_complete, steady_ns)
            return answer, dataclasses.replace(output, results=preempted + output.results)
        if self.velocity_walking:
            return self._submit_over_velocity(goal_id, steps, plan_complete)
        standing = self._core.behavior is Behavior.STAND
        if standing and self._measured is not None:
            self._core.reset(self._measured[Foot.LEFT], self._measured[Foot.RIGHT])
        answer = self._core.submit_goal(steps, bool(plan_complete), goal_id=goal_id)
        if answer.accepted:
            self._velocity.clear()  # the goal takes over: only a later cmd_vel preempts it
        if answer.accepted and standing:
            self._landings.reset()  # a new walk (a preempting goal goes on with the same one)
        results = ()
        if answer.preempted is not None:
            message = f"preempted by goal {goal_name(goal_id)}"
            results = (dataclasses.replace(answer.preempted, error_msg=message),)
        return answer, SupervisorOutput(plan=self._plan_if_changed(), results=results)

    def _submit_over_velocity(self, goal_id: Hashable, steps: Sequence[Step],
                              plan_complete: bool) -> tuple[GoalAnswer, SupervisorOutput]:
        """A Walk goal while a velocity walk runs: preempt at once if it follows on, else wait for Stand."""
        walk = self._core.goal_id
        answer = self._core.submit_goal(steps, bool(plan_complete), goal_id=goal_id)
        if answer.accepted:
            self._velocity.clear()
            message = f"preempted by goal {goal_name(goal_id)}"
            self._log.info(f"{walk}: {message} (the goal follows on)")
            result = dataclasses.replace(answer.preempted, error_msg=message)
            return answer, SupervisorOutput(plan=self._plan_if_changed(), results=(result,))
        parsed = steps_from_records(steps)
        fresh = None
        if isinstance(parsed, Rejection):
            fresh = parsed
        elif parsed[0].step_index != 1:
            fresh = answer.rejection  # neither following on nor a walk from Stand
        elif not plan_complete and len(parsed) < NUM_REQUIRED_WALK_STEPS:
            fresh = Rejection(WalkErrorCode.INSUFFICIENT_STEP_DATA, "an open goal (plan_complete false) "
                              f"needs at least {NUM_REQUIRED_WALK_STEPS} steps, got {len(parsed)}")
        if fresh is not None:
            return GoalAnswer(goal_id, False, fresh), SupervisorOutput()
        self._deferred = (goal_id, parsed, bool(plan_complete), None)
        self._velocity.clear()
        results: list = []
        self._stream(self._core.time, results)  # the closing step, now
        last = self._core.status.timeline.steps[-1].step_index
        self._log.info(f"goal {goal_name(goal_id)}: {walk} closes its stance (steps up to {last} are "
                       "committed), then the goal starts from Stand")
        output = SupervisorOutput(plan=self._plan_if_changed(), results=tuple(results))
        return GoalAnswer(goal_id, True), output

    def queue_steps(self, steps: Sequence[Step], plan_complete: bool) -> tuple[QueueAnswer, SupervisorOutput]:
        """Add or replace steps of the running walk (``walk/queue_steps``; refused while velocity walking or
        recovering)."""
        if self.recovering:
            answer = QueueAnswer(False, f"{self._core.goal_id} is in progress (a push): send a Walk goal "
                                 "once the robot stands", self._core.next_step_index_needed,
                                 WalkErrorCode.INVALID_STEP)
            return answer, SupervisorOutput()
        if self.velocity_walking:
            answer = QueueAnswer(False, f"{self._core.goal_id} is walking (cmd_vel): send a Walk goal first",
                                 self._core.next_step_index_needed, WalkErrorCode.INVALID_STEP)
            return answer, SupervisorOutput()
        answer = self._core.queue_steps(steps, bool(plan_complete))
        return answer, SupervisorOutput(plan=self._plan_if_changed())

    def cancel(self, goal_id: Hashable) -> SupervisorOutput:
        """Cancel a goal: the swinging step finishes, then catch and Stand (result CANCELED); a goal waiting
        for a velocity walk to stop ends at once."""
        if self._deferred is not None and self._deferred[0] == goal_id:
            self._deferred = None
            self._log.info(f"goal {goal_name(goal_id)}: canceled before it started")
            return SupervisorOutput(results=(WalkResult(goal_id, WalkErrorCode.CANCELED,
                                                        "canceled before it started", 0),))
        if self._core.cancel(goal_id):
            self._log.info(f"goal {goal_name(goal_id)}: cancel requested, stopping the walk")
        return SupervisorOutput(plan=self._plan_if_changed())

    # ------------------------------------------------------------------ velocity walking
    def velocity(self, vx: float, vy: float, wz: float) -> SupervisorOutput:
        """A velocity command (``cmd_vel``): forward ``vx`` [m/s], leftward ``vy`` [m/s], turning ``wz``
        [rad/s].

        Stamped with the sensor time of the last sample and followed from now on (see the module docstring):
        the output's ``velocity`` is the command as taken (``message`` says what was clamped), ``results`` a
        goal it preempted, ``plan`` a walk it started or changed.

        Raises:
            InputError: A component that is not a finite number (nothing changed).
        """
        command = self._velocity.command(vx, vy, wz, self._core.time)
        results: list = []
        if self._velocity.active(self._core.time):
            self._velocity_stopping_logged = False
            if self._deferred is not None:
                waiting = self._deferred[0]
                self._deferred = None
                self._log.info(f"goal {goal_name(waiting)}: {PREEMPTED_BY_CMD_VEL} before it started")
                results.append(WalkResult(waiting, WalkErrorCode.PREEMPTED, PREEMPTED_BY_CMD_VEL, 0))
        self._stream(self._core.time, results)
        return SupervisorOutput(plan=self._plan_if_changed(), results=tuple(results), velocity=command)

    # ------------------------------------------------------------------ goal poses
    def goal_pose(self, x: float, y: float, yaw: float, steady_ns: Optional[int] = None) -> SupervisorOutput:
        """Walk to a goal pose (``walk/goal_pose``): the stance center to (``x``, ``y``) [m] with yaw ``yaw``
        [rad] (world frame), steps by :func:`~walk_mpc.core.walk.footsteps.walk_to_pose` from the measured
        feet, the feet side by side at the end (goal id a :class:`GoalPoseId`, result logged).

        From Stand it walks at once. A velocity walk closes its stance first (it ends PREEMPTED); a Walk
        goal or an earlier goal pose is stopped (its swinging step finishes, it ends PREEMPTED "preempted by
        goal pose N"); the walk to the pose starts from Stand right after, its steps planned from where the
        feet are then. A goal pose refused (no samples, a fall, a silent component) is logged.

        Raises:
            InputError: A coordinate that is not a finite number (nothing changed).
        """
        for name, value in (("x", x), ("y", y), ("yaw", yaw)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                unit = "rad" if name == "yaw" else "m"
                raise InputError(f"goal pose {name}", value, f"a finite number [{unit}]")
        pose = (float(x), float(y), float(yaw))
        self._goal_poses += 1
        gid = GoalPoseId(self._goal_poses)
        refusal = self.refusal(optional_steady(steady_ns))
        if refusal is not None:
            self._log.warning(f"{gid} refused: {refusal[0].name}: {refusal[1]}")
            return SupervisorOutput()
        results: list = []
        if self._deferred is not None:
            waiting = self._deferred[0]
            self._log.info(f"{goal_name(waiting)}: preempted by {gid} before it started")
            results.append(WalkResult(waiting, WalkErrorCode.PREEMPTED, f"preempted by {gid}", 0))
            self._deferred = None
        self._velocity.clear()
        if not self.walking:
            self._start_pose(gid, pose, results)
            return SupervisorOutput(plan=self._plan_if_changed(), results=tuple(results))
        self._deferred = (gid, None, True, pose)
        if self.velocity_walking:
            self._stream(self._core.time, results)  # the closing step, now
        else:
            current = self._core.goal_id
            if self._core.abort(WalkErrorCode.PREEMPTED, f"preempted by {gid}"):
                self._log.info(f"goal {goal_name(current)}: preempted by {gid}: stopping the walk")
        self._log.info(f"{gid} ({pose[0]:.3f} m, {pose[1]:.3f} m, {pose[2]:.3f} rad): waits for Stand")
        return SupervisorOutput(plan=self._plan_if_changed(), results=tuple(results))

    def _start_pose(self, gid: GoalPoseId, pose: tuple, results: list) -> bool:
        """Walk from Stand (at the measured feet) to ``pose``; a refusal or an unreachable pose: a result."""
        def fail(code: WalkErrorCode, message: str) -> bool:
            self._log.warning(f"{gid} refused: {code.name}: {message}")
            results.append(WalkResult(gid, code, message, 0))
            return False

        refusal = self.refusal(None)
        if refusal is not None:
            return fail(*refusal)
        if self._measured is not None:
            self._core.reset(self._measured[Foot.LEFT], self._measured[Foot.RIGHT])
        left, right = self._core.feet
        behavior, gait, sizes = self.params.behavior, self.params.velocity, self.params.goal_pose
        try:
            steps = walk_to_pose(left, right, *pose, step_length=sizes.step_length,
                                 lateral_step=sizes.lateral_step, max_step_yaw=sizes.max_step_yaw,
                                 width=self._velocity.stance_width(left, right), duration=gait.step_duration,
                                 swing_height=gait.swing_height, limits=behavior.limits)
        except (InputError, ParameterError) as exc:
            return fail(WalkErrorCode.INVALID_STEP, f"no footsteps reach the goal pose: {exc}")
        if not steps:
            self._log.info(f"{gid}: already there")
            results.append(WalkResult(gid, WalkErrorCode.NONE, "already at the goal pose", 0))
            return False
        answer = self._core.submit_goal(steps, True, goal_id=gid)
        if not answer.accepted:
            return fail(answer.rejection.error_code, answer.rejection.message)
        self._landings.reset()
        self._log.info(f"{gid}: walking {len(steps)} steps to ({pose[0]:.3f} m, {pose[1]:.3f} m, "
                       f"{pose[2]:.3f} rad)")
        return True

    def _stream(self, t: float, results: list) -> None:
        """Follow the velocity command at time ``t`` [s]: start, feed, stop or take over a walk."""
        if self._origin_ns is None:
            return
        core, velocity = self._core, self._velocity
        if not self.walking:
            if velocity.active(t) and self._deferred is None:
                self._start_velocity_walk(t)
            return
        if core.is_stopping or self.recovering:
            return
        if isinstance(core.goal_id, VelocityWalkId):
            steps, complete = velocity.next_steps(t, core.status.timeline.steps[-1])
            if (steps, complete) == self._velocity_sent:
                return
            answer = core.queue_steps(steps, complete)
            self._velocity_sent = (steps, complete) if answer.accepted else None
            if not answer.accepted:
                self._log.warning(f"{core.goal_id}: step {steps[0].step_index} refused: {answer.message}")
            elif complete and not self._velocity_stopping_logged:
                self._velocity_stopping_logged = True
                why = (f"cmd_vel silent for more than {velocity.params.timeout} s (sensor time)"
                       if velocity.timed_out(t) else "cmd_vel zero" if velocity.last_command is not None
                       else "a Walk goal waits")
                self._log.info(f"{core.goal_id}: {why}: closing the stance with step {steps[-1].step_index}")
            elif velocity.scale < 1.0:
                self._log.warning(f"{core.goal_id}: cmd_vel scaled to {100 * velocity.scale:.0f} % for step "
                                  f"{steps[0].step_index} to stay within the step limits")
            return
        if self._deferred is None and velocity.active(t):  # a Walk goal walks: cmd_vel preempts it
            timeline = core.status.timeline
            final = timeline.phases[-1]
            steps = velocity.takeover_step(t, timeline.steps[-1], final.left, final.right)
            gid = VelocityWalkId(self._velocity_walks + 1)
            answer = core.submit_goal(steps, False, goal_id=gid, lookahead=velocity.params.lookahead)
            if not answer.accepted:
                self._log.warning(f"cmd_vel cannot preempt goal {goal_name(core.goal_id)}: "
                                  f"{answer.rejection.message}")
                return
            self._velocity_walks += 1
            self._velocity_sent = None
            self._velocity_stopping_logged = False
            results.append(dataclasses.replace(answer.preempted, error_msg=PREEMPTED_BY_CMD_VEL))
            self._log.info(f"goal {goal_name(answer.preempted.goal_id)}: {PREEMPTED_BY_CMD_VEL}; {gid} "
                           f"follows its committed steps from step {steps[0].step_index}")

    def _start_velocity_walk(self, t: float) -> None:
        """A velocity walk from Stand at the measured feet (refused as :meth:`refusal` says, logged)."""
        refusal = self.refusal(None)
        if refusal is not None:
            self._log.warning(f"cmd_vel not followed: {refusal[1]}")
            return
        if self._measured is not None:
            self._core.reset(self._measured[Foot.LEFT], self._measured[Foot.RIGHT])
        left, right = self._core.feet
        steps = self._velocity.start_steps(t, left, right)
        gid = VelocityWalkId(self._velocity_walks + 1)
        answer = self._core.submit_goal(steps, False, goal_id=gid, lookahead=self._velocity.params.lookahead)
        if not answer.accepted:
            self._log.warning(f"cmd_vel not followed: {answer.rejection.message}")
            return
        self._velocity_walks += 1
        self._velocity_sent = None
        self._velocity_stopping_logged = False
        self._landings.reset()
        vx, vy, wz = self._velocity.twist_at(t)
        self._log.info(f"{gid}: walking at vx {vx:.3f} m/s, vy {vy:.3f} m/s, wz {wz:.3f} rad/s from Stand")

    def _after_results(self, results: list) -> bool:
        """Log the velocity walks and goal-pose walks that ended (no action reports them); start the goal that
        waited for Stand (True if it started)."""
        for k, result in enumerate(results):
            if not isinstance(result.goal_id, (VelocityWalkId, GoalPoseId, RecoveryStepId)):
                continue
            velocity = isinstance(result.goal_id, VelocityWalkId)
            if velocity and result.error_code != WalkErrorCode.NONE:
                self._velocity.clear()  # a failed walk is not restarted by the same command
            if velocity and self._deferred is not None and result.error_code == WalkErrorCode.NONE:
                result = dataclasses.replace(result, error_code=WalkErrorCode.PREEMPTED,
                                             error_msg=f"preempted by {_preempter(self._deferred[0])}")
                results[k] = result
            message = (f"{result.goal_id} ended {result.error_code.name} after step "
                       f"{result.last_completed_step_index}: {result.error_msg}")
            if result.error_code in (WalkErrorCode.NONE, WalkErrorCode.PREEMPTED):
                self._log.info(message)
            else:
                self._log.warning(message)
        if self._deferred is None or self.walking:
            return False
        goal_id, steps, plan_complete, pose = self._deferred
        self._deferred = None
        failed = [r for r in results if isinstance(r.goal_id, VelocityWalkId)
                  and r.error_code not in (WalkErrorCode.NONE, WalkErrorCode.PREEMPTED)]
        if failed:
            results.append(WalkResult(goal_id, failed[0].error_code, "the velocity walk it waited for ended: "
                                      f"{failed[0].error_msg}", 0))
            return False
        if pose is not None:
            return self._start_pose(goal_id, pose, results)
        answer, _ = self.submit_goal(goal_id, steps, plan_complete)
        if not answer.accepted:
            rejection = answer.rejection
            offending = (rejection.step_index,) if rejection.step_index >= 0 else ()
            self._log.warning(f"goal {goal_name(goal_id)} refused: {rejection.error_code.name}: "
                              f"{rejection.message}")
            results.append(WalkResult(goal_id, rejection.error_code, rejection.message, 0, offending))
            return False
        self._log.info(f"goal {goal_name(goal_id)}: walking {len(steps)} steps from Stand")
        return True

    def abort(self, code: WalkErrorCode, message: str) -> SupervisorOutput:
        """Stop the walk like a cancel with ``code`` (a failure in the graph)."""
        goal = self._core.goal_id
        if self._core.abort(code, message):
            self._log.error(f"goal {goal_name(goal)}: {code.name}: {message}; stopping the walk")
        return SupervisorOutput(plan=self._plan_if_changed())

    def shutdown(self, goal_ids: Sequence[Hashable]) -> tuple:
        """Results of the open goals when the node shuts down."""
        current = self._core.status.current_step_index
        return tuple(WalkResult(g, WalkErrorCode.CANCELED, "walk_behavior node shutting down", current)
                     for g in goal_ids)

    # ------------------------------------------------------------------ plans
    def _plan_if_changed(self, timeline: Optional[Timeline] = None) -> Optional[WalkPlan]:
        """A new plan if the behavior's timeline or behavior changed since the last one, else None."""
        if self._origin_ns is None or not self._anchored:
            return None  # no time base yet, or no stance to stand on: the first sample on both feet makes it
        timeline = timeline if timeline is not None else self._core.status.timeline
        walking = self.walking
        if timeline is self._plan_timeline and walking == self._plan_walking:
            return None
        self._plan_timeline, self._plan_walking = timeline, walking
        self._plan_id += 1
        first, timing = timeline.phases[0], timeline.timing
        if not walking and timeline.steps:  # Stand after a walk: the feet where it ended, no steps
            final = timeline.phases[-1]
            t0 = final.t_start - timing.sway_duration - timing.catch_duration
            plan = Timeline(final.left, final.right, [], timing)
        else:
            t0 = timeline.t0
            plan = Timeline(first.left, first.right, timeline.steps, timing)
        return WalkPlan(self._plan_id, walking, max(0, self._origin_ns + round(t0 * NS_PER_S)), plan)


def goal_name(goal_id: object) -> str:
    """Short printable id of a goal id (the first 8 hex digits of an action goal UUID)."""
    if isinstance(goal_id, (VelocityWalkId, GoalPoseId, RecoveryStepId)):
        return str(goal_id)
    return goal_id.hex()[:8] if isinstance(goal_id, (bytes, bytearray)) else repr(goal_id)


def _preempter(goal_id: object) -> str:
    """What preempted a walk, for its result message: "goal 1a2b3c4d", "goal pose 2"."""
    return str(goal_id) if isinstance(goal_id, GoalPoseId) else f"goal {goal_name(goal_id)}"


__all__ = ["GoalPoseId", "GoalPoseParameters", "LINK_ERRORS", "PREEMPTED_BY_CMD_VEL", "RecoveryStepId",
           "SupervisorOutput", "VelocityWalkId", "WalkSupervisor", "WalkSupervisorParameters", "goal_name"]
