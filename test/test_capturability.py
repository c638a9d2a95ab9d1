"""Specification of the LIPM's N-step capture regions with rectangular soles and box step limits."""

import math

import numpy as np
import pytest

from walk_mpc.core.control.capturability import (
    CapturabilityParameters,
    capture_region,
    contains,
    dcm_of,
    is_capturable,
    largest_capturable_impulse,
    merge,
    push_dcm_shift,
    standing_capture_region,
    zmp_preimage,
)
from walk_mpc.core.errors import InputError, ParameterError, ShapeError

OMEGA = math.sqrt(9.81 / 0.8767)  # Talos [1/s]
TALOS = CapturabilityParameters(omega=OMEGA, mass=90.27)


def params(**changes) -> CapturabilityParameters:
    return CapturabilityParameters(**{"omega": OMEGA, "mass": 90.27, **changes})


def test_a_dcm_inside_the_sole_is_zero_step_capturable_and_one_just_outside_is_not():
    region = capture_region(TALOS, 1, 0.4, 0)
    assert region.contains((0.099, -0.064))
    assert region.capturable_steps((0.0, 0.0)) == 0
    assert not region.contains((0.101, 0.0))
    assert not region.contains((0.0, -0.066))


def test_one_step_forward_matches_the_closed_form():
    # the ZMP on the toe for tau, the step max_forward ahead: the DCM must reach at most its toe
    tau = 0.3
    limit = 0.1 + 0.3 * math.exp(-OMEGA * tau)
    region = capture_region(TALOS, 1, tau, 1)
    assert region.x[1][-1][1] == pytest.approx(limit, abs=1e-12)
    assert is_capturable(TALOS, (limit - 1e-6, 0.0), 1, tau, 1)
    assert not is_capturable(TALOS, (limit + 1e-6, 0.0), 1, tau, 1)
    assert region.capturable_steps((limit - 1e-6, 0.0)) == 1


def test_a_dcm_beyond_the_outer_edge_needs_a_crossover_for_one_step():
    # the left foot swinging, the DCM 2 cm right of the right (stance) sole: the left foot cannot step there
    dcm = (0.0, -0.085)
    assert not is_capturable(TALOS, dcm, 1, 0.2, 1)
    crossing = params(min_crossover_width=0.15, max_crossover_width=0.3)
    # with the crossover: the DCM reaches -0.065 - 0.02 e^{omega tau}; the crossing sole's outer edge: -0.365
    assert is_capturable(crossing, dcm, 1, 0.2, 1)
    limit = -0.065 - 0.3 * math.exp(-OMEGA * 0.2)
    assert contains(capture_region(crossing, 1, 0.2, 1).y[1], limit + 1e-9)
    assert not contains(capture_region(crossing, 1, 0.2, 1).y[1], limit - 1e-6)


def test_point_feet_match_the_n_step_recursion_of_koolen_et_al():
    # point feet, no double support, every swing dt: d_N = (d_{N-1} + l_max) exp(-omega dt)
    dt, reach = 0.4, 0.5
    point = params(sole_front=1e-12, sole_back=0.0, max_forward=reach, max_backward=reach,
                   single_support_duration=dt, double_support_duration=0.0)
    region = capture_region(point, 1, dt, 3)
    d = 0.0
    for n in (1, 2, 3):
        d = (d + reach) * math.exp(-OMEGA * dt)
        assert region.x[n][-1][1] == pytest.approx(d, abs=1e-9)
        assert region.x[n][0][0] == pytest.approx(-d, abs=1e-9)


def _brute_two_steps(p: CapturabilityParameters, xi: np.ndarray, side: int, tau: float) -> np.ndarray:
    """Exactly two lateral steps (y), every choice on a grid with its ends: the ZMP's average in each phase
    and the steps' places."""
    a, b = p.sole_y()
    g = np.linspace(0.0, 1.0, 5)

    def grow(x, zmp, duration):
        return zmp + (x - zmp) * math.exp(p.omega * duration)

    def places(s):
        return np.concatenate([lo + (hi - lo) * g for lo, hi in p.reach_y(s)])

    x = xi[:, None]
    x1 = grow(x, a + (b - a) * g[None, :], tau)[..., None, None]  # (n, p1, 1, 1)
    d1 = places(side)[None, None, :, None]
    box_lo, box_hi = a + np.minimum(0.0, d1), b + np.maximum(0.0, d1)
    x2 = grow(x1, box_lo + (box_hi - box_lo) * g[None, None, None, :], p.double_support_duration) - d1
    x3 = grow(x2[..., None], a + (b - a) * g, p.single_support_duration)[..., None]  # (n, p1, d1, pds, p2, 1)
    d2 = places(-side)
    ok = (a + np.minimum(0.0, d2) - 1e-9 <= x3) & (x3 <= b + np.maximum(0.0, d2) + 1e-9)
    return ok.reshape(len(xi), -1).any(axis=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_step_regions_are_those_of_a_brute_force_over_extreme_choices(seed):
    rng = np.random.default_rng(seed)
    p = params(sole_left=rng.uniform(0.03, 0.08), sole_right=rng.uniform(0.03, 0.08),
               min_width=rng.uniform(0.05, 0.2), max_width=rng.uniform(0.25, 0.5),
               double_support_duration=rng.uniform(0.0, 0.3), single_support_duration=rng.uniform(0.05, 0.3))
    side, tau = int(rng.choice([1, -1])), rng.uniform(0.1, 0.6)
    region = capture_region(p, side, tau, 2).y[2]
    xi = rng.uniform(-0.4, 0.4, 400)
    brute = _brute_two_steps(p, xi, side, tau)
    inside = np.array([contains(region, v, 1e-9) for v in xi])
    assert np.all(inside[brute])  # nothing capturable lies outside the region
    ends = np.array([end for interval in region for end in interval])
    assert np.all(_brute_two_steps(p, ends, side, tau))  # and its ends are reached


def test_zmp_preimage_of_the_sole_is_the_sole_and_of_a_wider_target_is_wider():
    assert zmp_preimage(((-0.1, 0.1),), (-0.1, 0.1), 0.5, OMEGA)[0] == pytest.approx((-0.1, 0.1))
    wide = zmp_preimage(((-0.3, 0.3),), (-0.1, 0.1), 0.5, OMEGA)[0]
    assert wide[0] == pytest.approx(-0.1 - 0.2 * math.exp(-0.5 * OMEGA))
    assert merge([(0.0, 1.0), (0.5, 2.0), (3.0, 4.0), (5.0, 4.0)]) == ((0.0, 2.0), (3.0, 4.0))


def test_the_push_shift_is_that_of_the_integrated_lipm_with_a_constant_force():
    mass, impulse, duration, zmp = 90.27, 40.0, 0.1, 0.03
    c, v, dt = 0.0, 0.0, 1e-5
    force = impulse / duration
    for _ in range(round(duration / dt)):  # semi-implicit Euler of c'' = omega^2 (c - p) + F / m
        v += (OMEGA**2 * (c - zmp) + force / mass) * dt
        c += v * dt
    unpushed = zmp + (0.0 - zmp) * math.exp(OMEGA * duration)  # the DCM without the push at its end
    shift_at_end = (c + v / OMEGA) - unpushed
    shift_at_middle = push_dcm_shift(impulse, mass, OMEGA, duration)
    assert shift_at_middle * math.exp(OMEGA * duration / 2) == pytest.approx(shift_at_end, rel=1e-3)
    assert push_dcm_shift(impulse, mass, OMEGA, 0.0) == pytest.approx(impulse / (mass * OMEGA))


def test_the_largest_zero_step_push_from_the_sole_centre_reaches_its_edge():
    per = push_dcm_shift(1.0, TALOS.mass, OMEGA, 0.1)
    forward = largest_capturable_impulse(TALOS, (0.0, 0.0), (1.0, 0.0), 1, [0.4], 0, resolution=1e-4)
    assert forward == pytest.approx(0.1 / per, abs=1e-3)
    assert largest_capturable_impulse(TALOS, (0.2, 0.0), (1.0, 0.0), 1, [0.4], 0) == 0.0
    one_step = largest_capturable_impulse(TALOS, (0.0, 0.0), (1.0, 0.0), 1, [0.4, 0.2], 1)
    assert one_step > forward


def test_standing_without_a_step_holds_the_dcm_in_the_box_of_both_soles():
    region = standing_capture_region(TALOS, 1, (0.0, 0.17), 0.1, 0.3, 1)
    assert region.capturable_steps((0.0, 0.17 + 0.064)) == 0
    assert region.capturable_steps((0.0, -0.064)) == 0
    assert region.capturable_steps((0.15, 0.085)) == 1  # beyond the toes: one step forward


def test_dcm_of_adds_the_velocity_over_omega():
    assert dcm_of((0.1, 0.2), (OMEGA, 0.0), OMEGA) == pytest.approx([1.1, 0.2])


@pytest.mark.parametrize("changes, name", [
    ({"omega": 0.0}, "omega"),
    ({"mass": -1.0}, "mass"),
    ({"sole_front": -0.1}, "sole_front"),
    ({"min_width": 0.5, "max_width": 0.4}, "min_width"),
    ({"max_forward": -0.3}, "max_forward"),
    ({"max_forward": math.nan}, "max_forward"),
    ({"min_crossover_width": 0.3, "max_crossover_width": 0.2}, "min_crossover_width"),
    ({"min_width": -0.1, "max_crossover_width": 0.2}, "min_width"),
    ({"double_support_duration": -0.1}, "double_support_duration"),
])
def test_invalid_parameters_name_the_value_and_the_expectation(changes, name):
    with pytest.raises(ParameterError) as error:
        params(**changes)
    assert error.value.name == name
    assert error.value.expected


def test_invalid_inputs_are_refused():
    with pytest.raises(ParameterError, match="steps"):
        capture_region(TALOS, 1, 0.4, 11)
    with pytest.raises(InputError, match="swing_side"):
        capture_region(TALOS, 0, 0.4, 1)
    with pytest.raises(InputError, match="time_to_touchdown"):
        capture_region(TALOS, 1, -0.1, 1)
    with pytest.raises(ShapeError):
        capture_region(TALOS, 1, 0.4, 1).contains((0.0, 0.0, 0.0))
    with pytest.raises(InputError, match="direction"):
        largest_capturable_impulse(TALOS, (0.0, 0.0), (0.0, 0.0), 1, [0.4], 1)
    with pytest.raises(InputError, match="touchdown_times"):
        largest_capturable_impulse(TALOS, (0.0, 0.0), (1.0, 0.0), 1, [], 1)
    with pytest.raises(InputError, match="duration"):
        push_dcm_shift(10.0, 90.0, OMEGA, -0.1)
