"""ROS 2 node ``mpc_planner``: the LIPM walking MPC over the footstep plan, ticked by SensorState stamps.

Topics (relative names, QoS reliable depth 10 unless said; defaults of :class:`MpcPlannerNodeParameters`):

* subscribes ``walk/plan`` (``FootstepPlan``, reliable + transient local, depth 1): a new ``plan_id``
  replaces the planner's timeline at the next tick (the planned CoM state is kept, so the references
  stay continuous). ``header.stamp`` is t = 0 of the plan's timeline. With ``walking`` false only the
  plan's feet are used: a standing timeline (no steps, CoM between the feet). An invalid plan is
  logged and the previous one kept.
* subscribes ``sensor_state`` (``SensorState``, best effort: see ``_common.stream_input_qos``): the graph's
  time base. A sample is a control tick when it is the first one or its stamp is at least
  ``control_period - hardware_period / 2`` after the previous tick: every
  ``round(control_period / hardware_period)``-th sample of a regular stream (seed 001: the NAO DCM
  callback wakes the control thread every 2nd 10 ms cycle). Samples whose stamp does not increase are
  ignored. Each tick

  1. installs a new plan if one arrived; before any plan, a standing timeline at the measured feet. The
     first sample after an outage (stamps more than ``sensor_timeout`` apart: a restarted simulator or
     state estimator, the robot possibly elsewhere) restarts the planner from the measured CoM at rest,
     standing at the measured feet until the next plan, unless a plan received during the outage walks now;
  2. estimates the measured state (:func:`~walk_mpc.core.body.state_estimation.estimate_state`, positions
     only: CoM and soles): joints + base estimate when ``base_estimate_valid``, else the base placed by a
     stance sole at its planned pose;
  3. seed 001's second feedback, the support-foot correction policy shared with the ik node
     (:class:`~walk_mpc.core.mpc.support_correction.SupportCorrector`; ``support_correction_enabled``,
     ``support_shift_later_steps``, ``support_measured_height``): at each lift-off the stance foot,
     settled during the double support, takes its measured pose in the planner's timeline; later
     steps keep their planned world poses. Plans received later in the walk get the corrections so
     far re-applied;
  4. one :meth:`MpcPlanner.step` at ``t = stamp - origin`` (origin: the first sample's stamp; every
     timeline is shifted to it, so plan changes keep one planner clock), with the measured CoM when
     ``feedback_enabled`` (seed 001's first feedback: the planner applies threshold and gain). With
     ``prepare_ahead`` the sample before the tick has already solved it (:meth:`MpcPlanner.prepare`,
     as without feedback): the step returns that solution when the tick's sample confirms it (CoM
     error within the threshold, no new plan, no support correction), else it solves now;
  5. publishes ``mpc/com_reference`` (``ComReference``: ``header.stamp`` = the sample's stamp,
     ``plan_id`` (0 before any plan), ``time_from_stamp`` = [T, 2T], CoM position and velocity, ZMP)
     and ``mpc/timing`` (``TickTiming``, component ``"mpc"``: ``solve_time`` of the MPC,
     ``tick_time`` of the callback, ``status`` below); every ``publish_preview_every`` ticks also
     ``mpc/com_path`` and ``mpc/zmp_path`` (``nav_msgs/Path`` of the predicted CoM and ZMP, stamped at
     each prediction time) and ``mpc/markers`` (``visualization_msgs/MarkerArray``: the footsteps of the
     planner's timeline as sole rectangles, the support region of the first preview interval, CoM and
     ZMP targets at T). The reference is published first; the previews follow ``PREVIEW_DELAY`` of wall
     time later (a one-shot timer, or at the next tick at the latest), off the reference's critical path.

Bad input never stops the node: a sample with NaN/inf values, missing joints or a malformed base pose
is logged (throttled) and skipped (no tick: the next good sample ticks); the timing status reports
planner failures, on which the walk behavior aborts the walk with PLANNER_FAILURE.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Optional, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, PoseStamped
from nav_msgs.msg import Path
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.body.state_estimation import MeasuredState, estimate_state
from walk_mpc.core.errors import ParameterError, WalkMpcError
from walk_mpc.core.mpc.planner import MpcPlanner, PlannerOutput, PlannerParameters
from walk_mpc.core.mpc.problem import PlanStatus
from walk_mpc.core.mpc.support_correction import SupportCorrectionParameters, SupportCorrector, anchor_foot
from walk_mpc.core.params import check_int_range, check_positive
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Timeline
from walk_mpc.msg import ComReference, FootstepPlan, SensorState, TickTiming
from walk_mpc.nodes._common import (
    LATCHED_QOS,
    DataclassParameters,
    GraphNode,
    is_shutdown,
    node_options,
    reliable_qos,
    run,
    stream_input_qos,
)
from walk_mpc.nodes.conversions import (
    PlanMessage,
    point,
    sensor_base_pose,
    stamp_ns,
    vector3,
    yaw_quaternion,
)

NODE_NAME = "mpc_planner"

#: ``TickTiming.status`` values of ``mpc/timing`` (non-zero: the walk behavior aborts with PLANNER_FAILURE).
STATUS_OK = 0
STATUS_INFEASIBLE = 1  # the MPC found no ZMP inside the support regions: previous plan followed
STATUS_SOLVER_FAILED = 2  # the QP solver failed: previous plan followed
STATUS_PLANNER_ERROR = 3  # the planner refused its inputs (e.g. unusable timeline): no reference this tick

_STATUS_OF_PLAN = {PlanStatus.SOLVED: STATUS_OK, PlanStatus.INFEASIBLE: STATUS_INFEASIBLE}

WARNING_PERIOD = 1.0  # [s] minimum interval between two warnings of the same kind
PREVIEW_DELAY = 0.005  # [s] wall time from a tick to its preview publication (off the critical path)

_NS = 1_000_000_000
_TOPICS = ("sensor_topic", "plan_topic", "reference_topic", "reference_ahead_topic", "com_path_topic",
           "zmp_path_topic", "markers_topic", "timing_topic", "frame_id")


@dataclasses.dataclass(frozen=True)
class MpcPlannerNodeParameters:
    """Parameters of the mpc_planner node.

    Attributes:
        planner: Walking pattern generator (MPC, soles, control period T, CoM feedback threshold and gain).
        robot: Robot model for the measured state (a biped).
        hardware_period: SensorState period [s]; ``planner.control_period`` must be a multiple of it
            (the planner ticks on every ``control_period / hardware_period``-th sample).
        feedback_enabled: Pass the measured CoM to the planner (seed 001's first feedback).
        support_correction_enabled: Correct the support foot with its measured pose at each lift-off
            (seed 001's second feedback; the ik node must use the same three settings).
        support_shift_later_steps: The correction also translates every later step.
        support_measured_height: The corrected pose takes the measured sole height (else the planned).
        publish_preview_every: Ticks between two publications of the paths and markers (0: never).
        sensor_timeout: Two consecutive SensorState stamps further apart [s] are an outage (a restarted
            simulator or state estimator): the sample after it restarts the planner from the measured CoM at
            rest, standing at the measured feet until the next plan (unless a plan received during the
            outage walks now).
        prepare_ahead: Solve each tick's MPC on the sample before it (:meth:`MpcPlanner.prepare`, no CoM
            feedback assumed); the tick uses that solution when its sample confirms it (the feedback does
            not act, the plan did not change), else it solves as usual. Needs ``samples_per_tick >= 2``.
        sensor_topic: SensorState input.
        plan_topic: FootstepPlan input (transient local).
        reference_topic: ComReference output.
        reference_ahead_topic: ComReference output of each prepared tick, published when it is prepared
            (stamped with the tick's expected sample stamp), so that the ik can solve it ahead as well.
        com_path_topic: Predicted CoM (nav_msgs/Path) output.
        zmp_path_topic: Predicted ZMP (nav_msgs/Path) output.
        markers_topic: MarkerArray output.
        timing_topic: TickTiming output.
        frame_id: World frame of the outputs.
    """

    planner: PlannerParameters = dataclasses.field(default_factory=PlannerParameters)
    robot: RobotModel.Parameters = dataclasses.field(default_factory=RobotModel.Parameters)
    hardware_period: float = 0.01
    feedback_enabled: bool = True
    support_correction_enabled: bool = True
    support_shift_later_steps: bool = False
    support_measured_height: bool = False
    publish_preview_every: int = 5
    prepare_ahead: bool = True
    sensor_timeout: float = 0.25
    sensor_topic: str = "sensor_state"
    plan_topic: str = "walk/plan"
    reference_topic: str = "mpc/com_reference"
    reference_ahead_topic: str = "mpc/com_reference_ahead"
    com_path_topic: str = "mpc/com_path"
    zmp_path_topic: str = "mpc/zmp_path"
    markers_topic: str = "mpc/markers"
    timing_topic: str = "mpc/timing"
    frame_id: str = "world"

    def __post_init__(self) -> None:
        if not isinstance(self.planner, PlannerParameters):
            raise ParameterError("planner", self.planner, "a PlannerParameters")
        if not isinstance(self.robot, RobotModel.Parameters):
            raise ParameterError("robot", self.robot, "a RobotModel.Parameters")
        check_positive("hardware_period", self.hardware_period)
        check_positive("sensor_timeout", self.sensor_timeout)
        ratio = self.planner.control_period / self.hardware_period
        if round(ratio) < 1 or abs(ratio - round(ratio)) > 1e-6:
            raise ParameterError("hardware_period", self.hardware_period,
                                 f"a divisor of planner.control_period = {self.planner.control_period} s")
        for name in ("feedback_enabled", "support_correction_enabled", "support_shift_later_steps",
                     "support_measured_height", "prepare_ahead"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")
        check_int_range("publish_preview_every", self.publish_preview_every, 0)
        for name in _TOPICS:
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ParameterError(name, value, "a non-empty topic or frame name")

    @property
    def support_correction(self) -> SupportCorrectionParameters:
        """Parameters of the support-foot correction policy."""
        return SupportCorrectionParameters(enabled=self.support_correction_enabled,
                                           shift_later_steps=self.support_shift_later_steps,
                                           measured_height=self.support_measured_height)

    @property
    def samples_per_tick(self) -> int:
        """SensorState samples per control tick."""
        return round(self.planner.control_period / self.hardware_period)



class _Skip(Exception):
    """A sample that cannot be used (internal): logged, no tick."""



def time_msg(ns: int) -> Time:
    """builtin_interfaces Time of integer nanoseconds."""
    return Time(sec=ns // _NS, nanosec=ns % _NS)


def shifted_timeline(timeline: Timeline, t0: float, walking: bool = True) -> Timeline:
    """The same timeline starting at ``t0`` [s]; without ``walking``, its initial feet standing (no steps)."""
    first = timeline.phases[0]
    return Timeline(first.left, first.right, timeline.steps if walking else (), timeline.timing, t0)


class MpcPlannerNode(GraphNode):
    """Walking pattern generator of the walk_mpc graph: plan + SensorState -> CoM references every tick."""

    def __init__(self, params: Optional[MpcPlannerNodeParameters] = None, **kwargs) -> None:
        """Create the node.

        Args:
            params: Parameters; None reads them from the node's ROS parameters.
            **kwargs: ``Node`` keyword arguments (``parameter_overrides``, ``context``).

        Raises:
            ConfigError, ParameterError, ModelError: Invalid configuration (e.g. a robot without soles).
        """
        super().__init__(NODE_NAME, **node_options(), **kwargs)
        if params is None:
            params = DataclassParameters(self, MpcPlannerNodeParameters).read()
        self.params = params
        self.robot = RobotModel(params.robot)
        if not self.robot.is_biped:
            raise ParameterError("robot.robot", params.robot.robot, "a biped (left and right sole frames)")
        self.planner = MpcPlanner(params.planner)
        self.corrector = SupportCorrector(params.support_correction)
        self._frames = {Foot.LEFT: self.robot.left_foot_frame, Foot.RIGHT: self.robot.right_foot_frame}
        reference = self.robot.foot_poses(self.robot.reference_configuration())
        self._reference_feet = {foot: FootPose(tuple(reference[frame][0]), 0.0)
                                for foot, frame in self._frames.items()}
        period_ns = round(params.planner.control_period * _NS)
        self._hardware_ns = round(params.hardware_period * _NS)
        self._due_ns = period_ns - self._hardware_ns // 2
        self._times = [params.planner.control_period, 2.0 * params.planner.control_period]

        self._origin_ns: Optional[int] = None  # stamp of planner time 0
        self._last_sample_ns: Optional[int] = None
        self._timeout_ns = int(round(params.sensor_timeout * _NS))
        self._resume_gap_ns = 0  # stamp gap of an outage the next tick restarts after [ns] (0: none)
        self._last_tick_ns: Optional[int] = None
        self._pending: Optional[PlanMessage] = None  # received, installed at the next tick
        self._plan_id = 0  # installed plan (0: none)
        self._stance: Optional[tuple] = None
        self.ticks = 0
        self.skipped_samples = 0
        self._unlogged = 0  # skipped samples not logged (throttled) since the last warning
        self.corrections = 0
        self.prepared_ticks = 0  # ticks that used the solve prepared on the sample before
        self.last_output: Optional[PlannerOutput] = None
        self._preview: Optional[tuple] = None  # (stamp, output, timeline) waiting for the preview timer
        self._paths: dict = {}  # publisher -> reused Path message (same number of poses every tick)
        self._footsteps: Optional[tuple] = None  # (timeline, footstep markers) reused while the timeline is

        p = params
        qos, plan_qos = reliable_qos(), LATCHED_QOS
        self._reference_pub = self.create_publisher(ComReference, p.reference_topic, qos)
        self._reference_ahead_pub = (self.create_publisher(ComReference, p.reference_ahead_topic, qos)
                                     if p.prepare_ahead else None)
        self._ahead: Optional[tuple] = None  # (prepared output, its ComReference message)
        self._timing_pub = self.create_publisher(TickTiming, p.timing_topic, qos)
        self._com_path_pub = self.create_publisher(Path, p.com_path_topic, qos)
        self._zmp_path_pub = self.create_publisher(Path, p.zmp_path_topic, qos)
        self._markers_pub = self.create_publisher(MarkerArray, p.markers_topic, qos)
        self.create_subscription(FootstepPlan, p.plan_topic, self._on_plan, plan_qos)
        self._sensor_sub = self.create_subscription(SensorState, p.sensor_topic, self._on_sensor_state,
                                                    stream_input_qos())
        # Previews are published by this one-shot timer after the tick, not on the reference's critical path.
        self._preview_timer = self.create_timer(PREVIEW_DELAY, self._on_preview_timer)
        self._preview_timer.cancel()
        mpc = p.planner.mpc
        self.get_logger().info(
            f"MPC planner of '{self.robot.name}': control period {p.planner.control_period} s (every "
            f"{p.samples_per_tick} samples of {p.hardware_period} s), horizon {mpc.horizon} x "
            f"{mpc.sampling_period} s, backend {mpc.backend}, CoM feedback "
            f"{'on' if p.feedback_enabled else 'off'}, support correction "
            f"{'on' if p.support_correction_enabled else 'off'}, prepared ahead "
            f"{'on' if p.prepare_ahead and p.samples_per_tick > 1 else 'off'}; "
            f"waiting for '{p.sensor_topic}'")

    @property
    def plan_id(self) -> int:
        """Id of the plan the planner follows (0 before any plan)."""
        return self._plan_id

    # ------------------------------------------------------------------ inputs
    def _on_plan(self, msg: FootstepPlan) -> None:
        try:
            self._pending = PlanMessage.from_msg(msg)
        except WalkMpcError as exc:
            self.get_logger().error(f"plan {msg.plan_id} rejected, keeping the previous one: {exc}")
            return
        timeline = self._pending.timeline
        self.get_logger().info(f"plan {msg.plan_id}: {'walk' if msg.walking else 'stand'}, "
                               f"{len(msg.steps)} steps, t_end {timeline.t_end:.3f} s")

    def _on_sensor_state(self, msg: SensorState) -> None:
        start = time.perf_counter()
        now = stamp_ns(msg.header.stamp)
        if self._last_sample_ns is not None and now <= self._last_sample_ns:
            self.get_logger().warning(
                f"SensorState stamp {now / _NS:.9f} s does not follow the previous one "
                f"{self._last_sample_ns / _NS:.9f} s: sample ignored", throttle_duration_sec=WARNING_PERIOD)
            return
        previous, self._last_sample_ns = self._last_sample_ns, now
        if previous is not None and now - previous > self._timeout_ns:
            self._last_tick_ns = None  # this sample ticks and restarts the planner (see _tick)
            self._resume_gap_ns = now - previous
        if self._last_tick_ns is not None and now - self._last_tick_ns < self._due_ns:
            if self.params.prepare_ahead and now + self._hardware_ns - self._last_tick_ns >= self._due_ns:
                self._prepare(now + self._hardware_ns)  # the next sample ticks
            return
        try:
            self._tick(msg, now, start)
        except _Skip as skip:
            self.skipped_samples += 1
            more = f" ({self._unlogged} more skipped since the previous warning)" if self._unlogged else ""
            if self.get_logger().warning(f"sample at {now / _NS:.3f} s skipped: {skip}{more}",
                                         throttle_duration_sec=WARNING_PERIOD):
                self._unlogged = 0
            else:
                self._unlogged += 1
        except Exception as exc:  # noqa: BLE001  (the planner refused its inputs, or a bug: report, live on)
            if is_shutdown(exc, self.context, grace=0.0):
                raise  # publishing after SIGINT shut the context down: the end, not a planner failure
            self.get_logger().error(f"planner tick at {now / _NS:.3f} s failed: {exc!r}",
                                    throttle_duration_sec=WARNING_PERIOD)
            self._last_tick_ns = now
            self._publish_timing(now, STATUS_PLANNER_ERROR, 0.0, start)

    # ------------------------------------------------------------------ tick
    def _tick(self, msg: SensorState, now: int, start: float) -> None:
        if self._origin_ns is None:
            self._origin_ns = now
        t = (now - self._origin_ns) / _NS
        new_plan = self._install_plan()
        measured = self._measure(msg, t)
        planner = self.planner
        gap, self._resume_gap_ns = self._resume_gap_ns, 0
        # After an outage the robot may be anywhere: restart from the measured CoM, standing at the measured
        # feet, unless a plan received during the outage walks now (the walk_behavior stops walks at an
        # outage and starts them on a live stream only: such a plan was made on the samples after it).
        stand = planner.timeline is None or gap and not (new_plan and planner.timeline.walking_at(t))
        if stand:  # no plan yet, or after an outage
            feet = [measured.sole(Foot.LEFT), measured.sole(Foot.RIGHT)]
            planner.set_timeline(self.corrector.set_plan(Timeline(feet[0], feet[1], (), t0=t)))
        if planner.plan is None or gap:
            planner.reset(measured.com_position[:2])
        if gap:
            self._ahead = None
            self.get_logger().warning(
                f"SensorState resumed after {gap / _NS:.3f} s without samples (sensor_timeout "
                f"{self.params.sensor_timeout} s): planner restarted from the measured CoM, "
                + ("standing at the measured feet" if stand else f"on the walk of plan {self._plan_id}"))
        self._correct_support(measured, t)
        self._stance = planner.timeline.phase_at(t).stance_feet
        out = planner.step(t, measured.com_position if self.params.feedback_enabled else None)
        self._last_tick_ns = now
        self.ticks += 1
        self.prepared_ticks += planner.last_step_prepared
        self.last_output = out
        self._publish_reference(msg, out)  # the critical message first, everything else after it
        status = _STATUS_OF_PLAN.get(out.status, STATUS_SOLVER_FAILED)
        self._publish_timing(now, status, out.plan.solve_time, start)
        if status != STATUS_OK:
            self.get_logger().warning(f"MPC {out.status.value} at t = {t:.3f} s: following the previous plan",
                                      throttle_duration_sec=WARNING_PERIOD)
        self._on_preview_timer()  # a preview still waiting (the timer did not fire before this tick)
        every = self.params.publish_preview_every
        if every and (self.ticks - 1) % every == 0:
            self._preview = (msg.header.stamp, out, planner.timeline)
            self._preview_timer.reset()

    def _prepare(self, tick_ns: int) -> None:
        """Solve the MPC of the tick expected at ``tick_ns`` now, while no tick is waiting (seed 001's
        threshold: below it the tick's sample does not change that solve). A new plan waiting for the
        tick would replace the timeline: nothing to prepare then."""
        if self._pending is not None or self.planner.timeline is None:
            return
        self._ahead = None
        try:
            if not self.planner.prepare((tick_ns - self._origin_ns) / _NS):
                return
        except Exception as exc:  # noqa: BLE001  (the tick meets the same problem and reports it)
            self.get_logger().warning(f"MPC not prepared for the tick at {tick_ns / _NS:.3f} s: {exc!r}",
                                      throttle_duration_sec=WARNING_PERIOD)
            return
        out = self.planner.prepared_output
        self._ahead = (out, self._reference_msg(time_msg(tick_ns), out))
        self._reference_ahead_pub.publish(self._ahead[1])

    def _install_plan(self) -> bool:
        """Install the plan received since the last tick, if any; whether one was installed."""
        pending, self._pending = self._pending, None
        if pending is None or pending.plan_id == self._plan_id:
            return False
        t0 = (pending.stamp_ns - self._origin_ns) / _NS
        plan = shifted_timeline(pending.timeline, t0, pending.walking)
        self.planner.set_timeline(self.corrector.set_plan(plan))
        self._plan_id = pending.plan_id
        return True

    def _measure(self, msg: SensorState, t: float) -> MeasuredState:
        """Measured state of the sample; raises _Skip on bad input."""
        try:
            base = sensor_base_pose(msg)
            anchor = None
            if base is None:
                anchor = self._anchor(t)
            # Positions only: the planner takes the measured CoM position (its velocity is not fed back).
            return estimate_state(self.robot, msg.joint_names, msg.joint_pos, base, anchor)
        except WalkMpcError as exc:
            raise _Skip(str(exc)) from None

    def _anchor(self, t: float) -> tuple[str, FootPose]:
        """Stance sole at its planned pose (the one that was already in stance), for samples without base."""
        timeline = self.planner.timeline
        if timeline is None:
            return self._frames[Foot.LEFT], self._reference_feet[Foot.LEFT]
        foot = anchor_foot(timeline, t, self._stance)
        return self._frames[foot], timeline.phase_at(t).foot(foot)

    def _correct_support(self, measured: MeasuredState, t: float) -> None:
        """The shared support-foot correction policy on this tick's measured state."""
        try:
            correction = self.corrector.observe(t, measured.sole)
        except WalkMpcError as exc:
            self.get_logger().warning(f"support correction skipped at t = {t:.3f} s: {exc}",
                                      throttle_duration_sec=WARNING_PERIOD)
            return
        if correction is None or not correction.applied:
            return
        self.planner.set_timeline(self.corrector.timeline)
        self.corrections += 1
        self.get_logger().debug(f"lift-off at t = {t:.3f} s: the {correction.foot.name.lower()} sole of step "
                                f"{correction.step_index} measured {1e3 * correction.position_error:.2f} mm "
                                "from its plan")

    # ------------------------------------------------------------------ outputs
    def _publish_reference(self, msg: SensorState, out: PlannerOutput) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] is out:  # the prepared solve, announced: the same message
            self._reference_pub.publish(ahead[1])
            return
        self._reference_pub.publish(self._reference_msg(msg.header.stamp, out))

    def _reference_msg(self, stamp: Time, out: PlannerOutput) -> ComReference:
        reference = ComReference(plan_id=self._plan_id, time_from_stamp=list(self._times),
                                 com_position=[point(c) for c in out.com_targets],
                                 com_velocity=[vector3(v) for v in out.com_velocity_targets],
                                 zmp=[point(z) for z in out.zmp_targets])
        reference.header.stamp = stamp
        reference.header.frame_id = self.params.frame_id
        return reference

    def _publish_timing(self, now: int, status: int, solve_time: float, start: float) -> None:
        timing = TickTiming(component="mpc", solve_time=float(solve_time), status=int(status),
                            trigger=self._sensor_sub.topic_name)
        timing.header.stamp = time_msg(now)
        timing.header.frame_id = self.params.frame_id
        timing.tick_time = time.perf_counter() - start
        self._timing_pub.publish(timing)

    def _on_preview_timer(self) -> None:
        self._preview_timer.cancel()
        preview, self._preview = self._preview, None
        if preview is not None:
            self._publish_preview(*preview)

    def _path(self, publisher, size: int) -> Path:
        """The reused Path message of ``publisher`` with ``size`` poses (rebuilt when the size changes)."""
        path = self._paths.get(publisher)
        if path is None or len(path.poses) != size:
            frame = self.params.frame_id
            path = Path()
            path.header.frame_id = frame
            for _ in range(size):
                pose = PoseStamped()
                pose.header.frame_id = frame
                pose.pose.orientation.w = 1.0
                path.poses.append(pose)
            self._paths[publisher] = path
        return path

    def _publish_preview(self, header_stamp, out: PlannerOutput, timeline: Timeline) -> None:
        now = stamp_ns(header_stamp)
        ground = float(out.zmp_targets[0, 2])
        com_z = float(out.com_targets[0, 2])
        s0 = out.initial_state
        zeta = self.planner.model.zeta
        times = np.concatenate([[out.t], out.preview_times])
        coms = np.vstack([s0[0], out.preview_com])
        zmps = np.vstack([s0[0] - zeta * s0[2], out.preview_zmp])
        stamps = [divmod(now + round((tk - out.t) * _NS), _NS) for tk in times.tolist()]
        for publisher, points, z in ((self._com_path_pub, coms, com_z), (self._zmp_path_pub, zmps, ground)):
            path = self._path(publisher, len(stamps))
            path.header.stamp = header_stamp
            for pose, (sec, nanosec), (x, y) in zip(path.poses, stamps, points.tolist()):
                pose.header.stamp.sec, pose.header.stamp.nanosec = sec, nanosec
                position = pose.pose.position
                position.x, position.y, position.z = x, y, z
            publisher.publish(path)
        self._markers_pub.publish(self._markers(header_stamp, out, timeline))

    def _markers(self, stamp, out: PlannerOutput, timeline: Timeline) -> MarkerArray:
        frame = self.params.frame_id
        sole = self.params.planner.sole
        markers = [Marker(action=Marker.DELETEALL)]

        def marker(ns: int, kind: int, color: tuple, index: int = 0) -> Marker:
            m = Marker(ns=ns, id=index, type=kind, action=Marker.ADD)
            m.header.stamp = stamp
            m.header.frame_id = frame
            m.color = ColorRGBA(r=color[0], g=color[1], b=color[2], a=color[3])
            m.pose.orientation.w = 1.0
            return m

        if self._footsteps is None or self._footsteps[0] is not timeline:  # built once per timeline
            first = timeline.phases[0]
            soles = [(Foot.LEFT, first.left), (Foot.RIGHT, first.right)]
            soles += [(s.foot, FootPose(s.position, s.yaw)) for s in timeline.steps]
            footsteps = []
            for index, (foot, pose) in enumerate(soles):
                color = (0.2, 0.4, 1.0, 0.5) if foot is Foot.LEFT else (1.0, 0.3, 0.2, 0.5)
                m = marker("footsteps", Marker.CUBE, color, index)
                cx, cy = sole.centre(pose)
                m.pose = Pose(position=Point(x=float(cx), y=float(cy), z=pose.position[2] + 0.0025),
                              orientation=yaw_quaternion(pose.yaw))
                m.scale.x, m.scale.y, m.scale.z = sole.front + sole.back, sole.left + sole.right, 0.005
                footsteps.append(m)
            self._footsteps = (timeline, footsteps)
        for m in self._footsteps[1]:
            m.header.stamp = stamp
            markers.append(m)
        ground = float(out.zmp_targets[0, 2])
        support = marker("support", Marker.LINE_STRIP, (0.1, 0.8, 0.1, 1.0))
        corners = out.preview.corners()[0]
        support.points = [Point(x=float(x), y=float(y), z=ground + 0.006) for x, y in [*corners, corners[0]]]
        support.scale.x = 0.005
        markers.append(support)
        for ns, position, size, color in (("com", out.com_targets[0], 0.05, (1.0, 0.6, 0.0, 1.0)),
                                          ("zmp", out.zmp_targets[0], 0.03, (0.6, 0.1, 0.8, 1.0))):
            m = marker(ns, Marker.SPHERE, color)
            m.pose.position = point(position)
            m.scale.x = m.scale.y = m.scale.z = size
            markers.append(m)
        return MarkerArray(markers=markers)


NODE_CLASS = MpcPlannerNode


def main(args: Optional[Sequence[str]] = None) -> int:
    """Run the mpc_planner node until shutdown; exit code 2 on a configuration error."""
    return run(lambda: MpcPlannerNode(), args)


if __name__ == "__main__":
    sys.exit(main())
