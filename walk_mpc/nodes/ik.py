"""ROS 2 node ``ik``: two whole-body IK solutions per control period (seed 001), joint commands, gestures.

Topics (relative names, QoS reliable depth 10 unless said):

* subscribes ``walk/plan`` (``FootstepPlan``, reliable + transient local, depth 1): the gait timeline,
  ``t = 0`` at the plan's stamp (biped robots only; a quadruped ignores plans and stands). A new plan
  is installed at the first ComReference that names its ``plan_id`` (the mpc_planner switches plans
  at its next tick, so references already in flight for the previous plan are still solved on it),
  or at the next sensor-driven tick;
* subscribes ``mpc/com_reference`` (``ComReference``, best effort: see ``stream_input_qos``): each one is a
  control tick. With ``time_from_stamp = [T, 2T]`` and the CoM references at those instants, the node
  builds the IK targets of both instants (:func:`~walk_mpc.core.body.targets.walk_targets` while a walk is in
  progress, the standing targets under gestures otherwise), solves them with
  :meth:`~walk_mpc.core.body.ik.IKSolver.solve_two` (the first from the model configuration, the second
  from the first) and publishes:

  - ``joint_trajectory`` (``trajectory_msgs/JointTrajectory``): ``header.stamp`` = the reference's
    stamp, ``joint_names``, two points at ``time_from_start`` T and 2T with positions and velocities
    (point 1: central difference ``(q2 - q0) / 2T`` with ``q0`` the previous command; point 2:
    backward difference ``(q2 - q1) / T``), as ros2_control's JointTrajectoryController takes it;
  - ``joint_commands`` (``std_msgs/Float64MultiArray``): positions of the first point
    (forward_command_controller style), in the order of ``joint_names``;
  - ``joint_states`` (``sensor_msgs/JointState``, if ``publish_joint_states``): the first point,
    stamped at the reference's stamp + T (the instant it is to be reached);
  - ``ik/timing`` (``TickTiming``): ``solve_time`` of both solutions, ``tick_time`` of the
    callback, ``status`` (:data:`STATUS_OK` or one of the failure codes below), ``trigger`` (the resolved
    ``mpc/com_reference`` for a tick on a reference, ``sensor_state`` for one holding the posture without
    references: a client can wait for the whole chain sensor -> planner -> ik before walking);

* subscribes ``sensor_state`` (``SensorState``, best effort): the measured joint angles (and the base pose
  when ``base_estimate_valid``). They initialise the IK's model configuration, and at each support change
  of the walk (the set of stance feet differs from the previous tick's, seed 001) the model's joint
  angles (and base, when estimated) are re-synchronised with the measurement of the reference's
  stamp (else the latest one) before solving. Between support changes the solution at T starts from the
  previous tick's solution at 2T (the same instant), the one at 2T from the solution at T.
  A sample due for a control tick while references flow is prepared in this callback, while the
  mpc_planner computes that tick's reference in its own process: the lift-off's support correction, the
  re-sync configuration and the walking targets at T and 2T but their CoM. The reference's tick uses them
  (same stamp, same timeline, times [T, 2T]) or builds them itself, with the same result.
* subscribes ``mpc/com_reference_ahead`` (``ComReference``, best effort; if ``solve_ahead``): the
  mpc_planner's reference of its next tick, announced on the sample before it (its ``prepare_ahead``).
  The node solves that tick at once (again when the tick's own sample arrives, if it corrects the support
  or changes it: re-sync) and keeps the messages; the tick on ``mpc/com_reference`` publishes them when
  it would solve exactly the same problem (same stamp, times and CoM, targets bit for bit, same initial
  configuration and previous command), else it solves as usual. The commands are the same either way.

Support-foot correction (seed 001): the walking targets come from the timeline corrected by
:class:`~walk_mpc.core.mpc.support_correction.SupportCorrector`, the policy the mpc_planner node applies
on the same ticks and the same samples (``support_correction_enabled``, ``support_shift_later_steps``,
``support_measured_height``, set alike in both nodes): at each lift-off the stance foot takes its
measured pose (forward kinematics of the sample of the reference's stamp, or of the latest sample if
at most one control period older, else no correction; without base estimate the base is placed by a
stance sole at its timeline pose), while the swing foot keeps its planned world pose. So the IK aims each
swing foot at its planned world position from where the stance foot really is.

Start-up: the node publishes nothing until it has a measured state or a CoM reference. The first of
them initialises the model: the measured configuration, or ``RobotModel.reference_configuration()``
when a reference comes first. While no ComReference has arrived for ``reference_timeout`` of sensor
time (e.g. before the MPC starts, or on a quadruped without MPC), each SensorState at least
``control_period`` after the previous tick is a standing tick: the standing targets under gestures
with the body position held instead of a CoM, restarting from the current posture when they take over
from references (so the posture is held exactly, no jump); during a walk such a tick holds the last
command instead (:data:`STATUS_REFERENCE_STALE`).

Outage: two consecutive SensorState stamps more than ``sensor_timeout`` apart (a restarted simulator or
state estimator: the robot may have moved or been reset meanwhile) restart the node from the sample after
it as from the first one: the model re-initialised from the measurement, the measured posture held until
the mpc_planner's references come again, and the standing feet taken from the posture until a new plan
arrives (the walk_behavior re-anchors Stand at the measured feet). References resuming after an outage
before this node has a sample of their time are skipped (the planner saw the outage end first).

References before the first sensor sample (nothing valid to solve from, e.g. just after a restart) and
references naming a plan this node never received (in flight across a restart) are skipped without a
status: they are not failures, and a planner stuck on such a plan makes the references stale.

Failures never publish a jump: a reference with NaN/inf or malformed arrays
(:data:`STATUS_BAD_REFERENCE`), targets that cannot be built (:data:`STATUS_TARGETS_ERROR`) or a solve
that does not converge (:data:`STATUS_IK_FAILED`) republish the last command (both trajectory points at
its positions, zero velocities), report the status on ``ik/timing`` and log a throttled warning. The
model configuration stays the last command's.

Services (seed 003, legs = the robot's foot frames in model order: Talos left, right; solo12 FL, FR,
HL, HR):

* ``ik/exec_gesture`` (``ExecGesture``): applies a gesture to the legs with effect; with friction and at
  least ``gesture.min_support_legs`` of them in contact (all feet are in contact while standing) the
  body moves by the inverse transform (``body_moved``) and the feet stay. Effective at the next tick.
  Refused while a walk is in progress, before the node has a state, and for an unknown dof or a
  non-finite value (``success = false`` with the reason).
* ``ik/set_gesture_effect`` (``SetGestureEffect``): selects whether a leg (index) follows gestures;
  unknown leg -> ``success = false`` listing the legs. The selection survives walks.

Gesture moves are relative to the current standing stance: a new plan (walk or stand) resets the
standing targets to the plan's feet (bipeds) and the current body, dropping earlier gesture moves.
"""

from __future__ import annotations

import array
import collections
import dataclasses
import math
import sys
import time
from typing import NamedTuple, Optional, Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from walk_mpc.core.body.gesture import GestureController, GestureDof
from walk_mpc.core.body.ik import IKResult, IKSolver, IKTargets
from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.body.state_estimation import estimate_state
from walk_mpc.core.body.targets import (
    StandingTargets,
    pose_matrix,
    walk_pose_targets,
    walk_targets,
    with_com,
    yaw_free,
)
from walk_mpc.core.errors import InputError, JointNotFound, ParameterError, WalkMpcError
from walk_mpc.core.mpc.support_correction import SupportCorrectionParameters, SupportCorrector, anchor_foot
from walk_mpc.core.params import check_positive
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Timeline
from walk_mpc.msg import ComReference, FootstepPlan, SensorState, TickTiming
from walk_mpc.nodes._common import (
    LATCHED_QOS,
    DataclassParameters,
    GraphNode,
    node_options,
    reliable_qos,
    run,
    stream_input_qos,
)
from walk_mpc.nodes.conversions import PlanMessage, sensor_base_pose, stamp_ns
from walk_mpc.srv import ExecGesture, SetGestureEffect

#: ``TickTiming.status`` values of ``ik/timing``.
STATUS_OK = 0
STATUS_IK_FAILED = 1  # a solve did not converge: last command held
STATUS_BAD_REFERENCE = 2  # NaN/inf or malformed ComReference: last command held
STATUS_TARGETS_ERROR = 3  # targets could not be built (e.g. plan unusable): last command held
STATUS_REFERENCE_STALE = 4  # walking but no ComReference for reference_timeout: last command held

WARNING_PERIOD = 1.0  # [s] minimum interval between two warnings of the same kind
MAX_PENDING_PLANS = 8  # received plans kept until a reference names one
MAX_SAMPLES = 16  # measured samples kept by stamp (the reference's sample is usually the latest)

_TOPICS = ("plan_topic", "reference_topic", "reference_ahead_topic", "sensor_topic", "trajectory_topic",
           "commands_topic", "joint_states_topic", "timing_topic")


def is_reference_tick(timing: TickTiming, reference_topic: str) -> bool:
    """Whether an ``ik/timing`` message reports a successful tick on ``reference_topic`` (resolved name):
    the chain sensor -> mpc_planner -> ik runs."""
    return timing.status == STATUS_OK and timing.trigger == reference_topic


@dataclasses.dataclass(frozen=True)
class IKNodeParameters:
    """Parameters of the ik node.

    Attributes:
        robot: Robot model.
        solver: IK solver.
        gesture: Gesture controller (standing).
        joint_names: Joints of the commands, in order (empty = every actuated joint in model order).
        control_period: Control period T [s] (trajectory times of holds and sensor-driven ticks).
        reference_timeout: Sensor time without ComReference after which SensorState drives the
            ticks [s].
        sensor_timeout: Two consecutive SensorState stamps further apart [s] are an outage (see the
            module docstring).
        publish_joint_states: Whether to publish ``joint_states``.
        support_correction_enabled: Walk on the support-corrected timeline (as the mpc_planner).
        support_shift_later_steps: The correction also translates later steps (as the mpc_planner).
        support_measured_height: The corrected pose takes the measured sole height (as the mpc_planner).
        solve_ahead: Solve the references the mpc_planner announces on ``reference_ahead_topic`` (its
            prepared solves) before their tick; the tick publishes that solution when its reference, targets
            and initial configuration are exactly the announced ones, else it solves as usual.
        plan_topic: FootstepPlan input.
        reference_topic: ComReference input.
        reference_ahead_topic: ComReference input announced ahead (``solve_ahead``).
        sensor_topic: SensorState input.
        trajectory_topic: JointTrajectory output.
        commands_topic: Float64MultiArray output.
        joint_states_topic: JointState output.
        timing_topic: TickTiming output.
    """

    robot: RobotModel.Parameters = dataclasses.field(default_factory=RobotModel.Parameters)
    solver: IKSolver.Parameters = dataclasses.field(default_factory=IKSolver.Parameters)
    gesture: GestureController.Parameters = dataclasses.field(default_factory=GestureController.Parameters)
    joint_names: tuple[str, ...] = ()
    control_period: float = 0.02
    reference_timeout: float = 0.1
    sensor_timeout: float = 0.25
    publish_joint_states: bool = True
    support_correction_enabled: bool = True
    support_shift_later_steps: bool = False
    support_measured_height: bool = False
    solve_ahead: bool = True
    plan_topic: str = "walk/plan"
    reference_topic: str = "mpc/com_reference"
    reference_ahead_topic: str = "mpc/com_reference_ahead"
    sensor_topic: str = "sensor_state"
    trajectory_topic: str = "joint_trajectory"
    commands_topic: str = "joint_commands"
    joint_states_topic: str = "joint_states"
    timing_topic: str = "ik/timing"

    def __post_init__(self) -> None:
        object.__setattr__(self, "joint_names", tuple(self.joint_names))
        if len(set(self.joint_names)) != len(self.joint_names):
            raise ParameterError("joint_names", self.joint_names, "distinct joint names")
        check_positive("control_period", self.control_period)
        check_positive("reference_timeout", self.reference_timeout)
        check_positive("sensor_timeout", self.sensor_timeout)
        for name in ("publish_joint_states", "support_correction_enabled", "support_shift_later_steps",
                     "support_measured_height", "solve_ahead"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")
        for field in _TOPICS:
            value = getattr(self, field)
            if not isinstance(value, str) or not value:
                raise ParameterError(field, value, "a topic name")

    @property
    def support_correction(self) -> SupportCorrectionParameters:
        """Parameters of the support-foot correction policy."""
        return SupportCorrectionParameters(enabled=self.support_correction_enabled,
                                           shift_later_steps=self.support_shift_later_steps,
                                           measured_height=self.support_measured_height)



def duration_msg(seconds: float) -> Duration:
    """Duration message of ``seconds`` >= 0."""
    total = int(round(seconds * 1e9))
    return Duration(sec=total // 1_000_000_000, nanosec=total % 1_000_000_000)


def time_msg(ns: int) -> Time:
    """builtin_interfaces Time of integer nanoseconds."""
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _doubles(values: np.ndarray) -> array.array:
    """A float64[] message field of an array, without the per-element checks of the message setter."""
    return array.array("d", np.ascontiguousarray(values, dtype=float).tobytes())


def read_parameters(node: Node) -> IKNodeParameters:
    """IKNodeParameters from the node's ROS parameters (declared from the dataclass)."""
    return DataclassParameters(node, IKNodeParameters).read()



class _Hold(Exception):
    """A tick that holds the last command (internal): status code and reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class _Ahead(NamedTuple):
    """The tick of a reference announced ahead, solved (see ``IKNode._on_reference_ahead``)."""

    stamp_ns: int
    times: tuple
    targets: list  # IKTargets at T and 2T
    q_init: np.ndarray  # the initial configuration it was solved from (identity)
    command: np.ndarray  # the previous command its velocities are relative to (identity)
    first: IKResult
    second: IKResult
    positions: list
    messages: tuple  # (JointTrajectory, Float64MultiArray, JointState or None)

    def matches(self, now: int, times, targets: list, q_init: np.ndarray, command: np.ndarray) -> bool:
        """Whether the tick ``now`` would solve exactly this problem."""
        return (self.stamp_ns == now and self.times == tuple(times) and self.q_init is q_init
                and self.command is command and all(a.same_as(b) for a, b in zip(self.targets, targets)))


class IKNode(GraphNode):
    """Whole-body IK of the walk_mpc graph: ComReference + plan -> two joint postures per control period."""

    def __init__(self, params: Optional[IKNodeParameters] = None, **kwargs) -> None:
        """Create the node.

        Args:
            params: Parameters; None reads them from the node's ROS parameters.
            **kwargs: ``Node`` keyword arguments (``parameter_overrides``, ``context``).

        Raises:
            ConfigError, ParameterError, ModelError, JointNotFound: Invalid configuration.
        """
        super().__init__("ik", **node_options(), **kwargs)
        if params is None:
            params = read_parameters(self)
        self.params = params
        self.robot = RobotModel(params.robot)
        self.solver = IKSolver(self.robot, params.solver)
        self.joint_names = params.joint_names or self.robot.joint_names
        index = {name: i for i, name in enumerate(self.robot.joint_names)}
        for name in self.joint_names:
            if name not in index:
                raise JointNotFound(name, self.robot.joint_names)
        self._model_joints = frozenset(self.robot.joint_names)
        self._joint_name_list = list(self.joint_names)  # the outputs' joint_names (never mutated)
        self._sensor_layouts: dict = {}  # SensorState joint_names -> (model joints kept, their indices)
        self._command_index = np.array([index[name] for name in self.joint_names], dtype=int)
        model = self.robot.model
        plain = all(model.joints[model.getJointId(name)].nq == 1 for name in self.joint_names)
        # Configuration indices of the commanded joints (None with continuous joints: (cos, sin) in q).
        self._command_q_index = (np.array([self.robot.joint_index_q(name) for name in self.joint_names],
                                          dtype=int) if plain else None)
        reference = self.robot.reference_configuration()
        self._torso_tilt = yaw_free(self.robot.frame_pose(reference, self.robot.torso_frame)[1])
        self._period_ns = int(round(params.control_period * 1e9))
        self._timeout_ns = int(round(params.reference_timeout * 1e9))
        self._outage_ns = int(round(params.sensor_timeout * 1e9))
        self._posture_feet_plan: Optional[int] = None  # after an outage: plan whose feet are not used

        self._q: Optional[np.ndarray] = None  # model configuration: the posture commanded for now
        self._q_ahead: Optional[np.ndarray] = None  # the last tick's solution at 2T: this tick's T
        self._initialised_measured = False  # the model was initialised from a sensor sample
        self._latest_sample_ns = 0  # stamp of the newest SensorState [ns]
        self._grace_until_ns = 0  # no staleness reported before this sensor time [ns] (a walk just started)
        self._command: Optional[np.ndarray] = None  # last commanded positions (joint_names order)
        self._measured_joints: Optional[dict[str, float]] = None
        self._measured_base = None
        self._samples: collections.OrderedDict = collections.OrderedDict()  # stamp [ns] -> (joints, base)
        self._corrector = SupportCorrector(params.support_correction)
        self._pending: collections.OrderedDict = collections.OrderedDict()  # plan_id -> PlanMessage
        self._timeline: Optional[Timeline] = None  # the installed plan, support-corrected
        self._plan_id: Optional[int] = None
        self._plan_walking = False
        self._plan_stamp_ns = 0
        self._feet = {Foot.LEFT: self.robot.left_foot_frame, Foot.RIGHT: self.robot.right_foot_frame} \
            if self.robot.is_biped else {}
        self._standing: Optional[StandingTargets] = None
        self._effects = dict.fromkeys(self.robot.foot_frames, True)
        self._stance: Optional[tuple] = None
        self._last_tick_ns: Optional[int] = None
        self._tick_source = ""  # "reference" or "sensor": what drove the last tick
        self._last_reference_ns: Optional[int] = None
        self._sample_q: Optional[tuple] = None  # (sample, self._q, its measured configuration): a cache
        self._pose_targets: Optional[tuple] = None  # (stamp, timeline, times, targets without CoM): prepared
        self.resyncs = 0
        self.prepared = 0  # support corrections done in the sensor callback, ahead of their reference
        self._ahead: Optional[_Ahead] = None  # the tick of a reference announced ahead, solved
        self._announced: Optional[tuple] = None  # (stamp, times, coms) of the last reference announced
        self.ahead_ticks = 0  # ticks that published the solution of their announced reference

        p = params
        qos, plan_qos = reliable_qos(), LATCHED_QOS
        self._trajectory_pub = self.create_publisher(JointTrajectory, p.trajectory_topic, qos)
        self._commands_pub = self.create_publisher(Float64MultiArray, p.commands_topic, qos)
        self._states_pub = (self.create_publisher(JointState, p.joint_states_topic, qos)
                            if p.publish_joint_states else None)
        self._timing_pub = self.create_publisher(TickTiming, p.timing_topic, qos)
        self.create_subscription(FootstepPlan, p.plan_topic, self._on_plan, plan_qos)
        reference_sub = self.create_subscription(ComReference, p.reference_topic, self._on_reference,
                                                 stream_input_qos())
        sensor_sub = self.create_subscription(SensorState, p.sensor_topic, self._on_sensor_state,
                                              stream_input_qos())
        if p.solve_ahead:
            self.create_subscription(ComReference, p.reference_ahead_topic, self._on_reference_ahead,
                                     stream_input_qos())
        #: TickTiming.trigger per tick source: the resolved input topic.
        self._triggers = {"reference": reference_sub.topic_name, "sensor": sensor_sub.topic_name}
        self.create_service(ExecGesture, "ik/exec_gesture", self._on_exec_gesture)
        self.create_service(SetGestureEffect, "ik/set_gesture_effect", self._on_set_gesture_effect)
        self.get_logger().info(
            f"IK of '{self.robot.name}' ({len(self.joint_names)} joints, "
            f"legs {list(self.robot.foot_frames)}), "
            f"control period {p.control_period} s; waiting for '{p.sensor_topic}' or '{p.reference_topic}'"
        )

    # ------------------------------------------------------------------ state
    @property
    def initialised(self) -> bool:
        """Whether the model configuration exists (a measured state or a reference arrived)."""
        return self._q is not None

    @property
    def configuration(self) -> Optional[np.ndarray]:
        """Model configuration (the posture commanded for now), or None before initialisation."""
        return None if self._q is None else self._q.copy()

    def _initialise(self) -> None:
        # A model started from the reference posture (a reference came before any sensor sample, e.g. after
        # a restart of this node mid-walk) is re-initialised from the first measurement.
        if self._q is not None and (self._initialised_measured or self._measured_joints is None):
            return
        q = self.robot.reference_configuration()
        if self._measured_joints is not None:
            q = self._measured_configuration(q)
            source = "the measured configuration"
        else:
            source = "the reference posture (until the first sensor sample)"
        self._initialised_measured = self._measured_joints is not None
        self._q = q
        self._q_ahead = None
        self._command = self._positions(q)
        self.get_logger().info(f"model initialised from {source}")

    def _measured_configuration(self, default: np.ndarray, sample: Optional[tuple] = None) -> np.ndarray:
        """Configuration of a measured sample ``(joints, base)`` (None: the latest), the rest from
        ``default``."""
        joints, base = sample if sample is not None else (self._measured_joints, self._measured_base)
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
        """Measured pose of ``foot``'s sole in the sample; without base estimate, the base is placed by a
        stance sole at its timeline pose (as the mpc_planner does)."""
        q = self._sample_configuration(sample)
        joints = self.robot.joint_positions(q)
        anchor = None
        if sample[1] is None:
            previous = None if self._stance is None else tuple(Foot(i) for i in self._stance)
            stance = anchor_foot(self._timeline, t, previous)
            anchor = (self._feet[stance], self._timeline.phase_at(t).foot(stance))
        measured = estimate_state(self.robot, list(joints), list(joints.values()), sample[1], anchor)
        return measured.sole(foot)

    def _install(self, plan_id: int) -> None:
        """Install the received plan ``plan_id`` (and forget the older ones)."""
        while self._pending:
            pending_id, plan = self._pending.popitem(last=False)
            if pending_id == plan_id:
                break
        changed = plan.plan_id != self._plan_id
        if changed and plan.walking and not self._plan_walking:
            # A walk starts: the planner's references for it get reference_timeout to arrive before the IK
            # reports them stale (after a restart, DDS discovery of the planner can lag the latched plan).
            self._grace_until_ns = self._latest_sample_ns + self._timeout_ns
        self._timeline = self._corrector.set_plan(plan.timeline)
        self._plan_id = plan.plan_id
        self._plan_walking = plan.walking
        self._plan_stamp_ns = plan.stamp_ns
        if changed:
            self._standing = None  # rebuilt from this plan's feet when standing

    def _install_plan_of_reference(self, plan_id: int) -> bool:
        """Install the plan a reference names, if received. False for a plan this node never received
        while it has one: the reference is in flight across a restart or a plan change, not a failure
        (a planner stuck on such a plan makes the references stale)."""
        if plan_id in self._pending:
            self._install(plan_id)
        return self._plan_id is None or plan_id == self._plan_id

    def _positions(self, q: np.ndarray) -> np.ndarray:
        if self._command_q_index is not None:
            return np.asarray(q, dtype=float)[self._command_q_index]
        return self.robot.actuated_positions(q)[self._command_index]

    def _plan_time(self, ns: int) -> Optional[float]:
        """Time [s] of the timeline at stamp ``ns``, or None without a plan."""
        if self._timeline is None:
            return None
        return (ns - self._plan_stamp_ns) * 1e-9

    def _walking_at(self, t: Optional[float]) -> bool:
        """Whether a walk is in progress at plan time ``t`` (unknown time: while the plan walks)."""
        if self._timeline is None or not self._plan_walking:
            return False
        return t is None or t < self._timeline.t_end

    def _walking_stance(self, t: float) -> tuple[int, ...]:
        """Indices of the stance feet of the timeline at plan time ``t``, sorted."""
        return tuple(sorted(int(foot) for foot in self._timeline.phase_at(t).stance_feet))

    def walking(self) -> bool:
        """Whether a walk is in progress at the last tick."""
        last = self._last_tick_ns
        return self._walking_at(None if last is None else self._plan_time(last))

    def _standing_targets(self) -> StandingTargets:
        """Standing targets, built when missing from the model configuration (the current posture).

        With CoM references (reference-driven ticks) a biped's feet are the plan's final feet; for
        sensor-driven ticks, which hold the body where the posture has it, the feet are the posture's.
        """
        if self._standing is None:
            planned = None
            if (self._timeline is not None and self.robot.is_biped and self._tick_source != "sensor"
                    and self._plan_id != self._posture_feet_plan):
                final = self._timeline.phases[-1]
                planned = {self.robot.left_foot_frame: pose_matrix(final.left.position, final.left.yaw),
                           self.robot.right_foot_frame: pose_matrix(final.right.position, final.right.yaw)}
            self._standing = StandingTargets.from_configuration(self.robot, self._q, self.params.gesture,
                                                                foot_poses=planned)
            for leg, effect in self._effects.items():
                self._standing.gestures.set_gesture_effect(leg, effect)
        return self._standing

    # ------------------------------------------------------------------ inputs
    def _on_plan(self, msg: FootstepPlan) -> None:
        if not self.robot.is_biped:
            self.get_logger().warning(
                f"plan {msg.plan_id} ignored: '{self.robot.name}' is not a biped (no left/right sole frames)",
                throttle_duration_sec=WARNING_PERIOD)
            return
        try:
            plan = PlanMessage.from_msg(msg)
        except WalkMpcError as exc:
            self.get_logger().error(f"plan {msg.plan_id} rejected, keeping the previous one: {exc}")
            return
        plan_id, timeline = plan.plan_id, plan.timeline
        self._pending.pop(plan_id, None)
        self._pending[plan_id] = plan
        while len(self._pending) > MAX_PENDING_PLANS:
            self._pending.popitem(last=False)
        if self._timeline is None:
            self._install(plan_id)  # the first plan: no reference can be in flight for another one
        self.get_logger().info(
            f"plan {msg.plan_id}: {'walk' if msg.walking else 'stand'}, {len(msg.steps)} steps, "
            f"t_end {timeline.t_end:.3f} s")

    def _sensor_layout(self, names) -> tuple[list[str], np.ndarray]:
        """Model joints of a SensorState's ``joint_names`` (first-occurrence order) and the index of each
        one's value (its last occurrence, as a dict of the arrays), computed once per names layout."""
        key = tuple(names)
        layout = self._sensor_layouts.get(key)
        if layout is None:
            last = {name: i for i, name in enumerate(key)}
            kept = [name for name in dict.fromkeys(key) if name in self._model_joints]
            layout = (kept, np.array([last[name] for name in kept], dtype=int))
            if len(self._sensor_layouts) >= MAX_SAMPLES:
                self._sensor_layouts.clear()
            self._sensor_layouts[key] = layout
        return layout

    def _on_sensor_state(self, msg: SensorState) -> None:
        try:
            names, values = msg.joint_names, msg.joint_pos
            if len(names) != len(values):
                raise InputError("joint_pos", f"{len(values)} values for {len(names)} names",
                                 "one value per name")
            kept, index = self._sensor_layout(names)
            selected = np.asarray(values, dtype=float)[index] if len(values) else np.zeros(0)
            if not np.all(np.isfinite(selected)):
                bad = next(i for i, value in enumerate(selected.tolist()) if not math.isfinite(value))
                raise InputError(f"joint_pos[{kept[bad]!r}]", float(selected[bad]), "a finite angle")
            joints = dict(zip(kept, selected.tolist()))
            base = sensor_base_pose(msg)
            if base is not None:
                position, quaternion = base
                if not (np.all(np.isfinite(position)) and np.all(np.isfinite(quaternion))
                        and np.linalg.norm(quaternion) > 1e-9):
                    raise InputError("base_pose", base, "a finite pose with a nonzero quaternion")
        except WalkMpcError as exc:
            self.get_logger().warning(f"sensor state rejected: {exc}", throttle_duration_sec=WARNING_PERIOD)
            return
        self._measured_joints = joints
        self._measured_base = base
        now = stamp_ns(msg.header.stamp)
        if self._samples and now - self._latest_sample_ns > self._outage_ns:
            self._resume(now, now - self._latest_sample_ns)
        self._samples[now] = (joints, base)
        self._latest_sample_ns = now
        while len(self._samples) > MAX_SAMPLES:
            self._samples.popitem(last=False)
        self._initialise()
        stale = self._last_reference_ns is None or now - self._last_reference_ns >= self._timeout_ns
        due = self._last_tick_ns is None or now - self._last_tick_ns >= self._period_ns * 99 // 100
        if stale and due:
            self._sensor_tick(now)
        elif due:
            self._prepare_tick(now)

    def _resume(self, now: int, gap_ns: int) -> None:
        """The samples resumed at ``now`` after an outage of ``gap_ns``: forget the state built on the samples
        before it, so that this sample restarts the node as the first one did (see the module docstring).
        The references get ``reference_timeout`` to come again before a walk reports them stale (the
        planner may see the end of the outage later: DDS discovery of a restarted publisher)."""
        self._q = None
        self._initialised_measured = False
        self._q_ahead = None
        self._standing = None
        self._stance = None
        self._samples.clear()
        self._sample_q = None
        self._pose_targets = None
        self._ahead = None
        self._announced = None
        self._last_reference_ns = None
        self._last_tick_ns = None
        self._grace_until_ns = now + self._timeout_ns
        self._posture_feet_plan = self._plan_id
        self.get_logger().warning(
            f"SensorState resumed after {gap_ns * 1e-9:.3f} s without samples (sensor_timeout "
            f"{self.params.sensor_timeout} s): restarting from the measured configuration")

    def _on_reference(self, msg: ComReference) -> None:
        start = time.perf_counter()
        now = stamp_ns(msg.header.stamp)
        if self._measured_joints is None or self._after_unseen_outage(now):
            # No measurement yet (e.g. this node was just restarted and the planner's references were
            # discovered before the sensor stream), or the references resume after an outage whose end this
            # node has not measured yet: nothing valid to solve from, publish nothing.
            self.get_logger().info("reference ignored until its sensor sample",
                                   throttle_duration_sec=WARNING_PERIOD)
            return
        self._initialise()
        try:
            times, coms = self._parse_reference(msg)
            if not self._install_plan_of_reference(int(msg.plan_id)):
                self.get_logger().info(f"reference for plan {msg.plan_id} skipped: this node has plan "
                                       f"{self._plan_id}", throttle_duration_sec=WARNING_PERIOD)
                return
            self._last_reference_ns = now
            self._tick(now, times, coms, start)
        except _Hold as hold:
            self._hold(now, hold.status, str(hold), start, "reference")

    def _after_unseen_outage(self, now: int) -> bool:
        """Whether a reference stamped ``now`` follows the previous one after an outage (stamps more than
        ``sensor_timeout`` apart) while this node has no sample of that time yet."""
        last = self._last_reference_ns
        return (last is not None and now - last > self._outage_ns
                and now - self._latest_sample_ns > self._outage_ns)

    def _parse_reference(self, msg: ComReference) -> tuple[list[float], list[np.ndarray]]:
        """The first two (time [s], CoM [m]) of a reference, validated; raises _Hold otherwise."""
        times = [float(v) for v in msg.time_from_stamp]
        coms = [np.array([p.x, p.y, p.z], dtype=float) for p in msg.com_position]
        if len(times) < 2 or len(coms) != len(times):
            raise _Hold(STATUS_BAD_REFERENCE, f"reference has {len(times)} times and {len(coms)} CoM "
                        "positions; expected 2 (T, 2T) of each")
        times, coms = times[:2], coms[:2]
        if not all(math.isfinite(v) for v in times) or not all(np.all(np.isfinite(c)) for c in coms):
            raise _Hold(STATUS_BAD_REFERENCE, f"reference with NaN/inf rejected: times {times}, "
                        f"CoM {[c.tolist() for c in coms]}")
        if not 0.0 < times[0] < times[1]:
            raise _Hold(STATUS_BAD_REFERENCE, f"reference times {times} are not 0 < T < 2T")
        return times, coms

    # ------------------------------------------------------------------ ticks
    def _sensor_tick(self, now: int) -> None:
        start = time.perf_counter()
        if self._pending:
            self._install(next(reversed(self._pending)))  # no references: the newest plan
        t = self._plan_time(now)
        times = [self.params.control_period, 2.0 * self.params.control_period]
        try:
            if self._walking_at(t):
                if now < self._grace_until_ns:
                    return  # a walk just started: its first references are on their way
                raise _Hold(STATUS_REFERENCE_STALE, f"no '{self.params.reference_topic}' for "
                            f"{self.params.reference_timeout} s during a walk")
            self._tick(now, times, [None, None], start, source="sensor")
        except _Hold as hold:
            self._hold(now, hold.status, str(hold), start, "sensor")

    def _prepare_tick(self, now: int) -> None:
        """Work of the coming reference tick of sample ``now`` that needs no reference, done in the sensor
        callback while the mpc_planner computes that reference (in its own process, on another CPU): at a
        lift-off the support correction, at a support change the measured configuration of the re-sync,
        and the walking targets at T and 2T but their CoM. :meth:`_tick` then finds them done (the
        correction is decided once per phase change, so it is not made twice). Skipped while a received
        plan waits for its first reference (the reference may install it: the correction is then made on
        it, at the tick). Errors are left to the tick, which makes the same calls and reports them."""
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

    def _tick(self, now: int, times: list[float], coms: list, start: float,
              source: str = "reference") -> None:
        """Targets at now + T and now + 2T, two solutions, publication; raises _Hold on failure.

        Sensor-driven ticks (``coms`` None) hold the body frame instead of a CoM; when they take over
        from reference-driven ticks the standing targets restart from the current posture, so the body
        is held where it is (gestures so far are in that posture already).
        """
        if source == "sensor" and self._tick_source != "sensor":
            self._standing = None
            self._q_ahead = None  # hold the posture commanded now, not the one planned for later
        if source != self._tick_source:  # the reference stream started, stopped or resumed
            self.get_logger().info(
                f"ticking on '{self.params.reference_topic}' references" if source == "reference" else
                f"ticking on '{self.params.sensor_topic}' (no '{self.params.reference_topic}' for "
                f"{self.params.reference_timeout} s): holding the posture")
        self._tick_source = source
        t = self._plan_time(now)
        sample = self._sample_at(now)
        if self._walking_at(t):
            self._standing = None
            if sample is not None:
                self._correct_support(t, sample)
        try:
            targets, stance, q_init, resync = self._problem(now, times, coms, sample)
        except WalkMpcError as exc:
            raise _Hold(STATUS_TARGETS_ERROR, f"cannot build the IK targets: {exc}") from None
        self.resyncs += resync
        self._stance = stance
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead.matches(now, times, targets, q_init, self._command):
            first, second, positions, messages = ahead.first, ahead.second, ahead.positions, ahead.messages
            self.ahead_ticks += 1
        else:
            first, second = self._solve(targets, q_init)
            positions, messages = self._command_messages(now, times, first, second)
        self._q = np.array(first.q)
        self._q_ahead = np.array(second.q)
        self._command = positions[0]
        self._last_tick_ns = now
        self._send(messages)
        self._publish_timing(now, STATUS_OK, first.solve_time + second.solve_time, start, source)

    def _problem(self, now: int, times, coms: list, sample: Optional[tuple], latest: bool = True) -> tuple:
        """What the tick ``now`` solves (after its support correction): the targets at T and 2T, the stance
        feet, the initial configuration, and whether that is a re-sync (a support change: seed 001). A
        re-sync without ``sample`` uses the latest one, or with ``latest`` false gives no initial
        configuration (None). Raises WalkMpcError when the targets cannot be built."""
        t = self._plan_time(now)
        if self._walking_at(t):
            prepared = self._pose_targets
            if (prepared is not None and prepared[0] == now and prepared[1] is self._timeline
                    and prepared[2] == tuple(times)):  # built in the sensor callback
                targets = [with_com(pose, com) for pose, com in zip(prepared[3], coms)]
            else:
                targets = [walk_targets(self._timeline, t + dt, com, self._torso_tilt)
                           for dt, com in zip(times, coms)]
            stance = self._walking_stance(t)
        else:
            standing = self._standing_targets()
            targets = [standing.targets(com_position=com) for com in coms]
            stance = tuple(range(len(self.robot.foot_frames)))  # every foot on the ground
        # Initial guess: the last tick's solution at 2T, the posture planned for this tick's T (0-1
        # Gauss-Newton steps instead of 2 while walking); the measured configuration at a support change.
        q_init = self._q if self._q_ahead is None else self._q_ahead
        resync = self._stance is not None and stance != self._stance and self._measured_joints is not None
        if resync:
            if sample is not None:
                q_init = self._sample_configuration(sample)
            else:
                q_init = self._measured_configuration(self._q) if latest else None
        return targets, stance, q_init, resync

    def _solve_ahead(self, now: int, times: tuple, coms: list, sample: Optional[tuple]) -> None:
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
        positions, messages = self._command_messages(now, times, first, second)
        self._ahead = _Ahead(now, tuple(times), targets, q_init, self._command, first, second, positions,
                             messages)

    def _on_reference_ahead(self, msg: ComReference) -> None:
        """Solve the tick of a reference the mpc_planner announces ahead (its solve prepared on the sample
        before the tick), while no tick is waiting: :meth:`_tick` publishes it when the tick's reference,
        targets, initial configuration and previous command are exactly these. Only while references
        drive the ticks, on the installed plan. When the tick's own sample changes the problem (a support
        correction moves a target; a support change re-syncs from that sample), :meth:`_prepare_tick`
        solves the announced reference again on arrival of that sample, still before the reference."""
        self._ahead = self._announced = None
        if (self._tick_source != "reference" or self._pending or self._q is None
                or self._measured_joints is None):
            return
        now = stamp_ns(msg.header.stamp)
        if self._last_tick_ns is not None and now <= self._last_tick_ns or self._after_unseen_outage(now):
            return
        try:
            times, coms = self._parse_reference(msg)
        except _Hold:
            return
        if self._plan_id is not None and int(msg.plan_id) != self._plan_id:
            return
        self._announced = (now, tuple(times), coms)
        self._solve_ahead(now, times, coms, None)

    def _command_messages(self, now: int, times, first: IKResult, second: IKResult) -> tuple[list, tuple]:
        """Commanded positions at T and 2T and the messages of the tick ``now`` (velocities relative to the
        previous command)."""
        positions = [self._positions(first.q), self._positions(second.q)]
        previous = self._command
        velocities = [(positions[1] - previous) / times[1],
                      (positions[1] - positions[0]) / (times[1] - times[0])]
        return positions, self._messages(now, times, positions, velocities)

    def _correct_support(self, t: float, sample: tuple) -> bool:
        """The shared support-foot correction policy on this tick's sample; True if it corrected."""
        try:
            correction = self._corrector.observe(t, lambda foot: self._measured_sole(sample, foot, t))
        except WalkMpcError as exc:  # a sample that cannot be measured: the plan is kept this step
            self.get_logger().warning(f"support correction skipped at t = {t:.3f} s: {exc}",
                                      throttle_duration_sec=WARNING_PERIOD)
            return False
        if correction is None or not correction.applied:
            return False
        self._timeline = self._corrector.timeline
        self.get_logger().debug(
            f"{correction.foot.name.lower()} sole of step {correction.step_index} measured "
            f"{1e3 * correction.position_error:.2f} mm from its plan at t = {t:.3f} s")
        return True

    def _solve(self, targets: list[IKTargets], q_init: np.ndarray) -> tuple[IKResult, IKResult]:
        try:
            first, second = self.solver.solve_two(targets[0], targets[1], q_init)
        except WalkMpcError as exc:
            raise _Hold(STATUS_TARGETS_ERROR, f"IK rejected its inputs: {exc}") from None
        for which, result in (("T", first), ("2T", second)):
            if not result.success:
                worst = max(result.residuals.items(), key=lambda item: item[1], default=("", 0.0))
                raise _Hold(STATUS_IK_FAILED,
                            f"IK solution at {which} failed ({result.message}, {result.iterations} "
                            f"iterations, largest residual {worst[0]} {worst[1]:.3g})")
        return first, second

    def _hold(self, now: int, status: int, reason: str, start: float, source: str) -> None:
        """Republish the last command (no jump), report ``status`` and log ``reason`` (throttled)."""
        self.get_logger().warning(f"holding the last command: {reason}", throttle_duration_sec=WARNING_PERIOD)
        period = self.params.control_period
        held = self._command
        zero = np.zeros_like(held)
        self._last_tick_ns = now
        self._send(self._messages(now, [period, 2.0 * period], [held, held], [zero, zero]))
        self._publish_timing(now, status, 0.0, start, source)

    # ------------------------------------------------------------------ outputs
    def _messages(self, now: int, times, positions, velocities) -> tuple:
        """JointTrajectory, joint commands and JointState (None if not published) of a tick."""
        trajectory = JointTrajectory()
        trajectory.header.stamp = time_msg(now)
        trajectory.joint_names = self._joint_name_list
        points = [_doubles(p) for p in positions]
        trajectory.points = [
            JointTrajectoryPoint(positions=p, velocities=_doubles(v), time_from_start=duration_msg(dt))
            for dt, p, v in zip(times, points, velocities)
        ]
        state = None
        if self._states_pub is not None:
            state = JointState()
            state.header.stamp = time_msg(now + int(round(times[0] * 1e9)))
            state.name = self._joint_name_list
            state.position = points[0]
            state.velocity = trajectory.points[0].velocities
        return trajectory, Float64MultiArray(data=points[0]), state

    def _send(self, messages: tuple) -> None:
        """The trajectory first (the critical message), then the commands and joint states."""
        trajectory, commands, state = messages
        self._trajectory_pub.publish(trajectory)
        self._commands_pub.publish(commands)
        if state is not None:
            self._states_pub.publish(state)

    def _publish_timing(self, now: int, status: int, solve_time: float, start: float, source: str) -> None:
        timing = TickTiming(component="ik", solve_time=float(solve_time), status=int(status),
                            trigger=self._triggers[source])
        timing.header.stamp = time_msg(now)
        timing.tick_time = time.perf_counter() - start
        self._timing_pub.publish(timing)

    # ------------------------------------------------------------------ services
    def _on_exec_gesture(self, request, response):
        response.success, response.body_moved = False, False
        if self.walking():
            response.message = (f"refused: walk in progress (plan {self._plan_id}); "
                                "gestures apply while standing")
        elif not self.initialised:
            response.message = (f"refused: no state yet (waiting for '{self.params.sensor_topic}' or "
                                f"'{self.params.reference_topic}')")
        else:
            try:
                dof = GestureDof(int(request.dof))
            except ValueError:
                dof = None
                response.message = (f"unknown dof {request.dof}: expected one of "
                                    f"{', '.join(f'{d.name}={int(d)}' for d in GestureDof)}")
            if dof is not None:
                try:
                    result = self._standing_targets().gestures.exec_gesture(dof, request.value)
                except WalkMpcError as exc:
                    response.message = f"gesture {dof.name} {request.value} rejected: {exc}"
                else:
                    response.success, response.body_moved = True, bool(result.body_moved)
                    body = "body moved by the inverse" if result.body_moved else "body stays"
                    response.message = (f"{dof.name} {request.value:g} applied to legs "
                                        f"{list(result.moved_legs)}; {body} "
                                        f"({len(result.support_legs)} support legs)")
        if response.success:
            self.get_logger().info(f"exec_gesture: {response.message}")
        else:
            self.get_logger().warning(f"exec_gesture: {response.message}")
        return response

    def _on_set_gesture_effect(self, request, response):
        legs = self.robot.foot_frames
        if request.leg >= len(legs):
            response.success = False
            response.message = (f"unknown leg {request.leg}: legs are "
                                f"{', '.join(f'{i}={name}' for i, name in enumerate(legs))}")
            self.get_logger().warning(f"set_gesture_effect: {response.message}")
            return response
        name = legs[request.leg]
        self._effects[name] = bool(request.effect)
        if self._standing is not None:
            self._standing.gestures.set_gesture_effect(name, bool(request.effect))
        response.success = True
        response.message = f"leg {request.leg} ({name}) gesture effect {'on' if request.effect else 'off'}"
        self.get_logger().info(f"set_gesture_effect: {response.message}")
        return response


NODE_CLASS = IKNode


def main(args: Optional[Sequence[str]] = None) -> int:
    """Run the ik node until shutdown; exit code 2 on a configuration error."""
    return run(lambda: IKNode(), args)


if __name__ == "__main__":
    sys.exit(main())
