"""Touchdowns from the contact forces (LandingMonitor in the WalkSupervisor): a walk succeeds only when its
steps were seen landing; a robot frozen mid-walk (a dead whole-body controller) never ends SUCCEEDED."""

from __future__ import annotations

import pytest
from test_closed_loop import timeline_of

from walk_mpc.core.control.closed_loop import ORIGIN_NS, ClosedLoopWalk
from walk_mpc.core.control.landings import LandingMonitor, LandingParameters
from walk_mpc.core.control.walk_supervisor import WalkSupervisor, WalkSupervisorParameters
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.walk.behavior import WalkErrorCode


def supervised_walk(talos, freeze_at=None):
    """The in-process loop walks the short timeline (3 steps); a supervisor watching the same samples runs the
    same steps as a goal. With ``freeze_at`` [s] the controllers stop there (no more commands: the plant holds
    the last one). Returns the supervisor's results and the supervisor."""
    sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
    timeline = timeline_of(talos, "short")
    loop = ClosedLoopWalk(talos, sim, timeline)
    supervisor = WalkSupervisor(WalkSupervisorParameters(sensor_timeout=0.25), talos)
    results, submitted = [], False
    end = timeline.t_end + 1.0
    while sim.time < end - 1e-9:
        if freeze_at is None or sim.time < freeze_at:
            loop.step()
        else:
            sim.step()
        stamp = loop.stamp_ns(sim.state.step_count)
        output = supervisor.observe(stamp, sim.sensor_sample(), stamp)
        results += output.results
        if not submitted:
            answer, _ = supervisor.submit_goal(b"goal", timeline.steps, True, stamp)
            assert answer.accepted, answer
            submitted = True
    assert stamp > ORIGIN_NS
    return results, supervisor


def test_a_walk_that_happened_succeeds_with_every_touchdown_seen(talos):
    results, supervisor = supervised_walk(talos)
    assert [(r.error_code, r.last_completed_step_index) for r in results] == [(WalkErrorCode.NONE, 3)]
    for k in (1, 2, 3):
        assert supervisor.landings.touchdown(k) is not None
        assert supervisor.landings.landing_error(k) < 0.01


def test_a_robot_frozen_mid_walk_is_never_a_successful_walk(talos):
    results, _ = supervised_walk(talos, freeze_at=1.0)  # in the first step's single support
    (result,) = results
    assert result.error_code == WalkErrorCode.LANDING_NOT_MEASURED
    # the last command's landing tail puts the left foot down where it was (step 1, short of its step), the
    # feet never leave the ground again (steps 2 and 3)
    expected = ("the steps ran out by the clock, but no lift-off seen in the contact forces for steps "
                "[2, 3]; landed beyond tolerance (0.030 m): step 1 0.")
    assert result.error_msg.startswith(expected), result.error_msg


def test_without_contact_sensors_nothing_counts_as_measured(talos):
    monitor = LandingMonitor()
    assert monitor.problems([1, 2]) == ["no contact sensors named left_foot/right_foot* in the samples: no "
                                        "touchdown measured"]
    assert LandingMonitor(LandingParameters(enabled=False)).problems([1, 2]) == []


def test_parameters_are_validated():
    with pytest.raises(ParameterError, match="load_fraction"):
        LandingParameters(load_fraction=0.7)
    with pytest.raises(ParameterError, match="contact_prefixes"):
        LandingParameters(contact_prefixes=("left",))


def test_a_step_whose_foot_is_loaded_only_once_the_next_single_support_begins_has_landed():
    """Seen on MuJoCo: Talos leans on its stance foot through the double support and loads the landed one as
    the next single support begins, whose stance foot it is; that is a (late) touchdown, measured there. A
    foot that never carries weight again has not landed."""
    from walk_mpc.core.walk import footsteps
    from walk_mpc.core.walk.step import Foot
    from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

    left, right = FootPose((0.0, 0.1, 0.0)), FootPose((0.0, -0.1, 0.0))
    steps = footsteps.walk_forward(left, right, 0.2, 0.2, width=0.2, duration=0.8)
    timeline = Timeline(left, right, steps, GaitTiming(sway_duration=0.6, double_support_duration=0.3))
    first, second = (next(p for p in timeline.phases if p.kind is PhaseKind.SINGLE and p.step_index == k)
                     for k in (1, 2))
    swing = first.swing_foot
    landed = {foot: first.foot(foot) for foot in Foot}  # measured where the steps put them
    for reloads in (True, False):
        monitor = LandingMonitor()
        monitor.sensors_seen = True
        t = first.t_start
        while t < second.t_start + 0.3:
            phase = timeline.phase_at(t)
            loaded = t >= second.t_start and reloads  # unloaded from the lift-off to the next single support
            loads = {swing: loaded, swing.other: True}
            if phase is second:
                loads = {swing: loaded, swing.other: False}  # the other foot swings now
            monitor.observe(t, phase, loads, landed)
            t += 0.01
        if reloads:
            assert monitor.touchdown(1) == pytest.approx(second.t_start, abs=0.011)
            assert monitor.touchdown_delay(1) > 0.29  # late: after the double support
            assert monitor.landing_error(1) == pytest.approx(0.0, abs=1e-9)
            assert monitor.problems([1]) == []
        else:
            assert monitor.touchdown(1) is None
            assert monitor.problems([1]) == ["no touchdown seen in the contact forces for steps [1]"]
