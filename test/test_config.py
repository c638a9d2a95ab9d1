"""Every parameters-file section is valid for its node; nodes declare exactly their dataclass fields."""

import importlib
from pathlib import Path

import pytest

from walk_mpc.core.params import flatten, from_mapping, load_yaml, to_mapping
from walk_mpc.graph import load_graph, overlay_parameters

#: Declared by every node besides its parameters dataclass (walk_mpc.nodes._common.REALTIME_PRIORITY).
REALTIME_PRIORITY = "realtime_priority"

pytestmark = pytest.mark.ros

CONFIG = Path(__file__).resolve().parents[1] / "config"


def _parameters_class(node_name):
    module = importlib.import_module(f"walk_mpc.nodes.{node_name}")
    classes = [v for k, v in vars(module).items() if k.endswith("NodeParameters") and isinstance(v, type)]
    assert len(classes) == 1, f"walk_mpc.nodes.{node_name} should define one *NodeParameters dataclass"
    return classes[0]


def _sections():
    """Every node section of every robot's parameters file, and of it with the robot's balance setting over
    it (config/graph.yaml ``balance``)."""
    graph = load_graph(CONFIG / "graph.yaml")
    for robot in graph.robots:
        path = graph.config_path(robot.name)
        documents = [(path, load_yaml(path))]
        if robot.balance:  # the file the graph's nodes read with balance (without writing it here)
            overlay = graph.balance_path(robot.name)
            documents.append((overlay, overlay_parameters(path, overlay, graph)))
        for source, document in documents:
            for node in graph.select(robot.name, "kinematic"):
                yield pytest.param(source, document, node.name, id=f"{source.name}:{node.name}")


@pytest.mark.parametrize(("path", "document", "node_name"), list(_sections()))
def test_config_section_builds_the_node_parameters(path, document, node_name):
    assert node_name in document, f"{path.name} has no section for node '{node_name}'"
    cls = _parameters_class(node_name)
    section = dict(document[node_name]["ros__parameters"])
    priority = section.pop(REALTIME_PRIORITY, 0)  # declared by every node besides its dataclass
    assert isinstance(priority, int) and 0 <= priority <= 99, priority
    from_mapping(cls, section, source=str(path))  # raises on unknown keys or invalid values


@pytest.mark.parametrize(("path", "document", "node_name"), list(_sections()))
def test_config_section_keys_are_declared_parameters(path, document, node_name):
    cls = _parameters_class(node_name)
    declared = set(flatten(to_mapping(cls()))) | {REALTIME_PRIORITY}
    given = set(flatten(document[node_name]["ros__parameters"]))
    assert given <= declared, f"undeclared keys {sorted(given - declared)}"


def test_graph_nodes_expose_node_class_and_main():
    for node in load_graph(CONFIG / "graph.yaml").nodes:
        module = importlib.import_module(f"walk_mpc.nodes.{node.executable}")
        assert callable(getattr(module, "main", None)), node.name
        assert hasattr(module, "NODE_CLASS"), node.name


def test_realtime_priority_is_the_common_node_parameter():
    from walk_mpc.nodes import _common

    assert _common.REALTIME_PRIORITY == REALTIME_PRIORITY
