"""The robot_state node: robot_description latched, the TF tree of each sample (serialized TFMessage)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ros_helpers import wait_until

pytestmark = pytest.mark.ros


class Graph:
    """The node under test and a probe node in one context, spun explicitly while waiting."""

    def __init__(self, tf_type, **params):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import String

        from walk_mpc.core.body.frames import RobotFrames
        from walk_mpc.msg import SensorState
        from walk_mpc.nodes._common import LATCHED_QOS
        from walk_mpc.nodes.robot_state import RobotStateNode, RobotStateNodeParameters

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        frames = RobotFrames.Parameters(frame_prefix="talos1/", world_frame="odom")
        self.node = RobotStateNode(RobotStateNodeParameters(frames=frames, **params), tf_type=tf_type,
                                   context=self.context)
        self.probe = rclpy.create_node("robot_state_probe", context=self.context)
        self.descriptions, self.tf = [], []
        self.probe.create_subscription(String, "robot_description",
                                       lambda m: self.descriptions.append(m.data), LATCHED_QOS)
        if tf_type is not None:
            self.probe.create_subscription(tf_type, "/tf", self.tf.append, 100, raw=True)
        self.sensor = self.probe.create_publisher(SensorState, "sensor_state", 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.executor.add_node(self.probe)

    def spin_until(self, condition, what):
        wait_until(condition, what, poll=lambda: self.executor.spin_once(timeout_sec=0.01))

    def close(self):
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        self.probe.destroy_node()
        rclpy.try_shutdown(context=self.context)


def _samples(count):
    from walk_mpc.core.sensors import SensorSample
    from walk_mpc.core.sim.kinematic import KinematicSim

    sample = KinematicSim(KinematicSim.Parameters()).sensor_sample()
    rng = np.random.default_rng(4)
    return [SensorSample(**{**sample.__dict__,
                            "joint_pos": sample.joint_pos + rng.uniform(-0.2, 0.2, len(sample.joint_pos)),
                            "base_position": sample.base_position + [0.01 * k, 0.0, 0.0]})
            for k in range(count)]


def _decode(raw_messages, tmp_path):
    """Decode serialized TFMessages with the mcap reader (an independent decoder, from the schema)."""
    from mcap_ros2.reader import read_ros2_messages

    from walk_mpc.tools.recorder import TF_TYPE, McapRecorder

    recorder = McapRecorder(tmp_path / "tf.mcap")
    for k, data in enumerate(raw_messages):
        recorder.write("tf", TF_TYPE, data, k)
    recorder.close()
    return [m.ros_msg for m in read_ros2_messages(str(tmp_path / "tf.mcap"))]


def test_node_publishes_the_description_latched_and_the_tf_of_each_sample(tmp_path):
    from std_msgs.msg import String

    from walk_mpc.nodes.sim import sensor_state_msg

    # std_msgs/String stands in for tf2_msgs/TFMessage (absent from the PyPI wheels): the node publishes
    # serialized TFMessage bytes whatever the class, and the probe receives them raw.
    graph = Graph(tf_type=String)
    try:
        assert graph.node.publishes_tf
        graph.spin_until(lambda: graph.descriptions, "robot_description")
        assert graph.descriptions == [graph.node.frames.description()]
        samples = _samples(3)
        stamps = [5_000_000_000 + 10_000_000 * k for k in range(3)]
        graph.spin_until(lambda: graph.probe.count_subscribers("sensor_state") > 0
                         and graph.probe.count_publishers("/tf") > 0, "matched topics")
        for k, (sample, stamp) in enumerate(zip(samples, stamps)):
            graph.sensor.publish(sensor_state_msg(sample, stamp))
            graph.spin_until(lambda k=k: len(graph.tf) == k + 1, f"TF message {k + 1}")
        bad = sensor_state_msg(samples[0], stamps[-1] + 10_000_000)
        bad.joint_pos[3] = math.nan
        graph.sensor.publish(bad)
        graph.spin_until(lambda: graph.node.rejected == 1, "the NaN sample refused")
    finally:
        graph.close()
    decoded = _decode(graph.tf, tmp_path)
    assert len(decoded) == 3
    frames = graph.node.frames
    for message, sample, stamp in zip(decoded, samples, stamps):
        tree = frames.transforms(frames.configuration(sample))
        assert [t.child_frame_id for t in message.transforms] == list(tree.children)
        assert message.transforms[0].header.frame_id == "odom"
        assert message.transforms[0].child_frame_id == "talos1/base_link"
        for transform, translation in zip(message.transforms, tree.translations):
            assert transform.header.stamp.sec * 1_000_000_000 + transform.header.stamp.nanosec == stamp
            v = transform.transform.translation
            np.testing.assert_allclose([v.x, v.y, v.z], translation, atol=1e-12)


def test_publish_period_keeps_one_sample_per_period_of_sample_time():
    from std_msgs.msg import String

    from walk_mpc.nodes.sim import sensor_state_msg

    graph = Graph(tf_type=String, publish_period=0.02)
    try:
        graph.spin_until(lambda: graph.probe.count_subscribers("sensor_state") > 0, "matched sensor topic")
        sample = _samples(1)[0]
        for k in range(5):  # samples every 10 ms: 0, 20 and 40 ms are published
            graph.node._on_sensor(sensor_state_msg(sample, 1_000_000_000 + 10_000_000 * k))
        assert graph.node.published == 3
    finally:
        graph.close()


def test_without_tf2_msgs_the_node_publishes_the_description_only():
    from walk_mpc.nodes import robot_state

    if robot_state.TFMessage is not None:
        pytest.skip("tf2_msgs is installed: the node publishes TF")
    graph = Graph(tf_type=None)
    try:
        assert not graph.node.publishes_tf
        graph.spin_until(lambda: graph.descriptions, "robot_description")
        assert "<robot" in graph.descriptions[0]
        assert graph.probe.count_publishers("/tf") == 0
    finally:
        graph.close()


def test_bad_parameters_are_refused_naming_them():
    from walk_mpc.core.errors import ParameterError
    from walk_mpc.nodes.robot_state import RobotStateNodeParameters

    with pytest.raises(ParameterError, match="publish_period"):
        RobotStateNodeParameters(publish_period=-1.0)
    with pytest.raises(ParameterError, match="tf_topic"):
        RobotStateNodeParameters(tf_topic="")


def test_rviz_config_shows_the_robot_model_tf_and_the_planner_displays_in_the_world_frame():
    from pathlib import Path

    import yaml

    config = Path(__file__).resolve().parents[1] / "config"
    rviz = yaml.safe_load((config / "walk_mpc.rviz").read_text())["Visualization Manager"]
    displays = {d["Class"].split("/")[-1]: d for d in rviz["Displays"]}
    node = yaml.safe_load((config / "walk_mpc.yaml").read_text())
    robot_state = node["robot_state"]["ros__parameters"]
    assert displays["RobotModel"]["Description Source"] == "Topic"
    topic = displays["RobotModel"]["Description Topic"]
    assert topic["Value"] == "/" + robot_state["description_topic"]
    assert topic["Durability Policy"] == "Transient Local"  # the description is published once, latched
    assert displays["TF"]["Enabled"] and displays["MarkerArray"]["Topic"]["Value"] == "/mpc/markers"
    assert [d["Topic"]["Value"] for d in rviz["Displays"] if d["Class"].endswith("/Path")] == [
        "/mpc/com_path", "/mpc/zmp_path"]
    world = robot_state["frames"]["world_frame"]
    assert rviz["Global Options"]["Fixed Frame"] == world
    assert node["mpc_planner"]["ros__parameters"]["frame_id"] == world  # the markers and paths
    assert node["sim"]["ros__parameters"]["frame_id"] == world  # the base pose of the samples
