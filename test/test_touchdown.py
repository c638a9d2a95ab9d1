"""Early and late touchdowns from the contact forces (LandingMonitor.touchdown_delay)."""

from __future__ import annotations

import pytest
from test_closed_loop import timeline_of

from walk_mpc.core.control.landings import LandingMonitor, LandingParameters
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import PhaseKind

DT = 0.01  # [s] sample period


def first_step(timeline):
    single = next(p for p in timeline.phases if p.kind is PhaseKind.SINGLE and p.step_index == 1)
    double = next(p for p in timeline.phases if p.kind is not PhaseKind.SINGLE
                  and p.t_start >= single.t_end - 1e-9 and p.step_index == 1)
    return single, double


def run(monitor, timeline, landed_at):
    """Samples from the single support of step 1 to the end of its double support; the swing foot is
    unloaded from the lift-off until ``landed_at`` [s], then loaded."""
    single, double = first_step(timeline)
    t = single.t_start
    while t < double.t_end - 1e-9:
        phase = single if t < single.t_end else double
        swing = single.swing_foot
        loads = {swing: t >= landed_at or t < single.t_start + 0.05, swing.other: True}
        monitor.observe(t, phase, loads)
        t += DT
    return single


@pytest.mark.parametrize("offset", [-0.2, -0.05, 0.0, 0.05, 0.15])
def test_the_touchdown_delay_is_the_measured_minus_the_planned_touchdown(talos, offset):
    timeline = timeline_of(talos, "short")
    monitor = LandingMonitor()
    single = run(monitor, timeline, first_step(timeline)[0].t_end + offset)
    delay = monitor.touchdown_delay(1)
    assert delay == pytest.approx(offset, abs=DT + 1e-9)
    assert monitor.touchdown(1) == pytest.approx(single.t_end + delay)


def test_a_foot_loaded_again_early_in_its_swing_has_not_landed(talos):
    timeline = timeline_of(talos, "short")
    monitor = LandingMonitor()
    single, double = first_step(timeline)
    for t in (single.t_start, single.t_start + 0.1, single.t_start + 0.2):
        loads = {single.swing_foot: t > single.t_start + 0.05, single.swing_foot.other: True}
        monitor.observe(t, single, loads)
    assert monitor.touchdown(1) is None
    assert monitor.touchdown_delay(1) is None


def test_early_progress_is_a_fraction_of_the_swing():
    with pytest.raises(ParameterError, match="early_progress"):
        LandingParameters(early_progress=0.0)
    assert Foot.LEFT.other is Foot.RIGHT
