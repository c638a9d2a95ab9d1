"""Specification of the footstep generators."""

import math
import random

import pytest

from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.walk.behavior import Behavior, WalkBehavior, WalkErrorCode
from walk_mpc.core.walk.footsteps import (
    stance_center,
    step_flags,
    turn_in_place,
    walk_arc,
    walk_backward,
    walk_forward,
    walk_sideways,
    walk_to_pose,
)
from walk_mpc.core.walk.saturation import SaturationFlags, StepLimits, wrap_angle
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, GaitTiming

LEFT0 = FootPose((0.0, 0.1, 0.0))
RIGHT0 = FootPose((0.0, -0.1, 0.0))

GENERATORS = {
    "forward": lambda lf, rf: walk_forward(lf, rf, 1.3),
    "backward": lambda lf, rf: walk_backward(lf, rf, 0.45),
    "sideways_left": lambda lf, rf: walk_sideways(lf, rf, 0.35),
    "sideways_right": lambda lf, rf: walk_sideways(lf, rf, -0.35),
    "turn_left": lambda lf, rf: turn_in_place(lf, rf, math.pi / 2),
    "turn_right": lambda lf, rf: turn_in_place(lf, rf, -2.5),
    "arc_left": lambda lf, rf: walk_arc(lf, rf, 1.0, math.pi / 2),
    "arc_right": lambda lf, rf: walk_arc(lf, rf, 0.6, -1.0),
    "to_pose": lambda lf, rf: walk_to_pose(lf, rf, 1.0, 0.5, -1.0),
}


def random_stance(rng):
    x, y, yaw = rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(-math.pi, math.pi)
    lateral = (-math.sin(yaw) * 0.1, math.cos(yaw) * 0.1)
    return (FootPose((x + lateral[0], y + lateral[1], 0.0), yaw),
            FootPose((x - lateral[0], y - lateral[1], 0.0), yaw))


def assert_valid_plan(left, right, plan, limits=StepLimits()):
    assert plan, "empty plan"
    assert [s.step_index for s in plan] == list(range(1, len(plan) + 1))
    assert all(a.foot != b.foot for a, b in zip(plan[:-1], plan[1:]))
    assert step_flags(left, right, plan, limits) == (SaturationFlags.NONE,) * len(plan)
    last, before = plan[-1], plan[-2]
    assert last.yaw == pytest.approx(before.yaw)
    offset = [last.position[i] - before.position[i] for i in range(2)]
    assert math.hypot(*offset) == pytest.approx(0.2)  # feet together, one width apart
    heading = (math.cos(last.yaw), math.sin(last.yaw))
    assert offset[0] * heading[0] + offset[1] * heading[1] == pytest.approx(0.0, abs=1e-9)


def final_center(plan):
    a, b = plan[-1], plan[-2]
    left, right = (a, b) if a.foot is Foot.LEFT else (b, a)
    return stance_center(FootPose.of_step(left), FootPose.of_step(right))


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generators_produce_valid_alternating_plans_within_default_limits(name):
    assert_valid_plan(LEFT0, RIGHT0, GENERATORS[name](LEFT0, RIGHT0))


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generators_are_valid_from_any_stance(name):
    rng = random.Random(7)
    for _ in range(20):
        left, right = random_stance(rng)
        assert_valid_plan(left, right, GENERATORS[name](left, right))


def test_turn_in_place_ninety_degrees_ends_at_yaw_half_pi_without_moving():
    plan = turn_in_place(LEFT0, RIGHT0, math.pi / 2)
    x, y, _, yaw = final_center(plan)
    assert yaw == pytest.approx(math.pi / 2)
    assert plan[-1].yaw == pytest.approx(math.pi / 2) and plan[-2].yaw == pytest.approx(math.pi / 2)
    assert (x, y) == pytest.approx((0.0, 0.0), abs=1e-12)
    assert plan[0].foot is Foot.LEFT  # the foot on the side of the turn leads


def test_walk_to_pose_ends_at_the_pose():
    rng = random.Random(11)
    for _ in range(40):
        left, right = random_stance(rng)
        target = (rng.uniform(-2, 2), rng.uniform(-2, 2), rng.uniform(-math.pi, math.pi))
        plan = walk_to_pose(left, right, *target)
        assert_valid_plan(left, right, plan)
        x, y, _, yaw = final_center(plan)
        assert (x, y) == pytest.approx(target[:2], abs=1e-9)
        assert wrap_angle(yaw - target[2]) == pytest.approx(0.0, abs=1e-9)


def test_walk_forward_covers_the_distance_in_steps_of_at_most_step_length():
    plan = walk_forward(LEFT0, RIGHT0, 1.0, step_length=0.25)
    assert len(plan) == 5  # 4 advancing steps + feet together
    assert final_center(plan)[:2] == pytest.approx((1.0, 0.0))
    assert plan[0].position == pytest.approx((0.25, 0.1, 0.0))


def test_walk_backward_and_sideways_move_the_right_way():
    assert final_center(walk_backward(LEFT0, RIGHT0, 0.45))[:2] == pytest.approx((-0.45, 0.0))
    left = walk_sideways(LEFT0, RIGHT0, 0.35)
    right = walk_sideways(LEFT0, RIGHT0, -0.35)
    assert final_center(left)[:2] == pytest.approx((0.0, 0.35))
    assert final_center(right)[:2] == pytest.approx((0.0, -0.35))
    assert (left[0].foot, right[0].foot) == (Foot.LEFT, Foot.RIGHT)


def test_walk_arc_ends_on_the_circle_with_the_turned_heading():
    plan = walk_arc(LEFT0, RIGHT0, 1.0, math.pi / 2)
    x, y, _, yaw = final_center(plan)
    assert (x, y, yaw) == pytest.approx((1.0, 1.0, math.pi / 2))
    plan = walk_arc(LEFT0, RIGHT0, 1.0, -math.pi / 2)
    assert final_center(plan)[:2] == pytest.approx((1.0, -1.0))


def test_zero_motion_gives_an_empty_plan():
    assert walk_forward(LEFT0, RIGHT0, 0.0) == []
    assert turn_in_place(LEFT0, RIGHT0, 0.0) == []
    assert walk_to_pose(LEFT0, RIGHT0, 0.0, 0.0, 0.0) == []


def test_start_index_duration_and_swing_height_are_passed_through():
    plan = walk_forward(LEFT0, RIGHT0, 0.4, start_index=7, duration=1.1, swing_height=0.08)
    assert plan[0].step_index == 7
    assert {s.duration for s in plan} == {1.1} and {s.swing_height for s in plan} == {0.08}


def test_bad_arguments_raise_with_the_parameter_name():
    with pytest.raises(ParameterError, match="step_length"):
        walk_forward(LEFT0, RIGHT0, 1.0, step_length=0.0)
    with pytest.raises(ParameterError, match="distance"):
        walk_forward(LEFT0, RIGHT0, math.nan)
    with pytest.raises(ParameterError, match="radius"):
        walk_arc(LEFT0, RIGHT0, -1.0, 1.0)
    with pytest.raises(InputError, match="width"):
        walk_forward(LEFT0, RIGHT0, 1.0, width=0.6)  # wider than max_width
    with pytest.raises(InputError, match="duration"):
        walk_forward(LEFT0, RIGHT0, 1.0, duration=5.0)  # longer than max_duration
    with pytest.raises(InputError, match="within the step limits"):
        walk_forward(FootPose((0.0, 0.5, 0.0)), FootPose((0.0, -0.5, 0.0)), 1.0)  # feet 1 m apart


def test_step_length_beyond_the_limits_gets_more_steps_instead_of_saturation():
    plan = walk_forward(LEFT0, RIGHT0, 20.0, step_length=1.0)
    assert_valid_plan(LEFT0, RIGHT0, plan)
    assert final_center(plan)[:2] == pytest.approx((20.0, 0.0))


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generated_plans_walk_unsaturated_to_their_end(name):
    params = WalkBehavior.Parameters(timing=GaitTiming(0.5, 0.2, 0.4))
    behavior = WalkBehavior(params, LEFT0, RIGHT0)
    plan = GENERATORS[name](LEFT0, RIGHT0)
    assert behavior.submit_goal(plan).accepted
    status = behavior.step(0.0)
    while status.behavior is Behavior.WALK:
        assert not any(status.step_saturation)
        status = behavior.step(0.1)
    assert status.result.error_code is WalkErrorCode.NONE
    assert stance_center(*behavior.feet) == pytest.approx(final_center(plan))
