"""The demo shows the robot: walk.mcap holds /robot_description and /tf with their standard schemas (and the
markers around the robot), and --video writes walk.mp4 of the walk."""

from __future__ import annotations

import collections
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_demo_records_the_robot_model_and_renders_the_walk(tmp_path):
    pytest.importorskip("mujoco")
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    from mcap.reader import make_reader
    from mcap_ros2.reader import read_ros2_messages

    out = tmp_path / "out"
    # The kinematic plant (the video is optional there, --video asks for it): the physics walk through the
    # graph needs a machine that keeps real time. The timeout only guards against a hang.
    run = subprocess.run([sys.executable, "-P", "-m", "walk_mpc.demo", "--steps", "2", "--video",
                          "--out-dir", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "Video failed" not in output, output

    with open(out / "walk.mcap", "rb") as stream:
        summary = make_reader(stream).get_summary()
    schemas = {channel.topic: summary.schemas[channel.schema_id] for channel in summary.channels.values()}
    assert (schemas["/tf"].name, schemas["/tf"].encoding) == ("tf2_msgs/msg/TFMessage", "ros2msg")
    assert (schemas["/robot_description"].name, schemas["/robot_description"].encoding) == (
        "std_msgs/msg/String", "ros2msg")
    assert {"/mpc/markers", "/mpc/com_path", "/mpc/zmp_path"} <= set(schemas)
    counts = collections.Counter()
    for message in read_ros2_messages(str(out / "walk.mcap"), topics=["/tf", "/robot_description",
                                                                       "/sensor_state"]):
        counts[message.channel.topic] += 1
        if message.channel.topic == "/tf" and counts["/tf"] == 1:
            first = message.ros_msg.transforms[0]
            assert (first.header.frame_id, first.child_frame_id) == ("world", "base_link")
    assert counts["/robot_description"] == 1
    assert counts["/tf"] == counts["/sensor_state"] > 100  # the transforms of every sample

    frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(out / "walk.mp4"))
    # 2 steps of 1.1 s with sway and catch (0.6 s each), from 1 s before Walk to the end of the recording
    assert frames > 0 and seconds > 3.0, (frames, seconds)
    assert f"Video: {out / 'walk.mp4'} ({frames} frames" in run.stdout
