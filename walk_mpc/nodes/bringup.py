"""In-process bringup of the walk_mpc graph (config/graph.yaml) for machines without the ros2 CLI.

Starts the same nodes with the same parameters file as launch/walk.launch.py, in one process on one
SingleThreadedExecutor (rclpy 9's MultiThreadedExecutor drops most of a 100 Hz sensor stream here:
it resubmits tasks its pool has not started; no walk_mpc callback blocks):

    python -m walk_mpc.nodes.bringup [--robot talos|g1|romeo] [--sim kinematic|mujoco|none]
                                     [--config FILE] [--namespace robot1]
    ros2 run walk_mpc bringup --robot talos

A robot of config/graph.yaml with a ``model`` (a robot description, config/robots/<model>.yaml) gets that
robot's values on top of the parameters file (:meth:`walk_mpc.graph.Graph.overrides`). A namespace puts
every node, topic, service and action of the graph under it (``/robot1/sensor_state``...) and its frames
under ``<namespace>/`` (``frame_id`` ``robot1/world``), so several robots run side by side.

Each node module exposes ``NODE_CLASS``, a Node subclass accepting ``Node`` keyword arguments
(``parameter_overrides``); the overrides are the node's section of the parameters file.
"""

from __future__ import annotations

import argparse
import importlib
import threading
from typing import List, Optional, Sequence

import rclpy
from rclpy.context import Context
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from walk_mpc.graph import load_graph, namespace_frames
from walk_mpc.nodes._common import bringup_overrides, freeze_startup_objects, run_guarded


def create_nodes(robot: str = "talos", sim: str = "kinematic", config: Optional[str] = None,
                 context: Optional[Context] = None, extra: Optional[dict] = None,
                 namespace: str = "") -> List[Node]:
    """Instantiate the graph's nodes for ``robot`` and ``sim`` with their parameters from the config file.

    Args:
        robot: Robot name in config/graph.yaml.
        sim: Simulator backend ('kinematic', 'mujoco') or 'none'.
        config: Parameters file (default: the robot's file in config/).
        context: rclpy context to create the nodes in (default: the global one).
        extra: Per node name, extra parameter overrides {name: value} (applied after the file's and the
            robot's).
        namespace: Namespace of the nodes ('' = none); frames get it as a prefix.

    Raises:
        WalkMpcError: On an unknown robot or backend, or invalid parameters (named in the message).
    """
    graph = load_graph()
    path = graph.config_path(robot, config)
    robot_values = graph.overrides(robot)
    frames = namespace_frames(namespace)
    nodes: List[Node] = []
    try:
        for spec in graph.select(robot, sim):
            module = importlib.import_module(f"walk_mpc.nodes.{spec.executable}")
            overrides = bringup_overrides(spec.name, path)
            more = {**robot_values.get(spec.name, {}), **frames.get(spec.name, {})}
            more.update(extra.get(spec.name, {}) if extra else {})
            if spec.name == "sim":
                more.setdefault("backend", sim)
            overrides = [p for p in overrides if p.name not in more] + [
                Parameter(k, value=v) for k, v in more.items()]
            kwargs = {"namespace": namespace} if namespace else {}
            nodes.append(module.NODE_CLASS(parameter_overrides=overrides, context=context, **kwargs))
    except BaseException:
        for node in nodes:
            _destroy(node)
        raise
    return nodes


def _destroy(node: Node) -> None:
    destroy = getattr(node, "destroy", None)
    (destroy or node.destroy_node)()


class Bringup:
    """The graph running in this process on a background executor thread (tests, demo).

    Use as a context manager; ``rclpy`` must be initialised for ``context`` (default: global).
    """

    def __init__(self, robot: str = "talos", sim: str = "kinematic", config: Optional[str] = None,
                 context: Optional[Context] = None, extra: Optional[dict] = None,
                 namespace: str = "") -> None:
        self.nodes = create_nodes(robot, sim, config, context, extra, namespace)
        self.executor = SingleThreadedExecutor(context=context)
        for node in self.nodes:
            self.executor.add_node(node)
        self._thread = threading.Thread(target=self._spin, name="walk_mpc_bringup", daemon=True)

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        for node in self.nodes:
            if node.get_name() == name:
                return node
        raise KeyError(f"no node '{name}' in the bringup; nodes: {[n.get_name() for n in self.nodes]}")

    def __enter__(self) -> Bringup:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        self._thread.join(timeout=5.0)  # no entity is destroyed while a thread spins it (issue 21)
        if not self._thread.is_alive():
            for node in self.nodes:
                _destroy(node)


def main(args: Optional[Sequence[str]] = None) -> int:
    """Entry point: parse --robot/--sim/--config, start the graph, spin until SIGINT."""
    parser = argparse.ArgumentParser(description="walk_mpc node graph in one process")
    parser.add_argument("--robot", default="talos")
    parser.add_argument("--sim", default="kinematic", help="kinematic, mujoco or none")
    parser.add_argument("--config", default=None, help="parameters file (default: the robot's)")
    parser.add_argument("--namespace", default="", help="namespace of the graph (several robots)")
    ros_args = rclpy.utilities.remove_ros_args(args)
    options = parser.parse_args(ros_args[1:] if args is None else [a for a in ros_args if a])

    def spin() -> None:
        nodes = create_nodes(options.robot, options.sim, options.config, namespace=options.namespace)
        freeze_startup_objects()
        executor = SingleThreadedExecutor()
        for node in nodes:
            executor.add_node(node)
        try:
            executor.spin()
        finally:
            for node in nodes:
                _destroy(node)

    return run_guarded(spin, args)


if __name__ == "__main__":
    import sys

    sys.exit(main())


__all__ = ["Bringup", "create_nodes", "main"]
