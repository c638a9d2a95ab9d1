"""Shared helpers of the node-graph tests: a ROS client of the running graph, sole measurements, scenarios.

Used by test/test_graph_walk.py (nodes started by :class:`~walk_mpc.tools.launch_graph.GraphProcesses`)
and test/test_graph_launch.py (nodes started by ``launch/walk.launch.py`` under launch_pytest). Both
give a :class:`GraphControl` (stop / start one node) and a :class:`GraphClient`, then run the same
scenario functions, which assert.

Measurements come from the SensorState stream only: sole poses by forward kinematics of the robot model
from the joints and the base pose, the ZMP from the corner contact sensors (``<foot>_<corner>``) at the
sole corners given by the sim parameters of the graph's parameters file.

Everything waits on conditions (messages received, futures, process exits) with timeouts; a timeout
fails with the state of the graph (nodes that exited, the end of their logs).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import math
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Deque, Dict, List, Optional, Protocol, Sequence, Tuple

import numpy as np

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.params import load_yaml
from walk_mpc.core.sim.kinematic import CORNERS, FEET
from walk_mpc.core.walk import footsteps
from walk_mpc.core.walk.behavior import WalkErrorCode, WalkFlags
from walk_mpc.core.walk.step import Step
from walk_mpc.core.walk.timeline import FootPose, PhaseKind, Timeline
from walk_mpc.graph import load_graph

NS = 1_000_000_000
SWAYING = WalkFlags.WALK_SUBSTATE_SWAYING
STEPPING = WalkFlags.WALK_SUBSTATE_STEPPING
CATCHING = WalkFlags.WALK_SUBSTATE_CATCHING
INSUFFICIENT = WalkFlags.WALK_WARNING_INSUFFICIENT_STEP_DATA

#: The graph under test.
ROBOT = "talos"
SIM = "kinematic"

#: Numerical slack of geometric checks [m]: float round-off of FK and CoP, not a tolerance of the spec.
GEOMETRY_EPS = 1e-6

#: Time limits [s]: graph start-up (model loading, discovery) and one scenario.
STARTUP_TIMEOUT = 90.0
WALK_TIMEOUT = 60.0
#: Feedback silence [s] after which a walk's client gives the server up (send_walk's default 1 s is what a
#: user gets and test_graph_faults checks; the other scenarios ride out a loaded machine's stalls).
SERVER_SILENCE = 5.0


def params_file() -> Path:
    """The parameters file the graph runs with (config/walk_mpc.yaml for Talos)."""
    return load_graph().config_path(ROBOT)


def stamp_ns(header) -> int:
    """Header stamp in integer nanoseconds."""
    return header.stamp.sec * NS + header.stamp.nanosec


# ---------------------------------------------------------------------------------------------- geometry


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise convex hull (Andrew's monotone chain) of 2D points, shape (k, 2)."""
    pts = sorted(set(map(tuple, np.round(np.asarray(points, dtype=float), 12))))
    if len(pts) <= 2:
        return np.array(pts)

    def cross(o, a, b) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: List[tuple] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0.0:
            lower.pop()
        lower.append(p)
    upper: List[tuple] = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0.0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


def distance_outside(point: np.ndarray, hull: np.ndarray) -> float:
    """How far ``point`` (2D) lies outside the CCW convex polygon ``hull`` [m] (<= 0 inside)."""
    worst = -math.inf
    for a, b in zip(hull, np.roll(hull, -1, axis=0)):
        edge = b - a
        length = float(np.hypot(*edge))
        if length < 1e-12:
            continue
        # Signed distance to the edge's line, positive on the outer (right) side of a CCW polygon.
        worst = max(worst, float((edge[0] * (point[1] - a[1]) - edge[1] * (point[0] - a[0])) / -length))
    return worst


class SoleMeter:
    """Sole poses, contact and ZMP of SensorState samples, as the simulated robot's own sensors give them.

    Args:
        path: Parameters file of the graph (robot model and sole geometry from its ``sim`` section).
    """

    def __init__(self, path: Optional[Path] = None) -> None:
        document = load_yaml(path or params_file())
        kinematic = document["sim"]["ros__parameters"]["kinematic"]
        robot = dict(kinematic.get("robot", {}))
        self.model = RobotModel(RobotModel.Parameters(**robot))
        self.contact_height = float(kinematic["contact_height"])
        # Sole corners in the sole frame, in CORNERS order (front-left, front-right, back-left, back-right).
        front, back = float(kinematic["sole_front"]), float(kinematic["sole_back"])
        left, right = float(kinematic["sole_left"]), float(kinematic["sole_right"])
        self.corners = np.array([[front, left, 0.0], [front, -right, 0.0], [-back, left, 0.0],
                                 [-back, -right, 0.0]])
        self._joints = set(self.model.joint_names)
        self.frames = (self.model.left_foot_frame, self.model.right_foot_frame)

    def soles(self, msg) -> Tuple[Tuple[np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]]:
        """(left, right) sole (position [m], rotation) by forward kinematics of a sample.

        Raises:
            AssertionError: If the sample has no valid base estimate.
        """
        assert msg.base_estimate_valid, "SensorState without a base estimate: feet cannot be measured"
        joints = {n: float(v) for n, v in zip(msg.joint_names, msg.joint_pos) if n in self._joints}
        p, q = msg.base_pose.position, msg.base_pose.orientation
        config = self.model.configuration_from_joints(joints, (p.x, p.y, p.z), (q.x, q.y, q.z, q.w))
        poses = self.model.foot_poses(config)
        return poses[self.frames[0]], poses[self.frames[1]]

    def in_contact(self, sole: Tuple[np.ndarray, np.ndarray]) -> bool:
        """Whether a sole is on the ground (z = 0) within the plant's ``contact_height``."""
        return abs(float(sole[0][2])) <= self.contact_height + GEOMETRY_EPS

    def corner_points(self, sole: Tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """World positions (4, 3) of the sole corners, CORNERS order."""
        position, rotation = sole
        return position + self.corners @ rotation.T

    @staticmethod
    def corner_forces(msg) -> np.ndarray:
        """Normal forces [N] of the corner sensors, shape (2, 4): left then right foot, CORNERS order."""
        values = dict(zip(msg.contact_names, msg.contact))
        return np.array([[float(values[f"{foot}_{corner}"]) for corner in CORNERS] for foot in FEET])

    def zmp_check(self, msg) -> ZmpSample:
        """ZMP of the corner forces and its position relative to the support polygon of a sample."""
        soles = self.soles(msg)
        forces = self.corner_forces(msg)
        corners = [self.corner_points(s) for s in soles]
        total = float(forces.sum())
        contact = tuple(self.in_contact(s) for s in soles)
        if total <= 0.0:
            return ZmpSample(stamp_ns(msg.header), None, contact, forces.sum(axis=1), math.inf)
        zmp = sum(forces[i] @ corners[i][:, :2] for i in range(2)) / total
        support = [corners[i][:, :2] for i in range(2) if contact[i]]
        outside = distance_outside(zmp, convex_hull(np.vstack(support))) if support else math.inf
        return ZmpSample(stamp_ns(msg.header), zmp, contact, forces.sum(axis=1), outside)


@dataclasses.dataclass(frozen=True)
class ZmpSample:
    """ZMP of one sample: stamp [ns], ZMP xy [m] (None without force), soles in contact, force per foot
    [N], distance outside the support polygon [m] (<= 0 inside)."""

    stamp_ns: int
    zmp: Optional[np.ndarray]
    contact: Tuple[bool, bool]
    foot_forces: np.ndarray
    outside: float


# ---------------------------------------------------------------------------------------------- graph control


class GraphControl(Protocol):
    """Stop and start the graph's node processes (GraphProcesses, or a launch service)."""

    def stop(self, name: str, sig: int = signal.SIGINT) -> Optional[int]:
        """Send ``sig`` to node ``name`` and wait for its exit; returns its exit code."""

    def start(self, name: str) -> None:
        """Start node ``name`` again (same executable, name and parameters)."""

    def stop_all(self, timeout: float = 20.0) -> Dict[str, int]:
        """One SIGINT to every node at once, then wait for all; returns the exit codes."""

    def exited(self) -> Dict[str, int]:
        """Nodes whose (latest) process has exited, with their exit codes."""

    def diagnose(self) -> str:
        """Human-readable state of the nodes (exits, the end of their logs) for failure messages."""


class ProcessControl:
    """:class:`GraphControl` over :class:`~walk_mpc.tools.launch_graph.GraphProcesses` (log_dir set)."""

    def __init__(self, processes) -> None:
        self.processes = processes

    def stop(self, name: str, sig: int = signal.SIGINT) -> Optional[int]:
        return self.processes.stop_node(name, sig)

    def start(self, name: str) -> None:
        self.processes.start_node(name)

    def stop_all(self, timeout: float = 20.0) -> Dict[str, int]:
        # One SIGINT each (GraphProcesses.stop() sends a second SIGINT to nodes still shutting down).
        running = {n: p for n, p in self.processes.processes.items() if p.poll() is None}
        for proc in running.values():
            proc.send_signal(signal.SIGINT)
        return {name: proc.wait(timeout) for name, proc in running.items()}

    def exited(self) -> Dict[str, int]:
        return self.processes.failed()

    def diagnose(self, lines: int = 15) -> str:
        text = [f"exited nodes: {self.exited()}"]
        log_dir = self.processes.log_dir
        for spec in self.processes.specs:
            path = Path(log_dir) / f"{spec.name}.log" if log_dir else None
            if path is not None and path.is_file():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                text.append(f"--- {spec.name} ({path}):\n" + "\n".join(tail))
        return "\n".join(text)


# ---------------------------------------------------------------------------------------------- ROS client


def _stamp_ns(msg) -> int:
    """The header stamp [ns] of ``msg`` (imported here: this module loads without rclpy)."""
    from walk_mpc.nodes.conversions import stamp_ns

    return stamp_ns(msg.header.stamp)


@contextlib.contextmanager
def running_graph(processes, name: str = "graph_test_client"):
    """Start ``processes`` (a :class:`~walk_mpc.tools.launch_graph.GraphProcesses` with a log_dir), yield
    (a ready :class:`GraphClient` of them, their :class:`ProcessControl`); close the client and stop the
    processes on the way out (the nodes' exit codes are then in ``processes``)."""
    control = ProcessControl(processes)
    processes.start()
    client = None
    try:
        client = GraphClient(control, name=name)
        client.wait_ready()
        yield client, control
    finally:
        if client is not None:
            client.close()
        processes.stop()


class GraphClient:
    """The test's ROS side: its own context and node, spun by a SingleThreadedExecutor in a thread.

    It records what the scenarios look at: every ``walk/plan`` (latched), every ``walk/status`` with the
    count of SensorState samples received before it, the SensorState samples while :meth:`recording`,
    the counts of ``mpc/com_reference`` and ``joint_trajectory``. A SingleThreadedExecutor because rclpy 9's
    MultiThreadedExecutor drops most of a 100 Hz stream here.

    Args:
        control: Node control of the graph (for failure messages).
        name: Node name.
    """

    def __init__(self, control: Optional[GraphControl] = None, name: str = "graph_test_client") -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from trajectory_msgs.msg import JointTrajectory

        from walk_mpc.msg import ComReference, FootstepPlan, SensorState, TickTiming, WalkFeedback
        from walk_mpc.tools.send_walk import walk_action_client
        from walk_mpc.tools.spin_thread import SpinThread

        self.control = control
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self._cv = threading.Condition()
        self.plans: List = []
        self.statuses: List[Tuple[int, object]] = []  # (sensor samples received before it, WalkFeedback)
        self.sensor_count = 0
        self.last_sample = None
        self.samples: Optional[List] = None  # recording window, see recording()
        self.trajectory_count = 0
        self.reference_count = 0
        self.reference_coms: List[Tuple[float, float]] = []  # CoM (x, y) at T of every mpc/com_reference
        # (arrival [monotonic ns], stamp [ns]) of the latest samples and references, for failure messages.
        self.sample_arrivals: Deque[Tuple[int, int]] = collections.deque(maxlen=3000)
        self.reference_arrivals: Deque[Tuple[int, int]] = collections.deque(maxlen=1500)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(SensorState, "sensor_state", self._on_sample, 1000)
        self.node.create_subscription(FootstepPlan, "walk/plan", self._on_plan, latched)
        self.node.create_subscription(WalkFeedback, "walk/status", self._on_status, 200)
        self.node.create_subscription(JointTrajectory, "joint_trajectory", self._on_trajectory, 100)
        self.node.create_subscription(ComReference, "mpc/com_reference", self._on_reference, 100)
        self.ik_reference_ticks = 0  # ik/timing of ticks on a reference (the chain sensor -> mpc -> ik is up)
        self._reference_topic = self.node.resolve_topic_name("mpc/com_reference")
        self.node.create_subscription(TickTiming, "ik/timing", self._on_ik_timing, 100)
        # One Walk action client for every goal: a client created per goal can lose the server's answer
        # (the server discovers the new client's reply reader too late), see send_walk.
        self.action_client = walk_action_client(self.node)
        self.spin_error: Optional[BaseException] = None
        # Every entity exists before the spin thread starts; send_walk creates and destroys its own on that
        # thread and fails at once (SpinThreadDied) if it dies (issue 21, see walk_mpc.tools.spin_thread).
        self.executor = SingleThreadedExecutor(context=self.context)
        self._spinner = SpinThread(self.executor, name="graph-client-spin", on_death=self._on_spin_death)
        self._spinner.add_node(self.node)
        self._spinner.start()

    def _on_spin_death(self, error: Optional[BaseException]) -> None:
        if error is not None and self.context.ok():  # reported by every wait (a dead spinner would time out)
            self.spin_error = error
            with self._cv:
                self._cv.notify_all()

    # -- callbacks (executor thread)
    def _on_sample(self, msg) -> None:
        self.sample_arrivals.append((time.monotonic_ns(), _stamp_ns(msg)))
        with self._cv:
            self.sensor_count += 1
            self.last_sample = msg
            if self.samples is not None:
                self.samples.append(msg)
            self._cv.notify_all()

    def _on_plan(self, msg) -> None:
        with self._cv:
            self.plans.append(msg)
            self._cv.notify_all()

    def _on_status(self, msg) -> None:
        with self._cv:
            self.statuses.append((self.sensor_count, msg))
            self._cv.notify_all()

    def _on_trajectory(self, msg) -> None:
        with self._cv:
            self.trajectory_count += 1
            self._cv.notify_all()

    def _on_ik_timing(self, msg) -> None:
        from walk_mpc.nodes.ik import is_reference_tick

        if is_reference_tick(msg, self._reference_topic):
            with self._cv:
                self.ik_reference_ticks += 1
                self._cv.notify_all()

    def _on_reference(self, msg) -> None:
        self.reference_arrivals.append((time.monotonic_ns(), _stamp_ns(msg)))
        with self._cv:
            self.reference_count += 1
            if msg.com_position:
                self.reference_coms.append((msg.com_position[0].x, msg.com_position[0].y))
            self._cv.notify_all()

    # -- waiting
    def wait_until(self, predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        """Wait until ``predicate()`` (evaluated under the client's lock at each message); fail on timeout."""
        with self._cv:
            if self._cv.wait_for(lambda: predicate() or self.spin_error is not None, timeout):
                if self.spin_error is None:
                    return
        detail = self.diagnose()
        if self.spin_error is not None:
            raise AssertionError(f"the test client stopped spinning while waiting for {what}: "
                                 f"{self.spin_error!r}\n{detail}") from self.spin_error
        raise AssertionError(f"timeout ({timeout} s) waiting for {what}\n{detail}")

    def timing_report(self) -> str:
        """What this client saw of the chain's timing (for failure messages): the largest gaps between the
        stamps of successive mpc/com_reference messages, and the largest delays of a reference's arrival
        after its sample's, here. A planner that stalled shows both; references that reached this client
        on time while the ik reported none point at their delivery to the ik."""
        samples = dict((stamp, arrival) for arrival, stamp in list(self.sample_arrivals))
        references = list(self.reference_arrivals)
        if len(references) < 2:
            return f"{len(references)} mpc/com_reference received, {len(samples)} samples kept"
        gaps = sorted(((b[1] - a[1], b[1]) for a, b in zip(references, references[1:])), reverse=True)[:3]
        delays = sorted(((arrival - samples[stamp], stamp) for arrival, stamp in references
                         if stamp in samples), reverse=True)[:3]
        last_sample = max(samples) if samples else 0
        return ("client's view: largest mpc/com_reference stamp gaps "
                + ", ".join(f"{g / 1e6:.1f} ms before {t / 1e9:.3f} s" for g, t in gaps)
                + "; largest delays of a reference after its sample "
                + ", ".join(f"{d / 1e6:.1f} ms at {t / 1e9:.3f} s" for d, t in delays)
                + f"; last reference stamp {references[-1][1] / 1e9:.3f} s, "
                f"last sample {last_sample / 1e9:.3f} s")

    def diagnose(self) -> str:
        """The client's timing report and the nodes' state (exits, ends of logs), for failure messages."""
        detail = self.control.diagnose(40) if self.control is not None else ""
        return f"{self.timing_report()}\n{detail}"

    def wait_samples(self, count: int, what: str = "SensorState samples", timeout: float = 10.0) -> None:
        """Wait for ``count`` more SensorState samples."""
        target = self.sensor_count + count
        self.wait_until(lambda: self.sensor_count >= target, f"{count} {what}", timeout)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Wait until every node of the walking graph publishes (sim, walk_behavior, mpc_planner, ik) and
        the ik ticks on the planner's references (a walk started before that link is up would stall)."""
        self.wait_until(lambda: self.sensor_count > 0 and self.plans and self.statuses
                        and self.reference_count > 0 and self.trajectory_count > 0
                        and self.ik_reference_ticks > 0,
                        "the graph (sensor_state, walk/plan, walk/status, mpc/com_reference, "
                        "joint_trajectory, ik/timing of a tick on a reference)", timeout)

    def wait_standing(self, timeout: float = 10.0) -> object:
        """Wait for a walk/status with behavior STAND received from now on; returns it."""
        start = len(self.statuses)
        self.wait_until(lambda: any(s.behavior == 0 for _, s in self.statuses[start:]),
                        "walk/status behavior STAND", timeout)
        return next(s for _, s in self.statuses[start:] if s.behavior == 0)

    # -- recording
    def recording(self) -> _Recording:
        """Context manager collecting every SensorState sample received inside it (``as samples``)."""
        return _Recording(self)

    # -- state of the graph
    def latest_plan(self):
        """The last walk/plan received."""
        with self._cv:
            return self.plans[-1]

    def feet(self) -> Tuple[FootPose, FootPose]:
        """Final (left, right) sole poses of the latest walk/plan (where the robot stands after it)."""
        from walk_mpc.nodes.conversions import timeline_from_msg

        final = timeline_from_msg(self.latest_plan()).phases[-1]
        return final.left, final.right

    def forward_steps(self, count: int, length: float = 0.2, duration: float = 0.8) -> List[Step]:
        """``count`` steps straight ahead from the current feet (the last one closes the feet)."""
        left, right = self.feet()
        yaw = footsteps.stance_center(left, right)[3]
        dx, dy = left.position[0] - right.position[0], left.position[1] - right.position[1]
        width = -math.sin(yaw) * dx + math.cos(yaw) * dy  # lateral distance (the feet may be staggered)
        steps = footsteps.walk_forward(left, right, length * (count - 1), length, width=width,
                                       duration=duration)
        assert len(steps) == count, steps
        return steps

    # -- walking
    def walk(self, steps: Sequence[Step], plan_complete: bool = True,
             on_feedback: Optional[Callable] = None, cancel: Optional[threading.Event] = None,
             timeout: float = WALK_TIMEOUT, server_silence: float = SERVER_SILENCE):
        """Send a Walk goal and wait for its outcome; returns (WalkOutcome, feedback list)."""
        from walk_mpc.tools.send_walk import ActionServerLost, send_walk

        feedback: List = []

        def collect(fb) -> None:
            feedback.append(fb)
            if on_feedback is not None:
                on_feedback(fb)

        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while True:
                outcome = send_walk(self.node, steps, plan_complete, collect, server_timeout=30.0,
                                    result_timeout=timeout, cancel=cancel, client=self.action_client,
                                    server_silence=server_silence)
                # The walk_behavior discovers each node on its own, possibly after this client: a goal it
                # refuses for a link it has not heard yet is sent again, paced by its walk/status.
                if "received yet: is the" not in outcome.error_msg or time.monotonic() > deadline:
                    break
                pace = len(self.statuses) + 10
                self.wait_until(lambda: len(self.statuses) >= pace, "walk/status after a refusal", 10.0)  # noqa: B023
        except TimeoutError as exc:
            error = self.spin_error
            spinning = "" if error is None else f" (test client stopped spinning: {error!r})"
            detail = self.control.diagnose() if self.control is not None else ""
            raise AssertionError(f"{exc}{spinning}\n{detail}") from exc
        except ActionServerLost:
            if self.control is not None:  # shown with the failure, unless a test expected it
                print(self.control.diagnose())
            raise
        return outcome, feedback

    @contextlib.contextmanager
    def walking(self, count: int = 4, past_step: int = 1, server_silence: float = SERVER_SILENCE):
        """From Stand, :meth:`walk` ``count`` :meth:`forward_steps` in a thread; the block runs once the
        feedback shows step ``past_step`` touched down, the walk still going; yields the walk's Future
        (of (WalkOutcome, feedback))."""
        self.wait_standing()
        stepping = threading.Event()

        def on_feedback(fb) -> None:
            if fb.walk.current_step_index >= past_step:
                stepping.set()

        deadline = time.monotonic() + STARTUP_TIMEOUT
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            while True:
                walk = pool.submit(self.walk, self.forward_steps(count), True, on_feedback,
                                   server_silence=server_silence)
                self.wait_until(lambda: stepping.is_set() or walk.done(),  # noqa: B023
                                f"the walk past step {past_step}", 30.0)
                retry = walk.done() and _refused_until_ready(walk.result()[0])
                if not retry or time.monotonic() > deadline:
                    break
                # a stance left by an earlier scenario: Stand follows the measured feet, then walks start
                pace = len(self.statuses) + 10
                self.wait_until(lambda: len(self.statuses) >= pace, "walk/status after a refusal", 10.0)  # noqa: B023
            assert not walk.done(), walk.result()[0]
            yield walk

    def walk_after_restart(self, count: int = 2):
        """:meth:`walk` ``count`` :meth:`forward_steps` after a node restart. The walk_behavior refuses goals
        until it hears the restarted node itself ("no /ik/timing for 4.1 s: is the ik running?"), each
        participant discovering the new process on its own, the walk_behavior possibly after this client; a
        walk_behavior restarted mid-walk, until the robot stands on Stand's feet ("does not stand on"). A goal
        refused for these causes only is sent again (from the latest plan's feet), paced by the
        walk_behavior's own status messages; returns the last WalkOutcome."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            outcome, _ = self.walk(self.forward_steps(count))
            if outcome.succeeded or not _refused_until_ready(outcome) or time.monotonic() > deadline:
                return outcome
            pace = len(self.statuses) + 10
            self.wait_until(lambda: len(self.statuses) >= pace, "walk/status after a refusal", 10.0)  # noqa: B023

    def close(self) -> None:
        """Stop spinning (join the thread), destroy the node and shut the context down."""
        if self._spinner.stop():  # else a callback blocks the thread: destroying under it would crash it
            self.action_client.destroy()
            self.node.destroy_node()
        self.context.try_shutdown()


def _refused_until_ready(outcome) -> bool:
    """A goal the walk_behavior refused until the graph is ready for it, to be sent again: a node it has not
    heard yet ("no /ik/timing for 4.1 s: is the ik running?"), or Stand not yet on the measured feet ("does
    not stand on")."""
    return outcome.last_completed_step_index <= 0 and (
        "running?" in outcome.error_msg or "does not stand on" in outcome.error_msg)


class _Recording:
    def __init__(self, client: GraphClient) -> None:
        self.client = client

    def __enter__(self) -> List:
        with self.client._cv:
            self.client.samples = []
            return self.client.samples

    def __exit__(self, *exc) -> None:
        with self.client._cv:
            self.client.samples = None


# ---------------------------------------------------------------------------------------------- analysis


def walking_plans(plans: Sequence, since: int = 0) -> List:
    """The walking plans (``walking`` true) among ``plans[since:]``."""
    return [p for p in plans[since:] if p.walking]


def step_windows(plans: Sequence, end_ns: int) -> Dict[int, Tuple[Step, int, int]]:
    """Per executed step index: (saturated step, touchdown stamp [ns], next lift-off of that foot [ns]).

    Each step is taken from the last walking plan that holds it (its saturated data and its timing on the
    sensor stamps: plan stamp + timeline time). The stance of the last step of each foot lasts until
    ``end_ns``.
    """
    from walk_mpc.nodes.conversions import timeline_from_msg

    windows: Dict[int, Tuple[Step, int, int]] = {}
    for plan in plans:
        timeline: Timeline = timeline_from_msg(plan)
        origin = stamp_ns(plan.header)
        singles = [p for p in timeline.phases if p.kind is PhaseKind.SINGLE]
        for k, phase in enumerate(singles):
            step = next(s for s in timeline.steps if s.step_index == phase.step_index)
            liftoff = next((origin + round(q.t_start * NS) for q in singles[k + 1:]
                            if q.swing_foot == phase.swing_foot), end_ns)
            windows[step.step_index] = (step, origin + round(phase.t_end * NS), liftoff)
    return windows


def landing_errors(samples: Sequence, plans: Sequence, meter: SoleMeter) -> Dict[int, Tuple[float, int]]:
    """Per step: the largest distance [m] between the measured sole (in contact, between its touchdown and
    the next lift-off of that foot) and the saturated step position, and the number of such samples."""
    end_ns = stamp_ns(samples[-1].header) + 1
    windows = step_windows(plans, end_ns)
    errors: Dict[int, Tuple[float, int]] = {}
    for index, (step, touchdown, liftoff) in sorted(windows.items()):
        worst, count = 0.0, 0
        for msg in samples:
            t = stamp_ns(msg.header)
            if not touchdown <= t < liftoff:
                continue
            sole = meter.soles(msg)[int(step.foot)]
            if not meter.in_contact(sole):
                continue
            count += 1
            worst = max(worst, float(np.linalg.norm(sole[0] - np.asarray(step.position))))
        errors[index] = (worst, count)
    return errors


def behaviors(statuses: Sequence) -> List[int]:
    """Behavior of each status, consecutive repeats merged."""
    out: List[int] = []
    for _, status in statuses:
        if not out or out[-1] != status.behavior:
            out.append(status.behavior)
    return out


# ---------------------------------------------------------------------------------------------- scenarios


@dataclasses.dataclass
class WalkRecord:
    """A walk through the graph: outcome, action feedback, walk/plan messages and SensorState samples."""

    steps: List[Step]
    outcome: object
    feedback: List = dataclasses.field(repr=False)
    plans: List = dataclasses.field(repr=False)
    samples: List = dataclasses.field(repr=False)
    #: The client's timing report and the ends of the nodes' logs when the walk did not succeed, else "".
    diagnosis: str = dataclasses.field(default="", repr=False)


def ten_step_walk(client: GraphClient, count: int = 10) -> WalkRecord:
    """Issue 7's reference walk: 10 steps of 0.2 m, 1.1 s each, from the current feet; recorded."""
    client.wait_standing()
    steps = client.forward_steps(count, length=0.2, duration=1.1)
    first_plan = len(client.plans)
    with client.recording() as samples:
        outcome, feedback = client.walk(steps)
        standing = client.wait_standing()
        client.wait_samples(20, "samples in Stand after the walk")
    assert standing.behavior == 0
    diagnosis = "" if outcome.error_code == WalkErrorCode.NONE else client.diagnose()
    return WalkRecord(steps, outcome, feedback, walking_plans(client.plans, first_plan), list(samples),
                      diagnosis)


def assert_completed(record: WalkRecord) -> None:
    """Precondition of the checks of a walk: every step touched down (else there is nothing to check)."""
    assert record.outcome.last_completed_step_index == len(record.steps), (
        f"the walk did not complete, nothing to measure: {record.outcome}")


def check_walk_succeeded(record: WalkRecord) -> None:
    """Test 1: the walk succeeded and every step touched down."""
    from action_msgs.msg import GoalStatus

    outcome = record.outcome
    assert outcome.status == GoalStatus.STATUS_SUCCEEDED, f"{outcome}\n{record.diagnosis}"
    assert outcome.error_code == WalkErrorCode.NONE, f"{outcome}\n{record.diagnosis}"
    assert outcome.last_completed_step_index == len(record.steps) == 10, outcome
    assert record.feedback and record.feedback[-1].walk.current_step_index == 10


def check_landings(record: WalkRecord, meter: SoleMeter, tolerance: float = 1e-3) -> Dict[int, float]:
    """Test 2: every step's sole, measured in contact after its touchdown, is within ``tolerance`` [m] of the
    saturated step position (the plan's, which the feedback's step_queue_saturated also carries)."""
    assert_completed(record)
    saturated = {s.step_index: s for plan in record.plans for s in plan.steps}  # the latest plan wins
    for fb in record.feedback:  # the feedback's saturated queue agrees with the plan
        for s in fb.walk.step_queue_saturated:
            p = saturated[s.step_index].position
            assert (s.position.x, s.position.y, s.position.z) == (p.x, p.y, p.z), (s, p)
    errors = landing_errors(record.samples, record.plans, meter)
    assert sorted(errors) == [s.step_index for s in record.steps], sorted(errors)
    unmeasured = [i for i, (_, n) in errors.items() if n == 0]
    assert not unmeasured, f"steps never measured in contact after their touchdown: {unmeasured}"
    worst = {i: e for i, (e, _) in errors.items()}
    report = ", ".join(f"{i}: {1e3 * e:.2f}" for i, e in worst.items())
    assert max(worst.values()) <= tolerance, f"landing error per step [mm]: {report}"
    return worst


def check_zmp_in_support(record: WalkRecord, meter: SoleMeter) -> None:
    """Test 3: on every sample, the ZMP of the corner forces lies in the support polygon of the soles in
    contact (the convex hull of both soles in double support)."""
    assert_completed(record)
    checks = [meter.zmp_check(msg) for msg in record.samples]
    bad = [c for c in checks if c.zmp is None or c.outside > GEOMETRY_EPS]
    t0 = checks[0].stamp_ns
    report = "\n".join(
        f"  t {(c.stamp_ns - t0) / NS:7.3f} s contact {c.contact} forces {np.round(c.foot_forces, 1)} "
        f"zmp {None if c.zmp is None else np.round(c.zmp, 4)} outside {1e3 * c.outside:.2f} mm"
        for c in bad[:10])
    assert not bad, f"{len(bad)} of {len(checks)} samples with the ZMP outside the support polygon:\n{report}"


def scenario_cancel(client: GraphClient, meter: SoleMeter) -> None:
    """Test 4: cancel mid-walk -> CANCELED, then Stand with both feet in contact."""
    from action_msgs.msg import GoalStatus

    client.wait_standing()
    cancel = threading.Event()

    def on_feedback(fb) -> None:
        if fb.walk.current_step_index >= 1:
            cancel.set()

    outcome, feedback = client.walk(client.forward_steps(4), on_feedback=on_feedback, cancel=cancel)
    assert cancel.is_set()
    assert outcome.status == GoalStatus.STATUS_CANCELED, outcome
    assert outcome.error_code == WalkErrorCode.CANCELED, outcome
    assert 1 <= outcome.last_completed_step_index < 4, outcome  # the swinging step finishes, no more
    client.wait_standing()
    with client.recording() as samples:  # 0.5 s of Stand: both soles on the ground, both carrying weight
        client.wait_samples(50)
    for sample in samples:
        soles = meter.soles(sample)
        forces = meter.corner_forces(sample).sum(axis=1)
        assert all(meter.in_contact(s) for s in soles), [s[0] for s in soles]
        assert (forces > 0.0).all(), f"force per foot (left, right) [N] in Stand: {forces}"


def scenario_insufficient_steps(client: GraphClient) -> None:
    """Test 5: an open goal that runs out -> CATCHING with the warning -> Stand, INSUFFICIENT_STEP_DATA."""
    from action_msgs.msg import GoalStatus

    client.wait_standing()
    outcome, feedback = client.walk(client.forward_steps(4), plan_complete=False)
    assert outcome.status == GoalStatus.STATUS_ABORTED, outcome
    assert outcome.error_code == WalkErrorCode.INSUFFICIENT_STEP_DATA, outcome
    # Walk looks for steps c+1..c+4 at the touchdown of step c: step 5 is missing at step 1's, so the
    # walk stops after step 1 (the core's contract: the warning stops at step c).
    assert outcome.offending_step_indices == (5,), outcome
    assert outcome.last_completed_step_index == 1, outcome
    flags = [WalkFlags(fb.walk.status_flags) for fb in feedback]
    assert any(INSUFFICIENT in f for f in flags), flags
    catching = [i for i, f in enumerate(flags) if CATCHING in f]
    assert catching, "no CATCHING feedback"
    assert all(INSUFFICIENT in flags[i] for i in catching), [flags[i] for i in catching]
    assert all(CATCHING not in f for f in flags[:catching[0]])  # catching comes last
    assert client.wait_standing().status_flags == 0


def scenario_preemption(client: GraphClient) -> None:
    """Test 6: a second goal while walking preempts the first; the walk goes on, the second succeeds."""
    from action_msgs.msg import GoalStatus

    client.wait_standing()
    plan = client.forward_steps(4)
    first_goal, second_goal = plan[:2], plan[2:]
    stepping = threading.Event()
    first_statuses = len(client.statuses)

    def on_first_feedback(fb) -> None:
        if STEPPING & fb.walk.status_flags:
            stepping.set()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.walk, first_goal, True, on_first_feedback)
        client.wait_until(lambda: stepping.is_set() or first.done(), "the first goal stepping", 30.0)
        assert not first.done(), first.result()[0]
        second, second_feedback = client.walk(second_goal)
        first_outcome, first_feedback = first.result(timeout=WALK_TIMEOUT)
    assert first_outcome.status == GoalStatus.STATUS_ABORTED, first_outcome
    assert first_outcome.error_code == WalkErrorCode.PREEMPTED, first_outcome
    assert second.status == GoalStatus.STATUS_SUCCEEDED, second
    assert second.error_code == WalkErrorCode.NONE, second
    assert second.last_completed_step_index == 4, second
    # The walk never stopped: one Walk from the first goal to the end of the second, steps 0..4 in order.
    client.wait_standing()
    statuses = client.statuses[first_statuses:]
    assert behaviors(statuses) in ([0, 1, 0], [1, 0]), behaviors(statuses)
    walking = [s.current_step_index for _, s in statuses if s.behavior == 1]
    assert walking == sorted(walking) and walking[-1] == 4, walking
    assert second_feedback and second_feedback[-1].walk.current_step_index == 4


def scenario_ik_restart(client: GraphClient, control: GraphControl) -> None:
    """Test 8: SIGKILL the IK while standing, restart it: joint_trajectory resumes, a short walk succeeds."""
    client.wait_standing()
    code = control.stop("ik", signal.SIGKILL)
    assert code == -signal.SIGKILL, code
    before, ticks = client.trajectory_count, client.ik_reference_ticks
    control.start("ik")
    # 25 commands (0.5 s at 50 Hz) after the restart: more than the killed process could have left in
    # flight, so the new process publishes; and the new process ticks on the planner's references.
    client.wait_until(lambda: client.trajectory_count >= before + 25 and client.ik_reference_ticks > ticks,
                      "joint_trajectory and ik ticks on references after the IK restart", STARTUP_TIMEOUT)
    outcome = client.walk_after_restart(2)
    assert outcome.succeeded, f"{outcome}\n{control.diagnose()}"
    assert outcome.last_completed_step_index == 2, outcome
    assert "ik" not in control.exited()


def scenario_sensor_timeout(client: GraphClient, control: GraphControl) -> None:
    """Test 7: the sim stops mid-walk -> the walk ends at once with SENSOR_TIMEOUT, the plan stops walking,
    the other nodes keep running. The sim is restarted: the robot is back at its initial pose, away from
    where the plan left it; the graph re-anchors Stand at the measured feet and walks from there."""
    from action_msgs.msg import GoalStatus

    stopped: Dict[str, Optional[int]] = {}
    with client.walking(4) as walk:
        plans_before = len(client.plans)
        stopped["sim"] = control.stop("sim", signal.SIGINT)
        outcome, feedback = walk.result(timeout=WALK_TIMEOUT)
    assert outcome.status == GoalStatus.STATUS_ABORTED, outcome
    assert outcome.error_code == WalkErrorCode.SENSOR_TIMEOUT, outcome
    assert 1 <= outcome.last_completed_step_index < 4, outcome
    client.wait_until(lambda: len(client.plans) > plans_before and not client.plans[-1].walking,
                      "walk/plan republished with walking false")
    assert set(control.exited()) == {"sim"}, control.diagnose()
    plans_before = len(client.plans)
    control.start("sim")
    count, ticks = client.sensor_count, client.ik_reference_ticks
    client.wait_until(lambda: client.sensor_count > count + 10, "SensorState after the sim restart",
                      STARTUP_TIMEOUT)
    client.wait_until(lambda: len(client.plans) > plans_before, "Stand re-anchored at the measured feet",
                      STARTUP_TIMEOUT)
    # Each node discovers the new sim on its own (seconds apart here): walk once the loop runs again.
    client.wait_until(lambda: client.ik_reference_ticks > ticks + 25, "the ik ticking on references again",
                      STARTUP_TIMEOUT)
    left, right = client.feet()
    assert abs(left.position[0]) < 0.05 and abs(right.position[0]) < 0.05, (left, right)  # the sim's start
    client.wait_standing()
    outcome, _ = client.walk(client.forward_steps(2))
    assert outcome.status == GoalStatus.STATUS_SUCCEEDED, (outcome, control.diagnose())


__all__ = [
    "GraphClient", "GraphControl", "ProcessControl", "SoleMeter", "WalkRecord", "ZmpSample",
    "assert_completed", "check_landings", "check_walk_succeeded", "check_zmp_in_support", "convex_hull",
    "distance_outside",
    "landing_errors", "params_file", "scenario_cancel", "scenario_ik_restart", "scenario_insufficient_steps",
    "scenario_preemption", "scenario_sensor_timeout", "step_windows", "ten_step_walk",
]
