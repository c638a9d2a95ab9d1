"""ROS 2 node ``walk_behavior``: the Walk action and the footstep queue over the core state machine.

Interfaces (names relative to the node's namespace, defaults of :class:`WalkBehaviorNodeParameters`):

* action ``walk`` (``walk_mpc/action/Walk``): one walk goal at a time, Atlas semantics
  (:mod:`walk_mpc.core.walk.behavior`). Every goal is *accepted* by ROS, then the core decides:
  a goal the core refuses (malformed step, bad indices, open goal with fewer than 4 steps, a goal
  while the walk is stopping, a preempting goal that does not follow on) ends at once, *aborted*
  with the refusal's ``error_code`` and ``error_msg`` (a ROS goal rejection carries no message).
  A goal accepted while another one walks preempts it: the old goal ends aborted with PREEMPTED,
  the walk goes on without stopping. Cancel: the swinging step finishes, then catch and Stand,
  and the goal ends *canceled* (CANCELED). Result codes: NONE -> succeeded, CANCELED -> canceled,
  every other code -> aborted; the result carries ``error_code``, ``error_msg``,
  ``last_completed_step_index`` and ``offending_step_indices``.
* service ``walk/queue_steps`` (``walk_mpc/srv/QueueSteps``): add or replace steps of the running
  walk (``accepted``, ``message``, ``next_step_index_needed``).
* publishes ``walk/plan`` (``walk_mpc/msg/FootstepPlan``, reliable, transient local, depth 1):
  republished with a new ``plan_id`` whenever the core's timeline changes (goal, queue, cancel,
  abort, end of walk, re-anchoring in long walks); ``header.stamp`` = the sensor-time instant
  that is t = 0 of the timeline (the plan's ``t0`` added to the stamp origin). In Stand,
  ``walking`` is false and the plan has no steps: its start feet are the standing feet (and its
  STAND phase starts when Stand began). The first plan is published at the first SensorState.
* publishes ``walk/status`` (``walk_mpc/msg/WalkFeedback``) every control tick while something
  subscribes to it; the action feedback (same message plus the support foot, planned and measured) goes
  to the active goal on the same ticks.
* subscribes ``cmd_vel`` (geometry_msgs/Twist; ``cmd_vel_topic``, '' for none): velocity walking, the
  core's :meth:`~walk_mpc.core.control.walk_supervisor.WalkSupervisor.velocity` (linear.x, linear.y,
  angular.z; the other components are ignored). A nonzero command walks from Stand at the measured feet,
  footsteps streamed through the step queue within the step limits; a zero command, or none for
  ``velocity.timeout`` of sensor time, closes the stance and the walk ends in Stand. A nonzero command
  preempts a running Walk goal (aborted, PREEMPTED "preempted by cmd_vel"); a Walk goal preempts velocity
  walking (at once if it follows on, else it starts from Stand after the closing step). A command above
  the speed limits is clamped (one warning per second); a NaN or infinite one is rejected with one
  warning and changes nothing (the last good command times out).
* subscribes ``walk/goal_pose`` (geometry_msgs/PoseStamped in ``goal_pose_frame``; ``goal_pose_topic``,
  '' for none), the core's :meth:`~walk_mpc.core.control.walk_supervisor.WalkSupervisor.goal_pose`: walk
  the stance center to the pose (its yaw from the orientation) with the footstep generator, the feet side
  by side at the end; it stops a running walk first (a goal ends PREEMPTED "preempted by goal pose N",
  a velocity walk closes its stance). Its outcome is logged (it has no action). A pose in another frame,
  or not finite, is rejected with one warning.
* subscribes ``sensor_state`` (SensorState, best effort), ``mpc/timing`` and ``ik/timing`` (TickTiming: a
  non-zero ``status`` aborts the walk with PLANNER_FAILURE / IK_FAILURE, the message naming the component
  and the status), ``sim/fall`` (std_msgs/Bool, transient local: true aborts the walk with FALL_DETECTED
  and refuses new goals until it is false again).

Every decision is the core's :class:`~walk_mpc.core.control.walk_supervisor.WalkSupervisor` (one call per
callback); this node converts messages, runs the action server and publishes.

Time base: the core advances on *every* accepted SensorState sample, to the sample's stamp (core time =
stamp - stamp of the first sample, from integer nanoseconds, so no drift accumulates). A stamp that is not
later than the last accepted one, or that runs ahead of the steady clock's progress by more than
0.5 s (e.g. a rogue sample stamped 2147483647 s), is rejected and logged once: the time base is kept and
the real samples go on. Five consistent samples of a new time base (a restarted clock) are re-anchored on,
as after an outage. Control ticks, when ``walk/status`` and the feedback are published, are the samples
whose stamp reaches the next multiple of ``control_period`` after the previous tick (every 2nd sample
for 20 ms over 10 ms samples). Nothing of the walking logic uses the wall clock.

Sensor timeout: when the samples stop, stamps cannot measure how long they have been missing, so
the timeout alone uses the node's *steady* clock: a timer checks every ``control_period`` the
steady time since the last sample (a check that comes more than ``sensor_timeout / 2`` late, the process
starved of the CPU, decides nothing: the next check does, after the samples queued meanwhile). More than
``sensor_timeout`` while walking ends the walk at once (the behavior cannot advance without a time
base): the core goes to Stand at the planned feet, the plan is republished with ``walking`` false, and
the goal aborts with SENSOR_TIMEOUT.
A goal arriving before any sample or while the samples are stale ends the same way at once.
When the samples come back after an outage (two consecutive stamps more than ``sensor_timeout``
apart: a restarted simulator or state estimator), the robot may have moved or been reset meanwhile:
a walk still in progress ends with SENSOR_TIMEOUT as above, and Stand is re-anchored at the feet
measured on the first sample after the outage (a new plan is published).

Liveness (``watch_links``, e.g. ``[mpc_planner, ik]`` in config/walk_mpc.yaml): each watched component
publishes its timing every tick. While walking, one silent for ``link_timeout`` of steady time (the timer)
or of sensor time (the samples) ends the walk at once with PLANNER_FAILURE / IK_FAILURE and a message
naming it ("no /ik/timing for 0.31 s: is the ik running?"); a goal is refused while one is silent.

Measured feet: with ``measure_feet`` true the node loads ``robot`` (RobotModel) and computes the
sole poses by forward kinematics from the SensorState joints and base estimate on every control
tick (no measurement while ``base_estimate_valid`` is false; joints the model does not have are
ignored). The measured support-foot pose goes into the feedback; a walk starting from Stand starts
from the measured feet, and the first measurement replaces the configured initial feet. Without
a measurement the configured initial feet (then the planned feet of the previous walk) are used,
and ``support_foot_measured`` is an all-zero position with identity orientation.

Bad input (malformed steps, requests, samples, an exception anywhere in a callback) is logged
and reported; it never stops the node nor corrupts the core's state (the core refuses bad input
without changing anything).

Executors: the goal semantics follow ros2/examples' ``server_single_goal.py`` (goal and cancel
callbacks, preemption under a lock in the accepted callback, ``is_cancel_requested`` polled each
cycle), but the execute callback is a coroutine that never blocks a thread: it is resumed at each
wake-up of the executor (every sample, every timer tick, and a guard condition triggered when a
goal ends). So ``main`` spins a SingleThreadedExecutor: with a SensorState stream at 333 Hz, rclpy
9's MultiThreadedExecutor (2 threads here) took 77-84 % CPU, delivered 332-614 of 1800 samples and
stalled for 2-3 s, against 11 % CPU, all but ~30 samples and 8 ms for the SingleThreadedExecutor (it
resubmits the tasks its thread pool has not started yet). The node also works in a
MultiThreadedExecutor (the in-process bringup): the core is guarded by one lock, the sensor
subscription has a mutually exclusive callback group (samples in order) and the action server a
reentrant one.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from typing import Callable, Dict, Optional, Sequence, Tuple

from geometry_msgs.msg import PoseStamped, Twist
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, Float64MultiArray

from walk_mpc.action import Walk
from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.control.landings import LandingParameters
from walk_mpc.core.control.recovery_step import RecoveryStepParameters
from walk_mpc.core.control.stamps import StampGuardParameters
from walk_mpc.core.control.step_adjustment import StepAdjustmentParameters
from walk_mpc.core.control.walk_supervisor import (
    LINK_ERRORS,
    GoalPoseParameters,
    SupervisorOutput,
    WalkSupervisor,
    WalkSupervisorParameters,
    goal_name,
)
from walk_mpc.core.errors import InputError, InvalidStepError, ParameterError, WalkMpcError
from walk_mpc.core.params import check_int_range, check_positive
from walk_mpc.core.walk.behavior import (
    NUM_REQUIRED_WALK_STEPS,
    WalkBehavior,
    WalkErrorCode,
    WalkResult,
    WalkStatus,
)
from walk_mpc.core.walk.timeline import FootPose
from walk_mpc.core.walk.velocity import VelocityWalkParameters
from walk_mpc.msg import FootstepPlan, SensorState, TickTiming, WalkFeedback
from walk_mpc.nodes._common import (
    LATCHED_QOS,
    DataclassParameters,
    GraphNode,
    RosLog,
    node_options,
    reliable_qos,
    run,
    stream_input_qos,
)
from walk_mpc.nodes.conversions import (
    foot_pose_to_msg,
    plan_to_msg,
    quaternion_yaw,
    step_to_msg,
    steps_from_msgs,
    time_msg,
)
from walk_mpc.nodes.sensor_cdr import SensorStateReader, sensor_input, tick_timing_input
from walk_mpc.srv import QueueSteps

NODE_NAME = "walk_behavior"

#: Minimum interval between two warnings of the same kind [s].
WARNING_PERIOD = 1.0

#: History of the action feedback publisher [messages] (2 s at 50 Hz: slow clients lose nothing).
FEEDBACK_DEPTH = 100



@dataclasses.dataclass(frozen=True)
class WalkBehaviorNodeParameters:
    """Parameters of the walk_behavior node.

    Attributes:
        behavior: Gait timing and step limits of the core state machine.
        robot: Robot model for the measured feet (forward kinematics), used if ``measure_feet``.
        measure_feet: Whether to measure the soles from SensorState by forward kinematics.
        sensor_timeout: Steady-clock time without SensorState that aborts a walk [s]; two consecutive
            stamps further apart are an outage (Stand re-anchored at the measured feet).
        control_period: Period of ``walk/status`` and the action feedback in sensor-stamp time,
            and of the steady-clock timeout check [s].
        initial_left_position: Left sole position [m] until a measurement replaces it (world).
        initial_left_yaw: Left sole yaw [rad].
        initial_right_position: Right sole position [m] until a measurement replaces it (world).
        initial_right_yaw: Right sole yaw [rad].
        sensor_topic: SensorState input.
        plan_topic: FootstepPlan output (transient local).
        status_topic: WalkFeedback output, every control tick.
        action_name: Walk action.
        queue_steps_service: QueueSteps service.
        mpc_timing_topic: TickTiming of the MPC planner (status != 0: PLANNER_FAILURE).
        ik_timing_topic: TickTiming of the IK (status != 0: IK_FAILURE).
        fall_topic: std_msgs/Bool fall detection (true: FALL_DETECTED).
        queue_depth: History depth of the subscriptions and of ``walk/status`` [messages].
        watch_links: Components whose timing must keep coming while walking (``mpc_planner``, ``ik``):
            silent for ``link_timeout`` (steady or sensor time), the walk ends naming it; empty: none.
        link_timeout: Steady or sensor time without a watched component's timing that ends a walk [s].
        landings: Touchdowns seen in the sole contact forces (a walk succeeds only when its steps were
            measured landing, each sole within tolerance).
        deadline_topic: The hardware's deadline accounting (std_msgs/Float64MultiArray ``[missed, measured,
            share]``, the sim node's ``sim/deadlines``); '' = not watched.
        max_missed_deadline_share: Share of missed control deadlines over ``deadline_window`` samples beyond
            which a walk ends (DEADLINES_MISSED); 1.0 never ends one.
        deadline_window: Number of measured samples the share is taken over (100 = 1 s at 10 ms).
        cmd_vel_topic: geometry_msgs/Twist velocity commands ('' = not subscribed).
        velocity: Velocity walking: speed limits [m/s, rad/s], step duration [s], width [m] (0: measured),
            command timeout [s] (sensor time), look-ahead [steps].
        goal_pose_topic: geometry_msgs/PoseStamped goal poses to walk to ('' = not subscribed).
        goal_pose_frame: The frame of the goal poses (the plans' world frame; an empty frame_id is taken too).
        goal_pose: Step sizes of the walks to a goal pose [m, m, rad].
        stamps: The SensorState stamp guard (rogue stamps rejected, a new time base re-anchored on).
        stand_follow_distance: Standing on both feet, a measured sole this far [m] from Stand's for
            ``stand_follow_time`` [s] (or turned by ``stand_follow_yaw`` [rad]) re-anchors Stand at the
            measured feet; 0: never.
        initial_stance_wait: At start, Stand (and the first plan) waits up to this long [s] for both measured
            feet to carry weight (a walk of a former walk_behavior may still be landing one).
        step_adjustment: Step adjustment from the measured DCM (needs ``measure_feet``), off by default.
        recovery_step: Standing recovery steps from the measured DCM (needs ``measure_feet``), off by default.
    """

    behavior: WalkBehavior.Parameters = dataclasses.field(default_factory=WalkBehavior.Parameters)
    robot: RobotModel.Parameters = dataclasses.field(default_factory=RobotModel.Parameters)
    measure_feet: bool = True
    sensor_timeout: float = 0.1
    control_period: float = 0.02
    initial_left_position: Tuple[float, float, float] = (0.0, 0.085, 0.0)
    initial_left_yaw: float = 0.0
    initial_right_position: Tuple[float, float, float] = (0.0, -0.085, 0.0)
    initial_right_yaw: float = 0.0
    sensor_topic: str = "sensor_state"
    plan_topic: str = "walk/plan"
    status_topic: str = "walk/status"
    action_name: str = "walk"
    queue_steps_service: str = "walk/queue_steps"
    mpc_timing_topic: str = "mpc/timing"
    ik_timing_topic: str = "ik/timing"
    fall_topic: str = "sim/fall"
    queue_depth: int = 10
    watch_links: Tuple[str, ...] = ()
    link_timeout: float = 0.3
    landings: LandingParameters = dataclasses.field(default_factory=LandingParameters)
    deadline_topic: str = "sim/deadlines"
    max_missed_deadline_share: float = 0.3
    deadline_window: int = 100
    cmd_vel_topic: str = "cmd_vel"
    velocity: VelocityWalkParameters = dataclasses.field(default_factory=VelocityWalkParameters)
    goal_pose_topic: str = "walk/goal_pose"
    goal_pose_frame: str = "world"
    goal_pose: GoalPoseParameters = dataclasses.field(default_factory=GoalPoseParameters)
    stamps: StampGuardParameters = dataclasses.field(default_factory=StampGuardParameters)
    stand_follow_distance: float = WalkSupervisorParameters.stand_follow_distance  # (the core's defaults)
    stand_follow_yaw: float = WalkSupervisorParameters.stand_follow_yaw
    stand_follow_time: float = WalkSupervisorParameters.stand_follow_time
    initial_stance_wait: float = WalkSupervisorParameters.initial_stance_wait
    step_adjustment: StepAdjustmentParameters = dataclasses.field(default_factory=StepAdjustmentParameters)
    recovery_step: RecoveryStepParameters = dataclasses.field(default_factory=RecoveryStepParameters)

    def __post_init__(self) -> None:
        if not isinstance(self.behavior, WalkBehavior.Parameters):
            raise ParameterError("behavior", self.behavior, "a WalkBehavior.Parameters")
        if not isinstance(self.robot, RobotModel.Parameters):
            raise ParameterError("robot", self.robot, "a RobotModel.Parameters")
        if not isinstance(self.measure_feet, bool):
            raise ParameterError("measure_feet", self.measure_feet, "true or false")
        check_positive("sensor_timeout", self.sensor_timeout)
        check_positive("control_period", self.control_period)
        for side in ("left", "right"):
            name = f"initial_{side}_position"
            value = getattr(self, name)
            if len(value) != 3 or not all(math.isfinite(v) for v in value):
                raise ParameterError(name, value, "3 finite coordinates [m]")
            yaw = getattr(self, f"initial_{side}_yaw")
            if not math.isfinite(yaw):
                raise ParameterError(f"initial_{side}_yaw", yaw, "a finite angle [rad]")
        for name in ("sensor_topic", "plan_topic", "status_topic", "action_name", "queue_steps_service",
                     "mpc_timing_topic", "ik_timing_topic", "fall_topic"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ParameterError(name, getattr(self, name), "a non-empty topic, service or action name")
        check_int_range("queue_depth", self.queue_depth, 1)
        object.__setattr__(self, "watch_links", tuple(self.watch_links))
        unknown = [name for name in self.watch_links if name not in LINK_ERRORS]
        if unknown:
            raise ParameterError("watch_links", list(self.watch_links), f"names among {sorted(LINK_ERRORS)}")
        check_positive("link_timeout", self.link_timeout)
        for name in ("deadline_topic", "cmd_vel_topic", "goal_pose_topic", "goal_pose_frame"):
            if not isinstance(getattr(self, name), str):
                raise ParameterError(name, getattr(self, name), "a topic name, or '' for none")
        self.supervisor  # noqa: B018  (the supervisor's own checks: deadline share and window, velocity gait)

    @property
    def initial_feet(self) -> Tuple[FootPose, FootPose]:
        """Configured (left, right) sole poses."""
        return (FootPose(self.initial_left_position, self.initial_left_yaw),
                FootPose(self.initial_right_position, self.initial_right_yaw))

    @property
    def supervisor(self) -> WalkSupervisorParameters:
        """Parameters of the core supervisor."""
        topics = {"mpc_planner": self.mpc_timing_topic, "ik": self.ik_timing_topic}
        return WalkSupervisorParameters(
            behavior=self.behavior, control_period=self.control_period, sensor_timeout=self.sensor_timeout,
            initial_feet=self.initial_feet, watch_links=self.watch_links, link_timeout=self.link_timeout,
            link_topics=tuple(topics[name] for name in self.watch_links), sensor_topic=self.sensor_topic,
            fall_topic=self.fall_topic, landings=self.landings,
            max_missed_deadline_share=self.max_missed_deadline_share, deadline_window=self.deadline_window,
            deadline_topic=self.deadline_topic or "sim/deadlines", velocity=self.velocity,
            goal_pose=self.goal_pose, stamps=self.stamps, stand_follow_distance=self.stand_follow_distance,
            stand_follow_yaw=self.stand_follow_yaw, stand_follow_time=self.stand_follow_time,
            initial_stance_wait=self.initial_stance_wait, step_adjustment=self.step_adjustment,
            recovery_step=self.recovery_step)


class _NextWakeUp:
    """Awaitable that suspends a coroutine callback until the executor resumes it (its next wake-up)."""

    def __await__(self):
        yield


_NEXT_WAKE_UP = _NextWakeUp()


@dataclasses.dataclass
class _Goal:
    """A goal of the action server and its outcome (set once, under the node's lock)."""

    handle: ServerGoalHandle
    key: bytes
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    result: Optional[WalkResult] = None
    cancel_forwarded: bool = False

    @property
    def name(self) -> str:
        return self.key.hex()[:8]


def feedback_to_msg(status: WalkStatus) -> WalkFeedback:
    """WalkFeedback message of a core status (at most NUM_REQUIRED_WALK_STEPS queued steps)."""
    msg = WalkFeedback()
    msg.behavior = int(status.behavior)
    msg.t_step_rem = float(status.t_step_rem)
    msg.current_step_index = int(status.current_step_index)
    msg.next_step_index_needed = int(status.next_step_index_needed)
    msg.status_flags = int(status.status_flags)
    queue = status.step_queue_saturated[:NUM_REQUIRED_WALK_STEPS]
    msg.step_queue_saturated = [step_to_msg(s) for s in queue]
    msg.step_saturation = [int(f) for f in status.step_saturation[:len(queue)]]
    return msg


def action_feedback(status: WalkStatus, walk: Optional[WalkFeedback] = None) -> Walk.Feedback:
    """Walk action feedback of a core status (support foot -1 and empty poses in double support); ``walk``:
    its :func:`feedback_to_msg`, when already built."""
    feedback = Walk.Feedback()
    feedback.walk = walk if walk is not None else feedback_to_msg(status)
    feedback.support_foot_index = int(status.support_foot) if status.support_foot is not None else -1
    if status.desired_support_foot_pose is not None:
        feedback.support_foot_desired = foot_pose_to_msg(status.desired_support_foot_pose)
    if status.measured_support_foot_pose is not None:
        feedback.support_foot_measured = foot_pose_to_msg(status.measured_support_foot_pose)
    return feedback


def result_to_msg(result: WalkResult) -> Walk.Result:
    """Walk action result of a core result."""
    return Walk.Result(
        error_code=int(result.error_code),
        error_msg=str(result.error_msg),
        last_completed_step_index=int(result.last_completed_step_index),
        offending_step_indices=[int(i) for i in result.offending_step_indices],
    )


class WalkBehaviorNode(GraphNode):
    """Walk action server and footstep queue over the core's
    :class:`~walk_mpc.core.control.walk_supervisor.WalkSupervisor`."""

    def __init__(self, params: Optional[WalkBehaviorNodeParameters] = None, **kwargs) -> None:
        """Create the node.

        Args:
            params: Parameters; None reads them from the node's ROS parameters.
            **kwargs: Passed to ``Node.__init__`` (``parameter_overrides``, ``context``).

        Raises:
            ConfigError, ParameterError: A parameter is unknown or invalid.
            ModelError: The robot model cannot be loaded (``measure_feet``).
        """
        super().__init__(NODE_NAME, **{**node_options(), **kwargs})
        if params is None:
            params = DataclassParameters(self, WalkBehaviorNodeParameters).read()
        self.params = params
        robot = RobotModel(params.robot) if params.measure_feet else None
        if robot is not None and not robot.is_biped:
            raise ParameterError("robot.robot", params.robot.robot,
                                 "a biped (left and right sole frames) when measure_feet is true")
        self._lock = threading.RLock()
        self._goals: Dict[bytes, _Goal] = {}
        self._shutting_down = False

        depth = params.queue_depth
        reliable, latched = reliable_qos(depth), LATCHED_QOS
        self._sensor_group = MutuallyExclusiveCallbackGroup()
        self._events_group = MutuallyExclusiveCallbackGroup()
        self._action_group = ReentrantCallbackGroup()
        self._plan_pub = self.create_publisher(FootstepPlan, params.plan_topic, latched)
        self._status_pub = self.create_publisher(WalkFeedback, params.status_topic, reliable)
        self._sensor_reader = SensorStateReader()
        self._sensor_sub = self.create_subscription(
            SensorState, params.sensor_topic, self._on_sensor_state, stream_input_qos(depth),
            callback_group=self._sensor_group, raw=True)
        self._mpc_sub = self.create_subscription(
            TickTiming, params.mpc_timing_topic, lambda msg: self._on_timing(msg, "mpc_planner"), reliable,
            callback_group=self._events_group, raw=True)
        self._ik_sub = self.create_subscription(
            TickTiming, params.ik_timing_topic, lambda msg: self._on_timing(msg, "ik"), reliable,
            callback_group=self._events_group, raw=True)
        self._fall_sub = self.create_subscription(
            Bool, params.fall_topic, self._on_fall, latched, callback_group=self._events_group)
        self._deadline_sub = (self.create_subscription(
            Float64MultiArray, params.deadline_topic, self._on_deadlines,
            QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,  # latched, no burst dropped
                       durability=DurabilityPolicy.TRANSIENT_LOCAL),
            callback_group=self._events_group) if params.deadline_topic else None)
        self._cmd_vel_sub = (self.create_subscription(  # best effort: teleop, nav2 and joystick writers alike
            Twist, params.cmd_vel_topic, self._on_cmd_vel, stream_input_qos(depth),
            callback_group=self._events_group) if params.cmd_vel_topic else None)
        self._goal_pose_sub = (self.create_subscription(
            PoseStamped, params.goal_pose_topic, self._on_goal_pose, reliable,
            callback_group=self._events_group) if params.goal_pose_topic else None)
        self._service = self.create_service(
            QueueSteps, params.queue_steps_service, self._on_queue_steps, callback_group=self._events_group)
        names = {"sensor_topic": self._sensor_sub.topic_name, "fall_topic": self._fall_sub.topic_name,
                 "link_topics": tuple({"mpc_planner": self._mpc_sub, "ik": self._ik_sub}[name].topic_name
                                      for name in params.watch_links)}
        if self._deadline_sub is not None:
            names["deadline_topic"] = self._deadline_sub.topic_name
        # Plan ids of this run start from the wall clock (ms, modulo 2^31): a restarted walk_behavior does not
        # reuse the ids its previous run gave to the plans the other nodes still follow.
        names["first_plan_id"] = 1 + (time.time_ns() // 1_000_000) % (2**31 - 2**20)
        self._supervisor = WalkSupervisor(dataclasses.replace(params.supervisor, **names), robot,
                                          RosLog(self.get_logger(), WARNING_PERIOD))
        self._wake_up = self.create_guard_condition(lambda: None, callback_group=self._action_group)
        self._timer = self.create_timer(
            params.control_period, self._on_timeout_check, callback_group=self._events_group,
            clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._action_server = ActionServer(
            self, Walk, params.action_name,
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel,
            callback_group=self._action_group,
            feedback_pub_qos_profile=QoSProfile(depth=FEEDBACK_DEPTH, reliability=ReliabilityPolicy.RELIABLE))
        self.get_logger().info(
            f"walk action '{params.action_name}', service '{params.queue_steps_service}', sensor "
            f"'{self._sensor_sub.topic_name}', plan '{self._plan_pub.topic_name}'; feet "
            + (f"measured with {robot.name}" if robot is not None else "not measured")
            + f"; control period {params.control_period} s, sensor timeout {params.sensor_timeout} s"
            + (f"; watching {list(params.watch_links)} ({params.link_timeout} s)"
               if params.watch_links else "")
            + (f"; cmd_vel '{self._cmd_vel_sub.topic_name}' (timeout {params.velocity.timeout} s)"
               if self._cmd_vel_sub is not None else ""))

    @property
    def behavior(self) -> WalkBehavior:
        """The core state machine (read-only use; hold no reference across callbacks)."""
        return self._supervisor.behavior

    @property
    def supervisor(self) -> WalkSupervisor:
        """The core supervisor (read-only use)."""
        return self._supervisor

    def _steady_ns(self) -> int:
        return time.monotonic_ns()

    def _apply(self, output: SupervisorOutput) -> None:
        """Publish what a supervisor call produced and end the goals it ended (lock held)."""
        for result in output.results:
            self._finish(result)
        if output.plan is not None:
            plan = output.plan
            stamp = time_msg(plan.stamp_ns)
            self._plan_pub.publish(plan_to_msg(plan.timeline, plan.plan_id, plan.walking, stamp))
        if output.status is not None:
            self._publish_tick(output.status)

    # ------------------------------------------------------------------ action server
    def _on_goal(self, goal_request: Walk.Goal) -> GoalResponse:
        """Accept every goal: the core's refusals are reported as aborted results with a message."""
        return GoalResponse.REJECT if self._shutting_down else GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        """Accept cancel requests; the execute loop forwards them to the core."""
        return CancelResponse.ACCEPT

    def _on_accepted(self, goal_handle: ServerGoalHandle) -> None:
        """Hand the goal to the core under the lock (start, preempt, or refuse), then execute it."""
        record = _Goal(goal_handle, bytes(goal_handle.goal_id.uuid))
        with self._lock:
            self._goals[record.key] = record
            try:
                self._submit(record)
            except Exception as exc:  # noqa: BLE001 (never let a goal kill the node)
                self.get_logger().error(f"goal {record.name}: unexpected error {exc!r}")
                self._finish(WalkResult(record.key, WalkErrorCode.INVALID_STEP,
                                        f"internal error handling the goal: {exc!r}", 0))
        goal_handle.execute()

    def _submit(self, record: _Goal) -> None:
        """Start or preempt with ``record``'s goal, or finish it at once with the refusal (lock held)."""
        goal = record.handle.request
        try:
            steps = steps_from_msgs(goal.steps)
        except InvalidStepError as exc:
            self._refuse(record, WalkErrorCode.INVALID_STEP, str(exc),
                         (exc.step_index,) if exc.step_index >= 0 else ())
            return
        answer, output = self._supervisor.submit_goal(record.key, steps, bool(goal.plan_complete),
                                                      self._steady_ns())
        if not answer.accepted:
            rejection = answer.rejection
            offending = (rejection.step_index,) if rejection.step_index >= 0 else ()
            self._refuse(record, rejection.error_code, rejection.message, offending)
            return
        for result in output.results:
            self.get_logger().info(f"goal {record.name} preempts goal {goal_name(result.goal_id)}")
        end = "plan complete" if goal.plan_complete else "plan open"
        if self._supervisor.waiting_goal != record.key:  # else it waits for the velocity walk's closing step
            self.get_logger().info(f"goal {record.name}: walking {len(steps)} steps ({end})")
        self._apply(output)

    def _refuse(self, record: _Goal, code: WalkErrorCode, message: str,
                offending: Tuple[int, ...] = ()) -> None:
        self.get_logger().warning(f"goal {record.name} refused: {code.name}: {message}")
        self._finish(WalkResult(record.key, code, message, 0, tuple(offending)))

    def _finish(self, result: WalkResult) -> None:
        """Record the outcome of a goal and wake its execute callback (lock held)."""
        record = self._goals.get(result.goal_id)
        if record is None or record.done.is_set():
            return
        record.result = result
        record.done.set()
        self._wake_up.trigger()

    async def _execute(self, goal_handle: ServerGoalHandle) -> Walk.Result:
        """Wait for the goal's outcome, forwarding a cancel request to the core, and report it.

        A coroutine: the executor resumes it at each of its wake-ups (every sample, every timer tick,
        and the guard condition triggered when a goal ends), so no executor thread is blocked.
        """
        key = bytes(goal_handle.goal_id.uuid)
        record = self._goals.get(key)
        if record is None:  # cannot happen: _on_accepted registers it first
            goal_handle.abort()
            return Walk.Result(error_code=int(WalkErrorCode.INVALID_STEP), error_msg="unknown goal")
        while not record.done.is_set():
            if goal_handle.is_cancel_requested and not record.cancel_forwarded:
                with self._lock:
                    record.cancel_forwarded = True
                    self._apply(self._supervisor.cancel(key))
            await _NEXT_WAKE_UP
        result = record.result
        with self._lock:
            self._goals.pop(key, None)
        try:
            if result.error_code == WalkErrorCode.NONE:
                goal_handle.succeed()
            elif result.error_code == WalkErrorCode.CANCELED and goal_handle.is_cancel_requested:
                goal_handle.canceled()
            else:
                goal_handle.abort()
        except Exception as exc:  # noqa: BLE001 (goal already terminal, e.g. at shutdown)
            self.get_logger().warning(f"goal {record.name}: cannot set its final state: {exc}")
        message = (f"goal {record.name} ended {result.error_code.name} after step "
                   f"{result.last_completed_step_index}: {result.error_msg}")
        if result.error_code == WalkErrorCode.NONE:  # one call site per severity (an rclpy rule)
            self.get_logger().info(message)
        else:
            self.get_logger().warning(message)
        return result_to_msg(result)

    # ------------------------------------------------------------------ inputs
    def _guarded(self, what: str, call: Callable[[], SupervisorOutput]) -> None:
        """Run a supervisor call under the lock and apply its output; an error is logged, never raised."""
        try:
            with self._lock:
                self._apply(call())
        except Exception as exc:  # noqa: BLE001 (bad input never stops the node)
            if not self.context.ok():
                return  # shutting down (SIGINT) while the message was processed
            self.get_logger().error(f"{what} not processed: {exc!r}", throttle_duration_sec=WARNING_PERIOD)

    def _on_sensor_state(self, msg) -> None:
        """A SensorState: serialized (the subscription's, see :mod:`~walk_mpc.nodes.sensor_cdr`) or not."""
        steady = self._steady_ns()

        def observe() -> SupervisorOutput:
            try:
                now, sample = sensor_input(msg, self._sensor_reader)
            except WalkMpcError as exc:
                return self._supervisor.reject(f"SensorState rejected: {exc}")
            return self._supervisor.observe(now, sample, steady)

        self._guarded("SensorState sample", observe)

    def _on_timing(self, msg, component: str) -> None:
        """A TickTiming: serialized (the subscription's) or not."""
        steady = self._steady_ns()

        def report() -> SupervisorOutput:
            now, status, reason = tick_timing_input(msg)
            return self._supervisor.report(component, status, now, reason, steady_ns=steady)

        self._guarded(f"{component} timing", report)

    def _on_deadlines(self, msg: Float64MultiArray) -> None:
        def deadlines() -> SupervisorOutput:
            if len(msg.data) < 2:
                raise InputError("data", list(msg.data), "[missed, measured, share]")
            missed, measured = (int(v) if math.isfinite(v) and float(v).is_integer() else v
                                for v in msg.data[:2])
            return self._supervisor.deadlines(missed, measured)

        self._guarded("deadline accounting", deadlines)

    def _on_cmd_vel(self, msg: Twist) -> None:
        def velocity() -> SupervisorOutput:
            try:
                output = self._supervisor.velocity(msg.linear.x, msg.linear.y, msg.angular.z)
            except InputError as exc:
                self.get_logger().warning(f"cmd_vel rejected: {exc}", throttle_duration_sec=WARNING_PERIOD)
                return SupervisorOutput()
            if output.velocity is not None and output.velocity.clamped:
                self.get_logger().warning(output.velocity.message, throttle_duration_sec=WARNING_PERIOD)
            return output

        self._guarded("cmd_vel", velocity)

    def _on_goal_pose(self, msg: PoseStamped) -> None:
        def goal_pose() -> SupervisorOutput:
            frame, p, q = self.params.goal_pose_frame, msg.pose.position, msg.pose.orientation
            try:
                if msg.header.frame_id not in ("", frame):
                    raise InputError("goal pose header.frame_id", msg.header.frame_id, f"'{frame}'")
                norm = q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w
                if not math.isfinite(norm) or norm < 1e-12:
                    raise InputError("goal pose orientation", (q.x, q.y, q.z, q.w), "a finite quaternion")
                return self._supervisor.goal_pose(p.x, p.y, quaternion_yaw(q), self._steady_ns())
            except InputError as exc:
                self.get_logger().warning(f"goal pose rejected: {exc}", throttle_duration_sec=WARNING_PERIOD)
                return SupervisorOutput()

        self._guarded("goal pose", goal_pose)

    def _on_fall(self, msg: Bool) -> None:
        self._guarded("fall message", lambda: self._supervisor.fall(bool(msg.data)))

    def _on_timeout_check(self) -> None:
        self._guarded("timeout check", lambda: self._supervisor.check_timeouts(self._steady_ns()))

    def _publish_tick(self, status: WalkStatus) -> None:
        """walk/status (while something subscribes to it), and the action feedback of the active goal (lock
        held); the WalkFeedback is built once for both."""
        walk = None
        if self._status_pub.get_subscription_count():
            walk = feedback_to_msg(status)
            self._status_pub.publish(walk)
        record = self._goals.get(status.goal_id) if status.goal_id is not None else None
        if record is not None and not record.done.is_set():
            try:
                record.handle.publish_feedback(action_feedback(status, walk))
            except Exception as exc:  # noqa: BLE001 (goal handle going away)
                self.get_logger().warning(f"goal {record.name}: feedback not published: {exc}")

    # ------------------------------------------------------------------ queue_steps service
    def _on_queue_steps(self, request: QueueSteps.Request,
                        response: QueueSteps.Response) -> QueueSteps.Response:
        try:
            with self._lock:
                try:
                    steps = steps_from_msgs(request.steps)
                except InvalidStepError as exc:
                    response.accepted = False
                    response.message = str(exc)
                    response.next_step_index_needed = self.behavior.next_step_index_needed
                else:
                    answer, output = self._supervisor.queue_steps(steps, bool(request.plan_complete))
                    response.accepted = answer.accepted
                    response.message = answer.message
                    response.next_step_index_needed = answer.next_step_index_needed
                    self._apply(output)
        except Exception as exc:  # noqa: BLE001
            response.accepted = False
            response.message = f"internal error: {exc!r}"
        if not response.accepted:
            self.get_logger().warning(f"queue_steps refused: {response.message}")
        return response

    # ------------------------------------------------------------------ teardown
    def destroy(self) -> None:
        """End the open goals (aborted, 'node shutting down'), destroy the action server, then the node."""
        self._shutting_down = True
        with self._lock:
            for result in self._supervisor.shutdown(list(self._goals)):
                self._finish(result)
        self._action_server.destroy()
        self.destroy_node()


NODE_CLASS = WalkBehaviorNode


def main(args: Optional[Sequence[str]] = None) -> int:
    """Run the walk_behavior node until shutdown; exit code 2 on a configuration error."""
    return run(lambda: WalkBehaviorNode(), args)


if __name__ == "__main__":
    sys.exit(main())
