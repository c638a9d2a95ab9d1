"""ROS 2 node ``ik``: two whole-body IK solutions per control period (seed 001), joint commands, gestures.

The node adapts :class:`~walk_mpc.core.control.whole_body_stage.WholeBodyStage`, which makes every decision
(plan installation, walking and standing targets, support correction, re-sync at support changes,
sensor-driven ticks, holds, outages and stamp checks, solve-ahead, gestures: see its module docstring):
each callback converts its message to a core type, calls one stage method and publishes the command it
returns. Topics (relative names, QoS reliable depth 10 unless said):

* subscribes ``walk/plan`` (``FootstepPlan``, reliable + transient local, depth 1): the gait timeline,
  ``t = 0`` at the plan's stamp (:meth:`WholeBodyStage.set_plan`; installed at the first ComReference
  naming its ``plan_id``);
* subscribes ``mpc/com_reference`` (``ComReference``, best effort: see ``stream_input_qos``): each one is a
  control tick (:meth:`WholeBodyStage.on_reference`) with ``time_from_stamp = [T, 2T]`` (the first two
  are used) and the CoM references at those instants; malformed arrays are a ``BAD_REFERENCE`` hold;
* subscribes ``sensor_state`` (``SensorState``, best effort): the measured joint angles, base pose (when
  ``base_estimate_valid``) and contact forces (:meth:`WholeBodyStage.observe`, with the steady clock's
  reading for the stamp guard): they initialise the model, re-sync it at support changes, prepare the
  coming tick, and drive standing ticks while no ComReference has come for ``reference_timeout``;
* subscribes ``mpc/com_reference_ahead`` (``ComReference``, best effort; if ``solve_ahead``): the
  mpc_planner's reference of its next tick, announced on the sample before it
  (:meth:`WholeBodyStage.on_reference_ahead`): solved at once; the node builds the messages of that
  command at once too, and publishes them when the tick returns that very command;
* publishes, for each command (a tick, or a hold of the last command with a failure status):

  - ``joint_trajectory`` (``trajectory_msgs/JointTrajectory``): ``header.stamp`` = the reference's
    stamp, ``joint_names``, two points at ``time_from_start`` T and 2T with positions and velocities
    (point 1: central difference ``(q2 - q0) / 2T`` with ``q0`` the previous command; point 2:
    backward difference ``(q2 - q1) / T``), as ros2_control's JointTrajectoryController takes it;
  - ``joint_commands`` (``std_msgs/Float64MultiArray``): positions of the first point
    (forward_command_controller style), in the order of ``joint_names``; only while something subscribes;
  - ``joint_states`` (``sensor_msgs/JointState``, if ``publish_joint_states``): the first point,
    stamped at the reference's stamp + T (the instant it is to be reached); only while something subscribes;
  - ``ik/timing`` (``TickTiming``): ``solve_time`` of both solutions, ``tick_time`` of the
    callback, ``status`` (:data:`STATUS_OK` or one of the codes below), ``trigger`` (the resolved
    ``mpc/com_reference`` for a tick on a reference, ``sensor_state`` for one holding the posture without
    references: a client can wait for the whole chain sensor -> planner -> ik before walking), ``reason``
    (why the status is not OK, in the stage's words: the walk_behavior ends the walk with it). While a walk
    waits for its first references (up to ``reference_timeout``), each sample due for a tick publishes only
    an ``ik/timing``, status :data:`STATUS_WAITING_FOR_REFERENCES`, trigger ``sensor_state``, the reason
    naming the plan and what the ik heard of the mpc_planner: the ik is not silent then.

Failures never publish a jump: a reference with NaN/inf or malformed arrays (:data:`STATUS_BAD_REFERENCE`),
targets that cannot be built (:data:`STATUS_TARGETS_ERROR`), a solve that does not converge
(:data:`STATUS_IK_FAILED`) or references stopping during a walk (:data:`STATUS_REFERENCE_STALE`) republish
the last command (both points at its positions, zero velocities) with the status; the stage logs a
throttled warning (through :class:`~walk_mpc.nodes._common.RosLog`). Nothing is published before the
first sensor sample.

Services (seed 003, legs = the robot's foot frames in model order: Talos left, right; solo12 FL, FR, HL, HR):

* ``ik/exec_gesture`` (``ExecGesture``): queues a gesture for the next standing tick, where the gestures of
  one tick compose in the seed's order (Rz Ry Rx Tz Ty Tx) whatever their call order. ``success`` means
  accepted; ``body_moved`` says whether the body will move by the inverse transform (friction and at
  least ``gesture.min_support_legs`` legs with effect touching the ground, from the contact sensors of
  ``sensor_state``) while the feet stay, else only the legs move. Refused while a walk is in progress,
  before the node has a state, and for an unknown dof or a non-finite value (``success = false`` with the
  reason).
* ``ik/set_gesture_effect`` (``SetGestureEffect``): selects whether a leg (index) follows gestures;
  unknown leg -> ``success = false`` listing the legs. The selection survives walks.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Optional, Sequence

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from walk_mpc.core.body.gesture import GestureController
from walk_mpc.core.body.ik import IKSolver
from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.control.stabilizer import StabilizerParameters
from walk_mpc.core.control.stamps import StampGuardParameters
from walk_mpc.core.control.types import JointCommand, TickReport, WholeBodyStatus
from walk_mpc.core.control.whole_body_stage import WholeBodyStage, WholeBodyStageParameters
from walk_mpc.core.errors import ParameterError, WalkMpcError
from walk_mpc.core.mpc.support_correction import SupportCorrectionParameters
from walk_mpc.msg import ComReference, FootstepPlan, SensorState, TickTiming
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
from walk_mpc.nodes.conversions import plan_from_msg, time_msg
from walk_mpc.nodes.joint_messages import JointMessages, com_reference_input
from walk_mpc.nodes.sensor_cdr import SensorStateReader, sensor_input
from walk_mpc.srv import ExecGesture, SetGestureEffect

#: ``TickTiming.status`` values of ``ik/timing`` (:class:`WholeBodyStatus`).
STATUS_OK = int(WholeBodyStatus.OK)
STATUS_IK_FAILED = int(WholeBodyStatus.IK_FAILED)  # a solve did not converge: last command held
STATUS_BAD_REFERENCE = int(WholeBodyStatus.BAD_REFERENCE)  # NaN/inf or malformed ComReference: held
STATUS_TARGETS_ERROR = int(WholeBodyStatus.TARGETS_ERROR)  # targets could not be built: last command held
STATUS_REFERENCE_STALE = int(WholeBodyStatus.REFERENCE_STALE)  # walking, no ComReference: last command held
STATUS_SAFE_STOP = int(WholeBodyStatus.SAFE_STOP)  # references stopped mid-walk: the step lands, then stand
STATUS_PLAN_REFUSED = int(WholeBodyStatus.PLAN_REFUSED)  # a walk plan off the feet: not walked, standing
STATUS_WAITING_FOR_REFERENCES = int(WholeBodyStatus.WAITING_FOR_REFERENCES)  # a walk's first references due

_TOPICS = ("plan_topic", "reference_topic", "reference_ahead_topic", "sensor_topic", "trajectory_topic",
           "commands_topic", "joint_states_topic", "timing_topic")


def is_reference_tick(timing: TickTiming, reference_topic: str) -> bool:
    """Whether an ``ik/timing`` message reports a successful tick on ``reference_topic`` (resolved name):
    the chain sensor -> mpc_planner -> ik runs."""
    return timing.status == STATUS_OK and timing.trigger == reference_topic


@dataclasses.dataclass(frozen=True)
class IKNodeParameters:
    """Parameters of the ik node (see :class:`WholeBodyStageParameters` for the stage's).

    Attributes:
        robot: Robot model.
        solver: IK solver.
        gesture: Gesture controller (standing).
        joint_names: Joints of the commands, in order (empty = every actuated joint in model order).
        control_period: Control period T [s] (trajectory times of holds and sensor-driven ticks).
        reference_timeout: Sensor time without ComReference after which SensorState drives the ticks [s].
        safe_stop_timeout: Sensor time without ComReference during a walk after which the safe stop starts
            [s] (at most ``reference_timeout``; see :class:`WholeBodyStageParameters`).
        sensor_timeout: Two consecutive SensorState stamps further apart [s] are an outage.
        publish_joint_states: Whether to publish ``joint_states``.
        support_correction_enabled: Walk on the support-corrected timeline (as the mpc_planner).
        support_shift_later_steps: The correction also translates later steps (as the mpc_planner).
        support_measured_height: The corrected pose takes the measured sole height (as the mpc_planner).
        solve_ahead: Solve the references the mpc_planner announces on ``reference_ahead_topic`` before
            their tick; the tick publishes that solution when it solves exactly that problem.
        contact_force_threshold: Total normal force [N] of a leg's contact sensors from which it touches
            the ground (gestures).
        contact_prefixes: Name prefix of each leg's contact sensors ([] = the simulators' names).
        stamps: The SensorState stamp guard.
        safe_stop_speedup: Largest speed-up [-] of the rest of the swing in a safe stop (references stopping
            mid-walk: see :class:`WholeBodyStageParameters`), to land at the planned touchdown.
        safe_stop_shift_duration: Duration [s] of each CoM shift of a safe stop (minimum jerk).
        safe_stop_stance_radius: Distance [m] from the stance sole within which a safe stop keeps the CoM
            while the foot swings.
        max_settle_distance: A foot on the ground farther than this [m] from the plan's standing pose stays
            where it is (as the mpc_planner's ``resync_distance``).
        landing_tail: Single-support commands end with the swing foot put down (see
            :class:`WholeBodyStageParameters`): a driver holding the last trajectory when the ik dies
            lands it.
        stabilizer: The DCM stabilizer of the stage (:class:`StabilizerParameters`).
        plan_topic, reference_topic, reference_ahead_topic, sensor_topic: Inputs (module docstring).
        trajectory_topic, commands_topic, joint_states_topic, timing_topic: Outputs (module docstring).
    """

    robot: RobotModel.Parameters = dataclasses.field(default_factory=RobotModel.Parameters)
    solver: IKSolver.Parameters = dataclasses.field(default_factory=IKSolver.Parameters)
    gesture: GestureController.Parameters = dataclasses.field(default_factory=GestureController.Parameters)
    joint_names: tuple[str, ...] = ()
    control_period: float = 0.02
    reference_timeout: float = 0.1
    safe_stop_timeout: float = 0.1
    sensor_timeout: float = 0.25
    publish_joint_states: bool = True
    support_correction_enabled: bool = True
    support_shift_later_steps: bool = False
    support_measured_height: bool = False
    solve_ahead: bool = True
    contact_force_threshold: float = 1.0
    contact_prefixes: tuple[str, ...] = ()
    stamps: StampGuardParameters = dataclasses.field(default_factory=StampGuardParameters)
    safe_stop_speedup: float = 2.0
    safe_stop_shift_duration: float = 1.0
    safe_stop_stance_radius: float = 0.03
    max_settle_distance: float = 0.1
    landing_tail: bool = True
    stabilizer: StabilizerParameters = dataclasses.field(default_factory=StabilizerParameters)
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
        object.__setattr__(self, "contact_prefixes", tuple(self.contact_prefixes))
        for name in ("publish_joint_states", "support_correction_enabled", "support_shift_later_steps",
                     "support_measured_height"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")
        for field in _TOPICS:
            value = getattr(self, field)
            if not isinstance(value, str) or not value:
                raise ParameterError(field, value, "a topic name")
        self.stage  # noqa: B018 (validates the stage's parameters)

    @property
    def support_correction(self) -> SupportCorrectionParameters:
        """Parameters of the support-foot correction policy."""
        return SupportCorrectionParameters(enabled=self.support_correction_enabled,
                                           shift_later_steps=self.support_shift_later_steps,
                                           measured_height=self.support_measured_height)

    @property
    def stage(self) -> WholeBodyStageParameters:
        """Parameters of the whole-body stage."""
        return WholeBodyStageParameters(
            solver=self.solver, gesture=self.gesture, joint_names=self.joint_names,
            control_period=self.control_period, reference_timeout=self.reference_timeout,
            safe_stop_timeout=self.safe_stop_timeout,
            sensor_timeout=self.sensor_timeout, support_correction=self.support_correction,
            solve_ahead=self.solve_ahead, contact_force_threshold=self.contact_force_threshold,
            contact_prefixes=self.contact_prefixes, stamps=self.stamps,
            safe_stop_speedup=self.safe_stop_speedup, safe_stop_shift_duration=self.safe_stop_shift_duration,
            safe_stop_stance_radius=self.safe_stop_stance_radius,
            max_settle_distance=self.max_settle_distance, landing_tail=self.landing_tail,
            stabilizer=self.stabilizer)


def read_parameters(node: Node) -> IKNodeParameters:
    """IKNodeParameters from the node's ROS parameters (declared from the dataclass)."""
    return DataclassParameters(node, IKNodeParameters).read()


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
        self.params = p = params
        # The endpoints first: DDS discovers them (up to 1 s after a restart: Fast DDS's endpoint discovery
        # heartbeat) while the robot model and the IK kernels load; nothing runs before the node spins.
        qos = reliable_qos()
        self._trajectory_pub = self.create_publisher(JointTrajectory, p.trajectory_topic, qos)
        self._commands_pub = self.create_publisher(Float64MultiArray, p.commands_topic, qos)
        self._states_pub = (self.create_publisher(JointState, p.joint_states_topic, qos)
                            if p.publish_joint_states else None)
        self._timing_pub = self.create_publisher(TickTiming, p.timing_topic, qos)
        self.create_subscription(FootstepPlan, p.plan_topic, self._on_plan, LATCHED_QOS)
        reference_sub = self.create_subscription(ComReference, p.reference_topic, self._on_reference,
                                                 stream_input_qos(), raw=True)
        self._sensor_reader = SensorStateReader()
        sensor_sub = self.create_subscription(SensorState, p.sensor_topic, self._on_sensor_state,
                                              stream_input_qos(), raw=True)
        if p.solve_ahead:
            self.create_subscription(ComReference, p.reference_ahead_topic, self._on_reference_ahead,
                                     stream_input_qos(), raw=True)
        #: TickTiming.trigger per JointCommand.source: the resolved input topic.
        self._triggers = {"reference": reference_sub.topic_name, "sensor": sensor_sub.topic_name}
        self.create_service(ExecGesture, "ik/exec_gesture", self._on_exec_gesture)
        self.create_service(SetGestureEffect, "ik/set_gesture_effect", self._on_set_gesture_effect)
        self.robot = RobotModel(params.robot)
        self.stage = WholeBodyStage(self.robot, params.stage, RosLog(self.get_logger()))
        self.joint_names = self.stage.joint_names
        self._messages = JointMessages(self.joint_names, p.publish_joint_states)
        self._ahead: tuple = (None, None)  # (the stage's command solved ahead, its messages)
        self.get_logger().info(
            f"IK of '{self.robot.name}' ({len(self.joint_names)} joints, legs {list(self.stage.legs)}), "
            f"control period {p.control_period} s; waiting for '{p.sensor_topic}' or '{p.reference_topic}'")

    # ------------------------------------------------------------------ the stage's state
    initialised = property(lambda self: self.stage.initialised, doc="WholeBodyStage.initialised")
    configuration = property(lambda self: self.stage.configuration, doc="WholeBodyStage.configuration")
    resyncs = property(lambda self: self.stage.resyncs, doc="WholeBodyStage.resyncs")
    prepared = property(lambda self: self.stage.prepared, doc="WholeBodyStage.prepared")
    ahead_ticks = property(lambda self: self.stage.ahead_ticks, doc="WholeBodyStage.ahead_ticks")

    def walking(self) -> bool:
        """Whether a walk is in progress at the last tick."""
        return self.stage.walking

    def _steady_ns(self) -> Optional[int]:
        """The steady clock [ns] for the stamp guard (tests may override it: None checks the order only)."""
        return time.monotonic_ns()

    # ------------------------------------------------------------------ inputs
    def _on_plan(self, msg: FootstepPlan) -> None:
        try:
            plan = plan_from_msg(msg)
        except WalkMpcError as exc:
            self.get_logger().error(f"plan {msg.plan_id} rejected, keeping the previous one: {exc}")
            return
        self.stage.set_plan(plan)

    def _on_sensor_state(self, msg) -> None:
        """A SensorState: serialized (the subscription's, see :mod:`~walk_mpc.nodes.sensor_cdr`) or not."""
        start = time.perf_counter()
        try:
            now, sample = sensor_input(msg, self._sensor_reader)
        except WalkMpcError as exc:
            self.stage.reject(f"sensor state rejected: {exc}")
            return
        command = self.stage.observe(now, sample, self._steady_ns())
        if command is None and self.stage.report is not None:
            self._publish_report(self.stage.report, start)
        self._publish(command, start)
        self._keep_ahead()

    def _on_reference(self, msg) -> None:
        """A ComReference: serialized (the subscription's) or not."""
        start = time.perf_counter()
        reference = self._read_reference(msg, "com reference")
        if reference is not None:
            self._publish(self.stage.on_reference(reference), start)

    def _on_reference_ahead(self, msg) -> None:
        """A ComReference announced ahead: serialized (the subscription's) or not."""
        reference = self._read_reference(msg, "com reference ahead")
        if reference is not None:
            self.stage.on_reference_ahead(reference)
            self._keep_ahead()

    def _read_reference(self, msg, what: str):
        """The CoMReference of ``msg``, or None (logged, throttled) when it cannot be read."""
        try:
            return com_reference_input(msg)
        except WalkMpcError as exc:
            self.get_logger().error(f"{what} not read: {exc}", throttle_duration_sec=1.0)
            return None

    # ------------------------------------------------------------------ outputs
    def _keep_ahead(self) -> None:
        """The messages of the command the stage solved ahead, built now (before its tick)."""
        command = self.stage.ahead_command
        if command is not None and command is not self._ahead[0]:
            self._ahead = (command, self._messages.build(command))

    def _publish(self, command: Optional[JointCommand], start: float) -> None:
        """The trajectory first (the critical message), then the commands, joint states and timing."""
        if command is None:
            return
        if command is self._ahead[0]:
            messages, self._ahead = self._ahead[1], (None, None)
        else:
            messages = self._messages.build(command)
        trajectory, commands, state = messages
        self._trajectory_pub.publish(trajectory)
        if self._commands_pub.get_subscription_count():  # nothing is sent to nobody (the sim reads the
            self._commands_pub.publish(commands)          # trajectory; a recorder or a driver may read these)
        if state is not None and self._states_pub.get_subscription_count():
            self._states_pub.publish(state)
        timing = TickTiming(component="ik", solve_time=float(command.solve_time), status=int(command.status),
                            trigger=self._triggers[command.source], reason=command.reason)
        timing.header.stamp = time_msg(command.stamp_ns)
        timing.tick_time = time.perf_counter() - start
        self._timing_pub.publish(timing)

    def _publish_report(self, report: TickReport, start: float) -> None:
        """A tick without a command (waiting for a walk's first references): its timing only, with the status
        and what the stage waits for, so that the ik is not taken for silent."""
        timing = TickTiming(component="ik", solve_time=0.0, status=int(report.status),
                            trigger=self._triggers["sensor"], reason=report.reason)
        timing.header.stamp = time_msg(report.stamp_ns)
        timing.tick_time = time.perf_counter() - start
        self._timing_pub.publish(timing)

    # ------------------------------------------------------------------ services
    def _on_exec_gesture(self, request, response):
        reply = self.stage.exec_gesture(request.dof, request.value)
        response.success, response.message = reply.success, reply.message
        response.body_moved = reply.body_moved
        return response

    def _on_set_gesture_effect(self, request, response):
        reply = self.stage.set_gesture_effect(int(request.leg), bool(request.effect))
        response.success, response.message = reply.success, reply.message
        return response


NODE_CLASS = IKNode


def main(args: Optional[Sequence[str]] = None) -> int:
    """Run the ik node until shutdown; exit code 2 on a configuration error."""
    return run(lambda: IKNode(), args)


if __name__ == "__main__":
    sys.exit(main())
