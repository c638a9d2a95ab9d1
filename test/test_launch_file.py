"""launch/walk.launch.py without a ROS 2 install: its processes are those of GraphProcesses.

The launch packages are not installable from PyPI, so the launch file runs here against minimal stand-ins
of the four launch classes it uses (``LaunchDescription``, ``DeclareLaunchArgument``, ``OpaqueFunction``,
``LaunchConfiguration``, launch_ros' ``Node``), which record what the file asks for. The test then
compares the recorded processes with :class:`~walk_mpc.tools.launch_graph.GraphProcesses` (whose graphs
walk in test_graph_walk and test_multi_robot): same executables, arguments, names and namespaces. On a
ROS 2 install, test_graph_launch.py runs the real launch file.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from walk_mpc.graph import CONTROL
from walk_mpc.tools.launch_graph import GraphProcesses

LAUNCH_FILE = Path(__file__).resolve().parents[1] / "launch" / "walk.launch.py"


class _Recorded:
    def __init__(self, *args, **kwargs) -> None:
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration:
    def __init__(self, name: str) -> None:
        self.name = name

    def perform(self, context: dict) -> str:
        return context[self.name]


@pytest.fixture
def launch_file(monkeypatch):
    """The launch file's module, loaded against the stand-ins."""
    launch = types.ModuleType("launch")
    launch.LaunchDescription = lambda entities: list(entities)
    actions = types.ModuleType("launch.actions")
    actions.DeclareLaunchArgument = type("DeclareLaunchArgument", (_Recorded,), {})
    actions.OpaqueFunction = type("OpaqueFunction", (_Recorded,), {})
    actions.SetEnvironmentVariable = type("SetEnvironmentVariable", (_Recorded,), {})
    substitutions = types.ModuleType("launch.substitutions")
    substitutions.LaunchConfiguration = _LaunchConfiguration
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_actions.Node = type("Node", (_Recorded,), {})
    for name, module in (("launch", launch), ("launch.actions", actions),
                         ("launch.substitutions", substitutions), ("launch_ros", launch_ros),
                         ("launch_ros.actions", ros_actions)):
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("walk_launch_under_test", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launch(module, **arguments) -> list:
    """The launch file's Node actions for ``arguments`` (the declared defaults for the rest)."""
    return [a for a in _actions(module, **arguments) if type(a).__name__ == "Node"]


def _actions(module, **arguments) -> list:
    """Every action of the launch file's OpaqueFunction for ``arguments``."""
    entities = module.generate_launch_description()
    context = {e.args[0]: e.kwargs["default_value"] for e in entities
               if type(e).__name__ == "DeclareLaunchArgument"}
    unknown = set(arguments) - set(context)
    assert not unknown, f"not declared by the launch file: {unknown}"
    context.update(arguments)
    (opaque,) = [e for e in entities if type(e).__name__ == "OpaqueFunction"]
    return opaque.kwargs["function"](context)


def test_launch_file_sets_the_nodes_environment_as_graph_processes_does(launch_file, monkeypatch):
    """walk_mpc's Fast DDS profile (walk_mpc.graph.dds_environment) for the nodes, before them; nothing when
    the user opts out."""
    from walk_mpc.graph import FASTDDS_PROFILE_ENV

    monkeypatch.delenv("FASTDDS_DEFAULT_PROFILES_FILE", raising=False)
    monkeypatch.delenv("FASTRTPS_DEFAULT_PROFILES_FILE", raising=False)
    monkeypatch.delenv("RMW_IMPLEMENTATION", raising=False)
    monkeypatch.delenv(FASTDDS_PROFILE_ENV, raising=False)
    actions = _actions(launch_file)
    names = [type(a).__name__ for a in actions]
    assert names.index("SetEnvironmentVariable") < names.index("Node")
    (variable,) = [a for a in actions if type(a).__name__ == "SetEnvironmentVariable"]
    graph = GraphProcesses("talos", "kinematic")
    assert variable.args[0] == "FASTDDS_DEFAULT_PROFILES_FILE"
    assert graph.environment[variable.args[0]] == variable.args[1]
    monkeypatch.setenv(FASTDDS_PROFILE_ENV, "0")
    assert "SetEnvironmentVariable" not in [type(a).__name__ for a in _actions(launch_file)]


def test_launch_file_declares_control_process_off_by_default(launch_file):
    entities = launch_file.generate_launch_description()
    defaults = {e.args[0]: e.kwargs["default_value"] for e in entities
                if type(e).__name__ == "DeclareLaunchArgument"}
    assert defaults["control_process"] == "false"


@pytest.mark.parametrize("robot, sim, namespace", [("talos", "kinematic", ""), ("g1", "mujoco", "robot1")])
def test_launch_file_starts_one_process_per_node_like_graph_processes(launch_file, robot, sim, namespace):
    nodes = _launch(launch_file, robot=robot, sim=sim, namespace=namespace)
    graph = GraphProcesses(robot, sim, namespace=namespace)
    assert [n.kwargs["name"] for n in nodes] == list(graph.groups)
    for node in nodes:
        command = graph.command(node.kwargs["name"])
        # the installed executable and launch_graph both run walk_mpc.nodes.start for the node
        assert command[3:5] == ["walk_mpc.nodes.start", node.kwargs["executable"]]
        assert node.kwargs["namespace"] == (namespace or None)
        values = node.kwargs["parameters"][1] if len(node.kwargs["parameters"]) > 1 else {}
        for key in values:  # the same per-node values as GraphProcesses' -p arguments
            assert any(arg.startswith(f"{key}:=") for arg in command), (node.kwargs["name"], key)


@pytest.mark.parametrize("namespace", ["", "robot2"])
def test_launch_file_control_process_runs_the_control_nodes_in_one_bringup_beside_the_sim(launch_file,
                                                                                         namespace):
    nodes = _launch(launch_file, robot="g1", sim="kinematic", namespace=namespace, control_process="true")
    graph = GraphProcesses("g1", "kinematic", namespace=namespace, control_process=True)
    control, sim = nodes
    assert control.kwargs["executable"] == "bringup"
    assert "name" not in control.kwargs and "namespace" not in control.kwargs  # the bringup does both
    # the bringup's arguments are GraphProcesses' control process command after its module
    assert control.kwargs["arguments"] == graph.command(CONTROL)[4:]
    assert control.kwargs["arguments"][control.kwargs["arguments"].index("--nodes") + 1:][:4] == [
        "walk_behavior", "mpc_planner", "ik", "robot_state"]
    assert sim.kwargs["name"] == "sim" and sim.kwargs["parameters"][1]["backend"] == "kinematic"


def test_launch_file_phase_offset_reaches_the_sim_like_graph_processes(launch_file):
    nodes = _launch(launch_file, robot="talos", sim="kinematic", namespace="robot3", control_process="true",
                    phase_offset="0.0075")
    (sim,) = [n for n in nodes if n.kwargs.get("name") == "sim"]
    assert sim.kwargs["parameters"][1]["phase_offset"] == 0.0075
    command = GraphProcesses("talos", "kinematic", namespace="robot3", control_process=True,
                             phase_offset=0.0075).command("sim")
    assert "phase_offset:=0.0075" in command
    (default,) = [n for n in _launch(launch_file) if n.kwargs.get("name") == "sim"]
    assert "phase_offset" not in default.kwargs["parameters"][1]  # '': the params file's


def test_the_bringup_accepts_the_launch_file_control_arguments(launch_file):
    """The arguments parse as the bringup's (an unknown option would end the process at start)."""
    from walk_mpc.nodes import bringup

    (control, _) = _launch(launch_file, robot="talos", sim="kinematic", namespace="robot3",
                           control_process="true")
    options = bringup.parse_arguments(control.kwargs["arguments"])
    assert (options.robot, options.sim, options.namespace) == ("talos", "kinematic", "robot3")
    assert options.nodes == ["walk_behavior", "mpc_planner", "ik", "robot_state"]


def test_the_fast_dds_profile_applies_only_to_fast_dds_without_a_profile_of_the_user_s(tmp_path):
    """walk_mpc.graph.dds_environment: the profile for rmw_fastrtps (the default RMW) unless the user has a
    Fast DDS profile file or opts out; another RMW gets nothing. The profile widens the initial peers range
    (a restarted node announces itself to every participant of the host at once) and keeps the default
    transports."""
    import xml.etree.ElementTree as ElementTree

    from walk_mpc.graph import FASTDDS_PROFILE_ENV, dds_environment

    (profile,) = dds_environment({}).values()
    for rmw in ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp"):
        env = {"RMW_IMPLEMENTATION": rmw}
        assert dds_environment(env) == {"FASTDDS_DEFAULT_PROFILES_FILE": profile}
    for env in ({"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}, {"RMW_IMPLEMENTATION": "rmw_zenoh_cpp"},
                {"FASTDDS_DEFAULT_PROFILES_FILE": str(tmp_path / "mine.xml")},
                {"FASTRTPS_DEFAULT_PROFILES_FILE": str(tmp_path / "mine.xml")},
                {FASTDDS_PROFILE_ENV: "0"}, {FASTDDS_PROFILE_ENV: "off"}):
        assert dds_environment(env) == {}, env
    ns = {"d": "http://www.eprosima.com"}
    root = ElementTree.parse(profile).getroot()
    assert int(root.find(".//d:maxInitialPeersRange", ns).text) >= 16
    kinds = [t.text for t in root.findall(".//d:transport_descriptor/d:type", ns)]
    assert kinds == ["SHM", "UDPv4"]
    (participant,) = root.findall(".//d:participant", ns)
    assert participant.get("is_default_profile") == "true"


def test_first_log_after_reads_the_node_log_stamps(tmp_path):
    import math

    processes = GraphProcesses("talos", "kinematic", log_dir=tmp_path)
    (tmp_path / "ik.log").write_text("[INFO] [100.500000000] [ik]: before\nnot a log line\n"
                                     "[WARN] [102.250000000] [ik]: after\n")
    assert processes.first_log_after("ik", 101.0) == pytest.approx(1.25)
    assert math.isnan(processes.first_log_after("ik", 103.0))
    assert processes.first_log_after("ik", 100.0, "after") == pytest.approx(2.25)  # the first containing it
    assert math.isnan(processes.first_log_after("ik", 100.0, "neither"))
    assert math.isnan(processes.first_log_after("sim", 0.0))  # no log
    assert math.isnan(GraphProcesses("talos", "kinematic").first_log_after("ik", 0.0))  # no log directory


def test_launch_file_balance_overlays_the_robots_balance_setting_like_graph_processes(launch_file):
    """``balance:=true``: every node's parameters file is the robot's with its balance setting over it (the
    file GraphProcesses gives with ``balance``); the control process' bringup gets ``--balance``."""
    from walk_mpc.core.params import load_yaml
    from walk_mpc.nodes import bringup

    declared = {e.args[0]: e.kwargs["default_value"] for e in launch_file.generate_launch_description()
                if type(e).__name__ == "DeclareLaunchArgument"}
    assert declared["balance"] == "false"
    plain = _launch(launch_file, robot="talos", sim="mujoco")
    nodes = _launch(launch_file, robot="talos", sim="mujoco", balance="true")
    graph = GraphProcesses("talos", "mujoco", balance=True)
    expected = load_yaml(graph.params_file)
    assert expected["ik"]["ros__parameters"]["stabilizer"]["enabled"] is True
    for node, before in zip(nodes, plain):
        assert load_yaml(node.kwargs["parameters"][0]) == expected
        assert node.kwargs["parameters"][1:] == before.kwargs["parameters"][1:]  # the robot's values
    (control, _) = _launch(launch_file, robot="talos", sim="mujoco", control_process="true",
                           balance="true")
    assert control.kwargs["arguments"] == GraphProcesses("talos", "mujoco", control_process=True,
                                                         balance=True).command(CONTROL)[4:]
    assert bringup.parse_arguments(control.kwargs["arguments"]).balance
