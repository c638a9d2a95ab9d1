"""The walk_mpc demo (`make demo`): a simulated robot walks through the whole node graph.

1. Starts the graph of config/graph.yaml as separate processes (as ``ros2 launch walk_mpc walk.launch.py``).
2. Sends a walk goal on the ``walk`` action exactly as ``ros2 action send_goal walk walk_mpc/action/Walk
   ... --feedback`` would, and prints live progress from the feedback (step i of N, substate, flags,
   t_step_rem), then the result.
3. Records the graph's topics to ``walk.mcap`` (ROS 2 CDR; Foxglove, ``ros2 bag``), with the robot model
   (``/robot_description`` and ``/tf`` of every sample: Foxglove shows the robot walking), and plots
   ``walk.png`` (CoM, ZMP planned and measured, footsteps and support polygons); with ``--video`` (default
   with ``--sim mujoco``) renders the walk into ``walk.mp4`` (MuJoCo offscreen, camera following the robot,
   planned footsteps on the floor).
4. Prints loop timing during the walk: MPC and IK time per control tick, and the sensor -> joint command
   latency through the graph as the sim measures it (median, p99) with its missed deadlines (samples
   whose command reached the sim after the next sample was published, ``sim/latency`` status; and the
   sim's running count since its start, ``sim/deadlines``); then the same before the walk (graph
   start-up) on its own line.

The demo's own nodes (action client, loop monitor, recorder) are spun by one
:class:`~walk_mpc.tools.spin_thread.SpinThread`: every entity is created before it starts or on it, and
destroyed after it stopped; if it dies, the demo stops at once with its error.

    python -m walk_mpc.demo [--robot talos|g1|romeo|icub|solo12] [--sim kinematic|mujoco] [--steps 10]
                            [--length 0.2] [--namespace robot1] [--out-dir .] [--video | --no-video]
                            [--balance]

``--balance`` runs the graph with the robot's balance setting (config/graph.yaml ``balance``, Talos:
config/balance_talos.yaml: the stabilizer, step adjustment and standing recovery steps; README "Balance").

The robot is a robot of config/graph.yaml (an unknown name is an error listing them); the step width and
duration default to its description's (config/robots/<model>.yaml: the standing sole distance, single +
double support), the step length to 0.2 m within its step limits.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Bool, Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from walk_mpc import gesture_demo
from walk_mpc.core.errors import WalkMpcError
from walk_mpc.core.walk import footsteps
from walk_mpc.core.walk.behavior import WalkFlags
from walk_mpc.graph import load_graph
from walk_mpc.msg import ComReference, FootstepPlan, SensorState, TickTiming, WalkFeedback
from walk_mpc.nodes._common import LATCHED_QOS
from walk_mpc.nodes.ik import is_reference_tick
from walk_mpc.nodes.sim import STATUS_DEADLINE_MISSED, STATUS_SAMPLE_LATE
from walk_mpc.tools.launch_graph import GraphProcesses
from walk_mpc.tools.recorder import RecorderNode, graph_robot_frames
from walk_mpc.tools.send_walk import (
    DEFAULT_FEET,
    ActionServerLost,
    current_feet,
    format_outcome,
    send_walk,
    walk_action_client,
)
from walk_mpc.tools.spin_thread import SpinThread, SpinThreadDied

RECORDED_TOPICS = [
    ("sensor_state", SensorState, 1000),
    ("walk/plan", FootstepPlan, LATCHED_QOS),
    ("walk/status", WalkFeedback, 100),
    ("mpc/com_reference", ComReference, 100),
    ("mpc/timing", TickTiming, 100),
    ("ik/timing", TickTiming, 100),
    ("sim/latency", TickTiming, 100),
    ("sim/deadlines", Float64MultiArray, LATCHED_QOS),
    ("joint_trajectory", JointTrajectory, 100),
    ("sim/fall", Bool, LATCHED_QOS),
    # what rviz and Foxglove draw around the robot (with /tf and /robot_description): footsteps, support
    # region, CoM and ZMP targets, the CoM and ZMP previews
    ("mpc/markers", "visualization_msgs/msg/MarkerArray", 100),
    ("mpc/com_path", "nav_msgs/msg/Path", 100),
    ("mpc/zmp_path", "nav_msgs/msg/Path", 100),
]


class LoopMonitor(Node):
    """Collects per-tick timings and the sensor -> joint command latency (measured by the sim node: from
    publishing a SensorState to receiving the JointTrajectory computed from it, ``sim/latency``), whether
    each of those commands missed its deadline and whether its sample went out late (``sim/latency``
    status), and the sim's running deadline count (``sim/deadlines``: missed, measured, share, the sim's
    late wake-ups and the largest)."""

    def __init__(self, **kwargs) -> None:
        super().__init__("walk_mpc_demo_monitor", **kwargs)
        self.timing: Dict[str, List[float]] = {"mpc": [], "ik": [], "mpc_tick": [], "ik_tick": []}
        self.latency: List[float] = []
        self.missed: List[bool] = []  # per latency sample: its command came after the next sample
        self.sample_late: List[bool] = []  # per latency sample: the sim sent it after a late wake-up
        # the sim's (missed, measured, share, late wake-ups, largest wake-up lateness [s])
        self.deadlines: Optional[Tuple[int, int, float, int, float]] = None
        self.ik_reference_ticks = 0  # ik ticks on a reference: the chain sensor -> planner -> ik is up
        self._reference_topic = self.resolve_topic_name("mpc/com_reference")
        self._lock = threading.Lock()
        self.create_subscription(TickTiming, "mpc/timing", lambda m: self._on_timing("mpc", m), 100)
        self.create_subscription(TickTiming, "ik/timing", lambda m: self._on_timing("ik", m), 100)
        self.create_subscription(TickTiming, "sim/latency", self._on_latency, 100)
        self.create_subscription(Float64MultiArray, "sim/deadlines", self._on_deadlines, LATCHED_QOS)

    def mark(self) -> tuple:
        """Current sizes of the series (see :meth:`since`)."""
        with self._lock:
            return len(self.latency), {name: len(values) for name, values in self.timing.items()}

    def since(self, mark: Optional[tuple] = None) -> Dict[str, List[float]]:
        """Every series (timings and ``latency``) from ``mark`` on (None: all of it)."""
        with self._lock:
            latency_start, starts = mark if mark else (0, dict.fromkeys(self.timing, 0))
            series = {name: list(values[starts[name]:]) for name, values in self.timing.items()}
            series["latency"] = list(self.latency[latency_start:])
            series["missed"] = list(self.missed[latency_start:])
            series["sample_late"] = list(self.sample_late[latency_start:])
            return series

    def _on_latency(self, msg: TickTiming) -> None:
        with self._lock:
            self.latency.append(msg.tick_time)
            self.missed.append(bool(msg.status & STATUS_DEADLINE_MISSED))
            self.sample_late.append(bool(msg.status & STATUS_SAMPLE_LATE))

    def _on_deadlines(self, msg: Float64MultiArray) -> None:
        if len(msg.data) >= 3:
            late = (int(msg.data[3]), float(msg.data[4])) if len(msg.data) >= 5 else (0, 0.0)
            with self._lock:
                self.deadlines = (int(msg.data[0]), int(msg.data[1]), float(msg.data[2]), *late)

    def _on_timing(self, name: str, msg: TickTiming) -> None:
        with self._lock:
            self.timing[name].append(msg.solve_time)
            self.timing[f"{name}_tick"].append(msg.tick_time)
            if name == "ik" and is_reference_tick(msg, self._reference_topic):
                self.ik_reference_ticks += 1


def _stats(values: Sequence[float]) -> str:
    if not values:
        return "no samples"
    data = np.asarray(values) * 1e6
    return f"median {np.median(data):8.0f} us   p99 {np.percentile(data, 99):8.0f} us   ({len(data)} ticks)"


def _missed(missed: Sequence[bool]) -> str:
    """'missed deadlines 3 (0.4 %)' of per-sample flags."""
    count = sum(missed)
    share = 100.0 * count / len(missed) if missed else 0.0
    return f"missed deadlines {count} ({share:.1f} %)"


class Progress:
    """Prints a progress line when the step, substate or flags change (and every second otherwise)."""

    def __init__(self, total_steps: int) -> None:
        self.total = total_steps
        self._last = None
        self._last_time = 0.0

    def __call__(self, feedback) -> None:
        walk = feedback.walk
        flags = WalkFlags(walk.status_flags)
        substates = (WalkFlags.WALK_SUBSTATE_SWAYING, WalkFlags.WALK_SUBSTATE_STEPPING,
                     WalkFlags.WALK_SUBSTATE_CATCHING)
        substate = next((f.name.replace("WALK_SUBSTATE_", "") for f in substates if f in flags), "STAND")
        other = [f.name for f in (WalkFlags.WALK_WARNING_INSUFFICIENT_STEP_DATA,
                                  WalkFlags.WALK_ERROR_INCONSISTENT_STEPS) if f in flags]
        key = (walk.current_step_index, substate, tuple(other))
        now = time.monotonic()
        if key == self._last and now - self._last_time < 1.0:
            return
        self._last, self._last_time = key, now
        bar = "#" * walk.current_step_index + "." * max(0, self.total - walk.current_step_index)
        print(f"  step {walk.current_step_index:2d} of {self.total} [{bar}] {substate:9s} "
              f"t_step_rem {walk.t_step_rem:5.2f} s  next_needed {walk.next_step_index_needed:2d}  "
              f"flags {walk.status_flags:#04x} {' '.join(other)}", flush=True)


def robot_gait(robot: str, length: Optional[float], width: Optional[float],
               duration: Optional[float]) -> Tuple[float, float, float]:
    """(step length [m], sole distance [m], step duration [s]) of the demo's walk for graph robot ``robot``:
    the given values, else its description's (Talos without a model in graph.yaml: 0.2 m, 0.17 m, 1.1 s).

    Raises:
        ConfigError: ``robot`` is not a robot of config/graph.yaml (the message lists them).
    """
    spec = load_graph().robot(robot)
    defaults = (0.2, 0.17, 1.1)
    if spec.model:
        from walk_mpc.core.body.robot import RobotModel

        model = RobotModel(RobotModel.Parameters(robot=spec.model))
        limits = model.step_limits()
        defaults = (min(0.2, limits.max_forward), round(model.standing_sole_distance(), 4),
                    limits.single_support + limits.double_support)
    given = (length, width, duration)
    return tuple(d if v is None else float(v) for v, d in zip(given, defaults))


class GraphStartError(WalkMpcError, RuntimeError):
    """The demo's graph did not start, or another graph shares its domain and namespace."""


def other_graph(node: Node, topic: str = "sensor_state") -> Optional[str]:
    """Why another graph shares this demo's DDS domain and namespace, or None: more than one publisher on
    ``topic`` (the sim's SensorState; one per robot). Two sims in one domain mix their samples: the nodes
    reject the other's stamps, the walk stalls or fails far from its cause."""
    publishers = node.get_publishers_info_by_topic(node.resolve_topic_name(topic))
    if len(publishers) <= 1:
        return None
    names = sorted(f"{info.node_namespace.rstrip('/')}/{info.node_name}" for info in publishers)
    domain = os.environ.get("ROS_DOMAIN_ID", "0")
    return (f"{len(publishers)} publishers on '{node.resolve_topic_name(topic)}' in ROS_DOMAIN_ID {domain} "
            f"({', '.join(names)}), expected this demo's sim alone: another robot's graph runs in this "
            "domain and namespace; stop it, or run the demo with another ROS_DOMAIN_ID or --namespace")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    walkers = ", ".join(r.name for r in load_graph().robots if r.legs)
    parser.add_argument("--robot", default="talos",
                        help=f"a walking robot of config/graph.yaml ({walkers}) or a quadruped of "
                             "config/robots (solo12, go2: seed 003's gestures, --sim mujoco)")
    parser.add_argument("--namespace", default="", help="namespace of the graph and the demo's nodes")
    parser.add_argument("--sim", default="kinematic", help="kinematic or mujoco")
    parser.add_argument("--config", default=None, help="parameters file (default: the robot's)")
    parser.add_argument("--steps", type=int, default=10, help="steps (the last closes the feet)")
    parser.add_argument("--length", type=float, default=None,
                        help="[m] step length (default: 0.2 within the robot's step limits)")
    parser.add_argument("--width", type=float, default=None,
                        help="[m] lateral distance between the soles (default: the robot's standing one)")
    parser.add_argument("--duration", type=float, default=None,
                        help="[s] step duration, single + double support (default: the robot's)")
    parser.add_argument("--out-dir", type=Path, default=Path("."), help="where walk.mcap and walk.png go")
    parser.add_argument("--timeout", type=float, default=120.0, help="[s] give up on the walk after this")
    parser.add_argument("--video", action=argparse.BooleanOptionalAction, default=None,
                        help="render walk.mp4 from the recording (default: with --sim mujoco)")
    parser.add_argument("--control-process", action="store_true",
                        help="run the control nodes in one process beside the sim (ros2 launch: "
                             "control_process:=true), as several robots on one machine need")
    parser.add_argument("--phase-offset", type=float, default=None,
                        help="[s] the sim's samples at k * period + this on the system clock (ros2 launch: "
                             "phase_offset:=); several robots on one machine: a different one each")
    parser.add_argument("--balance", action="store_true",
                        help="the robot's balance setting over its parameters file (ros2 launch: "
                             "balance:=true; Talos: config/balance_talos.yaml)")
    args = parser.parse_args(argv)
    if args.robot not in [r.name for r in load_graph().robots] and gesture_demo.gesturing_robot(args.robot):
        print(f"robot: {args.robot}")  # a quadruped: seed 003's gestures in process (the graph walks bipeds)
        if args.sim != "mujoco":
            print(f"demo: {args.robot} gestures on MuJoCo physics: use --sim mujoco", file=sys.stderr)
            return 2
        return gesture_demo.main(["--robot", args.robot, "--out-dir", str(args.out_dir)])
    args.video = args.sim == "mujoco" if args.video is None else args.video
    try:
        gait = robot_gait(args.robot, args.length, args.width, args.duration)
        robot_frames = graph_robot_frames(args.robot, args.namespace, args.config)  # for /tf in walk.mcap
    except WalkMpcError as exc:  # an unknown robot: the message lists the known ones
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    args.length, args.width, args.duration = gait
    args.out_dir.mkdir(parents=True, exist_ok=True)
    mcap_path, png_path = args.out_dir / "walk.mcap", args.out_dir / "walk.png"

    print(f"robot: {args.robot}")
    where = f", namespace /{args.namespace}" if args.namespace else ""
    where += ", control nodes in one process" if args.control_process else ""
    where += ", balance setting" if args.balance else ""
    print(f"walk_mpc demo: robot {args.robot}, simulator {args.sim}{where}; "
          f"node logs in {args.out_dir / 'logs'}")
    try:  # (a balance setting on a plant it does not apply to: the message names those it does)
        graph = GraphProcesses(args.robot, args.sim, args.config, log_dir=args.out_dir / "logs",
                               namespace=args.namespace, control_process=args.control_process,
                               phase_offset=args.phase_offset, balance=args.balance)
    except WalkMpcError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    graph.start()
    rclpy.init()
    ns = {"namespace": args.namespace} if args.namespace else {}
    client = rclpy.create_node("walk_mpc_demo", **ns)
    monitor = LoopMonitor(**ns)
    recorder = RecorderNode(mcap_path, RECORDED_TOPICS, robot_frames=robot_frames, **ns)
    # Every entity exists before the spin thread starts (current_feet's subscription is created and
    # destroyed on that thread): an entity destroyed while another thread spins its executor kills that
    # thread (issue 21). The action client exists from the start, so the server has discovered it by the
    # time the goal is sent (a client created just before its goal can lose the server's answer).
    walk_client = walk_action_client(client)
    spin = SpinThread(SingleThreadedExecutor(), name="demo-spin")  # rclpy 9's MultiThreadedExecutor drops
    for node in (client, monitor, recorder):                     # samples here
        spin.add_node(node)
    spin.start()
    code = 1
    walk = None
    try:
        deadline = time.monotonic() + 60.0
        # Walk once the whole loop runs (0.5 s of it): the ik ticks on the planner's references and the sim
        # measures commands (DDS discovery of a link can take seconds; a walk started before would stall),
        # and the recorder receives every topic (discovered separately: else the recording starts late).
        while not (monitor.ik_reference_ticks >= 25 and monitor.latency and not recorder.silent_topics()):
            shared = other_graph(client)
            if shared is not None:
                raise GraphStartError(shared)
            if graph.failed() or time.monotonic() > deadline:
                raise GraphStartError(f"the graph did not start (exited: {graph.failed()}; nothing recorded "
                                      f"yet on {recorder.silent_topics()}); see the node logs")
            spin.died.wait(0.05)  # polling counters filled by the spin thread (its death: at once)
            spin.check()
        left, right = current_feet(client, timeout=30.0) or DEFAULT_FEET
        distance = args.length * (args.steps - 1)
        steps = footsteps.walk_forward(left, right, distance, args.length, width=args.width,
                                       duration=args.duration)
        print(f"Sending goal: {len(steps)} steps of {args.length} m, {args.duration} s each "
              f"(as: ros2 action send_goal walk walk_mpc/action/Walk '{{steps: [...]}}' --feedback)")
        start = monitor.mark()
        while True:
            outcome = send_walk(client, steps, on_feedback=Progress(len(steps)), server_timeout=60.0,
                                result_timeout=args.timeout, client=walk_client)
            # The walk_behavior discovers each node on its own, possibly after this demo: a goal it refuses
            # for a link it has not heard yet is sent again.
            if ("received yet: is the" not in outcome.error_msg or outcome.last_completed_step_index > 0
                    or time.monotonic() > deadline):
                break
            print(f"demo: goal refused ({outcome.error_msg}); sending it again in 0.5 s")
            spin.died.wait(0.5)
            spin.check()
        walk = monitor.since(start)
        print(format_outcome(outcome))
        code = 0 if outcome.succeeded else 1
    except GraphStartError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        code = 1
    except ActionServerLost as exc:  # walk_behavior died: say so at once (its result cannot come)
        print(f"demo: {exc}", file=sys.stderr)
        code = 1
    except SpinThreadDied as exc:  # the demo's own spin thread died: nothing can arrive any more
        print(f"demo: {exc}", file=sys.stderr)
        code = 1
    finally:
        if spin.stop():  # joined: from here no thread spins the nodes, they may be destroyed
            walk_client.destroy()
            recorder.destroy_node()
            for node in (client, monitor):
                node.destroy_node()
        else:  # a callback blocks it: destroying its entities now could crash it; the process ends anyway
            print("demo: the spin thread did not stop", file=sys.stderr)
            recorder.close()
        rclpy.try_shutdown()
        graph.stop()
    timing = walk if walk is not None else monitor.since()
    span = "during the walk" if walk is not None else "of the run"
    print(f"\nLoop timing {span} (in the nodes, per control tick):")
    print(f"  MPC solve               {_stats(timing['mpc'])}")
    print(f"  MPC tick (msg in->out)  {_stats(timing['mpc_tick'])}")
    print(f"  IK  both solutions      {_stats(timing['ik'])}")
    print(f"  IK  tick (msg in->out)  {_stats(timing['ik_tick'])}")
    print(f"  sensor -> joint command {_stats(timing['latency'])}   {_missed(timing['missed'])}  "
          "(sim -> mpc_planner -> ik -> sim over DDS, measured by the sim: sim/latency)")
    startup = monitor.latency[:len(monitor.latency) - len(timing["latency"])]
    if startup:
        missed = monitor.missed[:len(startup)]
        print(f"  before the walk         {_stats(startup)}   {_missed(missed)}  (graph start-up)")
    if monitor.deadlines is not None:
        missed, measured, share, late, lateness = monitor.deadlines
        print(f"  missed deadlines (sim)  {missed} of {measured} samples ({100.0 * share:.1f} %) from the "
              "sim's start to its last report: command after the next sample (sim/deadlines)")
        print(f"  sim woke late           {late} times (largest {1e3 * lateness:.1f} ms): samples the "
              "stand-in hardware itself sent late (sim.late_wakeup_threshold)")
    print(f"Recording: {mcap_path} ({recorder.recorder.count} messages)")
    try:
        from walk_mpc.core.body.robot import RobotModel
        from walk_mpc.tools.plot_walk import plot, read_recording

        model = load_graph().robot(args.robot).model or "talos_reduced"
        sole = RobotModel(RobotModel.Parameters(robot=model)).sole_size
        extents = (sole.front, sole.back, sole.left, sole.right)
        recording = read_recording(mcap_path, robot=model, sole=extents)
        plot(recording, png_path, sole=extents, title=f"walk_mpc demo ({args.robot}, {args.sim})")
        print(f"Plot: {png_path}")
    except Exception as exc:  # the walk's outcome matters more than the plot
        print(f"Plot failed: {exc}", file=sys.stderr)
    if args.video:
        try:
            from walk_mpc.tools.video import write_walk_video

            video = write_walk_video(mcap_path, args.out_dir / "walk.mp4", robot=robot_frames.params.robot)
            print(f"Video: {video.path} ({video.frames} frames, {video.duration:.1f} s of the walk)")
        except Exception as exc:  # the walk's outcome matters more than the video
            print(f"Video failed: {exc}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
