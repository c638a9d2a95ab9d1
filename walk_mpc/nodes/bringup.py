"""In-process bringup of the walk_mpc graph (config/graph.yaml) for machines without the ros2 CLI.

Starts the same nodes with the same parameters file as launch/walk.launch.py, in one process on one
single-threaded executor: :class:`~walk_mpc.nodes._executor.FastDispatchExecutor` (rclpy's
SingleThreadedExecutor when a node's ``fast_dispatch`` is false; rclpy 9's MultiThreadedExecutor drops
most of a 100 Hz sensor stream here: it resubmits tasks its pool has not started; no walk_mpc callback
blocks), at the highest ``realtime_priority`` of its nodes (see ``_common.apply_realtime_priority``).
``--nodes`` starts some of them only, e.g. the control nodes of a robot in one process beside its
sim (:class:`walk_mpc.tools.launch_graph.GraphProcesses` with ``control_process``):

    python -m walk_mpc.nodes.bringup [--robot talos|g1|romeo] [--sim kinematic|mujoco|none]
                                     [--config FILE] [--namespace robot1] [--nodes walk_behavior ik ...]
                                     [--balance]
    ros2 run walk_mpc bringup --robot talos

A robot of config/graph.yaml with a ``model`` (a robot description, config/robots/<model>.yaml) gets that
robot's values on top of the parameters file (:meth:`walk_mpc.graph.Graph.overrides`). A namespace puts
every node, topic, service and action of the graph under it (``/robot1/sensor_state``...) and its frames
under ``<namespace>/`` (``frame_id`` ``robot1/world``), so several robots run side by side. ``--balance``
puts the robot's balance setting (config/graph.yaml ``balance``, e.g. config/balance_talos.yaml) over the
parameters file (:meth:`walk_mpc.graph.Graph.config_path`), as ``balance:=true`` does for the launch file.

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
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from walk_mpc.core.errors import ConfigError
from walk_mpc.graph import load_graph, namespace_frames
from walk_mpc.nodes._common import (
    apply_realtime_priority,
    bringup_overrides,
    fast_dispatch,
    freeze_startup_objects,
    realtime_priority,
    run_guarded,
)
from walk_mpc.nodes._executor import FastDispatchExecutor, fast_dispatch_supported


def create_nodes(robot: str = "talos", sim: str = "kinematic", config: Optional[str] = None,
                 context: Optional[Context] = None, extra: Optional[dict] = None,
                 namespace: str = "", names: Optional[Sequence[str]] = None,
                 balance: bool = False) -> List[Node]:
    """Instantiate the graph's nodes for ``robot`` and ``sim`` with their parameters from the config file.

    Args:
        robot: Robot name in config/graph.yaml.
        sim: Simulator backend ('kinematic', 'mujoco') or 'none'.
        config: Parameters file (default: the robot's file in config/).
        context: rclpy context to create the nodes in (default: the global one).
        extra: Per node name, extra parameter overrides {name: value} (applied after the file's and the
            robot's).
        namespace: Namespace of the nodes ('' = none); frames get it as a prefix.
        names: The nodes to create (default: all those of the graph for ``robot`` and ``sim``).
        balance: The robot's balance setting over the parameters file (graph.yaml ``balance``).

    Raises:
        WalkMpcError: On an unknown robot or backend, or invalid parameters (named in the message).
    """
    graph = load_graph()
    path = graph.config_path(robot, config, balance, sim=sim)
    robot_values = graph.overrides(robot)
    frames = namespace_frames(namespace)
    specs = graph.select(robot, sim)
    if names is not None:
        unknown = sorted(set(names) - {spec.name for spec in specs})
        if unknown:
            raise ConfigError(f"no node {unknown} in the graph of {robot} with sim {sim}; nodes: "
                              f"{[spec.name for spec in specs]}", "nodes")
        specs = [spec for spec in specs if spec.name in names]
    nodes: List[Node] = []
    try:
        for spec in specs:
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


#: Nodes of a process are added to its executor in this order (the others after them), which is the order
#: the messages of one wake-up are handed out: the control loop's path first (sample -> planner -> ik ->
#: trajectory -> sim), the walk behavior and the displays after it.
DISPATCH_ORDER = ("sim", "mpc_planner", "ik", "walk_behavior")


def make_graph_executor(nodes: Sequence[Node], context: Optional[Context] = None) -> Executor:
    """The single-threaded executor of nodes sharing a process, with the nodes added in
    :data:`DISPATCH_ORDER`: FastDispatchExecutor unless a node's ``fast_dispatch`` is false (then rclpy's
    SingleThreadedExecutor).

    Raises:
        ParameterError: A ``fast_dispatch`` that is not a boolean.
    """
    fast = all(fast_dispatch(node) for node in nodes) and fast_dispatch_supported()
    executor = FastDispatchExecutor(context=context) if fast else SingleThreadedExecutor(context=context)
    rank = {name: i for i, name in enumerate(DISPATCH_ORDER)}
    for node in sorted(nodes, key=lambda n: rank.get(n.get_name(), len(rank))):
        executor.add_node(node)
    return executor


def _destroy(node: Node) -> None:
    destroy = getattr(node, "destroy", None)
    (destroy or node.destroy_node)()


class Bringup:
    """The graph running in this process on a background executor thread (tests, demo).

    Use as a context manager; ``rclpy`` must be initialised for ``context`` (default: global).
    """

    def __init__(self, robot: str = "talos", sim: str = "kinematic", config: Optional[str] = None,
                 context: Optional[Context] = None, extra: Optional[dict] = None,
                 namespace: str = "", balance: bool = False) -> None:
        self.nodes = create_nodes(robot, sim, config, context, extra, namespace, balance=balance)
        self.executor = make_graph_executor(self.nodes, context)
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


def parse_arguments(args: Sequence[str]) -> argparse.Namespace:
    """The bringup's options from ``args`` (without the program name; ``--ros-args`` ... removed).

    Raises:
        SystemExit: On an unknown option (argparse prints the usage).
    """
    parser = argparse.ArgumentParser(description="walk_mpc node graph in one process")
    parser.add_argument("--robot", default="talos")
    parser.add_argument("--sim", default="kinematic", help="kinematic, mujoco or none")
    parser.add_argument("--config", default=None, help="parameters file (default: the robot's)")
    parser.add_argument("--namespace", default="", help="namespace of the graph (several robots)")
    parser.add_argument("--nodes", nargs="+", default=None, help="the nodes to start (default: all)")
    parser.add_argument("--balance", action="store_true",
                        help="the robot's balance setting over the parameters file (graph.yaml 'balance')")
    return parser.parse_args([a for a in rclpy.utilities.remove_ros_args(list(args)) if a])


def main(args: Optional[Sequence[str]] = None) -> int:
    """Entry point: parse --robot/--sim/--config/--balance, start the graph, spin until SIGINT."""
    import sys

    options = parse_arguments(sys.argv[1:] if args is None else args)

    def spin() -> None:
        nodes = create_nodes(options.robot, options.sim, options.config, namespace=options.namespace,
                             names=options.nodes, balance=options.balance)
        try:
            if nodes:  # the process runs at the highest realtime_priority of its nodes (0: normal scheduling)
                apply_realtime_priority(max(nodes, key=realtime_priority))
            freeze_startup_objects()
            executor = make_graph_executor(nodes)
            executor.spin()
        finally:
            for node in nodes:
                _destroy(node)

    return run_guarded(spin, args)


if __name__ == "__main__":
    import sys

    sys.exit(main())


__all__ = ["Bringup", "create_nodes", "main", "make_graph_executor", "parse_arguments"]
