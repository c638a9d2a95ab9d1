"""MCAP recording with ROS 2 serialization reads back with an independent ROS 2 MCAP decoder."""

import numpy as np
import pytest

pytestmark = pytest.mark.ros


def test_recorded_messages_decode_with_mcap_ros2(tmp_path):
    from mcap_ros2.reader import read_ros2_messages

    from walk_mpc.msg import StepData, WalkFeedback
    from walk_mpc.tools.recorder import McapRecorder

    path = tmp_path / "walk.mcap"
    recorder = McapRecorder(path)
    for k in range(3):
        msg = WalkFeedback(current_step_index=k, status_flags=2,
                           step_queue_saturated=[StepData(step_index=k + 1, foot_index=k % 2, duration=1.1)])
        recorder.write("walk/status", "walk_mpc/msg/WalkFeedback", msg, stamp_ns=1_000_000 * k)
    recorder.close()
    decoded = list(read_ros2_messages(str(path)))
    assert [m.channel.topic for m in decoded] == ["/walk/status"] * 3
    assert [m.ros_msg.current_step_index for m in decoded] == [0, 1, 2]
    assert decoded[2].ros_msg.step_queue_saturated[0].step_index == 3
    assert decoded[0].schema.name == "walk_mpc/msg/WalkFeedback"  # the ROS 2 type name, as rosbag2 writes it
    assert "MSG: walk_mpc/StepData" in decoded[0].schema.data.decode()
    assert "MSG: geometry_msgs/Point" in decoded[0].schema.data.decode()


def test_schema_of_a_message_with_nested_arrays_lists_each_dependency_once():
    from walk_mpc.tools.recorder import msgdef_text

    text = msgdef_text("walk_mpc/msg/SensorState")
    assert text.count("MSG: geometry_msgs/Vector3") == 1
    assert "MSG: std_msgs/Header" in text and "MSG: builtin_interfaces/Time" in text


def _talos_sample(seed=0):
    """A sensor sample of the kinematic Talos, its joints moved away from the reference (seeded)."""
    from walk_mpc.core.sensors import SensorSample
    from walk_mpc.core.sim.kinematic import KinematicSim

    sample = KinematicSim(KinematicSim.Parameters()).sensor_sample()
    rng = np.random.default_rng(seed)
    return SensorSample(**{**sample.__dict__,
                           "joint_pos": sample.joint_pos + rng.uniform(-0.2, 0.2, len(sample.joint_pos)),
                           "base_position": sample.base_position + rng.uniform(-0.5, 0.5, 3)})


@pytest.fixture(scope="module")
def talos_frames():
    from walk_mpc.core.body.frames import RobotFrames

    return RobotFrames(RobotFrames.Parameters(world_frame="odom", frame_prefix="talos1/"))


def _check_tf_message(decoded_msg, tree, stamp_ns):
    assert len(decoded_msg.transforms) == len(tree)
    for transform, parent, child, t, r in zip(decoded_msg.transforms, tree.parents, tree.children,
                                              tree.translations, tree.rotations_xyzw):
        assert (transform.header.frame_id, transform.child_frame_id) == (parent, child)
        assert transform.header.stamp.sec * 1_000_000_000 + transform.header.stamp.nanosec == stamp_ns
        v, q = transform.transform.translation, transform.transform.rotation
        assert [v.x, v.y, v.z] == t.tolist() and [q.x, q.y, q.z, q.w] == r.tolist()


def test_tf_and_robot_description_read_back_with_their_standard_schemas(tmp_path, talos_frames):
    from mcap.reader import make_reader
    from mcap_ros2.reader import read_ros2_messages

    from walk_mpc.tools.recorder import McapRecorder

    path = tmp_path / "walk.mcap"
    recorder = McapRecorder(path)
    recorder.write_description("robot_description", talos_frames.description(), stamp_ns=1)
    trees = [talos_frames.observe(_talos_sample(k)) for k in range(3)]
    for k, tree in enumerate(trees):
        recorder.write_transforms("tf", tree, stamp_ns=10_000_000 * (k + 1),
                                  sample_stamp_ns=1_500_000_007 + k)
    recorder.close()

    with open(path, "rb") as stream:
        summary = make_reader(stream).get_summary()
    schemas = {channel.topic: summary.schemas[channel.schema_id] for channel in summary.channels.values()}
    assert {c.topic: c.message_encoding for c in summary.channels.values()} == {"/tf": "cdr",
                                                                                "/robot_description": "cdr"}
    assert schemas["/tf"].name == "tf2_msgs/msg/TFMessage" and schemas["/tf"].encoding == "ros2msg"
    assert schemas["/robot_description"].name == "std_msgs/msg/String"
    assert schemas["/robot_description"].encoding == "ros2msg"
    tf_schema = schemas["/tf"].data.decode()
    assert tf_schema.startswith("geometry_msgs/TransformStamped[] transforms\n")
    for dependency in ("geometry_msgs/TransformStamped", "std_msgs/Header", "builtin_interfaces/Time",
                       "geometry_msgs/Transform", "geometry_msgs/Vector3", "geometry_msgs/Quaternion"):
        assert tf_schema.count(f"MSG: {dependency}\n") == 1, dependency

    decoded = list(read_ros2_messages(str(path)))  # an independent CDR decoder, from the schemas
    description = [m.ros_msg.data for m in decoded if m.channel.topic == "/robot_description"]
    assert description == [talos_frames.description()] and "<robot" in description[0]
    tf = [m for m in decoded if m.channel.topic == "/tf"]
    assert [m.log_time_ns for m in tf] == [10_000_000, 20_000_000, 30_000_000]
    for k, (message, tree) in enumerate(zip(tf, trees)):
        _check_tf_message(message.ros_msg, tree, 1_500_000_007 + k)
    assert tf[0].ros_msg.transforms[0].header.frame_id == "odom"
    assert tf[0].ros_msg.transforms[0].child_frame_id == "talos1/base_link"


def test_tf_message_bytes_equal_rclpy_serialization_where_tf2_msgs_is_installed(talos_frames):
    tf2_msgs = pytest.importorskip("tf2_msgs.msg")
    from geometry_msgs.msg import TransformStamped
    from rclpy.serialization import serialize_message

    from walk_mpc.nodes.robot_state import tf_message_cdr

    tree = talos_frames.observe(_talos_sample())
    msg = tf2_msgs.TFMessage()
    for edge in tree:
        transform = TransformStamped()
        transform.header.stamp.sec, transform.header.stamp.nanosec = 12, 345
        transform.header.frame_id, transform.child_frame_id = edge.parent, edge.child
        t, r = transform.transform.translation, transform.transform.rotation
        t.x, t.y, t.z = edge.translation.tolist()
        r.x, r.y, r.z, r.w = edge.rotation_xyzw.tolist()
        msg.transforms.append(transform)
    assert tf_message_cdr(tree, 12_000_000_345) == serialize_message(msg)


@pytest.mark.parametrize("tf_at_close", [True, False])
def test_recorder_node_writes_tf_of_each_sensor_sample_and_the_description(tmp_path, talos_frames,
                                                                          tf_at_close):
    import rclpy
    from mcap_ros2.reader import read_ros2_messages
    from rclpy.serialization import serialize_message

    from walk_mpc.msg import SensorState
    from walk_mpc.nodes.sim import sensor_state_msg
    from walk_mpc.tools.recorder import RecorderNode

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        path = tmp_path / "walk.mcap"
        node = RecorderNode(path, [("sensor_state", SensorState, 10)], robot_frames=talos_frames,
                            tf_at_close=tf_at_close, context=context)
        samples = [_talos_sample(k) for k in range(4)]
        for k, sample in enumerate(samples):  # as the raw subscription hands them over
            node._record_with_tf("sensor_state", "walk_mpc/msg/SensorState",
                                 serialize_message(sensor_state_msg(sample, 2_000_000_000 + 10_000_000 * k)))
        nan_msg = sensor_state_msg(samples[0], 3_000_000_000)
        nan_msg.joint_pos[0] = float("nan")
        node._record_with_tf("sensor_state", "walk_mpc/msg/SensorState", serialize_message(nan_msg))
        assert node.tf_rejected == (0 if tf_at_close else 1)  # kept for the close, or refused at once
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    assert node.tf_rejected == 1  # the NaN sample: recorded as it is, without transforms
    decoded = list(read_ros2_messages(str(path)))
    topics = [m.channel.topic for m in decoded]
    assert topics.count("/sensor_state") == 5 and topics.count("/tf") == 4
    assert topics.count("/robot_description") == 1 and topics[0] == "/robot_description"
    tf = [m.ros_msg for m in decoded if m.channel.topic == "/tf"]
    for k, (message, sample) in enumerate(zip(tf, samples)):
        _check_tf_message(message, talos_frames.transforms(talos_frames.configuration(sample)),
                          2_000_000_000 + 10_000_000 * k)


def test_graph_robot_frames_are_those_the_robot_state_node_of_the_graph_publishes():
    from walk_mpc.tools.recorder import graph_robot_frames

    talos = graph_robot_frames("talos")
    assert (talos.params.world_frame, talos.base_frame) == ("world", "base_link")
    namespaced = graph_robot_frames("talos", namespace="/robot1")
    assert (namespaced.params.world_frame, namespaced.base_frame) == ("robot1/world", "robot1/base_link")
