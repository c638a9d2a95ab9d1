"""Walking pattern generator: gait timeline + LIPM MPC + CoM feedback + support-foot correction.

Call :meth:`MpcPlanner.step` once per control period ``Tc``. Each call

1. takes the planned CoM state at ``t`` (the previous plan integrated exactly to ``t``);
2. CoM feedback (seed 001): if the measured CoM position differs from the planned one by more than
   ``feedback_threshold`` (Euclidean norm of the horizontal error), adds ``feedback_gain * error`` to
   the planned position used as the MPC's initial state (velocity and acceleration are untouched);
3. solves the MPC over the preview sampled from the timeline;
4. returns the CoM/ZMP targets at ``t + Tc`` and ``t + 2 Tc`` (the IK sets joint targets for both,
   seed 001) and the whole predicted preview.

Timing choice: the MPC grid is ``[Tc, T, T, ..., T]``: the first interval is one control period
(``control_period <= sampling_period``), so its jerk is exactly what is applied until the next call
and the state at ``t + Tc`` is exact; with ``Tc == T`` the grid is uniform and the solver's warm
start is shifted by one interval each tick. The target at ``t + 2 Tc`` follows the plan (second
jerk) exactly.

Support-foot correction (seed 001, second feedback) is a policy of its own,
:class:`~walk_mpc.core.mpc.support_correction.SupportCorrector`, shared with the IK: the caller feeds it the
plan and the measured feet and gives the planner its corrected timeline (:meth:`MpcPlanner.set_timeline`).
:meth:`MpcPlanner.correct_support` is the older one-shot form (replace a support foot by its measured pose
and translate every later step by the same offset).
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple, Optional

import numpy as np

from walk_mpc.core.errors import InputError, InvalidStepError, ParameterError, ShapeError
from walk_mpc.core.mpc.preview import Preview, PreviewBuilder, SoleParameters, stance_centre
from walk_mpc.core.mpc.problem import Mpc, MpcParameters, Plan, PlanStatus
from walk_mpc.core.mpc.support_correction import corrected_timeline, last_touchdown
from walk_mpc.core.params import check_nonnegative, check_range
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, PhaseKind, Timeline

#: Part of a swing [-] in which the CoM height follows a swing sole stepping up (the first part of the
#: swing) ...
COM_RISE_SPAN = 0.5
#: ... and stepping down (the last part, with the sole's descent: body/swing.py HEIGHT_CHANGE_SPAN).
#: Chosen on MuJoCo (Talos, state estimated, stabilizer on, 20 steps of 0.25 m over two flights of two 10 cm
#: steps up and down, the edges shifted by -1, 0, +1 cm; single runs, which a small change can tip either
#: way): a descent over the last half, two thirds or the whole swing fell (the pelvis pitched past 10
#: degrees) where the last third walked; a rise over the first half walked at least as often as over the
#: first third or the whole swing.
COM_DESCENT_SPAN = 1.0 / 3.0


@dataclasses.dataclass(frozen=True)
class PlannerParameters:
    """Parameters of the walking pattern generator (nested mapping in YAML).

    Attributes:
        mpc: MPC parameters (CoM height, gravity, sampling period, horizon, weights, backend, osqp).
        sole: Sole extents used for the support regions.
        control_period: Period of :meth:`MpcPlanner.step` calls [s], in [0.005, mpc.sampling_period].
        feedback_threshold: Horizontal CoM error below which no feedback is applied [m].
        feedback_gain: Fraction of the CoM error added to the MPC initial state, in [0, 1].
        zmp_inward_offset: A single stance's ZMP reference this far [m] from its sole centre toward the other
            foot (:class:`~walk_mpc.core.mpc.preview.PreviewBuilder` ``inward``), less than the sole's
            half-width: less lateral sway, the DCM stays on the inner side of the stance foot in single
            support (more margin to a push outward over it); 0: the centre (default).
        standing_feedback_radius: While the timeline stands (a STAND phase), the CoM feedback moves the MPC's
            initial CoM no farther than this [m] from the middle of the soles; 0: no bound. A standing
            robot whose measured CoM leaves the plan (it leans or tips on its sole edges) is not followed
            out of its support by the plan, which would tip it further (measured on MuJoCo: Talos standing
            10 s after an ik restart fell in 3 of 17 drill rows without the bound).
    """

    mpc: MpcParameters = MpcParameters()
    sole: SoleParameters = SoleParameters()
    control_period: float = 0.02
    feedback_threshold: float = 0.004
    feedback_gain: float = 0.3
    zmp_inward_offset: float = 0.0
    standing_feedback_radius: float = 0.05

    def __post_init__(self) -> None:
        if not isinstance(self.mpc, MpcParameters):
            raise ParameterError("mpc", self.mpc, "an MpcParameters")
        if not isinstance(self.sole, SoleParameters):
            raise ParameterError("sole", self.sole, "a SoleParameters")
        check_range("control_period", self.control_period, 0.005, self.mpc.sampling_period)
        check_nonnegative("feedback_threshold", self.feedback_threshold)
        check_range("feedback_gain", self.feedback_gain, 0.0, 1.0)
        check_nonnegative("zmp_inward_offset", self.zmp_inward_offset)
        check_nonnegative("standing_feedback_radius", self.standing_feedback_radius)
        if self.zmp_inward_offset >= min(self.sole.left, self.sole.right):
            raise ParameterError("zmp_inward_offset", self.zmp_inward_offset,
                                 f"less than the sole's half-width {min(self.sole.left, self.sole.right)} m")


@dataclasses.dataclass(frozen=True)
class PlannerOutput:
    """Result of one :meth:`MpcPlanner.step` (arrays are read-only, world frame).

    Attributes:
        t: Time of the call [s].
        status: MPC status (SOLVED, or INFEASIBLE/FAILED with ``plan`` the previous plan shifted).
        target_times: ``(t + Tc, t + 2 Tc)`` [s].
        com_targets: CoM position targets at ``target_times`` [m], shape (2, 3); z = ground + com_height.
        com_velocity_targets: CoM velocity targets [m/s], shape (2, 3) (z = 0).
        zmp_targets: ZMP at ``target_times`` [m], shape (2, 3); z = ground height.
        initial_state: MPC initial state at ``t`` after feedback, shape (3, 2).
        feedback_applied: Whether the CoM feedback changed the initial state this tick.
        feedback_offset: Offset added to the initial CoM position [m], shape (2,).
        phase: Gait phase at ``t``.
        preview: Support boxes and ZMP references used by the MPC.
        plan: The MPC plan (predicted CoM and ZMP over the horizon, for rviz).
    """

    t: float
    status: PlanStatus
    target_times: np.ndarray
    com_targets: np.ndarray
    com_velocity_targets: np.ndarray
    zmp_targets: np.ndarray
    initial_state: np.ndarray
    feedback_applied: bool
    feedback_offset: np.ndarray
    phase: PhaseKind
    preview: Preview
    plan: Plan

    @property
    def preview_times(self) -> np.ndarray:
        """Times of the predicted samples [s], shape (N,)."""
        return self.plan.times

    @property
    def preview_com(self) -> np.ndarray:
        """Predicted CoM positions (x, y) [m], shape (N, 2)."""
        return self.plan.com_position

    @property
    def preview_zmp(self) -> np.ndarray:
        """Predicted ZMP (x, y) [m], shape (N, 2)."""
        return self.plan.zmp


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class _Prepared(NamedTuple):
    """A step solved ahead (:meth:`MpcPlanner.prepare`) and what it is valid for."""

    t: float
    timeline: Timeline
    plan_before: Plan
    output: PlannerOutput
    solved: tuple  # Mpc.save() after the solve


class MpcPlanner:
    """Walking pattern generator owning a :class:`Timeline` and an :class:`Mpc`.

    Args:
        params: Planner parameters.
        timeline: Optional initial timeline (see :meth:`set_timeline`).
    """

    def __init__(self, params: PlannerParameters = PlannerParameters(), timeline: Optional[Timeline] = None):
        if not isinstance(params, PlannerParameters):
            raise ParameterError("params", params, "a PlannerParameters")
        self.params = params
        self.mpc = Mpc(params.mpc, first_interval=params.control_period)
        self.model = self.mpc.model
        self._timeline: Optional[Timeline] = None
        self._builder: Optional[PreviewBuilder] = None
        self._initial_position: Optional[np.ndarray] = None
        self._plan: Optional[Plan] = None
        self._t_last: Optional[float] = None
        self._prepared: Optional[_Prepared] = None
        self._last_prepared = False
        if timeline is not None:
            self.set_timeline(timeline)

    @property
    def timeline(self) -> Optional[Timeline]:
        """The current timeline."""
        return self._timeline

    @property
    def plan(self) -> Optional[Plan]:
        """The last plan (None before the first step)."""
        return self._plan

    def set_timeline(self, timeline: Timeline) -> None:
        """Use ``timeline`` from the next :meth:`step` on (the planned CoM state is kept)."""
        if not isinstance(timeline, Timeline):
            raise InputError("timeline", timeline, "a Timeline")
        self._timeline = timeline
        self._prepared = None
        p = self.params
        self._builder = PreviewBuilder(timeline, p.sole, p.mpc.sampling_period, p.mpc.horizon,
                                       first_interval=p.control_period, inward=p.zmp_inward_offset,
                                       compiled=p.mpc.compiled_kernels)
        self._builder.durations = self.mpc.durations  # share the grid array (checked once by the MPC)

    def reset(self, com_position: Optional[np.ndarray] = None) -> None:
        """Forget the plan; the next step starts at rest at ``com_position`` (x, y) [m] (default: the
        measured CoM of the first step, else the middle of the soles)."""
        self._plan = None
        self._t_last = None
        self._prepared = None
        self.mpc.reset()
        self._initial_position = None if com_position is None else _xy("com_position", com_position)

    def planned_state(self, t: float) -> np.ndarray:
        """Planned CoM state (3, 2) at time ``t`` [s] (before feedback)."""
        if self._plan is None:
            raise InputError("t", t, "a time after the first step() call")
        prepared = self._prepared
        if (prepared is not None and prepared.t == t and prepared.timeline is self._timeline
                and prepared.plan_before is self._plan):
            return prepared.output.initial_state.copy()  # the same integration, done by prepare()
        return self._plan.state_at(t - self._plan.t_start)

    def step(self, t: float, measured_com: Optional[np.ndarray] = None) -> PlannerOutput:
        """Plan at time ``t`` [s]; see the module docstring.

        Args:
            t: Current time [s], non-decreasing between calls.
            measured_com: Measured CoM position (x, y) or (x, y, z) [m] in the world frame, or None.

        Raises:
            InputError: Without a timeline, when time goes backwards, or on a malformed CoM.
        """
        if self._timeline is None:
            raise InputError("timeline", None, "set_timeline() before step()")
        if not (isinstance(t, (int, float)) and math.isfinite(t)):
            raise InputError("t", t, "a finite time [s]")
        t = float(t)
        measured = None if measured_com is None else _xy("measured_com", measured_com)
        if self._t_last is not None and t < self._t_last - 1e-9:
            raise InputError("t", t, f"a time >= the previous call's {self._t_last} s")
        prepared, self._prepared = self._prepared, None
        self._last_prepared = False
        if self._plan is None:
            if self._initial_position is not None:
                start = self._initial_position
            elif measured is not None:
                start = measured
            else:
                start = stance_centre(self._timeline, t, self.params.sole)
            state = np.zeros((3, 2))
            state[0] = start
        elif (prepared is not None and prepared.t == t and prepared.timeline is self._timeline
              and prepared.plan_before is self._plan):
            state = prepared.output.initial_state
            if measured is None or not self._feedback_due(measured - state[0]):
                self.mpc.restore(prepared.solved)  # the prepared solve is this step's: as if solved now
                self._plan = prepared.output.plan
                self._t_last = t
                self._last_prepared = True
                return prepared.output
            state = state.copy()
        else:
            state = self._plan.state_at(t - self._plan.t_start)
        offset = np.zeros(2)
        applied = False
        if measured is not None:
            error = measured - state[0]
            if self._feedback_due(error):
                offset = self.params.feedback_gain * error
                offset = self._bound_standing(t, state[0], offset)
                state[0] += offset
                applied = True
        output = self._solve(t, state, applied, offset)
        self._plan = output.plan
        self._t_last = t
        return output

    def _bound_standing(self, t: float, position: np.ndarray, offset: np.ndarray) -> np.ndarray:
        """``offset`` shortened so that ``position + offset`` stays within ``standing_feedback_radius`` of the
        middle of the soles while the timeline stands at ``t`` (never farther out than ``position``)."""
        radius = self.params.standing_feedback_radius
        if radius <= 0.0 or self._timeline.phase_at(t).kind is not PhaseKind.STAND:
            return offset
        centre = stance_centre(self._timeline, t, self.params.sole)
        target = position + offset - centre
        distance = math.hypot(target[0], target[1])
        limit = max(radius, math.hypot(*(position - centre)))
        if distance <= limit:
            return offset
        return centre + target * (limit / distance) - position

    def prepare(self, t: float) -> bool:
        """Solve the step at ``t`` [s] now, before its measurement, as :meth:`step` would without CoM
        feedback; the planner's state is left as it was.

        The next :meth:`step` returns this output when it is called at exactly ``t``, with the same
        timeline, right after the step this preparation followed, and its measured CoM (if any) is within
        ``feedback_threshold`` of the planned one: then no feedback applies and the step would solve
        exactly this problem (same initial state, preview and warm start). Otherwise the preparation is
        dropped and the step solves as usual, as if :meth:`prepare` had not been called. This moves the
        MPC solve off the path from a measurement to its targets whenever the feedback does not act
        (seed 001's threshold). :meth:`set_timeline` and :meth:`reset` drop a preparation.

        Returns:
            True when prepared; False before the first step (its initial state is measured).

        Raises:
            InputError: Without a timeline, or at a time that is not finite or before the last step.
        """
        if self._timeline is None:
            raise InputError("timeline", None, "set_timeline() before prepare()")
        if not (isinstance(t, (int, float)) and math.isfinite(t)):
            raise InputError("t", t, "a finite time [s]")
        t = float(t)
        if self._t_last is not None and t < self._t_last - 1e-9:
            raise InputError("t", t, f"a time >= the last step's {self._t_last} s")
        self._prepared = None
        if self._plan is None:
            return False
        saved = self.mpc.save()
        output = self._solve(t, self._plan.state_at(t - self._plan.t_start), False, np.zeros(2))
        self._prepared = _Prepared(t, self._timeline, self._plan, output, self.mpc.save())
        self.mpc.restore(saved)
        return True

    @property
    def prepared_output(self) -> Optional[PlannerOutput]:
        """The output of the pending :meth:`prepare` (None if none), what the step will return if its
        measurement confirms it."""
        return None if self._prepared is None else self._prepared.output

    @property
    def last_step_prepared(self) -> bool:
        """Whether the last :meth:`step` returned a :meth:`prepare`d output."""
        return self._last_prepared

    def _feedback_due(self, error: np.ndarray) -> bool:
        return math.hypot(error[0], error[1]) > self.params.feedback_threshold

    def _solve(self, t: float, state: np.ndarray, applied: bool, offset: np.ndarray) -> PlannerOutput:
        """Solve from ``state`` at ``t`` and sample the targets (the planner's plan is not changed)."""
        preview = self._builder.build(t)
        plan = self.mpc.solve(state, preview)
        tc = self.params.control_period
        times = np.array([t + tc, t + 2.0 * tc])
        zeta = self.model.zeta
        com = np.zeros((2, 3))
        vel = np.zeros((2, 3))
        zmp = np.zeros((2, 3))
        for k, tk in enumerate(times):
            s = plan.state_at(tk - plan.t_start)
            ground = self._ground_height(tk)
            com[k] = s[0, 0], s[0, 1], ground + self.model.com_height
            vel[k, :2] = s[1]
            zmp[k] = s[0, 0] - zeta * s[2, 0], s[0, 1] - zeta * s[2, 1], ground
        state.flags.writeable = False
        return PlannerOutput(t, plan.status, _frozen(times), _frozen(com), _frozen(vel), _frozen(zmp), state,
                             applied, _frozen(offset), self._timeline.phase_at(t).kind, preview, plan)

    def _ground_height(self, t: float) -> float:
        """Mean height of the soles at ``t`` [m] (the same float as np.mean, without its overhead); in single
        support the swing sole's counts from its lift-off height to its touchdown height along the quintic
        blend ``b``, within the first :data:`COM_RISE_SPAN` of the swing stepping up, the last
        :data:`COM_DESCENT_SPAN` stepping down: on stairs (StepData z) the CoM height follows the feet
        continuously (position, velocity and acceleration; it jumped by half the height change at
        lift-off and touchdown), from the mean of the soles before the step to the mean after it. On level
        ground the stance sole's height, as before."""
        phase = self._timeline.phase_at(t)
        if phase.kind is PhaseKind.SINGLE:
            stance = phase.foot(phase.swing_foot.other).position[2]
            z0, z1 = phase.swing_start.position[2], phase.foot(phase.swing_foot).position[2]
            if z0 == z1 == stance:
                return stance
            s = phase.progress(t)
            if z1 > z0:
                s = min(1.0, s / COM_RISE_SPAN)
            elif z1 < z0:
                s = max(0.0, (s - 1.0 + COM_DESCENT_SPAN) / COM_DESCENT_SPAN)
            swing = z0 + (z1 - z0) * s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)
            return (stance + swing) / 2.0
        return (phase.left.position[2] + phase.right.position[2]) / 2.0

    def correct_support(self, foot: Foot, measured_pose: FootPose, t: Optional[float] = None) -> np.ndarray:
        """Replace the planned pose of the support ``foot`` by the measured one; translate every later
        step by the same offset (position only; the corrected foot also takes the measured yaw).

        The corrected step is the last touchdown of ``foot`` at or before ``t`` (default: the time of
        the last :meth:`step`, or the timeline start), or the initial pose if it has not stepped yet.

        Returns:
            The applied position offset [m], shape (3,).

        Raises:
            InputError: Without a timeline or on a malformed pose.
        """
        timeline = self._timeline
        if timeline is None:
            raise InputError("timeline", None, "set_timeline() before correct_support()")
        try:
            foot = Foot(int(foot))
        except (TypeError, ValueError):
            raise InvalidStepError(-1, f"foot {foot!r} is not 0 (left) or 1 (right)") from None
        if not isinstance(measured_pose, FootPose):
            raise InputError("measured_pose", measured_pose, "a FootPose")
        if t is None:
            t = self._t_last if self._t_last is not None else timeline.t0
        landed = last_touchdown(timeline, foot, t)
        planned = timeline.phases[0].foot(foot) if landed is None else FootPose.of_step(landed)
        offset = np.asarray(measured_pose.position) - np.asarray(planned.position)
        self.set_timeline(corrected_timeline(timeline, foot, measured_pose, t, shift_later_steps=True))
        return _frozen(offset)


def _xy(name: str, value) -> np.ndarray:
    try:
        array = np.array(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(name, value, "2 or 3 numbers [m]") from None
    if array.shape[0] not in (2, 3):
        raise ShapeError(name, array.shape, "(2,) or (3,)")
    if not np.all(np.isfinite(array)):
        raise InputError(name, value, "finite values")
    return array[:2].copy()


__all__ = ["MpcPlanner", "PlannerOutput", "PlannerParameters"]
