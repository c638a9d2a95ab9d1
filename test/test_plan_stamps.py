"""A FootstepPlan stamped far in the future (a rogue publisher) is rejected by the planner and whole-body
stages (issue 16); plans stamped at the present or in the past (Stand since long ago) are accepted."""

from __future__ import annotations

import pytest

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.control.planner_stage import PlannerStage
from walk_mpc.core.control.types import NS_PER_S, WalkPlan
from walk_mpc.core.control.whole_body_stage import WholeBodyStage
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.walk.timeline import FootPose, Timeline


@pytest.fixture(scope="module")
def talos():
    return RobotModel(RobotModel.Parameters(robot="talos_reduced"))


@pytest.mark.parametrize("stage_class", [PlannerStage, WholeBodyStage])
def test_a_plan_stamped_far_ahead_of_the_samples_is_rejected(talos, stage_class):
    sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
    stage = stage_class(talos)
    now = 1_000 * NS_PER_S
    sim.step()
    stage.observe(now, sim.sensor_sample())
    stand = Timeline(FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0)), ())
    assert not stage.set_plan(WalkPlan(7, False, 2147483647 * NS_PER_S, stand))
    assert stage.plan_id in (0, None)  # nothing installed
    assert stage.set_plan(WalkPlan(8, False, now - 600 * NS_PER_S, stand))  # standing for 10 minutes
