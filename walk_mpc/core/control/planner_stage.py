"""The planner stage of the control loop: sensor samples and footstep plans in, a CoM reference per tick out.

:class:`PlannerStage` makes every decision of the ``mpc_planner`` node on the sensor stream (the node only
converts messages and publishes); the in-process loop composes the same stage. For each sample,
:meth:`PlannerStage.observe`:

1. validates the sample completely (shapes, finite values and base pose: :func:`check_sample`; every joint
   of the model named) and its stamp (:class:`StampGuard`: strictly later than the last accepted stamp, not
   ahead of the steady clock's progress). A rejected sample changes nothing and the next good one is
   handled as if it had never come. :attr:`StampVerdict.REANCHORED` (a new time base, e.g. a simulator
   whose clock began again) restarts the planner from that sample, as after an outage;
2. decides whether the sample is a control tick: the first sample, the first after an outage (stamps more
   than ``sensor_timeout`` apart) or a re-anchor, and every sample whose stamp is at least
   ``control_period - hardware_period / 2`` after the previous tick: every
   ``round(control_period / hardware_period)``-th sample of a regular stream (seed 001: the NAO DCM
   callback wakes the control thread every 2nd 10 ms cycle);
3. on the sample before a tick, with ``prepare_ahead``: solves the tick's MPC now
   (:meth:`MpcPlanner.prepare`, no CoM feedback assumed) and announces its reference
   (:attr:`PlannerTick.ahead`, stamped with the tick's expected stamp). No plan may be waiting;
4. on a tick:

   * installs the plan received since the last tick (:meth:`set_plan`; a new ``plan_id`` only), its
     timeline shifted to the planner's clock (``t = (stamp - origin) / 1e9``, origin: the first tick's
     stamp, or the re-anchoring one); a plan with ``walking`` false only places the feet (standing; a
     foot farther than ``resync_distance`` from its measured sole, while that sole is on the plan's ground,
     stands at the measured sole: after a fault the walk behavior's Stand at the planned feet may not be
     where the robot stands). Before any plan: a standing timeline at the measured feet. After an outage
     or a re-anchor (the robot possibly elsewhere), the planner restarts from the measured CoM at rest,
     standing at the measured feet until the next plan, unless a plan received during the outage walks
     now;
   * estimates the measured state (:func:`estimate_state`, positions only: CoM and soles): joints + base
     estimate when the sample has one, else (what a real robot measures) the base oriented by the IMU
     (:func:`estimate_state_from_imu`; a flat sole without IMU) and placed by a stance sole at its planned
     pose (the one already in stance at the previous tick: :func:`anchor_foot`);
   * applies the support-foot correction (:class:`SupportCorrector`, seed 001's second feedback); without
     a base estimate the new stance sole is measured from the other one, where it stood until this tick
     (:func:`correction_anchor`, as the whole-body stage does), and the state is estimated again on the
     corrected sole, so the estimate does not jump by the landing error when the stance foot changes;
   * re-syncs the planner on the robot when the robot does not follow its references (issue 17: a killed
     ik leaves the robot frozen while the plan walks on, and the planned CoM diverged to 1e32 m): when
     the measured CoM has stayed farther than ``resync_distance`` from the planned one for
     ``resync_time`` (at once when farther than ``max_com_distance``, when a new plan is installed, or
     after a reference out of reach), the planner restarts from the measured CoM at rest on the same
     timeline, as the outage restart does (logged once per plan, counted in :attr:`PlannerStage.resyncs`);
   * steps the MPC at ``t`` with the measured CoM when ``feedback_enabled`` (seed 001's first feedback).
     The step returns the prepared solve when the sample confirms it (feedback below its threshold, no new
     plan, no correction): then :attr:`PlannerTick.reference` is the announced object itself;
   * checks the reach of the result: a CoM or ZMP target farther than ``max_com_distance`` horizontally
     from the nearest stance sole of the tick's phase (or a non-finite velocity) is never given (nor
     announced ahead): the tick reports :attr:`PlannerStatus.REFERENCE_OUT_OF_REACH` without reference (the
     whole-body stage holds or stops safely) and the next tick re-syncs.

A planner that refuses its inputs (or fails unexpectedly) gives :attr:`PlannerStatus.PLANNER_ERROR` and no
reference: the tick is consumed, the stage goes on with the next one. Nothing raises out of
:meth:`~PlannerStage.observe` or :meth:`~PlannerStage.set_plan`: rejected inputs are returned and logged.
Stamps are integer nanoseconds; timeline times are seconds.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.body.state_estimation import (
    MeasuredState,
    correction_anchor,
    estimate_state,
    estimate_state_from_imu,
    sole_from_anchor,
)
from walk_mpc.core.body.targets import sole_tilts_at
from walk_mpc.core.control.stamps import StampGuard, StampGuardParameters, StampVerdict, plan_stamp_problem
from walk_mpc.core.control.types import (
    NO_PLAN,
    NS_PER_S,
    CoMReference,
    Log,
    PlannerStatus,
    WalkPlan,
    default_log,
)
from walk_mpc.core.errors import FrameNotFound, InputError, ParameterError, WalkMpcError
from walk_mpc.core.mpc.planner import MpcPlanner, PlannerOutput, PlannerParameters
from walk_mpc.core.mpc.problem import PlanStatus
from walk_mpc.core.mpc.support_correction import SupportCorrectionParameters, SupportCorrector, anchor_foot
from walk_mpc.core.params import check_nonnegative, check_positive
from walk_mpc.core.sensors import SensorSample, check_sample
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Timeline

#: Height difference [m] within which a measured sole is on the ground of a planned one.
GROUND_TOLERANCE = 0.01

_STATUS_OF_PLAN = {PlanStatus.SOLVED: PlannerStatus.OK, PlanStatus.INFEASIBLE: PlannerStatus.INFEASIBLE}


@dataclasses.dataclass(frozen=True)
class PlannerStageParameters:
    """Parameters of :class:`PlannerStage`.

    Attributes:
        planner: Walking pattern generator (MPC, soles, control period T [s], CoM feedback threshold and
            gain).
        hardware_period: Sensor sample period [s]; ``planner.control_period`` must be a multiple of it.
        feedback_enabled: Step the MPC with the measured CoM (seed 001's first feedback).
        support_correction: Support-foot correction policy (seed 001's second feedback).
        prepare_ahead: Solve each tick's MPC on the sample before it and announce its reference
            (needs ``samples_per_tick >= 2`` to act).
        sensor_timeout: Two consecutive accepted stamps further apart [s] are an outage: the sample after it
            restarts the planner from the measured state.
        stamps: Plausibility of the sample stamps (:class:`StampGuard`).
        max_com_distance: A reference whose CoM or ZMP targets are farther than this [m] horizontally from
            the nearest stance sole of the tick's phase is not given (REFERENCE_OUT_OF_REACH): the robot
            cannot follow it; the next tick restarts the planner from the measured CoM.
        resync_distance: When the measured CoM stays farther than this [m] horizontally from the planned
            one for ``resync_time`` (the robot does not follow the references: frozen, held, or stopped),
            the planner restarts from the measured CoM at rest on the same plan instead of integrating
            away from the robot; at once when a new plan is installed. A Stand plan's foot farther than this
            from its measured sole on the ground stands at the measured sole.
        resync_time: How long [s] the CoM error must stay above ``resync_distance`` before a re-sync.
    """

    planner: PlannerParameters = dataclasses.field(default_factory=PlannerParameters)
    hardware_period: float = 0.01
    feedback_enabled: bool = True
    support_correction: SupportCorrectionParameters = dataclasses.field(
        default_factory=SupportCorrectionParameters)
    prepare_ahead: bool = True
    sensor_timeout: float = 0.25
    stamps: StampGuardParameters = dataclasses.field(default_factory=StampGuardParameters)
    max_com_distance: float = 0.5
    resync_distance: float = 0.1
    resync_time: float = 0.2

    def __post_init__(self) -> None:
        for name, cls in (("planner", PlannerParameters), ("support_correction", SupportCorrectionParameters),
                          ("stamps", StampGuardParameters)):
            if not isinstance(getattr(self, name), cls):
                raise ParameterError(name, getattr(self, name), f"a {cls.__name__}")
        check_positive("hardware_period", self.hardware_period)
        check_positive("sensor_timeout", self.sensor_timeout)
        check_positive("max_com_distance", self.max_com_distance)
        check_positive("resync_distance", self.resync_distance)
        check_nonnegative("resync_time", self.resync_time)
        if self.resync_distance >= self.max_com_distance:
            raise ParameterError("resync_distance", self.resync_distance,
                                 f"less than max_com_distance = {self.max_com_distance} m")
        ratio = self.planner.control_period / self.hardware_period
        if round(ratio) < 1 or abs(ratio - round(ratio)) > 1e-6:
            raise ParameterError("hardware_period", self.hardware_period,
                                 f"a divisor of planner.control_period = {self.planner.control_period} s")
        for name in ("feedback_enabled", "prepare_ahead"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")

    @property
    def samples_per_tick(self) -> int:
        """Sensor samples per control tick."""
        return round(self.planner.control_period / self.hardware_period)


@dataclasses.dataclass(frozen=True)
class PlannerTick:
    """What one sample produced (:meth:`PlannerStage.observe`).

    Attributes:
        ahead: The reference of the next tick, solved ahead on this sample (``prepare_ahead``), stamped with
            the next tick's expected stamp; None when nothing was prepared.
        reference: The tick's reference, None without a tick, when the planner failed or when its targets
            were out of reach (REFERENCE_OUT_OF_REACH). When the tick used the solve announced ahead, this is
            the announced object itself (``reference is ahead`` of the sample before).
        status: The tick's status; None when the sample is not a tick (or was rejected).
        output: The planner's output of the tick (None when ``reference`` is None).
        rejected: Why the sample was not used ("" when it was).
        reason: Why the tick's status is not OK ("" when it is): what failed, in the stage's words.
    """

    ahead: Optional[CoMReference] = None
    reference: Optional[CoMReference] = None
    status: Optional[PlannerStatus] = None
    output: Optional[PlannerOutput] = None
    rejected: str = ""
    reason: str = ""

    @property
    def ticked(self) -> bool:
        """Whether the sample was a control tick."""
        return self.status is not None


_NOTHING = PlannerTick()


class PlannerStage:
    """The walking pattern generator of the loop, ticked by sensor samples (see the module docstring).

    Example:
        >>> stage = PlannerStage(robot, PlannerStage.Parameters())
        >>> stage.set_plan(plan)                              # a WalkPlan, installed at the next tick
        >>> tick = stage.observe(stamp_ns, sample, steady_ns)  # every sensor sample
        >>> if tick.reference is not None:
        ...     send(tick.reference)

    Args:
        robot: Robot model of the measured state (a biped).
        params: Parameters (default: ``PlannerStage.Parameters()``).
        log: Where decisions are reported (default: the ``walk_mpc.planner`` logger).

    Raises:
        ParameterError: ``params`` is not a :class:`PlannerStageParameters`, or the robot is not a biped.
    """

    Parameters = PlannerStageParameters

    def __init__(self, robot: RobotModel, params: Optional[PlannerStageParameters] = None,
                 log: Optional[Log] = None) -> None:
        self.params = params if params is not None else PlannerStageParameters()
        if not isinstance(self.params, PlannerStageParameters):
            raise ParameterError("params", self.params, "a PlannerStageParameters")
        if not isinstance(robot, RobotModel) or not robot.is_biped:
            raise ParameterError("robot", getattr(robot, "name", robot),
                                 "a biped (left and right sole frames)")
        self.robot = robot
        self._log = log if log is not None else default_log("planner")
        p = self.params
        self._frames = {Foot.LEFT: robot.left_foot_frame, Foot.RIGHT: robot.right_foot_frame}
        reference = robot.foot_poses(robot.reference_configuration())
        self._reference_feet = {foot: FootPose(tuple(reference[frame][0]), 0.0)
                                for foot, frame in self._frames.items()}
        self._hardware_ns = round(p.hardware_period * NS_PER_S)
        self._due_ns = round(p.planner.control_period * NS_PER_S) - self._hardware_ns // 2
        self._timeout_ns = int(round(p.sensor_timeout * NS_PER_S))
        self._times = (p.planner.control_period, 2.0 * p.planner.control_period)
        self._missing: dict[tuple, list] = {}  # joint names of a sample -> model joints it lacks
        self._frames_known: dict[str, bool] = {}  # IMU frame name -> whether the model has it
        self.reset()

    def reset(self) -> None:
        """Forget everything (time base, plans, planner state, counters): as constructed."""
        self._planner = MpcPlanner(self.params.planner)
        self._corrector = SupportCorrector(self.params.support_correction)
        self._guard = StampGuard(self.params.stamps)
        self._origin_ns: Optional[int] = None  # stamp of planner time 0
        self._last_tick_ns: Optional[int] = None
        self._restart = ""  # why the next tick restarts the planner ("" : it does not)
        self._pending: Optional[WalkPlan] = None  # received, installed at the next tick
        self._level_of: tuple = (None, True)  # (timeline, whether all its soles are on level ground)
        self._plan_id = NO_PLAN  # installed plan
        self._stance: Optional[tuple] = None  # stance feet of the last tick
        self._anchor_foot: Optional[Foot] = None  # the sole that placed the base of the last estimate
        self._ahead: Optional[tuple[PlannerOutput, CoMReference]] = None  # the announced solve
        self._stamp_rejections = 0  # consecutive samples rejected by the stamp guard
        self._ticks = self._prepared_ticks = self._corrections = self._skipped = 0
        self._last_output: Optional[PlannerOutput] = None
        self._last_measured: Optional[MeasuredState] = None
        self._resync = ""  # why the next tick re-syncs the planner on the measured CoM ("": it does not)
        self._far_since: Optional[float] = None  # planner time since which the robot does not follow [s]
        self._resyncs = 0
        self._resync_logged = False  # a series of re-syncs is logged once (again after a plan or restart)
        self._out_of_reach_ticks = 0  # consecutive ticks whose reference was out of reach

    # ------------------------------------------------------------------ read-only state
    @property
    def planner(self) -> MpcPlanner:
        """The MPC planner (its timeline is the corrected plan on the planner's clock)."""
        return self._planner

    @property
    def corrector(self) -> SupportCorrector:
        """The support-foot correction policy."""
        return self._corrector

    @property
    def timeline(self) -> Optional[Timeline]:
        """The planner's timeline (None before the first tick)."""
        return self._planner.timeline

    @property
    def plan_id(self) -> int:
        """Id of the installed plan (0 before any plan)."""
        return self._plan_id

    @property
    def origin_ns(self) -> Optional[int]:
        """Stamp [ns] of the planner's time 0 (None before the first tick)."""
        return self._origin_ns

    @property
    def ticks(self) -> int:
        """Ticks that produced a reference."""
        return self._ticks

    @property
    def prepared_ticks(self) -> int:
        """Ticks that used the solve prepared on the sample before."""
        return self._prepared_ticks

    @property
    def corrections(self) -> int:
        """Support-foot corrections applied."""
        return self._corrections

    @property
    def skipped_samples(self) -> int:
        """Samples rejected (invalid, or a stamp the guard refused)."""
        return self._skipped

    @property
    def last_output(self) -> Optional[PlannerOutput]:
        """The planner's output of the last tick that produced a reference."""
        return self._last_output

    @property
    def last_measured(self) -> Optional[MeasuredState]:
        """The measured state of the last tick (after its support correction), None before any."""
        return self._last_measured

    @property
    def resyncs(self) -> int:
        """Re-syncs of the planner on the measured CoM (references not followed, or out of reach)."""
        return self._resyncs

    # ------------------------------------------------------------------ inputs
    def set_plan(self, plan: WalkPlan) -> bool:
        """Follow ``plan`` from the next tick on (a plan with the installed ``plan_id`` changes nothing).

        Returns:
            Whether the plan was accepted (else logged and the previous one kept).
        """
        if not isinstance(plan, WalkPlan):
            self._log.error(f"plan rejected, keeping the previous one: {type(plan).__name__} is not a "
                            "WalkPlan")
            return False
        problem = plan_stamp_problem(plan.stamp_ns, self._guard)
        if problem is not None:
            self._log.error(f"plan {plan.plan_id} rejected, keeping the previous one: {problem}")
            return False
        self._pending = plan
        self._log.info(f"plan {plan.plan_id}: {'walk' if plan.walking else 'stand'}, "
                       f"{len(plan.timeline.steps)} steps, t_end {plan.timeline.t_end:.3f} s")
        return True

    def observe(self, stamp_ns: int, sample: SensorSample, steady_ns: Optional[int] = None) -> PlannerTick:
        """Handle one sensor sample: reject it, prepare the next tick, or tick (module docstring).

        Args:
            stamp_ns: The sample's stamp [ns] (the loop's time base).
            sample: The sensor sample.
            steady_ns: The steady clock when the sample arrived [ns] (nodes: ``time.monotonic_ns()``), or None
                (in process: only the order of the stamps is checked).
        """
        try:
            self._validate(stamp_ns, sample, steady_ns)
        except WalkMpcError as exc:
            self._skipped += 1
            when = f"{stamp_ns / NS_PER_S:.3f} s" if isinstance(stamp_ns, int) else repr(stamp_ns)
            self._log.warning(f"sample at {when} skipped ({self._skipped} so far): {exc}")
            return PlannerTick(rejected=str(exc))
        previous = self._guard.last_stamp_ns
        verdict = self._guard.check(stamp_ns, steady_ns)
        if not verdict.accepted:
            return self._reject_stamp(stamp_ns, previous, verdict)
        if verdict is StampVerdict.REANCHORED:
            self._restart = (f"SensorState stamps re-anchored at {stamp_ns / NS_PER_S:.3f} s after "
                             f"{self._stamp_rejections} samples off the time base (a new time base)")
            self._origin_ns = self._last_tick_ns = None
        elif previous is not None and stamp_ns - previous > self._timeout_ns:
            self._restart = (f"SensorState resumed after {(stamp_ns - previous) / NS_PER_S:.3f} s without "
                             f"samples (sensor_timeout {self.params.sensor_timeout} s)")
            self._last_tick_ns = None
        elif self._stamp_rejections:
            self._log.info(f"SensorState stamps accepted again at {stamp_ns / NS_PER_S:.3f} s after "
                           f"{self._stamp_rejections} rejected")
        self._stamp_rejections = 0
        last = self._last_tick_ns
        if last is not None and stamp_ns - last < self._due_ns:
            if self.params.prepare_ahead and stamp_ns + self._hardware_ns - last >= self._due_ns:
                return PlannerTick(ahead=self._prepare(stamp_ns + self._hardware_ns))  # the next sample ticks
            return _NOTHING
        return self._tick(stamp_ns, sample)

    def _validate(self, stamp_ns: int, sample: SensorSample, steady_ns: Optional[int]) -> None:
        """Raise :class:`InputError` unless the sample can be used (nothing is changed)."""
        if not isinstance(stamp_ns, int) or isinstance(stamp_ns, bool):
            raise InputError("stamp_ns", stamp_ns, "integer nanoseconds")
        if steady_ns is not None and (not isinstance(steady_ns, int) or isinstance(steady_ns, bool)):
            raise InputError("steady_ns", steady_ns, "integer nanoseconds or None")
        check_sample(sample)
        n = len(sample.joint_names)
        if sample.joint_pos.shape != (n,):
            raise InputError("joint_pos", f"shape {sample.joint_pos.shape} for {n} joint names",
                             "one position per joint name")
        missing = self._missing.get(sample.joint_names)
        if missing is None:
            names = set(sample.joint_names)
            missing = [name for name in self.robot.joint_names if name not in names]
            if len(self._missing) >= 64:
                self._missing.clear()
            self._missing[sample.joint_names] = missing
        if missing:
            raise InputError("joint_names", f"missing {missing}",
                             f"every actuated joint of '{self.robot.name}'")

    def _reject_stamp(self, stamp_ns: int, previous: int, verdict: StampVerdict) -> PlannerTick:
        self._skipped += 1
        self._stamp_rejections += 1
        reason = (f"stamp {stamp_ns / NS_PER_S:.9f} s {verdict.value} (last accepted "
                  f"{previous / NS_PER_S:.9f} s)")
        if self._stamp_rejections == 1:  # the first of a series; the recovery is logged too
            self._log.warning(f"SensorState {reason}: sample skipped, and the next ones until a stamp is "
                              f"plausible (or {self.params.stamps.resync_samples} consistent ones re-anchor "
                              "the time base)")
        return PlannerTick(rejected=reason)

    # ------------------------------------------------------------------ tick
    def _tick(self, now: int, sample: SensorSample) -> PlannerTick:
        try:
            out = self._step(now, sample)
        except Exception as exc:  # noqa: BLE001  (the planner refused its inputs, or a bug: report, live on)
            self._last_tick_ns = now
            reason = f"planner tick at {now / NS_PER_S:.3f} s failed: {exc!r}"
            self._log.error(reason)
            return PlannerTick(status=PlannerStatus.PLANNER_ERROR, reason=reason)
        self._last_tick_ns = now
        ahead, self._ahead = self._ahead, None
        announced = ahead is not None and ahead[0] is out  # the solve announced ahead (checked then)
        far = "" if announced else self._out_of_reach(out)
        if far:
            self._out_of_reach_ticks += 1
            self._resync = f"the reference at t = {out.t:.3f} s was out of reach"
            if self._out_of_reach_ticks == 1:  # the first of a series (and the recovery) is logged
                self._log.error(f"no reference at t = {out.t:.3f} s: {far}; the planner restarts from the "
                                "measured CoM")
            return PlannerTick(status=PlannerStatus.REFERENCE_OUT_OF_REACH,
                               reason=f"no reference at t = {out.t:.3f} s: {far}")
        if self._out_of_reach_ticks:
            self._log.info(f"references within reach again at t = {out.t:.3f} s after "
                           f"{self._out_of_reach_ticks} ticks out of reach")
            self._out_of_reach_ticks = 0
        self._ticks += 1
        self._prepared_ticks += self._planner.last_step_prepared
        self._last_output = out
        if announced:  # the same reference
            reference = ahead[1]
        else:
            reference = self._reference(now, out)
        status = _STATUS_OF_PLAN.get(out.status, PlannerStatus.SOLVER_FAILED)
        reason = ""
        if status is not PlannerStatus.OK:
            reason = f"MPC {out.status.value} at t = {out.t:.3f} s: following the previous plan"
            self._log.warning(reason)
        return PlannerTick(reference=reference, status=status, output=out, reason=reason)

    def _step(self, now: int, sample: SensorSample) -> PlannerOutput:
        """Install, measure, correct, step: the planner's output of the tick at ``now``."""
        if self._origin_ns is None:
            self._origin_ns = now
        t = (now - self._origin_ns) / NS_PER_S
        installed = self._install_plan()
        new_plan = installed is not None
        measured = self._measure(sample, t)
        if new_plan and not installed.walking:
            self._stand_where_measured(measured)
        planner = self._planner
        restart, self._restart = self._restart, ""
        # After an outage the robot may be anywhere: restart from the measured CoM, standing at the measured
        # feet, unless a plan received during the outage walks now (the walk_behavior stops walks at an
        # outage and starts them on a live stream only: such a plan was made on the samples after it).
        walks = new_plan and planner.timeline.walking_at(t)
        stand = planner.timeline is None or bool(restart) and not walks
        if stand:  # no plan yet, or after an outage
            feet = [measured.sole(Foot.LEFT), measured.sole(Foot.RIGHT)]
            planner.set_timeline(self._corrector.set_plan(Timeline(feet[0], feet[1], (), t0=t)))
        if planner.plan is None or restart:
            planner.reset(measured.com_position[:2])
        if restart:
            self._ahead = None
            self._resync_logged = False
            self._log.warning(f"{restart}: planner restarted from the measured CoM, "
                              + ("standing at the measured feet" if stand
                                 else f"on the walk of plan {self._plan_id}"))
        if self._correct_support(measured, sample, t) and sample.base_pose is None:
            measured = self._measure(sample, t)  # on the corrected stance sole: no jump at the switch
        self._last_measured = measured
        self._resync_if_not_followed(t, measured.com_position, new_plan)
        self._stance = planner.timeline.phase_at(t).stance_feet
        return planner.step(t, measured.com_position if self.params.feedback_enabled else None)

    def _resync_if_not_followed(self, t: float, com, new_plan: bool) -> None:
        """Restart the planner from the measured CoM ``com`` [m] at rest, on the same timeline, when the
        robot does not follow its references: the measured CoM farther than ``resync_distance`` from the
        planned one for ``resync_time`` (at once beyond ``max_com_distance`` or at a new plan), or after a
        reference out of reach. Logged once per plan (further re-syncs at debug level)."""
        planner = self._planner
        reason, self._resync = self._resync, ""
        if planner.plan is None:  # (re)started this tick: from the measured CoM already
            self._far_since = None
            return
        p = self.params
        if not reason:
            planned = planner.planned_state(t)[0]
            error = math.hypot(com[0] - planned[0], com[1] - planned[1])
            if error <= p.resync_distance:
                self._far_since = None
                return
            if self._far_since is None:
                self._far_since = t
            far = t - self._far_since
            if new_plan:
                reason = (f"plan {self._plan_id} installed with the measured CoM {error:.3f} m from the "
                          "planned one")
            elif far >= p.resync_time or not error <= p.max_com_distance:
                reason = (f"the measured CoM has been {error:.3f} m from the planned one for {far:.2f} s "
                          f"(resync_distance {p.resync_distance} m): the references are not followed")
            else:
                return
        planner.reset(com[:2])
        self._far_since = None
        self._resyncs += 1
        message = f"{reason}: planner re-synced on the measured CoM at t = {t:.3f} s"
        if self._resync_logged:
            self._log.debug(message)
        else:
            self._resync_logged = True
            self._log.warning(f"{message} (further re-syncs of plan {self._plan_id} at debug level)")

    def _out_of_reach(self, out: PlannerOutput) -> str:
        """Why the output's targets are beyond reach of the stance soles of its phase ("" if they are not)."""
        phase = self._planner.timeline.phase_at(out.t)
        soles = [phase.foot(foot).position for foot in phase.stance_feet]
        limit = self.params.max_com_distance
        for name, points in (("CoM", out.com_targets.tolist()), ("ZMP", out.zmp_targets.tolist())):
            for k, (x, y, _) in enumerate(points):
                distance = min([math.hypot(x - sole[0], y - sole[1]) for sole in soles])
                if not distance <= limit:
                    return (f"its {name} target ({x:.3f}, {y:.3f}) m at t = {out.target_times[k]:.3f} s is "
                            f"{distance:.3f} m from the nearest stance sole (max_com_distance {limit} m)")
        velocity = out.com_velocity_targets.tolist()
        if not math.isfinite(sum(velocity[0]) + sum(velocity[1])):
            return f"its CoM velocity targets {velocity} are not finite"
        return ""

    def _prepare(self, tick_ns: int) -> Optional[CoMReference]:
        """Solve the MPC of the tick expected at ``tick_ns`` now, while no tick is waiting (seed 001's
        threshold: below it the tick's sample does not change that solve). A new plan waiting for the
        tick would replace the timeline: nothing to prepare then."""
        if self._pending is not None or self._planner.timeline is None:
            return None
        self._ahead = None
        try:
            if not self._planner.prepare((tick_ns - self._origin_ns) / NS_PER_S):
                return None
        except Exception as exc:  # noqa: BLE001  (the tick meets the same problem and reports it)
            self._log.warning(f"MPC not prepared for the tick at {tick_ns / NS_PER_S:.3f} s: {exc!r}")
            return None
        out = self._planner.prepared_output
        if self._out_of_reach(out):
            return None  # never announced; the tick reports it
        self._ahead = (out, self._reference(tick_ns, out))
        return self._ahead[1]

    def _install_plan(self) -> Optional[WalkPlan]:
        """Install the plan received since the last tick, if any; the plan installed (or None)."""
        pending, self._pending = self._pending, None
        if pending is None or pending.plan_id == self._plan_id:
            return None
        t0 = (pending.stamp_ns - self._origin_ns) / NS_PER_S
        first = pending.timeline.phases[0]
        steps = pending.timeline.steps if pending.walking else ()
        self._planner.set_timeline(self._corrector.set_plan(
            Timeline(first.left, first.right, steps, pending.timeline.timing, t0)))
        self._plan_id = pending.plan_id
        self._resync_logged = False
        return pending

    def _stand_where_measured(self, measured: MeasuredState) -> None:
        """A Stand plan just installed whose foot is farther than ``resync_distance`` from its measured sole,
        while that sole is on the plan's ground (within :data:`GROUND_TOLERANCE` of its height): stand at
        the measured sole (the walk behavior stops a walk at the planned feet, where a fault may not have
        put them; a foot still in the air keeps its planned pose, where it is landing)."""
        timeline = self._planner.timeline
        first = timeline.phases[0]
        feet, moved = {}, []
        for foot in (Foot.LEFT, Foot.RIGHT):
            planned, sole = first.foot(foot), measured.sole(foot)
            (x, y, z), (px, py, pz) = sole.position, planned.position
            offset = math.hypot(x - px, y - py)
            grounded = abs(z - pz) <= GROUND_TOLERANCE
            feet[foot] = sole if offset > self.params.resync_distance and grounded else planned
            if feet[foot] is sole:
                moved.append(f"{foot.name.lower()} {offset:.3f} m")
        if not moved:
            return
        self._planner.set_timeline(self._corrector.set_plan(
            Timeline(feet[Foot.LEFT], feet[Foot.RIGHT], (), timeline.timing, timeline.t0)))
        self._log.warning(f"plan {self._plan_id} stands with feet away from the measured ones "
                          f"({', '.join(moved)}; resync_distance {self.params.resync_distance} m): "
                          "standing at the measured soles")

    def _measure(self, sample: SensorSample, t: float) -> MeasuredState:
        """Measured state of a validated sample (positions only: the planner takes the CoM position).

        Without a base estimate: with an IMU, the base orientation is the IMU's and its position puts the
        anchor sole (:meth:`_anchor`) at its planned position (what a real robot measures: the stance
        sole's leg kinematics); without an IMU, the anchor sole is taken flat at its planned pose."""
        base = sample.base_pose
        if base is not None:
            return estimate_state(self.robot, sample.joint_names, sample.joint_pos, base)
        frame, pose = self._anchor(t)
        if len(sample.imu_names) and self._is_frame(sample.imu_names[0]):
            return estimate_state_from_imu(self.robot, sample.joint_names, sample.joint_pos,
                                           sample.imu_names[0], sample.imu_orientation_xyzw[0],
                                           {frame: (pose.position, 1.0)})
        return estimate_state(self.robot, sample.joint_names, sample.joint_pos, None, (frame, pose))

    def _is_frame(self, name: str) -> bool:
        """Whether the model has a frame ``name`` (an IMU the model does not know is not used)."""
        known = self._frames_known.get(name)
        if known is None:
            try:
                self.robot.frame_id(name)
                known = True
            except FrameNotFound:
                known = False
            if len(self._frames_known) >= 64:
                self._frames_known.clear()
            self._frames_known[name] = known
        return known

    def _anchor(self, t: float) -> tuple[str, FootPose]:
        """Stance sole at its planned pose, for samples without base: the sole of the previous tick while it
        is still in stance (a sole that touched down is measured from it at the next lift-off, then
        trusted), else the one that was already in stance (:func:`anchor_foot`)."""
        timeline = self._planner.timeline
        if timeline is None:
            return self._frames[Foot.LEFT], self._reference_feet[Foot.LEFT]
        stance = timeline.phase_at(t).stance_feet
        foot = self._anchor_foot
        if foot is None or foot not in stance:
            foot = anchor_foot(timeline, t, self._stance)
        self._anchor_foot = foot
        return self._frames[foot], timeline.phase_at(t).foot(foot)

    def _correct_support(self, measured: MeasuredState, sample: SensorSample, t: float) -> bool:
        """The shared support-foot correction policy on this tick's measured state (without a base estimate:
        the sole measured from the other one, where it stood until now, :func:`correction_anchor`, the base
        oriented by the IMU, :func:`sole_from_anchor`); whether it corrected the timeline."""
        if sample.base_pose is None:
            timeline = self._planner.timeline

            imu = (sample.imu_names[0], sample.imu_orientation_xyzw[0]) if len(sample.imu_names) else None

            def sole(foot: Foot) -> FootPose:
                other, pose = correction_anchor(timeline, t, foot)
                return sole_from_anchor(self.robot, sample.joint_names, sample.joint_pos, self._frames[foot],
                                        (self._frames[other], pose), imu)
        else:
            sole = measured.sole
        try:
            correction = self._corrector.observe(t, sole)
        except WalkMpcError as exc:
            self._log.warning(f"support correction skipped at t = {t:.3f} s: {exc}")
            return False
        if correction is None or not correction.applied:
            return False
        self._planner.set_timeline(self._corrector.timeline)
        self._corrections += 1
        self._log.debug(f"lift-off at t = {t:.3f} s: the {correction.foot.name.lower()} sole of step "
                        f"{correction.step_index} measured {1e3 * correction.position_error:.2f} mm from its "
                        "plan")
        return True

    def _reference(self, stamp_ns: int, out: PlannerOutput) -> CoMReference:
        timeline = self._planner.timeline
        if self._level_of[0] is not timeline:
            self._level_of = (timeline, _level(timeline))
        tilt = None
        if not self._level_of[1]:  # known sloped ground: the soles' tilts at T and 2T (StepData normal)
            tilt = [sole_tilts_at(timeline, t) for t in out.target_times]
        return CoMReference(stamp_ns, self._plan_id, self._times, out.com_targets, out.com_velocity_targets,
                            out.zmp_targets, tilt)


def _level(timeline: Timeline) -> bool:
    """Whether every sole of ``timeline`` is on level ground (its initial feet and every step)."""
    first = timeline.phases[0]
    return first.left.level and first.right.level and all(
        step.normal[0] == 0.0 and step.normal[1] == 0.0 for step in timeline.steps)


__all__ = ["PlannerStage", "PlannerStageParameters", "PlannerTick"]
