"""Talos walks 10 steps on MuJoCo physics, closed in process without ROS: timeline -> MPC -> IK -> physics.

The loop is :class:`~walk_mpc.core.control.closed_loop.ClosedLoopWalk` (20 ms control ticks on every
second 10 ms sample, CoM feedback gain 0.1 above 4 mm, support-foot correction when the new support foot
has settled, IK twice per tick from its own model, re-synchronised at support changes). Physics: leg
servos kp 8000 / kd 80 (other joints 2000 / 20), gravity feed-forward, 1 ms implicitfast steps, 5 ms
contact time constant.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("mujoco")

from walk_mpc.core.body.robot import RobotModel, yaw_of  # noqa: E402
from walk_mpc.core.control.closed_loop import (  # noqa: E402
    ClosedLoopParameters,
    ClosedLoopWalk,
    WalkOutcome,
    default_planner_parameters,
)
from walk_mpc.core.sim.kinematic import KinematicSim  # noqa: E402
from walk_mpc.core.sim.mujoco import MujocoSim  # noqa: E402
from walk_mpc.core.walk.footsteps import walk_forward  # noqa: E402
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline  # noqa: E402

STEP_LENGTH = 0.2  # [m]
SINGLE_SUPPORT = 0.8  # [s]
DOUBLE_SUPPORT = 0.3  # [s]
N_STEPS = 10


def talos_timeline(robot: RobotModel) -> Timeline:
    q0 = robot.reference_configuration()
    feet = robot.foot_poses(q0)
    poses = {name: FootPose(tuple(p), yaw_of(r)) for name, (p, r) in feet.items()}
    left, right = poses[robot.left_foot_frame], poses[robot.right_foot_frame]
    width = abs(left.position[1] - right.position[1])
    steps = walk_forward(left, right, STEP_LENGTH * (N_STEPS - 1), step_length=STEP_LENGTH, width=width,
                         duration=SINGLE_SUPPORT + DOUBLE_SUPPORT)
    return Timeline(left, right, steps, GaitTiming(sway_duration=0.6, double_support_duration=DOUBLE_SUPPORT,
                                                   catch_duration=0.6))


def walk_on_physics(robot: RobotModel, physics: MujocoSim.Parameters,
                    loop: ClosedLoopParameters = ClosedLoopParameters()) -> WalkOutcome:
    sim = MujocoSim(KinematicSim.Parameters(), physics, robot=robot)
    return ClosedLoopWalk(robot, sim, talos_timeline(robot), params=loop).run()


def assert_walked(outcome: WalkOutcome) -> None:
    assert not outcome.fallen
    assert math.degrees(outcome.max_tilt) < 10.0
    assert outcome.min_base_height_ratio > 0.9
    assert sorted(outcome.landing_errors) == list(range(1, N_STEPS + 1))
    assert max(outcome.landing_errors.values()) < 0.02  # to the original plan
    assert outcome.final_com_error < 0.03
    assert outcome.ik_failures == 0


@pytest.fixture(scope="module")
def default_walk(talos):
    return walk_on_physics(talos, MujocoSim.Parameters())


def test_talos_walks_ten_steps_on_physics_with_the_loop_closed_on_the_measured_com(default_walk):
    assert_walked(default_walk)


def test_feet_land_within_a_centimetre_and_the_com_ends_within_a_centimetre_of_the_plan(default_walk):
    assert max(default_walk.landing_errors.values()) < 0.01
    assert default_walk.final_com_error < 0.01
    # The walk took the whole timeline plus the settling time.
    assert default_walk.sim_time == pytest.approx(talos_timeline_end() + ClosedLoopParameters().settle_time,
                                                  abs=0.011)


def talos_timeline_end() -> float:
    return 0.6 + N_STEPS * (SINGLE_SUPPORT + DOUBLE_SUPPORT) + 0.6


def test_closed_loop_walks_with_leg_gains_down_to_kp_3000_kd_30(talos):
    soft = MujocoSim.Parameters(gain_patterns=("leg_",), gain_kp=(3000.0,), gain_kd=(30.0,))
    assert_walked(walk_on_physics(talos, soft))


def test_without_the_support_correction_the_same_robot_falls(talos):
    """The support-foot correction is what keeps the plan on the real feet (seed 001)."""
    outcome = walk_on_physics(talos, MujocoSim.Parameters(),
                              ClosedLoopParameters(support_correction=False))
    assert outcome.fallen


def test_loop_defaults_use_the_standing_com_height_and_a_low_feedback_gain(talos):
    q = talos.reference_configuration()
    params = default_planner_parameters(talos, q, 0.02)
    soles = [p[2] for p, _ in talos.foot_poses(q).values()]
    assert params.mpc.com_height == pytest.approx(talos.com(q)[2] - np.mean(soles))
    assert params.feedback_gain == pytest.approx(0.1)
    assert params.control_period == pytest.approx(0.02)
