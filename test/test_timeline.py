"""Specification of the gait timeline."""

import math

import pytest

from walk_mpc.core.errors import InconsistentStepsError, InvalidStepError, ParameterError
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

LEFT0 = FootPose((0.0, 0.1, 0.0))
RIGHT0 = FootPose((0.0, -0.1, 0.0))
TIMING = GaitTiming(sway_duration=0.5, double_support_duration=0.2, catch_duration=0.4)


def forward_steps(n, length=0.2):
    return [Step(k, Foot.LEFT if k % 2 else Foot.RIGHT, 1.0,
                 (k * length, 0.1 if k % 2 else -0.1, 0.0)) for k in range(1, n + 1)]


def test_phases_follow_sway_single_double_catch_stand():
    timeline = Timeline(LEFT0, RIGHT0, forward_steps(2), TIMING)
    kinds = [p.kind for p in timeline.phases]
    assert kinds == [PhaseKind.SWAY, PhaseKind.SINGLE, PhaseKind.DOUBLE, PhaseKind.SINGLE,
                     PhaseKind.DOUBLE, PhaseKind.CATCH, PhaseKind.STAND]
    assert [p.t_start for p in timeline.phases] == pytest.approx([0, 0.5, 1.3, 1.5, 2.3, 2.5, 2.9])
    assert math.isinf(timeline.phases[-1].t_end)
    assert timeline.t_end == pytest.approx(2.9)


def test_single_support_carries_swing_start_and_touchdown_pose():
    timeline = Timeline(LEFT0, RIGHT0, forward_steps(2), TIMING)
    single = timeline.phase_at(0.6)
    assert single.swing_foot is Foot.LEFT
    assert single.swing_start == LEFT0
    assert single.left.position == (0.2, 0.1, 0.0)
    assert single.stance_feet == (Foot.RIGHT,)
    assert timeline.phase_at(0.1).next_stance is Foot.RIGHT


def test_touchdown_time_and_completed_index():
    timeline = Timeline(LEFT0, RIGHT0, forward_steps(3), TIMING)
    assert timeline.touchdown_time(1) == pytest.approx(1.3)
    assert timeline.completed_step_index(1.29) == 0
    assert timeline.completed_step_index(1.3) == 1
    assert timeline.completed_step_index(100.0) == 3
    with pytest.raises(InvalidStepError):
        timeline.touchdown_time(9)


def test_same_foot_twice_raises_inconsistent():
    steps = forward_steps(2)
    steps[1] = steps[1].replace(foot=Foot.LEFT)
    with pytest.raises(InconsistentStepsError) as info:
        Timeline(LEFT0, RIGHT0, steps, TIMING)
    assert (info.value.first_index, info.value.second_index) == (1, 2)


def test_non_increasing_index_and_short_duration_rejected():
    steps = forward_steps(2)
    with pytest.raises(InvalidStepError, match="does not increase"):
        Timeline(LEFT0, RIGHT0, [steps[1], steps[0].replace(step_index=2, foot=Foot.LEFT)], TIMING)
    with pytest.raises(InvalidStepError, match="not longer than the double support"):
        Timeline(LEFT0, RIGHT0, [steps[0].replace(duration=0.1)], TIMING)


def test_timing_rejects_nonpositive_durations():
    with pytest.raises(ParameterError, match="sway_duration"):
        GaitTiming(sway_duration=0.0)


def test_empty_plan_is_sway_catch_stand():
    timeline = Timeline(LEFT0, RIGHT0, [], TIMING)
    assert [p.kind for p in timeline.phases] == [PhaseKind.SWAY, PhaseKind.CATCH, PhaseKind.STAND]


def test_walking_at_is_true_from_the_start_until_stand_only_with_steps():
    walk = Timeline(LEFT0, RIGHT0, forward_steps(2), TIMING)
    assert walk.walking_at(0.0) and walk.walking_at(2.89) and not walk.walking_at(2.9)
    assert not Timeline(LEFT0, RIGHT0, [], TIMING).walking_at(0.0)
