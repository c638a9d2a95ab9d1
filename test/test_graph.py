"""The node graph description (config/graph.yaml) and its selection rules."""

from pathlib import Path

import pytest

from walk_mpc.core.errors import ConfigError
from walk_mpc.graph import load_graph

CONFIG = Path(__file__).resolve().parents[1] / "config"


def test_talos_with_kinematic_sim_runs_the_walking_nodes_and_sim():
    graph = load_graph(CONFIG / "graph.yaml")
    names = [n.name for n in graph.select("talos", "kinematic")]
    assert names == ["walk_behavior", "mpc_planner", "ik", "sim"]


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
