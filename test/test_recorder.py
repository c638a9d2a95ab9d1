"""MCAP recording with ROS 2 serialization reads back with an independent ROS 2 MCAP decoder."""

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
    assert decoded[0].schema.name == "walk_mpc/WalkFeedback"
    assert "MSG: walk_mpc/StepData" in decoded[0].schema.data.decode()
    assert "MSG: geometry_msgs/Point" in decoded[0].schema.data.decode()


def test_schema_of_a_message_with_nested_arrays_lists_each_dependency_once():
    from walk_mpc.tools.recorder import msgdef_text

    text = msgdef_text("walk_mpc/msg/SensorState")
    assert text.count("MSG: geometry_msgs/Vector3") == 1
    assert "MSG: std_msgs/Header" in text and "MSG: builtin_interfaces/Time" in text
