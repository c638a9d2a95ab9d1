"""WalkSupervisor (the walk_behavior node's core): time base, rogue stamps, outages, liveness of the chain."""

import dataclasses

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
