"""Talos walks 10 steps on MuJoCo physics, closed in process without ROS: timeline -> MPC -> IK -> physics.

Each 20 ms control tick (every second 10 ms sensor sample), as the graph does: the MPC planner steps at
the sample's time with the measured CoM (MuJoCo ground truth), ``walk_targets`` gives the IK targets at
t + T and t + 2T, ``IKSolver.solve_two`` solves them from the previous first solution (re-synchronised
on the measured configuration at each support change, like the ik node), and the two solutions become a
two-point joint trajectory stamped at the sample's time.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pinocchio as pin
import pytest

pytest.importorskip("mujoco")

from walk_mpc.core.footsteps import walk_forward  # noqa: E402
from walk_mpc.core.ik import IKSolver  # noqa: E402
from walk_mpc.core.mpc import MpcParameters  # noqa: E402
from walk_mpc.core.planner import MpcPlanner, PlannerParameters  # noqa: E402
from walk_mpc.core.robot import RobotModel, yaw_of  # noqa: E402
from walk_mpc.core.sim import JointTrajectoryCommand  # noqa: E402
from walk_mpc.core.sim.kinematic import KinematicSim  # noqa: E402
from walk_mpc.core.sim.mujoco import MujocoSim  # noqa: E402
from walk_mpc.core.step import Foot  # noqa: E402
from walk_mpc.core.timeline import FootPose, GaitTiming, Timeline  # noqa: E402
from walk_mpc.core.walk_targets import walk_targets, yaw_free  # noqa: E402

T = 0.02  # [s] control period
STEP_LENGTH = 0.2  # [m]
SINGLE_SUPPORT = 0.8  # [s]
DOUBLE_SUPPORT = 0.3  # [s]
N_STEPS = 10


@dataclasses.dataclass
class WalkOutcome:
    """What a closed-loop walk on physics did."""

    fallen: bool
    max_tilt_degrees: float
    min_base_height_ratio: float
    foot_errors: dict[int, float]  # step index -> horizontal distance of the landed sole to its plan [m]
    final_com_error: float  # [m], horizontal, to the middle of the final feet
    ik_failures: int
    sim_time: float


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


def walk_on_physics(robot: RobotModel, physics: MujocoSim.Parameters, settle: float = 0.5,
                    com_feedback: bool = True, resync: bool = True, trace=None) -> WalkOutcome:
    """Walk the 10-step timeline on MuJoCo with the given physics parameters (see the module docstring).

    ``com_feedback=False`` runs the planner open loop, ``resync=False`` never re-synchronises the IK on
    the measured configuration; ``trace`` (a list) receives ``(t, IK success, measured CoM, CoM target,
    measured q)`` at each control tick.
    """
    sim = MujocoSim(KinematicSim.Parameters(), physics, robot=robot)
    q0 = robot.reference_configuration()
    timeline = talos_timeline(robot)
    com_height = float(robot.com(q0)[2] - robot.foot_poses(q0)[robot.left_foot_frame][0][2])
    planner = MpcPlanner(PlannerParameters(mpc=MpcParameters(com_height=com_height), control_period=T))
    planner.set_timeline(timeline)
    solver = IKSolver(robot)
    tilt = yaw_free(robot.frame_pose(q0, robot.torso_frame)[1])
    names = robot.joint_names
    standing = sim.state.q[2]
    ticks_per_control = round(T / sim.hardware_period)
    q_model = sim.state.q.copy()
    stance = None
    max_tilt, min_height, failures = 0.0, math.inf, 0
    landed: dict[int, float] = {}
    done = 0
    t_end = timeline.t_end + settle
    k = 0
    while sim.time < t_end - 1e-9:
        t = sim.time
        state = sim.state
        if k % ticks_per_control == 0:
            phase_stance = timeline.phase_at(t).stance_feet
            if resync and stance is not None and phase_stance != stance:
                q_model = state.q.copy()  # support change: re-synchronise on the measured configuration
            stance = phase_stance
            out = planner.step(t, state.com if com_feedback else None)
            targets = [walk_targets(timeline, t + dt, com, tilt)
                       for dt, com in zip((T, 2 * T), out.com_targets)]
            first, second = solver.solve_two(targets[0], targets[1], q_model)
            failures += not (first.success and second.success)
            if trace is not None:
                trace.append((t, first.success, state.com.copy(), out.com_targets[0].copy(), state.q.copy()))
            q_model = first.q
            points = [first.q[7:], second.q[7:]]
            sim.set_trajectory(JointTrajectoryCommand(names, (T, 2 * T), points, stamp=t))
        state = sim.step()
        k += 1
        rotation = pin.Quaternion(state.q[3:7]).toRotationMatrix()
        max_tilt = max(max_tilt, math.degrees(math.acos(min(1.0, float(rotation[2, 2])))))
        min_height = min(min_height, state.q[2] / standing)
        if state.fallen:
            break
        completed = timeline.completed_step_index(sim.time)
        if completed != done:
            done = completed
            step = next(s for s in timeline.steps if s.step_index == done)
            frame = robot.left_foot_frame if step.foot is Foot.LEFT else robot.right_foot_frame
            position, _ = robot.frame_pose(state.q, frame)
            landed[done] = float(np.linalg.norm(position[:2] - np.asarray(step.position)[:2]))
    last = timeline.phases[-1]
    middle = (np.asarray(last.left.position)[:2] + np.asarray(last.right.position)[:2]) / 2
    return WalkOutcome(sim.state.fallen, max_tilt, min_height, landed,
                       float(np.linalg.norm(sim.state.com[:2] - middle)), failures, sim.time)


@pytest.fixture(scope="module")
def talos():
    return RobotModel(RobotModel.Parameters(robot="talos_reduced"))


@pytest.mark.xfail(strict=False, reason=(
    "not walking yet: with leg kp 8000 the robot falls during the 4th step (t ~ 4.6 s): the IK plans "
    "5-6 degrees of base roll in single support, the measured CoM lags its target by ~1 cm and the CoM "
    "feedback drives the MPC's lateral targets out of the support; stiffer legs (16000-64000) fall sooner, "
    "a larger feedback gain too"))
def test_talos_walks_ten_steps_on_physics_with_the_loop_closed_on_the_measured_com(talos):
    outcome = walk_on_physics(talos, MujocoSim.Parameters())
    assert not outcome.fallen
    assert outcome.max_tilt_degrees < 10.0
    assert outcome.min_base_height_ratio > 0.9
    assert len(outcome.foot_errors) == N_STEPS
    assert max(outcome.foot_errors.values()) < 0.02
    assert outcome.final_com_error < 0.03
    assert outcome.ik_failures == 0
