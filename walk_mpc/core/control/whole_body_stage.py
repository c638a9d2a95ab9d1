"""The whole-body stage of the control loop: CoM references and sensor samples -> two joint postures per tick.

:class:`WholeBodyStage` makes every decision of the ``ik`` node without ROS (seed 001): each control tick it
builds the IK targets of the instants T and 2T after the tick's stamp (:func:`~walk_mpc.core.body.targets.
walk_targets` while a walk is in progress, the standing targets under gestures otherwise), solves them with
:meth:`~walk_mpc.core.body.ik.IKSolver.solve_two` (the first from the model configuration, the second from
the first) and returns a :class:`~walk_mpc.core.control.types.JointCommand`: the positions of both points,
and their velocities (point 1: central difference ``(q2 - q0) / 2T`` with ``q0`` the previous command;
point 2: backward difference ``(q2 - q1) / T``).

Inputs:

* :meth:`WholeBodyStage.set_plan`: the gait timeline (``t = 0`` at the plan's stamp; bipeds only, a
  quadruped ignores plans and stands). The first plan is installed at once; a later one at the first
  reference naming its ``plan_id`` (the planner switches plans at its next tick, so references already in
  flight for the previous plan are still solved on it), or at the next sensor-driven tick. At most
  :data:`MAX_PENDING_PLANS` received plans wait.
* :meth:`WholeBodyStage.on_reference`: each CoM reference is a control tick. A reference before the
  first sensor sample (nothing valid to solve from), or resuming after an outage whose end this stage has
  not measured yet, is skipped without a command; so is one naming a plan this stage never received (in
  flight across a restart: not a failure; a planner stuck on it makes the references stale).
* :meth:`WholeBodyStage.observe`: each sensor sample, validated completely (finite values, a usable base
  pose, arrays matching their names) and its stamp checked by a :class:`~walk_mpc.core.control.stamps.
  StampGuard` before it touches any state. The samples are kept by stamp (the sample of a tick is the one
  of its stamp, else the latest one if at most one control period older). The first one initialises the
  model configuration; at each support change of the walk (the stance feet differ from the previous
  tick's) the model is re-synchronised with the measurement before solving (seed 001). Between support
  changes the solution at T starts from the previous tick's solution at 2T (the same instant).
* :meth:`WholeBodyStage.on_reference_ahead`: the planner's reference of its next tick, announced on the
  sample before it (``solve_ahead``): solved at once (again when the tick's own sample corrects the
  support or changes it), and the tick returns that very command when it would solve exactly the same
  problem (same stamp, times and CoM, targets bit for bit, same initial configuration and previous
  command), else it solves as usual. The commands are the same either way.

Support-foot correction (seed 001): the walking targets come from the timeline corrected by
:class:`~walk_mpc.core.mpc.support_correction.SupportCorrector`, the policy the planner applies on the same
ticks and samples: at each lift-off the stance foot takes its measured pose (forward kinematics of the
tick's sample; without base estimate the base is placed by a stance sole at its timeline pose), while the
swing foot keeps its planned world pose. A sample due for a tick while references flow prepares that tick
at once (the lift-off's correction, the re-sync configuration, the walking targets but their CoM), while
the planner computes its reference.

Sensor-driven ticks: while no reference has come for ``reference_timeout`` of sensor time (before the
planner starts, a quadruped without planner), each sample at least ``control_period`` after the previous
tick is a standing tick holding the body position (the standing targets restart from the current posture
when they take over from references: no jump). During a walk:

* within ``reference_timeout`` of its start, no command (its first references are on their way) but a
  :attr:`WholeBodyStage.report` (WAITING_FOR_REFERENCES, naming the plan and what the stage heard of the
  planner: the ik keeps reporting, so a missing planner is not taken for a silent ik); after it, if this
  stage has not walked it on references yet (the robot stands), such a tick holds the last command
  (REFERENCE_STALE, "is the mpc_planner running?");
* once the stage walked on references, their stopping for ``safe_stop_timeout`` (shorter than
  ``reference_timeout``: on MuJoCo, a walk held frozen for 0.2-0.5 s before its safe stop made Talos fall in
  5 of 9 kills of the planner) starts a *safe stop* (issue 17: the planner died;
  the former hold froze the robot mid-swing): :class:`SafeStop`, sensor-driven ticks with status
  SAFE_STOP (commands, not holds). The step in progress at the end of the last walking command is
  finished on the stage's (support-corrected) timeline: the swing resumes where that command left the
  foot and lands on the step at the planned touchdown (up to ``safe_stop_speedup`` times the planned
  swing speed; later if even that cannot make it); without a step in progress, or when its swing foot is
  not yet off the ground (less than ``SETTLE_LIFT / 2`` above it in the last command: on MuJoCo, a whole
  step taken from lift-off landed hard and the stance foot slipped), the feet stay where the posture has
  them, on their ground. The stage makes
  its own CoM reference (there is no MPC): minimum-jerk shifts of ``safe_stop_shift_duration`` from the
  last command's CoM (and its velocity, brought to rest) to within ``safe_stop_stance_radius`` of the
  stance sole while the foot swings, then from the touchdown on to the middle of both soles, the height
  following the mean height of the soles. Once the posture has settled the stage stands on the landed
  feet (standing targets at the posture's feet, whatever the feet of the plans received meanwhile, until
  a plan walks), and the stopped plan is never walked again: its references are skipped. During the stop
  the references are ignored and received plans wait (installed when it has settled), so that the walk
  behavior's stop (a Stand plan where it measured the feet, a swinging one put down below itself) or a
  restarted planner cannot cut it short.

Standing on references: a biped stands on the plan's final feet (rebuilt when references start again after
sensor-driven ticks, e.g. a restarted stage). A foot of the posture more than ``SETTLE_DISTANCE`` from its
target moves there by a settling step (``SETTLE_TIME``, an arc of ``SETTLE_HEIGHT`` when it moves
sideways), e.g. a foot a dead ik left in the air; but a foot on the plan's ground (within
``GROUND_TOLERANCE`` of its height) farther than ``max_settle_distance`` stays where it is, as the planner
stands at such a measured sole (``resync_distance``): a Stand plan made after a fault may put a foot where
it never went. The landed feet after a safe stop join where the samples measure them on the ground (no arc).

A walk plan heard while the stage stands (a plan made on stale feet: on the graph, a restarted walk_behavior's
Stand measured a foot mid-swing, the ik heard it 2 s late and safe-stopped meanwhile, landing that step, and a
walk planned from the Stand's feet came 60 ms later: the IK failed and a step never landed) is checked at its
install against the posture's feet at the plan's current time: a sole farther than ``max_plan_offset``
horizontally, off its ground, or turned more than :data:`MAX_PLAN_YAW_OFFSET` refuses the plan (not installed;
its references give standing ticks, the posture held on the feet where they are, with status PLAN_REFUSED and
the reason, which end the walk in the walk behavior); a closer one is walked on its own feet (the walk
behavior plans from the measured feet; the support correction measures each stance sole at lift-off).

Holds: a reference with NaN/inf or malformed arrays (BAD_REFERENCE), targets that cannot be built
(TARGETS_ERROR) or a solve that does not converge (IK_FAILED) return the last command held (both points at
its positions, zero velocities) with the status and the reason; the model configuration stays the last
command's.

Outage: two consecutive sample stamps more than ``sensor_timeout`` apart (a restarted simulator: the robot
may have moved), or a stamp guard re-anchoring on a new time base, restart the stage from that sample as
from the first one: the model re-initialised from the measurement, held until references come again, and
the standing feet taken from the posture until a new plan (a safe stop in progress is abandoned; the
stage has not walked since). A rogue stamp (not later than the last one, far
ahead of the steady clock) is skipped without any state change.

Stabilizer (``stabilizer.enabled``, bipeds): a :class:`~walk_mpc.core.control.stabilizer.Stabilizer`
observes every accepted sample (the hardware rate, 10 ms) from what the robot measures (encoders, IMU, sole
contact forces; the base pose only with ``stabilizer.use_base_estimate``), with the latest CoM reference and
the sole targets of the last tick (leg odometry anchors) and the tick's planned stance; each tick solved
through the reference-driven path (and the ticks solved ahead, the same way) adds its offsets to the
targets at T and 2T: CoM target shift, sole roll / pitch (ankle admittance) and sole heights (force
difference control). Without references (sensor-driven ticks, safe stops) its reference is cleared and its
offsets leak back to zero. Disabled, it is never called: the commands are bit for bit those of the stage
without it (``test_stabilizer``).

Gestures (seed 003; legs = the robot's foot frames in model order): :meth:`WholeBodyStage.exec_gesture`
queues a gesture while standing; the gestures queued between two ticks are applied together at the next
standing tick, composed in the seed's order ``Rz Ry Rx Tz Ty Tx`` whatever their call order (the values of
a repeated dof add up). The legs touching the ground are those whose contact sensors (``contact_names``
starting with the leg's prefix) measure at least ``contact_force_threshold`` in total, in the latest
sample; legs without sensors count as touching. With friction and at least ``gesture.min_support_legs``
legs with effect touching, the body moves by the inverse transform and the feet stay; otherwise only the
legs move. :meth:`WholeBodyStage.set_gesture_effect` selects the legs gestures move (it survives walks).
Gesture moves are relative to the current standing stance: a new plan resets the standing targets to the
plan's feet (bipeds) and the current body.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math
from typing import NamedTuple, Optional, Union

import numpy as np

from walk_mpc.core.body.gesture import GestureController, GestureDof, elementary_transform
from walk_mpc.core.body.ik import IKResult, IKSolver, IKTargets
from walk_mpc.core.body.robot import RobotModel, rotation_z, yaw_of
from walk_mpc.core.body.state_estimation import correction_anchor, estimate_state, sole_from_anchor
from walk_mpc.core.body.swing import retarget_swing
from walk_mpc.core.body.targets import (
    StandingTargets,
    foot_targets_at,
    pose_matrix,
    torso_yaw,
    walk_pose_targets,
    walk_targets,
    with_com,
    yaw_free,
)
from walk_mpc.core.control.planner_stage import GROUND_TOLERANCE
from walk_mpc.core.control.stabilizer import Stabilizer, StabilizerParameters, sole_rotation
from walk_mpc.core.control.stamps import StampGuard, StampGuardParameters, StampVerdict, plan_stamp_problem
from walk_mpc.core.control.types import (
    NO_PLAN,
    NS_PER_S,
    CoMReference,
    JointCommand,
    Log,
    TickReport,
    WalkPlan,
    WholeBodyStatus,
    default_log,
    optional_steady,
)
from walk_mpc.core.errors import InputError, JointNotFound, ParameterError, ShapeError, WalkMpcError
from walk_mpc.core.mpc.support_correction import SupportCorrectionParameters, SupportCorrector
from walk_mpc.core.params import check_nonnegative, check_positive, check_range
from walk_mpc.core.sensors import SensorSample, check_sample
from walk_mpc.core.sim.kinematic import FEET
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, PhaseKind, Timeline

MAX_PENDING_PLANS = 8  # received plans kept until a reference names one
MAX_SAMPLES = 16  # measured samples kept by stamp (the reference's sample is usually the latest)
SETTLE_TIME = 0.6  # [s] a settling step onto the plan's feet (after a restart left a foot astray)
SETTLE_DISTANCE = 0.002  # [m] a foot this far from its standing target settles there by a step
SETTLE_HEIGHT = 0.03  # [m] arc of a settling foot that moves sideways
SETTLE_RELEASE = 0.5  # [s] after a settling step, the CoM joins the references over this time
SETTLE_LIFT = 0.01  # [m] a settling foot this far above its target is in the air (carries no weight)
LANDING_TIME = 0.3  # [s] the landing tail puts the swing foot down in this time after its hold
MAX_PLAN_YAW_OFFSET = 0.1  # [rad] a walk plan heard while standing turning a sole more than this is refused


class TickSource(str, enum.Enum):
    """What drove a tick (:attr:`JointCommand.source`)."""

    REFERENCE = "reference"  # a CoM reference
    SENSOR = "sensor"  # a sensor sample, no references for reference_timeout


@dataclasses.dataclass(frozen=True)
class WholeBodyStageParameters:
    """Parameters of :class:`WholeBodyStage`.

    Attributes:
        solver: IK solver.
        gesture: Gesture controller (standing).
        joint_names: Joints of the commands, in order (empty = every actuated joint in model order).
        control_period: Control period T [s] (point times of holds and sensor-driven ticks; a sample
            at least 99 % of it after the previous tick is due for a tick).
        reference_timeout: Sensor time [s] without CoM reference after which the samples drive the ticks.
        safe_stop_timeout: Sensor time [s] without CoM reference during a walk this stage walked on
            references after which its safe stop starts (at most ``reference_timeout``). Until then the
            robot executes the last command, frozen: on MuJoCo, Talos fell during the safe stop in 5 of 9
            kills of the planner mid-walk with 0.5 s, 1 of 5 with 0.2 s, none with 0.1 s.
        sensor_timeout: Two consecutive sample stamps further apart [s] are an outage.
        support_correction: The support-foot correction policy (set alike in the planner).
        solve_ahead: Solve the references announced ahead (:meth:`WholeBodyStage.on_reference_ahead`).
        contact_force_threshold: Total normal force [N] of a leg's contact sensors from which the leg
            touches the ground (gestures).
        contact_prefixes: Name prefix of the contact sensors of each leg (foot frame order); empty = the
            simulators' names for bipeds (``left_foot``, ``right_foot``), else the foot frame names.
        stamps: The sample stamp guard.
        safe_stop_speedup: Largest factor [-] (>= 1) by which a safe stop speeds up the rest of the swing
            so that the foot lands at its planned touchdown time (the swing resumes where the last command
            left the foot; when even this speed cannot make the planned touchdown, the foot lands later).
        safe_stop_shift_duration: Duration [s] of each CoM shift of a safe stop (minimum jerk: onto the
            stance sole while the foot swings, then to the middle of the soles). A shift of ``d`` [m] over
            ``D`` [s] accelerates the CoM up to ``5.77 d / D^2``, which moves the ZMP ``com_height / g``
            times that away from the CoM: 1 s keeps it within Talos' soles for a 10 cm shift.
        safe_stop_stance_radius: While the foot of a safe stop swings, the CoM stays where it is if it is
            within this horizontal distance [m] of the stance sole's origin, else it moves to that distance.
        max_settle_distance: A foot on the ground farther than this [m] horizontally from the standing pose
            of the plan stays where it is instead of settling there (set as the planner's
            ``resync_distance``, which stands at such a measured sole).
        stabilizer: The DCM stabilizer (:mod:`~walk_mpc.core.control.stabilizer`): it observes every
            sample and offsets the targets of the reference-driven ticks (bipeds); disabled, the commands
            are bit for bit those of the stage without it.
        landing_tail: Walking commands in single support carry two more points: the second point held until
            ``safe_stop_timeout`` + 2 control periods after it (time for this stage's own safe stop to take
            over when only the references stop), then, ``LANDING_TIME`` later, that posture with the swing
            foot put down vertically on its ground (one more IK solve per tick, from the second solution). A
            driver that holds the last trajectory when the commands stop (a dead ik) then stands on both feet
            instead of freezing on one; while commands flow, each replaces the trajectory before its second
            point, so the tail is never reached. False: two points.
        max_plan_offset: A walk plan installed while the stage stands whose sole, at the plan's current time,
            is farther than this [m] horizontally from where the posture has it (or off its ground by more
            than :data:`GROUND_TOLERANCE`, or turned more than :data:`MAX_PLAN_YAW_OFFSET`) is refused (a
            plan made on stale feet, e.g. heard late across a restart: its stance foot would jump, its first
            swing start where the foot is not). Feet slide on physics (up to 3 cm from the posture's after a
            fault on MuJoCo): a closer plan is walked on its own feet.
    """

    solver: IKSolver.Parameters = dataclasses.field(default_factory=IKSolver.Parameters)
    gesture: GestureController.Parameters = dataclasses.field(default_factory=GestureController.Parameters)
    joint_names: tuple[str, ...] = ()
    control_period: float = 0.02
    reference_timeout: float = 0.1
    safe_stop_timeout: float = 0.1
    sensor_timeout: float = 0.25
    support_correction: SupportCorrectionParameters = dataclasses.field(
        default_factory=SupportCorrectionParameters)
    solve_ahead: bool = True
    contact_force_threshold: float = 1.0
    contact_prefixes: tuple[str, ...] = ()
    stamps: StampGuardParameters = dataclasses.field(default_factory=StampGuardParameters)
    safe_stop_speedup: float = 2.0
    safe_stop_shift_duration: float = 1.0
    safe_stop_stance_radius: float = 0.03
    max_settle_distance: float = 0.1
    stabilizer: StabilizerParameters = dataclasses.field(default_factory=StabilizerParameters)
    landing_tail: bool = True
    max_plan_offset: float = 0.05

    def __post_init__(self) -> None:
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        object.__setattr__(self, "contact_prefixes", tuple(self.contact_prefixes))
        nested = (("solver", IKSolver.Parameters), ("gesture", GestureController.Parameters),
                  ("support_correction", SupportCorrectionParameters), ("stamps", StampGuardParameters),
                  ("stabilizer", StabilizerParameters))
        for name, cls in nested:
            if not isinstance(getattr(self, name), cls):
                raise ParameterError(name, getattr(self, name), f"a {cls.__qualname__}")
        if len(set(self.joint_names)) != len(self.joint_names):
            raise ParameterError("joint_names", self.joint_names, "distinct joint names")
        if not all(isinstance(p, str) and p for p in self.contact_prefixes):
            raise ParameterError("contact_prefixes", self.contact_prefixes, "non-empty names, one per leg")
        check_positive("control_period", self.control_period)
        check_positive("reference_timeout", self.reference_timeout)
        check_positive("safe_stop_timeout", self.safe_stop_timeout)
        if self.safe_stop_timeout > self.reference_timeout:
            raise ParameterError("safe_stop_timeout", self.safe_stop_timeout,
                                 f"at most reference_timeout ({self.reference_timeout} s)")
        check_positive("sensor_timeout", self.sensor_timeout)
        check_nonnegative("contact_force_threshold", self.contact_force_threshold)
        check_range("safe_stop_speedup", self.safe_stop_speedup, 1.0, 100.0)
        check_positive("safe_stop_shift_duration", self.safe_stop_shift_duration)
        check_nonnegative("safe_stop_stance_radius", self.safe_stop_stance_radius)
        check_positive("max_settle_distance", self.max_settle_distance)
        check_positive("max_plan_offset", self.max_plan_offset)
        if not isinstance(self.solve_ahead, bool):
            raise ParameterError("solve_ahead", self.solve_ahead, "true or false")
        if not isinstance(self.landing_tail, bool):
            raise ParameterError("landing_tail", self.landing_tail, "true or false")


@dataclasses.dataclass(frozen=True)
class BadReference:
    """A CoM reference that could not be read (malformed arrays): a BAD_REFERENCE hold at its stamp.

    Attributes:
        stamp_ns: Its stamp [ns].
        plan_id: The plan it names.
        reason: What was wrong.
    """

    stamp_ns: int
    plan_id: int
    reason: str


@dataclasses.dataclass(frozen=True)
class GestureReply:
    """Answer of a gesture request (the ``ik/exec_gesture`` and ``ik/set_gesture_effect`` services).

    Attributes:
        success: Whether the request was accepted.
        message: What was accepted (and what will move), or why it was refused.
        body_moved: For a gesture: whether the body will move by the inverse transform (friction and
            enough support legs now), else only the legs move.
    """

    success: bool
    message: str
    body_moved: bool = False


def min_jerk(x: float) -> float:
    """Minimum-jerk blend of the normalised time ``x``: 0 before 0, 1 after 1, zero velocity and acceleration
    at both ends."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    return x * x * x * (10.0 + x * (-15.0 + 6.0 * x))


@dataclasses.dataclass(frozen=True)
class SafeStop:
    """A safe stop: how the stage lands the step in progress and settles without CoM references.

    Times are plan times [s] (``t = 0`` at the stopped plan's stamp). The feet follow :attr:`timeline` (the
    walk's corrected timeline without the steps after the one in progress) at :meth:`timeline_time`: the
    swing resumes where the last command left the foot (:attr:`t_resume`) and reaches its planned touchdown
    at :attr:`t_landing` (the planned time when the swing can make it at up to ``safe_stop_speedup`` times
    its planned speed). The CoM (:meth:`com`) blends (minimum jerk, :attr:`shift_duration` each) from the
    last command's CoM to above the stance sole while it swings, and from the touchdown on to the middle of
    both soles; its height moves with the mean height of the soles. The first blend starts with the last
    command's CoM velocity and brings it to rest (a quintic: on physics, a CoM stopped at once while the
    robot moves at walking speed rocked Talos back over its heels after the landing, and it fell).

    Attributes:
        plan_id: The plan whose walk is stopped.
        step_index: The step being finished (0: none was in progress; the feet stay where they are).
        timeline: The feet of the stop.
        t_start: Plan time of the first tick of the stop [s].
        t_resume: Timeline time of the posture the stop starts from (the end of the last command) [s].
        t_touchdown: Planned touchdown of the step in the timeline [s] (``t_resume`` without a step).
        t_landing: Plan time at which the foot lands [s] (``t_start`` without a step).
        com_start: CoM of the last command [m], shape (3,).
        com_velocity: CoM velocity of the last command (its points at T and 2T) [m/s], shape (3,).
        com_stance: CoM target above the stance sole [m] (``com_final`` without a step).
        com_final: CoM target above the middle of the soles [m].
        shift_duration: Duration of each CoM blend [s] (``safe_stop_shift_duration``).
        t_settled: Plan time from which everything is at rest [s].
    """

    plan_id: int
    step_index: int
    timeline: Timeline
    t_start: float
    t_resume: float
    t_touchdown: float
    t_landing: float
    com_start: np.ndarray
    com_stance: np.ndarray
    com_final: np.ndarray
    shift_duration: float
    t_settled: float
    com_velocity: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))

    def timeline_time(self, t: float) -> float:
        """Time [s] of :attr:`timeline` whose feet are the targets at plan time ``t``."""
        if t >= self.t_landing:
            return self.t_touchdown + (t - self.t_landing)
        if t <= self.t_start:
            return self.t_resume
        rate = (self.t_touchdown - self.t_resume) / (self.t_landing - self.t_start)
        return self.t_resume + (t - self.t_start) * rate

    def com(self, t: float) -> np.ndarray:
        """CoM target [m] at plan time ``t``, shape (3,)."""
        x = (t - self.t_start) / self.shift_duration
        first = min_jerk(x)
        second = min_jerk((t - self.t_landing) / self.shift_duration)
        # the initial velocity, brought to rest: g(0) = g(1) = 0, g'(0) = 1, g'(1) = g''(0) = g''(1) = 0
        carried = x * (1.0 + x * x * (-6.0 + x * (8.0 - 3.0 * x))) if 0.0 < x < 1.0 else 0.0
        return (self.com_start + (self.com_stance - self.com_start) * first
                + self.com_velocity * (self.shift_duration * carried)
                + (self.com_final - self.com_stance) * second)

    @property
    def landing_delay(self) -> float:
        """How much later than planned the foot lands [s] (0 without a step)."""
        return max(0.0, self.t_landing - self.t_touchdown) if self.step_index else 0.0


class _Hold(Exception):
    """A tick that holds the last command (internal): status and reason."""

    def __init__(self, status: WholeBodyStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class _Ahead(NamedTuple):
    """The tick of a reference announced ahead, solved (see :meth:`WholeBodyStage.on_reference_ahead`)."""

    stamp_ns: int
    times: tuple
    targets: list  # IKTargets at T and 2T
    q_init: np.ndarray  # the initial configuration it was solved from (identity)
    command: np.ndarray  # the previous command its velocities are relative to (identity)
    first: IKResult
    second: IKResult
    positions: list
    joint_command: JointCommand

    def matches(self, now: int, times, targets: list, q_init: np.ndarray, command: np.ndarray) -> bool:
        """Whether the tick ``now`` would solve exactly this problem."""
        return (self.stamp_ns == now and self.times == tuple(times) and self.q_init is q_init
                and self.command is command and all(a.same_as(b) for a, b in zip(self.targets, targets)))


def _stamp(name: str, value) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise InputError(name, value, "integer nanoseconds")
    return int(value)


class WholeBodyStage:
    """Whole-body IK of the control loop: CoM references + plan + samples -> joint commands (module doc).

    Example:
        >>> stage = WholeBodyStage(robot)
        >>> stage.observe(stamp_ns, sample)          # each sensor sample: a standing tick without references
        >>> stage.set_plan(plan)                     # each plan received
        >>> command = stage.on_reference(reference)  # each CoM reference: a tick
    """

    Parameters = WholeBodyStageParameters

    def __init__(self, robot: RobotModel, params: Optional[WholeBodyStageParameters] = None,
                 log: Optional[Log] = None) -> None:
        """Create the stage.

        Args:
            robot: The robot model.
            params: Parameters (None = defaults).
            log: Where the stage reports its decisions (None = :func:`default_log` ``whole_body``).

        Raises:
            ParameterError, JointNotFound: Invalid parameters for this robot.
        """
        self.params = params if params is not None else WholeBodyStageParameters()
        if not isinstance(self.params, WholeBodyStageParameters):
            raise ParameterError("params", self.params, "a WholeBodyStageParameters")
        p = self.params
        self.robot = robot
        self.log = log if log is not None else default_log("whole_body")
        self.solver = IKSolver(robot, p.solver)
        self.joint_names: tuple[str, ...] = p.joint_names or tuple(robot.joint_names)
        index = {name: i for i, name in enumerate(robot.joint_names)}
        for name in self.joint_names:
            if name not in index:
                raise JointNotFound(name, robot.joint_names)
        self._model_joints = frozenset(robot.joint_names)
        self._command_index = np.array([index[name] for name in self.joint_names], dtype=int)
        model = robot.model
        plain = all(model.joints[model.getJointId(name)].nq == 1 for name in self.joint_names)
        # Configuration indices of the commanded joints (None with continuous joints: (cos, sin) in q).
        self._command_q_index = (np.array([robot.joint_index_q(name) for name in self.joint_names], dtype=int)
                                 if plain else None)
        legs = robot.foot_frames
        prefixes = p.contact_prefixes or (FEET if robot.is_biped else tuple(legs))
        if len(prefixes) != len(legs):
            raise ParameterError("contact_prefixes", p.contact_prefixes,
                                 f"{len(legs)} prefixes, one per leg {list(legs)}")
        self._contact_prefixes = tuple(prefixes)
        reference = robot.reference_configuration()
        self._torso_tilt = yaw_free(robot.frame_pose(reference, robot.torso_frame)[1])
        self._period_ns = int(round(p.control_period * NS_PER_S))
        self._timeout_ns = int(round(p.reference_timeout * NS_PER_S))
        self._safe_stop_ns = int(round(p.safe_stop_timeout * NS_PER_S))
        self._outage_ns = int(round(p.sensor_timeout * NS_PER_S))
        self._feet = {Foot.LEFT: robot.left_foot_frame, Foot.RIGHT: robot.right_foot_frame} \
            if robot.is_biped else {}
        self._guard = StampGuard(p.stamps)
        self._corrector = SupportCorrector(p.support_correction)
        self._sensor_layouts: dict = {}  # sample joint_names -> (model joints kept, their indices)
        self._contact_layouts: dict = {}  # sample contact_names -> sensor indices of each leg
        self.stabilizer = Stabilizer(robot, p.stabilizer)
        self._stabilizing = p.stabilizer.enabled and robot.is_biped
        self.reset()

    def reset(self) -> None:
        """Back to the state after construction: no model configuration, plan, sample or gesture."""
        self._guard.reset()
        self._corrector.reset()
        self._q: Optional[np.ndarray] = None  # model configuration: the posture commanded for now
        self._q_ahead: Optional[np.ndarray] = None  # the last tick's solution at 2T: this tick's T
        self._command: Optional[np.ndarray] = None  # last commanded positions (joint_names order)
        self._measured_joints: Optional[dict[str, float]] = None
        self._contacts: Optional[tuple] = None  # latest sample's contact_names and forces
        self._samples: collections.OrderedDict = collections.OrderedDict()  # stamp -> (joints, base, IMU)
        self._latest_sample_ns = 0  # stamp of the newest sample [ns]
        self._grace_until_ns = 0  # no staleness reported before this sensor time [ns] (a walk just started)
        self._rejecting = ""  # why samples are being rejected (the first of a series), "" if not
        self._skipping = ""  # why references are being skipped (the first of a series), "" if not
        self._skipped_plan: Optional[int] = None  # plan named by the last reference skipped for its plan
        self._report: Optional[TickReport] = None  # the last observe()'s report without a command
        self._pending: collections.OrderedDict = collections.OrderedDict()  # plan_id -> WalkPlan
        self._timeline: Optional[Timeline] = None  # the installed plan, support-corrected
        self._plan_id: Optional[int] = None
        self._plan_walking = False
        self._plan_stamp_ns = 0
        self._posture_feet_plan: Optional[int] = None  # after an outage: plan whose feet are not used
        self._standing: Optional[StandingTargets] = None
        self._settle: Optional[dict] = None  # a settling step in progress (see _settling)
        self._effects = dict.fromkeys(self.robot.foot_frames, True)
        self._gestures: dict[GestureDof, float] = {}  # queued for the next tick
        self._stance: Optional[tuple] = None
        self._last_tick_ns: Optional[int] = None
        self._tick_source = ""  # TickSource value of the last tick
        self._last_reference_ns: Optional[int] = None
        self._sample_q: Optional[tuple] = None  # (sample, self._q, its measured configuration): a cache
        self._pose_targets: Optional[tuple] = None  # (stamp, timeline, times, targets without CoM): prepared
        self._ahead: Optional[_Ahead] = None  # the tick of a reference announced ahead, solved
        self._announced: Optional[tuple] = None  # (stamp, times, coms) of the last reference announced
        self._walked: Optional[int] = None  # stamp [ns] of the end of the last walking command (its 2T point)
        self._safe_stop: Optional[SafeStop] = None  # the safe stop in progress
        self._stop_reason = ""  # the reason of its commands
        self._stopped_plan: Optional[int] = None  # the plan whose walk a safe stop ended (not walked again)
        self._landed = False  # after a safe stop: standing at the posture's feet until a plan walks
        self._refused_plan: Optional[int] = None  # a walk plan refused (stale feet): its references stand
        self._refusal = ""  # why
        self.refused_plans = 0  # walk plans refused
        self.safe_stops = 0  # safe stops started
        self.resyncs = 0  # ticks that re-synchronised the model on a measurement (support changes)
        self.prepared = 0  # support corrections made on arrival of their sample, ahead of the reference
        self.ahead_ticks = 0  # ticks that returned the solution of their announced reference
        self.rejected_samples = 0  # samples (or stamps) rejected
        self.stabilizer.reset()
        self._soles: Optional[dict] = None  # Foot -> (position, yaw) of the last tick's sole targets at T

    # ------------------------------------------------------------------ read-only state
    @property
    def initialised(self) -> bool:
        """Whether the model configuration exists (a sensor sample arrived)."""
        return self._q is not None

    @property
    def configuration(self) -> Optional[np.ndarray]:
        """Model configuration (the posture commanded for now), or None before initialisation."""
        return None if self._q is None else self._q.copy()

    @property
    def walking(self) -> bool:
        """Whether a walk (or a safe stop) is in progress at the last tick."""
        last = None if self._last_tick_ns is None else self._plan_time(self._last_tick_ns)
        return self._safe_stop is not None or self._walking_at(last)

    @property
    def safe_stop(self) -> Optional[SafeStop]:
        """The safe stop in progress, or None."""
        return self._safe_stop

    @property
    def stopped_plan_id(self) -> Optional[int]:
        """The plan whose walk the last safe stop ended (its references are skipped), or None."""
        return self._stopped_plan

    @property
    def plan_id(self) -> Optional[int]:
        """The installed plan's id, or None."""
        return self._plan_id

    @property
    def timeline(self) -> Optional[Timeline]:
        """The installed plan's timeline, support-corrected, or None."""
        return self._timeline

    @property
    def tick_source(self) -> str:
        """What drove the last tick (a :class:`TickSource` value), "" before any."""
        return self._tick_source

    @property
    def report(self) -> Optional[TickReport]:
        """The report of the last :meth:`observe` when its tick gave no command but has a status to say
        (WAITING_FOR_REFERENCES: a walk waits for its first references), else None."""
        return self._report

    @property
    def ahead_command(self) -> Optional[JointCommand]:
        """The command solved for the reference announced ahead, returned by its tick if it matches."""
        return None if self._ahead is None else self._ahead.joint_command

    @property
    def legs(self) -> tuple[str, ...]:
        """Gesture legs: the robot's foot frames (a leg's index is its position)."""
        return tuple(self.robot.foot_frames)

    # ------------------------------------------------------------------ inputs
    def set_plan(self, plan: WalkPlan) -> bool:
        """Receive a plan (installed now if it is the first one, else when a reference names it).

        Returns:
            Whether the plan was kept (a non-biped ignores plans; a non-WalkPlan is rejected).
        """
        if not isinstance(plan, WalkPlan):
            self.log.error(f"plan rejected, keeping the previous one: expected a WalkPlan, got "
                           f"{type(plan).__name__}")
            return False
        problem = plan_stamp_problem(plan.stamp_ns, self._guard)
        if problem is not None:
            self.log.error(f"plan {plan.plan_id} rejected, keeping the previous one: {problem}")
            return False
        if not self.robot.is_biped:
            self.log.warning(f"plan {plan.plan_id} ignored: '{self.robot.name}' is not a biped (no "
                             "left/right sole frames)")
            return False
        self._pending.pop(plan.plan_id, None)
        self._pending[plan.plan_id] = plan
        while len(self._pending) > MAX_PENDING_PLANS:
            self._pending.popitem(last=False)
        if self._timeline is None:
            self._install(plan.plan_id)  # the first plan: no reference can be in flight for another one
        timeline = plan.timeline
        self.log.info(f"plan {plan.plan_id}: {'walk' if plan.walking else 'stand'}, {len(timeline.steps)} "
                      f"steps, t_end {timeline.t_end:.3f} s")
        return True

    def observe(self, stamp_ns: int, sample: SensorSample,
                steady_ns: Optional[int] = None) -> Optional[JointCommand]:
        """A sensor sample: a sensor-driven tick (or hold) when one is due without references, else None.

        Args:
            stamp_ns: The sample's stamp [ns].
            sample: The sample (joint positions by name; base pose when estimated; contact forces).
            steady_ns: The steady clock at its arrival [ns] (None in process: only the stamps' order is
                checked).

        Returns:
            The command of a sensor-driven tick, or None (no tick, a prepared tick, a rejected sample; a
            tick without a command, waiting for a walk's first references, leaves a :attr:`report`).
        """
        self._report = None
        try:
            stamp_ns = _stamp("stamp_ns", stamp_ns)
            steady_ns = optional_steady(steady_ns)
            check_sample(sample)
            for names, values in (("joint_names", "joint_pos"), ("contact_names", "contact")):
                n = len(getattr(sample, names))
                if np.shape(getattr(sample, values)) != (n,):
                    raise ShapeError(values, np.shape(getattr(sample, values)), (n,))
            base = sample.base_pose
            if base is not None and (np.shape(base[0]) != (3,) or np.shape(base[1]) != (4,)):
                raise ShapeError("base pose", (np.shape(base[0]), np.shape(base[1])), "(3,) and (4,)")
            joints = self._sample_joints(sample)
        except WalkMpcError as exc:
            self.reject(f"sensor sample rejected: {exc}")
            return None
        verdict = self._guard.check(stamp_ns, steady_ns)
        if not verdict.accepted:
            last = self._guard.last_stamp_ns
            self.reject(f"sensor sample stamped {stamp_ns / NS_PER_S:.9f} s rejected: {verdict.value} "
                        f"(last accepted {last / NS_PER_S:.9f} s)")
            return None
        if self._rejecting:
            self.log.info(f"sensor samples accepted again at {stamp_ns / NS_PER_S:.9f} s after: "
                          f"{self._rejecting}")
            self._rejecting = ""
        now = stamp_ns
        self._measured_joints = joints
        self._contacts = (sample.contact_names, sample.contact)
        if verdict is StampVerdict.REANCHORED:
            self._resume(now, f"sensor stamps re-anchored on a new time base at {now / NS_PER_S:.9f} s")
        elif self._samples and now - self._latest_sample_ns > self._outage_ns:
            gap = (now - self._latest_sample_ns) / NS_PER_S
            self._resume(now, f"sensor samples resumed after {gap:.3f} s without samples (sensor_timeout "
                         f"{self.params.sensor_timeout} s)")
        # Without a base estimate, the IMU orients the base of a support correction.
        imu = None if base is not None or not len(sample.imu_names) else (sample.imu_names[0],
                                                                          sample.imu_orientation_xyzw[0])
        self._samples[now] = (joints, base, imu)
        self._latest_sample_ns = now
        if self._grace_until_ns < 0:  # a walking plan came before any sample
            self._grace_until_ns = now + self._timeout_ns
        while len(self._samples) > MAX_SAMPLES:
            self._samples.popitem(last=False)
        self._initialise()
        age = None if self._last_reference_ns is None else now - self._last_reference_ns
        stale = age is None or age >= self._timeout_ns
        if not stale and (self._safe_stop is not None or (
                age >= self._safe_stop_ns and self._walked is not None
                and self._walking_at(self._plan_time(now)))):
            stale = True  # a safe stop ticks on the samples (or starts: the references stopped mid-walk)
        if self._stabilizing:
            if stale or self._safe_stop is not None:
                self.stabilizer.clear_reference()
            if self._soles is not None:
                stance = tuple(Foot(i) for i in self._stance) if self._stance is not None else tuple(Foot)
                self.stabilizer.observe(now, sample, self._soles, stance,
                                        walking=self._walking_at(self._plan_time(now)))
        due = self._last_tick_ns is None or now - self._last_tick_ns >= self._period_ns * 99 // 100
        if stale and due:
            return self._sensor_tick(now)
        if due:
            self._prepare_tick(now)
        return None

    def reject(self, reason: str) -> None:
        """Report a sample the caller could not use (e.g. it could not convert it): logged once per series
        of rejections (with the recovery), counted; nothing else changes."""
        self.rejected_samples += 1
        if not self._rejecting:
            self.log.warning(f"{reason}; skipping such samples")
            self._rejecting = reason

    def on_reference(self, reference: Union[CoMReference, BadReference]) -> Optional[JointCommand]:
        """A CoM reference: the control tick of its stamp.

        Args:
            reference: The planner's reference (times T, 2T after its stamp, CoM at those times), or a
                :class:`BadReference` the caller could not read.

        Returns:
            The tick's command (a hold with its status on failure: NaN/inf or malformed reference, targets
            error, IK failure), or None when the reference is skipped (no sample yet, after an outage this
            stage has not measured, a plan never received, during a safe stop, for the plan a safe stop
            ended).
        """
        try:
            now = _stamp("reference stamp_ns", reference.stamp_ns)
            plan_id = int(reference.plan_id)
        except (WalkMpcError, AttributeError, TypeError, ValueError) as exc:
            self.log.warning(f"reference rejected: {exc}")
            return None
        if self._measured_joints is None or self._after_unseen_outage(now):
            # No measurement yet (e.g. the stage was just restarted and the planner's references came before
            # the samples), or the references resume after an outage whose end this stage has not measured:
            # nothing valid to solve from.
            self._skip("references ignored until their sensor sample")
            return None
        if self._safe_stop is not None:
            self._skip(f"references ignored during the safe stop of plan {self._safe_stop.plan_id} (standing "
                       f"from t = {self._safe_stop.t_settled:.3f} s)")
            return None
        try:
            times, coms = self._reference_targets(reference)
            installed = self._install_plan_of_reference(plan_id, now)
            if plan_id == self._refused_plan:
                return self._refused_tick(now, times)
            if not installed:
                self._skipped_plan = plan_id
                self._skip(f"references for plan {plan_id} skipped: this stage has plan {self._plan_id}")
                if plan_id == NO_PLAN and self._pending:
                    # Followed while standing, the planner without a plan now lags a plan received here:
                    # the stage ticks on the samples at once (the newest plan; a walk waits for its
                    # references and reports it), as if it had never heard that planner.
                    self._last_reference_ns = None
                return None
            if plan_id == self._stopped_plan:
                self._skip(f"references for plan {plan_id} skipped: a safe stop ended its walk (a new plan "
                           "walks again)")
                return None
            self._skipping = ""
            self._skipped_plan = None
            self._last_reference_ns = now
            if self._stabilizing:
                self.stabilizer.set_reference(reference)
            return self._tick(now, times, coms, TickSource.REFERENCE)
        except _Hold as hold:
            self._skipping = ""
            return self._hold(now, hold.status, str(hold), TickSource.REFERENCE)

    def _refused_tick(self, now: int, times: list) -> JointCommand:
        """A reference of the refused walk plan: a standing tick holding the body where the posture has it,
        on the feet where they are (the refused plan's CoM is not followed), status PLAN_REFUSED."""
        self._skipping = ""
        self._last_reference_ns = now
        try:
            command = self._tick(now, times, [None, None], TickSource.SENSOR)
        except _Hold as hold:
            return self._hold(now, hold.status, str(hold), TickSource.SENSOR)
        return dataclasses.replace(command, status=WholeBodyStatus.PLAN_REFUSED, reason=self._refusal)

    def _skip(self, reason: str) -> None:
        """A reference skipped without a command (not a failure): logged at the first of a series."""
        if reason != self._skipping:
            self.log.info(reason)
            self._skipping = reason

    def on_reference_ahead(self, reference: Union[CoMReference, BadReference]) -> Optional[JointCommand]:
        """A reference the planner announces ahead of its tick (its solve prepared on the sample before the
        tick): solved now, while references drive the ticks on the installed plan; the tick returns this
        command (the same object) when its reference, targets, initial configuration and previous command
        are exactly these.

        Returns:
            The command solved ahead, or None (not solved: another plan, no state, sensor-driven ticks,
            a support change whose re-sync needs the tick's sample, an invalid reference, ...).
        """
        self._ahead = self._announced = None
        if (not self.params.solve_ahead or isinstance(reference, BadReference)
                or self._tick_source != TickSource.REFERENCE or self._pending or self._q is None
                or self._measured_joints is None or self._safe_stop is not None):
            return None
        try:
            now = _stamp("reference stamp_ns", reference.stamp_ns)
            if self._last_tick_ns is not None and now <= self._last_tick_ns or self._after_unseen_outage(now):
                return None
            times, coms = self._reference_targets(reference)
            plan_id = int(reference.plan_id)
        except (_Hold, WalkMpcError, AttributeError, TypeError, ValueError):
            return None
        if self._plan_id is not None and plan_id != self._plan_id:
            return None
        self._announced = (now, tuple(times), coms)
        self._solve_ahead(now, times, coms, None)
        return self.ahead_command

    # ------------------------------------------------------------------ gestures
    def exec_gesture(self, dof: int, value: float) -> GestureReply:
        """Queue a gesture (seed 003) for the next standing tick: a translation [m] (TX, TY, TZ) or a
        rotation [rad] (RX, RY, RZ) of the legs with effect. Refused while walking, before the first
        sample, for an unknown dof or a non-finite value."""
        reply = self._exec_gesture(dof, value)
        (self.log.info if reply.success else self.log.warning)(f"exec_gesture: {reply.message}")
        return reply

    def _exec_gesture(self, dof, value) -> GestureReply:
        if self.walking:
            return GestureReply(False, f"refused: walk in progress (plan {self._plan_id}); gestures apply "
                                "while standing")
        if not self.initialised:
            return GestureReply(False, "refused: no state yet (waiting for a sensor sample)")
        try:
            dof = GestureDof(int(dof))
        except (TypeError, ValueError):
            return GestureReply(False, f"unknown dof {dof}: expected one of "
                                f"{', '.join(f'{d.name}={int(d)}' for d in GestureDof)}")
        try:
            elementary_transform(dof, value)  # validates the value
            gestures = self._standing_targets().gestures
        except WalkMpcError as exc:
            return GestureReply(False, f"gesture {dof.name} {value} rejected: {exc}")
        value = float(value)
        self._gestures[dof] = self._gestures.get(dof, 0.0) + value
        self._set_contacts(gestures)
        body = "the body will move by the inverse" if gestures.moves_body else "the body stays"
        queued = ", ".join(f"{d.name} {v:g}" for d, v in sorted(self._gestures.items()))
        return GestureReply(True, f"{dof.name} {value:g} queued for the next tick ({queued}): legs "
                            f"{list(gestures.affected_legs)} will move; {body} "
                            f"({len(gestures.support_legs)} support legs)", gestures.moves_body)

    def set_gesture_effect(self, leg: int, effect: bool) -> GestureReply:
        """Select whether gestures move leg ``leg`` (index in :attr:`legs`); the selection survives walks."""
        legs = self.legs
        if isinstance(leg, bool) or not isinstance(leg, (int, np.integer)) or not 0 <= leg < len(legs):
            reply = GestureReply(False, f"unknown leg {leg}: legs are "
                                 f"{', '.join(f'{i}={name}' for i, name in enumerate(legs))}")
            self.log.warning(f"set_gesture_effect: {reply.message}")
            return reply
        name = legs[int(leg)]
        self._effects[name] = bool(effect)
        if self._standing is not None:
            self._standing.gestures.set_gesture_effect(name, bool(effect))
        reply = GestureReply(True, f"leg {leg} ({name}) gesture effect {'on' if effect else 'off'}")
        self.log.info(f"set_gesture_effect: {reply.message}")
        return reply

    def legs_in_contact(self) -> tuple[bool, ...]:
        """Whether each leg touches the ground in the latest sample: its contact sensors measure at least
        ``contact_force_threshold`` in total; a leg without sensors (or before any sample) counts as
        touching."""
        if self._contacts is None:
            return (True,) * len(self._contact_prefixes)
        names, forces = self._contacts
        layout = self._contact_layouts.get(names)
        if layout is None:
            layout = tuple(np.array([i for i, name in enumerate(names) if name.startswith(prefix)], dtype=int)
                           for prefix in self._contact_prefixes)
            if len(self._contact_layouts) >= MAX_SAMPLES:
                self._contact_layouts.clear()
            self._contact_layouts[names] = layout
        threshold = self.params.contact_force_threshold
        return tuple(not len(index) or float(np.sum(forces[index])) >= threshold for index in layout)

    def _set_contacts(self, gestures: GestureController) -> None:
        for leg, touching in zip(self.robot.foot_frames, self.legs_in_contact()):
            gestures.set_contact(leg, touching)

    def _apply_gestures(self) -> None:
        """The gestures queued since the last tick, composed in the seed's order, on the standing targets."""
        if not self._gestures:
            return
        queued, self._gestures = self._gestures, {}
        gestures = self._standing_targets().gestures
        self._set_contacts(gestures)
        result = gestures.exec_gestures(queued)
        slice_ = ", ".join(f"{d.name} {v:g}" for d, v in sorted(queued.items()))
        self.log.info(f"gestures {slice_} applied to legs {list(result.moved_legs)}; "
                      f"{'body moved by the inverse' if result.body_moved else 'body stays'} "
                      f"({len(result.support_legs)} support legs)")

    # ------------------------------------------------------------------ model and samples
    def _sample_joints(self, sample: SensorSample) -> dict[str, float]:
        """Model joints of a sample (first-occurrence order) and their values (the last occurrence, as a
        dict of the arrays); the layout is computed once per ``joint_names``."""
        key = sample.joint_names
        layout = self._sensor_layouts.get(key)
        if layout is None:
            last = {name: i for i, name in enumerate(key)}
            kept = [name for name in dict.fromkeys(key) if name in self._model_joints]
            layout = (kept, np.array([last[name] for name in kept], dtype=int))
            if len(self._sensor_layouts) >= MAX_SAMPLES:
                self._sensor_layouts.clear()
            self._sensor_layouts[key] = layout
        kept, index = layout
        return dict(zip(kept, sample.joint_pos[index].tolist()))

    def _initialise(self) -> None:
        """The model configuration from the latest measurement, unless it exists."""
        if self._q is not None:
            return
        latest = self._samples[self._latest_sample_ns]
        q = self._measured_configuration(self.robot.reference_configuration(), latest)
        self._q = q
        self._q_ahead = None
        self._command = self._positions(q)
        self.log.info("model initialised from the measured configuration")

    def _measured_configuration(self, default: np.ndarray, sample: tuple) -> np.ndarray:
        """Configuration of a measured sample ``(joints, base, imu)``, the rest from ``default``."""
        joints, base = sample[0], sample[1]
        if base is None:
            base_position, base_quaternion = default[0:3], default[3:7]
        else:
            base_position, base_quaternion = base
        return self.robot.configuration_from_joints(joints, base_position, base_quaternion, default=default)

    def _sample_configuration(self, sample: tuple) -> np.ndarray:
        """:meth:`_measured_configuration` of ``sample`` on the current command, computed once per sample
        and command (a support change needs it for the support correction and the re-sync). Read-only."""
        cached = self._sample_q
        if cached is not None and cached[0] is sample and cached[1] is self._q:
            return cached[2]
        q = self._measured_configuration(self._q, sample)
        q.setflags(write=False)
        self._sample_q = (sample, self._q, q)
        return q

    def _sample_at(self, ns: int) -> Optional[tuple]:
        """The measured sample ``(joints, base)`` stamped ``ns``, else the latest one if it is at most one
        control period older (None otherwise: too old to measure the feet of this tick)."""
        if ns in self._samples:
            return self._samples[ns]
        if self._samples:
            latest = next(reversed(self._samples))
            if 0 <= ns - latest <= self._period_ns:
                return self._samples[latest]
        return None

    def _measured_sole(self, sample: tuple, foot: Foot, t: float) -> FootPose:
        """Measured pose of ``foot``'s sole in the sample; without base estimate, measured from the other sole
        where it stood until now (:func:`correction_anchor`), the base oriented by the IMU (as the planner
        does: :func:`sole_from_anchor`)."""
        q = self._sample_configuration(sample)
        joints = self.robot.joint_positions(q)
        if sample[1] is None:
            other, pose = correction_anchor(self._timeline, t, foot)
            return sole_from_anchor(self.robot, list(joints), list(joints.values()), self._feet[foot],
                                    (self._feet[other], pose), sample[2])
        measured = estimate_state(self.robot, list(joints), list(joints.values()), sample[1])
        return measured.sole(foot)

    def _resume(self, now: int, why: str) -> None:
        """Samples resume at ``now`` after an outage (or on a new time base): forget the state built on the
        samples before, so that this sample restarts the stage as the first one did. The references get
        ``reference_timeout`` to come again before a walk reports them stale."""
        self._q = None
        self._q_ahead = None
        self._standing = None
        self._gestures = {}
        self._stance = None
        self._samples.clear()
        self._sample_q = None
        self._pose_targets = None
        self._ahead = None
        self._announced = None
        self._walked = None  # the posture of the last walking command is not where the robot is
        self._safe_stop = None
        self._last_reference_ns = None
        self._last_tick_ns = None
        self._grace_until_ns = now + self._timeout_ns
        self._posture_feet_plan = self._plan_id
        self.stabilizer.reset()
        self._soles = None
        self.log.warning(f"{why}: restarting from the measured configuration")

    def _after_unseen_outage(self, now: int) -> bool:
        """Whether a reference stamped ``now`` follows the previous one after an outage (stamps more than
        ``sensor_timeout`` apart) while this stage has no sample of that time yet."""
        last = self._last_reference_ns
        return (last is not None and now - last > self._outage_ns
                and now - self._latest_sample_ns > self._outage_ns)

    def _positions(self, q: np.ndarray) -> np.ndarray:
        if self._command_q_index is not None:
            return np.asarray(q, dtype=float)[self._command_q_index]
        return self.robot.actuated_positions(q)[self._command_index]

    # ------------------------------------------------------------------ plans
    def _install(self, plan_id: int, now: Optional[int] = None) -> None:
        """Install the received plan ``plan_id`` (and forget the older ones). At ``now`` (a tick's stamp), a
        walk plan heard while the stage stands is checked against the posture's feet first
        (:meth:`_walk_start`): refused, it is not installed (:attr:`_refused_plan`), or it starts from the
        posture's feet."""
        while self._pending:
            pending_id, plan = self._pending.popitem(last=False)
            if pending_id == plan_id:
                break
        changed = plan.plan_id != self._plan_id
        timeline = plan.timeline
        if changed and plan.walking and now is not None and self._q is not None and self.robot.is_biped \
                and not self._walking_at(self._plan_time(now)):
            timeline = self._walk_start(plan, (now - plan.stamp_ns) * 1e-9)
            if timeline is None:
                return
        if changed:
            self._refused_plan = None
        if changed and plan.walking and not self._plan_walking:
            # A walk starts: the planner's references for it get reference_timeout to arrive before the stage
            # reports them stale (after a restart, discovery of the planner can lag the latched plan); from
            # the first sample when none came yet (-1).
            self._grace_until_ns = self._latest_sample_ns + self._timeout_ns if self._samples else -1
            self._walked = None
        previous, self._timeline = self._timeline, self._corrector.set_plan(timeline)
        if now is not None and self._plan_stamp_ns == plan.stamp_ns:  # a step in the air moved: re-planned
            self._timeline = retarget_swing(self._timeline, previous, self._plan_time(now))
        self._plan_id = plan.plan_id
        self._plan_walking = plan.walking
        self._plan_stamp_ns = plan.stamp_ns
        if changed:
            self._standing = None  # rebuilt from this plan's feet when standing
            self._landed = self._landed and not plan.walking

    def _install_plan_of_reference(self, plan_id: int, now: int) -> bool:
        """Install the plan a reference stamped ``now`` names, if received. False for a plan never received
        while the stage has one (the reference is in flight across a restart or a plan change, not a
        failure), or refused.

        References of plan 0 come from a planner without a plan (restarted, the walk_behavior's latched plan
        not heard yet): it stands at the measured feet from the measured CoM, and they are followed while
        this stage's plan stands too and no other plan waits (issue 17: a restarted planner drives the loop
        before the plan reaches it, 0.4 s later in 7 of 50 restarts); never while a walk is in progress, nor
        with a newer plan received (a walk the planner has not heard: the stage waits for its references and
        reports the planner)."""
        if plan_id in self._pending:
            self._install(plan_id, now)
        if self._plan_id is None or plan_id == self._plan_id:
            return True
        return plan_id == NO_PLAN and not self._pending and not self._walking_at(self._plan_time(now))

    def _walk_start(self, plan: WalkPlan, t: float) -> Optional[Timeline]:
        """The timeline a walk plan heard while standing is walked on at its time ``t``, or None when it is
        refused: a sole of the plan at ``t`` farther than ``max_plan_offset`` horizontally from where the
        posture has it, off its ground (:data:`GROUND_TOLERANCE`), or turned more than
        :data:`MAX_PLAN_YAW_OFFSET` (a plan made on feet where the robot no longer stands: walked, a stance
        foot would jump and the first swing start from where the foot is not; the IK failed and a step never
        landed). Closer, the plan is walked on its own feet (made from the measured ones: on MuJoCo the
        posture's feet are off where the feet slid, and starting the plan from them instead made Talos fall
        in the walk after an ik restart)."""
        timeline = plan.timeline
        poses = self.robot.foot_poses(self._q)
        planned = foot_targets_at(timeline, t)
        far = []
        for foot, frame in self._feet.items():
            position, rotation = poses[frame]
            target = planned[foot]
            offset = float(np.hypot(position[0] - target.position[0], position[1] - target.position[1]))
            height = float(position[2] - target.position[2])
            turn = abs(math.remainder(yaw_of(rotation) - target.yaw, 2.0 * math.pi))
            if (offset > self.params.max_plan_offset or abs(height) > GROUND_TOLERANCE
                    or turn > MAX_PLAN_YAW_OFFSET):
                far.append(f"{foot.name.lower()} sole {100.0 * offset:.1f} cm from where the robot stands "
                           f"({100.0 * height:+.1f} cm high, turned {turn:.2f} rad)")
        if far:
            self._refused_plan = plan.plan_id
            self.refused_plans += 1
            self._refusal = (f"walk plan {plan.plan_id} refused at t = {t:.3f} s: {'; '.join(far)}; at most "
                             f"{100.0 * self.params.max_plan_offset:.0f} cm (max_plan_offset), "
                             f"{100.0 * GROUND_TOLERANCE:.0f} cm high, {MAX_PLAN_YAW_OFFSET} rad: the robot "
                             "stands where it is until a new plan")
            self.log.error(self._refusal)
            return None
        return timeline

    def _plan_time(self, ns: int) -> Optional[float]:
        """Time [s] of the timeline at stamp ``ns``, or None without a plan."""
        if self._timeline is None:
            return None
        return (ns - self._plan_stamp_ns) * 1e-9

    def _walking_at(self, t: Optional[float]) -> bool:
        """Whether a walk is in progress at plan time ``t`` (unknown time: while the plan walks); not on a
        plan a safe stop ended."""
        if self._timeline is None or not self._plan_walking or self._plan_id == self._stopped_plan:
            return False
        return t is None or t < self._timeline.t_end

    def _walking_stance(self, t: float) -> tuple[int, ...]:
        """Indices of the stance feet of the timeline at plan time ``t``, sorted."""
        return tuple(sorted(int(foot) for foot in self._timeline.phase_at(t).stance_feet))

    def _standing_targets(self) -> StandingTargets:
        """Standing targets, built when missing from the model configuration (the current posture).

        With CoM references (reference-driven ticks) a biped's feet are the plan's final feet, except a foot
        of the posture on the plan's ground (within :data:`GROUND_TOLERANCE` of its height) farther than
        ``max_settle_distance`` from it, which stays where it is (as the planner stands at such a measured
        sole: after a fault, a Stand plan may put a foot where it never went); for sensor-driven ticks,
        which hold the body where the posture has it, the feet are the posture's; after a safe stop until a
        plan walks (the robot stands where its feet landed), where the latest sample measures them
        (:meth:`_landed_feet`). With feet from a plan or a measurement, the torso is upright over them.
        """
        if self._standing is None:
            planned, landed = None, False
            if (self._timeline is not None and self.robot.is_biped and self._tick_source != TickSource.SENSOR
                    and self._plan_id != self._posture_feet_plan and not self._landed):
                planned = self._planned_standing_feet()
            elif (self._landed and self.robot.is_biped and self._tick_source != TickSource.SENSOR
                  and self._samples):
                planned, landed = self._landed_feet(), True
            torso = None
            if planned is not None:  # upright over the feet, as walking (the posture may lean after a fault)
                yaws = [yaw_of(planned[frame][:3, :3]) for frame in self._feet.values()]
                torso = rotation_z(torso_yaw(*yaws)) @ self._torso_tilt
            self._standing = StandingTargets.from_configuration(self.robot, self._q, self.params.gesture,
                                                                foot_poses=planned, torso_rotation=torso)
            self._settle = None
            if planned is not None:
                self._settle = self._settling(planned, arc=not landed)
            for leg, effect in self._effects.items():
                self._standing.gestures.set_gesture_effect(leg, effect)
        return self._standing

    def _planned_standing_feet(self) -> dict:
        """Frame -> standing pose (4x4) of each sole: the plan's final one, or the posture's place and yaw,
        flat on the plan's ground, for a sole the posture has on the plan's ground (within
        :data:`GROUND_TOLERANCE` of its height) farther than ``max_settle_distance`` from it, and for every
        sole when all of them are on the ground farther than ``SETTLE_DISTANCE`` from the plan's (a robot
        cannot step with both feet at once: on MuJoCo, a restarted ik that "settled" both feet onto a Stand
        plan they had slid 2 cm from only moved its model, and the measured CoM then trailed the references
        by that much, dragging them back through the CoM feedback)."""
        final = self._timeline.phases[-1]
        poses = self.robot.foot_poses(self._q)
        offsets, grounded = {}, {}
        for foot, frame in self._feet.items():
            plan, position = final.foot(foot), poses[frame][0]
            offsets[foot] = float(np.hypot(position[0] - plan.position[0], position[1] - plan.position[1]))
            grounded[foot] = abs(position[2] - plan.position[2]) <= GROUND_TOLERANCE
        all_off = all(grounded[foot] and offsets[foot] > SETTLE_DISTANCE for foot in self._feet)
        feet, stays = {}, []
        for foot, frame in self._feet.items():
            plan = final.foot(foot)
            position, rotation = poses[frame]
            if all_off or (offsets[foot] > self.params.max_settle_distance and grounded[foot]):
                feet[frame] = pose_matrix((position[0], position[1], plan.position[2]), yaw_of(rotation))
                stays.append(f"{foot.name.lower()} {offsets[foot]:.3f} m")
            else:
                feet[frame] = pose_matrix(plan.position, plan.yaw)
        if stays:
            why = ("every foot is on the ground away from it" if all_off else
                   f"max_settle_distance {self.params.max_settle_distance} m")
            self.log.warning(f"plan {self._plan_id} stands with feet away from where they are on the ground "
                             f"({', '.join(stays)}; {why}): they stay")
        return feet

    def _landed_feet(self) -> dict:
        """Frame -> standing pose (4x4) of each sole after a safe stop: where the latest sample measures it
        (its place and yaw; the base estimate's, else the model's base), flat at the posture's height; a sole
        measured off the posture's ground keeps the posture's pose. On MuJoCo the feet landed and slid up to
        3 cm from where the stop put them: standing on the posture's feet, the measured CoM led the
        references by that much and the planner's CoM feedback dragged them until Talos tipped over."""
        sample = self._samples[self._latest_sample_ns]
        measured = self.robot.foot_poses(self._measured_configuration(self._q, sample))
        posture = self.robot.foot_poses(self._q)
        feet = {}
        for frame in self._feet.values():
            (position, rotation), z = measured[frame], posture[frame][0][2]
            if abs(position[2] - z) <= GROUND_TOLERANCE:
                feet[frame] = pose_matrix((position[0], position[1], z), yaw_of(rotation))
            else:
                feet[frame] = pose_matrix(posture[frame][0], yaw_of(posture[frame][1]))
        return feet

    def _settling(self, planned: dict, arc: bool = True) -> Optional[dict]:
        """When standing targets put a foot elsewhere than the posture has it (a restart after a fault left a
        foot in the air or short of its step), the foot moves there over ``SETTLE_TIME`` with a small arc
        (a settling step) instead of in one tick: frame -> (from pose, to pose); None when every foot is
        within ``SETTLE_DISTANCE`` of its target. Without ``arc`` (the landed feet of a safe stop: the model's
        sole joins where the foot is measured on the ground, millimetres away) the foot stays on the ground:
        on MuJoCo, a 3 cm arc to move a landed foot 2 mm lifted it while the robot still rocked from the
        stop's landing, and Talos tipped over it."""
        poses = self.robot.foot_poses(self._q)
        moves = {}
        for frame, target in planned.items():
            position, rotation = poses[frame]
            if np.linalg.norm(np.asarray(target)[:3, 3] - position) > SETTLE_DISTANCE:
                moves[frame] = (pose_matrix(position, yaw_of(rotation)), np.asarray(target))
        if not moves:
            return None
        self.log.info(f"settling {sorted(moves)} onto the {'plan' if arc else 'measured'}'s feet over "
                      f"{SETTLE_TIME} s")
        return {"moves": moves, "start": None, "arc": arc}

    def _settled(self, now: int, times, targets: list) -> list:
        """The standing targets with the settling feet at their place on the way (min-jerk in time, an arc
        of ``SETTLE_HEIGHT`` for a foot that moves sideways), and the CoM kept within
        ``safe_stop_stance_radius`` of the feet that do not move until the settling foot has landed, then
        joining the references over ``SETTLE_RELEASE`` (the references stand between both feet: followed at
        once, they would put the weight on a foot still in the air)."""
        settle = self._settle
        if settle["start"] is None:
            settle["start"] = now
        # The CoM waits over the other feet while a settling foot that starts in the air (more than
        # SETTLE_LIFT above its target: a dead ik left it mid-swing) comes down; a foot on the ground moves
        # with the weight where the references have it.
        lifted = any(start[2, 3] - end[2, 3] > SETTLE_LIFT for start, end in settle["moves"].values())
        stance = [position for frame, position in targets[0].foot_positions.items()
                  if frame not in settle["moves"]] if lifted else []
        release = SETTLE_RELEASE if stance else 0.0
        radius = self.params.safe_stop_stance_radius
        out = []
        for dt, target in zip(times, targets):
            elapsed = (now - settle["start"]) / NS_PER_S + dt
            s = min(1.0, elapsed / SETTLE_TIME)
            blend = s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)
            positions, rotations = dict(target.foot_positions), dict(target.foot_rotations)
            for frame, (start, end) in settle["moves"].items():
                position = (1.0 - blend) * start[:3, 3] + blend * end[:3, 3]
                if settle["arc"] and np.linalg.norm(end[:2, 3] - start[:2, 3]) > SETTLE_DISTANCE:
                    position = position + [0.0, 0.0, SETTLE_HEIGHT * math.sin(math.pi * s)]
                positions[frame] = position
                if frame in rotations:
                    yaw0, yaw1 = yaw_of(start[:3, :3]), yaw_of(end[:3, :3])
                    yaw = yaw0 + blend * math.remainder(yaw1 - yaw0, 2.0 * math.pi)
                    rotations[frame] = rotation_z(yaw)
            settled = dataclasses.replace(target, foot_positions=positions, foot_rotations=rotations)
            if stance and target.com_position is not None:
                r = min(1.0, max(0.0, elapsed - SETTLE_TIME) / SETTLE_RELEASE)
                hold = 1.0 - r * r * r * (10.0 - 15.0 * r + 6.0 * r * r)
                if hold > 0.0:
                    com = np.array(target.com_position, dtype=float)
                    centre = np.mean([np.asarray(p, dtype=float)[:2] for p in stance], axis=0)
                    offset = com[:2] - centre
                    distance = float(np.hypot(offset[0], offset[1]))
                    if distance > radius:
                        clamped = centre + offset * (radius / distance)
                        com[:2] = hold * clamped + (1.0 - hold) * com[:2]
                        settled = with_com(settled, com)
            out.append(settled)
        if (now - settle["start"]) / NS_PER_S >= SETTLE_TIME + release:
            self._settle = None  # settled: the standing targets alone from now on
        return out

    # ------------------------------------------------------------------ ticks
    @staticmethod
    def _reference_targets(reference: Union[CoMReference, BadReference]) -> tuple[list[float], list]:
        """Times [s] and CoM [m] of a reference, validated; raises _Hold (BAD_REFERENCE) otherwise."""
        if isinstance(reference, BadReference):
            raise _Hold(WholeBodyStatus.BAD_REFERENCE, f"reference rejected: {reference.reason}")
        if not isinstance(reference, CoMReference):
            raise _Hold(WholeBodyStatus.BAD_REFERENCE, f"reference rejected: expected a CoMReference, got "
                        f"{type(reference).__name__}")
        try:
            reference.check()
        except InputError as exc:
            raise _Hold(WholeBodyStatus.BAD_REFERENCE, f"reference rejected: {exc}") from None
        return list(reference.times), [reference.com_position[0], reference.com_position[1]]

    def _sensor_tick(self, now: int) -> Optional[JointCommand]:
        times = [self.params.control_period, 2.0 * self.params.control_period]
        try:
            if self._safe_stop is None:
                if self._walked is not None and self._walking_at(self._plan_time(now)):
                    # The references stopped while the robot walked on this stage's commands: it lands and
                    # settles first, whatever plan came since (e.g. the walk behavior's stop: Stand at the
                    # planned feet, one of which may still be in the air).
                    self._start_safe_stop(self._plan_time(now))
                else:
                    if self._pending:
                        self._install(next(reversed(self._pending)), now)  # no references: the newest plan
                    if self._walking_at(self._plan_time(now)):
                        if now < self._grace_until_ns:
                            # A walk just started: its first references are on their way. No command (the
                            # last one goes on), but a report naming what the stage waits for.
                            self._report = TickReport(
                                now, WholeBodyStatus.WAITING_FOR_REFERENCES,
                                f"waiting for the first CoM reference of the walk of plan {self._plan_id} "
                                f"({self._references_heard(now)}): standing meanwhile; is the mpc_planner "
                                "running?")
                            return None
                        if self._walked is None:  # this stage has not walked it yet: the robot stands
                            raise _Hold(WholeBodyStatus.REFERENCE_STALE, f"no CoM reference for "
                                        f"{self.params.reference_timeout} s since the walk of plan "
                                        f"{self._plan_id} started ({self._references_heard(now)}): holding "
                                        "the standing posture; is the mpc_planner running?")
                        self._start_safe_stop(self._plan_time(now))  # a plan extending the walk
            if self._safe_stop is not None:
                return self._safe_stop_tick(now, self._plan_time(now), times)
            return self._tick(now, times, [None, None], TickSource.SENSOR)
        except _Hold as hold:
            return self._hold(now, hold.status, str(hold), TickSource.SENSOR)

    def _references_heard(self, now: int) -> str:
        """What the stage heard of the planner, for the reasons of a walk waiting for its references."""
        if self._skipped_plan is not None and self._skipped_plan != self._plan_id:
            return f"the references received name plan {self._skipped_plan}"
        if self._last_reference_ns is None:
            return "no CoM reference received yet"
        return f"the last CoM reference {(now - self._last_reference_ns) / NS_PER_S:.2f} s ago"

    # ------------------------------------------------------------------ safe stop
    def _start_safe_stop(self, t: float) -> None:
        """References stopped during the walk at plan time ``t``: plan the safe stop (:class:`SafeStop`) from
        the posture of the last command. The step in progress at the end of the last walking command (if it
        was on this plan) is finished on the corrected timeline; without one the feet stay where the
        posture has them. Raises _Hold (TARGETS_ERROR) when it cannot be planned (tried again next tick)."""
        try:
            stop = self._plan_safe_stop(t)
        except WalkMpcError as exc:
            raise _Hold(WholeBodyStatus.TARGETS_ERROR, f"safe stop not planned: {exc}") from None
        self._safe_stop = stop
        self.safe_stops += 1
        self._ahead = self._announced = None
        self._pose_targets = None
        self._standing = None
        self._gestures = {}
        self._tick_source = TickSource.SENSOR.value
        if stop.step_index:
            late = f" ({stop.landing_delay:.3f} s late)" if stop.landing_delay > 0.0 else " (on time)"
            what = f"landing step {stop.step_index} at t = {stop.t_landing:.3f} s{late}"
        else:
            what = "no step in progress: the feet stay"
        self._stop_reason = (f"no CoM reference for {self.params.safe_stop_timeout} s during the walk of "
                             f"plan {stop.plan_id}: safe stop, {what}, CoM to the middle of the soles, "
                             f"standing from t = {stop.t_settled:.3f} s")
        self.log.warning(self._stop_reason)

    def _plan_safe_stop(self, t: float) -> SafeStop:
        timeline = self._timeline
        q = self._q if self._q_ahead is None else self._q_ahead  # where the last command left the robot
        com = np.array(self.robot.com(q), dtype=float)
        velocity = np.zeros(3)
        if self._q_ahead is not None and self._q is not None:  # the last command's points at T and 2T
            velocity[:2] = (com[:2] - np.asarray(self.robot.com(self._q))[:2]) / self.params.control_period
        shift = self.params.safe_stop_shift_duration
        resume = None if self._walked is None else min(t, self._plan_time(self._walked))
        phase = None if resume is None else timeline.phase_at(resume)
        poses = self.robot.foot_poses(q)
        single = phase is not None and phase.kind is PhaseKind.SINGLE and phase.swing_start is not None

        def ground(foot: Foot) -> float:  # of the foot in the phase at resume (swinging: its lift-off)
            swinging = single and foot is phase.swing_foot
            return float((phase.swing_start if swinging else phase.foot(foot)).position[2])

        lifted = (single and resume < phase.t_end
                  and poses[self._feet[phase.swing_foot]][0][2] - ground(phase.swing_foot) > SETTLE_LIFT / 2)
        if lifted:
            # Finish the step in progress: the timeline up to it, then double support, catch and stand.
            first = timeline.phases[0]
            steps = [step for step in timeline.steps if step.step_index <= phase.step_index]
            feet = Timeline(first.left, first.right, steps, timeline.timing, timeline.t0)
            stance = phase.foot(phase.swing_foot.other).position
            ground = stance[2]
            speedup = self.params.safe_stop_speedup
            landing = max(phase.t_end, t + (phase.t_end - resume) / speedup)
            step_index = phase.step_index
            final = feet.phases[-1]
        else:  # no step in progress (or its swing foot not yet off the ground): the feet stay where they are
            feet_now = []
            for foot in (Foot.LEFT, Foot.RIGHT):
                position, rotation = poses[self._feet[foot]]
                x, y, z = (float(v) for v in position)
                if phase is not None:  # on its ground (a foot just lifting off is put back down)
                    z = ground(foot)
                feet_now.append(FootPose((x, y, z), yaw_of(rotation)))
            left, right = feet_now
            feet = Timeline(left, right, (), timeline.timing, t)
            resume, landing, step_index = t, t, 0
            final = feet.phases[-1]
            stance = None
            ground = 0.5 * (left.position[2] + right.position[2])
        middle = 0.5 * (np.asarray(final.left.position) + np.asarray(final.right.position))
        com_final = np.array([middle[0], middle[1], com[2] + middle[2] - ground])
        if stance is None:
            com_stance = com_final
        else:  # over the stance sole: where the CoM is if close enough to the sole's origin, else closer
            offset = com[:2] - np.asarray(stance[:2])
            distance = float(np.hypot(offset[0], offset[1]))
            radius = self.params.safe_stop_stance_radius
            scale = 1.0 if distance <= radius else radius / distance
            com_stance = np.array([stance[0] + scale * offset[0], stance[1] + scale * offset[1], com[2]])
        touchdown = phase.t_end if step_index else resume
        settled = max(t, landing) + shift
        return SafeStop(self._plan_id, step_index, feet, t, resume, touchdown, landing, com, com_stance,
                        com_final, shift, settled, velocity)

    def _safe_stop_tick(self, now: int, t: float, times: list[float]) -> JointCommand:
        """A tick of the safe stop in progress (status SAFE_STOP); the tick whose point at T reaches the
        settled posture ends it: the stage then stands on the landed feet (standing targets at the
        posture's feet) and the stopped plan is not walked again."""
        stop = self._safe_stop
        try:
            targets = [walk_targets(stop.timeline, stop.timeline_time(t + dt), stop.com(t + dt),
                                    self._torso_tilt) for dt in times]
        except WalkMpcError as exc:
            raise _Hold(WholeBodyStatus.TARGETS_ERROR, f"safe stop targets: {exc}") from None
        q_init = self._q if self._q_ahead is None else self._q_ahead
        first, second = self._solve(targets, q_init)
        positions, command = self._command_of(now, times, first, second, TickSource.SENSOR)
        self._q = np.array(first.q)
        self._q_ahead = np.array(second.q)
        self._command = positions[0]
        self._last_tick_ns = now
        phase = stop.timeline.phase_at(stop.timeline_time(t))
        self._stance = tuple(sorted(int(foot) for foot in phase.stance_feet))
        if t + times[0] >= stop.t_settled:
            self._safe_stop = None
            self._stopped_plan = stop.plan_id
            self._landed = True
            self._standing = None  # standing from the landed posture from the next tick on
            self._walked = None
            self.log.info(f"safe stop of plan {stop.plan_id} settled at t = {t + times[0]:.3f} s: standing "
                          "on the landed feet until a new plan")
        return dataclasses.replace(command, status=WholeBodyStatus.SAFE_STOP, reason=self._stop_reason)

    def _prepare_tick(self, now: int) -> None:
        """Work of the coming reference tick of sample ``now`` that needs no reference, done on arrival of
        the sample while the planner computes that reference: at a lift-off the support correction, at a
        support change the measured configuration of the re-sync, and the walking targets at T and 2T but
        their CoM. :meth:`_tick` then finds them done (the correction is decided once per phase change, so
        it is not made twice). Skipped while a received plan waits for its first reference (the reference
        may install it). Errors are left to the tick, which makes the same calls and reports them."""
        if self._pending or self._timeline is None or self._last_reference_ns is None:
            return
        t = self._plan_time(now)
        if not self._walking_at(t):
            return
        sample = self._samples[now]
        if self._correct_support(t, sample):
            self.prepared += 1
        times = (self.params.control_period, 2.0 * self.params.control_period)
        try:
            if self._stance is not None and self._walking_stance(t) != self._stance:
                self._sample_configuration(sample)
            targets = [walk_pose_targets(self._timeline, t + dt, self._torso_tilt) for dt in times]
        except WalkMpcError:
            return
        self._pose_targets = (now, self._timeline, times, targets)
        announced = self._announced
        if announced is not None and announced[0] == now:
            # The sample may change what the announced reference's tick solves (a support correction moves
            # a target, a support change re-syncs): then solve it again now, still ahead of the reference.
            self._solve_ahead(now, announced[1], announced[2], sample)

    def _tick(self, now: int, times: list[float], coms: list, source: TickSource) -> JointCommand:
        """Targets at now + T and now + 2T, two solutions, the command; raises _Hold on failure.

        Sensor-driven ticks (``coms`` None) hold the body frame instead of a CoM; when they take over from
        reference-driven ticks the standing targets restart from the current posture, so the body is held
        where it is (gestures so far are in that posture already).
        """
        if source == TickSource.SENSOR and self._tick_source != TickSource.SENSOR:
            self._standing = None
            self._q_ahead = None  # hold the posture commanded now, not the one planned for later
        elif source == TickSource.REFERENCE and self._tick_source == TickSource.SENSOR:
            # References (re)start (a restarted planner or ik): stand on the plan's feet again, not on the
            # posture held meanwhile (after a fault it may hold a foot in the air).
            self._standing = None
        if source != self._tick_source:  # the reference stream started, stopped or resumed
            self.log.info("ticking on the CoM references" if source == TickSource.REFERENCE else
                          "ticking on the sensor samples (no CoM reference for "
                          f"{self.params.reference_timeout} s): holding the posture")
        self._tick_source = source.value
        t = self._plan_time(now)
        sample = self._sample_at(now)
        walking = self._walking_at(t)
        if walking:
            self._standing = None
            if sample is not None:
                self._correct_support(t, sample)
            if self._gestures:
                self.log.warning(f"queued gestures {sorted(d.name for d in self._gestures)} dropped: a walk "
                                 "started")
                self._gestures = {}
        try:
            if not walking:
                self._apply_gestures()
            targets, stance, q_init, resync = self._problem(now, times, coms, sample)
        except WalkMpcError as exc:
            raise _Hold(WholeBodyStatus.TARGETS_ERROR, f"cannot build the IK targets: {exc}") from None
        self.resyncs += resync
        self._stance = stance
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.matches(now, times, targets, q_init, self._command):
            first, second, positions = ahead.first, ahead.second, ahead.positions
            command = ahead.joint_command
            self.ahead_ticks += 1
        else:
            first, second = self._solve(targets, q_init)
            positions, command = self._command_of(now, times, first, second, source)
        self._q = np.array(first.q)
        self._q_ahead = np.array(second.q)
        self._command = positions[0]
        self._last_tick_ns = now
        if walking and source == TickSource.REFERENCE:
            self._walked = now + round(times[1] * NS_PER_S)  # where a safe stop would resume the walk
        return command

    def _problem(self, now: int, times, coms: list, sample: Optional[tuple], latest: bool = True) -> tuple:
        """What the tick ``now`` solves (after its support correction): the targets at T and 2T, the stance
        feet, the initial configuration, and whether that is a re-sync (a support change: seed 001). A
        re-sync without ``sample`` uses the latest one, or with ``latest`` false gives no initial
        configuration (None). Raises WalkMpcError when the targets cannot be built."""
        t = self._plan_time(now)
        if self._walking_at(t):
            prepared = self._pose_targets
            if (prepared is not None and prepared[0] == now and prepared[1] is self._timeline
                    and prepared[2] == tuple(times)):  # built on arrival of the sample
                targets = [with_com(pose, com) for pose, com in zip(prepared[3], coms)]
            else:
                targets = [walk_targets(self._timeline, t + dt, com, self._torso_tilt)
                           for dt, com in zip(times, coms)]
            stance = self._walking_stance(t)
        else:
            standing = self._standing_targets()
            targets = [standing.targets(com_position=com) for com in coms]
            if self._settle is not None:
                targets = self._settled(now, times, targets)
            stance = tuple(range(len(self.robot.foot_frames)))  # every foot on the ground
        if self._stabilizing:
            targets = self._stabilized(targets, coms)
        # Initial guess: the last tick's solution at 2T, the posture planned for this tick's T (0-1
        # Gauss-Newton steps instead of 2 while walking); the measured configuration at a support change.
        q_init = self._q if self._q_ahead is None else self._q_ahead
        resync = self._stance is not None and stance != self._stance and self._measured_joints is not None
        if resync:
            if sample is not None:
                q_init = self._sample_configuration(sample)
            elif latest:
                q_init = self._measured_configuration(self._q, self._samples[self._latest_sample_ns])
            else:
                q_init = None
        return targets, stance, q_init, resync

    def _stabilized(self, targets: list, coms: list) -> list:
        """The targets with the stabilizer's offsets (reference-driven ticks: with a CoM); keeps the sole
        targets at T without offsets (the stabilizer's leg odometry anchors)."""
        first = targets[0]
        soles = {}
        for foot, frame in self._feet.items():
            key = foot if foot in first.foot_positions else frame
            if key in first.foot_positions and key in first.foot_rotations:
                soles[foot] = (first.foot_positions[key], yaw_of(first.foot_rotations[key]), key)
        if len(soles) != 2:
            return targets
        self._soles = {foot: (position, yaw) for foot, (position, yaw, _) in soles.items()}
        out = self.stabilizer.output
        if not out.active or coms[0] is None:
            return targets
        stabilized = []
        for target in targets:
            positions, rotations = dict(target.foot_positions), dict(target.foot_rotations)
            for foot, (_, _, key) in soles.items():
                roll, pitch, height = out.sole_offsets[foot]
                position = np.array(positions[key], dtype=float)
                position[2] += height
                positions[key] = position
                rotations[key] = sole_rotation(yaw_of(rotations[key]), roll, pitch)
            com = np.asarray(target.com_position, dtype=float) + out.com_offset
            stabilized.append(IKTargets._trusted(com, positions, rotations, target.torso_orientation,
                                                 target.posture))
        return stabilized

    def _solve_ahead(self, now: int, times, coms: list, sample: Optional[tuple]) -> None:
        """Solve the tick ``now`` for an announced reference ``(times, coms)`` and keep it for the tick
        (:class:`_Ahead`), unless the kept one is that very problem already; with ``sample`` None, not at a
        support change (its re-sync needs the tick's sample)."""
        ahead, self._ahead = self._ahead, None
        try:
            targets, _, q_init, _ = self._problem(now, times, coms, sample, latest=False)
            if q_init is None:
                return
            if ahead is not None and ahead.matches(now, times, targets, q_init, self._command):
                self._ahead = ahead
                return
            first, second = self._solve(targets, q_init)
        except (_Hold, WalkMpcError):
            return  # the tick meets the same problem and reports it
        positions, command = self._command_of(now, times, first, second, TickSource.REFERENCE)
        self._ahead = _Ahead(now, tuple(times), targets, q_init, self._command, first, second, positions,
                             command)

    def _command_of(self, now: int, times, first: IKResult, second: IKResult,
                    source: TickSource) -> tuple[list, JointCommand]:
        """Commanded positions at T and 2T and the command of the tick ``now`` (velocities relative to the
        previous command)."""
        positions = [self._positions(first.q), self._positions(second.q)]
        previous = self._command
        velocities = [(positions[1] - previous) / times[1],
                      (positions[1] - positions[0]) / (times[1] - times[0])]
        tail = self._landing_tail(now, times, second) if source is TickSource.REFERENCE else None
        if tail is None:
            return positions, JointCommand(now, tuple(times), positions, velocities, WholeBodyStatus.OK,
                                           source.value, first.solve_time + second.solve_time)
        zero = np.zeros_like(tail[2])
        command = JointCommand(now, (*times, tail[0], tail[1]), [*positions, positions[1], tail[2]],
                               [*velocities, zero, zero], WholeBodyStatus.OK, source.value,
                               first.solve_time + second.solve_time)
        return positions, command

    def _landing_tail(self, now: int, times, second: IKResult) -> Optional[tuple]:
        """``(end of the hold, landing [s after now], positions)`` of the landing tail of a walking command
        whose second point is in single support with the swing foot above the ground (see ``landing_tail``),
        or None (also when the IK does not converge)."""
        if not self.params.landing_tail or not self.robot.is_biped:
            return None
        t = self._plan_time(now)
        if not self._walking_at(t):
            return None
        phase = self._timeline.phase_at(t + times[-1])
        if phase.kind is not PhaseKind.SINGLE:
            return None
        hold = times[-1] + self.params.safe_stop_timeout + 2.0 * self.params.control_period
        positions = self._landing_posture(phase, t + times[-1], second)
        return None if positions is None else (hold, hold + LANDING_TIME, positions)

    def _landing_posture(self, phase, t: float, second: IKResult) -> Optional[np.ndarray]:
        """Commanded positions of ``second``'s posture with the swing foot of ``phase`` put down vertically
        on its planned ground, flat, at its yaw; the stance foot, the CoM and the torso where they are (the
        least change: the driver interpolates the joints linearly to it). None when the foot is on the
        ground already or the IK does not converge."""
        swing = self._feet[phase.swing_foot]
        poses = self.robot.foot_poses(second.q)
        position, rotation = poses[swing]
        ground = phase.foot(phase.swing_foot).position[2]
        if position[2] - ground < SETTLE_LIFT / 2.0:
            return None
        try:
            template = walk_targets(self._timeline, t, self.robot.com(second.q), self._torso_tilt)
            # the walking targets name the feet by Foot: every foot where it is, the swing one put down
            positions = {foot: poses[self._feet[foot]][0] for foot in template.foot_positions}
            rotations = {foot: poses[self._feet[foot]][1] for foot in template.foot_rotations}
            positions[phase.swing_foot] = np.array([position[0], position[1], ground])
            rotations[phase.swing_foot] = rotation_z(yaw_of(rotation))
            targets = dataclasses.replace(template, foot_positions=positions, foot_rotations=rotations)
            result = self.solver.solve(targets, second.q)
        except WalkMpcError as exc:
            self.log.debug(f"no landing tail at t = {t:.3f} s: {exc}")
            return None
        if not result.success:
            self.log.debug(f"no landing tail at t = {t:.3f} s: {result.message}")
            return None
        return self._positions(result.q)

    def _correct_support(self, t: float, sample: tuple) -> bool:
        """The shared support-foot correction policy on this tick's sample; True if it corrected."""
        try:
            correction = self._corrector.observe(t, lambda foot: self._measured_sole(sample, foot, t))
        except WalkMpcError as exc:  # a sample that cannot be measured: the plan is kept this step
            self.log.warning(f"support correction skipped at t = {t:.3f} s: {exc}")
            return False
        if correction is None or not correction.applied:
            return False
        self._timeline = retarget_swing(self._corrector.timeline, self._timeline, t, replan=False)
        self.log.debug(f"{correction.foot.name.lower()} sole of step {correction.step_index} measured "
                       f"{1e3 * correction.position_error:.2f} mm from its plan at t = {t:.3f} s")
        return True

    def _solve(self, targets: list[IKTargets], q_init: np.ndarray) -> tuple[IKResult, IKResult]:
        try:
            first, second = self.solver.solve_two(targets[0], targets[1], q_init)
        except WalkMpcError as exc:
            raise _Hold(WholeBodyStatus.TARGETS_ERROR, f"IK rejected its inputs: {exc}") from None
        for which, result in (("T", first), ("2T", second)):
            if not result.success:
                worst = max(result.residuals.items(), key=lambda item: item[1], default=("", 0.0))
                raise _Hold(WholeBodyStatus.IK_FAILED,
                            f"IK solution at {which} failed ({result.message}, {result.iterations} "
                            f"iterations, largest residual {worst[0]} {worst[1]:.3g})")
        return first, second

    def _hold(self, now: int, status: WholeBodyStatus, reason: str, source: TickSource) -> JointCommand:
        """The last command held (no jump) with ``status`` and ``reason`` (logged)."""
        self.log.warning(f"holding the last command: {reason}")
        period = self.params.control_period
        held = self._command
        zero = np.zeros_like(held)
        self._last_tick_ns = now
        return JointCommand(now, (period, 2.0 * period), [held, held], [zero, zero], status, source.value,
                            0.0, reason)


__all__ = ["MAX_PENDING_PLANS", "MAX_SAMPLES", "BadReference", "GestureReply", "SafeStop", "TickSource",
           "WholeBodyStage", "WholeBodyStageParameters", "min_jerk"]
