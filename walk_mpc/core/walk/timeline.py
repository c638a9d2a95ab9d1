"""Gait timeline: the sequence of single- and double-support phases implied by a list of steps.

This is the timing contract shared by the walk behavior (touchdowns, ``t_step_rem``),
the MPC preview (support polygon and ZMP reference per instant) and the IK (swing
foot trajectory).

Convention (times in seconds from the start of Walk):

* ``[0, sway_duration)``: SWAY, double support, weight shifts onto the first stance foot.
* For each step ``k`` (``Step.duration = single support + double support``):
  ``[t_k, t_k + duration - double_support_duration)``: SINGLE support on the other foot
  while foot ``k`` swings; touchdown of step ``k`` at the end of it; then
  ``[.., t_k + duration)``: DOUBLE support.
* ``[t_end, t_end + catch_duration)``: CATCH, double support, CoM back between the feet.
* After that: STAND (double support, open ended).
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
import math
from typing import Optional, Sequence, Tuple

from walk_mpc.core.errors import InconsistentStepsError, InvalidStepError
from walk_mpc.core.params import check_positive
from walk_mpc.core.walk.step import VERTICAL, Foot, Step, ground_tilt, unit_normal

Vec3 = Tuple[float, float, float]


@dataclasses.dataclass(frozen=True)
class FootPose:
    """Sole pose on the ground: position [m] in the world frame, yaw [rad] and the ground's unit normal (the
    sole lies flat on it: :attr:`tilt`; vertical by default, level ground)."""

    position: Vec3
    yaw: float = 0.0
    normal: Vec3 = VERTICAL

    def __post_init__(self) -> None:
        pos = tuple(float(v) for v in self.position)
        if len(pos) != 3 or not all(math.isfinite(v) for v in pos) or not math.isfinite(self.yaw):
            raise InvalidStepError(-1, f"foot pose {self.position!r}, yaw {self.yaw!r} is not finite 3D")
        object.__setattr__(self, "position", pos)
        object.__setattr__(self, "yaw", float(self.yaw))
        if self.normal is not VERTICAL:
            normal = tuple(float(v) for v in self.normal)
            if len(normal) != 3 or not all(math.isfinite(v) for v in normal):
                raise InvalidStepError(-1, f"foot pose normal {self.normal!r} is not 3 finite numbers")
            object.__setattr__(self, "normal", unit_normal(normal))

    @property
    def tilt(self) -> tuple[float, float]:
        """Roll and pitch [rad] of the sole on its ground (:func:`~walk_mpc.core.walk.step.ground_tilt`;
        exactly zero on level ground)."""
        return ground_tilt(self.yaw, self.normal)

    @property
    def level(self) -> bool:
        """Whether the ground under the sole is level (its normal vertical)."""
        return self.normal[0] == 0.0 and self.normal[1] == 0.0

    @staticmethod
    def of_step(step: Step) -> FootPose:
        """Touchdown pose of a step."""
        return FootPose(step.position, step.yaw, step.normal)


@dataclasses.dataclass(frozen=True)
class GaitTiming:
    """Timing parameters of the gait.

    Attributes:
        sway_duration: Initial double support before the first lift-off [s].
        double_support_duration: Double support after each touchdown, included in Step.duration [s].
        catch_duration: Final double support after the last step, before Stand [s].
    """

    sway_duration: float = 0.6
    double_support_duration: float = 0.3
    catch_duration: float = 0.6

    def __post_init__(self) -> None:
        check_positive("sway_duration", self.sway_duration)
        check_positive("double_support_duration", self.double_support_duration)
        check_positive("catch_duration", self.catch_duration)


class PhaseKind(enum.Enum):
    """Kind of a gait phase."""

    SWAY = "sway"
    SINGLE = "single"
    DOUBLE = "double"
    CATCH = "catch"
    STAND = "stand"


@dataclasses.dataclass(frozen=True)
class Phase:
    """One phase of the timeline.

    Attributes:
        kind: Phase kind.
        t_start: Start time [s].
        t_end: End time [s] (``math.inf`` for the final STAND).
        left: Left sole pose during the phase (its touchdown pose if it swings).
        right: Right sole pose during the phase (its touchdown pose if it swings).
        step_index: Index of the step this phase belongs to (0 for SWAY, last index for CATCH/STAND).
        swing_foot: Foot in the air (SINGLE only), else None.
        swing_start: Lift-off pose of the swing foot (SINGLE only).
        swing_height: Swing apex height [m] (SINGLE only).
        next_stance: Foot that will carry the weight next (SWAY/DOUBLE), None at the end of the plan.
    """

    kind: PhaseKind
    t_start: float
    t_end: float
    left: FootPose
    right: FootPose
    step_index: int
    swing_foot: Optional[Foot] = None
    swing_start: Optional[FootPose] = None
    swing_height: float = 0.0
    next_stance: Optional[Foot] = None

    @property
    def duration(self) -> float:
        """Phase duration [s]."""
        return self.t_end - self.t_start

    def progress(self, t: float) -> float:
        """Normalised time in the phase, clipped to [0, 1] (0 for an open-ended phase)."""
        if math.isinf(self.t_end):
            return 0.0
        return min(1.0, max(0.0, (t - self.t_start) / self.duration))

    def foot(self, foot: Foot) -> FootPose:
        """Pose of ``foot`` (touchdown pose for the swing foot)."""
        return self.left if foot is Foot.LEFT else self.right

    @property
    def stance_feet(self) -> Tuple[Foot, ...]:
        """Feet in contact with the ground during the phase."""
        if self.kind is PhaseKind.SINGLE:
            return (self.swing_foot.other,)
        return (Foot.LEFT, Foot.RIGHT)


class Timeline:
    """Immutable sequence of phases built from initial feet and steps.

    Args:
        left: Initial left sole pose (step 0).
        right: Initial right sole pose (step 0).
        steps: Steps 1..n (strictly increasing indices, alternating feet).
        timing: Gait timing parameters.
        t0: Start time of Walk [s].

    Raises:
        InvalidStepError: If indices do not increase or a step is shorter than the double support.
        InconsistentStepsError: If two consecutive steps use the same foot.
    """

    def __init__(
        self,
        left: FootPose,
        right: FootPose,
        steps: Sequence[Step],
        timing: GaitTiming = GaitTiming(),
        t0: float = 0.0,
    ) -> None:
        self.timing = timing
        self.steps: Tuple[Step, ...] = tuple(steps)
        phases = []
        t = t0
        feet = {Foot.LEFT: left, Foot.RIGHT: right}
        first_stance = self.steps[0].foot.other if self.steps else None
        phases.append(Phase(PhaseKind.SWAY, t, t + timing.sway_duration, left, right, 0,
                            next_stance=first_stance))
        t += timing.sway_duration
        previous: Optional[Step] = None
        for k, step in enumerate(self.steps):
            if previous is not None:
                if step.step_index <= previous.step_index:
                    raise InvalidStepError(
                        step.step_index,
                        f"step_index {step.step_index} does not increase after {previous.step_index}",
                    )
                if step.foot == previous.foot:
                    raise InconsistentStepsError(previous.step_index, step.step_index, int(step.foot))
            single = step.duration - timing.double_support_duration
            if single <= 0.0:
                raise InvalidStepError(
                    step.step_index,
                    f"duration {step.duration} s is not longer than the double support "
                    f"{timing.double_support_duration} s",
                )
            start = feet[step.foot]
            feet[step.foot] = FootPose.of_step(step)
            phases.append(Phase(PhaseKind.SINGLE, t, t + single, feet[Foot.LEFT], feet[Foot.RIGHT],
                                step.step_index, swing_foot=step.foot, swing_start=start,
                                swing_height=step.swing_height))
            t += single
            nxt = self.steps[k + 1].foot.other if k + 1 < len(self.steps) else None
            phases.append(Phase(PhaseKind.DOUBLE, t, t + timing.double_support_duration,
                                feet[Foot.LEFT], feet[Foot.RIGHT], step.step_index, next_stance=nxt))
            t += timing.double_support_duration
            previous = step
        last = self.steps[-1].step_index if self.steps else 0
        phases.append(Phase(PhaseKind.CATCH, t, t + timing.catch_duration, feet[Foot.LEFT],
                            feet[Foot.RIGHT], last))
        t += timing.catch_duration
        phases.append(Phase(PhaseKind.STAND, t, math.inf, feet[Foot.LEFT], feet[Foot.RIGHT], last))
        self.phases: Tuple[Phase, ...] = tuple(phases)
        self._starts = [p.t_start for p in phases]
        self.t0 = t0

    @property
    def t_end(self) -> float:
        """Time at which Stand begins [s]."""
        return self.phases[-1].t_start

    def walking_at(self, t: float) -> bool:
        """Whether the timeline walks at time ``t`` [s]: it has steps and Stand has not begun."""
        return bool(self.steps) and t < self.t_end

    def phase_index_at(self, t: float) -> int:
        """Index in :attr:`phases` of the phase containing ``t`` (the first one before t0)."""
        return max(0, bisect.bisect_right(self._starts, t) - 1)

    def phase_at(self, t: float) -> Phase:
        """Phase containing time ``t`` [s]."""
        return self.phases[self.phase_index_at(t)]

    def touchdown_time(self, step_index: int) -> float:
        """Touchdown time [s] of the step with this index (end of its single support).

        Raises:
            InvalidStepError: If no step of the timeline has this index.
        """
        for phase in self.phases:
            if phase.kind is PhaseKind.SINGLE and phase.step_index == step_index:
                return phase.t_end
        raise InvalidStepError(step_index, "no such step in the timeline")

    def completed_step_index(self, t: float) -> int:
        """Index of the last step whose touchdown happened at or before ``t`` (0 before the first)."""
        done = 0
        for phase in self.phases[: self.phase_index_at(t) + 1]:
            if phase.kind is PhaseKind.SINGLE and phase.t_end <= t:
                done = phase.step_index
        return done
