"""launch_pytest twins of test_graph_walk: the same scenarios with the graph started by launch/walk.launch.py.

Written to the standard launch_pytest API for ROS 2 installs that have launch; skipped where
``launch_pytest`` is not installed (the PyPI wheels carry no launch packages). One launch (module scope)
serves every test, in the order of this file, like the module-scoped graph of test_graph_walk. Node
processes are tracked through their launch events (OnProcessStart / OnProcessExit); a node is restarted
by including a launch_ros Node with the same executable, name and parameters file into the running
launch service.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Dict, Optional

import pytest

launch_pytest = pytest.importorskip("launch_pytest")
launch = pytest.importorskip("launch")
launch_ros = pytest.importorskip("launch_ros")
pytest.importorskip("rclpy")

from ament_index_python.packages import get_package_share_directory  # noqa: E402
from graph_fixtures import (  # noqa: E402
    ROBOT,
    SIM,
    GraphClient,
    SoleMeter,
    check_landings,
    check_walk_succeeded,
    check_zmp_in_support,
    params_file,
    scenario_cancel,
    scenario_ik_restart,
    scenario_insufficient_steps,
    scenario_preemption,
    scenario_sensor_timeout,
    ten_step_walk,
)
from launch.actions import IncludeLaunchDescription, RegisterEventHandler  # noqa: E402
from launch.event_handlers import OnProcessExit, OnProcessStart  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402

from walk_mpc.graph import load_graph  # noqa: E402

pytestmark = pytest.mark.ros

def graph_node(name: str):
    """launch_ros Node of graph node ``name``, as launch/walk.launch.py makes it."""
    spec = next(s for s in load_graph().select(ROBOT, SIM) if s.name == name)
    parameters = [str(params_file())] + ([{"backend": SIM}] if spec.name == "sim" else [])
    return launch_ros.actions.Node(package="walk_mpc", executable=spec.executable, name=spec.name,
                                   output="screen", parameters=parameters)


class LaunchControl:
    """Stop / start graph nodes of a running launch service (the GraphControl of graph_fixtures)."""

    def __init__(self) -> None:
        self.service = None  # the launch_service fixture, set by the tests
        self._cv = threading.Condition()
        self._pids: Dict[str, int] = {}  # node name -> pid of its latest process
        self._exits: Dict[int, int] = {}  # pid -> exit code

    def event_handlers(self) -> list:
        """Actions registering the process event handlers (put them before the nodes)."""
        return [RegisterEventHandler(OnProcessStart(on_start=self._on_start)),
                RegisterEventHandler(OnProcessExit(on_exit=self._on_exit))]

    @staticmethod
    def _node_name(action) -> Optional[str]:
        try:
            return str(action.node_name).rsplit("/", 1)[-1]
        except (AttributeError, RuntimeError):  # not a launch_ros Node, or not executed yet
            return None

    def _on_start(self, event, context) -> None:
        name = self._node_name(event.action)
        if name is not None:
            with self._cv:
                self._pids[name] = event.pid
                self._cv.notify_all()

    def _on_exit(self, event, context) -> None:
        with self._cv:
            self._exits[event.pid] = event.returncode
            self._cv.notify_all()

    def _wait(self, predicate, what: str, timeout: float = 30.0) -> None:
        with self._cv:
            if not self._cv.wait_for(predicate, timeout):
                raise AssertionError(f"timeout waiting for {what}\n{self.diagnose()}")

    def stop(self, name: str, sig: int = signal.SIGINT) -> Optional[int]:
        with self._cv:
            pid = self._pids[name]
        os.kill(pid, sig)
        self._wait(lambda: pid in self._exits, f"node {name} (pid {pid}) to exit")
        return self._exits[pid]

    def start(self, name: str) -> None:
        with self._cv:
            old = self._pids.get(name)
        self.service.include_launch_description(launch.LaunchDescription([graph_node(name)]))
        self._wait(lambda: self._pids.get(name) not in (None, old), f"node {name} to start")

    def stop_all(self, timeout: float = 20.0) -> Dict[str, int]:
        with self._cv:
            running = {n: p for n, p in self._pids.items() if p not in self._exits}
        for pid in running.values():
            os.kill(pid, signal.SIGINT)
        self._wait(lambda: all(p in self._exits for p in running.values()), "every node to exit", timeout)
        return {name: self._exits[pid] for name, pid in running.items()}

    def exited(self) -> Dict[str, int]:
        with self._cv:
            return {n: self._exits[p] for n, p in self._pids.items() if p in self._exits}

    def diagnose(self) -> str:
        return f"node pids {self._pids}, exited {self.exited()} (node output is on the launch's screen)"


CONTROL = LaunchControl()
_REFERENCE_WALK: Dict[str, object] = {}


@launch_pytest.fixture(scope="module")
def launch_description():
    walk_launch = Path(get_package_share_directory("walk_mpc")) / "launch" / "walk.launch.py"
    return launch.LaunchDescription([
        *CONTROL.event_handlers(),
        IncludeLaunchDescription(PythonLaunchDescriptionSource(str(walk_launch)),
                                 launch_arguments={"robot": ROBOT, "sim": SIM}.items()),
        launch_pytest.actions.ReadyToTest(),
    ])


@pytest.fixture(scope="module")
def client():
    graph_client = GraphClient(CONTROL)
    yield graph_client
    graph_client.close()


@pytest.fixture(scope="module")
def meter():
    return SoleMeter()


@pytest.fixture
def graph(client, launch_service):
    """The client, once every node of the launched graph publishes."""
    CONTROL.service = launch_service
    client.wait_ready()
    return client


def reference_walk(client):
    """The 10-step walk, walked once for the three tests that check it."""
    if "record" not in _REFERENCE_WALK:
        _REFERENCE_WALK["record"] = ten_step_walk(client)
    return _REFERENCE_WALK["record"]


@pytest.mark.launch(fixture=launch_description)
def test_ten_step_walk_succeeds_with_every_step_completed(graph):
    check_walk_succeeded(reference_walk(graph))


@pytest.mark.launch(fixture=launch_description)
def test_every_foot_lands_within_1mm_of_its_saturated_step(graph, meter):
    check_landings(reference_walk(graph), meter, tolerance=1e-3)


@pytest.mark.launch(fixture=launch_description)
def test_zmp_of_the_contact_forces_stays_in_the_support_polygon(graph, meter):
    check_zmp_in_support(reference_walk(graph), meter)


@pytest.mark.launch(fixture=launch_description)
def test_cancel_mid_walk_ends_standing_on_both_feet(graph, meter):
    scenario_cancel(graph, meter)


@pytest.mark.launch(fixture=launch_description)
def test_open_goal_running_out_catches_then_stands_with_insufficient_step_data(graph):
    scenario_insufficient_steps(graph)


@pytest.mark.launch(fixture=launch_description)
def test_second_goal_preempts_the_first_and_the_walk_continues_to_its_end(graph):
    scenario_preemption(graph)


@pytest.mark.launch(fixture=launch_description)
def test_killed_ik_restarted_while_standing_resumes_commands_and_walks(graph):
    scenario_ik_restart(graph, CONTROL)


@pytest.mark.launch(fixture=launch_description)
def test_sensor_stream_stopping_mid_walk_ends_it_with_sensor_timeout(graph):
    scenario_sensor_timeout(graph, CONTROL)


@pytest.mark.launch(fixture=launch_description)
def test_every_node_exits_cleanly_on_sigint(graph):
    codes = CONTROL.stop_all()
    expected = {"walk_behavior": 0, "mpc_planner": 0, "ik": 0, "sim": 0, "robot_state": 0}
    assert codes == expected, CONTROL.diagnose()
