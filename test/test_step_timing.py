"""Step timing adaptation from the measured DCM (issue 18): StepAdjustmentParameters.adapt_timing, its
decision on synthetic DCM errors, the walk behavior's re-timed committed steps, the re-timed swing, and a
walking push outward over the stance foot on MuJoCo (state estimated, stabilizer on)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from walk_mpc.core.body.swing import RetargetedPhase, phase_swing_position_yaw, retarget_swing
from walk_mpc.core.control.step_adjustment import (
    StepAdjuster,
    StepAdjustmentParameters,
    adjusted_steps,
    nominal_touchdown_dcm,
)
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.walk.behavior import WalkBehavior
from walk_mpc.core.walk.footsteps import walk_forward
from walk_mpc.core.walk.saturation import StepLimits
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

LEFT, RIGHT = FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0))
TIMING = GaitTiming(sway_duration=0.6, double_support_duration=0.3, catch_duration=0.6)
OMEGA = 3.35  # [1/s] Talos' LIPM (h about 0.87 m)
TIMED = StepAdjustmentParameters(enabled=True, adapt_timing=True)


def straight(n: int = 6) -> Timeline:
    steps = walk_forward(LEFT, RIGHT, 0.2 * (n - 1), step_length=0.2, width=0.17, duration=1.1)
    return Timeline(LEFT, RIGHT, steps, TIMING)


@pytest.fixture(scope="module")
def robot():
    from walk_mpc.core.body.robot import RobotModel

    return RobotModel()


def mid_single_support(timeline: Timeline, index: int = 3):
    phase = next(p for p in timeline.phases if p.kind is PhaseKind.SINGLE and p.step_index == index)
    return phase, 0.5 * (phase.t_start + phase.t_end)


def nominal_dcm(timeline: Timeline, index: int, t: float) -> np.ndarray:
    """The plan's DCM at ``t`` in step ``index``'s single support (the ZMP on the stance sole's centre)."""
    phase, _ = mid_single_support(timeline, index)
    zmp = np.asarray(phase.foot(phase.swing_foot.other).position[:2])
    target = nominal_touchdown_dcm(timeline, index, OMEGA)
    return zmp + (target - zmp) * math.exp(-OMEGA * (phase.t_end - t))


def outward_unit(phase) -> np.ndarray:
    """The stance sole's outer side (away from the swinging foot) in the world."""
    return np.array([0.0, 1.0 if phase.swing_foot is Foot.RIGHT else -1.0])


def test_parameters_are_checked_and_timing_is_off_by_default():
    p = StepAdjustmentParameters()
    assert not p.adapt_timing and not p.sagittal_timing and p.inward_timing
    with pytest.raises(ParameterError, match="adapt_timing"):
        StepAdjustmentParameters(adapt_timing=1)
    with pytest.raises(ParameterError, match="max_lengthening"):
        StepAdjustmentParameters(max_lengthening=0.5)  # the re-timed swing would not be monotonic
    with pytest.raises(ParameterError, match="shortest_time_to_touchdown"):
        StepAdjustmentParameters(shortest_time_to_touchdown=0.0)


def test_the_planned_dcm_changes_nothing(robot):
    timeline = straight()
    phase, t = mid_single_support(timeline)
    adjuster = StepAdjuster(robot, TIMED)
    assert adjuster.decide_timing(t, timeline, nominal_dcm(timeline, 3, t), OMEGA) is None
    assert adjuster.adjustments == 0 and adjuster.last["touchdown_in"] == pytest.approx(phase.t_end - t)


def test_a_dcm_still_inside_the_stance_sole_lands_later(robot):
    """5 cm outward of the plan at mid single support (the plan's DCM is 3 cm inward of the stance sole's
    centre: still inside the sole, whose outer edge is 5.5 cm out; the ZMP there brings it back, given time):
    the touchdown comes later, within max_lengthening; places and indices stay."""
    timeline = straight()
    phase, t = mid_single_support(timeline)
    xi = nominal_dcm(timeline, 3, t) + 0.05 * outward_unit(phase)
    steps = StepAdjuster(robot, TIMED).decide_timing(t, timeline, xi, OMEGA)
    assert steps is not None
    assert [(s.step_index, s.foot) for s in steps] == [(s.step_index, s.foot) for s in timeline.steps]
    step, planned = steps[2], timeline.steps[2]
    left = phase.t_end - t
    assert planned.duration < step.duration <= planned.duration + TIMED.max_lengthening * left + 1e-9
    assert [s.position for s in steps] == [s.position for s in timeline.steps]
    assert steps[3:] == timeline.steps[3:]


def test_a_dcm_beyond_the_outer_edge_lands_early_and_the_stance_foot_steps_out(robot):
    """10 cm outward (7 cm from the sole's centre, beyond its outer edge): the swinging foot lands as soon
    as allowed (it cannot catch the DCM without crossing), and the next step (the stance foot's) goes
    outward, as quick as the step limits allow, within them; indices and feet unchanged."""
    timeline = straight()
    limits = StepLimits()
    phase, t = mid_single_support(timeline)
    out = outward_unit(phase)
    xi = nominal_dcm(timeline, 3, t) + 0.1 * out
    adjuster = StepAdjuster(robot, TIMED, limits)
    steps = adjuster.decide_timing(t, timeline, xi, OMEGA)
    assert steps is not None
    assert [(s.step_index, s.foot) for s in steps] == [(s.step_index, s.foot) for s in timeline.steps]
    step, nxt = steps[2], steps[3]
    touchdown = Timeline(LEFT, RIGHT, steps, TIMING).touchdown_time(3)
    assert touchdown == pytest.approx(t + TIMED.shortest_time_to_touchdown)
    # It would have to cross: not moved sideways (landing early, the DCM is behind the plan's: a bit shorter).
    assert step.position[1] == timeline.steps[2].position[1]
    shorter = step.position[0] - timeline.steps[2].position[0]
    assert -StepAdjustmentParameters().max_backward_shift <= shorter <= 0.0
    assert nxt.duration == limits.min_duration
    moved = float(np.dot(np.asarray(nxt.position[:2]) - timeline.steps[3].position[:2], out))
    assert 0.05 < moved <= TIMED.max_next_widening_shift + 1e-9
    width = abs(nxt.position[1] - step.position[1])
    assert limits.min_width <= width <= limits.max_width + 1e-9
    assert adjuster.adjustments == 1 and adjuster.last["touchdown_in"] == pytest.approx(0.15)


def test_an_inward_error_lands_early_unless_the_step_place_absorbs_it(robot):
    """Toward the swinging foot's side (wider steps off by default, max_widening_shift 0): the swinging step
    lands earlier; without inward_timing nothing changes; with wider steps allowed the place absorbs it."""
    timeline = straight()
    phase, t = mid_single_support(timeline)
    xi = nominal_dcm(timeline, 3, t) - 0.1 * outward_unit(phase)
    steps = StepAdjuster(robot, TIMED).decide_timing(t, timeline, xi, OMEGA)
    assert steps is not None and steps[2].duration < timeline.steps[2].duration
    assert steps[2].position[1] == timeline.steps[2].position[1] and steps[3] == timeline.steps[3]
    outward_only = dataclasses.replace(TIMED, inward_timing=False)
    assert StepAdjuster(robot, outward_only).decide_timing(t, timeline, xi, OMEGA) is None
    wider = dataclasses.replace(TIMED, max_widening_shift=0.3)
    steps = StepAdjuster(robot, wider).decide_timing(t, timeline, xi, OMEGA)
    assert steps is not None and steps[2].duration == timeline.steps[2].duration
    assert abs(steps[2].position[1] - steps[1].position[1]) > 0.17


def test_least_timing_change_lands_nearest_the_plan_with_the_error_within_the_deadband(robot):
    """An inward error of 5 cm: by default the touchdown time leaving the least DCM error (0.15 s earlier);
    with ``least_timing_change`` the time nearest the planned one that leaves at most ``timing_deadband`` of
    it: later than the default's, earlier than planned, and the time just before it (nearer the plan)
    leaves more."""
    timeline = straight()
    phase, t = mid_single_support(timeline)
    xi = nominal_dcm(timeline, 3, t) - 0.05 * outward_unit(phase)
    least = dataclasses.replace(TIMED, least_timing_change=True)
    default, nearest = StepAdjuster(robot, TIMED), StepAdjuster(robot, least)
    assert default.decide_timing(t, timeline, xi, OMEGA) is not None
    assert nearest.decide_timing(t, timeline, xi, OMEGA) is not None
    tau, tau_default = nearest.last["touchdown_in"], default.last["touchdown_in"]
    assert tau_default < tau < phase.t_end - t - 1e-9
    assert np.hypot(*nearest.last["residual"]) <= least.timing_deadband + 1e-9
    nearer = nearest._place(np.asarray(xi), OMEGA, tau + least.timing_resolution,
                            nominal_touchdown_dcm(timeline, 3, OMEGA), phase, timeline, True)
    assert nearer["error"] > least.timing_deadband
    with pytest.raises(ParameterError, match="least_timing_change"):
        StepAdjustmentParameters(least_timing_change=1)


def test_an_inward_error_landing_early_moves_the_step_back_with_inward_back_limit(robot):
    """An inward error landing early (above): the DCM reaches the touchdown behind the plan's unless the ZMP
    sits at the stance sole's heel while also beyond its inner edge; with ``inward_back_limit`` the ZMP is
    taken to reach only that far behind the sole's centre there, and the step lands shorter by the rest
    (on MuJoCo the sole, rolling over its inner edge, gave no such ZMP: the step landed ahead of the DCM and
    the robot rotated back off it). Without it the step moves back only by what the heel and the
    zmp_tolerance beyond it leave; an outward error is bit for bit the same."""
    timeline = straight()
    phase, t = mid_single_support(timeline)
    xi = nominal_dcm(timeline, 3, t) - 0.1 * outward_unit(phase)
    planned = timeline.steps[2].position
    before = StepAdjuster(robot, TIMED).decide_timing(t, timeline, xi, OMEGA)
    limited = dataclasses.replace(TIMED, inward_back_limit=0.02)
    steps = StepAdjuster(robot, limited).decide_timing(t, timeline, xi, OMEGA)
    assert steps[2].duration == before[2].duration  # the same touchdown (only the lateral error times it)
    shorter = steps[2].position[0] - before[2].position[0]
    assert -TIMED.max_backward_shift <= steps[2].position[0] - planned[0] and shorter < -TIMED.deadband
    assert steps[2].position[1] == planned[1]
    outward = nominal_dcm(timeline, 3, t) + 0.1 * outward_unit(phase)
    assert (StepAdjuster(robot, limited).decide_timing(t, timeline, outward, OMEGA)
            == StepAdjuster(robot, TIMED).decide_timing(t, timeline, outward, OMEGA))
    with pytest.raises(ParameterError, match="inward_back_limit"):
        StepAdjustmentParameters(inward_back_limit=-0.01)


def test_adjusted_steps_change_durations_and_the_next_step_within_the_limits():
    timeline = straight()
    limits = StepLimits()
    step = timeline.steps[2]
    steps = adjusted_steps(timeline, 3, step.position[:2], limits,
                           {3: {"duration": 0.7}, 4: {"duration": 0.2, "position": (0.8, -0.9)}})
    assert steps[2].duration == 0.7 and steps[2].position == step.position
    assert steps[3].duration == limits.min_duration  # saturated
    assert steps[3].position[1] == pytest.approx(step.position[1] - limits.max_width)
    assert steps[:2] == timeline.steps[:2]


def test_the_behavior_re_times_a_committed_step_without_changing_indices():
    behavior = WalkBehavior(WalkBehavior.Parameters(timing=TIMING), LEFT, RIGHT)
    steps = straight().steps
    assert behavior.submit_goal(steps, True).accepted
    behavior.step(1.0)  # step 1 swings (0.6 .. 1.4 s)
    status = behavior.status
    assert status.t_step_rem == pytest.approx(0.4)
    shortened = adjusted_steps(status.timeline, 1, steps[0].position[:2], StepLimits(),
                               {1: {"duration": 0.9}})
    assert behavior.adjust_steps(shortened) == (1,)
    status = behavior.status
    assert status.t_step_rem == pytest.approx(0.2)
    assert status.step_queue_saturated[0].duration == 0.9
    assert [s.step_index for s in status.step_queue_saturated] == [1, 2, 3, 4]
    assert status.timeline.touchdown_time(2) == pytest.approx(0.6 + 0.9 + 1.1 - 0.3)
    behavior.step(0.21)
    assert behavior.status.current_step_index == 1


def test_a_re_timed_swing_continues_from_where_the_foot_is_and_lands_on_time():
    """The swing of step 3 shortened (and moved) mid-swing: position and velocity continuous at the re-plan,
    at rest on the new touchdown at the new time."""
    timeline = straight()
    phase, t = mid_single_support(timeline)
    steps = adjusted_steps(timeline, 3, (0.62, 0.1), StepLimits(), {3: {"duration": 0.9}})
    new = retarget_swing(Timeline(LEFT, RIGHT, steps, TIMING), timeline, t)
    retimed = new.phase_at(t)
    assert isinstance(retimed, RetargetedPhase) and retimed.t_end == pytest.approx(phase.t_end - 0.2)

    def position(tl, time):
        ph = tl.phase_at(time)
        return np.array(phase_swing_position_yaw(ph, ph.progress(time))[0])

    h = 1e-5
    assert np.allclose(position(new, t), position(timeline, t), atol=1e-12)
    v_old = (position(timeline, t) - position(timeline, t - h)) / h
    v_new = (position(new, t + h) - position(new, t)) / h
    assert np.allclose(v_new, v_old, atol=1e-3)
    end = retimed.t_end
    assert np.allclose(position(new, end - 1e-9), [0.62, 0.1, 0.0], atol=1e-6)
    assert np.linalg.norm(position(new, end - 1e-9) - position(new, end - 1e-3)) < 1e-4  # at rest
    # Samples along the rest of the swing never jump.
    times = np.arange(t, end, 0.001)
    path = np.array([position(new, x) for x in times])
    assert np.max(np.linalg.norm(np.diff(path, axis=0), axis=1)) < 0.003


# ---------------------------------------------------------------------------------------------------- MuJoCo

def _push_walk(rb, robot, impulse: float, adjustment, direction: str = "outward", planner=None):
    gait = rb.Gait(steps=6)
    t0, unit = rb.push_directions(robot, gait, True)[direction]
    force = impulse / rb.PUSH_DURATION * np.array([unit[0], unit[1], 0.0])
    saved = dict(rb.ADJUST), dict(rb.PLANNER)
    rb.ADJUST.clear()
    rb.ADJUST.update(adjustment or {})
    rb.PLANNER.clear()
    rb.PLANNER.update(planner or {})
    try:
        return rb.run_walk(robot, True, gait, push=(t0, force), adjust=adjustment is not None,
                           duration=rb.timeline_of(robot, gait).t_end + rb.PUSH_SETTLE)
    finally:
        rb.ADJUST.clear()
        rb.ADJUST.update(saved[0])
        rb.PLANNER.clear()
        rb.PLANNER.update(saved[1])


def test_an_outward_walking_push_that_fell_is_survived_with_step_timing(estimated, robot):
    """State estimated, stabilizer on, the planner's zmp_inward_offset 4.5 cm (the README: outward 31.2 N s
    without step adjustment), 35 N s outward over the stance foot in step 3's single support: it falls
    without step adjustment and with the default (position) one; with step timing adaptation the swinging
    step lands 0.1 s later (the DCM, still inside the stance sole, is brought back by the ZMP on its outer
    edge): it walks."""
    planner = {"zmp_inward_offset": 0.045}
    assert not estimated.walked(_push_walk(estimated, robot, 35.0, None, planner=planner))
    assert not estimated.walked(_push_walk(estimated, robot, 35.0, {}, planner=planner))
    assert estimated.walked(_push_walk(estimated, robot, 35.0, {"adapt_timing": True}, planner=planner))


def test_enabled_without_disturbance_changes_nothing_bit_for_bit(estimated, robot):
    """Undisturbed, step adjustment with timing decides nothing: the commands are those of the loop without
    it (and with the stabilizer off too: the defaults never call it)."""
    from push_replay import undisturbed_commands

    commands = undisturbed_commands(estimated, robot, (None, TIMED))
    assert len(commands[0]) == len(commands[1])
    for a, b in zip(*commands):
        assert a.stamp_ns == b.stamp_ns and np.array_equal(a.positions, b.positions)


def test_the_walk_supervisor_re_times_the_steps_the_in_process_loop_re_times(estimated, robot):
    """The same samples (an in-process walk pushed outward, replayed) give the WalkSupervisor (the
    walk_behavior node's core) the same adjusted steps, durations included, as the loop's plans."""
    from push_replay import pushed_walk_replayed

    timeline, loop, supervisor, plans = pushed_walk_replayed(estimated, robot, "outward", 190.0, 4.2, TIMED)
    retimed = [s for s, c in zip(loop.plans[-1].timeline.steps, timeline.steps) if s.duration != c.duration]
    assert retimed  # the push changed step durations
    assert supervisor.step_adjuster.adjustments == loop.adjuster.adjustments == len(loop.plans) - 1
    ours, theirs = plans[-1].timeline.steps, loop.plans[-1].timeline.steps
    assert [(s.step_index, s.foot) for s in ours] == [(s.step_index, s.foot) for s in theirs]
    for a, b in zip(ours, theirs):
        assert a.position == pytest.approx(b.position, abs=1e-9)
        assert a.duration == pytest.approx(b.duration, abs=1e-9)
    assert len({plan.stamp_ns for plan in plans}) == 1


def test_the_fast_gait_that_fell_with_step_timing_walks_with_the_least_timing_change(estimated, robot,
                                                                                        monkeypatch):
    """State estimated, stabilizer on, step timing, 12 steps of 0.3 m at 0.4 / 0.1 s (0.6 m/s, the
    robustness table's fastest gait), undisturbed: a lateral error just beyond the sole's edge moves a 0.4 s
    swing's touchdown 0.1 s earlier (the time leaving the least error) and Talos falls; with
    ``least_timing_change`` (the nearest time leaving the error within the deadband) it walks."""
    gait = estimated.Gait(12, 0.3, 0.4, 0.1)
    monkeypatch.setattr(estimated, "ADJUST", {"adapt_timing": True})
    assert not estimated.walked(estimated.run_walk(robot, True, gait, adjust=True))
    monkeypatch.setattr(estimated, "ADJUST", {"adapt_timing": True, "least_timing_change": True})
    assert estimated.walked(estimated.run_walk(robot, True, gait, adjust=True))
