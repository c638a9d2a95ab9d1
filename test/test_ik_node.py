"""The ik node: two postures per ComReference meeting the CoM and the timeline, holds, gestures (DDS)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from ros_helpers import matched, with_debug_log

from walk_mpc.core.body.robot import RobotModel, rotation_z
from walk_mpc.core.body.targets import foot_targets_at, pose_matrix
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline

pytestmark = pytest.mark.ros

T = 0.02  # [s] the node's default control period
T_NS = 20_000_000
PLAN_STAMP = 100.0  # [s] sensor time of t = 0 of the plan
COM_HEIGHT = 0.86  # [m]


def walk_timeline():
    steps = [Step(1, Foot.LEFT, 0.8, (0.1, 0.085, 0.0), yaw=0.1, swing_height=0.05),
             Step(2, Foot.RIGHT, 0.8, (0.2, -0.085, 0.0), yaw=0.1, swing_height=0.05)]
    return Timeline(FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0)), steps,
                    GaitTiming(sway_duration=0.6, double_support_duration=0.2, catch_duration=0.6))


def com_reference(timeline, t):
    """A reachable CoM: above the middle of the feet, swaying 2 cm towards the next stance foot."""
    feet = foot_targets_at(timeline, t)
    middle = 0.5 * (feet[Foot.LEFT].position + feet[Foot.RIGHT].position)
    sway = 0.02 * math.sin(math.pi * t / 0.8)
    return middle + [0.0, sway, COM_HEIGHT]


def stamp_of(seconds):
    from builtin_interfaces.msg import Time

    ns = int(round(seconds * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def ns_of(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class Graph:
    """The ik node's peers in the test process: plan, references and sensor states out; outputs in."""

    def __init__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory

        from walk_mpc.msg import ComReference, FootstepPlan, SensorState, TickTiming
        from walk_mpc.srv import ExecGesture, SetGestureEffect

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("ik_test", context=self.context)
        reliable = ReliabilityPolicy.RELIABLE
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=reliable,
                         durability=DurabilityPolicy.VOLATILE)
        plan_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=reliable,
                              durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.trajectories, self.commands, self.timings = [], [], []
        self.trajectory_sub = self.node.create_subscription(
            JointTrajectory, "joint_trajectory", self.trajectories.append, qos)
        self.node.create_subscription(Float64MultiArray, "joint_commands", self.commands.append, qos)
        self.node.create_subscription(TickTiming, "ik/timing", self.timings.append, qos)
        self.plan_pub = self.node.create_publisher(FootstepPlan, "walk/plan", plan_qos)
        self.reference_pub = self.node.create_publisher(ComReference, "mpc/com_reference", qos)
        self.sensor_pub = self.node.create_publisher(SensorState, "sensor_state", qos)
        self.gesture = self.node.create_client(ExecGesture, "ik/exec_gesture")
        self.effect = self.node.create_client(SetGestureEffect, "ik/set_gesture_effect")
        self.types = {"ComReference": ComReference, "SensorState": SensorState, "ExecGesture": ExecGesture,
                      "SetGestureEffect": SetGestureEffect}
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.process = None

    def spin_until(self, condition, what, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process is not None and self.process.proc.poll() is not None:
                pytest.fail(f"ik exited ({self.process.proc.returncode}) waiting for {what}:\n"
                            f"{self.process.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"timeout waiting for {what}:\n{self.process.output() if self.process else ''}")
            self.executor.spin_once(timeout_sec=0.05)

    def start(self, start_node, *args):
        self.process = start_node("ik", *with_debug_log("ik", args))
        outputs = ("/joint_trajectory", "/joint_commands", "/ik/timing")
        self.spin_until(lambda: all(matched(self.process, topic, "subscriber") >= 1 for topic in outputs)
                        and self.trajectory_sub.get_publisher_count() >= 1
                        and self.reference_pub.get_subscription_count() >= 1
                        and self.sensor_pub.get_subscription_count() >= 1
                        and self.gesture.service_is_ready() and self.effect.service_is_ready(),
                        "the ik node's endpoints")

    def answers(self):
        return min(len(self.trajectories), len(self.commands), len(self.timings))

    def wait_answer(self, count, what):
        self.spin_until(lambda: self.answers() >= count, what)
        assert len(self.trajectories) == len(self.commands) == len(self.timings) == count

    def reference(self, stamp, coms, plan_id=1, times=(T, 2 * T)):
        from walk_mpc.nodes.conversions import point

        msg = self.types["ComReference"](plan_id=plan_id, time_from_stamp=list(times),
                                         com_position=[point(c) for c in coms])
        msg.header.stamp = stamp_of(stamp)
        expected = self.answers() + 1
        self.reference_pub.publish(msg)
        self.wait_answer(expected, f"the answer to the reference at {stamp:.3f} s")
        return self.trajectories[-1], self.commands[-1], self.timings[-1]

    def sensor(self, stamp, joints, base=None):
        msg = self.types["SensorState"](joint_names=list(joints),
                                        joint_pos=[float(v) for v in joints.values()])
        msg.header.stamp = stamp_of(stamp)
        if base is not None:
            msg.base_estimate_valid = True
            p, q = base
            msg.base_pose.position.x, msg.base_pose.position.y, msg.base_pose.position.z = map(float, p)
            o = msg.base_pose.orientation
            o.x, o.y, o.z, o.w = map(float, q)
        self.sensor_pub.publish(msg)

    def call(self, client, request, what):
        future = client.call_async(request)
        self.spin_until(future.done, what)
        return future.result()

    def exec_gesture(self, dof, value):
        request = self.types["ExecGesture"].Request(dof=dof, value=value)
        return self.call(self.gesture, request, "exec_gesture")

    def set_effect(self, leg, effect):
        request = self.types["SetGestureEffect"].Request(leg=leg, effect=effect)
        return self.call(self.effect, request, "set_gesture_effect")

    def close(self):
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def graph():
    peers = Graph()
    yield peers
    peers.close()


@pytest.fixture(scope="module")
def talos():
    return RobotModel(RobotModel.Parameters(robot="talos_reduced"))


@pytest.fixture(scope="module")
def solo():
    return RobotModel(RobotModel.Parameters(robot="solo12"))


def joint_configuration(robot, names, positions):
    """Configuration with the base at the world origin (the trajectory carries no base pose)."""
    return robot.configuration_from_joints(dict(zip(names, positions)))


def points(trajectory):
    return [(p.time_from_start.sec * 1_000_000_000 + p.time_from_start.nanosec, np.array(p.positions),
             np.array(p.velocities)) for p in trajectory.points]


def test_walk_gives_two_postures_per_reference_meeting_the_com_and_the_timeline_feet(
        start_node, graph, talos):
    from walk_mpc.nodes.conversions import plan_to_msg

    timeline = walk_timeline()
    graph.start(start_node)
    # A measured state first: the node holds it (sensor-driven tick, no reference yet); at each support
    # change of the walk the IK model is re-synchronised with it.
    q_ref = talos.reference_configuration()
    graph.sensor(PLAN_STAMP - 1.0, talos.joint_positions(q_ref))
    graph.wait_answer(1, "the hold of the measured posture")
    assert ns_of(graph.trajectories[0].header.stamp) == int((PLAN_STAMP - 1.0) * 1e9)
    np.testing.assert_allclose(graph.commands[0].data, talos.actuated_positions(q_ref), atol=1e-9)

    graph.plan_pub.publish(plan_to_msg(timeline, 1, True, stamp_of(PLAN_STAMP)))
    previous = np.array(graph.commands[0].data)
    left, right = talos.left_foot_frame, talos.right_foot_frame
    ticks = int(round((timeline.t_end + 0.2) / T))
    refused = None
    for k in range(ticks):
        t = k * T
        coms = [com_reference(timeline, t + T), com_reference(timeline, t + 2 * T)]
        trajectory, command, timing = graph.reference(PLAN_STAMP + t, coms)
        assert timing.status == 0, (t, graph.process.output()[-2000:])
        assert timing.component == "ik" and timing.solve_time > 0.0
        assert ns_of(trajectory.header.stamp) == int(round((PLAN_STAMP + t) * 1e9))
        assert list(trajectory.joint_names) == list(talos.joint_names)
        (t1, p1, v1), (t2, p2, v2), *tail = points(trajectory)  # a landing tail in single support
        assert (t1, t2) == (T_NS, 2 * T_NS) and len(tail) in (0, 2)
        assert list(command.data) == p1.tolist()
        np.testing.assert_allclose(v1, (p2 - previous) / (2 * T), atol=1e-9)
        np.testing.assert_allclose(v2, (p2 - p1) / T, atol=1e-9)
        previous = p1
        # Forward kinematics of each point: place the base so that the left sole is where the timeline
        # says; then the right sole and the CoM must be at their targets.
        for dt, positions, com in ((T, p1, coms[0]), (2 * T, p2, coms[1])):
            feet = foot_targets_at(timeline, t + dt)
            q = joint_configuration(talos, trajectory.joint_names, positions)
            fk = talos.foot_poses(q)
            to_world = pose_matrix(feet[Foot.LEFT].position, feet[Foot.LEFT].yaw) @ np.linalg.inv(
                pose_matrix(*fk[left]))
            np.testing.assert_allclose(to_world[:3, :3] @ talos.com(q) + to_world[:3, 3], com, atol=1e-4)
            right_world = to_world @ pose_matrix(*fk[right])
            np.testing.assert_allclose(right_world[:3, 3], feet[Foot.RIGHT].position, atol=1e-4)
            np.testing.assert_allclose(right_world[:3, :3], rotation_z(feet[Foot.RIGHT].yaw), atol=1e-3)
        if refused is None and timeline.phase_at(t).swing_foot is Foot.LEFT:
            refused = graph.exec_gesture(5, 0.1)  # mid-swing
    assert not refused.success and "walk" in refused.message

    # Standing now (past the plan's end): gestures apply; Talos has 2 legs < 3 support legs -> legs only.
    bad_leg = graph.set_effect(2, False)
    assert not bad_leg.success and "left_sole_link" in bad_leg.message
    assert graph.set_effect(1, False).success  # the right leg ignores gestures
    response = graph.exec_gesture(5, 0.1)
    assert response.success and not response.body_moved, response.message
    unknown = graph.exec_gesture(9, 0.1)
    assert not unknown.success and "dof" in unknown.message

    # NaN in a reference: rejected, status != 0, the last command repeated (no jump)
    t = ticks * T
    last = list(graph.commands[-1].data)
    trajectory, command, timing = graph.reference(PLAN_STAMP + t, [[math.nan, 0.0, COM_HEIGHT]] * 2)
    assert timing.status != 0
    assert list(command.data) == last
    assert [p.tolist() for _, p, _ in points(trajectory)] == [last, last]
    assert all(not v.any() for _, _, v in points(trajectory))
    # an unreachable CoM: the solve fails, the last command is held and reported
    far = com_reference(timeline, t) + [0.0, 0.0, 0.5]
    trajectory, command, timing = graph.reference(PLAN_STAMP + t + T, [far, far])
    assert timing.status != 0 and timing.status != 2
    assert list(command.data) == last
    # back to a good reference: solved again; the gesture turned the left foot only
    t += 2 * T
    com = com_reference(timeline, t)
    trajectory, command, timing = graph.reference(PLAN_STAMP + t, [com, com])
    assert timing.status == 0
    q = joint_configuration(talos, trajectory.joint_names, command.data)
    fk = talos.foot_poses(q)
    relative = np.linalg.inv(pose_matrix(*fk[right])) @ pose_matrix(*fk[left])
    final = timeline.phases[-1]
    planned = np.linalg.inv(pose_matrix(final.right.position, final.right.yaw)) @ pose_matrix(
        final.left.position, final.left.yaw)
    turned = np.linalg.inv(planned) @ relative
    assert math.atan2(turned[1, 0], turned[0, 0]) == pytest.approx(0.1, abs=1e-4)
    assert "holding the last command" in graph.process.output()


def test_quadruped_holds_its_measured_posture_and_a_gesture_yaws_the_body_with_the_feet_fixed(
        start_node, graph, solo):
    graph.start(start_node, "--ros-args", "-p", "robot.robot:=solo12")
    q0 = solo.reference_configuration()
    base = (q0[0:3], q0[3:7])
    before = graph.exec_gesture(5, 0.1)
    assert not before.success and "no state" in before.message
    graph.sensor(10.0, solo.joint_positions(q0), base)
    graph.wait_answer(1, "the hold of the measured posture")
    np.testing.assert_allclose(graph.commands[0].data, solo.actuated_positions(q0), atol=1e-9)
    assert graph.timings[0].status == 0

    response = graph.exec_gesture(5, 0.1)
    assert response.success and response.body_moved, response.message
    graph.sensor(10.01, solo.joint_positions(q0), base)  # less than a control period later: no tick
    graph.sensor(10.02, solo.joint_positions(q0), base)
    graph.wait_answer(2, "the posture after the gesture")
    trajectory = graph.trajectories[1]
    assert ns_of(trajectory.header.stamp) == 10_020_000_000
    q = joint_configuration(solo, trajectory.joint_names, graph.commands[1].data)
    # feet in the base frame turned by +0.1 rad (the body by -0.1 rad in the world, the feet fixed)
    for frame, (position, _) in solo.foot_poses(q0).items():
        in_base = position - q0[0:3]
        np.testing.assert_allclose(solo.foot_poses(q)[frame][0] - q[0:3], rotation_z(0.1) @ in_base,
                                   atol=1e-4)
    assert graph.set_effect(3, False).success
    assert not graph.set_effect(4, True).success


def standing_samples(node, talos):
    """``observe(t)``: Talos' reference posture stamped ``PLAN_STAMP + t`` [s], handed to ``node``'s sensor
    callback."""
    from walk_mpc.msg import SensorState

    q = talos.reference_configuration()
    sensor = SensorState(joint_names=list(talos.joint_names), joint_pos=talos.actuated_positions(q).tolist())

    def observe(t):
        sensor.header.stamp = stamp_of(PLAN_STAMP + t)
        node._on_sensor_state(sensor)

    return observe


def reference_msg(timeline, t, plan_id=1):
    from walk_mpc.msg import ComReference
    from walk_mpc.nodes.conversions import point

    msg = ComReference(plan_id=plan_id, time_from_stamp=[T, 2 * T],
                       com_position=[point(com_reference(timeline, t + dt)) for dt in (T, 2 * T)])
    msg.header.stamp = stamp_of(PLAN_STAMP + t)
    return msg


def test_in_process_the_node_publishes_the_stage_commands_and_the_messages_built_ahead(talos):
    """The adapter (the decisions are the stage's, test_whole_body_stage): each callback's command is
    published with its status and trigger; the messages of a command solved ahead are built on its
    announcement and published as they are when the tick returns that command; a malformed ComReference
    is a BAD_REFERENCE hold."""
    import rclpy

    from walk_mpc.msg import ComReference
    from walk_mpc.nodes.conversions import plan_to_msg
    from walk_mpc.nodes.ik import STATUS_BAD_REFERENCE, STATUS_OK, IKNode, IKNodeParameters

    context = rclpy.Context()
    rclpy.init(context=context)
    node = IKNode(IKNodeParameters(), context=context)
    node._steady_ns = lambda: None  # the stamps' order only: this test's stamps leap ahead of the clock
    try:
        trajectories, commands, timings = [], [], []
        node._trajectory_pub.publish = trajectories.append
        node._commands_pub.publish = commands.append
        node._commands_pub.get_subscription_count = lambda: 1  # published only to subscribers
        node._timing_pub.publish = timings.append
        observe = standing_samples(node, talos)

        observe(-T)  # no references: a standing tick on the sample
        assert [(m.status, m.trigger) for m in timings] == [(STATUS_OK, "/sensor_state")]
        assert node.initialised and not node.walking()
        timeline = walk_timeline()
        node._on_plan(plan_to_msg(timeline, 1, True, stamp_of(PLAN_STAMP)))
        node._on_reference(reference_msg(timeline, 0.0))
        assert (timings[-1].status, timings[-1].trigger) == (STATUS_OK, "/mpc/com_reference")
        assert node.walking()
        for k in range(1, 4):
            observe(k * T - T / 2)
            node._on_reference_ahead(reference_msg(timeline, k * T))
            announced = node._ahead[1][0]
            observe(k * T)
            node._on_reference(reference_msg(timeline, k * T))
            assert trajectories[-1] is announced  # built ahead, published as it is
        assert node.ahead_ticks == 3 and len(trajectories) == len(commands) == len(timings) == 5
        trajectory = trajectories[-1]
        assert ns_of(trajectory.header.stamp) == int(round((PLAN_STAMP + 3 * T) * 1e9))
        assert list(commands[-1].data) == list(trajectory.points[0].positions)
        last = list(commands[-1].data)
        malformed = ComReference(plan_id=1, time_from_stamp=[T], com_position=[])
        malformed.header.stamp = stamp_of(PLAN_STAMP + 4 * T)
        node._on_reference(malformed)
        assert timings[-1].status == STATUS_BAD_REFERENCE and list(commands[-1].data) == last
        assert [list(p.positions) for p in trajectories[-1].points] == [last, last]
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def test_in_process_waiting_for_a_walk_s_first_references_the_node_reports_naming_the_planner(talos):
    """A walk plan came but no reference for it (a restarted mpc_planner that never heard the plan: its
    references name plan 0): the ik publishes no command, but an ik/timing on each tick's sample saying what
    it waits for (WAITING_FOR_REFERENCES, trigger sensor_state), then REFERENCE_STALE, naming the planner."""
    import rclpy

    from walk_mpc.nodes.conversions import plan_to_msg
    from walk_mpc.nodes.ik import (
        STATUS_OK,
        STATUS_REFERENCE_STALE,
        STATUS_WAITING_FOR_REFERENCES,
        IKNode,
        IKNodeParameters,
    )

    context = rclpy.Context()
    rclpy.init(context=context)
    node = IKNode(IKNodeParameters(reference_timeout=0.1), context=context)
    node._steady_ns = lambda: None
    try:
        trajectories, timings = [], []
        node._trajectory_pub.publish = trajectories.append
        node._timing_pub.publish = timings.append
        observe = standing_samples(node, talos)

        observe(-T)
        assert [m.status for m in timings] == [STATUS_OK] and len(trajectories) == 1
        timeline = walk_timeline()
        node._on_plan(plan_to_msg(timeline, 1, True, stamp_of(PLAN_STAMP)))
        node._on_reference(reference_msg(timeline, 0.0, plan_id=0))  # the planner's, for plan 0: skipped
        for k in range(4):
            observe(k * T)
        waiting = timings[1:]
        assert [m.status for m in waiting] == [STATUS_WAITING_FOR_REFERENCES] * 4
        assert len(trajectories) == 1  # no command: the last one goes on
        for m in waiting:
            assert m.trigger == "/sensor_state" and m.component == "ik"
            assert "plan 1" in m.reason and "plan 0" in m.reason and "is the mpc_planner running?" in m.reason
        stamps = [round((PLAN_STAMP + k * T) * 1e9) for k in range(4)]
        assert [ns_of(m.header.stamp) for m in waiting] == stamps
        for k in range(4, 7):
            observe(k * T)
        assert timings[-1].status == STATUS_REFERENCE_STALE
        assert "is the mpc_planner running?" in timings[-1].reason
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
