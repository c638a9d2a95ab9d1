"""ROS 2 node ``sim``: a simulated robot publishing SensorState every hardware period, driven by commands.

Topics (names relative to the node's namespace):

* publishes ``sensor_topic`` (``walk_mpc/msg/SensorState``, reliable, depth 10; serialized here with
  :func:`~walk_mpc.nodes.sensor_cdr.sensor_state_cdr`, the message :func:`sensor_state_msg` builds) once per
  hardware step,
  ``header.stamp = start + k * hardware_period`` (``start`` = the node's ROS time when it starts, ``k`` =
  steps since start, integer nanoseconds: the stamps are exactly periodic and are the graph's time base);
* publishes ``fall_topic`` (``std_msgs/Bool``, reliable, transient local, depth 1): false at start, then
  on every change (the kinematic plant only falls if its base tilts beyond ``fall_tilt``);
* subscribes ``trajectory_topic`` (``trajectory_msgs/JointTrajectory``, best effort): ros2_control semantics
  (see :class:`walk_mpc.core.sim.backend.JointServo`); ``header.stamp`` on the simulated clock (zero = now);
* publishes ``latency_topic`` if set (``walk_mpc/msg/TickTiming``, reliable, depth 10, component
  ``"sensor_to_command"``): for each JointTrajectory stamped with the stamp of a SensorState this node
  published (the ik stamps its commands with the sample they were computed from), ``tick_time`` = the
  time from handing that sample to the middleware to the start of the command's callback here, on the
  steady clock: the control loop's round trip through the graph as the robot sees it
  (``header.stamp`` = the sample's stamp; first command per sample only); ``status`` =
  ``STATUS_DEADLINE_MISSED`` (1) when that command missed its deadline (see below), plus
  ``STATUS_SAMPLE_LATE`` (2) when the sample itself went out late (a late wake-up, below), else 0;
* publishes ``deadline_topic`` if set (``std_msgs/Float64MultiArray``, reliable, transient local, depth 1):
  the deadline accounting of the control loop, ``data = [missed, measured, share, late_wakeups,
  max_wakeup_lateness]``. A sample is
  *measured* when a JointTrajectory stamped with its stamp arrives (first command per sample, within the
  last ``LATENCY_WINDOW`` samples); it *missed its deadline* when that command arrived (its callback
  started) after the next sample was published, i.e. too late to act before the next step of the plant;
  ``share = missed / measured`` (0 before any measure). Samples never answered are not counted. Published
  at start (zeros), at each missed deadline, at each late wake-up and every ``DEADLINE_REPORT_SAMPLES``
  measured samples; the counts run from the node's start (``deadlines_missed``, ``deadlines_measured``
  attributes).
  ``late_wakeups`` counts the samples whose timer callback (the simulated hardware's own cycle) started more
  than ``late_wakeup_threshold`` after it was due, and ``max_wakeup_lateness`` [s] is the largest such delay
  (attributes of the same names): a sample sent late leaves the controllers less than a period, so a miss
  that follows one is the stand-in hardware's stall, not the control loop's;
* subscribes ``commands_topic`` if set (``std_msgs/Float64MultiArray``, best effort): positions for
  ``command_joint_names`` (empty = the model's joints in model order), reached at once (after the plant's
  latency and lag).

A command naming a joint the model does not have, or with inconsistent array lengths, is rejected as a
whole and logged (at most once per second, with a count); the node keeps running.

Backends (``backend``): ``"kinematic"`` (:class:`~walk_mpc.core.sim.kinematic.KinematicSim`, or the
scripted :class:`~walk_mpc.core.sim.wheels.WheelPlant` when ``robot_type = "wheeled"``, e.g. upkie)
and ``"mujoco"`` (:class:`~walk_mpc.core.sim.mujoco.MujocoSim`, or
:class:`~walk_mpc.core.sim.mujoco.MujocoWheelSim` for ``"wheeled"``; physics parameters in ``mujoco``;
a clear configuration error if the mujoco package is missing). A wall timer at
``hardware_period / real_time_factor`` drives the steps; the stamps advance by the simulated time
whatever the wall clock does.
"""

from __future__ import annotations

import array
import dataclasses
import math
import sys
import time
from collections import OrderedDict
from typing import Optional, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, Quaternion, Twist, Vector3
from std_msgs.msg import Bool, Float64MultiArray, Header, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory

from walk_mpc.core.errors import ConfigError, InputError, ParameterError, WalkMpcError
from walk_mpc.core.params import check_choice, check_positive
from walk_mpc.core.sim import BACKENDS, create_backend
from walk_mpc.core.sim.backend import JointTrajectoryCommand, SensorSample, SimBackend, check_command_stamp
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.sim.mujoco import MujocoSim, MujocoWheelSim
from walk_mpc.core.sim.wheels import WheelPlant
from walk_mpc.msg import SensorState, TickTiming
from walk_mpc.nodes._common import (
    LATCHED_QOS,
    DataclassParameters,
    GraphNode,
    node_options,
    reliable_qos,
    run,
    stream_input_qos,
)
from walk_mpc.nodes.sensor_cdr import deserialized, read_joint_trajectory, sensor_state_cdr

#: Values of ``SimNodeParameters.robot_type``.
ROBOT_TYPES = ("legged", "wheeled")

#: Minimum interval between two warnings about rejected commands [s].
WARNING_PERIOD = 1.0

#: Samples whose publication time is kept to measure the sensor -> command latency (1.28 s at 10 ms).
LATENCY_WINDOW = 128

#: ``TickTiming.status`` of a ``latency_topic`` message whose command arrived after the next sample.
STATUS_DEADLINE_MISSED = 1
#: ``sim/latency`` status bit: the sample went out after a late wake-up of the sim
#: (``late_wakeup_threshold``).
STATUS_SAMPLE_LATE = 2

#: The fields of ``deadline_topic``'s data, in order (its layout label).
DEADLINE_FIELDS = "missed,measured,share,late_wakeups,max_wakeup_lateness"

#: ``deadline_topic`` is published (besides each miss) every this many measured samples (1 s at 10 ms).
DEADLINE_REPORT_SAMPLES = 100


@dataclasses.dataclass(frozen=True)
class SimNodeParameters:
    """Parameters of the sim node.

    Attributes:
        backend: Simulator: ``"kinematic"`` or ``"mujoco"``.
        robot_type: ``"legged"`` (plant parameters in ``kinematic``) or ``"wheeled"`` (parameters in
            ``wheels``: the scripted wheel plant with the kinematic backend, the MuJoCo wheeled robot
            with the mujoco backend).
        real_time_factor: Simulated seconds per wall-clock second (1.0 = real time).
        sensor_topic: SensorState output.
        trajectory_topic: JointTrajectory command input.
        commands_topic: Float64MultiArray command input ('' = none: the trajectory alone drives the robot;
            listening to both would apply the ik's two outputs of the same tick one after the other).
        fall_topic: Fall flag output.
        latency_topic: Sensor -> command latency output ('' = not measured).
        deadline_topic: Deadline accounting output: missed deadlines, measured samples, share, late
            wake-ups, largest wake-up lateness ('' = none).
        command_joint_names: Joint order of ``commands_topic`` (empty = the model's joint order).
        frame_id: ``header.frame_id`` of the SensorState (the world frame of the base pose).
        kinematic: Plant parameters of a legged robot (kinematic and MuJoCo backends).
        wheels: Plant parameters of a wheeled robot.
        mujoco: Physics parameters of the MuJoCo backend (gains, timestep, feed-forward, wheels, lift).
        command_max_age: A JointTrajectory stamped more than this before the simulated time is rejected [s].
        command_max_lead: A JointTrajectory stamped more than this after the simulated time is rejected [s].
        command_silence_report: [s] of simulated time without an accepted command after which the node warns
            that it holds the last commanded positions (as a driver's command timeout would), and then logs
            when commands come again and after how long (the loop running again after a restart of the ik:
            ``benchmarks/restart.py``).
        phase_offset: [s] Where the samples fall in the wall period: the timer starts when the system clock
            modulo the wall period (``hardware_period / real_time_factor``) equals this, so samples go out
            at ``k * period + phase_offset``. Robots sharing one computer get different offsets so that
            their control ticks do not start at the same instant and queue for the CPUs
            (``benchmarks/multi_robot.py``). -1 = no alignment: the timer starts with the node.
        late_wakeup_threshold: [s] A sample whose timer callback starts more than this after it was due (the
            timer's own schedule) is a late wake-up of the simulated hardware (``deadline_topic``).
    """

    backend: str = "kinematic"
    robot_type: str = "legged"
    real_time_factor: float = 1.0
    sensor_topic: str = "sensor_state"
    trajectory_topic: str = "joint_trajectory"
    commands_topic: str = ""
    fall_topic: str = "sim/fall"
    latency_topic: str = "sim/latency"
    deadline_topic: str = "sim/deadlines"
    command_joint_names: tuple[str, ...] = ()
    frame_id: str = "world"
    kinematic: KinematicSim.Parameters = dataclasses.field(default_factory=KinematicSim.Parameters)
    wheels: WheelPlant.Parameters = dataclasses.field(default_factory=WheelPlant.Parameters)
    mujoco: MujocoSim.Parameters = dataclasses.field(default_factory=MujocoSim.Parameters)
    command_max_age: float = 0.5
    command_max_lead: float = 0.5
    command_silence_report: float = 0.1
    phase_offset: float = -1.0
    late_wakeup_threshold: float = 0.002

    def __post_init__(self) -> None:
        if self.phase_offset != -1.0 and not (math.isfinite(self.phase_offset) and self.phase_offset >= 0.0):
            raise ParameterError("phase_offset", self.phase_offset,
                                 "-1 (no alignment) or a time >= 0 s below the wall period")
        check_positive("command_max_age", self.command_max_age)
        check_positive("command_max_lead", self.command_max_lead)
        check_positive("command_silence_report", self.command_silence_report)
        check_positive("late_wakeup_threshold", self.late_wakeup_threshold)
        check_choice("backend", self.backend, sorted(BACKENDS))
        check_choice("robot_type", self.robot_type, ROBOT_TYPES)
        check_positive("real_time_factor", self.real_time_factor)
        for field in ("sensor_topic", "trajectory_topic", "fall_topic"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ParameterError(field, getattr(self, field), "a topic name")
        object.__setattr__(self, "command_joint_names", tuple(self.command_joint_names))
        if len(set(self.command_joint_names)) != len(self.command_joint_names):
            raise ParameterError("command_joint_names", self.command_joint_names, "distinct joint names")

    def make_backend(self) -> SimBackend:
        """The configured simulator.

        Raises:
            ConfigError: The backend is unavailable.
            ModelError: The robot cannot be loaded or simulated by the backend.
        """
        if self.backend == "mujoco":
            if self.robot_type == "wheeled":
                return MujocoWheelSim(self.wheels, self.mujoco)
            return MujocoSim(self.kinematic, self.mujoco)
        if self.robot_type == "wheeled":
            return WheelPlant(self.wheels)
        return create_backend(self.backend, self.kinematic)


def phase_wait_ns(now_ns: int, period_ns: int, offset_ns: int) -> int:
    """Time [ns] from ``now_ns`` to the next instant ``k * period_ns + offset_ns`` (0 when at one)."""
    return (offset_ns - now_ns) % period_ns


def _vector3(v) -> Vector3:
    return Vector3(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def _quaternion(q) -> Quaternion:
    return Quaternion(x=float(q[0]), y=float(q[1]), z=float(q[2]), w=float(q[3]))


def _doubles(values) -> array.array:
    """A float64[] message field of an array, without the per-element checks of the message setter."""
    return array.array("d", np.ascontiguousarray(values, dtype=float).tobytes())


def wakeup_lateness_ns(until_next_ns: Optional[int], period_ns: int) -> int:
    """How long [ns] after its due time a periodic rcl timer's callback runs, from the timer's own time until
    its next call (``Timer.time_until_next_call()`` in the callback: rcl has moved the next call to the first
    phase point after now, skipping the periods missed): in [0, period_ns); 0 when the timer cannot tell."""
    if until_next_ns is None:
        return 0
    return max(0, int(period_ns) - int(until_next_ns)) % int(period_ns)


def sensor_state_msg(sample: SensorSample, stamp_ns: int, frame_id: str = "world") -> SensorState:
    """SensorState message of a sensor sample stamped ``stamp_ns`` [ns]."""
    msg = SensorState()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
    msg.header.frame_id = frame_id
    msg.joint_names = list(sample.joint_names)
    msg.joint_pos = _doubles(sample.joint_pos)
    msg.joint_vel = _doubles(sample.joint_vel)
    msg.motor_names = list(sample.motor_names)
    msg.motor_pos = _doubles(sample.motor_pos)
    msg.motor_vel = _doubles(sample.motor_vel)
    msg.motor_torque = _doubles(sample.motor_torque)
    msg.contact_names = list(sample.contact_names)
    msg.contact = _doubles(sample.contact)
    msg.imu_names = list(sample.imu_names)
    msg.imu_linear_acc = [_vector3(a) for a in sample.imu_linear_acc]
    msg.imu_angular_vel = [_vector3(w) for w in sample.imu_angular_vel]
    msg.imu_orientation = [_quaternion(q) for q in sample.imu_orientation_xyzw]
    msg.base_estimate_valid = bool(sample.base_estimate_valid)
    p = sample.base_position
    msg.base_pose = Pose(position=Point(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                         orientation=_quaternion(sample.base_orientation_xyzw))
    msg.base_twist = Twist(linear=_vector3(sample.base_linear_velocity),
                           angular=_vector3(sample.base_angular_velocity))
    return msg


class _MessageFields:
    """:class:`~walk_mpc.nodes.sensor_cdr.TrajectoryFields` of a JointTrajectory message."""

    __slots__ = ("sec", "nanosec", "frame_id", "joint_names", "points")


def _trajectory_fields(msg: JointTrajectory) -> _MessageFields:
    fields = _MessageFields()
    fields.sec, fields.nanosec = msg.header.stamp.sec, msg.header.stamp.nanosec
    fields.frame_id = msg.header.frame_id
    fields.joint_names = tuple(msg.joint_names)
    fields.points = [(list(p.positions), list(p.velocities), p.time_from_start.sec, p.time_from_start.nanosec)
                     for p in msg.points]
    return fields


class SimNode(GraphNode):
    """Step a simulated robot on a wall timer and publish its sensor data with simulated stamps."""

    def __init__(self, params: Optional[SimNodeParameters] = None, **kwargs) -> None:
        """Create the node and its simulator.

        Args:
            params: Parameters; None reads them from the node's ROS parameters.
            **kwargs: Passed to ``Node.__init__`` (``parameter_overrides``, ``context``).

        Raises:
            ConfigError, ParameterError, ModelError: Invalid parameters or robot.
        """
        super().__init__("sim", **node_options(), **kwargs)
        if params is None:
            params = DataclassParameters(self, SimNodeParameters).read()
        self.params = params
        self.backend = params.make_backend()
        names = params.command_joint_names or self.backend.joint_names
        unknown = [n for n in names if n not in self.backend.joint_names]
        if unknown:
            raise ConfigError(f"unknown joints {unknown}; joints: {list(self.backend.joint_names)}",
                              "command_joint_names")
        self._command_names = tuple(names)
        self._period_ns = round(self.backend.hardware_period * 1e9)
        self._start_ns = self.get_clock().now().nanoseconds
        self.rejected_commands = 0
        self._unlogged = 0
        self._fallen: Optional[bool] = None
        self._last_command_time: Optional[float] = None  # simulated time [s] of the last accepted command
        self._silent = False  # warned that commands stopped, and not heard again since
        reliable, latched = reliable_qos(), LATCHED_QOS
        self._sensor_pub = self.create_publisher(SensorState, params.sensor_topic, reliable)
        self._fall_pub = self.create_publisher(Bool, params.fall_topic, latched)
        self._latency_pub = (self.create_publisher(TickTiming, params.latency_topic, reliable)
                             if params.latency_topic else None)
        self._deadline_pub = (self.create_publisher(Float64MultiArray, params.deadline_topic, latched)
                              if params.deadline_topic else None)
        self._measuring = self._latency_pub is not None or self._deadline_pub is not None
        # sample stamp -> (steady clock at publication, whether its wake-up was late)
        self._sent_ns: OrderedDict[int, tuple[int, bool]] = OrderedDict()
        self._published_stamp_ns = -1  # stamp of the last sample published
        self.deadlines_missed = 0  # measured samples whose command arrived after the next sample
        self.deadlines_measured = 0  # samples whose command arrived
        self.late_wakeups = 0  # timer callbacks that started more than late_wakeup_threshold after due
        self.max_wakeup_lateness = 0.0  # [s] the largest of those delays
        self._trajectory_sub = self.create_subscription(
            JointTrajectory, params.trajectory_topic, self._on_trajectory, stream_input_qos(), raw=True)
        self._commands_sub = None
        if params.commands_topic:
            self._commands_sub = self.create_subscription(
                Float64MultiArray, params.commands_topic, self._on_commands, stream_input_qos())
        self._publish_fall(self.backend.state.fallen)
        self._publish_deadlines()
        wall_period = self.backend.hardware_period / params.real_time_factor
        if params.phase_offset >= wall_period:
            raise ParameterError("phase_offset", params.phase_offset,
                                 f"-1 (no alignment) or a time in [0, {wall_period:g}) s, the wall period")
        if params.phase_offset >= 0.0:
            self._wait_for_phase(round(wall_period * 1e9), round(params.phase_offset * 1e9))
        self._timer = self.create_timer(wall_period, self._on_timer)
        self._wall_period_ns = round(wall_period * 1e9)
        self._late_threshold_ns = round(params.late_wakeup_threshold * 1e9)
        inputs = [self._trajectory_sub.topic_name] + (
            [self._commands_sub.topic_name] if self._commands_sub is not None else [])
        self.get_logger().info(
            f"{params.backend} simulator of {len(self.backend.joint_names)} joints, period "
            f"{self.backend.hardware_period} s, real-time factor {params.real_time_factor}; publishing "
            f"'{self._sensor_pub.topic_name}', commands on {inputs}")

    def _wait_for_phase(self, period_ns: int, offset_ns: int) -> None:
        """Return when the node's clock modulo ``period_ns`` is ``offset_ns``: a timer created then fires at
        that phase (rcl timers keep the phase of their creation)."""
        time.sleep(phase_wait_ns(self.get_clock().now().nanoseconds, period_ns, offset_ns) / 1e9)

    def sim_time_of(self, stamp_ns: int) -> float:
        """Simulated time [s] of a ROS stamp [ns] on the sensor clock."""
        return (int(stamp_ns) - self._start_ns) / 1e9

    def stamp_ns(self, step: int) -> int:
        """Stamp [ns] of hardware step ``step``."""
        return self._start_ns + step * self._period_ns

    def _on_timer(self) -> None:
        lateness_ns = wakeup_lateness_ns(self._timer.time_until_next_call(), self._wall_period_ns)
        late = lateness_ns > self._late_threshold_ns
        if late:
            self.late_wakeups += 1
            self.max_wakeup_lateness = max(self.max_wakeup_lateness, lateness_ns * 1e-9)
        state = self.backend.step()
        stamp_ns = self.stamp_ns(state.step_count)
        sample = self.backend.sensor_sample()
        msg = sensor_state_cdr(sample, stamp_ns, self.params.frame_id)  # serialized: no message objects
        if self._measuring:
            self._sent_ns[stamp_ns] = (time.monotonic_ns(), late)
            if len(self._sent_ns) > LATENCY_WINDOW:
                self._sent_ns.popitem(last=False)
        self._sensor_pub.publish(msg)
        self._published_stamp_ns = stamp_ns
        if late:  # reported once the late sample is out, not before it
            self._publish_deadlines()
        if state.fallen != self._fallen:
            self._publish_fall(state.fallen)
        last = self._last_command_time
        if (not self._silent and last is not None
                and self.backend.time - last > self.params.command_silence_report):
            self._silent = True
            self.get_logger().warning(
                f"no joint command for {self.params.command_silence_report:g} s (since t = {last:.3f} s): "
                "holding the last commanded positions")

    def _accepted_command(self) -> None:
        """Note a command applied now; log it if it ends a silence."""
        now = self.backend.time
        if self._silent:
            self._silent = False
            self.get_logger().info(f"joint commands again at t = {now:.3f} s, after "
                                   f"{now - self._last_command_time:.3f} s without")
        self._last_command_time = now

    def _publish_fall(self, fallen: bool) -> None:
        self._fallen = bool(fallen)
        self._fall_pub.publish(Bool(data=self._fallen))
        if fallen:
            self.get_logger().error(f"the robot fell at t = {self.backend.time:.3f} s")

    def _on_trajectory(self, msg) -> None:
        """A JointTrajectory: serialized (the subscription's, read with numpy:
        :func:`~walk_mpc.nodes.sensor_cdr.read_joint_trajectory`) or a message."""
        received_ns = time.monotonic_ns()
        fields = read_joint_trajectory(msg) if isinstance(msg, bytes) else None
        if fields is None:
            if isinstance(msg, bytes):
                try:
                    msg = deserialized(msg, JointTrajectory)
                except WalkMpcError as exc:
                    self._reject("joint_trajectory", exc)
                    return
            fields = _trajectory_fields(msg)
        stamp_ns = fields.sec * 1_000_000_000 + fields.nanosec
        try:
            points = fields.points
            times = tuple(sec + nanosec * 1e-9 for _, _, sec, nanosec in points)
            velocities = [v for _, v, _, _ in points]
            names = fields.joint_names
            command = JointTrajectoryCommand(
                joint_names=names,
                times_from_stamp=times,
                positions=[p for p, _, _, _ in points],
                stamp=None if stamp_ns == 0 else self.sim_time_of(stamp_ns),
                velocities=velocities if all(len(v) == len(names) for v in velocities) else None,
            )
            check_command_stamp(command, self.backend.time, self.params.command_max_age,
                                self.params.command_max_lead)
            self.backend.set_trajectory(command)
            self._accepted_command()
        except WalkMpcError as exc:
            self._reject("joint_trajectory", exc)
        sent = self._sent_ns.pop(stamp_ns, None)
        if sent is not None:  # after applying the command: measuring does not delay it
            self._account(fields, stamp_ns, received_ns - sent[0], sent[1])

    def _account(self, fields, stamp_ns: int, latency_ns: int, sample_late: bool = False) -> None:
        """Latency and deadline of the sample stamped ``stamp_ns``, answered by the command of ``fields``."""
        missed = self._published_stamp_ns > stamp_ns  # the next sample went out before this command came
        self.deadlines_measured += 1
        self.deadlines_missed += missed
        if self._latency_pub is not None:
            header = Header(stamp=Time(sec=fields.sec, nanosec=fields.nanosec), frame_id=fields.frame_id)
            self._latency_pub.publish(TickTiming(header=header, component="sensor_to_command",
                                                 tick_time=latency_ns * 1e-9,
                                                 status=(STATUS_DEADLINE_MISSED if missed else 0)
                                                 | (STATUS_SAMPLE_LATE if sample_late else 0)))
        if missed or self.deadlines_measured % DEADLINE_REPORT_SAMPLES == 0:
            self._publish_deadlines()

    def _publish_deadlines(self) -> None:
        if self._deadline_pub is None:
            return
        measured, missed = self.deadlines_measured, self.deadlines_missed
        msg = Float64MultiArray(data=[float(missed), float(measured), missed / measured if measured else 0.0,
                                      float(self.late_wakeups), self.max_wakeup_lateness])
        msg.layout.dim = [MultiArrayDimension(label=DEADLINE_FIELDS, size=5, stride=5)]
        self._deadline_pub.publish(msg)

    def _on_commands(self, msg: Float64MultiArray) -> None:
        try:
            if len(msg.data) != len(self._command_names):
                raise InputError("data", f"{len(msg.data)} positions",
                                 f"{len(self._command_names)}, one per joint of {list(self._command_names)}")
            self.backend.set_command(self._command_names, list(msg.data))
            self._accepted_command()
        except WalkMpcError as exc:
            self._reject("joint_commands", exc)

    def _reject(self, topic: str, exc: Exception) -> None:
        self.rejected_commands += 1
        more = f" ({self._unlogged} more rejected since the previous warning)" if self._unlogged else ""
        if self.get_logger().warning(f"{topic} command rejected: {exc}{more}",
                                     throttle_duration_sec=WARNING_PERIOD):
            self._unlogged = 0
        else:
            self._unlogged += 1


NODE_CLASS = SimNode


def main(args: Optional[Sequence[str]] = None) -> int:
    """Run the sim node until shutdown; exit code 2 on a configuration error."""
    return run(lambda: SimNode(), args)


if __name__ == "__main__":
    sys.exit(main())
