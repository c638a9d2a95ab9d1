"""In-process closed loop (walk_mpc.core.closed_loop) on the kinematic plant: plumbing and options."""

from __future__ import annotations

import pytest

from walk_mpc.core.closed_loop import ClosedLoopParameters, ClosedLoopWalk, _replace_support
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.footsteps import walk_forward
from walk_mpc.core.robot import RobotModel, yaw_of
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.step import Foot
from walk_mpc.core.timeline import FootPose, GaitTiming, Timeline


@pytest.fixture(scope="module")
def talos():
    return RobotModel(RobotModel.Parameters(robot="talos_reduced"))


def timeline_of(robot: RobotModel, distance: float = 0.4) -> Timeline:
    feet = {n: FootPose(tuple(p), yaw_of(r)) for n, (p, r) in robot.foot_poses(
        robot.reference_configuration()).items()}
    left, right = feet[robot.left_foot_frame], feet[robot.right_foot_frame]
    width = abs(left.position[1] - right.position[1])
    steps = walk_forward(left, right, distance, step_length=0.2, width=width, duration=1.1)
    return Timeline(left, right, steps, GaitTiming(0.6, 0.3, 0.6))


def test_kinematic_plant_walks_with_feet_on_the_plan_and_ticks_every_control_period(talos):
    sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
    loop = ClosedLoopWalk(talos, sim, timeline_of(talos))
    ticks = []
    outcome = loop.run(on_tick=ticks.append)
    assert not outcome.fallen and outcome.ik_failures == 0
    assert sorted(outcome.landing_errors) == [s.step_index for s in loop.original_timeline.steps]
    assert max(outcome.landing_errors.values()) < 0.005
    assert outcome.final_com_error < 0.01
    assert [round(r.t, 6) for r in ticks[:3]] == [0.0, 0.02, 0.04]
    assert outcome.real_time_factor > 0.0


def test_control_period_must_be_a_multiple_of_the_hardware_period(talos):
    sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
    with pytest.raises(ParameterError):
        ClosedLoopWalk(talos, sim, timeline_of(talos), params=ClosedLoopParameters(control_period=0.015))


def test_parameters_reject_non_boolean_switches_and_non_positive_periods():
    with pytest.raises(ParameterError):
        ClosedLoopParameters(com_feedback=1)
    with pytest.raises(ParameterError):
        ClosedLoopParameters(control_period=0.0)


def test_replacing_the_support_moves_only_the_landed_step(talos):
    timeline = timeline_of(talos)
    first = timeline.steps[0]
    t = timeline.touchdown_time(first.step_index) + 0.1
    pose = FootPose((first.position[0] + 0.01, first.position[1], first.position[2]), 0.02)
    corrected = _replace_support(timeline, first.foot, pose, t)
    assert corrected.steps[0].position == pose.position and corrected.steps[0].yaw == pytest.approx(0.02)
    assert corrected.steps[1:] == timeline.steps[1:]
    # Before any touchdown of that foot, the start pose is replaced.
    other = Foot.RIGHT if first.foot is Foot.LEFT else Foot.LEFT
    start = _replace_support(timeline, other, pose, 0.0)
    assert start.phases[0].foot(other) == pose and start.steps == timeline.steps
