"""WalkSupervisor (the walk_behavior node's core): time base, rogue stamps, outages, liveness of the chain."""

import dataclasses
import math

import numpy as np
import pytest

from walk_mpc.core.control.walk_supervisor import WalkSupervisor, WalkSupervisorParameters
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.walk.behavior import Behavior, WalkErrorCode
from walk_mpc.core.walk.step import Foot, Step

NS = 1_000_000_000
PERIOD = 10_000_000  # 10 ms samples


@pytest.fixture(scope="module")
def sample():
    sim = KinematicSim()
    sim.step()
    return sim.sensor_sample()


def steps(n=4, x=0.1):
    return [Step(k, Foot.LEFT if k % 2 else Foot.RIGHT, 0.8,
                 ((k // 2 + k % 2) * x, 0.085 if k % 2 else -0.085, 0.0)) for k in range(1, n + 1)]


def summary(output):
    status = output.status
    fields = None if status is None else (status.t, status.status_flags, status.current_step_index,
                                          status.next_step_index_needed, status.t_step_rem)
    return fields, output.plan is None, output.results


def make(robot=None, **kwargs):
    params = WalkSupervisorParameters(sensor_timeout=0.25, **kwargs)
    return WalkSupervisor(params, robot)


def run(supervisor, sample, start, count, steady_offset=0, report=()):
    """``count`` samples from ``start`` [ns], the steady clock in step; returns (last stamp, outputs)."""
    outputs = []
    ns = start
    for _ in range(count):
        ns += PERIOD
        outputs.append(supervisor.observe(ns, sample, ns + steady_offset))
        for name in report:
            supervisor.report(name, 0, ns, steady_ns=ns + steady_offset)
    return ns, outputs


def test_first_sample_publishes_the_stand_plan_and_ticks_every_control_period(sample):
    supervisor = make()
    ns, outputs = run(supervisor, sample, 100 * NS, 10)
    assert outputs[0].plan is not None and outputs[0].plan.plan_id == 1 and not outputs[0].plan.walking
    assert [o.status is not None for o in outputs] == [True, False] * 5


def test_rogue_stamps_far_ahead_or_behind_are_rejected_and_the_walk_goes_on_identically(sample):
    reference, rogue = make(), make()
    for s in (reference, rogue):
        run(s, sample, 100 * NS, 5)
        answer, _ = s.submit_goal(b"g", steps(), True, 100 * NS + 5 * PERIOD)
        assert answer.accepted
    ns = 100 * NS + 5 * PERIOD
    for k in range(500):
        ns += PERIOD
        a = reference.observe(ns, sample, ns)
        if k % 7 == 3:  # rogue samples between the real ones: far future, duplicate, past
            for stamp in (2147483647 * NS, ns - PERIOD, ns - 50 * PERIOD):
                assert rogue.observe(stamp, sample, ns).rejected
        b = rogue.observe(ns, sample, ns)
        assert summary(a) == summary(b)
    assert reference.behavior.behavior is Behavior.STAND  # the walk ended normally in both
    assert rogue.rejected_samples == 3 * len([k for k in range(500) if k % 7 == 3])


def test_a_sample_with_nan_is_rejected_without_touching_the_time_base(sample):
    supervisor = make()
    ns, _ = run(supervisor, sample, 100 * NS, 3)
    bad = dataclasses.replace(sample, joint_pos=np.full(len(sample.joint_pos), np.nan))
    assert "joint_pos" in supervisor.observe(2147483647 * NS, bad, ns).rejected
    assert supervisor.observe(ns + PERIOD, sample, ns + PERIOD).rejected == ""


def test_a_clock_restarted_backwards_ends_the_walk_and_re_anchors(sample):
    supervisor = make()
    ns, _ = run(supervisor, sample, 100 * NS, 5)
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    ns, _ = run(supervisor, sample, ns, 50)
    assert supervisor.walking
    outputs = [supervisor.observe(k * PERIOD, sample, ns + k * PERIOD) for k in range(1, 6)]
    assert all(o.rejected for o in outputs[:4]) and not outputs[4].rejected
    result = outputs[4].results[0]
    assert result.error_code == WalkErrorCode.SENSOR_TIMEOUT and "new time base" in result.error_msg
    assert supervisor.behavior.behavior is Behavior.STAND and outputs[4].plan is not None
    # the new time base is the time base now: the next samples tick
    after = [supervisor.observe(k * PERIOD, sample, ns + k * PERIOD) for k in range(6, 10)]
    assert not any(o.rejected for o in after) and any(o.status is not None for o in after)


def test_a_silent_ik_ends_the_walk_by_steady_time_and_names_it(sample):
    supervisor = make(watch_links=("mpc_planner", "ik"))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("mpc_planner", "ik"))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    ns, _ = run(supervisor, sample, ns, 25, report=("mpc_planner",))  # the ik stopped reporting
    assert supervisor.walking and supervisor.check_timeouts(ns).results == ()  # 0.25 s of samples so far
    ns, outputs = run(supervisor, sample, ns, 10, report=("mpc_planner",))
    (result,) = [r for o in outputs for r in o.results]
    assert result.error_code == WalkErrorCode.IK_FAILURE
    assert result.error_msg.startswith("no ik/timing for 0.31 s of sensor samples: is the ik running?")
    # and a new goal is refused, naming it
    answer, _ = supervisor.submit_goal(b"h", steps(), True, ns + int(0.15 * NS))
    assert not answer.accepted and "is the ik running?" in answer.rejection.message


def test_a_silent_planner_ends_the_walk_by_sensor_time(sample):
    supervisor = make(watch_links=("mpc_planner", "ik"))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("mpc_planner", "ik"))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    ns, outputs = run(supervisor, sample, ns, 40, report=("ik",))
    ended = [r for o in outputs for r in o.results]
    assert [r.error_code for r in ended] == [WalkErrorCode.PLANNER_FAILURE]
    assert "is the mpc_planner running?" in ended[0].error_msg and "of sensor samples" in ended[0].error_msg


def test_failure_reports_name_the_component_and_the_cause(sample):
    supervisor = make(watch_links=("ik",))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("ik",))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    supervisor.report("ik", 1, ns, steady_ns=ns)
    ns, outputs = run(supervisor, sample, ns, 300, report=("ik",))
    (result,) = [r for o in outputs for r in o.results]
    assert result.error_code == WalkErrorCode.IK_FAILURE and "ik reported IK_FAILED" in result.error_msg


def test_a_plan_the_ik_refuses_ends_the_walk_saying_why(sample):
    from walk_mpc.core.control.types import WholeBodyStatus

    supervisor = make(watch_links=("ik",))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("ik",))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    why = "walk plan 3 refused at t = 0.020 s: left sole 7.0 cm from where the robot stands"
    supervisor.report("ik", int(WholeBodyStatus.PLAN_REFUSED), ns, why, steady_ns=ns)
    ns, outputs = run(supervisor, sample, ns, 300, report=("ik",))
    (result,) = [r for o in outputs for r in o.results]
    assert result.error_code == WalkErrorCode.IK_FAILURE
    assert result.error_msg.startswith(f"ik refused the plan: {why}"), result.error_msg
    assert "PLAN_REFUSED" in result.error_msg and " 6 " not in result.error_msg


def test_parameters_refuse_unknown_links():
    with pytest.raises(ParameterError, match="watch_links"):
        WalkSupervisorParameters(watch_links=("planner",))


def test_a_gap_in_the_samples_does_not_blame_a_link_that_answers_the_next_sample(sample):
    """Under load the stream can pause for most of sensor_timeout: the links' last reports are then as old as
    the gap when the samples resume, which is not their silence."""
    supervisor = make(watch_links=("mpc_planner", "ik"))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("mpc_planner", "ik"))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    ns, _ = run(supervisor, sample, ns, 10, report=("mpc_planner", "ik"))
    supervisor.report("ik", 0, ns - int(0.1 * NS), steady_ns=ns - int(0.1 * NS))  # the ik lagged 0.1 s
    stall = ns + int(0.22 * NS)  # then 0.22 s without samples (below sensor_timeout): ik silent 0.32 s
    assert supervisor.check_timeouts(stall).results == ()
    ns = stall
    ns, outputs = run(supervisor, sample, ns, 20, report=("mpc_planner", "ik"))
    assert not any(o.results for o in outputs) and supervisor.walking


def test_a_late_timeout_check_waits_for_the_samples_queued_meanwhile(sample):
    """A node starved of the CPU runs its timer before the samples that queued while it waited: that late
    check decides nothing; the next one, after the queued samples, finds the stream alive."""
    supervisor = make(watch_links=("mpc_planner", "ik"))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("mpc_planner", "ik"))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    ns, _ = run(supervisor, sample, ns, 10, report=("mpc_planner", "ik"))
    assert supervisor.check_timeouts(ns).results == ()
    late = ns + int(0.3 * NS)  # the process ran nothing for 0.3 s: the sim's samples wait in its queue
    assert supervisor.check_timeouts(late).results == () and supervisor.starved_checks == 1
    for _ in range(30):  # the queued samples (their stamps on time), handled at once after the late check
        ns += PERIOD
        supervisor.observe(ns, sample, late)
        for name in ("mpc_planner", "ik"):
            supervisor.report(name, 0, ns, steady_ns=late)
    assert supervisor.check_timeouts(late + 2 * PERIOD).results == () and supervisor.walking


def test_a_late_check_defers_a_real_outage_by_one_check_only(sample):
    supervisor = make(watch_links=("mpc_planner", "ik"))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("mpc_planner", "ik"))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    ns, _ = run(supervisor, sample, ns, 10, report=("mpc_planner", "ik"))
    assert supervisor.check_timeouts(ns).results == ()
    assert supervisor.check_timeouts(ns + int(0.3 * NS)).results == ()  # late: defers
    (result,) = supervisor.check_timeouts(ns + int(0.32 * NS)).results  # nothing came: the stream stopped
    assert result.error_code == WalkErrorCode.SENSOR_TIMEOUT and "for 0.320 s" in result.error_msg
    # a process starved for good still decides: every other late check
    supervisor = make(watch_links=("mpc_planner", "ik"))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("mpc_planner", "ik"))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    ns, _ = run(supervisor, sample, ns, 10, report=("mpc_planner", "ik"))
    checks = [supervisor.check_timeouts(ns + k * int(0.3 * NS)).results for k in range(3)]
    assert checks[0] == () and checks[1] == () and checks[2][0].error_code == WalkErrorCode.SENSOR_TIMEOUT


def test_an_ik_safe_stopping_blames_the_planner(sample):
    """The ik reports SAFE_STOP when the planner's references stop mid-walk: the planner's failure."""
    from walk_mpc.core.control.types import WholeBodyStatus

    supervisor = make(watch_links=("mpc_planner", "ik"))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("mpc_planner", "ik"))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    supervisor.report("ik", int(WholeBodyStatus.SAFE_STOP), ns, steady_ns=ns)
    ns, outputs = run(supervisor, sample, ns, 400, report=("mpc_planner", "ik"))
    (result,) = [r for o in outputs for r in o.results]
    assert result.error_code == WalkErrorCode.PLANNER_FAILURE
    assert "is the mpc_planner running?" in result.error_msg


def test_an_ik_waiting_for_references_is_alive_and_their_absence_blames_the_planner(sample):
    """The ik waits for a walk's first references (WAITING_FOR_REFERENCES, no command): alive, the walk goes
    on; when they never come (REFERENCE_STALE) the walk ends as the planner's failure, with the ik's words."""
    from walk_mpc.core.control.types import WholeBodyStatus

    supervisor = make(watch_links=("mpc_planner", "ik"))
    ns, _ = run(supervisor, sample, 100 * NS, 5, report=("mpc_planner", "ik"))
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    waiting = "waiting for the first CoM reference of the walk of plan 2 (...): is the mpc_planner running?"
    for _ in range(40):  # 0.4 s: longer than link_timeout, the ik reporting it waits
        ns, outputs = run(supervisor, sample, ns, 1, report=("mpc_planner",))
        outputs.append(supervisor.report("ik", int(WholeBodyStatus.WAITING_FOR_REFERENCES), ns, waiting,
                                         steady_ns=ns))
        assert not any(o.results for o in outputs) and supervisor.walking
    stale = "no CoM reference for 0.5 s since the walk of plan 2 started (...): is the mpc_planner running?"
    supervisor.report("ik", int(WholeBodyStatus.REFERENCE_STALE), ns, stale, steady_ns=ns)
    ns, outputs = run(supervisor, sample, ns, 400, report=("mpc_planner", "ik"))
    (result,) = [r for o in outputs for r in o.results]
    assert result.error_code == WalkErrorCode.PLANNER_FAILURE
    assert stale in result.error_msg and "the ik got no CoM reference" in result.error_msg


def test_missed_deadlines_beyond_the_share_end_the_walk_with_deadlines_missed(sample):
    supervisor = make(max_missed_deadline_share=0.3, deadline_window=100)
    ns, _ = run(supervisor, sample, 100 * NS, 5)
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    assert supervisor.deadlines(0, 0).results == ()
    missed = measured = 0
    # 30 % over a second (the limit, not beyond it) walks on; the reports come at each miss and every 100
    for k in range(300):
        measured += 1
        missed += k % 10 < 3
        output = supervisor.deadlines(missed, measured)
        assert not output.results and supervisor.behavior.status.result is None
    ns, outputs = run(supervisor, sample, ns, 5)
    assert supervisor.walking
    for _ in range(35):  # a burst: 35 of the last 100 late
        measured += 1
        missed += 1
        supervisor.deadlines(missed, measured)
    ns, outputs = run(supervisor, sample, ns, 300)  # the swinging step ends, catch, stand
    (result,) = [r for o in outputs for r in o.results]
    assert result.error_code == WalkErrorCode.DEADLINES_MISSED
    assert "of the last 100 sensor samples missed their control deadline" in result.error_msg
    assert "sim/deadlines" in result.error_msg
    assert supervisor.behavior.behavior is Behavior.STAND


def test_deadline_counts_are_validated_and_a_restarted_counter_counts_afresh(sample):
    from walk_mpc.core.errors import InputError

    supervisor = make(deadline_window=10)
    for bad in ((1.5, 2), (-1, 2), (3, 2), (True, 2)):
        with pytest.raises(InputError):
            supervisor.deadlines(*bad)
    ns, _ = run(supervisor, sample, 100 * NS, 5)
    supervisor.deadlines(8, 1000)  # a loaded start, before the walk
    assert supervisor.submit_goal(b"g", steps(), True, ns)[0].accepted
    assert supervisor.deadlines(0, 5).results == ()  # the sim restarted: totals went down
    for measured in range(6, 40):
        supervisor.deadlines(0, measured)
    assert supervisor.walking and supervisor.behavior.status.result is None
    with pytest.raises(ParameterError, match="max_missed_deadline_share"):
        WalkSupervisorParameters(max_missed_deadline_share=1.5)
    with pytest.raises(ParameterError, match="deadline_window"):
        WalkSupervisorParameters(deadline_window=0)


# ---------------------------------------------------------------------------------------------------
# Velocity walking (cmd_vel)
# ---------------------------------------------------------------------------------------------------


def drive(supervisor, sample, ns, seconds, twist_at, period=10):
    """Samples for ``seconds`` from ``ns``; ``twist_at(t)`` [s since the start] is sent every ``period``
    samples (None: nothing sent). Returns (last stamp, results, plans as (stamp, plan))."""
    results, plans = [], []
    start = ns
    for k in range(int(round(seconds * NS / PERIOD))):
        ns += PERIOD
        twist = twist_at((ns - start) / NS) if k % period == 0 else None
        if twist is not None:
            output = supervisor.velocity(*twist)
            results += output.results
            plans += [(ns, output.plan)] if output.plan is not None else []
        output = supervisor.observe(ns, sample, ns)
        results += output.results
        plans += [(ns, output.plan)] if output.plan is not None else []
    return ns, results, plans


def velocity_supervisor(sample, **kwargs):
    from walk_mpc.core.control.landings import LandingParameters

    supervisor = make(landings=LandingParameters(enabled=False), **kwargs)  # the synthetic robot stays
    ns, _ = run(supervisor, sample, 100 * NS, 5)
    return supervisor, ns


def stance(supervisor):
    """(x, y, yaw) of the stance center and the width, in Stand."""
    from walk_mpc.core.walk.footsteps import stance_center
    from walk_mpc.core.walk.saturation import relative_offset

    left, right = supervisor.behavior.feet
    x, y, _, yaw = stance_center(left, right)
    return x, y, yaw, relative_offset(left, right.position)


def test_cmd_vel_forward_for_five_seconds_walks_about_a_meter_and_stops_standing(sample):
    from walk_mpc.core.control.walk_supervisor import VelocityWalkId

    for ending, low, high in (("silence", 1.0, 1.42), ("zero", 1.0, 1.2)):
        supervisor, ns = velocity_supervisor(sample)
        ns, results, plans = drive(supervisor, sample, ns, 12.0, lambda t, ending=ending: (
            (0.2, 0.0, 0.0) if t <= 5.0 else (0.0, 0.0, 0.0) if ending == "zero" else None))
        assert [(r.goal_id, r.error_code) for r in results] == [(VelocityWalkId(1), WalkErrorCode.NONE)]
        assert not supervisor.walking and plans[-1][1].walking is False
        x, y, yaw, (dx, dy, _) = stance(supervisor)
        assert low <= x <= high, (ending, x)
        assert (y, yaw, dx, dy) == pytest.approx((0.0, 0.0, 0.0, -0.17), abs=1e-9)  # side by side


@pytest.mark.parametrize("twist, expected", [
    ((0.0, 0.0, 0.3), lambda x, y, yaw: abs(x) < 1e-9 and abs(y) < 1e-9 and 1.2 <= yaw < 1.9),
    ((0.0, 0.05, 0.0), lambda x, y, yaw: abs(x) < 1e-9 and 0.15 < y < 0.3 and yaw == 0.0),
    ((0.0, -0.05, 0.0), lambda x, y, yaw: abs(x) < 1e-9 and -0.3 < y < -0.15 and yaw == 0.0),
    ((0.1, 0.0, -0.2), lambda x, y, yaw: x > 0.3 and y < -0.1 and -1.3 < yaw <= -0.8),
])
def test_cmd_vel_turning_and_sideways_commands_end_standing_parallel(sample, twist, expected):
    """4 s of command: the commanded motion, plus at most the 2 committed steps and the timeout's share."""
    supervisor, ns = velocity_supervisor(sample)
    ns, results, _ = drive(supervisor, sample, ns, 10.0, lambda t: twist if t <= 4.0 else None)
    assert [r.error_code for r in results] == [WalkErrorCode.NONE] and not supervisor.walking
    x, y, yaw, (dx, dy, _) = stance(supervisor)
    assert expected(x, y, yaw), (x, y, yaw)
    assert (dx, dy) == pytest.approx((0.0, -0.17), abs=1e-9)  # parallel feet at the nominal width
    assert supervisor.behavior.feet[0].yaw == pytest.approx(supervisor.behavior.feet[1].yaw, abs=1e-12)


@pytest.mark.parametrize("timeout", [0.5, 1.5])
def test_cmd_vel_silent_for_the_timeout_in_sensor_time_closes_the_stance(sample, timeout):
    from walk_mpc.core.walk.velocity import VelocityWalkParameters

    supervisor, ns = velocity_supervisor(sample, velocity=VelocityWalkParameters(timeout=timeout))
    origin = 100 * NS + PERIOD  # the first sample: sensor time 0
    ns, results, plans = drive(supervisor, sample, ns, 9.0, lambda t: (0.2, 0.0, 0.0) if t <= 2.0 else None)
    last_command = origin + round(supervisor.velocity_walk.last_command.t * NS)  # the last sample's stamp
    steps = [plan.timeline.steps for _, plan in plans if plan.walking][-1]
    closing = steps[-1]
    assert closing.position[0] == pytest.approx(steps[-2].position[0])  # feet side by side
    committed_at = next(stamp for stamp, plan in plans if plan.walking and plan.timeline.steps[-1] == closing)
    # the first touchdown after the timeout commits the closing step
    assert last_command + timeout * NS < committed_at <= last_command + (timeout + 0.8) * NS
    assert [r.error_code for r in results] == [WalkErrorCode.NONE]


@pytest.mark.parametrize("change", [0.35, 1.9, 2.2, 2.5, 2.8])
def test_a_change_of_cmd_vel_shows_after_at_most_two_committed_steps_which_never_change(sample, change):
    supervisor, ns = velocity_supervisor(sample)
    ns, _, _ = drive(supervisor, sample, ns, change, lambda t: (0.2, 0.0, 0.0), period=5)
    status = supervisor.behavior.status
    committed = [s for s in status.timeline.steps if s.step_index > status.current_step_index]
    assert 1 <= len(committed) <= 2  # the velocity walk's look-ahead (Atlas goals: 4)
    ns, _, _ = drive(supervisor, sample, ns, 4.0, lambda t: (0.2, 0.0, 0.3), period=5)
    walked = {s.step_index: s for s in supervisor.behavior.status.timeline.steps}
    assert all(walked[s.step_index] == s for s in committed)  # committed steps never change
    turning = min(k for k, s in walked.items() if abs(s.yaw) > 1e-9)
    assert turning == committed[-1].step_index + 1 <= status.current_step_index + 3


def test_a_nonzero_cmd_vel_preempts_a_running_goal_which_ends_preempted(sample):
    from walk_mpc.core.control.walk_supervisor import VelocityWalkId

    supervisor, ns = velocity_supervisor(sample)
    goal = steps(6)
    assert supervisor.submit_goal(b"g", goal, True, ns)[0].accepted
    ns, results, _ = drive(supervisor, sample, ns, 1.5, lambda t: None)
    committed = supervisor.behavior.status.timeline.steps
    assert not results and len(committed) == 5  # touched down 1, committed up to 5 (Atlas: 4 ahead)
    output = supervisor.velocity(0.1, 0.0, 0.0)
    (preempted,) = output.results
    assert (preempted.goal_id, preempted.error_code, preempted.error_msg) == (
        b"g", WalkErrorCode.PREEMPTED, "preempted by cmd_vel")
    assert supervisor.velocity_walking and supervisor.behavior.goal_id == VelocityWalkId(1)
    behaviors = []
    for _ in range(40):
        ns, ended, _ = drive(supervisor, sample, ns, 0.1, lambda t: (0.1, 0.0, 0.0))
        behaviors.append(supervisor.behavior.behavior)
        assert not ended
    ns, ended, _ = drive(supervisor, sample, ns, 6.0, lambda t: None)
    assert [(r.goal_id, r.error_code) for r in ended] == [(VelocityWalkId(1), WalkErrorCode.NONE)]
    assert set(behaviors) == {Behavior.WALK}  # no stop between the goal and the velocity walk
    walked = supervisor.behavior.status.timeline.steps
    assert walked[:5] == committed  # the goal's committed steps were walked as they were


def test_a_walk_goal_preempts_velocity_walking_after_its_closing_step(sample):
    from walk_mpc.core.control.walk_supervisor import VelocityWalkId

    supervisor, ns = velocity_supervisor(sample)
    ns, results, _ = drive(supervisor, sample, ns, 2.0, lambda t: (0.2, 0.0, 0.0))
    assert supervisor.velocity_walking and not results
    answer, output = supervisor.submit_goal(b"g", steps(2, x=0.0), True, ns)
    assert answer.accepted and supervisor.waiting_goal == b"g" and not output.results
    ns, results, _ = drive(supervisor, sample, ns, 0.3, lambda t: None)
    ns, more, _ = drive(supervisor, sample, ns, 8.0, lambda t: None)
    results += more
    assert [(r.goal_id, r.error_code) for r in results] == [
        (VelocityWalkId(1), WalkErrorCode.PREEMPTED), (b"g", WalkErrorCode.NONE)]
    assert results[0].error_msg == "preempted by goal 67"  # b'g'.hex()
    assert supervisor.waiting_goal is None and not supervisor.walking


def test_a_walk_goal_that_follows_on_preempts_velocity_walking_at_once(sample):
    from walk_mpc.core.walk.step import Step

    supervisor, ns = velocity_supervisor(sample)
    ns, _, _ = drive(supervisor, sample, ns, 2.0, lambda t: (0.2, 0.0, 0.0))
    committed = list(supervisor.behavior.status.timeline.steps)
    last = committed[-1]
    follow = Step(last.step_index + 1, last.foot.other, 0.8,
                  (last.position[0], -last.position[1], 0.0))  # the stance closed
    answer, output = supervisor.submit_goal(b"g", committed + [follow], True, ns)
    assert answer.accepted and supervisor.behavior.goal_id == b"g"
    assert [(r.error_code, r.error_msg) for r in output.results] == [
        (WalkErrorCode.PREEMPTED, "preempted by goal 67")]  # b'g'.hex()
    ns, results, _ = drive(supervisor, sample, ns, 6.0, lambda t: None)
    assert [(r.goal_id, r.error_code) for r in results] == [(b"g", WalkErrorCode.NONE)]


def test_a_waiting_goal_ends_canceled_or_preempted_by_a_newer_cmd_vel(sample):
    supervisor, ns = velocity_supervisor(sample)
    ns, _, _ = drive(supervisor, sample, ns, 2.0, lambda t: (0.2, 0.0, 0.0))
    assert supervisor.submit_goal(b"g", steps(2, x=0.0), True, ns)[0].accepted
    (canceled,) = supervisor.cancel(b"g").results
    assert (canceled.goal_id, canceled.error_code) == (b"g", WalkErrorCode.CANCELED)
    assert supervisor.submit_goal(b"h", steps(2, x=0.0), True, ns)[0].accepted
    (preempted,) = supervisor.velocity(0.2, 0.0, 0.0).results
    assert (preempted.goal_id, preempted.error_code, preempted.error_msg) == (
        b"h", WalkErrorCode.PREEMPTED, "preempted by cmd_vel")
    ns, results, _ = drive(supervisor, sample, ns, 2.0, lambda t: (0.2, 0.0, 0.0))
    assert supervisor.velocity_walking and not results  # the velocity walk went on (closing step replaced)


def test_a_bad_cmd_vel_is_rejected_naming_it_and_a_huge_one_clamped(sample):
    from walk_mpc.core.errors import InputError

    reference, (bad, ns) = velocity_supervisor(sample)[0], velocity_supervisor(sample)
    ns_ref = ns
    for supervisor in (reference, bad):
        supervisor.velocity(0.2, 0.0, 0.0)
    for k in range(300):
        ns += PERIOD
        if k % 10 == 0:
            reference.velocity(0.2, 0.0, 0.0)
            bad.velocity(0.2, 0.0, 0.0)
            for twist in ((math.nan, 0.0, 0.0), (0.0, math.inf, 0.0), (0.0, 0.0, -math.inf)):
                with pytest.raises(InputError, match="cmd_vel"):
                    bad.velocity(*twist)
        assert summary(reference.observe(ns, sample, ns)) == summary(bad.observe(ns, sample, ns))
    assert ns_ref < ns and bad.velocity_walking
    output = bad.velocity(1e9, 0.0, 0.0)
    assert output.velocity.twist == (0.25, 0.0, 0.0) and "max_forward_speed 0.25" in output.velocity.message
    answer, _ = bad.queue_steps(steps(), False)
    assert not answer.accepted and "cmd_vel" in answer.message


def test_velocity_parameters_are_checked_against_the_step_limits():
    from walk_mpc.core.walk.velocity import VelocityWalkParameters

    with pytest.raises(ParameterError, match="velocity.step_duration"):
        WalkSupervisorParameters(velocity=VelocityWalkParameters(step_duration=5.0))


@pytest.mark.slow
def test_cmd_vel_on_the_kinematic_plant_through_the_stages_walks_a_meter_and_stands():
    """The graph's controllers in process (test_fault_drill's InProcessGraph: WalkSupervisor, PlannerStage,
    WholeBodyStage on the kinematic plant, the feet measured): 0.2 m/s for 5 s, then the teleop stops."""
    from test_fault_drill import InProcessGraph

    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.core.control.walk_supervisor import VelocityWalkId
    from walk_mpc.core.walk.footsteps import stance_center

    graph = InProcessGraph(RobotModel(RobotModel.Parameters(robot="talos_reduced")))
    graph.run(1.0)
    x0 = stance_center(*graph.feet())[0]
    for k in range(500):
        if k % 10 == 0:  # a 10 Hz teleop
            graph._supervise(graph.supervisor.velocity(0.2, 0.0, 0.0))
        graph.step()
    graph.run(6.0)
    assert [(r.goal_id, r.error_code) for r in graph.results] == [(VelocityWalkId(1), WalkErrorCode.NONE)]
    left, right = graph.feet()
    x, y, _, yaw = stance_center(left, right)
    assert 1.0 <= x - x0 <= 1.42 and abs(y) < 0.01 and abs(yaw) < 0.01, (x - x0, y, yaw)
    assert abs(left.position[0] - right.position[0]) < 0.01  # side by side
    last = graph.results[0].last_completed_step_index
    errors = [graph.supervisor.landings.landing_error(k) for k in range(1, last + 1)]
    assert all(e is not None and e < 0.03 for e in errors), errors  # every step seen landing where planned
    assert not graph.supervisor.walking and max(graph.reference_distances) < 0.5


# ---------------------------------------------------------------------------------------------------
# Goal poses (walk/goal_pose)
# ---------------------------------------------------------------------------------------------------


def test_a_goal_pose_from_stand_walks_there_and_stands_side_by_side(sample):
    from walk_mpc.core.control.walk_supervisor import GoalPoseId

    supervisor, ns = velocity_supervisor(sample)
    output = supervisor.goal_pose(0.6, 0.2, 0.5)
    assert output.plan is not None and output.plan.walking and supervisor.behavior.goal_id == GoalPoseId(1)
    ns, results, _ = drive(supervisor, sample, ns, 12.0, lambda t: None)
    assert [(r.goal_id, r.error_code) for r in results] == [(GoalPoseId(1), WalkErrorCode.NONE)]
    x, y, yaw, (dx, dy, _) = stance(supervisor)
    assert (x, y, yaw, dx, dy) == pytest.approx((0.6, 0.2, 0.5, 0.0, -0.17), abs=1e-9)


def test_a_goal_pose_preempts_a_goal_or_a_velocity_walk_then_walks_from_stand(sample):
    from walk_mpc.core.control.walk_supervisor import GoalPoseId, VelocityWalkId
    from walk_mpc.core.errors import InputError

    supervisor, ns = velocity_supervisor(sample)
    assert supervisor.submit_goal(b"g", steps(8), True, ns)[0].accepted
    ns, results, _ = drive(supervisor, sample, ns, 1.5, lambda t: None)
    supervisor.goal_pose(0.0, 0.0, 0.0)
    ns, results, _ = drive(supervisor, sample, ns, 2.0, lambda t: None)
    assert [(r.goal_id, r.error_code, r.error_msg) for r in results] == [
        (b"g", WalkErrorCode.PREEMPTED, "preempted by goal pose 1")]
    assert supervisor.behavior.goal_id == GoalPoseId(1)  # walking back to the origin
    ns, results, _ = drive(supervisor, sample, ns, 8.0, lambda t: None)
    assert [(r.goal_id, r.error_code) for r in results] == [(GoalPoseId(1), WalkErrorCode.NONE)]
    assert stance(supervisor)[:3] == pytest.approx((0.0, 0.0, 0.0), abs=1e-9)
    # over a velocity walk: its closing step, then the pose
    ns, _, _ = drive(supervisor, sample, ns, 2.0, lambda t: (0.2, 0.0, 0.0))
    supervisor.goal_pose(0.0, -0.1, 0.0)
    ns, results, _ = drive(supervisor, sample, ns, 14.0, lambda t: None)
    assert [(r.goal_id, r.error_code, r.error_msg) for r in results] == [
        (VelocityWalkId(1), WalkErrorCode.PREEMPTED, "preempted by goal pose 2"),
        (GoalPoseId(2), WalkErrorCode.NONE, "walk finished")]
    assert stance(supervisor)[:3] == pytest.approx((0.0, -0.1, 0.0), abs=1e-9)
    with pytest.raises(InputError, match="goal pose yaw"):
        supervisor.goal_pose(0.0, 0.0, math.nan)


@pytest.mark.slow
def test_a_huge_cmd_vel_on_mujoco_is_clamped_and_walked_without_a_fall():
    """The corner (-1e9, -1e9, -1e9): backward, right and turning right at once, on MuJoCo physics through the
    stages. Clamped to each maximum only, (-0.1, -0.05, -0.4), Talos fell (an IK failure in the 4th step);
    scaled into the ellipsoid of the maxima it walks."""
    from test_fault_drill import InProcessGraph

    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.sim.mujoco import MujocoSim
    from walk_mpc.core.walk.footsteps import stance_center

    robot = RobotModel(RobotModel.Parameters(robot="talos_reduced"))
    graph = InProcessGraph(robot)
    graph.sim = MujocoSim(KinematicSim.Parameters(), robot=robot)
    graph.run(1.0)
    for k in range(400):
        if k % 10 == 0:
            output = graph.supervisor.velocity(-1e9, -1e9, -1e9)
            assert "the combined limit" in output.velocity.message
            graph._supervise(output)
        graph.step()  # asserts the plant never falls
    graph.run(5.0)
    assert [r.error_code for r in graph.results] == [WalkErrorCode.NONE]
    x, y, _, yaw = stance_center(*graph.feet())
    assert x < -0.2 and yaw < -1.0, (x, y, yaw)


# ---------------------------------------------------------------------------------------------- Stand follows
def shifted(sample, dx: float):
    """``sample`` with its base estimate ``dx`` [m] further along x (the measured feet move with it)."""
    return dataclasses.replace(sample, base_position=np.asarray(sample.base_position) + (dx, 0.0, 0.0))


@pytest.mark.parametrize("dx, follows", [(0.05, True), (0.01, False)])
def test_standing_on_both_feet_away_from_stand_re_anchors_stand_there(talos, sample, dx, follows):
    """A walk_behavior restarted mid-walk measured a foot in the air; the robot then stood elsewhere: Stand
    follows the measured feet once both carry weight for stand_follow_time (0.2 s), not for a centimetre."""
    supervisor = make(talos)
    ns, outputs = run(supervisor, sample, 100 * NS, 5)
    left0 = supervisor.behavior.feet[0].position
    moved = shifted(sample, dx)
    plans = []
    for _ in range(40):  # 0.4 s
        ns += PERIOD
        out = supervisor.observe(ns, moved, ns)
        if out.plan is not None:
            plans.append((ns, out.plan))
    if not follows:
        assert plans == [] and supervisor.behavior.feet[0].position == left0
        return
    assert len(plans) == 1 and not plans[0][1].walking
    assert 0.2 * NS <= plans[0][0] - (100 * NS + 5 * PERIOD) <= 0.25 * NS
    left = plans[0][1].timeline.phases[-1].left.position
    assert left[0] == pytest.approx(left0[0] + dx, abs=1e-6) and left[1] == pytest.approx(left0[1], abs=1e-6)


def test_stand_does_not_follow_a_foot_that_carries_no_weight_nor_while_walking(talos, sample):
    supervisor = make(talos)
    ns, _ = run(supervisor, sample, 100 * NS, 5)
    contact = np.array(sample.contact, dtype=float)
    contact[[i for i, name in enumerate(sample.contact_names) if name.startswith("right_foot")]] = 0.0
    one_foot = dataclasses.replace(shifted(sample, 0.05), contact=contact)
    ns, outputs = run(supervisor, one_foot, ns, 40)
    assert all(o.plan is None for o in outputs)
    answer, _ = supervisor.submit_goal(b"g", steps(), True, ns)  # not on Stand's feet: refused, said why
    assert not answer.accepted and answer.rejection.error_code == WalkErrorCode.INCONSISTENT_STEPS
    assert "does not stand on Stand's feet yet (left sole 0.050 m off" in answer.rejection.message
    ns, _ = run(supervisor, sample, ns, 5)
    answer, _ = supervisor.submit_goal(b"g", steps(), True, ns)
    assert answer.accepted
    ns, outputs = run(supervisor, shifted(sample, 0.05), ns, 40, report=("mpc_planner", "ik"))
    assert supervisor.walking and all(o.plan is None or o.plan.walking for o in outputs)
    with pytest.raises(ParameterError, match="stand_follow_distance"):
        WalkSupervisorParameters(stand_follow_distance=-0.01)


def test_stand_follows_a_foot_it_has_in_the_air_once_it_is_down(talos, sample):
    """A walk_behavior's first measurement has the feet 5 cm up (a foot in the air, a base estimate off);
    then the robot stands on both feet on the ground: Stand follows in height too."""
    supervisor = make(talos)
    raised = dataclasses.replace(sample, base_position=np.asarray(sample.base_position) + (0.0, 0.0, 0.05))
    ns, _ = run(supervisor, raised, 100 * NS, 1)
    assert supervisor.behavior.feet[0].position[2] == pytest.approx(0.05, abs=1e-3)
    ns, outputs = run(supervisor, sample, ns, 30)
    plans = [o.plan for o in outputs if o.plan is not None]
    assert len(plans) == 1 and abs(plans[0].timeline.phases[-1].left.position[2]) < 1e-3


def test_a_starting_walk_behavior_anchors_stand_once_both_feet_carry_weight(talos, sample):
    """A walk_behavior (re)started while the mpc_planner and ik finish its predecessor's walk: its first
    samples show a sole in the air. No plan goes out (it would stop that walk with Stand's foot where the
    swing happened to be) and goals are refused, until both feet carry weight; then Stand is anchored at the
    measured feet. A foot that never loads: anchored all the same after initial_stance_wait."""
    contact = np.array(sample.contact, dtype=float)
    contact[[i for i, name in enumerate(sample.contact_names) if name.startswith("right_foot")]] = 0.0
    swinging = dataclasses.replace(shifted(sample, 0.05), contact=contact)
    supervisor = make(talos, initial_stance_wait=1.0)
    ns, outputs = run(supervisor, swinging, 100 * NS, 30)
    assert all(o.plan is None for o in outputs)
    answer, _ = supervisor.submit_goal(b"g", steps(), True, ns)
    assert not answer.accepted and answer.rejection.error_code == WalkErrorCode.INCONSISTENT_STEPS
    assert "a foot carries no weight yet" in answer.rejection.message
    landed = shifted(sample, 0.05)
    ns, outputs = run(supervisor, landed, ns, 1)
    assert outputs[0].plan is not None and not outputs[0].plan.walking
    left = outputs[0].plan.timeline.phases[-1].left.position
    assert left[0] == pytest.approx(sample_left_x(talos, landed), abs=1e-9)
    answer, _ = supervisor.submit_goal(b"g", steps(), True, ns)
    assert answer.accepted

    one_foot = make(talos, initial_stance_wait=0.5)
    ns, outputs = run(one_foot, swinging, 100 * NS, 60)
    plans = [k for k, o in enumerate(outputs) if o.plan is not None]
    assert plans == [50]  # the 51st sample: 0.5 s after the first
    with pytest.raises(ParameterError, match="initial_stance_wait"):
        WalkSupervisorParameters(initial_stance_wait=-1.0)


def sample_left_x(robot, sample) -> float:
    """x [m] of the left sole measured in ``sample`` (the supervisor's forward kinematics)."""
    supervisor = make(robot)
    run(supervisor, sample, 0, 1)
    return supervisor.measured_feet[Foot.LEFT].position[0]
