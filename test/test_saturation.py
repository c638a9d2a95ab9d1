"""Specification of step saturation against StepLimits."""

import math
import random

import pytest

from walk_mpc.core.errors import ParameterError
from walk_mpc.core.params import from_mapping, to_mapping
from walk_mpc.core.walk.saturation import (
    SaturationFlags,
    StepLimits,
    relative_offset,
    saturate_step,
    saturation_flags,
    wrap_angle,
)
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose

LIMITS = StepLimits()
RIGHT_SOLE = FootPose((0.0, -0.1, 0.0))
LEFT_SOLE = FootPose((0.0, 0.1, 0.0))


def left_step(x=0.2, y=0.1, z=0.0, yaw=0.0, duration=0.8, swing_height=0.05):
    return Step(1, Foot.LEFT, duration, (x, y, z), yaw, swing_height=swing_height)


def right_step(x=0.2, y=-0.1, z=0.0, yaw=0.0, duration=0.8, swing_height=0.05):
    return Step(1, Foot.RIGHT, duration, (x, y, z), yaw, swing_height=swing_height)


def test_step_within_limits_is_returned_unchanged_without_flags():
    step = left_step()
    saturated, flags = saturate_step(step, RIGHT_SOLE, LIMITS)
    assert saturated is step
    assert flags == SaturationFlags.NONE


def test_too_long_forward_step_is_clipped_to_max_forward():
    saturated, flags = saturate_step(left_step(x=0.9), RIGHT_SOLE, LIMITS)
    assert flags == SaturationFlags.LENGTH
    assert saturated.position == pytest.approx((LIMITS.max_forward, 0.1, 0.0))


def test_too_long_backward_step_is_clipped_to_max_backward():
    saturated, flags = saturate_step(left_step(x=-0.9), RIGHT_SOLE, LIMITS)
    assert flags == SaturationFlags.LENGTH
    assert saturated.position[0] == pytest.approx(-LIMITS.max_backward)


def test_too_wide_step_is_clipped_to_max_width():
    saturated, flags = saturate_step(left_step(y=1.0), RIGHT_SOLE, LIMITS)
    assert flags == SaturationFlags.WIDTH
    assert saturated.position[1] - RIGHT_SOLE.position[1] == pytest.approx(LIMITS.max_width)


def test_too_narrow_step_is_widened_to_min_width():
    saturated, flags = saturate_step(left_step(y=-0.08), RIGHT_SOLE, LIMITS)
    assert flags == SaturationFlags.WIDTH
    assert saturated.position[1] - RIGHT_SOLE.position[1] == pytest.approx(LIMITS.min_width)


@pytest.mark.parametrize("y", [-0.5, -0.1, 0.0, 0.05])
def test_left_step_never_crosses_to_the_right_of_the_right_foot(y):
    saturated, _ = saturate_step(left_step(y=y), RIGHT_SOLE, LIMITS)
    assert relative_offset(RIGHT_SOLE, saturated.position)[1] >= LIMITS.min_width - 1e-12


@pytest.mark.parametrize("y", [0.5, 0.1, 0.0, -0.01])
def test_right_step_never_crosses_to_the_left_of_the_left_foot(y):
    saturated, flags = saturate_step(right_step(y=y), LEFT_SOLE, LIMITS)
    assert flags == SaturationFlags.WIDTH
    assert relative_offset(LEFT_SOLE, saturated.position)[1] <= -LIMITS.min_width + 1e-12


def test_yaw_change_is_clipped_to_max_yaw_change_both_ways():
    saturated, flags = saturate_step(left_step(yaw=1.2), RIGHT_SOLE, LIMITS)
    assert flags == SaturationFlags.YAW
    assert saturated.yaw == pytest.approx(LIMITS.max_yaw_change)
    saturated, flags = saturate_step(left_step(yaw=-1.2), RIGHT_SOLE, LIMITS)
    assert saturated.yaw == pytest.approx(-LIMITS.max_yaw_change)


def test_yaw_change_is_measured_the_short_way_around():
    previous = FootPose((0.0, -0.1, 0.0), math.pi - 0.1)
    step = left_step(x=-0.0, y=-0.3, yaw=-math.pi + 0.1)  # 0.2 rad to the left of previous, across +-pi
    _, flags = saturate_step(step, previous, LIMITS)
    assert not flags & SaturationFlags.YAW


def test_height_change_is_clipped_both_ways():
    saturated, flags = saturate_step(left_step(z=0.5), RIGHT_SOLE, LIMITS)
    assert flags == SaturationFlags.HEIGHT
    assert saturated.position[2] == pytest.approx(LIMITS.max_height_change)
    saturated, _ = saturate_step(left_step(z=-0.5), RIGHT_SOLE, LIMITS)
    assert saturated.position[2] == pytest.approx(-LIMITS.max_height_change)


def test_duration_is_clipped_to_min_and_max_duration():
    saturated, flags = saturate_step(left_step(duration=0.1), RIGHT_SOLE, LIMITS)
    assert flags == SaturationFlags.DURATION and saturated.duration == LIMITS.min_duration
    saturated, flags = saturate_step(left_step(duration=9.0), RIGHT_SOLE, LIMITS)
    assert flags == SaturationFlags.DURATION and saturated.duration == LIMITS.max_duration


def test_swing_height_is_clipped_to_max_swing_height():
    saturated, flags = saturate_step(left_step(swing_height=0.4), RIGHT_SOLE, LIMITS)
    assert flags == SaturationFlags.SWING_HEIGHT
    assert saturated.swing_height == LIMITS.max_swing_height


def test_limits_are_measured_in_the_previous_foot_frame():
    previous = FootPose((1.0, 2.0, 0.0), math.pi / 2)  # facing +y: forward is +y, left is -x
    within = Step(3, Foot.LEFT, 0.8, (1.0 - 0.2, 2.0 + 0.25, 0.0), math.pi / 2)
    assert saturation_flags(within, previous, LIMITS) == SaturationFlags.NONE
    too_far = within.replace(position=(1.0 - 0.2, 2.0 + 0.9, 0.0))
    saturated, flags = saturate_step(too_far, previous, LIMITS)
    assert flags == SaturationFlags.LENGTH
    assert relative_offset(previous, saturated.position) == pytest.approx((LIMITS.max_forward, 0.2, 0.0))


def test_several_violations_raise_several_flags():
    step = left_step(x=2.0, y=2.0, yaw=2.0, duration=0.0, swing_height=1.0)
    _, flags = saturate_step(step, RIGHT_SOLE, LIMITS)
    assert flags == (SaturationFlags.LENGTH | SaturationFlags.WIDTH | SaturationFlags.YAW
                     | SaturationFlags.DURATION | SaturationFlags.SWING_HEIGHT)


def test_saturated_steps_are_within_limits_and_saturation_is_idempotent():
    rng = random.Random(4)
    for _ in range(500):
        previous = FootPose((rng.uniform(-2, 2), rng.uniform(-2, 2), rng.uniform(-0.3, 0.3)),
                            rng.uniform(-4, 4))
        step = Step(1, rng.choice([Foot.LEFT, Foot.RIGHT]), rng.uniform(0, 5),
                    (rng.uniform(-3, 3), rng.uniform(-3, 3), rng.uniform(-1, 1)), rng.uniform(-4, 4),
                    swing_height=rng.uniform(0, 0.5))
        saturated, _ = saturate_step(step, previous, LIMITS)
        x, y, z = relative_offset(previous, saturated.position)
        side = 1.0 if step.foot is Foot.LEFT else -1.0
        assert -LIMITS.max_backward - 1e-9 <= x <= LIMITS.max_forward + 1e-9
        assert LIMITS.min_width - 1e-9 <= side * y <= LIMITS.max_width + 1e-9
        assert abs(z) <= LIMITS.max_height_change + 1e-9
        assert abs(wrap_angle(saturated.yaw - previous.yaw)) <= LIMITS.max_yaw_change + 1e-9
        again, flags = saturate_step(saturated, previous, LIMITS)
        assert flags == SaturationFlags.NONE and again is saturated


def test_wrap_angle_returns_values_in_minus_pi_pi():
    assert wrap_angle(3 * math.pi) == pytest.approx(math.pi)
    assert wrap_angle(-math.pi) == pytest.approx(math.pi)
    assert wrap_angle(0.5 + 4 * math.pi) == pytest.approx(0.5)


@pytest.mark.parametrize("field,value", [
    ("max_forward", 0.0), ("max_backward", -0.1), ("min_width", 0.0), ("max_yaw_change", 4.0),
    ("max_height_change", float("nan")), ("min_duration", 0.0), ("max_swing_height", -1.0),
])
def test_limits_reject_out_of_domain_values(field, value):
    with pytest.raises(ParameterError, match=field):
        StepLimits(**{field: value})


def test_limits_reject_min_above_max():
    with pytest.raises(ParameterError, match="min_width"):
        StepLimits(min_width=0.5, max_width=0.4)
    with pytest.raises(ParameterError, match="min_duration"):
        StepLimits(min_duration=4.0, max_duration=3.0)


def test_limits_round_trip_through_a_mapping():
    assert from_mapping(StepLimits, to_mapping(LIMITS)) == LIMITS


def test_crossover_widths_are_off_by_default_and_checked():
    assert (LIMITS.min_crossover_width, LIMITS.max_crossover_width) == (0.0, 0.0)
    with pytest.raises(ParameterError, match="min_crossover_width"):
        StepLimits(min_crossover_width=0.3, max_crossover_width=0.2)
    with pytest.raises(ParameterError, match="max_crossover_width"):
        StepLimits(max_crossover_width=-0.1)


@pytest.mark.parametrize("across", [0.05, 0.2, 0.5])
def test_with_crossover_widths_a_step_across_the_previous_sole_lands_within_them(across):
    limits = StepLimits(min_crossover_width=0.15, max_crossover_width=0.3)
    for step, sole, side in ((left_step(y=RIGHT_SOLE.position[1] - across), RIGHT_SOLE, -1.0),
                             (right_step(y=LEFT_SOLE.position[1] + across), LEFT_SOLE, 1.0)):
        saturated, flags = saturate_step(step, sole, limits)
        landed = side * relative_offset(sole, saturated.position)[1]
        assert landed == pytest.approx(min(0.3, max(0.15, across)))
        assert bool(flags & SaturationFlags.WIDTH) == (not 0.15 <= across <= 0.3)
    # A step on its own side is saturated as without them.
    assert saturate_step(left_step(y=-0.08), RIGHT_SOLE, limits) == saturate_step(left_step(y=-0.08),
                                                                                RIGHT_SOLE, LIMITS)
