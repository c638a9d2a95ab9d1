"""The node graph description (config/graph.yaml) and its selection rules."""

from pathlib import Path

import pytest

from walk_mpc.core.errors import ConfigError
from walk_mpc.graph import load_graph

CONFIG = Path(__file__).resolve().parents[1] / "config"


def test_talos_with_kinematic_sim_runs_the_walking_nodes_and_sim():
    graph = load_graph(CONFIG / "graph.yaml")
    names = [n.name for n in graph.select("talos", "kinematic")]
    assert names == ["walk_behavior", "mpc_planner", "ik", "sim", "robot_state"]


def test_real_robot_runs_no_sim_and_upkie_runs_wheel_contact():
    graph = load_graph(CONFIG / "graph.yaml")
    assert "sim" not in [n.name for n in graph.select("talos", "none")]
    assert [n.name for n in graph.select("upkie", "mujoco")] == ["wheel_contact", "sim"]


def test_every_robot_config_file_exists_and_has_a_section_per_selected_node():
    from walk_mpc.core.params import load_yaml

    graph = load_graph(CONFIG / "graph.yaml")
    for robot in graph.robots:
        document = load_yaml(graph.config_path(robot.name))
        for node in graph.select(robot.name, "kinematic"):
            if node.name in document:
                assert "ros__parameters" in document[node.name]


def test_unknown_robot_and_sim_are_refused_with_the_valid_names():
    graph = load_graph(CONFIG / "graph.yaml")
    with pytest.raises(ConfigError, match="known robots: .*talos"):
        graph.select("atlas", "kinematic")
    with pytest.raises(ConfigError, match="kinematic"):
        graph.select("talos", "gazebo")


def test_malformed_graph_file_is_refused(tmp_path):
    bad = tmp_path / "graph.yaml"
    bad.write_text("nodes:\n  - name: ik\n    when: sometimes\n")
    with pytest.raises(ConfigError, match="unknown condition 'sometimes'"):
        load_graph(bad)
    bad.write_text("nodes: []\nextras: 1\n")
    with pytest.raises(ConfigError, match="unknown keys"):
        load_graph(bad)


# ------------------------------------------------------------------------------------ robots, namespaces


def test_a_robot_with_a_model_gets_its_description_values_on_top_of_the_parameters_file():
    from walk_mpc.core.body.robot import RobotModel

    graph = load_graph(CONFIG / "graph.yaml")
    assert graph.overrides("talos") == {}  # the parameters file is Talos's
    g1 = graph.overrides("g1")
    for node, key in (("ik", "robot.robot"), ("mpc_planner", "robot.robot"), ("walk_behavior", "robot.robot"),
                      ("sim", "kinematic.robot.robot"), ("robot_state", "frames.robot.robot")):
        assert g1[node][key] == "g1"
    robot = RobotModel(RobotModel.Parameters(robot="g1"))
    sole = robot.planner_sole()
    assert g1["mpc_planner"]["planner.sole.front"] == sole.front
    assert g1["mpc_planner"]["planner.mpc.com_height"] == pytest.approx(robot.standing_com_height(), abs=1e-4)
    assert g1["sim"]["kinematic.sole_left"] == robot.sole_size.left
    assert g1["ik"]["stabilizer.sole_front"] == robot.sole_size.front != 0.1  # not Talos' (the file's)
    assert g1["walk_behavior"]["initial_left_position"][1] == pytest.approx(0.1, abs=1e-3)
    assert g1["walk_behavior"]["behavior.limits.max_forward"] == robot.step_limits().max_forward


def test_a_namespace_prefixes_the_frames_and_the_parameters_file_sections(tmp_path):
    from walk_mpc.core.params import load_yaml
    from walk_mpc.graph import namespace_frames, namespaced_parameters_file

    assert namespace_frames("") == {}
    frames = namespace_frames("/robot1/")
    assert frames["sim"]["frame_id"] == frames["mpc_planner"]["frame_id"] == "robot1/world"
    assert frames["robot_state"] == {"frames.world_frame": "robot1/world", "frames.frame_prefix": "robot1/"}
    source = CONFIG / "walk_mpc.yaml"
    assert namespaced_parameters_file(source, "") == source
    copy = namespaced_parameters_file(source, "robot1", tmp_path)
    original, rewritten = load_yaml(source), load_yaml(copy)
    assert set(rewritten) == {f"/robot1/{name}" for name in original}
    assert rewritten["/robot1/ik"] == original["ik"]


@pytest.mark.parametrize("namespace", ["1robot", "robot-1", "a//b", 3])
def test_an_invalid_namespace_is_refused_naming_it(namespace):
    from walk_mpc.graph import check_namespace

    with pytest.raises(ConfigError, match="namespace"):
        check_namespace(namespace)


def test_graph_processes_put_each_node_in_the_namespace_with_the_robot_values(tmp_path):
    from walk_mpc.tools.launch_graph import GraphProcesses

    graph = GraphProcesses("g1", "mujoco", log_dir=tmp_path, namespace="robot1")
    command = graph.command("mpc_planner")
    assert command[command.index("--params-file") + 1] == str(graph.params_file)
    assert graph.params_file.parent == tmp_path
    assert "__ns:=/robot1" in command
    assert 'robot.robot:="g1"' in command
    assert 'frame_id:="robot1/world"' in command
    assert "backend:=mujoco" in graph.command("sim")


def test_graph_processes_with_a_control_process_run_every_node_but_the_sim_in_one_bringup(tmp_path):
    from walk_mpc.tools.launch_graph import CONTROL, GraphProcesses

    graph = GraphProcesses("g1", "kinematic", log_dir=tmp_path, namespace="robot1", control_process=True)
    assert graph.groups == {CONTROL: ("walk_behavior", "mpc_planner", "ik", "robot_state"), "sim": ("sim",)}
    command = graph.command(CONTROL)
    assert command[2:4] == ["-m", "walk_mpc.nodes.bringup"]
    assert command[command.index("--robot") + 1] == "g1"
    assert command[command.index("--sim") + 1] == "kinematic"
    assert command[command.index("--namespace") + 1] == "robot1"
    assert command[command.index("--nodes") + 1:][:4] == ["walk_behavior", "mpc_planner", "ik", "robot_state"]
    assert graph.command("sim")[2:5] == ["-m", "walk_mpc.nodes.start", "sim"]
    with pytest.raises(ValueError, match="control process"):
        GraphProcesses("talos", "kinematic", extra_args={"ik": ["-p", "x:=1"]}, control_process=True)


def test_stopping_a_node_process_escalates_as_ros2_launch_does():
    """SIGINT, then SIGTERM after half the timeout (a node that lost its SIGINT: seen once in ~40 starts),
    then, before SIGKILL, the stacks signal: a node process (``enable_fault_reports``) writes every thread's
    stack to its log and is killed."""
    import signal
    import subprocess
    import sys

    from walk_mpc.tools.launch_graph import GraphProcesses

    for code, ignored in ((-signal.SIGTERM, "SIGINT"), (-signal.SIGKILL, "SIGINT, signal.SIGTERM")):
        script = ("import signal, time\nfrom walk_mpc.nodes._common import enable_fault_reports\n"
                  f"enable_fault_reports()\nfor s in (signal.{ignored},):\n"
                  "    signal.signal(s, signal.SIG_IGN)\nprint('up', flush=True)\ntime.sleep(60)")
        proc = subprocess.Popen([sys.executable, "-P", "-c", script], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout.readline() == b"up\n"
        proc.send_signal(signal.SIGINT)
        assert GraphProcesses._wait("ignorer", proc, 1.0) == code
        stacks = proc.stderr.read().decode()
        if code == -signal.SIGKILL:  # where it hung: the sleep of the script's main thread
            assert "most recent call first" in stacks and 'File "<string>", line 7' in stacks, stacks
        else:
            assert "most recent call first" not in stacks, stacks
        proc.stdout.close()
        proc.stderr.close()
