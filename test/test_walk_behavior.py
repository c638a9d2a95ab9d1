"""Specification of the Walk behavior: Atlas step-queue semantics, flags, indices, goals, queue, cancel."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.params import from_mapping, to_mapping
from walk_mpc.core.walk.behavior import (
    HISTORY_STEPS,
    NUM_REQUIRED_WALK_STEPS,
    SUBSTATE_FLAGS,
    Behavior,
    WalkBehavior,
    WalkErrorCode,
    WalkFlags,
    steps_from_records,
)
from walk_mpc.core.walk.saturation import SaturationFlags, StepLimits
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

LEFT0 = FootPose((0.0, 0.1, 0.0))
RIGHT0 = FootPose((0.0, -0.1, 0.0))
TIMING = GaitTiming(sway_duration=0.5, double_support_duration=0.2, catch_duration=0.4)
PARAMS = WalkBehavior.Parameters(timing=TIMING)
DT = 0.05
SWAYING = WalkFlags.WALK_SUBSTATE_SWAYING
STEPPING = WalkFlags.WALK_SUBSTATE_STEPPING
CATCHING = WalkFlags.WALK_SUBSTATE_CATCHING
INSUFFICIENT = WalkFlags.WALK_WARNING_INSUFFICIENT_STEP_DATA
INCONSISTENT = WalkFlags.WALK_ERROR_INCONSISTENT_STEPS
INVALID = WalkErrorCode.INVALID_STEP


def step_k(k, length=0.2, duration=0.8):
    """Canonical step k of a straight walk: odd indices left, even right."""
    left = k % 2 == 1
    return Step(k, Foot.LEFT if left else Foot.RIGHT, duration, (k * length, 0.1 if left else -0.1, 0.0))


def steps(first, last, **kwargs):
    return [step_k(k, **kwargs) for k in range(first, last + 1)]


def walker():
    return WalkBehavior(PARAMS, LEFT0, RIGHT0)


def run(behavior, until, dt=DT, max_time=120.0):
    """Step until ``until(status)`` holds; return all statuses (the last one satisfies it)."""
    statuses = []
    t_stop = behavior.time + max_time
    while behavior.time < t_stop:
        status = behavior.step(dt)
        statuses.append(status)
        if until(status):
            return statuses
    raise AssertionError("condition not reached")


def run_to_stand(behavior, dt=DT):
    return run(behavior, lambda s: s.behavior is Behavior.STAND, dt)


def assert_one_substate_while_walking(statuses):
    for status in statuses:
        substate = status.status_flags & SUBSTATE_FLAGS
        if status.behavior is Behavior.WALK:
            assert substate in (SWAYING, STEPPING, CATCHING), status.status_flags
        else:
            assert substate == WalkFlags.NONE


# ---------------------------------------------------------------------------------------------- basics


def test_starts_in_stand_with_no_flags_and_zero_indices():
    status = walker().step(DT)
    assert status.behavior is Behavior.STAND
    assert status.status_flags == WalkFlags.NONE
    assert (status.current_step_index, status.next_step_index_needed, status.t_step_rem) == (0, 0, 0.0)
    assert status.step_queue_saturated == () and status.phase.kind is PhaseKind.STAND
    assert (status.left, status.right) == (LEFT0, RIGHT0)


def test_flag_values_and_error_codes_mirror_the_interfaces():
    assert [int(f) for f in (SWAYING, STEPPING, CATCHING, INSUFFICIENT, INCONSISTENT)] == [1, 2, 4, 8, 16]
    assert NUM_REQUIRED_WALK_STEPS == 4
    assert [c.name for c in WalkErrorCode][:9] == [
        "NONE", "INCONSISTENT_STEPS", "INSUFFICIENT_STEP_DATA", "INVALID_STEP", "CANCELED", "PREEMPTED",
        "PLANNER_FAILURE", "IK_FAILURE", "SENSOR_TIMEOUT"]
    assert list(WalkErrorCode) == list(range(len(WalkErrorCode)))


def test_finite_goal_sways_steps_catches_and_stands_with_result_none():
    behavior = walker()
    answer = behavior.submit_goal(steps(1, 6), plan_complete=True)
    assert answer.accepted and answer.rejection is None and answer.preempted is None
    statuses = run_to_stand(behavior)
    substates = [s.status_flags & SUBSTATE_FLAGS for s in statuses]
    compressed = [f for i, f in enumerate(substates) if i == 0 or f != substates[i - 1]]
    assert compressed == [SWAYING, STEPPING, CATCHING, WalkFlags.NONE]
    assert_one_substate_while_walking(statuses)
    result = statuses[-1].result
    assert result.goal_id == answer.goal_id
    assert (result.error_code, result.last_completed_step_index, result.offending_step_indices) == (
        WalkErrorCode.NONE, 6, ())
    assert [s.result for s in statuses[:-1]] == [None] * (len(statuses) - 1)
    final = statuses[-1]
    assert final.current_step_index == 0 and final.next_step_index_needed == 0
    assert final.left.position == step_k(5).position and final.right.position == step_k(6).position
    assert behavior.feet == (final.left, final.right)


def test_substate_flags_do_not_latch():
    behavior = walker()
    behavior.submit_goal(steps(1, 3))
    statuses = run_to_stand(behavior)
    first_stepping = next(i for i, s in enumerate(statuses) if s.status_flags & STEPPING)
    first_catching = next(i for i, s in enumerate(statuses) if s.status_flags & CATCHING)
    assert all(not s.status_flags & SWAYING for s in statuses[first_stepping:])
    assert all(not s.status_flags & STEPPING for s in statuses[first_catching:])
    assert statuses[-1].status_flags == WalkFlags.NONE


def test_current_step_index_increases_at_each_touchdown_and_resets_in_stand():
    behavior = walker()
    behavior.submit_goal(steps(1, 5))
    statuses = run_to_stand(behavior)
    timeline = statuses[-1].timeline  # the walk's final plan, with every step
    for status in statuses[:-1]:
        assert status.current_step_index == timeline.completed_step_index(status.t)
    indices = [s.current_step_index for s in statuses[:-1]]
    assert indices[0] == 0 and indices[-1] == 5
    assert all(b - a in (0, 1) for a, b in zip(indices[:-1], indices[1:]))
    assert statuses[-1].current_step_index == 0


def test_next_step_index_needed_is_current_plus_one_plus_four_while_streaming():
    behavior = walker()
    behavior.submit_goal(steps(1, 40), plan_complete=True)
    assert behavior.status.next_step_index_needed == 1 + NUM_REQUIRED_WALK_STEPS
    for status in run(behavior, lambda s: s.current_step_index == 10):
        assert status.next_step_index_needed == status.current_step_index + 1 + NUM_REQUIRED_WALK_STEPS
        assert [q.step_index for q in status.step_queue_saturated] == list(
            range(status.current_step_index + 1, status.next_step_index_needed))


def test_next_step_index_needed_stops_at_the_end_of_a_complete_plan():
    behavior = walker()
    behavior.submit_goal(steps(1, 2), plan_complete=True)
    status = behavior.step(DT)
    assert status.next_step_index_needed == 3
    assert [q.step_index for q in status.step_queue_saturated] == [1, 2]


def test_t_step_rem_counts_down_to_the_next_touchdown_and_is_zero_when_catching():
    behavior = walker()
    behavior.submit_goal(steps(1, 2))
    timeline = behavior.status.timeline  # both steps are committed at the start
    for status in run_to_stand(behavior):
        if status.status_flags & (SWAYING | STEPPING):
            touchdown = timeline.touchdown_time(status.current_step_index + 1)
            assert status.t_step_rem == pytest.approx(touchdown - status.t)
        else:
            assert status.t_step_rem == 0.0


def test_large_dt_handles_every_touchdown_in_order():
    behavior = walker()
    behavior.submit_goal(steps(1, 6))
    status = behavior.step(100.0)
    assert status.behavior is Behavior.STAND
    assert status.result.error_code is WalkErrorCode.NONE and status.result.last_completed_step_index == 6


def test_status_reports_support_foot_desired_and_measured_pose():
    behavior = walker()
    behavior.submit_goal(steps(1, 2))
    measured = FootPose((0.01, -0.1, 0.0), 0.02)
    status = run(behavior, lambda s: s.phase.kind is PhaseKind.SINGLE)[-1]
    status = behavior.step(0.0, measured_support_foot_pose=measured)
    assert status.support_foot is Foot.RIGHT  # step 1 swings the left foot
    assert status.desired_support_foot_pose == RIGHT0
    assert status.measured_support_foot_pose == measured
    assert status.left == FootPose.of_step(step_k(1))  # swing foot target
    double = run(behavior, lambda s: s.phase.kind is PhaseKind.DOUBLE)[-1]
    assert double.support_foot is None and double.desired_support_foot_pose is None


def test_long_walk_keeps_a_bounded_timeline_that_matches_the_full_plan_from_now_on():
    plan = steps(1, 100)
    reference = Timeline(LEFT0, RIGHT0, plan, TIMING, t0=0.0)
    behavior = walker()
    behavior.submit_goal(plan)
    statuses = run_to_stand(behavior, dt=0.0371)  # avoids ties with phase boundaries
    for status in statuses[:-1]:
        expected = reference.phase_at(status.t)
        assert (status.phase.kind, status.phase.step_index) == (expected.kind, expected.step_index)
        assert (status.left, status.right) == (expected.left, expected.right)
        assert status.current_step_index == reference.completed_step_index(status.t)
        assert status.timeline.completed_step_index(status.t) == status.current_step_index
        assert len(status.timeline.steps) <= 2 * HISTORY_STEPS + NUM_REQUIRED_WALK_STEPS
    assert statuses[-1].t == pytest.approx(reference.t_end, abs=0.0371)
    assert statuses[-1].result.last_completed_step_index == 100


def test_step_rejects_negative_or_non_finite_dt():
    behavior = walker()
    for dt in (-0.1, math.nan, math.inf):
        with pytest.raises(InputError, match="dt"):
            behavior.step(dt)


def test_parameters_require_min_duration_above_double_support_and_round_trip():
    with pytest.raises(ParameterError, match="min_duration"):
        WalkBehavior.Parameters(timing=GaitTiming(double_support_duration=0.6), limits=StepLimits())
    mapping = to_mapping(PARAMS)
    assert from_mapping(WalkBehavior.Parameters, mapping) == PARAMS


# ---------------------------------------------------------------------------------- step streaming


def test_twenty_step_walk_with_overlapping_windows_of_four_never_starves():
    plan = {k: step_k(k) for k in range(1, 21)}
    behavior = walker()
    assert behavior.submit_goal([plan[k] for k in range(1, 5)], plan_complete=False).accepted
    touchdowns = []
    statuses = []
    while True:
        status = behavior.step(DT)
        statuses.append(status)
        if status.behavior is Behavior.STAND:
            break
        needed = status.next_step_index_needed
        last = min(needed, 20)
        window = [plan[k] for k in range(max(1, last - NUM_REQUIRED_WALK_STEPS + 1), last + 1)]
        answer = behavior.queue_steps(window, plan_complete=last == 20)
        assert answer.accepted, answer.message
        assert answer.next_step_index_needed == behavior.next_step_index_needed
        if len(statuses) > 1 and status.current_step_index != statuses[-2].current_step_index:
            touchdowns.append(status.current_step_index)
        assert not status.status_flags & (INSUFFICIENT | INCONSISTENT)
    assert touchdowns == list(range(1, 21))
    assert_one_substate_while_walking(statuses)
    result = statuses[-1].result
    assert (result.error_code, result.last_completed_step_index) == (WalkErrorCode.NONE, 20)
    assert behavior.feet[0].position == plan[19].position and behavior.feet[1].position == plan[20].position


def test_queue_resending_committed_window_identically_is_idempotent():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=False)
    before = behavior.status
    answer = behavior.queue_steps(steps(1, 4))
    assert answer.accepted and "4 unchanged" in answer.message
    assert behavior.status == before


def test_queue_adds_then_replaces_uncommitted_steps():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=False)
    assert behavior.queue_steps(steps(2, 5)).message.startswith("1 added, 0 replaced, 3 unchanged")
    moved = step_k(5).replace(position=(1.05, 0.1, 0.0))
    assert behavior.queue_steps([moved]).message.startswith("0 added, 1 replaced")
    status = run(behavior, lambda s: s.current_step_index == 1)[-1]
    assert status.step_queue_saturated[-1] == moved


def test_queue_changing_a_committed_step_is_rejected_and_changes_nothing():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=False)
    behavior.queue_steps(steps(5, 6))
    before = behavior.status
    changed = [step_k(3).replace(position=(0.5, 0.1, 0.0)), step_k(4), step_k(5)]
    answer = behavior.queue_steps(changed)
    assert not answer.accepted and answer.step_index == 3 and "committed" in answer.message
    assert answer.error_code is WalkErrorCode.INVALID_STEP
    assert behavior.status == before
    assert behavior.queue_steps(steps(5, 6)).message.startswith("0 added, 0 replaced, 2 unchanged")


def test_queue_plan_complete_ends_the_plan_and_drops_later_steps():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=False)
    behavior.queue_steps(steps(5, 8))
    answer = behavior.queue_steps(steps(5, 6), plan_complete=True)
    assert answer.accepted and "plan ends at step 6" in answer.message
    result = run_to_stand(behavior)[-1].result
    assert (result.error_code, result.last_completed_step_index) == (WalkErrorCode.NONE, 6)


def test_queue_can_reopen_a_complete_plan_before_its_last_touchdown():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=True)
    assert behavior.queue_steps(steps(5, 8), plan_complete=True).accepted
    result = run_to_stand(behavior)[-1].result
    assert (result.error_code, result.last_completed_step_index) == (WalkErrorCode.NONE, 8)


def test_queue_cannot_end_the_plan_before_committed_steps():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=False)
    before = behavior.status
    answer = behavior.queue_steps(steps(1, 2), plan_complete=True)
    assert not answer.accepted and "cannot end at step 2" in answer.message
    assert behavior.status == before


def test_queue_in_stand_is_rejected():
    behavior = walker()
    answer = behavior.queue_steps(steps(1, 4))
    assert not answer.accepted and "not walking" in answer.message and answer.next_step_index_needed == 0


# ------------------------------------------------------------------------------ errors and warnings


def test_insufficient_step_data_catches_and_warns_without_latching():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=False)
    statuses = run_to_stand(behavior)
    warned = [s for s in statuses if s.status_flags & INSUFFICIENT]
    assert warned and all(s.status_flags & CATCHING for s in warned)
    assert warned[0].current_step_index == 1  # looked for step 5 at the touchdown of step 1
    assert not statuses[-1].status_flags & INSUFFICIENT
    result = statuses[-1].result
    assert (result.error_code, result.last_completed_step_index, result.offending_step_indices) == (
        WalkErrorCode.INSUFFICIENT_STEP_DATA, 1, (5,))
    assert "step 5 missing" in result.error_msg


def test_insufficient_step_data_keeps_feet_where_they_landed():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=False)
    run_to_stand(behavior)
    assert behavior.feet == (FootPose.of_step(step_k(1)), RIGHT0)


def test_same_foot_twice_sets_inconsistent_and_latches():
    behavior = walker()
    bad = steps(1, 8)
    bad[6] = bad[6].replace(foot=Foot.RIGHT)  # steps 6 and 7 both right
    behavior.submit_goal(bad)
    statuses = run_to_stand(behavior)
    flagged = [i for i, s in enumerate(statuses) if s.status_flags & INCONSISTENT]
    assert flagged and flagged[-1] == len(statuses) - 1  # still set in Stand
    assert all(s.status_flags & INCONSISTENT for s in statuses[flagged[0]:])
    assert statuses[flagged[0]].current_step_index == 3  # step 7 is looked for at the touchdown of step 3
    assert statuses[flagged[0]].status_flags & CATCHING
    result = statuses[-1].result
    assert (result.error_code, result.last_completed_step_index, result.offending_step_indices) == (
        WalkErrorCode.INCONSISTENT_STEPS, 3, (6, 7))
    assert behavior.step(1.0).status_flags == INCONSISTENT  # latched in Stand ...
    behavior.submit_goal(steps(1, 2))
    assert not behavior.step(DT).status_flags & INCONSISTENT  # ... until Walk is re-entered


def test_same_foot_in_first_window_stops_before_the_first_step():
    behavior = walker()
    bad = [step_k(1), step_k(2).replace(foot=Foot.LEFT)]
    assert behavior.submit_goal(bad).accepted
    statuses = run_to_stand(behavior)
    assert all(s.status_flags & SUBSTATE_FLAGS in (CATCHING, WalkFlags.NONE) for s in statuses)
    assert all(s.phase.kind is not PhaseKind.SINGLE for s in statuses)
    assert statuses[-1].result.offending_step_indices == (1, 2)
    assert behavior.feet == (LEFT0, RIGHT0)


def test_same_foot_queued_later_is_detected_at_the_touchdown_that_looks_for_it():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=False)
    behavior.queue_steps([step_k(5).replace(foot=Foot.RIGHT)])
    result = run_to_stand(behavior)[-1].result
    assert (result.error_code, result.offending_step_indices) == (WalkErrorCode.INCONSISTENT_STEPS, (4, 5))


def test_saturated_queue_holds_modified_copies_and_flags():
    behavior = walker()
    plan = steps(1, 4)
    plan[1] = plan[1].replace(position=(1.0, -0.1, 0.0), swing_height=0.5)  # 0.8 m ahead of step 1
    behavior.submit_goal(plan)
    status = behavior.step(DT)
    assert status.step_saturation == (
        SaturationFlags.NONE, SaturationFlags.LENGTH | SaturationFlags.SWING_HEIGHT,
        SaturationFlags.NONE, SaturationFlags.NONE)  # steps 3 and 4 are within limits of saturated 2
    saturated = status.step_queue_saturated[1]
    assert saturated.position == pytest.approx((0.2 + PARAMS.limits.max_forward, -0.1, 0.0))
    assert saturated.swing_height == PARAMS.limits.max_swing_height
    assert status.timeline.steps[1] == saturated  # the planner walks the saturated steps
    assert behavior.queue_steps(plan[1:], plan_complete=True).accepted  # compared with user data, not copies


# ------------------------------------------------------------------------------------- rejections


def assert_rejected_without_change(behavior, steps_or_records, code, plan_complete=True, match=""):
    before = behavior.status
    answer = behavior.submit_goal(steps_or_records, plan_complete=plan_complete)
    assert not answer.accepted and answer.rejection.error_code is code
    assert match in answer.rejection.message
    assert behavior.status == before
    return answer.rejection


def record(k, **changes):
    step = step_k(k)
    fields = dict(step_index=k, foot_index=int(step.foot), duration=step.duration, position=step.position,
                  yaw=0.0, normal=(0.0, 0.0, 1.0), swing_height=0.05)
    fields.update(changes)
    return fields


@pytest.mark.parametrize("walking", [False, True])
def test_empty_goal_is_rejected_and_changes_nothing(walking):
    behavior = walker()
    if walking:
        behavior.submit_goal(steps(1, 6))
        behavior.step(1.0)
    assert_rejected_without_change(behavior, [], WalkErrorCode.INSUFFICIENT_STEP_DATA, match="no steps")


@pytest.mark.parametrize("field,value", [
    ("duration", math.nan), ("yaw", math.inf), ("position", (0.2, math.nan, 0.0)), ("swing_height", -0.1),
    ("normal", (0.0, math.inf, 1.0)), ("position", (0.1, 0.2)),
])
def test_non_finite_or_malformed_numbers_are_rejected_and_change_nothing(field, value):
    behavior = walker()
    rejection = assert_rejected_without_change(
        behavior, [record(1), record(2, **{field: value})], WalkErrorCode.INVALID_STEP, match=field)
    assert rejection.step_index == 2


@pytest.mark.parametrize("foot", [2, -1, "left", None])
def test_foot_index_other_than_zero_or_one_is_rejected(foot):
    behavior = walker()
    rejection = assert_rejected_without_change(
        behavior, [record(1, foot_index=foot)], WalkErrorCode.INVALID_STEP, match="foot_index")
    assert rejection.step_index == 1


def test_non_increasing_step_indices_are_rejected():
    behavior = walker()
    assert_rejected_without_change(behavior, [step_k(1), step_k(2), step_k(2)], WalkErrorCode.INVALID_STEP,
                                   match="does not increase")
    assert_rejected_without_change(behavior, [step_k(2), step_k(1)], WalkErrorCode.INVALID_STEP,
                                   match="does not increase")


def test_skipped_indices_and_indices_below_one_are_rejected():
    behavior = walker()
    assert_rejected_without_change(behavior, [step_k(1), step_k(3)], INVALID, match="skips")
    zero = Step(0, Foot.LEFT, 0.8, (0.0, 0.1, 0.0))
    assert_rejected_without_change(behavior, [zero], WalkErrorCode.INVALID_STEP, match="start at 1")


def test_walk_from_stand_must_start_at_step_one():
    assert_rejected_without_change(walker(), steps(3, 6), INVALID, match="starts at step_index 1")


def test_open_goal_needs_four_steps():
    assert_rejected_without_change(walker(), steps(1, 3), WalkErrorCode.INSUFFICIENT_STEP_DATA,
                                   plan_complete=False, match="at least 4")


def test_unknown_or_missing_record_fields_are_rejected():
    assert_rejected_without_change(walker(), [record(1, toe=1)], WalkErrorCode.INVALID_STEP, match="unknown")
    missing = record(1)
    del missing["duration"]
    assert_rejected_without_change(walker(), [missing], WalkErrorCode.INVALID_STEP, match="missing")


def test_steps_that_are_not_a_list_are_rejected():
    assert_rejected_without_change(walker(), 3.0, INVALID, match="not a list")
    assert walker().submit_goal(iter(steps(1, 2))).accepted


def test_records_become_steps_and_zero_normal_reads_as_vertical():
    parsed = steps_from_records([record(1, normal=(0.0, 0.0, 0.0)), record(2)])
    assert parsed == (step_k(1), step_k(2))
    behavior = walker()
    assert behavior.submit_goal([record(1), record(2)]).accepted


def test_rejected_queue_requests_change_nothing():
    behavior = walker()
    behavior.submit_goal(steps(1, 4), plan_complete=False)
    before = behavior.status
    for bad in ([], [record(5, duration=math.nan)], [step_k(6), step_k(5)], [record(5, foot_index=3)]):
        answer = behavior.queue_steps(bad)
        assert not answer.accepted and answer.error_code is not WalkErrorCode.NONE
    assert behavior.status == before


# ----------------------------------------------------------------------------------------- cancel


def test_cancel_during_swing_finishes_the_step_then_catches_with_canceled():
    behavior = walker()
    behavior.submit_goal(steps(1, 10))
    run(behavior, lambda s: s.current_step_index == 2)
    status = run(behavior, lambda s: s.phase.kind is PhaseKind.SINGLE)[-1]
    assert status.phase.step_index == 3
    assert behavior.cancel()
    assert behavior.status.status_flags & STEPPING  # step 3 is finished
    assert [q.step_index for q in behavior.status.step_queue_saturated] == [3]
    assert not behavior.cancel()  # already ending
    statuses = run_to_stand(behavior)
    result = statuses[-1].result
    assert (result.error_code, result.last_completed_step_index) == (WalkErrorCode.CANCELED, 3)
    assert behavior.feet[0] == FootPose.of_step(step_k(3))


def test_cancel_during_double_support_drops_the_next_step():
    behavior = walker()
    behavior.submit_goal(steps(1, 10))
    run(behavior, lambda s: s.current_step_index == 2)
    assert behavior.status.phase.kind is PhaseKind.DOUBLE
    assert behavior.cancel()
    assert behavior.status.status_flags & CATCHING
    assert run_to_stand(behavior)[-1].result.last_completed_step_index == 2


def test_cancel_during_sway_catches_without_stepping():
    behavior = walker()
    behavior.submit_goal(steps(1, 4))
    behavior.step(0.2)
    assert behavior.cancel()
    statuses = run_to_stand(behavior)
    assert all(s.phase.kind is not PhaseKind.SINGLE for s in statuses)
    assert statuses[-1].result.error_code is WalkErrorCode.CANCELED
    assert behavior.feet == (LEFT0, RIGHT0)


def test_cancel_is_refused_in_stand_or_for_another_goal():
    behavior = walker()
    assert not behavior.cancel()
    answer = behavior.submit_goal(steps(1, 4))
    assert not behavior.cancel(goal_id="someone else")
    assert behavior.cancel(goal_id=answer.goal_id)


def test_abort_ends_with_the_given_code():
    behavior = walker()
    behavior.submit_goal(steps(1, 4))
    assert behavior.abort(WalkErrorCode.IK_FAILURE, "IK did not converge")
    result = run_to_stand(behavior)[-1].result
    assert (result.error_code, result.error_msg) == (WalkErrorCode.IK_FAILURE, "IK did not converge")


def test_abort_rejects_unknown_codes():
    behavior = walker()
    behavior.submit_goal(steps(1, 4))
    with pytest.raises(InputError, match="error_code"):
        behavior.abort(42, "?")


def test_reset_returns_canceled_result_and_stands_at_the_given_feet():
    behavior = walker()
    answer = behavior.submit_goal(steps(1, 4))
    behavior.step(2.0)
    feet = (FootPose((1.0, 0.1, 0.0)), FootPose((1.0, -0.1, 0.0)))
    result = behavior.reset(*feet)
    assert (result.goal_id, result.error_code) == (answer.goal_id, WalkErrorCode.CANCELED)
    status = behavior.step(DT)
    assert status.behavior is Behavior.STAND and (status.left, status.right) == feet
    assert behavior.reset() is None


# ------------------------------------------------------------------------------------- preemption


def test_new_goal_preempts_and_continues_without_stopping():
    behavior = walker()
    first = behavior.submit_goal(steps(1, 6), plan_complete=False)
    run(behavior, lambda s: s.current_step_index == 1)
    needed = behavior.next_step_index_needed
    turn = [step_k(k).replace(yaw=0.1 * (k - needed + 1)) for k in range(needed, needed + 4)]
    answer = behavior.submit_goal(turn, plan_complete=True)
    assert answer.accepted
    assert (answer.preempted.goal_id, answer.preempted.error_code) == (first.goal_id, WalkErrorCode.PREEMPTED)
    assert answer.preempted.last_completed_step_index == 1
    statuses = run_to_stand(behavior)
    assert all(s.status_flags & CATCHING == 0 for s in statuses if s.current_step_index < needed + 3)
    indices = [s.current_step_index for s in statuses[:-1]]
    assert indices == sorted(indices)
    result = statuses[-1].result
    assert (result.goal_id, result.error_code, result.last_completed_step_index) == (
        answer.goal_id, WalkErrorCode.NONE, needed + 3)
    assert (behavior.feet[0].yaw, behavior.feet[1].yaw) == pytest.approx((0.4, 0.3))


def test_preempting_goal_may_repeat_committed_steps_identically():
    behavior = walker()
    behavior.submit_goal(steps(1, 8))
    behavior.step(DT)
    answer = behavior.submit_goal(steps(3, 6), plan_complete=True)
    assert answer.accepted
    assert run_to_stand(behavior)[-1].result.last_completed_step_index == 6


def test_preempting_goal_changing_a_committed_step_is_rejected():
    behavior = walker()
    behavior.submit_goal(steps(1, 8))
    behavior.step(DT)
    rejection = assert_rejected_without_change(behavior, steps(1, 3, length=0.1), WalkErrorCode.INVALID_STEP,
                                               match="committed")
    assert rejection.step_index == 1


def test_preempting_goal_with_the_same_foot_as_the_last_committed_step_is_rejected():
    behavior = walker()
    behavior.submit_goal(steps(1, 8))
    behavior.step(DT)
    wrong = [step_k(5).replace(foot=Foot.RIGHT, position=(1.0, -0.1, 0.0)), step_k(6).replace(foot=Foot.LEFT)]
    rejection = assert_rejected_without_change(behavior, wrong, WalkErrorCode.INCONSISTENT_STEPS)
    assert rejection.step_index == 5


def test_preempting_goal_must_continue_at_next_step_index_needed():
    behavior = walker()
    behavior.submit_goal(steps(1, 8))
    behavior.step(DT)
    assert_rejected_without_change(behavior, steps(7, 8), INVALID, match="continue at step 5")


def test_new_goal_while_stopping_is_rejected():
    behavior = walker()
    behavior.submit_goal(steps(1, 8))
    behavior.step(DT)
    behavior.cancel()
    assert_rejected_without_change(behavior, steps(5, 6), WalkErrorCode.INVALID_STEP, match="stopping")


# ------------------------------------------------------------------------------------ fuzzed stream

KINDS = ["goal"] * 3 + ["queue"] * 5 + ["step"] * 6 + ["cancel", "abort", "reset"]
OPS = st.tuples(
    st.sampled_from(KINDS), st.integers(0, 7), st.sampled_from(["one", "next", "overlap", "gap", "low"]),
    st.booleans(), st.sampled_from(["ok"] * 6 + ["flip", "nan", "foot", "decreasing", "far"]),
    st.floats(0.0, 0.9, allow_nan=False),
)


def make_request(behavior, count, start, corruption):
    needed = behavior.next_step_index_needed
    first = {"one": 1, "next": max(needed, 1), "overlap": max(needed - 3, 1), "gap": needed + 2,
             "low": max(needed - 6, 1)}[start]
    items = [record(k) for k in range(first, first + count)]
    if items and corruption != "ok":
        i = len(items) // 2
        if corruption == "flip":
            items[i]["foot_index"] = 1 - items[i]["foot_index"]
        elif corruption == "nan":
            items[i]["duration"] = math.nan
        elif corruption == "foot":
            items[i]["foot_index"] = 5
        elif corruption == "decreasing":
            items.reverse()
        elif corruption == "far":
            items[i]["position"] = (50.0, -30.0, 4.0)
    return items


@settings(derandomize=True, max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=10, max_size=60))
def test_fuzzed_goal_stream_gives_every_goal_exactly_one_result(ops):
    behavior = walker()
    outcomes = {}
    submitted = []

    def record_result(result):
        if result is not None:
            outcomes.setdefault(result.goal_id, []).append(result.error_code)

    def check(status):
        substate = status.status_flags & SUBSTATE_FLAGS
        if status.behavior is Behavior.WALK:
            assert substate in (SWAYING, STEPPING, CATCHING)
            assert status.current_step_index < status.next_step_index_needed
        else:
            assert substate == WalkFlags.NONE and status.current_step_index == 0
        assert len(status.step_queue_saturated) == len(status.step_saturation) <= NUM_REQUIRED_WALK_STEPS
        assert status.t_step_rem >= 0.0
        record_result(status.result)

    for op in ops:
        kind = op[0]
        if kind in ("goal", "queue"):
            items = make_request(behavior, op[1], op[2], op[4])
            if kind == "goal":
                answer = behavior.submit_goal(items, plan_complete=op[3])
                submitted.append(answer.goal_id)
                if not answer.accepted:
                    outcomes.setdefault(answer.goal_id, []).append("rejected")
                record_result(answer.preempted)
            else:
                behavior.queue_steps(items, plan_complete=op[3])
        elif kind == "cancel":
            behavior.cancel()
        elif kind == "abort":
            behavior.abort(WalkErrorCode.PLANNER_FAILURE, "planner failed")
        elif kind == "reset":
            record_result(behavior.reset())
        else:
            check(behavior.step(op[5]))
        check(behavior.status)
    for _ in range(1000):
        if behavior.behavior is Behavior.STAND:
            break
        check(behavior.step(0.5))
    assert behavior.behavior is Behavior.STAND
    assert sorted(outcomes, key=submitted.index) == submitted
    assert all(len(results) == 1 for results in outcomes.values()), outcomes
