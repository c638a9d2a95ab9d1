"""Benchmark: how many robots' graphs this machine carries at the 10 ms hardware period (issues 19 and 21).

For each count N of ``--robots``, N graphs run at once (Talos, kinematic sim, the shipped config: one process
per node, :class:`walk_mpc.tools.launch_graph.GraphProcesses`), each in a DDS domain of its own (nothing is
shared between robots but the CPU), each with a probe process: the demo's :class:`~walk_mpc.demo.LoopMonitor`
(``sim/latency`` and ``sim/deadlines``), and with ``--recorder`` the demo's recorder writing an MCAP file of
the demo's topics. Once every graph runs, all robots walk at once (one goal of 0.1 m steps long enough for
``--duration`` seconds; cancelled at the end of the window) and the window is measured:

* per robot: sensor -> joint command latency as the sim measures it (median, p99, max), missed control
  deadlines (a command that came after the next sample went out: the 10 ms period missed) over the samples
  measured, the latencies over the 20 ms control period (a command after the next control tick was due: the
  control deadline of issue 19 missed), and how the walk ended;
* per process kind (sim, walk_behavior, mpc_planner, ik, robot_state, probe): CPU time in the window as a
  share of one core, summed over the robots, and per robot; per robot also while standing (``--standing``
  seconds before the walks, every graph running). CPU time is read from ``/proc/<pid>/stat``: unlike the
  latency it holds under load. ``WALK_MPC_PROFILE=<dir>`` makes each node process write a cProfile there.

``--mode control`` runs each robot's control nodes in one process beside its sim (``GraphProcesses`` with
``control_process``: ``python -m walk_mpc.nodes.bringup --nodes ...``, one executor, one DDS participant);
``--mode bringup`` runs each robot's graph as one process (every node of the robot, the sim too), to compare
what the processes cost.

``--phases spread`` (the default) gives robot i's sim the ``phase_offset`` i/N of the 10 ms period, as robots
sharing a computer should have (README, "Several robots at once"); ``--phases free`` starts each sim's timer
with its node, as before. ``--priority-boost K`` adds K to every node's ``realtime_priority`` and runs the
probes at SCHED_FIFO K: it measures the graphs above the other jobs of a shared machine.

``--cpu-latency US`` holds a PM QoS CPU latency request of US microseconds (0: idle CPUs never halt) while the
robots run (:func:`walk_mpc.tools.cpu_latency.cpu_latency_request`), as a real-time robot computer does.

A benchmark, not a test: it prints a table per N; it takes about ``duration + 30`` s per N.

    bash -c 'source tools/env.sh && source install/setup.bash && python -P benchmarks/multi_robot.py \\
        --robots 1 2 4 --duration 60 [--recorder] [--mode processes|control|bringup] [--phases spread|free]'
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

#: First DDS domain of the robots (robot i uses BASE_DOMAIN + i).
BASE_DOMAIN = 150
STEP_LENGTH = 0.1  # [m]
STEP_DURATION = 0.9  # [s]
HARDWARE_PERIOD = 0.01  # [s] the sims' sample period (config/walk_mpc.yaml sim.kinematic.hardware_period)
CONTROL_PERIOD_MS = 20.0  # [ms] the control loop's period: a later command missed its control deadline


def cpu_seconds(pid: int) -> float:
    """User + system CPU time [s] of process ``pid`` (its threads included), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------- the probe
def probe(args: argparse.Namespace) -> int:
    """One robot's probe (run with ``--probe`` in that robot's ROS_DOMAIN_ID): READY when its graph runs,
    then, on GO from stdin, walk for ``--duration`` s and print the window's figures as one JSON line."""
    import rclpy

    from walk_mpc.core.walk import footsteps
    from walk_mpc.demo import RECORDED_TOPICS, LoopMonitor
    from walk_mpc.nodes._executor import FastDispatchExecutor
    from walk_mpc.tools.recorder import RecorderNode
    from walk_mpc.tools.send_walk import DEFAULT_FEET, current_feet, send_walk, walk_action_client
    from walk_mpc.tools.spin_thread import SpinThread

    rclpy.init()
    client = rclpy.create_node("multi_robot_probe")
    monitor = LoopMonitor()
    recorder = RecorderNode(args.record, RECORDED_TOPICS) if args.record else None
    walk_client = walk_action_client(client)
    spin = SpinThread(FastDispatchExecutor(), name="probe-spin")  # the probe's CPU is counted: keep it low
    for node in (client, monitor, recorder):
        if node is not None:
            spin.add_node(node)
    spin.start()
    if args.priority_boost:  # above the machine's other jobs, below the graphs it measures
        for tid in map(int, os.listdir("/proc/self/task")):
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(args.priority_boost))
    result: Dict[str, object] = {}
    try:
        deadline = time.monotonic() + 120.0
        while monitor.ik_reference_ticks < 25 or not monitor.latency:
            if time.monotonic() > deadline:
                raise RuntimeError("the graph did not start within 120 s")
            spin.died.wait(0.05)
            spin.check()
        left, right = current_feet(client, timeout=30.0) or DEFAULT_FEET
        count = int(args.duration / STEP_DURATION) + 4
        steps = footsteps.walk_forward(left, right, STEP_LENGTH * (count - 1), STEP_LENGTH, width=0.17,
                                       duration=STEP_DURATION)
        print("READY", flush=True)
        sys.stdin.readline()  # GO: every robot starts its window at once
        start, deadlines = monitor.mark(), monitor.deadlines
        cancel = threading.Event()
        timer = threading.Timer(args.duration, cancel.set)
        timer.daemon = True  # never holds the probe's exit
        timer.start()
        outcome = send_walk(client, steps, server_timeout=30.0, result_timeout=args.duration + 60.0,
                            client=walk_client, cancel=cancel)
        timer.cancel()
        series = monitor.since(start)
        latency = np.asarray(series["latency"]) * 1e3
        end = monitor.deadlines
        result = {
            "samples": int(latency.size),
            "latency_ms": [float(np.median(latency)), float(np.percentile(latency, 99)), float(latency.max())]
            if latency.size else [],
            "missed": int(sum(series["missed"])),
            # of those, the misses whose sample the sim itself sent late (the stand-in hardware woke late)
            "missed_after_late_sample": int(sum(m and late for m, late in zip(series["missed"],
                                                                              series["sample_late"]))),
            "sim_late_wakeups": None if end is None or deadlines is None else end[3] - deadlines[3],
            # the 20 ms control deadline (issue 19): the command came after the next control tick was due
            "over_control_period": int((latency > CONTROL_PERIOD_MS).sum()),
            "sim_missed": None if end is None or deadlines is None else end[0] - deadlines[0],
            "sim_measured": None if end is None or deadlines is None else end[1] - deadlines[1],
            "walk": outcome.status_name + ("" if outcome.error_code == 0 else f" {outcome.error_name}"),
            "steps": outcome.last_completed_step_index,
        }
    except Exception as exc:  # noqa: BLE001 (reported to the parent as the robot's result)
        result = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        if spin.stop():
            walk_client.destroy()
            for node in (client, monitor, recorder):
                if node is not None:
                    node.destroy_node()
        rclpy.try_shutdown()
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------------------------------------- the runs
def boosted_config(boost: int, logs: Path) -> str:
    """The robot's parameters file with ``boost`` added to every node's ``realtime_priority`` (0 stays 0)."""
    import yaml

    from walk_mpc.graph import load_graph

    path = load_graph().config_path("talos")
    config = yaml.safe_load(path.read_text())
    for node in config.values():
        values = node.get("ros__parameters", {})
        if values.get("realtime_priority", 0) > 0:
            values["realtime_priority"] = min(99, values["realtime_priority"] + boost)
    out = logs / f"boosted_{boost}_{path.name}"
    out.write_text(yaml.safe_dump(config))
    return str(out)


def run(count: int, args: argparse.Namespace, logs: Path) -> None:
    from walk_mpc.tools.launch_graph import GraphProcesses

    config = boosted_config(args.priority_boost, logs) if args.priority_boost else None
    graphs: list = []
    probes: List[subprocess.Popen] = []
    environ = dict(os.environ)
    cpus = sorted(os.sched_getaffinity(0))
    try:
        for i in range(count):
            os.environ["ROS_DOMAIN_ID"] = str(BASE_DOMAIN + i)
            if args.pin:  # as `taskset -c <cpu>` before the robot's launch: its processes inherit the CPU
                os.sched_setaffinity(0, {cpus[i % len(cpus)]})
            if args.mode == "bringup":
                log = open(logs / f"n{count}_robot{i}_bringup.log", "w")
                graphs.append(_Bringup(subprocess.Popen(
                    [sys.executable, "-P", "-m", "walk_mpc.nodes.bringup", "--robot", "talos", "--sim",
                     "kinematic"], stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))))
            else:
                offset = i * HARDWARE_PERIOD / count if args.phases == "spread" else None
                graph = GraphProcesses("talos", "kinematic", config=config,
                                       log_dir=logs / f"n{count}_robot{i}",
                                       control_process=args.mode == "control", phase_offset=offset)
                graphs.append(graph.start())
            command = [sys.executable, "-P", __file__, "--probe", "--duration", str(args.duration),
                       "--priority-boost", str(args.priority_boost)]
            if args.recorder:
                command += ["--record", str(logs / f"n{count}_robot{i}.mcap")]
            probes.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                           env=dict(os.environ)))
    finally:
        os.environ.clear()
        os.environ.update(environ)
        os.sched_setaffinity(0, cpus)
    results: List[dict] = [{} for _ in probes]
    try:
        for i, p in enumerate(probes):
            line = p.stdout.readline()
            while line and not line.startswith(("READY", "RESULT")):
                line = p.stdout.readline()
            if not line.startswith("READY"):
                results[i] = json.loads(line[7:]) if line.startswith("RESULT") else {"error": "probe exited"}
        pids = {f"{name}@{i}": proc.pid for i, g in enumerate(graphs) for name, proc in g.processes.items()}
        pids.update({f"probe@{i}": p.pid for i, p in enumerate(probes)})
        standing: Dict[str, float] = {}
        if args.standing > 0:  # every graph runs, no robot walks yet
            start_cpu, started = {key: cpu_seconds(pid) for key, pid in pids.items()}, time.monotonic()
            time.sleep(args.standing)
            end_cpu, wall = {key: cpu_seconds(pid) for key, pid in pids.items()}, time.monotonic() - started
            standing = {key: (end_cpu[key] - start_cpu[key]) / wall for key in pids}
        before = {key: cpu_seconds(pid) for key, pid in pids.items()}
        started = time.monotonic()
        for p in probes:
            if p.poll() is None:
                p.stdin.write("GO\n")
                p.stdin.flush()
        for i, p in enumerate(probes):
            for line in p.stdout:
                if line.startswith("RESULT"):
                    results[i] = results[i] or json.loads(line[7:])
                    break
            wall = time.monotonic() - started
            if i == 0:
                after = {key: cpu_seconds(pid) for key, pid in pids.items()}
                window = wall
        load = os.getloadavg()[0]
    finally:
        for p in probes:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:  # a stuck probe: the graphs are stopped all the same
                print(f"probe {p.pid} did not exit: killed", file=sys.stderr)
                p.kill()
                p.wait()
        for g in graphs:
            g.stop()
    phases = "free" if args.mode == "bringup" else args.phases
    print(f"\n## {count} robot(s), {args.mode}, phases {phases}, {args.duration:.0f} s walking window"
          f"{' with the recorder' if args.recorder else ''}, load average {load:.1f}")
    print("| robot | samples measured (sim) / latency messages | missed 10 ms deadlines | of which the "
          f"sample sent late | sim late wake-ups | latency over {CONTROL_PERIOD_MS:.0f} ms | "
          "latency median / p99 / max [ms] | walk |\n|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(results):
        if "error" in r:
            print(f"| {i} | - | - | - | - | - | - | {r['error']} |")
            continue
        missed = r["sim_missed"] if r["sim_missed"] is not None else r["missed"]
        measured = r["sim_measured"] if r["sim_measured"] is not None else r["samples"]
        share = 100.0 * missed / measured if measured else float("nan")
        latency = " / ".join(f"{v:.1f}" for v in r["latency_ms"]) or "-"
        late_wakeups = "-" if r["sim_late_wakeups"] is None else r["sim_late_wakeups"]
        print(f"| {i} | {measured} / {r['samples']} | {missed} ({share:.2f} %) | "
              f"{r['missed_after_late_sample']} | {late_wakeups} | {r['over_control_period']} | {latency} | "
              f"{r['walk']} after step {r['steps']} |")
    kinds: Dict[str, List[float]] = {}
    still: Dict[str, List[float]] = {}
    for key, start in before.items():
        kinds.setdefault(key.split("@")[0], []).append((after[key] - start) / window)
        still.setdefault(key.split("@")[0], []).append(standing.get(key, float("nan")))
    print("\n| process | CPU per robot standing [% of a core] | walking | all robots walking |"
          "\n|---|---|---|---|")
    for kind, shares in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
        print(f"| {kind} | {100 * np.mean(still[kind]):.0f} | {100 * np.mean(shares):.0f} | "
              f"{100 * sum(shares):.0f} |")
    total = sum(sum(s) for s in kinds.values())
    total_still = sum(sum(s) for s in still.values())
    cores = os.cpu_count()
    print(f"| total | {100 * total_still / count:.0f} | {100 * total / count:.0f} | {100 * total:.0f} "
          f"(of {cores} cores) |", flush=True)


class _Bringup:
    """A robot's graph as one process (``--mode bringup``): GraphProcesses' ``processes`` and ``stop``."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.processes = {"bringup": process}

    def stop(self) -> None:
        process = self.processes["bringup"]
        if process.poll() is None:
            process.send_signal(2)  # SIGINT: a clean shutdown
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", type=int, nargs="*", default=[1, 2, 4], help="robot counts to run")
    parser.add_argument("--duration", type=float, default=60.0, help="[s] walking window")
    parser.add_argument("--standing", type=float, default=10.0,
                        help="[s] CPU measured this long with every graph running before the walks (0: not)")
    parser.add_argument("--recorder", action="store_true", help="each probe records an MCAP (as the demo)")
    parser.add_argument("--mode", choices=("processes", "control", "bringup"), default="processes",
                        help="a process per node (as launched), the control nodes in one process beside the "
                             "sim's, or one process per robot")
    parser.add_argument("--phases", choices=("spread", "free"), default="spread",
                        help="spread: robot i's sim sends its samples at i/N of the 10 ms period (sim "
                             "phase_offset); free: each sim's timer starts with its node (one process per "
                             "robot in --mode bringup is always free)")
    parser.add_argument("--priority-boost", type=int, default=0,
                        help="add this to every node's realtime_priority, and run the probes at SCHED_FIFO "
                             "priority this (measure above the other jobs of a shared machine; --mode "
                             "processes and control)")
    parser.add_argument("--pin", action="store_true",
                        help="robot i's processes (sim, control nodes, probe) started on CPU i mod the CPU "
                             "count, as `taskset -c` before each robot's launch")
    parser.add_argument("--cpu-latency", type=int, default=-1,
                        help="[us] hold a PM QoS CPU latency request this long while the robots run (0: idle "
                             "CPUs never halt; -1: none)")
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--record", default="", help=argparse.SUPPRESS)
    parser.add_argument("--log-dir", default="", help="keep the node logs (and recordings) there")
    args = parser.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if args.probe:
        return probe(args)
    with contextlib.ExitStack() as stack:
        if args.cpu_latency >= 0:
            from walk_mpc.tools.cpu_latency import cpu_latency_request

            held = stack.enter_context(cpu_latency_request(args.cpu_latency))
            print(f"CPU latency request of {args.cpu_latency} us {'held' if held else 'NOT held'}",
                  flush=True)
        if args.log_dir:
            Path(args.log_dir).mkdir(parents=True, exist_ok=True)
            logs = Path(args.log_dir)
        else:
            logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="multi_robot_")))
        for count in args.robots:
            run(count, args, logs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
