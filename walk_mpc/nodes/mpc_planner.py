"""ROS 2 node ``mpc_planner``: the LIPM walking MPC over the footstep plan, ticked by SensorState stamps.

An adapter of :class:`~walk_mpc.core.control.planner_stage.PlannerStage`, which makes every decision (its
module docstring has them in full). Topics (relative names, QoS reliable depth 10 unless said; defaults of
:class:`MpcPlannerNodeParameters`):

* subscribes ``walk/plan`` (``FootstepPlan``, reliable + transient local, depth 1): a new ``plan_id``
  replaces the planner's timeline at the next tick (the planned CoM state is kept: continuous references).
  ``header.stamp`` is t = 0 of the plan's timeline. With ``walking`` false only the plan's feet are used
  (standing). An invalid plan is logged and the previous one kept.
* subscribes ``sensor_state`` (``SensorState``, best effort: see ``_common.stream_input_qos``): the time
  base. A sample is a control tick when it is the first one or its stamp is at least ``control_period -
  hardware_period / 2`` after the previous tick (every ``control_period / hardware_period``-th sample,
  seed 001). Stamps not after the last accepted one or ahead of the steady clock (a rogue 2147483647 s) are
  skipped; a few consistent ones in a row are a new time base, restarted from as after an outage. A tick
  installs a new plan (before any plan: standing at the measured feet; after an outage, stamps more than
  ``sensor_timeout`` apart: restarted from the measured CoM at rest, standing at the measured feet unless
  a plan received during the outage walks now), estimates the measured CoM and soles (base estimate, else a
  stance sole at its planned pose), corrects the support foot at lift-offs as the ik node does
  (``support_*`` parameters) and steps the MPC at ``t = stamp - origin`` (origin: the first sample's
  stamp) with the measured CoM when ``feedback_enabled``. With ``prepare_ahead`` the sample before a tick
  solves it and publishes it on ``mpc/com_reference_ahead`` (stamped with the tick's expected stamp); the
  tick uses that solve when its sample confirms it (no feedback, plan or correction change).
* publishes, each tick, ``mpc/com_reference`` (``ComReference``: ``header.stamp`` = the sample's stamp,
  ``plan_id`` (0 before any plan), ``time_from_stamp`` = [T, 2T], CoM position and velocity, ZMP; the very
  message announced ahead when the tick used that solve) and ``mpc/timing`` (``TickTiming``, component
  ``"mpc"``: ``solve_time``, ``tick_time`` of the callback, ``status``: STATUS_* below, ``reason``: why
  it is not OK); every
  ``publish_preview_every`` ticks, ``PREVIEW_DELAY`` of wall time later (off the reference's critical path),
  ``mpc/com_path`` and ``mpc/zmp_path`` (``nav_msgs/Path`` of the predicted CoM and ZMP) and
  ``mpc/markers`` (footsteps, support region, CoM and ZMP targets: :mod:`walk_mpc.nodes.planner_visuals`),
  each only while something subscribes to it (rviz, a recorder): nothing is built for nobody.

Bad input never stops the node: a sample with NaN/inf values, missing joints, arrays whose lengths do not
match their names or a malformed base pose is logged (throttled) and skipped (the next good sample ticks);
the timing status reports planner failures, on which the walk behavior aborts the walk with PLANNER_FAILURE.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Optional, Sequence

from nav_msgs.msg import Path
from visualization_msgs.msg import MarkerArray

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.control.planner_stage import PlannerStage, PlannerStageParameters, PlannerTick
from walk_mpc.core.control.stamps import StampGuardParameters
from walk_mpc.core.control.types import CoMReference, PlannerStatus
from walk_mpc.core.errors import ParameterError, WalkMpcError
from walk_mpc.core.mpc.planner import PlannerOutput, PlannerParameters
from walk_mpc.core.mpc.support_correction import SupportCorrectionParameters
from walk_mpc.core.params import check_int_range
from walk_mpc.core.walk.timeline import Timeline
from walk_mpc.msg import ComReference, FootstepPlan, SensorState, TickTiming
from walk_mpc.nodes._common import (
    LATCHED_QOS,
    DataclassParameters,
    GraphNode,
    RosLog,
    is_shutdown,
    node_options,
    reliable_qos,
    run,
    stream_input_qos,
)
from walk_mpc.nodes.conversions import (
    plan_from_msg,
    stamp_ns,
    time_msg,
)
from walk_mpc.nodes.planner_visuals import PlannerVisuals
from walk_mpc.nodes.sensor_cdr import SensorStateReader, com_reference_cdr, sensor_input

NODE_NAME = "mpc_planner"

#: ``TickTiming.status`` values of ``mpc/timing`` (non-zero: the walk behavior aborts with PLANNER_FAILURE).
STATUS_OK = PlannerStatus.OK
STATUS_INFEASIBLE = PlannerStatus.INFEASIBLE  # no ZMP inside the support regions: previous plan followed
STATUS_SOLVER_FAILED = PlannerStatus.SOLVER_FAILED  # the QP solver failed: previous plan followed
STATUS_PLANNER_ERROR = PlannerStatus.PLANNER_ERROR  # the planner refused its inputs: no reference this tick
STATUS_REFERENCE_OUT_OF_REACH = PlannerStatus.REFERENCE_OUT_OF_REACH  # CoM target too far from the feet

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
        sensor_timeout: Two consecutive SensorState stamps further apart [s] are an outage: the sample after
            it restarts the planner from the measured state (see :class:`PlannerStageParameters`).
        prepare_ahead: Solve each tick's MPC on the sample before it and announce its reference (needs
            ``control_period / hardware_period >= 2``; see :class:`PlannerStageParameters`).
        max_com_distance: A reference whose CoM or ZMP is farther than this [m] horizontally from the nearest
            stance sole is not published (status REFERENCE_OUT_OF_REACH; see :class:`PlannerStageParameters`).
        resync_distance: Measured CoM farther than this [m] from the planned one for ``resync_time``: the
            planner restarts from the measured CoM (the robot does not follow its references).
        resync_time: How long [s] the CoM error must stay above ``resync_distance`` before a re-sync.
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
        stamps: The SensorState stamp guard (rogue stamps rejected, a new time base re-anchored on).
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
    max_com_distance: float = 0.5
    resync_distance: float = 0.1
    resync_time: float = 0.2
    sensor_topic: str = "sensor_state"
    plan_topic: str = "walk/plan"
    reference_topic: str = "mpc/com_reference"
    reference_ahead_topic: str = "mpc/com_reference_ahead"
    com_path_topic: str = "mpc/com_path"
    zmp_path_topic: str = "mpc/zmp_path"
    markers_topic: str = "mpc/markers"
    timing_topic: str = "mpc/timing"
    frame_id: str = "world"
    stamps: StampGuardParameters = dataclasses.field(default_factory=StampGuardParameters)

    def __post_init__(self) -> None:
        if not isinstance(self.robot, RobotModel.Parameters):
            raise ParameterError("robot", self.robot, "a RobotModel.Parameters")
        for name in ("support_correction_enabled", "support_shift_later_steps", "support_measured_height"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")
        self.stage  # noqa: B018  (validates planner, hardware_period, sensor_timeout, feedback, prepare_ahead)
        check_int_range("publish_preview_every", self.publish_preview_every, 0)
        for name in _TOPICS:
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ParameterError(name, value, "a non-empty topic or frame name")

    @property
    def stage(self) -> PlannerStageParameters:
        """Parameters of the node's :class:`PlannerStage`."""
        support = SupportCorrectionParameters(enabled=self.support_correction_enabled,
                                              shift_later_steps=self.support_shift_later_steps,
                                              measured_height=self.support_measured_height)
        return PlannerStageParameters(planner=self.planner, hardware_period=self.hardware_period,
                                      feedback_enabled=self.feedback_enabled, support_correction=support,
                                      prepare_ahead=self.prepare_ahead, sensor_timeout=self.sensor_timeout,
                                      max_com_distance=self.max_com_distance,
                                      resync_distance=self.resync_distance, resync_time=self.resync_time,
                                      stamps=self.stamps)


class MpcPlannerNode(GraphNode):
    """Walking pattern generator of the walk_mpc graph: plan + SensorState -> CoM references every tick."""

    def __init__(self, params: Optional[MpcPlannerNodeParameters] = None, **kwargs) -> None:
        """Create the node from ``params`` (None: its ROS parameters); ``kwargs``: ``Node`` keyword arguments
        (``parameter_overrides``, ``context``). Raises ConfigError, ParameterError, ModelError on an invalid
        configuration (e.g. a robot without soles)."""
        super().__init__(NODE_NAME, **node_options(), **kwargs)
        if params is None:
            params = DataclassParameters(self, MpcPlannerNodeParameters).read()
        self.params = p = params
        # The endpoints first: DDS discovers them (up to 1 s after a restart: Fast DDS's endpoint discovery
        # heartbeat) while the robot model and the MPC backend load; nothing runs before the node spins.
        qos = reliable_qos()
        self._reference_pub = self.create_publisher(ComReference, p.reference_topic, qos)
        self._reference_ahead_pub = (self.create_publisher(ComReference, p.reference_ahead_topic, qos)
                                     if p.prepare_ahead else None)
        self._timing_pub = self.create_publisher(TickTiming, p.timing_topic, qos)
        self._com_path_pub = self.create_publisher(Path, p.com_path_topic, qos)
        self._zmp_path_pub = self.create_publisher(Path, p.zmp_path_topic, qos)
        self._markers_pub = self.create_publisher(MarkerArray, p.markers_topic, qos)
        self.create_subscription(FootstepPlan, p.plan_topic, self._on_plan, LATCHED_QOS)
        self._sensor_reader = SensorStateReader()
        self._sensor_sub = self.create_subscription(SensorState, p.sensor_topic, self._on_sensor_state,
                                                    stream_input_qos(), raw=True)
        # Previews are published by this one-shot timer after the tick, not on the reference's critical path.
        self._preview_timer = self.create_timer(PREVIEW_DELAY, self._on_preview_timer)
        self._preview_timer.cancel()
        self.robot = RobotModel(params.robot)
        if not self.robot.is_biped:
            raise ParameterError("robot.robot", params.robot.robot, "a biped (left and right sole frames)")
        self._log = RosLog(self.get_logger(), period=WARNING_PERIOD)
        self.stage = PlannerStage(self.robot, params.stage, self._log)
        self._malformed = 0  # samples whose message could not be converted
        self._ahead: Optional[tuple[CoMReference, ComReference]] = None  # announced: reference, message
        self._preview: Optional[tuple] = None  # (stamp, output, timeline) waiting for the preview timer
        self._visuals = PlannerVisuals(p.frame_id, p.planner.sole, self.stage.planner.model.zeta)
        mpc, samples = p.planner.mpc, p.stage.samples_per_tick
        self.get_logger().info(
            f"MPC planner of '{self.robot.name}': control period {p.planner.control_period} s (every "
            f"{samples} samples of {p.hardware_period} s), horizon {mpc.horizon} x {mpc.sampling_period} s, "
            f"backend {mpc.backend}, CoM feedback {'on' if p.feedback_enabled else 'off'}, support "
            f"correction {'on' if p.support_correction_enabled else 'off'}, prepared ahead "
            f"{'on' if p.prepare_ahead and samples > 1 else 'off'}; waiting for '{p.sensor_topic}'")

    # ------------------------------------------------------------------ the stage's state (read-only)
    planner = property(lambda self: self.stage.planner, doc="The stage's MPC planner.")
    corrector = property(lambda self: self.stage.corrector, doc="The stage's support-foot correction.")
    plan_id = property(lambda self: self.stage.plan_id, doc="Id of the plan followed (0 before any plan).")
    ticks = property(lambda self: self.stage.ticks, doc="Ticks that published a reference.")
    corrections = property(lambda self: self.stage.corrections, doc="Support-foot corrections applied.")
    prepared_ticks = property(lambda self: self.stage.prepared_ticks,
                              doc="Ticks that used the solve prepared on the sample before.")
    last_output = property(lambda self: self.stage.last_output, doc="The planner output of the last tick.")
    skipped_samples = property(lambda self: self.stage.skipped_samples + self._malformed,
                               doc="Samples not used (malformed, invalid, or an implausible stamp).")

    def _steady_ns(self) -> Optional[int]:
        """The steady clock [ns] the stage checks the sample stamps against (tests may override it)."""
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
            self._malformed += 1
            when = f"at {stamp_ns(msg.header.stamp) / _NS:.3f} s " if isinstance(msg, SensorState) else ""
            self._log.warning(f"sample {when}skipped: {exc}")
            return
        tick = self.stage.observe(now, sample, self._steady_ns())
        try:
            self._publish(now, tick, start)
        except Exception as exc:  # noqa: BLE001  (report, live on)
            if is_shutdown(exc, self.context, grace=0.0):
                raise  # publishing after SIGINT shut the context down: the end, not a planner failure
            self.get_logger().error(f"publishing the tick at {now / _NS:.3f} s failed: {exc!r}",
                                    throttle_duration_sec=WARNING_PERIOD)

    # ------------------------------------------------------------------ outputs
    def _publish(self, now: int, tick: PlannerTick, start: float) -> None:
        if tick.ahead is not None:
            self._ahead = (tick.ahead, self._reference_msg(max(0, tick.ahead.stamp_ns), tick.ahead))
            self._reference_ahead_pub.publish(self._ahead[1])
        if tick.status is None:
            return
        out = tick.output
        if tick.reference is not None:  # the critical message first, everything else after it
            ahead, self._ahead = self._ahead, None
            self._reference_pub.publish(ahead[1] if ahead is not None and ahead[0] is tick.reference
                                        else self._reference_msg(now, tick.reference))
        self._publish_timing(now, int(tick.status), 0.0 if out is None else out.plan.solve_time, start,
                             tick.reason)
        if out is None:
            return
        self._on_preview_timer()  # a preview still waiting (the timer did not fire before this tick)
        every = self.params.publish_preview_every
        if every and (self.stage.ticks - 1) % every == 0 and self._preview_wanted():
            self._preview = (time_msg(now), out, self.stage.timeline)
            self._preview_timer.reset()

    def _reference_msg(self, stamp_ns: int, reference: CoMReference) -> bytes:
        """The serialized ComReference of ``reference`` stamped ``stamp_ns`` (>= 0): no message objects
        (:func:`~walk_mpc.nodes.sensor_cdr.com_reference_cdr`)."""
        return com_reference_cdr(stamp_ns, self.params.frame_id, reference.plan_id, reference.times,
                                 reference.com_position, reference.com_velocity, reference.zmp,
                                 reference.sole_tilt)

    def _publish_timing(self, now: int, status: int, solve_time: float, start: float,
                        reason: str = "") -> None:
        timing = TickTiming(component="mpc", solve_time=float(solve_time), status=int(status),
                            trigger=self._sensor_sub.topic_name, reason=reason)
        timing.header.stamp = time_msg(now)
        timing.header.frame_id = self.params.frame_id
        timing.tick_time = time.perf_counter() - start
        self._timing_pub.publish(timing)

    def _on_preview_timer(self) -> None:
        self._preview_timer.cancel()
        preview, self._preview = self._preview, None
        if preview is not None:
            self._publish_preview(*preview)

    def _preview_wanted(self) -> bool:
        """Whether anything subscribes to the preview (paths, markers): nothing is built for nobody."""
        return any(pub.get_subscription_count() for pub in (self._com_path_pub, self._zmp_path_pub,
                                                           self._markers_pub))

    def _publish_preview(self, header_stamp, out: PlannerOutput, timeline: Timeline) -> None:
        if self._com_path_pub.get_subscription_count() or self._zmp_path_pub.get_subscription_count():
            com, zmp = self._visuals.paths(header_stamp, out)
            self._com_path_pub.publish(com)
            self._zmp_path_pub.publish(zmp)
        if self._markers_pub.get_subscription_count():
            self._markers_pub.publish(self._visuals.markers(header_stamp, out, timeline))


NODE_CLASS = MpcPlannerNode


def main(args: Optional[Sequence[str]] = None) -> int:
    """Run the mpc_planner node until shutdown; exit code 2 on a configuration error."""
    return run(lambda: MpcPlannerNode(), args)


if __name__ == "__main__":
    sys.exit(main())
