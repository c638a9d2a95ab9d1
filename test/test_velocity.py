"""VelocityWalk: a twist turned into footsteps within the step limits, closing step, timeout, bad commands."""

import math
import random

import pytest

from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.walk.behavior import Behavior, WalkBehavior, WalkErrorCode
from walk_mpc.core.walk.footsteps import stance_center
from walk_mpc.core.walk.saturation import SaturationFlags, StepLimits, relative_offset, saturate_step
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, GaitTiming
from walk_mpc.core.walk.velocity import VelocityWalk, VelocityWalkParameters

LEFT, RIGHT = FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0))
DT = 0.01  # [s]


def within_limits(steps, feet=(LEFT, RIGHT), limits=StepLimits()):
    """Whether every step is within the limits relative to its predecessor (the other foot's sole first)."""
    poses = {Foot.LEFT: feet[0], Foot.RIGHT: feet[1]}
    for step in steps:
        if saturate_step(step, poses[step.foot.other], limits)[1] != SaturationFlags.NONE:
            return False
        poses[step.foot] = FootPose.of_step(step)
    return True


def stream(twists, seconds, params=None, feet=(LEFT, RIGHT)):
    """A WalkBehavior fed by a VelocityWalk as WalkSupervisor does; ``twists(t)`` gives the command at t
    (None: no command). Returns (behavior, velocity, results, committed steps, statuses)."""
    params = params or VelocityWalkParameters()
    behavior = WalkBehavior(left=feet[0], right=feet[1])
    velocity = VelocityWalk(params)
    results, statuses = [], []
    t = 0.0
    for _ in range(int(round(seconds / DT))):
        twist = twists(t)
        if twist is not None:
            velocity.command(*twist, t)
        if behavior.behavior is Behavior.STAND:
            if velocity.active(t) and not results:
                steps = velocity.start_steps(t, *behavior.feet)
                assert behavior.submit_goal(steps, False, "v", lookahead=params.lookahead).accepted
        elif not behavior.is_stopping:
            steps, complete = velocity.next_steps(t, behavior.status.timeline.steps[-1])
            answer = behavior.queue_steps(steps, complete)
            assert answer.accepted, answer
        status = behavior.step(DT)
        statuses.append(status)
        t = status.t
        if status.result is not None:
            results.append(status.result)
    return behavior, velocity, results, statuses[-1].timeline.steps, statuses


def test_parameters_name_the_wrong_value():
    for name, value in (("max_forward_speed", 0.0), ("timeout", -1.0), ("lookahead", 5), ("lookahead", 0),
                        ("width", -0.1), ("step_duration", math.nan)):
        with pytest.raises(ParameterError, match=name):
            VelocityWalkParameters(**{name: value})
    with pytest.raises(ParameterError, match="step_duration"):
        VelocityWalk(VelocityWalkParameters(step_duration=0.3))  # shorter than the step limits allow
    with pytest.raises(ParameterError, match="swing_height"):
        VelocityWalk(VelocityWalkParameters(swing_height=0.5))
    with pytest.raises(ParameterError, match="width"):
        VelocityWalk(VelocityWalkParameters(width=0.5))
    with pytest.raises(ParameterError, match="step_duration"):
        VelocityWalk(VelocityWalkParameters(step_duration=0.5),
                     timing=GaitTiming(double_support_duration=0.5))


@pytest.mark.parametrize("component", [0, 1, 2])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "0.1", None, True])
def test_a_non_finite_command_is_rejected_naming_it_and_changes_nothing(component, bad):
    velocity = VelocityWalk()
    good = velocity.command(0.1, 0.0, 0.0, 1.0)
    twist = [0.0, 0.0, 0.0]
    twist[component] = bad
    with pytest.raises(InputError, match=("vx", "vy", "wz")[component]):
        velocity.command(*twist, 2.0)
    assert velocity.last_command is good and velocity.twist_at(1.2) == (0.1, 0.0, 0.0)


def test_a_huge_command_is_clamped_to_the_speed_limits_and_reported():
    velocity = VelocityWalk()
    command = velocity.command(1e9, -1e9, 1e300, 0.0)
    # each component to its maximum, then the three together into the ellipsoid of the maxima
    assert command.twist == pytest.approx(tuple(v / math.sqrt(3.0) for v in (0.25, -0.05, 0.4)))
    assert command.requested == (1e9, -1e9, 1e300)
    assert "max_forward_speed 0.25" in command.message and "max_lateral_speed" in command.message
    assert "max_yaw_rate 0.4" in command.message and "the combined limit (58 % of each)" in command.message
    combined = velocity.command(-0.1, 0.0, 0.4, 0.0)  # two axes at their maxima: 71 % of each
    assert combined.twist == pytest.approx((-0.1 / math.sqrt(2.0), 0.0, 0.4 / math.sqrt(2.0)))
    backward = velocity.command(-2.0, 0.0, 0.0, 0.0)
    assert backward.twist == (-0.1, 0.0, 0.0) and "max_backward_speed 0.1" in backward.message
    assert velocity.command(0.1, 0.02, -0.2, 0.0).message == ""


def test_a_command_times_out_in_sensor_time_and_the_dead_band_is_zero():
    velocity = VelocityWalk(VelocityWalkParameters(timeout=0.5))
    assert not velocity.active(0.0)  # no command yet
    velocity.command(0.2, 0.0, 0.0, 10.0)
    assert velocity.active(10.5) and not velocity.timed_out(10.5)
    assert not velocity.active(10.51) and velocity.timed_out(10.51)
    velocity.command(0.004, -0.004, 0.009, 11.0)
    assert not velocity.active(11.0)
    velocity.clear()
    assert velocity.last_command is None and not velocity.active(11.0)


def test_steps_from_stand_move_the_center_by_the_command_per_step_and_alternate():
    velocity = VelocityWalk()
    velocity.command(0.2, 0.0, 0.0, 0.0)
    steps = velocity.start_steps(0.0, LEFT, RIGHT)
    assert [s.step_index for s in steps] == [1, 2] and [s.foot for s in steps] == [Foot.LEFT, Foot.RIGHT]
    assert steps[0].position == pytest.approx((0.16, 0.085, 0.0))
    assert steps[1].position == pytest.approx((0.32, -0.085, 0.0))
    assert velocity.width == pytest.approx(0.17)
    for vy, wz, first in ((0.05, 0.0, Foot.LEFT), (-0.05, 0.0, Foot.RIGHT), (0.0, 0.3, Foot.LEFT),
                          (0.0, -0.3, Foot.RIGHT)):
        velocity.command(0.0, vy, wz, 0.0)
        assert velocity.start_steps(0.0, LEFT, RIGHT)[0].foot is first  # the foot on the side of the motion


def test_a_zero_command_gives_the_closing_step_then_ends_the_plan_with_it():
    velocity = VelocityWalk()
    velocity.command(0.2, 0.0, 0.3, 0.0)
    steps = velocity.start_steps(0.0, LEFT, RIGHT)
    velocity.command(0.0, 0.0, 0.0, 0.1)
    (closing,), complete = velocity.next_steps(0.1, steps[-1])
    assert complete and closing.foot is Foot.LEFT and closing.step_index == 3
    assert closing.yaw == pytest.approx(steps[-1].yaw)  # side by side, parallel, at the nominal width
    offset = relative_offset(FootPose.of_step(steps[-1]), closing.position)
    assert offset == pytest.approx((0.0, 0.17, 0.0), abs=1e-12)
    assert velocity.next_steps(0.2, closing) == ((closing,), True)  # already closed: the plan ends with it


def test_every_step_stays_within_the_step_limits_under_random_commands():
    """Seeded random commands, huge and combined ones included, changing every step: no step is ever saturated
    (the twist is scaled down instead, which ``scale`` reports)."""
    rng = random.Random(20)
    limits = StepLimits(max_forward=0.25, max_yaw_change=0.3, min_width=0.14)
    velocity = VelocityWalk(VelocityWalkParameters(max_forward_speed=1.0, max_lateral_speed=0.2,
                                                   max_yaw_rate=1.5, max_backward_speed=0.5), limits)
    scaled = 0
    for trial in range(30):
        velocity.command(rng.uniform(-1, 1), rng.uniform(-0.2, 0.2), rng.uniform(-1.5, 1.5), 0.0)
        steps = list(velocity.start_steps(0.0, LEFT, RIGHT))
        scaled += velocity.scale < 1.0
        for k in range(20):
            if k % 3 == 0:
                velocity.command(rng.uniform(-1, 1), rng.uniform(-0.2, 0.2), rng.uniform(-1.5, 1.5), 0.0)
            new, complete = velocity.next_steps(0.0, steps[-1])
            assert not complete and new[0].step_index == steps[-1].step_index + 1
            scaled += velocity.scale < 1.0
            steps += new
        assert within_limits(steps, limits=limits), trial
    assert scaled > 100  # the limits were reached often: the scaling is what kept the steps valid


def test_lookahead_is_a_walk_option_of_the_behavior_atlas_four_by_default():
    behavior = WalkBehavior(left=LEFT, right=RIGHT)
    velocity = VelocityWalk()
    velocity.command(0.2, 0.0, 0.0, 0.0)
    steps = velocity.start_steps(0.0, LEFT, RIGHT)
    answer = behavior.submit_goal(steps[:1], False, lookahead=2)
    assert not answer.accepted and "at least 2 steps" in answer.rejection.message
    assert behavior.submit_goal(steps, False, lookahead=2).accepted
    assert behavior.lookahead == 2 and behavior.next_step_index_needed == 3
    with pytest.raises(InputError, match="lookahead"):
        behavior.submit_goal(steps, False, lookahead=5)
    behavior.reset()
    assert behavior.lookahead == 4


def test_forward_for_five_seconds_walks_about_a_meter_and_stops_standing_side_by_side():
    behavior, velocity, results, steps, _ = stream(lambda t: (0.2, 0.0, 0.0) if t < 5.0 else None, 12.0)
    assert [r.error_code for r in results] == [WalkErrorCode.NONE] and behavior.behavior is Behavior.STAND
    left, right = behavior.feet
    x, y, _, yaw = stance_center(left, right)
    assert 1.0 <= x <= 1.0 + 2 * 0.16 + 0.1, x  # the commanded 1 m, plus the committed steps and the timeout
    assert (y, yaw) == pytest.approx((0.0, 0.0), abs=1e-9)
    assert relative_offset(left, right.position) == pytest.approx((0.0, -0.17, 0.0), abs=1e-9)
    assert within_limits(steps)


def test_a_change_of_command_shows_after_at_most_lookahead_committed_steps():
    for change in (0.3, 2.0, 2.3, 2.6, 2.9):  # at phases of the gait (swaying, single and double support)
        def twists(t, change=change):
            return (0.2, 0.0, 0.0) if t < change else (0.2, 0.0, 0.4)

        _, _, _, steps, statuses = stream(twists, change + 0.005)
        current = statuses[-1].current_step_index
        _, _, _, steps_after, _ = stream(twists, change + 4.0)
        seen = {s.step_index: s for s in steps_after}
        turned = [s.step_index for s in steps_after if abs(s.yaw) > 1e-9]
        assert turned, change
        # committed before the change: unchanged; the first turning step follows at most 2 of them
        committed = [s.step_index for s in steps if s.step_index > current]
        assert all(seen[s.step_index] == s for s in steps)
        assert turned[0] <= max(committed) + 1 and turned[0] <= current + 1 + 2, (change, current, turned)
