"""The node graph of config/graph.yaml, shared by launch/walk.launch.py and the in-process bringup."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional, Tuple

from walk_mpc.core.errors import ConfigError
from walk_mpc.core.params import load_yaml

CONDITIONS = ("always", "sim", "wheels", "legs")
SIM_BACKENDS = ("none", "kinematic", "mujoco")


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """One node of the graph: its name (also its parameters section), executable and start condition."""

    name: str
    executable: str
    when: str = "always"


@dataclasses.dataclass(frozen=True)
class RobotSpec:
    """What a robot has, and its default parameters file name."""

    name: str
    wheels: bool
    legs: bool
    config: str


@dataclasses.dataclass(frozen=True)
class Graph:
    """The whole graph description."""

    nodes: Tuple[NodeSpec, ...]
    robots: Tuple[RobotSpec, ...]
    directory: Path

    def robot(self, name: str) -> RobotSpec:
        """The robot called ``name``.

        Raises:
            ConfigError: If no robot has this name (the message lists the known ones).
        """
        for robot in self.robots:
            if robot.name == name:
                return robot
        raise ConfigError(f"unknown robot '{name}'; known robots: {[r.name for r in self.robots]}", "robot")

    def config_path(self, robot: str, config: Optional[str] = None) -> Path:
        """The parameters file: ``config`` if given, else the robot's default in the config directory."""
        return Path(config) if config else self.directory / self.robot(robot).config

    def select(self, robot: str, sim: str) -> Tuple[NodeSpec, ...]:
        """The nodes to start for ``robot`` with the simulator backend ``sim`` ('none' for a real robot).

        Raises:
            ConfigError: On an unknown robot or simulator backend.
        """
        if sim not in SIM_BACKENDS:
            raise ConfigError(f"unknown simulator '{sim}'; expected one of {list(SIM_BACKENDS)}", "sim")
        spec = self.robot(robot)
        active = {"always": True, "sim": sim != "none", "wheels": spec.wheels, "legs": spec.legs}
        return tuple(node for node in self.nodes if active[node.when])


def default_config_directory() -> Path:
    """The installed share/walk_mpc/config, or the source tree's config/ when not installed."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            return Path(get_package_share_directory("walk_mpc")) / "config"
        except PackageNotFoundError:
            pass
    except ImportError:
        pass
    return Path(__file__).resolve().parents[1] / "config"


def load_graph(path: Optional[Path] = None) -> Graph:
    """Read and validate config/graph.yaml.

    Raises:
        ConfigError: On a malformed file (unknown keys, unknown conditions, duplicate names).
    """
    path = Path(path) if path else default_config_directory() / "graph.yaml"
    data = load_yaml(path)
    source = str(path)
    unknown = set(data) - {"nodes", "robots"}
    if unknown:
        raise ConfigError(f"unknown keys {sorted(unknown)}; expected nodes, robots", source=source)
    nodes = []
    for i, entry in enumerate(data.get("nodes") or []):
        if not isinstance(entry, dict) or "name" not in entry:
            raise ConfigError("each node needs a name", f"nodes[{i}]", source)
        extra = set(entry) - {"name", "executable", "when"}
        if extra:
            raise ConfigError(f"unknown keys {sorted(extra)}; expected name, executable, when",
                              f"nodes[{i}]", source)
        when = entry.get("when", "always")
        if when not in CONDITIONS:
            raise ConfigError(f"unknown condition '{when}'; expected one of {list(CONDITIONS)}",
                              f"nodes[{i}].when", source)
        nodes.append(NodeSpec(entry["name"], entry.get("executable", entry["name"]), when))
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ConfigError(f"duplicate node names in {names}", "nodes", source)
    robots = []
    for name, entry in (data.get("robots") or {}).items():
        extra = set(entry) - {"wheels", "legs", "config"}
        if extra:
            raise ConfigError(f"unknown keys {sorted(extra)}", f"robots.{name}", source)
        robots.append(RobotSpec(name, bool(entry.get("wheels", False)), bool(entry.get("legs", True)),
                                str(entry.get("config", "walk_mpc.yaml"))))
    return Graph(tuple(nodes), tuple(robots), path.parent)
