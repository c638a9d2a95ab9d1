"""A control node dies at a random phase of a walk (issue 17), in process on the kinematic plant.

The graph's three controllers (WalkSupervisor = walk_behavior, PlannerStage = mpc_planner, WholeBodyStage =
ik) run on the plant's samples as the nodes do, their outputs handed over as the messages would be (plans,
CoM references, joint commands, the timing reports the supervisor watches). A node's death is the end of its
calls and outputs (the plant holds the last joint command, as a ros2_control command timeout would); its
restart is a fresh instance fed the latched plan. Real time is simulated: the steady clock runs with the
stamps. Each control node is killed at 10 random gait phases of a 4-step walk and once standing:

* the walk ends within 0.5 s of sensor time with the dead node's error code, never NONE, naming it;
* the plant never falls and no CoM reference leaves 1.5 m of the feet;
* 1 s after the node's restart the loop runs (the ik ticks on references), and a 2-step walk from wherever
  the robot stands succeeds (landings seen in the contact forces).

The same scenarios with the real processes and SIGKILL: test_graph_faults.py; on MuJoCo: benchmarks/faults.py.
"""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from walk_mpc.core.body.robot import RobotModel, yaw_of
from walk_mpc.core.control.planner_stage import PlannerStage, PlannerStageParameters
from walk_mpc.core.control.types import NS_PER_S, WholeBodyStatus
from walk_mpc.core.control.walk_supervisor import WalkSupervisor, WalkSupervisorParameters
from walk_mpc.core.control.whole_body_stage import WholeBodyStage, WholeBodyStageParameters
from walk_mpc.core.sim.backend import JointTrajectoryCommand
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.walk import footsteps
from walk_mpc.core.walk.behavior import WalkErrorCode
from walk_mpc.core.walk.timeline import FootPose

ORIGIN_NS = 1_000 * NS_PER_S
PERIOD_NS = 10_000_000
REACH = 1.5  # [m] acceptance: no CoM reference farther from the feet
END_WITHIN_NS = NS_PER_S // 2  # acceptance: a silent node ends the walk within 0.5 s
TRIALS = 10  # random gait phases per node

pytestmark = pytest.mark.slow


class InProcessGraph:
    """The three controllers on a kinematic plant, wired as the node graph (see the module docstring)."""

    def __init__(self, robot: RobotModel, whole_body: WholeBodyStageParameters | None = None) -> None:
        self.robot = robot
        self.whole_body_params = whole_body if whole_body is not None else WholeBodyStageParameters()
        self.sim = KinematicSim(KinematicSim.Parameters(), robot=robot)
        q = np.array(self.sim.state.q)
        soles = [p[2] for p, _ in robot.foot_poses(q).values()]
        planner = PlannerStageParameters().planner  # the LIPM height of this robot, feedback gain 0.1
        mpc = dataclasses.replace(planner.mpc, com_height=float(robot.com(q)[2] - np.mean(soles)))
        planner = dataclasses.replace(planner, mpc=mpc, feedback_gain=0.1)
        self.planner_params = PlannerStageParameters(planner=planner)
        self.supervisor_params = WalkSupervisorParameters(sensor_timeout=0.25,
                                                          watch_links=("mpc_planner", "ik"))
        self.alive = {"walk_behavior": True, "mpc_planner": True, "ik": True}
        self.supervisor = WalkSupervisor(self.supervisor_params, robot)
        self.planner = PlannerStage(robot, self.planner_params)
        self.whole_body = WholeBodyStage(robot, self.whole_body_params)
        self.plan = None  # the latched walk/plan
        self.results = []
        self.stamp = ORIGIN_NS
        self.reference_distances = []  # distance of each CoM reference to the nearest measured sole [m]
        self.reference_ticks = 0  # ik commands on a reference
        self.samples = 0

    # -- the graph's links
    def _deliver_plan(self, plan) -> None:
        self.plan = plan
        if self.alive["mpc_planner"]:
            self.planner.set_plan(plan)
        if self.alive["ik"]:
            self.whole_body.set_plan(plan)

    def _supervise(self, output) -> None:
        self.results += output.results
        if output.plan is not None:
            self._deliver_plan(output.plan)

    def _report(self, component, status, stamp):
        if self.alive["walk_behavior"]:
            self._supervise(self.supervisor.report(component, int(status), stamp, steady_ns=self.stamp))

    def _command(self, command) -> None:
        if command is None:
            return
        self._report("ik", command.status, command.stamp_ns)
        self.reference_ticks += command.source == "reference" and command.status == WholeBodyStatus.OK
        self.sim.set_trajectory(JointTrajectoryCommand(
            self.whole_body.joint_names, command.times, command.positions,
            stamp=(command.stamp_ns - ORIGIN_NS) / NS_PER_S, velocities=command.velocities))

    def step(self) -> None:
        """One hardware period: the plant steps, every living controller takes the sample."""
        state = self.sim.step()
        assert not state.fallen, "the plant fell"
        self.stamp = ORIGIN_NS + state.step_count * PERIOD_NS
        sample = self.sim.sensor_sample()
        self.samples += 1
        if self.alive["walk_behavior"]:
            self._supervise(self.supervisor.observe(self.stamp, sample, self.stamp))
            if self.samples % 2 == 0:
                self._supervise(self.supervisor.check_timeouts(self.stamp))
        if self.alive["ik"]:
            self._command(self.whole_body.observe(self.stamp, sample))
        if self.alive["mpc_planner"]:
            tick = self.planner.observe(self.stamp, sample)
            if tick.status is not None:
                self._report("mpc_planner", tick.status, self.stamp)
            if tick.reference is not None:
                self._check_reach(tick.reference, state.q)
                if self.alive["ik"]:
                    self._command(self.whole_body.on_reference(tick.reference))
            if tick.ahead is not None and self.alive["ik"]:
                self.whole_body.on_reference_ahead(tick.ahead)

    def _check_reach(self, reference, q) -> None:
        soles = [p for p, _ in self.robot.foot_poses(np.asarray(q)).values()]
        com = reference.com_position[0]
        self.reference_distances.append(min(math.hypot(com[0] - p[0], com[1] - p[1]) for p in soles))

    def run(self, seconds: float) -> None:
        for _ in range(int(round(seconds * NS_PER_S / PERIOD_NS))):
            self.step()

    # -- faults
    def kill(self, name: str) -> None:
        self.alive[name] = False

    def restart(self, name: str) -> None:
        if name == "walk_behavior":
            self.supervisor = WalkSupervisor(self.supervisor_params, self.robot)
        elif name == "mpc_planner":
            self.planner = PlannerStage(self.robot, self.planner_params)
            if self.plan is not None:
                self.planner.set_plan(self.plan)
        else:
            self.whole_body = WholeBodyStage(self.robot, self.whole_body_params)
            if self.plan is not None:
                self.whole_body.set_plan(self.plan)
        self.alive[name] = True

    # -- walking
    def feet(self) -> tuple:
        q = np.asarray(self.sim.state.q)
        poses = self.robot.foot_poses(q)
        return tuple(FootPose(tuple(poses[f][0]), yaw_of(poses[f][1]))
                     for f in (self.robot.left_foot_frame, self.robot.right_foot_frame))

    def send(self, count: int, goal: bytes):
        left, right = self.feet()
        width = math.hypot(left.position[0] - right.position[0], left.position[1] - right.position[1])
        steps = footsteps.walk_forward(left, right, 0.2 * (count - 1), 0.2, width=width, duration=0.8)
        answer, output = self.supervisor.submit_goal(goal, steps, True, self.stamp)
        assert answer.accepted, answer
        self._supervise(output)
        return steps

    def walk_to_the_end(self, goal: bytes, limit: float = 10.0):
        for _ in range(int(limit * NS_PER_S / PERIOD_NS)):
            self.step()
            done = [r for r in self.results if r.goal_id == goal]
            if done:
                return done[0]
        raise AssertionError(f"goal {goal!r} did not end within {limit} s")


@pytest.fixture(scope="module")
def talos():
    return RobotModel(RobotModel.Parameters(robot="talos_reduced"))


def drill(talos, node: str, kill_after: float | None, seed: int) -> None:
    graph = InProcessGraph(talos)
    graph.run(1.0)  # the loop runs: plans, references, commands
    assert graph.reference_ticks > 10
    if kill_after is None:  # standing
        graph.kill(node)
        graph.run(0.5)
    else:
        goal = b"walk-%d" % seed
        graph.send(4, goal)
        graph.run(kill_after)
        killed = graph.stamp
        graph.kill(node)
        if node == "walk_behavior":
            graph.run(4.5)  # the latched plan goes on: the stages finish it and stand
        else:
            result = graph.walk_to_the_end(goal)
            assert result.error_code == {"ik": WalkErrorCode.IK_FAILURE,
                                         "mpc_planner": WalkErrorCode.PLANNER_FAILURE}[node], result
            assert f"is the {node} running?" in result.error_msg, result
            assert graph.stamp - killed <= END_WITHIN_NS + PERIOD_NS, (graph.stamp - killed) / NS_PER_S
            graph.run(1.0)
    assert max(graph.reference_distances) < REACH
    graph.restart(node)
    ticks = graph.reference_ticks
    graph.run(1.0)
    assert graph.reference_ticks > ticks + 10, f"the loop does not run 1 s after the {node} restart"
    goal = b"after-%d" % seed
    steps = graph.send(2, goal)
    result = graph.walk_to_the_end(goal)
    assert result.error_code == WalkErrorCode.NONE, result
    for step in steps:
        error = graph.supervisor.landings.landing_error(step.step_index)
        assert error is not None and error < 0.03, (step, error)
    assert max(graph.reference_distances) < REACH


@pytest.mark.parametrize("node", ["ik", "mpc_planner", "walk_behavior"])
def test_a_node_killed_standing_then_restarted_walks(talos, node):
    drill(talos, node, None, 0)


@pytest.mark.parametrize("node", ["ik", "mpc_planner"])
def test_a_control_node_killed_at_random_gait_phases_ends_the_walk_and_recovers(talos, node):
    rng = random.Random(17 if node == "ik" else 18)
    walk_time = 0.6 + 4 * 0.8  # sway + 4 steps [s]
    for seed in range(TRIALS):
        drill(talos, node, rng.uniform(0.05, walk_time), seed)


def test_a_killed_walk_behavior_leaves_the_stages_finishing_the_latched_plan(talos):
    drill(talos, "walk_behavior", 1.7, 99)


def test_a_restarted_ik_keeps_the_com_over_the_stance_sole_until_the_foot_left_in_the_air_lands(talos):
    """The ik dies mid-swing (the plant holds the right foot in the air); restarted, it puts that foot down by
    a settling step while the CoM stays within safe_stop_stance_radius (+ the plant's lag) of the stance
    sole, and only then joins the planner's references between both feet. The plant here does not execute
    the landing tail of the commands (landing_tail off), so the foot stays in the air until the restart."""
    graph = InProcessGraph(talos, WholeBodyStageParameters(landing_tail=False))
    graph.run(1.0)
    graph.send(4, b"walk")
    graph.run(0.6 + 0.8 + 0.25)  # sway, step 1, then the swing of step 2 (the right foot)
    graph.kill("ik")
    graph.walk_to_the_end(b"walk")
    graph.run(0.5)
    q = np.asarray(graph.sim.state.q)
    poses = talos.foot_poses(q)
    left, right = poses[talos.left_foot_frame][0], poses[talos.right_foot_frame][0]
    assert right[2] - left[2] > 0.02  # the right foot is in the air
    graph.restart("ik")
    radius = WholeBodyStageParameters().safe_stop_stance_radius
    airborne, landed_at = [], None
    for k in range(150):
        graph.step()
        q = np.asarray(graph.sim.state.q)
        poses = talos.foot_poses(q)
        left, right = poses[talos.left_foot_frame][0], poses[talos.right_foot_frame][0]
        com = talos.com(q)
        if right[2] - left[2] > 0.005:
            airborne.append(math.hypot(com[0] - left[0], com[1] - left[1]))
        elif landed_at is None:
            landed_at = k
    assert airborne and max(airborne) < radius + 0.02, max(airborne)
    assert landed_at is not None
    middle = (left[:2] + right[:2]) / 2.0
    assert np.linalg.norm(com[:2] - middle) < 0.02  # 1.5 s after the restart: between both feet
    goal = b"after"
    graph.send(2, goal)
    assert graph.walk_to_the_end(goal).error_code == WalkErrorCode.NONE


@pytest.mark.parametrize("landing_tail", [True, False])
def test_a_dead_ik_s_last_command_puts_the_swing_foot_down_with_the_landing_tail(talos, landing_tail):
    """The ik dies mid-swing; the plant goes on executing its last trajectory (as a ros2_control
    JointTrajectoryController holds it): with the landing tail the swing foot is on the ground 0.6 s later and
    the stance foot has not moved; without it, the foot stays in the air."""
    graph = InProcessGraph(talos, WholeBodyStageParameters(landing_tail=landing_tail))
    graph.run(1.0)
    graph.send(4, b"walk")
    graph.run(0.6 + 0.8 + 0.25)  # the swing of step 2 (the right foot)
    q = np.asarray(graph.sim.state.q)
    before = talos.foot_poses(q)[talos.left_foot_frame][0]
    assert talos.foot_poses(q)[talos.right_foot_frame][0][2] - before[2] > 0.02
    graph.kill("ik")
    graph.run(0.6)
    poses = talos.foot_poses(np.asarray(graph.sim.state.q))
    left, right = poses[talos.left_foot_frame][0], poses[talos.right_foot_frame][0]
    assert np.linalg.norm(left - before) < 1e-3
    if landing_tail:
        assert abs(right[2] - left[2]) < 0.003
    else:
        assert right[2] - left[2] > 0.02
