"""Support-foot correction policy (walk_mpc.core.mpc.support_correction): when, what, and across plans."""

from __future__ import annotations

import pytest

from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.mpc.support_correction import (
    SupportCorrectionParameters,
    SupportCorrector,
    _replace,
    anchor_foot,
    corrected_timeline,
    last_touchdown,
)
from walk_mpc.core.walk.footsteps import walk_forward
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

LEFT, RIGHT = FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0))


def plan(distance: float = 0.6) -> Timeline:
    steps = walk_forward(LEFT, RIGHT, distance, step_length=0.2, width=0.17, duration=1.1)
    return Timeline(LEFT, RIGHT, steps, GaitTiming(0.6, 0.3, 0.6))


def liftoff(timeline: Timeline, step_index: int) -> float:
    return next(p.t_start for p in timeline.phases
                if p.kind is PhaseKind.SINGLE and p.step_index == step_index)


def off(pose: FootPose, dx: float = 0.003, dy: float = -0.002, dz: float = 0.0005, dyaw: float = 0.01):
    x, y, z = pose.position
    return FootPose((x + dx, y + dy, z + dz), pose.yaw + dyaw)


class Robot:
    """Feet measured 3 mm / -2 mm / 0.5 mm / 10 mrad off their current corrected pose."""

    def __init__(self, corrector: SupportCorrector) -> None:
        self.corrector = corrector
        self.calls = []

    def __call__(self, foot: Foot) -> FootPose:
        self.calls.append(foot)
        timeline, t = self.corrector.timeline, self.t
        landed = last_touchdown(timeline, foot, t)
        return off(FootPose.of_step(landed) if landed else timeline.phases[0].foot(foot))


def tick_through(corrector: SupportCorrector, robot: Robot, t_end: float, period: float = 0.02):
    corrections = []
    for k in range(int(round(t_end / period)) + 1):
        robot.t = k * period
        c = corrector.observe(robot.t, robot)
        if c is not None:
            corrections.append(c)
    return corrections


def test_lift_off_replaces_the_stance_foot_by_its_measured_pose_and_keeps_later_steps():
    timeline = plan()
    corrector = SupportCorrector()
    corrector.set_plan(timeline)
    robot = Robot(corrector)
    corrections = tick_through(corrector, robot, liftoff(timeline, 2) + 0.1)
    # step 1 lifts the left foot: the right (start pose) is corrected; step 2 lifts the right: step 1's left
    assert [(c.foot, c.step_index) for c in corrections] == [(Foot.RIGHT, 0), (Foot.LEFT, 1)]
    assert robot.calls == [Foot.RIGHT, Foot.LEFT]  # measured only when due
    corrected = corrector.timeline
    assert corrected.phases[0].right.position[:2] == pytest.approx((0.003, -0.087))
    assert corrected.phases[0].right.position[2] == 0.0  # planned height by default
    assert corrected.steps[0].position[:2] == pytest.approx((0.203, 0.083))
    assert corrected.steps[0].yaw == pytest.approx(0.01)
    assert corrected.steps[1:] == timeline.steps[1:]
    assert corrections[1].position_error == pytest.approx((0.003 ** 2 + 0.002 ** 2) ** 0.5)
    assert corrections[1].yaw_error == pytest.approx(0.01)
    assert corrector.corrections == tuple(corrections) and all(c.applied for c in corrections)


def test_no_correction_on_the_first_observation_nor_twice_in_a_phase():
    timeline = plan()
    corrector = SupportCorrector()
    corrector.set_plan(timeline)
    t = liftoff(timeline, 1) + 0.1
    assert corrector.observe(t, {Foot.LEFT: LEFT, Foot.RIGHT: RIGHT}) is None  # settling unknown
    assert corrector.observe(t + 0.02, {Foot.LEFT: LEFT, Foot.RIGHT: RIGHT}) is None
    assert corrector.timeline is timeline


def test_catch_corrects_the_foot_of_the_last_step():
    timeline = plan()
    corrector = SupportCorrector()
    corrector.set_plan(timeline)
    robot = Robot(corrector)
    corrections = tick_through(corrector, robot, timeline.t_end)
    last = timeline.steps[-1]
    assert (corrections[-1].foot, corrections[-1].step_index) == (last.foot, last.step_index)
    assert len(corrections) == len(timeline.steps) + 1


def test_shifting_later_steps_translates_them_by_each_correction():
    timeline = plan()
    corrector = SupportCorrector(SupportCorrectionParameters(shift_later_steps=True, measured_height=True))
    corrector.set_plan(timeline)
    tick_through(corrector, Robot(corrector), liftoff(timeline, 1) + 0.1)
    for before, after in zip(timeline.steps, corrector.timeline.steps):
        x, y, _ = before.position
        assert after.position == pytest.approx((x + 0.003, y - 0.002, 0.0005))
    assert corrector.timeline.phases[0].right.position[2] == pytest.approx(0.0005)  # measured height


@pytest.mark.parametrize("shift", [False, True])
def test_the_corrected_timeline_is_the_corrections_applied_one_by_one(shift):
    # The corrector builds one Timeline per correction (not one per correction so far): the result must be
    # the plan with each correction applied in turn, start poses included, over a whole walk and a plan
    # extended mid-walk.
    timeline = plan(1.0)
    corrector = SupportCorrector(SupportCorrectionParameters(shift_later_steps=shift, measured_height=True))
    corrector.set_plan(plan(0.6))
    robot = Robot(corrector)
    tick_through(corrector, robot, liftoff(timeline, 3) + 0.1)
    corrector.set_plan(timeline)
    for k in range(int(round((liftoff(timeline, 3) + 0.12) / 0.02)), int(round(timeline.t_end / 0.02)) + 1):
        robot.t = k * 0.02
        corrector.observe(robot.t, robot)
    assert len(corrector.corrections) == len(timeline.steps) + 1
    expected = timeline
    for c in corrector.corrections:
        index = c.step_index if c.step_index else None
        expected = _replace(expected, c.foot, index, c.measured, shift)
    assert corrector.timeline.phases == expected.phases
    assert corrector.timeline.steps == expected.steps


def test_a_longer_plan_of_the_same_walk_keeps_the_corrections_and_a_new_walk_drops_them():
    timeline = plan(0.6)
    corrector = SupportCorrector()
    corrector.set_plan(timeline)
    tick_through(corrector, Robot(corrector), liftoff(timeline, 2) + 0.1)
    corrected = corrector.timeline
    longer = corrector.set_plan(plan(1.0))  # the same first steps, more of them
    assert longer.phases[0].right == corrected.phases[0].right and longer.steps[0] == corrected.steps[0]
    assert len(corrector.corrections) == 2
    # A plan re-anchored on step 1 (it starts from the planned feet of step 1): the correction of step
    # 1 moves to the start pose.
    reanchored = Timeline(FootPose.of_step(timeline.steps[0]), RIGHT, timeline.steps[1:], timeline.timing)
    assert corrector.set_plan(reanchored).phases[0].left.position == corrected.steps[0].position
    assert corrector.timeline.phases[0].right == corrected.phases[0].right
    other = Timeline(FootPose((5.0, 0.085, 0.0)), FootPose((5.0, -0.085, 0.0)),
                     walk_forward(FootPose((5.0, 0.085, 0.0)), FootPose((5.0, -0.085, 0.0)), 0.4,
                                  step_length=0.2, width=0.17, duration=1.1), timeline.timing)
    assert corrector.set_plan(other) is not None and corrector.corrections == ()
    assert corrector.timeline.steps == other.steps


def test_disabled_correction_measures_the_landing_but_keeps_the_plan():
    timeline = plan()
    corrector = SupportCorrector(SupportCorrectionParameters(enabled=False))
    corrector.set_plan(timeline)
    corrections = tick_through(corrector, Robot(corrector), liftoff(timeline, 2) + 0.1)
    assert [c.applied for c in corrections] == [False, False]
    assert corrector.timeline is timeline and corrector.corrections == ()


def test_corrected_timeline_replaces_the_last_touchdown_or_the_start_pose():
    timeline = plan()
    first = timeline.steps[0]
    t = timeline.touchdown_time(first.step_index) + 0.1
    pose = off(FootPose.of_step(first))
    corrected = corrected_timeline(timeline, first.foot, pose, t)
    assert corrected.steps[0].position == pose.position and corrected.steps[1:] == timeline.steps[1:]
    start = corrected_timeline(timeline, Foot.RIGHT, pose, 0.0)
    assert start.phases[0].right == pose and start.steps == timeline.steps


def test_anchor_foot_prefers_the_foot_already_in_stance():
    timeline = plan()
    touchdown = timeline.touchdown_time(1)  # left lands: double support
    assert anchor_foot(timeline, touchdown + 0.01, (Foot.RIGHT,)) is Foot.RIGHT
    assert anchor_foot(timeline, touchdown + 0.01, (Foot.LEFT, Foot.RIGHT)) is Foot.LEFT
    assert anchor_foot(timeline, liftoff(timeline, 1) + 0.01) is Foot.RIGHT


def test_inputs_and_parameters_are_checked():
    corrector = SupportCorrector()
    with pytest.raises(InputError):
        corrector.observe(0.0, {})
    with pytest.raises(InputError):
        corrector.set_plan("plan")
    corrector.set_plan(plan())
    with pytest.raises(InputError):
        corrector.observe(float("nan"), {})
    with pytest.raises(ParameterError):
        SupportCorrectionParameters(enabled=1)
    with pytest.raises(ParameterError):
        SupportCorrector(params={"enabled": True})
