"""The demo refuses to walk beside another robot's graph in its DDS domain and namespace."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("rclpy")


def _publishers_seen(node, topic, count, timeout=10.0):
    """Poll until the graph shows ``count`` publishers on ``topic`` (discovery is asynchronous)."""
    deadline = time.monotonic() + timeout
    while node.count_publishers(topic) < count:
        assert time.monotonic() < deadline, f"{count} publishers on {topic} never seen"
        threading.Event().wait(0.02)


def test_a_second_sensor_state_publisher_in_the_namespace_is_named(context):
    import rclpy

    from walk_mpc.demo import other_graph
    from walk_mpc.msg import SensorState

    checker = rclpy.create_node("walk_mpc_demo", namespace="robot1", context=context)
    ours = rclpy.create_node("sim", namespace="robot1", context=context)
    elsewhere = rclpy.create_node("sim", namespace="robot2", context=context)
    ours.create_publisher(SensorState, "sensor_state", 1)
    elsewhere.create_publisher(SensorState, "sensor_state", 1)  # another namespace: not counted
    _publishers_seen(checker, "/robot2/sensor_state", 1)
    _publishers_seen(checker, "/robot1/sensor_state", 1)
    assert other_graph(checker) is None
    intruder = rclpy.create_node("sim", namespace="robot1", context=context)
    intruder.create_publisher(SensorState, "sensor_state", 1)
    _publishers_seen(checker, "/robot1/sensor_state", 2)
    message = other_graph(checker)
    assert message is not None
    assert message.startswith("2 publishers on '/robot1/sensor_state' in ROS_DOMAIN_ID"), message
    assert "/robot1/sim, /robot1/sim" in message and "another ROS_DOMAIN_ID or --namespace" in message
    for node in (checker, ours, elsewhere, intruder):
        node.destroy_node()
