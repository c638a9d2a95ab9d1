"""Restart time of each control node: from the ``exec`` of its process to the loop running again (issue 17).

The graph runs as processes (:class:`walk_mpc.tools.launch_graph.GraphProcesses`: Talos on the kinematic sim
by default, and upkie for ``wheel_contact``), standing. Each node is SIGKILLed, restarted 1 s later, and the
drill measures, from the restart (``Popen``):

* ``constructed``: the node's first log line (the end of its construction: interpreter, imports, model,
  kernels), from its log file;
* ``output``: the first message of the node the drill hears (walk_behavior ``walk/status``, mpc_planner
  ``mpc/com_reference``, ik ``ik/timing``, wheel_contact ``wheel_contact``);
* ``loop``: the loop running again, as the drill's probe hears it: the ik ticking on the planner's references
  (walk_behavior: its first status and the ik ticking on references; wheel_contact: its first output);
* ``robot`` (the ik): the loop running again as the robot sees it, from the logs, without the probe's own
  discovery of the restarted node: the later of the sim's "joint commands again" (it applies the restarted
  ik's commands) and the ik's "ticking on the CoM references". "Loop within 1 s" counts this for the ik.

Printed per restart, then the median and the largest of each node. The nodes and the drill's client run
with walk_mpc's Fast DDS profile (config/fastdds_localhost.xml); ``WALK_MPC_FASTDDS_PROFILE=0``: without it.

    bash -c 'source tools/env.sh && source install/setup.bash && python -P benchmarks/restart.py --repeats 5'
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy

from walk_mpc.graph import dds_environment
from walk_mpc.msg import ComReference, TickTiming, WalkFeedback, WheelContactArray
from walk_mpc.nodes.ik import is_reference_tick
from walk_mpc.tools.launch_graph import GraphProcesses

LEGGED = ("walk_behavior", "mpc_planner", "ik")
#: The counts that show a restarted node's loop running again (the ik ticking on references by default).
LOOP = {"walk_behavior": ("walk_behavior", "ticks"), "wheel_contact": ("wheel_contact",)}


class Probe:
    """Counts the messages of each node, and the ik's ticks on references."""

    def __init__(self) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("restart_probe", context=self.context)
        self.lock = threading.Lock()
        self.counts: Dict[str, int] = {"walk_behavior": 0, "mpc_planner": 0, "ik": 0, "wheel_contact": 0,
                                       "ticks": 0}
        best_effort = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.topic = self.node.resolve_topic_name("mpc/com_reference")
        self.node.create_subscription(WalkFeedback, "walk/status", self._count("walk_behavior"), 10)
        self.node.create_subscription(ComReference, "mpc/com_reference", self._count("mpc_planner"),
                                      best_effort)
        self.node.create_subscription(TickTiming, "ik/timing", self._on_tick, 10)
        self.node.create_subscription(WheelContactArray, "wheel_contact", self._count("wheel_contact"), 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _count(self, name: str) -> Callable:
        def callback(msg) -> None:
            with self.lock:
                self.counts[name] += 1
        return callback

    def _on_tick(self, msg) -> None:
        with self.lock:
            self.counts["ik"] += 1
            self.counts["ticks"] += is_reference_tick(msg, self.topic)

    def snapshot(self) -> Dict[str, int]:
        with self.lock:
            return dict(self.counts)

    def wait_more(self, before: Dict[str, int], names, timeout: float) -> float:
        """Seconds until every count in ``names`` exceeds ``before`` (NaN after ``timeout``)."""
        start = time.monotonic()
        while time.monotonic() < start + timeout:
            with self.lock:
                if all(self.counts[n] > before[n] for n in names):
                    return time.monotonic() - start
            time.sleep(0.005)
        return float("nan")

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()


def restart(processes: GraphProcesses, probe: Probe, node: str) -> dict:
    """Kill ``node``, restart it 1 s later, and time its start."""
    processes.stop_node(node, signal.SIGKILL)
    time.sleep(1.0)
    before = probe.snapshot()
    wall = time.time()
    start = time.monotonic()
    processes.start_node(node)
    output = probe.wait_more(before, (node,), 30.0)
    loop = probe.wait_more(before, LOOP.get(node, ("ticks",)), 30.0 - (time.monotonic() - start))
    loop = float("nan") if math.isnan(loop) else time.monotonic() - start
    time.sleep(1.5)  # a few constructed log lines later
    return {"node": node, "constructed": processes.first_log_after(node, wall),
            "output": output, "loop": loop, "robot": robot_view(processes, node, wall)}


def robot_view(processes: GraphProcesses, node: str, wall: float) -> float:
    """Seconds from ``wall`` (the restart of ``node``) to the loop running again as the robot sees it, from
    the logs: for the ik, the later of the sim's "joint commands again" and the ik's "ticking on the CoM
    references"; NaN for the other nodes (or without such lines)."""
    if node != "ik":
        return float("nan")
    times = (processes.first_log_after("sim", wall, "joint commands again"),
             processes.first_log_after("ik", wall, "ticking on the CoM references"))
    return float("nan") if any(math.isnan(t) for t in times) else max(times)


def loop_time(row: dict) -> float:
    """The loop running again: as the robot sees it for the ik, as the probe hears it for the others."""
    return row["robot"] if row["node"] == "ik" else row["loop"]


def wait_started(processes: GraphProcesses, probe: Probe, robot: str) -> None:
    """Wait until the graph of ``robot`` runs its loop (upkie: wheel_contact's output); exit if it doesn't."""
    warm = ("wheel_contact",) if robot == "upkie" else ("ticks", "walk_behavior")
    if math.isnan(probe.wait_more({k: 0 for k in probe.counts}, warm, 120.0)):
        raise SystemExit(f"the {robot} graph did not start: exited {processes.failed()}")


def run_graph(robot: str, sim: str, nodes, repeats: int, logs: str) -> List[dict]:
    rows = []
    processes = GraphProcesses(robot, sim, log_dir=Path(logs) / robot)
    processes.start()
    probe = Probe()
    try:
        wait_started(processes, probe, robot)
        time.sleep(2.0)
        for _ in range(repeats):
            for node in nodes:
                row = restart(processes, probe, node)
                rows.append(row)
                print(f"{node:13s} constructed {row['constructed']:5.2f} s  first output "
                      f"{row['output']:5.2f} s  loop {row['loop']:5.2f} s"
                      + (f"  robot {row['robot']:5.2f} s" if node == "ik" else ""), flush=True)
    finally:
        probe.close()
        processes.stop()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", default="kinematic", help="simulator backend of Talos (kinematic or mujoco)")
    parser.add_argument("--nodes", nargs="*", default=[*LEGGED, "wheel_contact"],
                        choices=[*LEGGED, "wheel_contact"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--log-dir", default="", help="keep the node logs there (default: a temporary dir)")
    args = parser.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update(dds_environment())  # the drill's client as the graph's nodes: a restart heard at once
    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        logs = args.log_dir or temporary
        legged = [n for n in args.nodes if n in LEGGED]
        if legged:
            rows += run_graph("talos", args.sim, legged, args.repeats, logs)
        if "wheel_contact" in args.nodes:
            rows += run_graph("upkie", "kinematic", ["wheel_contact"], args.repeats, logs)
    print("\n| node | restarts | constructed [s] median (max) | first output [s] | loop heard [s] | "
          "robot commanded again [s] | loop within 1 s |\n|---|---|---|---|---|---|---|")
    for node in args.nodes:
        mine = [r for r in rows if r["node"] == node]
        cells = []
        for key in ("constructed", "output", "loop", "robot"):
            if key == "robot" and node != "ik":
                cells.append("-")
                continue
            values = [r[key] for r in mine if not math.isnan(r[key])]
            missing = len(mine) - len(values)
            cells.append(f"{statistics.median(values):.2f} ({max(values):.2f})" if values else "-")
            if missing:
                cells[-1] += f", {missing} never"
        within = sum(loop_time(r) <= 1.0 for r in mine)
        print(f"| {node} | {len(mine)} | {' | '.join(cells)} | {within} of {len(mine)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
