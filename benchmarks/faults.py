"""Fault drill: each control node SIGKILLed during a walk on MuJoCo, then restarted (issue 17).

The graph runs as processes (:class:`walk_mpc.tools.launch_graph.GraphProcesses`, Talos, ``--sim`` mujoco by
default, node logs in a temporary directory). For each node (walk_behavior, mpc_planner, ik) and each phase
(``stand``: while standing; ``step2``: just after step 1 touched down; ``late``: in the last step), a 4-step
0.2 m walk is sent, the node is killed at that phase, and the drill measures:

* the walk's end: the result (or the client's error when walk_behavior died) and its time after the kill;
* whether the robot fell (``sim/fall``) in the 3 s after the kill, or in the walk after the restart (and 1 s
  after it: the ``after`` column then says so; the drill stops there, the robot lies on the ground);
* the largest distance of a CoM reference (``mpc/com_reference``) to the feet of the plan after the kill;
* recovery: the time from the node's restart to the loop running again (ik ticks on references), split into
  the process start (restart to the node's first output: interpreter, imports, model, then DDS discovery of
  its inputs and of its output by the drill; in parentheses the part up to the end of the node's
  construction, its first log line) and the node's own recovery (first output to the loop running again);
* a 2-step walk after the restart: its result.

Then the rows that meet issue 17's acceptance (:func:`passed`); the exit status is 1 unless all do.

Printed as a table. A benchmark, not a test: it runs in real time on the physics (about 20 s per row).

    bash -c 'source tools/env.sh && source install/setup.bash && python -P benchmarks/faults.py'

``--in-process``: the same drill without ROS (:mod:`walk_mpc.core.control.fault_drill`: the three controllers
wired as the graph on one MuJoCo plant, simulated time), each node killed at ``--times`` seconds into a 4-step
0.2 m walk of 0.8 s steps (default: 16 times covering sway, early and late swing and double support of each
step, and the catch) and once standing; restarted 1 s after the walk ended, a 2-step walk ``--stand`` seconds
later. Columns: the gait phase of the kill, the walk's result and its sensor time after the kill, a fall (the
in-process loop's fall detection on the simulator's truth), the largest distance of a CoM reference to the
nearest sole, the recovery (sensor time from the restart to the ik's first command on a reference; for
walk_behavior its first status), and the walk after the restart. About 2 s of wall time per row.

    python -P benchmarks/faults.py --in-process [--nodes ik] [--times 1.6 2.3] [--stand 1.0]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import signal
import tempfile
import threading
import time
from typing import List

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, Float64MultiArray

from walk_mpc.core.control.fault_drill import lateral_width
from walk_mpc.core.walk import footsteps
from walk_mpc.core.walk.behavior import WalkErrorCode
from walk_mpc.graph import dds_environment
from walk_mpc.msg import ComReference, FootstepPlan, TickTiming, WalkFeedback
from walk_mpc.nodes.conversions import timeline_from_msg
from walk_mpc.nodes.ik import is_reference_tick
from walk_mpc.tools.launch_graph import GraphProcesses
from walk_mpc.tools.send_walk import ActionServerLost, send_walk, walk_action_client

NODES = ("walk_behavior", "mpc_planner", "ik")
PHASES = ("stand", "step2", "late")
#: Kill times [s into the walk] of --in-process: 0.6 s sway, then per 0.8 s step 0.5 s single support (early
#: and late swing) and 0.3 s double support, the catch.
IN_PROCESS_TIMES = (0.1, 0.4, 0.7, 0.9, 1.2, 1.4, 1.6, 1.75, 1.9, 2.1, 2.3, 2.6, 2.9, 3.2, 3.5, 3.8)


class Probe:
    """The drill's ROS side: the action client, the fall flag, the plans, the references, the ik's ticks."""

    def __init__(self) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("fault_drill", context=self.context)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.lock = threading.Lock()
        self.fallen = False
        self.fall_times: List[float] = []
        self.plan = None
        self.coms: List[tuple] = []  # (monotonic time, x, y) of every reference
        self.ticks = 0
        self.statuses = 0  # walk/status messages (walk_behavior ticks on samples)
        self.outputs = {name: 0 for name in NODES}  # messages of each node (status, reference, ik timing)
        self.deadlines = (0.0, 0.0)  # the sim's (missed, measured) totals
        self.node.create_subscription(WalkFeedback, "walk/status", self._on_status, 100)
        self.node.create_subscription(Bool, "sim/fall", self._on_fall, latched)
        self.node.create_subscription(FootstepPlan, "walk/plan", self._on_plan, latched)
        self.node.create_subscription(ComReference, "mpc/com_reference", self._on_reference, 100)
        self.node.create_subscription(TickTiming, "ik/timing", self._on_tick, 100)
        self.node.create_subscription(Float64MultiArray, "sim/deadlines", self._on_deadlines,
                                      QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                                                 durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.topic = self.node.resolve_topic_name("mpc/com_reference")
        self.client = walk_action_client(self.node)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _on_status(self, msg) -> None:
        with self.lock:
            self.statuses += 1
            self.outputs["walk_behavior"] += 1

    def _on_deadlines(self, msg) -> None:
        if len(msg.data) >= 2:
            with self.lock:
                self.deadlines = (msg.data[0], msg.data[1])

    def _on_fall(self, msg) -> None:
        with self.lock:
            self.fallen = bool(msg.data)
            if msg.data:
                self.fall_times.append(time.monotonic())

    def _on_plan(self, msg) -> None:
        with self.lock:
            self.plan = msg

    def _on_reference(self, msg) -> None:
        with self.lock:
            self.outputs["mpc_planner"] += 1
        if msg.com_position:
            with self.lock:
                self.coms.append((time.monotonic(), msg.com_position[0].x, msg.com_position[0].y))

    def _on_tick(self, msg) -> None:
        with self.lock:
            self.outputs["ik"] += 1
        if is_reference_tick(msg, self.topic):
            with self.lock:
                self.ticks += 1

    def wait(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate():
                    return True
            time.sleep(0.02)
        return False

    def steps(self, count: int):
        with self.lock:
            final = timeline_from_msg(self.plan).phases[-1]
        left, right = final.left, final.right
        return footsteps.walk_forward(left, right, 0.2 * (count - 1), 0.2, width=lateral_width(left, right),
                                      duration=0.9)

    def walk(self, steps, on_feedback=None):
        return send_walk(self.node, steps, True, on_feedback, server_timeout=30.0, result_timeout=60.0,
                         client=self.client)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=5.0)
        self.node.destroy_node()
        self.context.try_shutdown()


def shown(result: str) -> str:
    """A walk's result as the tables print it: SUCCEEDED for the error code NONE."""
    return "SUCCEEDED" if result == "NONE" else result


def outcome_text(outcome) -> str:
    if isinstance(outcome, str):
        return outcome
    if isinstance(outcome, Exception):
        return f"{type(outcome).__name__}"
    return WalkErrorCode(outcome.error_code).name


def drill(processes: GraphProcesses, probe: Probe, node: str, phase: str) -> dict:
    """One row: kill ``node`` at ``phase`` of a 4-step walk, restart it, walk 2 steps."""
    row = {"node": node, "phase": phase}
    fired = threading.Event()

    def on_feedback(fb) -> None:
        index = fb.walk.current_step_index
        if (phase == "step2" and index >= 1) or (phase == "late" and index >= 3):
            fired.set()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        killed_at = None
        if phase == "stand":
            killed_at = time.monotonic()
            processes.stop_node(node, signal.SIGKILL)
            if node == "walk_behavior":  # no server to send a goal to: nothing walks
                walk = pool.submit(lambda: "no server")
            else:
                walk = pool.submit(probe.walk, probe.steps(4))
        else:
            walk = pool.submit(probe.walk, probe.steps(4), on_feedback)
            fired.wait(30.0)
            killed_at = time.monotonic()
            processes.stop_node(node, signal.SIGKILL)
        try:
            outcome = walk.result(timeout=90.0)
        except (ActionServerLost, TimeoutError) as exc:
            outcome = exc
    ended = time.monotonic() - killed_at
    row["result"] = outcome_text(outcome)
    row["end_s"] = ended
    time.sleep(max(0.0, 3.0 - ended))
    with probe.lock:
        row["fell"] = any(t > killed_at for t in probe.fall_times) or probe.fallen
        final = timeline_from_msg(probe.plan).phases[-1] if probe.plan is not None else None
        coms = [(x, y) for t, x, y in probe.coms if t > killed_at]
    if final is not None and coms:
        feet = (final.left, final.right)
        row["max_ref_m"] = max(min(math.hypot(x - f.position[0], y - f.position[1]) for f in feet)
                               for x, y in coms)
    else:
        row["max_ref_m"] = float("nan")
    restart, restart_wall = time.monotonic(), time.time()
    processes.start_node(node)
    with probe.lock:
        ticks = probe.ticks
        statuses = probe.statuses
        outputs = probe.outputs[node]
    up = probe.wait(lambda: probe.outputs[node] > outputs, 60.0)
    started = time.monotonic()
    row["startup_s"] = started - restart if up else float("nan")
    row["constructed_s"] = processes.first_log_after(node, restart_wall) if up else float("nan")
    ok = probe.wait(lambda: probe.ticks > ticks and probe.statuses > statuses, 60.0)
    row["loop_s"] = time.monotonic() - started if ok and up else float("nan")
    ok = ok and probe.wait(lambda: probe.ticks >= ticks + 25 and probe.statuses >= statuses + 25, 60.0)
    row["recovery_s"] = time.monotonic() - restart if ok else float("nan")
    if row["fell"]:
        row["after"] = "not tried (fell)"
        return row
    time.sleep(1.0)  # the restarted node's first plan / references
    with probe.lock:
        before = probe.deadlines
    walked = time.monotonic()
    try:
        after = probe.walk(probe.steps(2))
        # As a client does (the refusals say so): a goal refused while the robot does not stand on Stand's
        # feet yet, or while the walk_behavior has not heard a link yet ("no /mpc/timing received yet: is the
        # mpc_planner running?", a restarted walk_behavior before discovery), is sent again, up to 3 s.
        while time.monotonic() < walked + 3.0 and (after.error_code == WalkErrorCode.INCONSISTENT_STEPS
                                                   or "received yet" in after.error_msg):
            time.sleep(0.1)
            after = probe.walk(probe.steps(2))
        row["after"] = outcome_text(after)
    except (ActionServerLost, TimeoutError) as exc:
        row["after"] = type(exc).__name__
    time.sleep(1.0)  # standing after it
    with probe.lock:
        missed, measured = (now - then for now, then in zip(probe.deadlines, before))
        if any(t > walked for t in probe.fall_times) or probe.fallen:
            row["fell"] = True
            row["after"] += " (fell)"
    row["after_missed"] = f"{missed:.0f}/{measured:.0f}"
    return row


def passed(row: dict) -> bool:
    """Issue 17's acceptance of a graph row: the walk ended within 2 s (walk_behavior: the client told within
    1 s, or no walk to end), never SUCCEEDED (NONE) for a killed planner or ik, no fall, no CoM reference
    beyond 1.5 m of the feet, the 2-step walk after the restart succeeded."""
    ended = row["result"] == "no server" or row["end_s"] <= (1.0 if row["node"] == "walk_behavior" else 2.0)
    succeeded = row["node"] != "walk_behavior" and row["result"] == "NONE"
    reach = math.isnan(row["max_ref_m"]) or row["max_ref_m"] <= 1.5
    return ended and not succeeded and not row["fell"] and reach and row["after"] == "NONE"


def in_process(nodes, times, stand: float, sim: str) -> int:
    """The drill in process (module docstring): one row per node and kill time, then the table; the exit
    status is 1 when a row fails issue 17's acceptance."""
    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.core.control.fault_drill import DrillGraph, drill
    from walk_mpc.core.sim.kinematic import KinematicSim

    robot = RobotModel(RobotModel.Parameters(robot="talos_reduced"))
    if sim == "mujoco":
        from walk_mpc.core.sim.mujoco import MujocoSim

        def make():
            return MujocoSim(KinematicSim.Parameters(), robot=robot)
    else:
        def make():
            return KinematicSim(KinematicSim.Parameters(), robot=robot)
    rows = []
    for node in nodes:
        for kill_at in (*times, None):
            graph = DrillGraph(robot, make())
            graph.run(1.0)
            started = time.perf_counter()
            row = drill(graph, node, kill_at, settle=stand)
            rows.append(row)
            print(f"{row.node:13s} {'-' if kill_at is None else f'{kill_at:.2f}':>5s} {row.phase:20s} "
                  f"{row.result:16s} end {row.end_s:5.2f} s  fell {row.fell!s:5s} max ref "
                  f"{row.max_reference_m:.3f} m  recovery {row.recovery_s:.2f} s  after {row.after or '-'} "
                  f"{'' if row.passed else 'FAILS ' + (row.fall_reason or row.after_message)} "
                  f"[{time.perf_counter() - started:.0f} s]", flush=True)
    print("\n| node | killed at [s] | phase | result | end after kill [s] | fell | max CoM ref to feet [m] | "
          "recovery [s] | walk after restart |\n|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        end = "-" if math.isnan(r.end_s) else f"{r.end_s:.2f}"
        fell = f"**yes** ({r.fall_reason})" if r.fell else "no"
        killed = "standing" if r.kill_at is None else f"{r.kill_at:.2f}"
        print(f"| {r.node} | {killed} | {r.phase} | {shown(r.result)} | {end} | {fell} | "
              f"{r.max_reference_m:.3f} | {r.recovery_s:.2f} | {shown(r.after) or '-'} |")
    passed = sum(r.passed for r in rows)
    print(f"\n{passed} of {len(rows)} rows meet the acceptance")
    return 0 if passed == len(rows) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", default="mujoco", help="simulator backend (mujoco or kinematic)")
    parser.add_argument("--nodes", nargs="*", default=list(NODES), choices=NODES)
    parser.add_argument("--phases", nargs="*", default=list(PHASES), choices=PHASES)
    parser.add_argument("--in-process", action="store_true", help="the drill without ROS (module docstring)")
    parser.add_argument("--times", nargs="*", type=float, default=list(IN_PROCESS_TIMES),
                        help="--in-process: kill times [s into the walk]")
    parser.add_argument("--log-dir", default="", help="keep the node logs there (default: a temporary dir)")
    parser.add_argument("--stand", type=float, default=1.0,
                        help="--in-process: seconds from the restart to the walk after it")
    args = parser.parse_args()
    if args.in_process:
        return in_process(args.nodes, args.times, args.stand, args.sim)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update(dds_environment())  # the drill's client as the graph's nodes: a restart heard at once
    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        logs = args.log_dir or temporary
        processes = GraphProcesses("talos", args.sim, log_dir=logs)
        processes.start()
        probe = Probe()
        try:
            if not probe.wait(lambda: probe.ticks > 25 and probe.plan is not None, 120.0):
                raise SystemExit(f"the graph did not start: exited {processes.failed()}")
            for node in args.nodes:
                for phase in args.phases:
                    row = drill(processes, probe, node, phase)
                    rows.append(row)
                    print(f"{row['node']:13s} {row['phase']:6s} {row['result']:22s} "
                          f"end {row['end_s']:5.2f} s  "
                          f"fell {row['fell']!s:5s}  max ref {row['max_ref_m']:6.3f} m  recovery "
                          f"{row['recovery_s']:5.2f} s (start {row.get('startup_s', math.nan):.2f}, of which "
                          f"constructed {row.get('constructed_s', math.nan):.2f}, + loop "
                          f"{row.get('loop_s', math.nan):.2f})  after restart {row['after']} "
                          f"(missed deadlines {row.get('after_missed', '-')})", flush=True)
                    if row["fell"]:
                        print("the robot fell: the remaining rows are not meaningful", flush=True)
                        break
                if rows and rows[-1]["fell"]:
                    break
        finally:
            probe.close()
            processes.stop()
    print("\n| node | phase | result | end after kill [s] | fell | max CoM ref to feet [m] | recovery [s] | "
          "of which process start [s] (constructed) | node up to loop [s] | walk after restart | "
          "its missed deadlines |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['node']} | {r['phase']} | {shown(r['result'])} | {r['end_s']:.2f} | {r['fell']} | "
              f"{r['max_ref_m']:.3f} | {r['recovery_s']:.2f} | {r.get('startup_s', float('nan')):.2f} "
              f"({r.get('constructed_s', float('nan')):.2f}) | "
              f"{r.get('loop_s', float('nan')):.2f} | {shown(r['after'])} | {r.get('after_missed', '-')} |")
    ok = sum(passed(r) for r in rows)
    print(f"\n{ok} of {len(rows)} rows meet the acceptance")
    return 0 if ok == len(rows) == len(args.nodes) * len(args.phases) else 1


if __name__ == "__main__":
    raise SystemExit(main())
