"""Start the walk_mpc node graph as separate processes, like ``ros2 launch walk_mpc walk.launch.py``.

For machines without the ros2 CLI (and for tests and the demo): the same config/graph.yaml and parameters
file as launch/walk.launch.py, one process per node, output prefixed with the node name::

    python -m walk_mpc.tools.launch_graph [--robot talos|g1|romeo] [--sim kinematic|mujoco|none]
                                          [--config FILE] [--namespace robot1] [--control-process]
                                          [--balance]

``--control-process`` runs the robot's control nodes (every node but the sim) in one process, on one
executor (``python -m walk_mpc.nodes.bringup --nodes ...``), beside the sim's own process: one Python
interpreter and one DDS participant instead of four, about a third less CPU per robot
(benchmarks/multi_robot.py ``--mode control``); a node can then not be stopped or restarted alone.

A robot with a ``model`` in config/graph.yaml gets its description's values on top of the parameters file
(``-p`` arguments, :meth:`walk_mpc.graph.Graph.overrides`); a namespace puts the graph's nodes, topics and
frames under it (several robots side by side).

The nodes run with walk_mpc's Fast DDS profile (config/fastdds_localhost.xml: a restarted node is discovered
in milliseconds; :func:`walk_mpc.graph.dds_environment` says when it applies; ``WALK_MPC_FASTDDS_PROFILE=0``
keeps Fast DDS's own settings).

Ctrl-C stops every node. The exit code is non-zero when a node exits on its own with an error. On Linux a
node also gets SIGTERM when the process that started it dies (killed, crashed), so no node outlives its
launcher and keeps publishing into the domain.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

from walk_mpc.core.params import load_yaml
from walk_mpc.fastdds_shm import clean_zombies_reported
from walk_mpc.graph import (
    CONTROL,
    STACKS_SIGNAL,
    check_namespace,
    control_arguments,
    dds_environment,
    load_graph,
    namespace_frames,
    namespaced_parameters_file,
)

_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


def die_with_parent() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: the child gets SIGTERM when its parent dies (Linux only).

    rclpy handles SIGTERM like SIGINT (clean shutdown). Elsewhere this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def start_scheduled(priority: int) -> Callable[[], None]:
    """``preexec_fn`` for ``subprocess.Popen``: :func:`die_with_parent`, and the child runs under SCHED_FIFO
    at ``priority`` from its ``exec`` (0: normal scheduling).

    A node applies its ``realtime_priority`` itself once it has read it; started at that priority, its
    interpreter, imports and construction do not wait behind the machine's normally scheduled processes
    meanwhile (issue 17: a restarted node runs its loop again within 1 s). Without permission the child
    starts with normal scheduling, and the node warns as before.
    """
    def preexec() -> None:
        die_with_parent()
        if priority and hasattr(os, "sched_setscheduler"):
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            except OSError:
                pass

    return preexec


def _priority(value: Any) -> int:
    """A ``realtime_priority`` value as the priority to start a process at (0 for anything but 1-99: the node
    reports a wrong value itself)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 100 else 0


#: [s] Given a node for its stacks (:data:`~walk_mpc.graph.STACKS_SIGNAL`) before it is killed.
STACKS_WAIT = 0.5

#: The wall-clock stamp of an rclpy log line: ``[INFO] [1795793285.108330079] [node]: ...``.
_LOG_STAMP = re.compile(r"\[\w+\] \[(\d+\.\d+)\]")


class GraphProcesses:
    """The graph's nodes as child processes.

    Args:
        robot: Robot name in config/graph.yaml.
        sim: Simulator backend or 'none'.
        config: Parameters file (default: the robot's).
        log_dir: Write each node's output to ``<log_dir>/<node>.log`` (default: forward to our stdout with a
            ``[node]`` prefix).
        extra_args: Per node name, extra ``--ros-args`` items (e.g. ``["-p", "sensor_timeout:=0.5"]``);
            with ``control_process``, for the sim only.
        namespace: Namespace of the graph ('' = none).
        control_process: Run every node but the sim in one process named :data:`CONTROL` (``processes``,
            ``start``, ``stop_node`` and ``command`` then take ``"control"`` for them).
        phase_offset: [s] The sim's ``phase_offset`` (its samples at ``k * period + phase_offset`` of the
            system clock: robots sharing a computer get different ones); None = the parameters file's.
        balance: The robot's balance setting over the parameters file (graph.yaml ``balance``).

    Raises:
        WalkMpcError: On an unknown robot or backend.
        ValueError: ``extra_args`` for a node of the control process.
    """

    def __init__(self, robot: str = "talos", sim: str = "kinematic", config: Optional[str] = None,
                 log_dir: Optional[os.PathLike] = None,
                 extra_args: Optional[Dict[str, Sequence[str]]] = None, namespace: str = "",
                 control_process: bool = False, phase_offset: Optional[float] = None,
                 balance: bool = False) -> None:
        graph = load_graph()
        self.robot, self.config, self.balance = robot, config, balance
        self.specs = graph.select(robot, sim)
        #: Process name -> the nodes it runs (one node each, unless ``control_process``).
        self.groups: Dict[str, Tuple[str, ...]] = graph.processes(robot, sim, control_process)
        if control_process:
            grouped = sorted(set(extra_args or {}) & set(self.groups[CONTROL]))
            if grouped:
                raise ValueError(f"extra_args for {grouped}: not supported in the control process")
        self.namespace = check_namespace(namespace)
        parameters = graph.config_path(robot, config, balance, Path(log_dir) if log_dir else None, sim)
        self.params_file = namespaced_parameters_file(parameters, self.namespace,
                                                      Path(log_dir) if log_dir else None)
        self.overrides = graph.overrides(robot)
        for node, values in namespace_frames(self.namespace).items():
            self.overrides.setdefault(node, {}).update(values)
        if phase_offset is not None:
            self.overrides.setdefault("sim", {})["phase_offset"] = float(phase_offset)
        self.sim = sim
        self.log_dir = Path(log_dir) if log_dir else None
        self.extra_args = dict(extra_args or {})
        #: The nodes' environment: ours, and walk_mpc's Fast DDS profile (walk_mpc.graph.dds_environment).
        self.environment = {**os.environ, **dds_environment()}
        self.processes: Dict[str, subprocess.Popen] = {}
        #: Process name -> the SCHED_FIFO priority it starts at (:func:`start_scheduled`): its node's
        #: ``realtime_priority`` (the highest of the control process' nodes), 0 for normal scheduling.
        self.priorities = self._priorities(parameters)
        self._logs: List[IO] = []
        self._threads: List[threading.Thread] = []

    def command(self, name: str) -> List[str]:
        """The command line of process ``name`` (a node, or :data:`CONTROL`)."""
        if name == CONTROL:
            control = control_arguments(self.robot, self.sim, self.groups[CONTROL], self.config,
                                        self.namespace, self.balance)
            return [sys.executable, "-P", "-m", "walk_mpc.nodes.bringup", *control]
        spec = next(s for s in self.specs if s.name == name)
        # walk_mpc.nodes.start: the node's DDS participant first, then its modules (discovery overlaps them)
        args = [sys.executable, "-P", "-m", "walk_mpc.nodes.start", spec.executable, "--ros-args",
                "-r", f"__node:={spec.name}", "--params-file", str(self.params_file)]
        if self.namespace:
            args += ["-r", f"__ns:=/{self.namespace}"]
        for key, value in self.overrides.get(spec.name, {}).items():
            args += ["-p", f"{key}:={json.dumps(value)}"]  # JSON is YAML: strings quoted, lists in brackets
        if spec.name == "sim":
            args += ["-p", f"backend:={self.sim}"]
        return args + list(self.extra_args.get(spec.name, ()))

    def _priorities(self, config: Path) -> Dict[str, int]:
        try:
            document = load_yaml(config)
        except Exception:  # the nodes report an unreadable parameters file themselves
            document = {}

        def node_priority(name: str) -> int:
            section = document.get(name) if isinstance(document, dict) else None
            parameters = section.get("ros__parameters") if isinstance(section, dict) else None
            value = (parameters or {}).get("realtime_priority", 0) if isinstance(parameters, dict) else 0
            value = self.overrides.get(name, {}).get("realtime_priority", value)
            extra = list(self.extra_args.get(name, ()))
            for item in extra:
                if isinstance(item, str) and item.startswith("realtime_priority:="):
                    try:
                        value = json.loads(item.split(":=", 1)[1])
                    except ValueError:
                        value = 0
            return _priority(value)

        return {process: max((node_priority(n) for n in nodes), default=0)
                for process, nodes in self.groups.items()}

    def start(self, names: Optional[Sequence[str]] = None) -> GraphProcesses:
        """Start the processes (all of them, or ``names``)."""
        for name in self.groups:
            if names is not None and name not in names:
                continue
            self.start_node(name)
        return self

    def start_node(self, name: str) -> subprocess.Popen:
        """(Re)start process ``name`` (a node, or :data:`CONTROL`)."""
        if name in self.processes and self.processes[name].poll() is None:
            raise RuntimeError(f"node {name} is already running")
        if name in self.processes:
            self.clean_dead()
        if self.log_dir:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = open(self.log_dir / f"{name}.log", "a")
            self._logs.append(log)
            proc = subprocess.Popen(self.command(name), stdout=log, stderr=subprocess.STDOUT,
                                    preexec_fn=start_scheduled(self.priorities.get(name, 0)),
                                    env=self.environment)
        else:
            proc = subprocess.Popen(self.command(name), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, bufsize=1, env=self.environment,
                                    preexec_fn=start_scheduled(self.priorities.get(name, 0)))
            thread = threading.Thread(target=self._forward, args=(name, proc), daemon=True)
            thread.start()
            self._threads.append(thread)
        self.processes[name] = proc
        return proc

    @staticmethod
    def _forward(name: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            sys.stdout.write(f"[{name}] {line}")
        sys.stdout.flush()

    def first_log_after(self, name: str, since: float, containing: str = "") -> float:
        """Seconds from ``since`` (wall clock, s) to the first line process ``name`` logged after it that
        contains ``containing``, from its log file (each node logs its configuration at the end of its
        construction); NaN without a log directory or such a line."""
        if self.log_dir is None:
            return float("nan")
        try:
            lines = (self.log_dir / f"{name}.log").read_text().splitlines()
        except OSError:
            return float("nan")
        for line in lines:
            match = _LOG_STAMP.match(line)
            if match and float(match.group(1)) >= since and containing in line:
                return float(match.group(1)) - since
        return float("nan")

    def stop_node(self, name: str, sig: int = signal.SIGINT, timeout: float = 10.0) -> int:
        """Stop node ``name``: one ``sig``, then as ``ros2 launch`` escalates, SIGTERM after half of
        ``timeout`` and SIGKILL after the other half; returns its exit code. A node killed (not stopped
        cleanly) leaves Fast DDS shared-memory files: :meth:`clean_dead` at once."""
        proc = self.processes[name]
        if proc.poll() is None:
            proc.send_signal(sig)
        code = self._wait(name, proc, timeout)
        if code < 0 and code != -signal.SIGINT:
            self.clean_dead()
        return code

    def clean_dead(self) -> None:
        """Mark dead and remove the shared-memory ports and segments of dead Fast DDS participants
        (:func:`walk_mpc.fastdds_shm.clean_zombies_reported`, with the nodes' environment: nothing with
        another RMW). A killed node's writers then reopen its ports by name before they could push into the
        dead ones for ever (issue 17); done when a node is killed and before one is restarted."""
        clean_zombies_reported("launch_graph:", environ=self.environment, report=False)

    @staticmethod
    def _wait(name: str, proc: subprocess.Popen, timeout: float) -> int:
        """Wait for ``proc`` after its signal: SIGTERM after ``timeout / 2`` (rclpy shuts down cleanly on it
        too: a SIGINT that reached a node process as it started was seen lost, about once in 40 starts),
        SIGKILL after ``timeout``."""
        for escalate in (signal.SIGTERM, signal.SIGKILL):
            try:
                return proc.wait(timeout / 2)
            except subprocess.TimeoutExpired:
                print(f"launch_graph: {name} still running {timeout / 2:.0f} s after its signal: "
                      f"{signal.Signals(escalate).name}", file=sys.stderr, flush=True)
                if escalate == signal.SIGKILL and STACKS_SIGNAL is not None:
                    proc.send_signal(STACKS_SIGNAL)  # its threads' stacks into its log, where it hangs
                    try:
                        return proc.wait(STACKS_WAIT)
                    except subprocess.TimeoutExpired:
                        print(f"launch_graph: {name}'s threads' stacks are at the end of its log",
                              file=sys.stderr, flush=True)
                proc.send_signal(escalate)
        return proc.wait()

    def failed(self) -> Dict[str, int]:
        """Nodes that exited on their own, with their exit codes."""
        return {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}

    def stop(self) -> Dict[str, int]:
        """Stop every node; returns the exit codes."""
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # one SIGINT each: a second one interrupts a clean shutdown
        codes = {name: self._wait(name, proc, 10.0) for name, proc in self.processes.items()}
        for log in self._logs:
            log.close()
        return codes

    def __enter__(self) -> GraphProcesses:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="talos")
    parser.add_argument("--sim", default="kinematic", help="kinematic, mujoco or none")
    parser.add_argument("--config", default=None, help="parameters file (default: the robot's)")
    parser.add_argument("--namespace", default="", help="namespace of the graph (several robots)")
    parser.add_argument("--control-process", action="store_true",
                        help="every node but the sim in one process (less CPU; no restart of one node)")
    parser.add_argument("--balance", action="store_true",
                        help="the robot's balance setting over the parameters file (graph.yaml 'balance')")
    args = parser.parse_args(argv)
    graph = GraphProcesses(args.robot, args.sim, args.config, namespace=args.namespace,
                           control_process=args.control_process, balance=args.balance).start()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(0.2):
        if graph.failed():
            break
    failed = {n: c for n, c in graph.failed().items() if c not in (0, -signal.SIGINT)}
    graph.stop()
    for name, code in failed.items():
        print(f"launch_graph: node {name} exited with code {code}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
