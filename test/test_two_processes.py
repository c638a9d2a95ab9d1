"""Two real node processes in the session's isolated DDS domain exchange a SensorState."""

import json
import os

import pytest

pytestmark = pytest.mark.ros


def test_sensor_state_passes_between_two_node_processes(start_node):
    probe = start_node("walk_mpc.tools.topic_probe", "sensor_state", "walk_mpc/msg/SensorState",
                       "--count", "3", "--timeout", "60")
    replay = start_node("walk_mpc.tools.sensor_replay", "--joint", "knee=0.5", "--joint", "hip=-0.25",
                        "--count", "0", "--period", "0.01", "--wait-subscribers", "1", "--pace", "0.005")
    # The replay publishes until stopped, so the probe gets its messages however long discovery takes.
    assert probe.proc.wait(timeout=90) == 0, probe.output()
    assert replay.stop() == 0, replay.output()
    lines = [json.loads(line) for line in probe.output().splitlines() if line.startswith("{")]
    assert len(lines) == 3
    first = lines[0]
    assert first["joint_names"] == ["knee", "hip"]
    assert first["joint_pos"] == [0.5, -0.25]
    stamps = [m["header"]["stamp"]["sec"] + m["header"]["stamp"]["nanosec"] * 1e-9 for m in lines]
    assert all(b > a for a, b in zip(stamps, stamps[1:]))


def test_session_uses_an_isolated_localhost_domain():
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert 1 <= int(os.environ["ROS_DOMAIN_ID"]) <= 101
