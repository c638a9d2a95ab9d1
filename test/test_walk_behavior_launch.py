"""launch_pytest twin of test_walk_behavior_node: the node started by launch_ros, one Walk round trip.

Written to the standard launch_pytest API for ROS 2 installs that have launch; skipped where
``launch_pytest`` is not installed (the PyPI wheels carry no launch packages).
"""

from __future__ import annotations

import threading
import time

import pytest

launch_pytest = pytest.importorskip("launch_pytest")
launch = pytest.importorskip("launch")
launch_ros = pytest.importorskip("launch_ros")

from launch_pytest.tools import process as process_tools  # noqa: E402

from walk_mpc.core.walk.step import Foot, Step  # noqa: E402

pytestmark = pytest.mark.ros

NS = 1_000_000_000


@pytest.fixture
def walk_behavior_node():
    return launch_ros.actions.Node(
        package="walk_mpc", executable="walk_behavior", name="walk_behavior", output="screen",
        parameters=[{"measure_feet": False, "sensor_timeout": 0.5,
                     "landings.enabled": False}], cached_output=True)


@launch_pytest.fixture
def launch_description(walk_behavior_node):
    return launch.LaunchDescription([walk_behavior_node, launch_pytest.actions.ReadyToTest()])


@pytest.mark.launch(fixture=launch_description)
def test_two_step_walk_round_trip_succeeds(walk_behavior_node, launch_context):
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from walk_mpc.core.walk.behavior import WalkErrorCode
    from walk_mpc.msg import SensorState
    from walk_mpc.tools.send_walk import send_walk

    assert process_tools.wait_for_output_sync(
        launch_context, walk_behavior_node, lambda output: "walk action 'walk'" in output, timeout=30)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("walk_behavior_launch_test", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    publisher = node.create_publisher(SensorState, "sensor_state", 10)
    stop = threading.Event()

    def stream() -> None:  # stamps 10 ms apart, about 3x faster than real time
        sample, k = SensorState(), 0
        while not stop.is_set():
            sample.header.stamp.sec, sample.header.stamp.nanosec = divmod(1000 * NS + k * 10_000_000, NS)
            publisher.publish(sample)
            k += 1
            time.sleep(0.003)

    streamer = threading.Thread(target=stream, daemon=True)
    try:
        spinner.start()
        streamer.start()
        steps = [Step(1, Foot.LEFT, 0.8, (0.1, 0.085, 0.0)), Step(2, Foot.RIGHT, 0.8, (0.1, -0.085, 0.0))]
        feedback = []
        deadline = time.monotonic() + 30.0
        while True:  # until the node has seen the stream (a goal before it ends SENSOR_TIMEOUT at once)
            outcome = send_walk(node, steps, True, feedback.append, result_timeout=30.0)
            if outcome.error_code != WalkErrorCode.SENSOR_TIMEOUT or time.monotonic() > deadline:
                break
        assert outcome.succeeded, outcome
        assert outcome.last_completed_step_index == 2
        assert feedback and feedback[-1].walk.current_step_index == 2
    finally:
        stop.set()
        streamer.join(timeout=5.0)
        executor.shutdown(timeout_sec=2.0)
        spinner.join(timeout=5.0)  # nothing is destroyed while a thread spins it (issue 21)
        if not spinner.is_alive():
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    yield
    assert walk_behavior_node.return_code == 0  # after the launch service stopped it (SIGINT)
