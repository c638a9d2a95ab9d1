"""Support-foot correction (seed 001, second feedback): a landed, settled sole's measured pose is its plan.

One policy shared by every consumer of the gait timeline (the MPC planner, the IK targets, the in-process
closed loop), so that they all walk on the same corrected timeline:

* **When.** At each *lift-off* (a SINGLE phase starts) the stance foot has landed and settled during the
  preceding double support: its measured pose replaces the pose of its last touchdown (or its start pose
  before its first step). At the start of CATCH the same is done for the foot of the last step. Correcting
  at the next lift-off rather than at touchdown leaves the foot the whole double support to settle (under
  physics it may still bounce at touchdown). The decision is made on the phase of the control tick (a change
  of ``(phase kind, step index)`` between two calls of :meth:`SupportCorrector.observe`), so processes ticking
  on the same sensor stamps correct on the same tick.
* **What.** The corrected pose is the measured position and yaw; its height is the measured one with
  ``measured_height`` (the IK then targets the swing foot's touchdown height relative to where the stance
  sole really is), else the planned one (flat ground at the planned height). The swing foot keeps its
  planned world pose: a stance foot moved to where it is, and a swing foot aimed at its planned pose,
  make each step land on its planned world position, so landing errors do not accumulate. With
  ``shift_later_steps`` every later step is also translated by the correction's offset (the whole plan
  follows the measured feet; errors then accumulate in the world frame).
* **New plans.** :meth:`SupportCorrector.set_plan` takes a plan as published (uncorrected, e.g. a longer
  footstep queue of the same walk) and re-applies the corrections so far to the steps (same step index,
  foot and planned pose) and start feet (same foot and planned pose) it still holds; corrections matching
  nothing are dropped (a new walk).

Pure Python over :class:`~walk_mpc.core.walk.timeline.Timeline`: no ROS import.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Optional, Union

from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, PhaseKind, Timeline

#: Largest difference [m, rad] between two poses taken as the same planned pose (they travel as float64).
POSE_TOLERANCE = 1e-9

FeetMeasurement = Union[Mapping[Foot, FootPose], Callable[[Foot], FootPose]]


@dataclasses.dataclass(frozen=True)
class SupportCorrectionParameters:
    """When and how the support-foot correction applies.

    Attributes:
        enabled: Correct the support foot at each lift-off (False: the timeline is the plan; landings
            are still measured and reported).
        shift_later_steps: Also translate every later step by the correction's position offset.
        measured_height: Use the measured sole height (else the planned one) in the corrected pose.
    """

    enabled: bool = True
    shift_later_steps: bool = False
    measured_height: bool = False

    def __post_init__(self) -> None:
        for name in ("enabled", "shift_later_steps", "measured_height"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")


@dataclasses.dataclass(frozen=True)
class SupportCorrection:
    """One correction of a support foot.

    Attributes:
        foot: The corrected foot.
        step_index: Index of the corrected step (its last touchdown), 0 for its start pose.
        t: Time of the correction [s] (timeline time).
        planned: The pose in the plan as received (before any correction).
        measured: The measured pose (height as ``measured_height`` says), which replaced it if ``applied``.
        applied: False when the correction is disabled (the landing was measured, the plan kept).
    """

    foot: Foot
    step_index: int
    t: float
    planned: FootPose
    measured: FootPose
    applied: bool = True

    @property
    def position_error(self) -> float:
        """Horizontal distance [m] between the measured and the planned pose."""
        return math.hypot(self.measured.position[0] - self.planned.position[0],
                          self.measured.position[1] - self.planned.position[1])

    @property
    def yaw_error(self) -> float:
        """Measured minus planned yaw [rad], wrapped to [-pi, pi)."""
        return (self.measured.yaw - self.planned.yaw + math.pi) % (2.0 * math.pi) - math.pi


def last_touchdown(timeline: Timeline, foot: Foot, t: float) -> Optional[Step]:
    """The last step of ``foot`` whose touchdown is at or before ``t`` [s], or None."""
    landed = None
    for phase in timeline.phases:
        if phase.t_start > t + 1e-9:
            break
        if phase.kind is PhaseKind.SINGLE and phase.swing_foot is foot and phase.t_end <= t + 1e-9:
            landed = phase.step_index
    if landed is None:
        return None
    return next(s for s in timeline.steps if s.step_index == landed)


def anchor_foot(timeline: Timeline, t: float, previous_stance: Optional[Sequence[Foot]] = None) -> Foot:
    """The stance foot that places the base of a sample without base estimate (kinematic odometry).

    A stance foot at ``t`` that was already in stance at the previous tick (``previous_stance``), so a
    foot that has just touched down is not trusted yet; else the first stance foot of the phase.
    """
    stance = timeline.phase_at(t).stance_feet
    previous = stance if previous_stance is None else tuple(previous_stance)
    return next((foot for foot in stance if foot in previous), stance[0])


def corrected_timeline(timeline: Timeline, foot: Foot, pose: FootPose, t: float,
                       shift_later_steps: bool = False) -> Timeline:
    """``timeline`` with the last touchdown of ``foot`` by ``t`` [s] (else its start pose) moved to ``pose``.

    Args:
        timeline: Gait timeline.
        foot: Support foot.
        pose: Its measured pose (position and yaw replace the planned ones).
        t: Time of the correction [s].
        shift_later_steps: Also translate every later step by the position offset.
    """
    landed = last_touchdown(timeline, foot, t)
    index = None if landed is None else landed.step_index
    return _replace(timeline, foot, index, pose, shift_later_steps)


def _replace(timeline: Timeline, foot: Foot, step_index: Optional[int], pose: FootPose,
             shift: bool) -> Timeline:
    first = timeline.phases[0]
    starts = {Foot.LEFT: first.left, Foot.RIGHT: first.right}
    steps = list(timeline.steps)
    if step_index is None:
        planned = starts[foot]
        starts[foot] = pose
        later = range(len(steps))
    else:
        k = next(i for i, s in enumerate(steps) if s.step_index == step_index)
        planned = FootPose.of_step(steps[k])
        steps[k] = steps[k].replace(position=pose.position, yaw=pose.yaw)
        later = range(k + 1, len(steps))
    if shift:
        offset = [m - p for m, p in zip(pose.position, planned.position)]
        for i in later:
            steps[i] = steps[i].replace(position=tuple(v + d for v, d in zip(steps[i].position, offset)))
    return Timeline(starts[Foot.LEFT], starts[Foot.RIGHT], steps, timeline.timing, timeline.t0)


def _same_pose(a: FootPose, b: FootPose) -> bool:
    return (all(abs(x - y) <= POSE_TOLERANCE for x, y in zip(a.position, b.position))
            and abs(a.yaw - b.yaw) <= POSE_TOLERANCE)


class SupportCorrector:
    """Support-foot correction policy over a plan (see the module docstring).

    Example:
        >>> corrector = SupportCorrector()
        >>> timeline = corrector.set_plan(plan)           # each plan as received
        >>> correction = corrector.observe(t, measured_feet)  # every control tick
        >>> if correction is not None:
        ...     planner.set_timeline(corrector.timeline)
    """

    Parameters = SupportCorrectionParameters

    def __init__(self, params: Optional[SupportCorrectionParameters] = None) -> None:
        self.params = params if params is not None else SupportCorrectionParameters()
        if not isinstance(self.params, SupportCorrectionParameters):
            raise ParameterError("params", self.params, "a SupportCorrectionParameters")
        self.reset()

    def reset(self) -> None:
        """Forget the plan, the corrections and the phase of the last observation."""
        self._plan: Optional[Timeline] = None
        self._timeline: Optional[Timeline] = None
        self._corrections: list[SupportCorrection] = []
        self._phase_key: Optional[tuple] = None

    @property
    def plan(self) -> Optional[Timeline]:
        """The plan as received (None before :meth:`set_plan`)."""
        return self._plan

    @property
    def timeline(self) -> Optional[Timeline]:
        """The corrected timeline (None before :meth:`set_plan`)."""
        return self._timeline

    @property
    def corrections(self) -> tuple[SupportCorrection, ...]:
        """The corrections applied to the current plan, oldest first."""
        return tuple(self._corrections)

    def set_plan(self, plan: Timeline) -> Timeline:
        """Follow ``plan`` (as published, uncorrected); re-apply the corrections it still matches.

        Returns:
            The corrected timeline.

        Raises:
            InputError: ``plan`` is not a Timeline.
        """
        if not isinstance(plan, Timeline):
            raise InputError("plan", plan, "a Timeline")
        self._plan = plan
        first = plan.phases[0]
        starts = {Foot.LEFT: first.left, Foot.RIGHT: first.right}
        steps = {s.step_index: s for s in plan.steps}
        kept = []
        for c in self._corrections:
            step = steps.get(c.step_index)
            if step is not None and step.foot is c.foot and _same_pose(FootPose.of_step(step), c.planned):
                kept.append(c)
            elif _same_pose(starts[c.foot], c.planned):
                kept.append(dataclasses.replace(c, step_index=0))
        self._corrections = kept
        self._rebuild()
        return self._timeline

    def observe(self, t: float, feet: FeetMeasurement) -> Optional[SupportCorrection]:
        """Correct the support foot if a lift-off (or CATCH) began since the previous call.

        Args:
            t: Time of the control tick [s] (timeline time).
            feet: Measured sole poses by foot, or a function measuring one foot (called only when a
                correction is due).

        Returns:
            The correction (:attr:`timeline` changed if it is ``applied``; with ``enabled`` false the
            landing is measured all the same, not applied), or None when none is due.

        Raises:
            InputError: Before :meth:`set_plan`, or ``t`` is not finite.
        """
        if self._plan is None:
            raise InputError("plan", None, "set_plan() before observe()")
        if not (isinstance(t, (int, float)) and math.isfinite(t)):
            raise InputError("t", t, "a finite time [s]")
        plan = self._plan
        phase = plan.phase_at(t)
        key = (phase.kind, phase.step_index)
        previous, self._phase_key = self._phase_key, key
        if previous is None or key == previous:
            return None
        if phase.kind is PhaseKind.SINGLE:
            foot = phase.swing_foot.other
        elif phase.kind is PhaseKind.CATCH and plan.steps:
            foot = plan.steps[-1].foot
        else:
            return None
        pose = feet(foot) if callable(feet) else feet[foot]
        if not isinstance(pose, FootPose):
            raise InputError("feet", pose, "a FootPose per foot")
        landed = last_touchdown(plan, foot, t)
        first = plan.phases[0]
        planned = FootPose.of_step(landed) if landed is not None else first.foot(foot)
        height = pose.position[2] if self.params.measured_height else planned.position[2]
        measured = FootPose((pose.position[0], pose.position[1], height), pose.yaw)
        correction = SupportCorrection(foot, 0 if landed is None else landed.step_index, float(t), planned,
                                       measured, self.params.enabled)
        if not correction.applied:
            return correction
        self._corrections = [c for c in self._corrections
                             if not (c.foot is foot and c.step_index == correction.step_index)]
        self._corrections.append(correction)
        self._rebuild()
        return correction

    def _rebuild(self) -> None:
        """The plan with every correction applied in order, as one new Timeline (one construction,
        whatever the number of corrections)."""
        plan = self._plan
        if not self._corrections:
            self._timeline = plan
            return
        first = plan.phases[0]
        starts = {Foot.LEFT: first.left, Foot.RIGHT: first.right}
        steps = plan.steps
        poses = [(s.position, s.yaw) for s in steps]  # (position, yaw) of each step, corrected in place
        slot = {s.step_index: k for k, s in enumerate(steps)}
        shift = self.params.shift_later_steps
        for c in self._corrections:
            k = slot.get(c.step_index)
            if k is None:
                planned = starts[c.foot].position
                starts[c.foot] = c.measured
                later = range(len(steps))
            else:
                planned = poses[k][0]
                poses[k] = (tuple(c.measured.position), c.measured.yaw)
                later = range(k + 1, len(steps))
            if shift:
                offset = [m - p for m, p in zip(c.measured.position, planned)]
                for i in later:
                    poses[i] = (tuple(v + d for v, d in zip(poses[i][0], offset)), poses[i][1])
        corrected = [s if pose == (s.position, s.yaw) else s.replace(position=pose[0], yaw=pose[1])
                     for s, pose in zip(steps, poses)]
        self._timeline = Timeline(starts[Foot.LEFT], starts[Foot.RIGHT], corrected, plan.timing, plan.t0)

__all__ = ["POSE_TOLERANCE", "SupportCorrection", "SupportCorrectionParameters", "SupportCorrector",
           "anchor_foot", "corrected_timeline", "last_touchdown"]
