"""Benchmark: sensor -> joint command latency through the node graph (sim -> mpc_planner -> ik over DDS).

Starts the graph as processes (:class:`walk_mpc.tools.launch_graph.GraphProcesses`, Talos, kinematic sim,
node logs in a temporary directory) and a probe node. The latency is measured where the robot sees it:
the sim node publishes, on ``sim/latency``, the time from handing each SensorState to the middleware to
the arrival of the JointTrajectory computed from it (the ik stamps its commands with that sample's
stamp), both on the sim's steady clock. The probe only listens to that and to the nodes' tick timings
(50 Hz each): it does not subscribe to the 100 Hz sensor stream, so it adds no wake-up per sample.
Measured while standing (``--stand`` s) and while walking (a ``--steps``-step goal through
``walk_mpc.tools.send_walk``).

Printed: median, p90, p99, max of the latency; median, p90, p99 of the per-node tick times reported on
``mpc/timing`` and ``ik/timing`` (message in -> last output in the node) and of the rest (latency minus
both ticks: DDS hops, deserialisation, wake-ups); the load average. Baseline, in this process: the same
chain's pure compute (``estimate_state`` + ``MpcPlanner.step`` + ``walk_targets`` at T and 2T +
``IKSolver.solve_two``) over a Talos walk, so the DDS/ROS overhead is what remains. Three graph runs, one
after the other: normal scheduling (``realtime_priority`` 0), the config with rclpy's SingleThreadedExecutor
(``fast_dispatch`` false), the config as shipped; the last is compared with the other two.

    bash -c 'source tools/env.sh && source install/setup.bash && python -P benchmarks/graph_latency.py'
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # control_tick.talos_walk (with python -P)

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402

from walk_mpc.core.walk import footsteps  # noqa: E402
from walk_mpc.msg import TickTiming  # noqa: E402
from walk_mpc.tools.launch_graph import GraphProcesses  # noqa: E402
from walk_mpc.tools.send_walk import DEFAULT_FEET, current_feet, send_walk, walk_action_client  # noqa: E402

#: The graph's nodes (Talos, kinematic sim).
NODES = ("sim", "mpc_planner", "ik", "walk_behavior")


def _stamp_ns(header) -> int:
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


class Probe(Node):
    """The sim's sensor -> command latencies and the nodes' tick timings, by sample stamp."""

    def __init__(self, context) -> None:
        super().__init__("graph_latency_probe", context=context)
        self.latency: Dict[int, float] = {}
        self.timing: Dict[str, List[float]] = {"mpc": [], "ik": []}
        self.tick_by_stamp: Dict[str, Dict[int, float]] = {"mpc": {}, "ik": {}}
        self.create_subscription(TickTiming, "sim/latency", self._on_latency, 100)
        self.create_subscription(TickTiming, "mpc/timing", self._on_timing, 100)
        self.create_subscription(TickTiming, "ik/timing", self._on_timing, 100)

    def _on_timing(self, msg: TickTiming) -> None:
        self.timing[msg.component].append(msg.tick_time)
        self.tick_by_stamp[msg.component][_stamp_ns(msg.header)] = msg.tick_time

    def _on_latency(self, msg: TickTiming) -> None:
        self.latency[_stamp_ns(msg.header)] = msg.tick_time

    def mark(self) -> tuple:
        """Current sizes (to take the samples of a window)."""
        return len(self.latency), len(self.timing["mpc"]), len(self.timing["ik"])

    def window(self, mark: tuple) -> tuple[np.ndarray, ...]:
        """Latencies [s], tick times [s] since ``mark``, and the rest of each latency outside the two
        callbacks (latency - mpc tick - ik tick of the same stamp: DDS hops, deserialisation, wake-ups)."""
        stamps = list(self.latency)[mark[0]:]
        latency = [self.latency[s] for s in stamps]
        mpc, ik = self.tick_by_stamp["mpc"], self.tick_by_stamp["ik"]
        rest = [lat - mpc[s] - ik[s] for s, lat in zip(stamps, latency) if s in mpc and s in ik]
        return (np.asarray(latency), np.asarray(self.timing["mpc"][mark[1]:]),
                np.asarray(self.timing["ik"][mark[2]:]), np.asarray(rest))


def stats(label: str, values: Sequence[float]) -> str:
    data = np.asarray(values) * 1e3
    if data.size == 0:
        return f"  {label:<28s} no samples"
    p50, p90, p99 = np.percentile(data, [50, 90, 99])
    return (f"  {label:<28s} median {p50:6.2f} ms  p90 {p90:6.2f} ms  p99 {p99:6.2f} ms  "
            f"max {data.max():6.2f} ms  ({data.size})")


def report(name: str, window: tuple) -> float:
    latency, mpc, ik, rest = window
    print(f"{name}: load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(stats("sensor -> joint_trajectory", latency))
    print(stats("mpc tick (in node)", mpc))
    print(stats("ik tick (in node)", ik))
    print(stats("rest (DDS, executors)", rest))
    return float(np.percentile(latency, 99)) if latency.size else float("nan")


def in_process_chain(ticks: int) -> np.ndarray:
    """Wall time [s] of the chain's pure compute per tick (estimate_state, planner, targets, solve_two)."""
    from control_tick import T, talos_walk

    from walk_mpc.core.body.ik import IKSolver
    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.core.body.state_estimation import estimate_state
    from walk_mpc.core.body.targets import walk_targets, yaw_free
    from walk_mpc.core.mpc.planner import MpcPlanner, PlannerParameters
    from walk_mpc.core.mpc.problem import MpcParameters

    robot = RobotModel(RobotModel.Parameters(robot="talos_reduced"))
    q0 = robot.reference_configuration()
    com_height = float(robot.com(q0)[2] - robot.foot_poses(q0)[robot.left_foot_frame][0][2])
    planner = MpcPlanner(PlannerParameters(mpc=MpcParameters(com_height=com_height), control_period=T))
    timeline = talos_walk(robot)
    planner.set_timeline(timeline)
    solver = IKSolver(robot)
    tilt = yaw_free(robot.frame_pose(q0, robot.torso_frame)[1])
    names = list(robot.joint_names)
    q = q0
    out = []
    for k in range(min(ticks, int(timeline.t_end / T))):
        t = k * T
        start = time.perf_counter_ns()
        joints = robot.joint_positions(q)
        # Positions only, as the mpc_planner node measures its samples.
        measured = estimate_state(robot, names, [joints[n] for n in names], (q[0:3], q[3:7]))
        plan = planner.step(t, measured.com_position)
        targets = [walk_targets(timeline, t + dt, com, tilt) for dt, com in zip((T, 2 * T), plan.com_targets)]
        first, _ = solver.solve_two(targets[0], targets[1], q)
        out.append((time.perf_counter_ns() - start) * 1e-9)
        q = first.q
    return np.asarray(out)


def measure(args: argparse.Namespace, label: str, extra_args: Dict[str, Sequence[str]]) -> Dict[str, float]:
    """Start the graph (``extra_args`` per node), measure standing then walking; p99 [s] of each."""
    print(f"\n== {label}: load average before start {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    logs = tempfile.mkdtemp(prefix="graph_latency_")
    graph = GraphProcesses("talos", "kinematic", log_dir=logs, extra_args=extra_args).start()
    context = rclpy.Context()
    rclpy.init(context=context)
    probe = Probe(context)
    client = rclpy.create_node("graph_latency_client", context=context)
    walk_client = walk_action_client(client)  # discovered by the server long before the goal
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(probe)
    executor.add_node(client)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    p99 = {}
    try:
        deadline = time.monotonic() + 60.0
        while not (probe.timing["mpc"] and probe.timing["ik"] and probe.latency):
            if graph.failed() or time.monotonic() > deadline:
                raise RuntimeError(f"the graph did not start (exited: {graph.failed()}); logs in {logs}")
            time.sleep(0.05)  # polling counters filled by the executor thread
        time.sleep(2.0)  # settle: first ticks build caches
        mark = probe.mark()
        time.sleep(args.stand)
        p99["standing"] = report(f"standing ({args.stand:g} s)", probe.window(mark))
        left, right = current_feet(client, timeout=30.0) or DEFAULT_FEET
        steps = footsteps.walk_forward(left, right, args.length * (args.steps - 1), args.length, width=0.17,
                                       duration=args.duration)
        mark = probe.mark()
        outcome = send_walk(client, steps, server_timeout=60.0, result_timeout=120.0, client=walk_client)
        p99["walking"] = report(f"walking ({len(steps)} steps, succeeded {outcome.succeeded})",
                                probe.window(mark))
    finally:
        executor.shutdown(timeout_sec=5.0)
        for node in (probe, client):
            node.destroy_node()
        context.try_shutdown()
        graph.stop()
    scheduling = [line for name in ("sim", "mpc_planner", "ik")
                  for line in (Path(logs) / f"{name}.log").read_text().splitlines()
                  if "SCHED_FIFO" in line or "realtime_priority" in line]
    print("\n".join(f"  {line.split('] ', 2)[-1]}" for line in scheduling) or "  normal scheduling")
    print(f"  node logs: {logs}")
    return p99


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stand", type=float, default=10.0, help="[s] standing measurement")
    parser.add_argument("--steps", type=int, default=6, help="steps of the walking measurement")
    parser.add_argument("--length", type=float, default=0.2, help="[m] step length")
    parser.add_argument("--duration", type=float, default=1.1, help="[s] step duration")
    parser.add_argument("--target", type=float, default=3.0, help="[ms] p99 target")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the baseline runs: normal scheduling (realtime_priority 0 for every "
                             "node), and rclpy's executor (fast_dispatch false for every node)")
    args = parser.parse_args()

    chain = in_process_chain(400)
    print(stats("in-process chain (baseline)", chain))
    runs = {}
    if not args.no_baseline:
        normal = ["-p", "realtime_priority:=0"]
        runs["normal scheduling"] = measure(args, "graph, normal scheduling (realtime_priority 0)",
                                            {name: normal for name in ("sim", "mpc_planner", "ik")})
        standard = ["-p", "fast_dispatch:=false"]
        runs["rclpy executor"] = measure(args, "graph, config with rclpy's SingleThreadedExecutor "
                                         "(fast_dispatch false)", {name: standard for name in NODES})
    runs["config"] = measure(args, "graph, config/walk_mpc.yaml (realtime_priority per node)", {})
    chain_p99 = float(np.percentile(chain, 99))
    print()
    for run, p99 in runs.items():
        for name, value in p99.items():
            verdict = "holds" if value * 1e3 <= args.target else "missed"
            ratio = "" if run != "config" else "".join(
                f"; vs {base} {value / runs[base][name]:.2f}x"
                for base in ("normal scheduling", "rclpy executor") if base in runs)
            print(f"{run}, {name}: p99 {value * 1e3:.2f} ms vs target {args.target:g} ms: {verdict}; graph / "
                  f"in-process chain p99 {value / chain_p99:.1f}x{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
