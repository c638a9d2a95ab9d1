"""Step adjustment from the measured DCM (capture point): where the swinging foot lands after a disturbance.

:class:`StepAdjuster` observes the sensor samples of a walk (what a real robot measures: encoders, joint
velocities, IMU; the base placed by the leg kinematics of the planned stance sole,
:func:`~walk_mpc.core.body.state_estimation.estimate_state_from_imu`) and, in single support, decides whether
the swinging step must land elsewhere (LIPM, ``omega = sqrt(g / h)``, ``h`` the measured CoM height above the
stance sole):

1. **Nominal DCM at touchdown.** The DCM the plan expects when step ``k`` lands, by the backward recursion
   of the plan's footholds (Englsberger 2015; the ZMP on the stance sole in single support, at the middle of
   the soles in double support, the DCM at the end of the plan on the middle of the final feet): over a
   phase of duration ``T`` with the ZMP at ``z``, ``xi_start = z + (xi_end - z) exp(-omega T)``.
2. **What the ZMP can correct.** With the ZMP at ``q`` on the stance sole until touchdown (in ``tau``), the
   measured DCM ``xi`` lands at ``q + (xi - q) exp(omega tau)``; the ZMP that brings it onto the nominal one
   is ``q* = (xi e - xi_k) / (e - 1)`` (``e = exp(omega tau)``). Inside the stance sole (the planner's
   support region of the robot, shrunk by ``sole_margin``; ``zmp_tolerance`` beyond it, the estimate's
   noise) the stabilizer can correct the error: nothing changes. Outside, ``q*`` is clamped into the sole
   and the DCM at touchdown misses the nominal one by ``delta = (q* - q_clamped) (e - 1)``: the step moves
   by ``delta`` (the DCM keeps its nominal offset from the landed sole), when ``|delta|`` exceeds
   ``deadband``, each direction of the stance sole's frame within its own limit (``max_forward_shift``,
   ``max_backward_shift``, ``max_widening_shift``, ``max_narrowing_shift``; by default only backward: the
   other directions measured worse on MuJoCo, see the parameters).
3. **Within the step limits.** The moved step is saturated against its stance sole
   (:func:`~walk_mpc.core.walk.saturation.saturate_step`, the walk's :class:`StepLimits`), and the steps after
   it against their new predecessors: :func:`adjusted_steps`.

4. **Step timing** (``adapt_timing``, off by default; after Khadiv et al., "Walking control based on step
   timing adaptation", IEEE T-RO 2020, by a search instead of their QP). The touchdown of the swinging step
   may come earlier (down to ``shortest_time_to_touchdown`` from now and the step limits' ``min_duration``)
   or later (by ``max_lengthening`` of the time left in the plan): for each touchdown time ``tau`` from now
   (``timing_resolution`` apart), the DCM error at touchdown (2., the ZMP at the sole's edge, no
   ``zmp_tolerance``) that the step's place cannot absorb (the shift limits, the step limits) is what is
   left; when the planned time leaves more than ``timing_deadband`` and another time removes more than
   that, the step lands at the time leaving least (its duration changed: the later phases move with it).
   A DCM still inside the stance sole is brought back by its ZMP: a later touchdown; one beyond it grows:
   an earlier one. Only the lateral error counts by default (``sagittal_timing``; ``inward_timing``: the
   error toward the swinging foot's side too). Toward the stance sole's outer side the swinging foot cannot
   help (it would cross): when no later touchdown than planned brings the DCM back, what is left at
   touchdown also moves the **next step** (the stance foot's) outward by that error grown over a double
   support and the shortest single support (at most ``max_next_widening_shift``), its duration the step
   limits' ``min_duration``. The whole-body stage re-times the rest of the swing
   (:func:`~walk_mpc.core.body.swing.retarget_swing`: velocity and acceleration continuous).

Decisions are taken from ``min_swing_time`` after lift-off (the DCM estimate settles on the new stance sole)
to ``min_time_to_touchdown`` before touchdown (later, the foot cannot follow), and a step already moved moves
again only by more than ``update_distance`` (every change is a new plan). The whole-body stage re-plans the
swing of a step moved in the air from where the foot is (:func:`~walk_mpc.core.body.swing.retarget_swing`:
no jump of the foot's target). Committed step indices and feet never change: only where the steps land (and,
with ``adapt_timing``, their durations).

The walk behavior (:class:`~walk_mpc.core.control.walk_supervisor.WalkSupervisor`) applies the changes to its
committed steps (they are what the plan topics and ``step_queue_saturated`` show); the in-process loop
(:class:`~walk_mpc.core.control.closed_loop.ClosedLoopWalk`) to its plan, with the same adjuster: the graph's
stages receive the adjusted plan as a new plan either way. Disabled, it is never called.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Optional, Sequence

import numpy as np

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.body.state_estimation import estimate_state, estimate_state_from_imu
from walk_mpc.core.errors import ParameterError, WalkMpcError
from walk_mpc.core.params import check_nonnegative, check_positive
from walk_mpc.core.sensors import SensorSample
from walk_mpc.core.walk.saturation import StepLimits, saturate_step
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Phase, PhaseKind, Timeline

GRAVITY = 9.81  # [m/s^2]


@dataclasses.dataclass(frozen=True)
class StepAdjustmentParameters:
    """Parameters of :class:`StepAdjuster`.

    Attributes:
        enabled: Adjust steps (False: the adjuster is never called; the walk is bit for bit as without it).
        deadband: Smallest move [m] of a step: a DCM error at touchdown below it is left to the stabilizer.
        zmp_tolerance: The ZMP needed may leave the stance sole's region by this much [m] before a step moves
            (the DCM estimate's noise, a few cm while the stance sole rocks).
        update_distance: A step already moved moves again only when its new place is farther than this [m]
            (the swing is re-planned from where the foot is, :func:`~walk_mpc.core.body.swing.retarget_swing`:
            a step follows the DCM as its estimate settles after the push).
        min_swing_time: No decision earlier than this [s] after lift-off.
        min_time_to_touchdown: No decision later than this [s] before touchdown.
        sole_margin: The stance sole's region of ZMP correction is the planner's sole shrunk by this [m].
        max_shift: Largest move [m] of a step from its planned place (before the step limits).
        max_forward_shift: Largest move [m] of a step forward (along its stance sole's heading; default 0:
            on MuJoCo Talos' pelvis tilted past 10 degrees on the longer steps, forward pushes 31 -> 25 N s).
        max_backward_shift: Largest move [m] of a step backward.
        max_widening_shift: Largest move [m] of a step sideways away from its stance sole (default 0: wider
            steps measured worse, inward pushes 28 -> 25 N s).
        max_narrowing_shift: Largest move [m] of a step sideways toward its stance sole (default 0: a push
            over the stance foot is not caught by the swinging foot, which would cross toward it; outward
            pushes 15.6 -> 9.4 N s).
        filter_time: Time constant [s] of the low-pass filter of the measured DCM (0: none).
        adapt_timing: Step timing adaptation (module docstring, 4): when the swinging step's place (within
            the shift limits above and the step limits) cannot absorb the DCM error at its touchdown, its
            single support is shortened to where what is left is smallest, and a DCM error toward the
            stance sole's outer side (the swinging foot would have to cross) moves the next step (the
            stance foot's) outward, its single support the shortest the step limits allow.
        timing_deadband: The DCM error at touchdown [m] the step's place cannot absorb, and the part of it
            an earlier touchdown must remove, before the timing changes.
        shortest_time_to_touchdown: A shortened step lands no sooner than this [s] after the decision.
        timing_resolution: The touchdown times tried [s] apart.
        max_lengthening: A touchdown may come later by at most this share of the time left (the ZMP on the
            stance sole brings a DCM still inside it back; <= 0.4: the re-timed swing stays monotonic), of
            the time left to the step's touchdown before any timing decision.
        update_time: A step whose timing was decided changes it again only by more than this [s].
        sagittal_timing: The DCM error forward and backward the step's place cannot absorb adapts the timing
            too (default: only the lateral; on MuJoCo the sagittal measured worse, see the README).
        inward_timing: The DCM error toward the swinging foot's side the step's place cannot absorb (wider
            steps: ``max_widening_shift``, 0 by default) adapts the timing too: an earlier touchdown for an
            inward push (False: only the error toward the stance sole's outer side counts).
        max_next_widening_shift: Largest move [m] of the next step outward (adapt_timing).
        inward_back_limit: When a touchdown earlier than planned (``adapt_timing``) needs a ZMP beyond the
            stance sole's inner edge (an inward push: the swinging foot catches the DCM and will carry the
            robot alone), the stance sole's region of ZMP correction ends this far [m] behind its centre
            instead of at its heel, so that the step moves back by what the heel would have had to do (0,
            the default: off, the heel). Measured on MuJoCo Talos (state estimated, stabilizer ``tip_angle``
            0.035 rad, ``zmp_inward_offset`` 0.035 m; a walking inward push of 28 N s): the touchdown came
            0.23 s early, the adjuster counting on a ZMP at the stance sole's inner heel corner that the sole,
            rolling over its inner edge, did not give; the foot landed 14 cm ahead of the CoM with the DCM
            behind its heel, the robot rotated back over that heel onto the other foot, the landed foot
            lifted and the DCM ran on. With 0.02 the step lands 5 cm shorter and carries the robot alone
            (the inward grid stands up to 28.8 N s instead of 26.2; the other walking push rows unchanged,
            docs/balance.md). Not for a touchdown at its planned time: a backward push needs the heel.
        least_timing_change: Step timing takes the touchdown time nearest the planned one that leaves no more
            than ``timing_deadband`` of DCM error (when none does, the time leaving the least error, as by
            default) instead of the time that leaves the least error (False, the default). Measured on MuJoCo
            Talos (state estimated, stabilizer on): by default a lateral error 1 mm beyond the sole's edge
            moved a 0.4 s swing's touchdown 0.1 s earlier and the 0.6 m/s gait fell; with it, it walks.
    """

    enabled: bool = False
    deadband: float = 0.02
    zmp_tolerance: float = 0.05
    update_distance: float = 0.03
    min_swing_time: float = 0.1
    min_time_to_touchdown: float = 0.2
    sole_margin: float = 0.0
    max_shift: float = 0.3
    max_forward_shift: float = 0.0
    max_backward_shift: float = 0.3
    max_widening_shift: float = 0.0
    max_narrowing_shift: float = 0.0
    filter_time: float = 0.05
    adapt_timing: bool = False
    timing_deadband: float = 0.02
    shortest_time_to_touchdown: float = 0.15
    timing_resolution: float = 0.01
    max_lengthening: float = 0.4
    update_time: float = 0.03
    sagittal_timing: bool = False
    inward_timing: bool = True
    max_next_widening_shift: float = 0.25
    inward_back_limit: float = 0.0
    least_timing_change: bool = False

    def __post_init__(self) -> None:
        for name in ("enabled", "adapt_timing", "sagittal_timing", "inward_timing", "least_timing_change"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")
        for name in ("deadband", "zmp_tolerance", "update_distance", "min_swing_time",
                     "min_time_to_touchdown", "sole_margin", "filter_time", "max_forward_shift",
                     "max_backward_shift", "max_widening_shift", "max_narrowing_shift", "timing_deadband",
                     "max_next_widening_shift", "inward_back_limit"):
            check_nonnegative(name, getattr(self, name))
        check_positive("max_shift", self.max_shift)
        check_positive("shortest_time_to_touchdown", self.shortest_time_to_touchdown)
        check_positive("timing_resolution", self.timing_resolution)
        check_nonnegative("update_time", self.update_time)
        if not 0.0 <= self.max_lengthening <= 0.4:
            raise ParameterError("max_lengthening", self.max_lengthening, "a share in [0, 0.4]")


def adjusted_steps(timeline: Timeline, step_index: int, position: Sequence[float],
                   limits: StepLimits, changes: Optional[dict] = None) -> tuple:
    """The timeline's steps with step ``step_index`` moved to ``position`` (x, y; its height kept), saturated
    against its stance sole, and the later steps saturated against their new predecessors (a step within its
    limits stays as it is). ``changes``: step index -> dict of further changes of steps from ``step_index``
    on (``duration`` [s], ``position`` (x, y) [m]: step timing adaptation), applied before saturation."""
    steps = list(timeline.steps)
    first = timeline.phases[0]
    feet = {Foot.LEFT: first.left, Foot.RIGHT: first.right}
    changes = changes or {}
    for k, step in enumerate(steps):
        previous = feet[step.foot.other]
        change = changes.get(step.step_index)
        if change is not None and step.step_index >= step_index:
            if "duration" in change:
                step = step.replace(duration=float(change["duration"]))
            if "position" in change:
                x, y = change["position"]
                step = step.replace(position=(float(x), float(y), step.position[2]))
        if step.step_index == step_index:
            step = step.replace(position=(float(position[0]), float(position[1]), step.position[2]))
            step = saturate_step(step, previous, limits)[0]
        elif step.step_index > step_index:
            step = saturate_step(step, previous, limits)[0]
        steps[k] = step
        feet[step.foot] = FootPose.of_step(step)
    return tuple(steps)


def nominal_touchdown_dcm(timeline: Timeline, step_index: int, omega: float) -> np.ndarray:
    """The plan's DCM [m] (x, y) at the touchdown of step ``step_index`` (module docstring, 1): backwards from
    the middle of the final feet, the ZMP in each double support at the middle of its soles and in each
    single support on the stance sole."""
    final = timeline.phases[-1]
    xi = 0.5 * (np.asarray(final.left.position[:2]) + np.asarray(final.right.position[:2]))
    phases = timeline.phases
    for j in range(len(phases) - 1, -1, -1):
        phase = phases[j]
        if phase.kind is PhaseKind.SINGLE and phase.step_index <= step_index:
            break
        if phase.kind is PhaseKind.SINGLE:
            zmp = np.asarray(phase.foot(phase.swing_foot.other).position[:2])
        elif phase.kind is PhaseKind.DOUBLE:
            zmp = 0.5 * (np.asarray(phase.left.position[:2]) + np.asarray(phase.right.position[:2]))
        else:
            continue
        xi = zmp + (xi - zmp) * math.exp(-omega * phase.duration)
    return xi


def measure_com_state(robot: RobotModel, phase: Phase, sample: SensorSample) -> Optional[tuple]:
    """(CoM position (3,) [m], CoM velocity (3,) [m/s]) of the sample, the base placed by the leg kinematics
    of the stance soles of ``phase`` at their planned poses (oriented by the IMU; the sample's base pose
    without IMU); None when it cannot be measured."""
    frames = {Foot.LEFT: robot.left_foot_frame, Foot.RIGHT: robot.right_foot_frame}
    anchors = {frames[foot]: (phase.foot(foot).position, 1.0) for foot in phase.stance_feet}
    try:
        if len(sample.imu_names):
            state = estimate_state_from_imu(robot, sample.joint_names, sample.joint_pos,
                                            sample.imu_names[0], sample.imu_orientation_xyzw[0], anchors,
                                            sample.joint_vel, sample.imu_angular_vel[0])
        elif sample.base_pose is not None:
            state = estimate_state(robot, sample.joint_names, sample.joint_pos,
                                   base_pose=sample.base_pose, joint_velocities=sample.joint_vel,
                                   base_twist=(sample.base_linear_velocity, sample.base_angular_velocity))
        else:
            return None
    except (WalkMpcError, KeyError, ValueError):
        return None
    if state.com_velocity is None:
        return None
    return np.asarray(state.com_position), np.asarray(state.com_velocity)


def measure_dcm(robot: RobotModel, phase: Phase, sample: SensorSample) -> Optional[tuple]:
    """(DCM (x, y) [m], omega [1/s]) of the sample (LIPM, ``omega = sqrt(g / h)``, ``h`` the CoM height above
    the mean of the stance soles), the CoM measured by :func:`measure_com_state`; None when it cannot be
    measured."""
    measured = measure_com_state(robot, phase, sample)
    if measured is None:
        return None
    com, velocity = measured
    height = float(com[2]) - float(np.mean([phase.foot(f).position[2] for f in phase.stance_feet]))
    if not height > 0.05:
        return None
    omega = math.sqrt(GRAVITY / height)
    return com[:2] + velocity[:2] / omega, omega


class StepAdjuster:
    """Step adjustment from the measured DCM (see the module docstring).

    Args:
        robot: Robot model (a biped; its planner sole is the stance sole's region of ZMP correction).
        params: Parameters.
        limits: The walk's step limits.
    """

    Parameters = StepAdjustmentParameters

    def __init__(self, robot: RobotModel, params: Optional[StepAdjustmentParameters] = None,
                 limits: Optional[StepLimits] = None) -> None:
        self.params = params if params is not None else StepAdjustmentParameters()
        if not isinstance(self.params, StepAdjustmentParameters):
            raise ParameterError("params", self.params, "a StepAdjustmentParameters")
        self.robot = robot
        self.limits = limits if limits is not None else StepLimits()
        sole = robot.planner_sole()
        m = self.params.sole_margin
        self._sole = (max(0.0, sole.front - m), max(0.0, sole.back - m), max(0.0, sole.left - m),
                      max(0.0, sole.right - m))
        self.reset()

    def reset(self) -> None:
        """Forget the filter and the moves made."""
        self._dcm: Optional[np.ndarray] = None
        self._dcm_t: Optional[float] = None
        self._moved: dict = {}  # step index -> (x, y) it was last moved to (adapt_timing: with more)
        self._next_origin: dict = {}  # step index -> its (x, y) before a timing decision moved it outward
        self._touchdowns: dict = {}  # step index -> its touchdown time [s] before a timing decision
        self.adjustments = 0
        self.last: dict = {}  # the last decision's values (tracing)

    def measure_dcm(self, t: float, timeline: Timeline, sample: SensorSample) -> Optional[tuple]:
        """(DCM (x, y) [m] filtered, omega [1/s]) of the sample, the base placed on the planned stance soles
        at ``t``; None when it cannot be measured."""
        raw = measure_dcm(self.robot, timeline.phase_at(t), sample)
        if raw is None:
            return None
        xi, omega = raw
        tau = self.params.filter_time
        if self._dcm is None or tau <= 0.0 or self._dcm_t is None:
            self._dcm = xi
        else:
            dt = max(0.0, t - self._dcm_t)
            self._dcm = self._dcm + (xi - self._dcm) * min(1.0, dt / tau)
        self._dcm_t = t
        return self._dcm.copy(), omega

    def observe(self, t: float, timeline: Timeline, sample: SensorSample) -> Optional[tuple]:
        """One sample at plan time ``t`` [s] of a walking ``timeline``: the adjusted steps (all of the
        timeline's, :func:`adjusted_steps`) when the swinging step must land elsewhere, else None."""
        p = self.params
        if not timeline.walking_at(t):
            self._dcm = None
            self._moved.clear()  # the next walk numbers its steps from 1 again
            self._next_origin.clear()
            self._touchdowns.clear()
            return None
        measured = self.measure_dcm(t, timeline, sample)
        phase = timeline.phase_at(t)
        if measured is None or phase.kind is not PhaseKind.SINGLE:
            return None
        if t - phase.t_start < p.min_swing_time or phase.t_end - t < p.min_time_to_touchdown:
            return None
        if p.adapt_timing:
            return self.decide_timing(t, timeline, *measured)
        xi, omega = measured
        index = phase.step_index
        planned = np.asarray(phase.foot(phase.swing_foot).position[:2])
        target = nominal_touchdown_dcm(timeline, index, omega)
        local, _, shift = self._zmp_shift(xi, omega, phase.t_end - t, target, phase)
        norm = float(np.linalg.norm(shift))
        self.last = {"t": t, "step": index, "dcm": xi.tolist(), "zmp_needed": local.tolist(),
                     "shift": shift.tolist()}
        if norm > p.max_shift:
            shift *= p.max_shift / norm
            norm = p.max_shift
        # The shift is measured from where the step lands now (moved or not).
        if norm <= p.deadband:
            return None
        place = planned + shift
        if index in self._moved and math.dist(place, self._moved[index]) <= p.update_distance:
            return None
        steps = adjusted_steps(timeline, index, place, self.limits)
        moved = next(st for st in steps if st.step_index == index)
        if math.dist(moved.position[:2], planned) <= 1e-6:
            self._moved[index] = tuple(place)
            return None  # the step limits leave it where it is
        self._moved[index] = tuple(place)
        self.adjustments += 1
        return steps

    def _zmp_shift(self, xi: np.ndarray, omega: float, tau: float, target: np.ndarray, phase: Phase,
                   early: bool = False) -> tuple:
        """For a touchdown ``tau`` [s] from now: the ZMP that brings the measured DCM ``xi`` onto the nominal
        one ``target`` at touchdown, in the stance sole's frame (``local``); the DCM error at touchdown it
        leaves with the ZMP at the sole's edge (``raw``, local, no ``zmp_tolerance``); the shift of the
        swinging step (world) that absorbs it within the per-direction shift limits (not ``max_shift``);
        ``early``: a touchdown earlier than planned before any timing decision (``inward_back_limit``)."""
        p = self.params
        stance = phase.foot(phase.swing_foot.other)
        e = math.exp(omega * tau)
        wanted = (xi * e - target) / (e - 1.0)  # the ZMP that brings the DCM onto the nominal one
        c, s = math.cos(stance.yaw), math.sin(stance.yaw)
        offset = wanted - np.asarray(stance.position[:2])
        local = np.array([c * offset[0] + s * offset[1], -s * offset[0] + c * offset[1]])
        front, back, left, right = self._sole
        side = 1.0 if phase.swing_foot is Foot.LEFT else -1.0  # the swinging sole's side of the stance sole
        if early and p.inward_back_limit > 0.0 and side * local[1] > (left if side > 0.0 else right):
            back = min(back, p.inward_back_limit)  # beyond the inner edge: the ZMP stays near its middle
        clamped = np.array([min(front, max(-back, local[0])), min(left, max(-right, local[1]))])
        raw = (local - clamped) * (e - 1.0)  # the error at touchdown, the ZMP at the sole's edge
        if float(np.max(np.abs(local - clamped))) <= p.zmp_tolerance:
            clamped = local  # within what the ZMP (and the estimate's noise) covers
        miss = (local - clamped) * (e - 1.0)
        miss[0] = min(p.max_forward_shift, max(-p.max_backward_shift, miss[0]))
        miss[1] = side * min(p.max_widening_shift, max(-p.max_narrowing_shift, side * miss[1]))
        return local, raw, np.array([c * miss[0] - s * miss[1], s * miss[0] + c * miss[1]])

    def _place(self, xi: np.ndarray, omega: float, tau: float, target: np.ndarray, phase: Phase,
               timeline: Timeline, early: bool = False) -> dict:
        """Where the swinging step of ``phase`` should land for a touchdown ``tau`` [s] from now (the ZMP on
        the stance sole's region, the measured DCM ``xi``, the nominal DCM at touchdown ``target``): its
        shift within the shift limits (world, from its planned place), the place reached within the step
        limits and the DCM error at touchdown [m] (world) that place leaves (``residual``)."""
        p = self.params
        stance = phase.foot(phase.swing_foot.other)
        planned = np.asarray(phase.foot(phase.swing_foot).position[:2])
        local, raw, shift = self._zmp_shift(xi, omega, tau, target, phase, early)
        norm = float(np.linalg.norm(shift))
        if norm > p.max_shift:
            shift *= p.max_shift / norm
        c, s = math.cos(stance.yaw), math.sin(stance.yaw)
        side = 1.0 if phase.swing_foot is Foot.LEFT else -1.0
        step = next(st for st in timeline.steps if st.step_index == phase.step_index)
        place = planned + shift
        reached = np.asarray(saturate_step(step.replace(position=(*place, step.position[2])), stance,
                                           self.limits)[0].position[:2])
        wanted_place = planned + np.array([c * raw[0] - s * raw[1], s * raw[0] + c * raw[1]])
        residual = wanted_place - reached
        along, across = c * residual[0] + s * residual[1], -s * residual[0] + c * residual[1]
        if not p.inward_timing and side * across > 0.0:
            across = 0.0  # toward the swinging foot's side: left to the step's place
        error = math.hypot(along, across) if p.sagittal_timing else abs(across)
        return {"tau": tau, "local": local, "shift": shift, "place": place, "residual": residual,
                "error": error, "outward": -side * across}

    def decide_timing(self, t: float, timeline: Timeline, xi: Sequence[float],
                      omega: float) -> Optional[tuple]:
        """The decision of :meth:`observe` with step timing adaptation (``adapt_timing``; module docstring,
        4) at plan time ``t`` [s] in a single support of ``timeline``, from the measured DCM ``xi`` (x, y)
        [m] (filtered) and ``omega`` [1/s]: the adjusted steps (all of the timeline's: places and
        durations, indices and feet unchanged), or None when nothing changes. (:meth:`observe` calls it
        between ``min_swing_time`` after lift-off and ``min_time_to_touchdown`` before touchdown.)"""
        p = self.params
        xi = np.asarray(xi, dtype=float)
        phase = timeline.phase_at(t)
        if phase.kind is not PhaseKind.SINGLE:
            return None
        index = phase.step_index
        target = nominal_touchdown_dcm(timeline, index, omega)
        tau0 = phase.t_end - t
        planned_end = self._touchdowns.setdefault(index, phase.t_end)  # before any timing decision
        best = nominal = self._place(xi, omega, tau0, target, phase, timeline, t + tau0 < planned_end - 1e-9)
        step = next(st for st in timeline.steps if st.step_index == index)
        if nominal["error"] > p.timing_deadband:
            lowest = max(p.shortest_time_to_touchdown, tau0 - (step.duration - self.limits.min_duration))
            highest = min(tau0 + max(0.0, (planned_end - t) * (1.0 + p.max_lengthening) - tau0),
                          tau0 * (1.0 + p.max_lengthening),  # the re-timed swing stays monotonic
                          tau0 + self.limits.max_duration - step.duration)
            earlier = list(itertools.takewhile(lambda tau: tau >= lowest - 1e-9,
                                               (tau0 - k * p.timing_resolution for k in itertools.count(1))))
            later = list(itertools.takewhile(lambda tau: tau <= highest + 1e-9,
                                             (tau0 + k * p.timing_resolution for k in itertools.count(1))))
            if p.least_timing_change:  # nearest the plan first (earlier before later at equal distance)
                taus = sorted(earlier + later, key=lambda tau: (round(abs(tau - tau0), 9), tau > tau0))
            else:
                taus = earlier + later
            for tau in taus:
                candidate = self._place(xi, omega, tau, target, phase, timeline, t + tau < planned_end - 1e-9)
                if p.least_timing_change and candidate["error"] <= p.timing_deadband:
                    best = candidate  # the time nearest the plan leaving at most the deadband
                    break
                if candidate["error"] < best["error"] - 1e-9:
                    best = candidate
            else:
                if best["error"] > nominal["error"] - p.timing_deadband:
                    best = nominal
        tau = best["tau"]
        changes: dict = {}
        if tau != tau0:
            changes[index] = {"duration": step.duration + (tau - tau0)}
        following = [st for st in timeline.steps if st.step_index == index + 1]
        outward = best["outward"]
        if following and outward > p.timing_deadband and t + tau <= planned_end + 1e-9:
            # The swinging foot cannot catch it (it would cross) and no later touchdown than planned brings
            # it back: the stance foot's next step goes outward, as soon as the step limits allow, by the
            # DCM error it will have grown to at its touchdown.
            nxt = following[0]
            origin = self._next_origin.setdefault(nxt.step_index, nxt.position[:2])
            shortest = self.limits.min_duration
            single = shortest - timeline.timing.double_support_duration
            grown = outward * math.exp(omega * (timeline.timing.double_support_duration + single))
            move = min(p.max_next_widening_shift, grown)
            stance = phase.foot(phase.swing_foot.other)
            side = 1.0 if nxt.foot is Foot.LEFT else -1.0  # the next step's outward side
            c, s = math.cos(stance.yaw), math.sin(stance.yaw)
            changes[index + 1] = {"duration": min(nxt.duration, shortest),
                                  "position": (origin[0] - s * side * move, origin[1] + c * side * move)}
        planned = np.asarray(phase.foot(phase.swing_foot).position[:2])
        shift = best["shift"]
        self.last = {"t": t, "step": index, "dcm": xi.tolist(), "zmp_needed": best["local"].tolist(),
                     "shift": shift.tolist(),
                     "touchdown_in": tau, "residual": best["residual"].tolist()}
        if float(np.linalg.norm(shift)) <= p.deadband and not changes:
            return None
        place = planned + shift if float(np.linalg.norm(shift)) > p.deadband else planned
        decision = (tuple(place), t + tau, tuple(sorted(changes)))
        if index in self._moved:
            last_place, last_touchdown, last_changed = self._moved[index]
            if (math.dist(place, last_place) <= p.update_distance
                    and abs(t + tau - last_touchdown) < p.update_time - 1e-9
                    and set(decision[2]) <= set(last_changed)):
                return None
        steps = adjusted_steps(timeline, index, place, self.limits, changes)
        if steps == timeline.steps:
            self._moved[index] = decision
            return None
        self._moved[index] = decision
        self.adjustments += 1
        return steps


__all__ = ["StepAdjuster", "StepAdjustmentParameters", "adjusted_steps", "measure_com_state", "measure_dcm",
           "nominal_touchdown_dcm"]
