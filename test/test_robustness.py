"""A few-second subset of benchmarks/robustness.py: Talos on MuJoCo, stabilizer off vs on (issue 18).

Unseen ground (walk_mpc.core.sim.terrain: the plan knows nothing of it) and a fast gait, scored on the
simulator's truth (a fall: base tilt above 10 degrees or base below 90 % of its height).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import robustness  # noqa: E402

from walk_mpc.core.errors import ParameterError  # noqa: E402
from walk_mpc.core.sim.kinematic import KinematicSim  # noqa: E402
from walk_mpc.core.sim.terrain import Terrain, TerrainMujocoSim  # noqa: E402

PLANK_WALK = robustness.Gait(steps=6)


def test_terrain_heights_follow_the_planks_and_the_ramp_profile():
    terrain = Terrain(planks=((1.0, 0.1, 0.3, 0.2, 0.02),), ramp_angle=math.radians(3.0), ramp_start=2.0,
                      ramp_length=0.8)
    assert terrain.height(1.1, 0.15) == pytest.approx(0.02)
    assert terrain.height(0.0, 0.0) == 0.0
    assert terrain.height(2.4, 0.0) == pytest.approx(0.4 * math.tan(math.radians(3.0)))
    assert terrain.height(5.0, 0.0) == pytest.approx(terrain.ramp_height)
    with pytest.raises(ParameterError, match="planks"):
        Terrain(planks=((0.0, 0.0, 0.3, 0.2, -0.01),))


@pytest.mark.parametrize("degrees", [3.0, -3.0])
def test_the_simulated_ground_is_where_the_terrain_says(talos, degrees):
    """Rays cast down onto the compiled model hit the planks and the ramp at Terrain.height."""
    import mujoco

    terrain = Terrain(planks=((-0.6, 0.3, 0.3, 0.2, 0.02),), ramp_angle=math.radians(degrees), ramp_start=0.4,
                      ramp_length=0.8)
    sim = TerrainMujocoSim(terrain, KinematicSim.Parameters(), robot=talos)
    geom = np.zeros(1, dtype=np.int32)
    for x, y in ((-0.6, 0.3), (-0.3, 1.0), (0.6, 1.0), (1.0, -1.0), (1.5, 1.0), (3.0, 0.5)):
        distance = mujoco.mj_ray(sim.model, sim.data, np.array([x, y, 1.0]), np.array([0.0, 0.0, -1.0]), None,
                                 1, -1, geom)
        assert 1.0 - distance == pytest.approx(terrain.height(x, y), abs=1e-6), (x, y)


@pytest.fixture(scope="module")
def plank_walks(talos):
    terrain = robustness.plank_terrain(talos, 0.02)
    return {on: robustness.run_walk(talos, on, PLANK_WALK, terrain=terrain) for on in (False, True)}


def test_an_unseen_2_cm_plank_under_a_step_fells_the_walk_without_the_stabilizer(plank_walks):
    assert plank_walks[False].fallen


def test_the_stabilizer_walks_over_an_unseen_2_cm_plank(plank_walks):
    assert robustness.walked(plank_walks[True])
    assert math.degrees(plank_walks[True].max_tilt) < 8.0


def test_the_stabilizer_walks_0_3_m_steps_at_0_5_m_per_s(talos):
    gait = robustness.Gait(steps=6, length=0.3, single=0.5, double=0.1)
    assert gait.speed == pytest.approx(0.5)
    assert robustness.walked(robustness.run_walk(talos, True, gait))


def test_a_push_bisection_says_why_its_smallest_fallen_push_fell(talos):
    """One halving at 60 N s, standing, stabilizer off: the push fells Talos; the bisection keeps 0 N s and
    names the impulse, the time and the fall detector's criterion of that fall (benchmark --why)."""
    direction = robustness.push_directions(talos, robustness.Gait(steps=0), walking=False)["forward"]
    why: list = []
    assert robustness.largest_push(talos, False, False, direction, high=120.0, iterations=1, why=why) == 0.0
    (impulse, reason), = why
    assert impulse == pytest.approx(60.0)
    assert reason.startswith("t = ") and "tilt" in reason


def test_a_walk_that_stands_to_the_end_has_no_failure(plank_walks):
    assert robustness.failure(plank_walks[True], "") == ""
    reason = "t = 1.00 s: base tilt 10.1 deg"
    assert robustness.failure(plank_walks[False], reason).startswith(reason)


def test_a_push_grid_reports_the_impulses_that_stood_as_ranges():
    grid = [3.125 * k for k in range(1, 8)]
    assert robustness.ranges(grid, [True, True, False, True, True, True, False]) == "3.1-6.2, 12.5-18.8"
    assert robustness.ranges(grid[:3], [False, True, False]) == "6.2"
    assert robustness.ranges(grid[:2], [False, False]) == "none"


def test_the_capture_limits_of_the_feet_span_the_soles_by_the_lipm(talos):
    """Forward plus backward is the sole's length, left plus right the soles' outer span, in DCM metres
    times m omega (a push J moves the DCM by J / (m omega)); Talos' standing rows sit at them."""
    q0 = talos.reference_configuration()
    height = float(talos.com(q0)[2]) - float(talos.frame_pose(q0, talos.left_foot_frame)[0][2])
    impulse_per_metre = talos.mass * math.sqrt(9.81 / height)
    size = talos.sole_size
    span = float(talos.frame_pose(q0, talos.left_foot_frame)[0][1]
                 - talos.frame_pose(q0, talos.right_foot_frame)[0][1]) + size.left + size.right
    limit = {name: robustness.capture_limit(talos, unit) for name, (_, unit) in
             robustness.push_directions(talos, robustness.Gait(steps=0), walking=False).items()}
    assert limit["forward"] + limit["backward"] == pytest.approx((size.front + size.back) * impulse_per_metre)
    assert limit["left"] + limit["right"] == pytest.approx(span * impulse_per_metre)
    assert 28.0 < limit["forward"] < 29.0 and 44.0 < limit["left"] < 46.0


@pytest.fixture(scope="module")
def estimated_plank_walks(talos):
    """The plank walks with the samples stripped of their base pose (the controllers estimate the state from
    the IMU and the legs: what a real robot measures)."""
    robustness.ESTIMATED = True
    try:
        terrain = robustness.plank_terrain(talos, 0.02)
        return {on: robustness.run_walk(talos, on, PLANK_WALK, terrain=terrain) for on in (False, True)}
    finally:
        robustness.ESTIMATED = False


def test_with_the_state_estimated_the_stabilizer_walks_over_an_unseen_2_cm_plank(estimated_plank_walks):
    assert estimated_plank_walks[False].fallen
    assert robustness.walked(estimated_plank_walks[True])


def test_stairs_are_treads_from_each_edge_to_the_next_in_the_simulated_ground(talos):
    import mujoco

    terrain = Terrain.stairs(((0.5, 0.1), (0.8, 0.2), (1.5, 0.1), (1.8, 0.0)))
    for x, z in ((0.0, 0.0), (0.6, 0.1), (1.0, 0.2), (1.6, 0.1), (2.0, 0.0)):
        assert terrain.height(x, 0.3) == pytest.approx(z)
    sim = TerrainMujocoSim(terrain, KinematicSim.Parameters(), robot=talos)
    geom = np.zeros(1, dtype=np.int32)
    for x in (0.3, 0.55, 0.79, 0.81, 1.4, 1.6, 1.9):
        down = np.array([0.0, 0.0, -1.0])
        distance = mujoco.mj_ray(sim.model, sim.data, np.array([x, 0.5, 1.0]), down, None, 1, -1, geom)
        assert 1.0 - distance == pytest.approx(terrain.height(x, 0.5), abs=1e-6), x
    with pytest.raises(ParameterError, match="edges"):
        Terrain.stairs(((0.5, 0.1), (0.4, 0.2)))


def test_with_the_state_estimated_and_the_stabilizer_talos_steps_up_a_known_10_cm_stair(talos):
    """Four 0.25 m steps, the last two onto a 10 cm tread (the plan's steps carry its height): the swing rises
    before the edge and the CoM height follows the feet. Without either (the swing's height on its horizontal
    blend; the CoM height jumping at the contact changes) Talos fell at the first step up."""
    gait = robustness.Gait(steps=4, length=0.25)
    terrain = Terrain.stairs(((0.625, 0.1),))
    robustness.ESTIMATED = True
    try:
        outcome = robustness.run_walk(talos, True, gait, terrain=terrain, known=True)
    finally:
        robustness.ESTIMATED = False
    assert robustness.walked(outcome)
    assert max(outcome.landing_errors.values()) < 0.03


def test_the_ground_normal_is_the_ramps_on_its_slope_and_vertical_elsewhere():
    terrain = Terrain(ramp_angle=math.radians(10.0), ramp_start=0.5, ramp_length=1.2,
                      planks=((1.0, 1.0, 0.2, 0.2, 0.3),))
    slope = (-math.sin(math.radians(10.0)), 0.0, math.cos(math.radians(10.0)))
    assert terrain.normal(0.4, 0.0) == (0.0, 0.0, 1.0) and terrain.normal(1.8, 0.0) == (0.0, 0.0, 1.0)
    assert terrain.normal(0.6, 0.0) == pytest.approx(slope) and terrain.normal(1.0, 1.0) == (0.0, 0.0, 1.0)


@pytest.mark.parametrize("degrees", [10.0, -10.0])
def test_with_the_state_estimated_and_the_stabilizer_talos_walks_a_known_10_degree_ramp(talos, degrees):
    """Seven 0.2 m steps, three on a 0.6 m ramp of 10 degrees up or down, the last two beyond it (the plan's
    steps carry its heights and normal: StepData z and normal): the soles land flat on the slope. With the
    heights alone (flat soles) 20 steps down fell, and without the stabilizer both
    (benchmarks/robustness.py)."""
    terrain = robustness.known_ramp_terrain(talos, degrees, length=0.6)
    gait = robustness.Gait(steps=7)
    steps = robustness.timeline_of(talos, gait, terrain).steps
    on_slope = [step.normal != (0.0, 0.0, 1.0) for step in steps]
    assert on_slope == [False, False, True, True, True, False, False]
    robustness.ESTIMATED = True
    try:
        outcome = robustness.run_walk(talos, True, gait, terrain=terrain, known=True,
                                      noslip=robustness.RAMP_NOSLIP)
    finally:
        robustness.ESTIMATED = False
    assert robustness.walked(outcome)
    assert max(outcome.landing_errors.values()) < 0.04  # 3.3 cm up: the step over the ramp's top
    assert math.degrees(outcome.max_tilt) < 9.0


def test_the_limits_option_gives_the_runs_step_limits(monkeypatch):
    """``--limits NAME=VALUE,...``: the step limits of step adjustment and the recovery steps of every run
    (e.g. recovery steps shorter than the walk behavior's 0.5 s ``min_duration``); none: the behavior's."""
    monkeypatch.setattr(robustness, "LIMITS", {})
    robustness.main(["--sections", "", "--limits", "min_duration=0.4,max_backward=0.2"])
    assert robustness.LIMITS == {"min_duration": 0.4, "max_backward": 0.2}
    assert robustness.StepLimits(**robustness.LIMITS).min_duration == 0.4
