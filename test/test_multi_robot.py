"""Several robots at once: two graphs in namespaces (in-process bringup), each with its topics and frames."""

from __future__ import annotations

import pytest
from ros_helpers import wait_until

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")


@pytest.fixture
def ros_context():
    context = rclpy.context.Context()
    rclpy.init(context=context)
    yield context
    rclpy.try_shutdown(context=context)


def test_g1_and_talos_graphs_run_side_by_side_in_their_namespaces(ros_context):
    from rclpy.executors import SingleThreadedExecutor

    from walk_mpc.msg import SensorState
    from walk_mpc.nodes.bringup import Bringup

    received = {"robot1": [], "robot2": []}
    probe = rclpy.create_node("multi_robot_probe", context=ros_context)
    for namespace, messages in received.items():
        probe.create_subscription(SensorState, f"/{namespace}/sensor_state", messages.append, 100)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(probe)
    with Bringup("g1", "kinematic", context=ros_context, namespace="robot1") as first, \
            Bringup("talos", "kinematic", context=ros_context, namespace="robot2") as second:
        names = {node.get_fully_qualified_name() for node in first.nodes + second.nodes}
        for node in ("walk_behavior", "mpc_planner", "ik", "sim"):
            assert {f"/robot1/{node}", f"/robot2/{node}"} <= names
        assert first.node("ik").robot.name == "g1" and second.node("ik").robot.name == "talos"
        wait_until(lambda: all(len(m) >= 5 for m in received.values()),
                   lambda: f"samples of both robots ({ {k: len(v) for k, v in received.items()} })",
                   poll=lambda: executor.spin_once(timeout_sec=0.05))
    executor.shutdown()
    probe.destroy_node()
    g1, talos = received["robot1"][-1], received["robot2"][-1]
    assert (len(g1.joint_names), len(talos.joint_names)) == (29, 32)
    assert (g1.header.frame_id, talos.header.frame_id) == ("robot1/world", "robot2/world")


def test_a_robots_control_nodes_in_one_process_beside_its_sim_close_the_loop(ros_context, tmp_path):
    """GraphProcesses(control_process=True): the ik ticks on the planner's references and the sim measures
    the loop's latency, with the control nodes in one process (issue 21)."""
    from rclpy.executors import SingleThreadedExecutor

    from walk_mpc.msg import TickTiming
    from walk_mpc.tools.launch_graph import GraphProcesses

    timings, latencies = [], []
    probe = rclpy.create_node("control_process_probe", context=ros_context)
    probe.create_subscription(TickTiming, "/robot3/ik/timing", timings.append, 100)
    probe.create_subscription(TickTiming, "/robot3/sim/latency", latencies.append, 100)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(probe)
    graph = GraphProcesses("talos", "kinematic", log_dir=tmp_path, namespace="robot3", control_process=True)
    try:
        graph.start()
        assert sorted(graph.processes) == ["control", "sim"]
        wait_until(lambda: sum(t.trigger == "/robot3/mpc/com_reference" for t in timings) >= 10 and latencies,
                   lambda: f"ik ticks on references and latencies ({len(timings)} timings, {len(latencies)} "
                           f"latencies; {graph.failed()})", timeout=120.0,
                   poll=lambda: executor.spin_once(timeout_sec=0.05))
    finally:
        codes = graph.stop()
        executor.shutdown()
        probe.destroy_node()
    assert all(code == 0 for code in codes.values()), codes
