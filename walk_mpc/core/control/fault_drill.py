"""Fault drill in process: the graph's three controllers on a simulator backend, a control node killed at a
gait phase of a walk, restarted, and a walk after it (issue 17).

:class:`DrillGraph` wires :class:`~walk_mpc.core.control.walk_supervisor.WalkSupervisor` (the
``walk_behavior`` node), :class:`~walk_mpc.core.control.planner_stage.PlannerStage` (``mpc_planner``) and
:class:`~walk_mpc.core.control.whole_body_stage.WholeBodyStage` (``ik``) as the node graph does, on the
backend's samples (what a real robot measures): plans to both stages, CoM references (and the ones announced
ahead) to the whole-body stage, joint commands to the backend, the stages' tick reports to the supervisor,
which watches them. Real time is simulated: the steady clock runs with the stamps. A node's death is the end
of its calls and outputs (the backend goes on executing the last joint trajectory it received, as a
ros2_control JointTrajectoryController holds it); its restart is a fresh instance fed the latched plan.

The simulator's truth is for scoring only: falls (:class:`~walk_mpc.core.control.closed_loop.FallDetector`,
the in-process loop's criteria) and the distance of each CoM reference to the nearest sole.

:func:`drill` runs one scenario (a walk, a kill at a time into it, the restart, a 2-step walk) and returns a
:class:`DrillRow`; :func:`phase_name` names the gait phase of a kill time. ``test_fault_drill.py`` and
``benchmarks/faults.py`` use them.

Pure numpy / pinocchio: no ROS import.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional

import numpy as np

from walk_mpc.core.body.robot import RobotModel, yaw_of
from walk_mpc.core.control.closed_loop import ClosedLoopParameters, FallDetector, default_planner_parameters
from walk_mpc.core.control.planner_stage import PlannerStage, PlannerStageParameters
from walk_mpc.core.control.types import NS_PER_S, WholeBodyStatus
from walk_mpc.core.control.walk_supervisor import WalkSupervisor, WalkSupervisorParameters
from walk_mpc.core.control.whole_body_stage import WholeBodyStage, WholeBodyStageParameters
from walk_mpc.core.sim.backend import JointTrajectoryCommand, SimBackend
from walk_mpc.core.walk import footsteps
from walk_mpc.core.walk.behavior import WalkErrorCode
from walk_mpc.core.walk.timeline import FootPose, PhaseKind, Timeline

#: Stamp [ns] of the backend's time 0.
ORIGIN_NS = 1_000 * NS_PER_S

NODES = ("walk_behavior", "mpc_planner", "ik")

#: The whole-body stage's timeouts of the graph's ik (config/walk_mpc.yaml): references are waited for
#: 0.5 s before the samples drive the ticks, a walk's safe stop starts 0.1 s after its references stop.
GRAPH_WHOLE_BODY = WholeBodyStageParameters(reference_timeout=0.5, safe_stop_timeout=0.1)

#: How long [s] the walk after a restart is sent again while the supervisor refuses it because the robot does
#: not stand on Stand's feet yet (it re-anchors Stand after standing still there for 0.2 s).
RETRY_TIME = 3.0

#: The error code of a walk whose node died (walk_behavior: the client's own timeout, no result).
DEATH_CODES = {"ik": WalkErrorCode.IK_FAILURE, "mpc_planner": WalkErrorCode.PLANNER_FAILURE}


class DrillGraph:
    """The three controllers on a simulator backend, wired as the node graph (see the module docstring).

    Args:
        robot: Robot model of the backend (a biped).
        sim: The backend, at its start pose.
        planner: Planner stage parameters (default: :func:`default_planner_parameters` of the backend's
            posture, the in-process loop's).
        whole_body: Whole-body stage parameters (default: :data:`GRAPH_WHOLE_BODY`, the graph's timeouts).
        supervisor: Supervisor parameters (default: sensor timeout 0.25 s, watching mpc_planner and ik).
        falls: Fall criteria (default: the in-process loop's).
    """

    def __init__(self, robot: RobotModel, sim: SimBackend, planner: Optional[PlannerStageParameters] = None,
                 whole_body: Optional[WholeBodyStageParameters] = None,
                 supervisor: Optional[WalkSupervisorParameters] = None,
                 falls: Optional[ClosedLoopParameters] = None) -> None:
        self.robot = robot
        self.sim = sim
        q = np.array(sim.state.q)
        if planner is None:
            planner = PlannerStageParameters(planner=default_planner_parameters(robot, q, 0.02),
                                             hardware_period=sim.hardware_period)
        self.planner_params = planner
        self.whole_body_params = whole_body if whole_body is not None else GRAPH_WHOLE_BODY
        self.supervisor_params = supervisor if supervisor is not None else WalkSupervisorParameters(
            sensor_timeout=0.25, watch_links=("mpc_planner", "ik"))
        self.period_ns = round(sim.hardware_period * NS_PER_S)
        self.alive = dict.fromkeys(NODES, True)
        self.supervisor = WalkSupervisor(self.supervisor_params, robot)
        self.planner = PlannerStage(robot, self.planner_params)
        self.whole_body = WholeBodyStage(robot, self.whole_body_params)
        self.falls = FallDetector(robot, falls if falls is not None else ClosedLoopParameters(), float(q[2]))
        self.plan = None  # the latched walk/plan
        self.results: list = []  # the supervisor's walk results, in order
        self.stamp = ORIGIN_NS
        self.samples = 0
        self.reference_distances: list = []  # distance of each CoM reference to the nearest sole [m]
        self.reference_stamps: list = []  # the stamp [ns] of each
        self.reference_ticks: list = []  # stamps of the ik's OK commands on a reference
        self.statuses = 0  # supervisor status outputs (walk/status)

    # ------------------------------------------------------------------ the graph's links
    @property
    def fallen(self) -> bool:
        """Whether the robot fell (simulator truth, :class:`FallDetector`)."""
        return self.falls.fallen

    def _deliver_plan(self, plan) -> None:
        self.plan = plan
        if self.alive["mpc_planner"]:
            self.planner.set_plan(plan)
        if self.alive["ik"]:
            self.whole_body.set_plan(plan)

    def _supervise(self, output) -> None:
        self.results += output.results
        self.statuses += output.status is not None
        if output.plan is not None:
            self._deliver_plan(output.plan)

    def _report(self, component: str, status, stamp: int, reason: str = "") -> None:
        if self.alive["walk_behavior"]:
            self._supervise(self.supervisor.report(component, int(status), stamp, reason,
                                                   steady_ns=self.stamp))

    def _command(self, command) -> None:
        if command is None:
            return
        self._report("ik", command.status, command.stamp_ns, command.reason)
        if command.source == "reference" and command.status == WholeBodyStatus.OK:
            self.reference_ticks.append(command.stamp_ns)
        self.sim.set_trajectory(JointTrajectoryCommand(
            self.whole_body.joint_names, command.times, command.positions,
            stamp=(command.stamp_ns - ORIGIN_NS) / NS_PER_S, velocities=command.velocities))

    def step(self) -> None:
        """One hardware period: the backend steps, every living controller takes the sample."""
        state = self.sim.step()
        self.falls.observe(state)
        self.stamp = ORIGIN_NS + state.step_count * self.period_ns
        sample = self.sim.sensor_sample()
        self.samples += 1
        if self.alive["walk_behavior"]:
            self._supervise(self.supervisor.observe(self.stamp, sample, self.stamp))
            if self.samples % 2 == 0:
                self._supervise(self.supervisor.check_timeouts(self.stamp))
        if self.alive["ik"]:
            command = self.whole_body.observe(self.stamp, sample)
            report = self.whole_body.report
            if command is None and report is not None:  # the ik node's ik/timing without a command
                self._report("ik", report.status, report.stamp_ns, report.reason)
            self._command(command)
        if self.alive["mpc_planner"]:
            tick = self.planner.observe(self.stamp, sample)
            if tick.status is not None:
                self._report("mpc_planner", tick.status, self.stamp, tick.reason)
            if tick.reference is not None:
                self._check_reach(tick.reference, state.q)
                if self.alive["ik"]:
                    self._command(self.whole_body.on_reference(tick.reference))
            if tick.ahead is not None and self.alive["ik"]:
                self.whole_body.on_reference_ahead(tick.ahead)

    def _check_reach(self, reference, q) -> None:
        soles = [p for p, _ in self.robot.foot_poses(np.asarray(q)).values()]
        com = reference.com_position[0]
        distance = min(math.hypot(com[0] - p[0], com[1] - p[1]) for p in soles)
        self.reference_distances.append(distance)
        self.reference_stamps.append(self.stamp)

    def run(self, seconds: float, stop: Optional[Callable[[], bool]] = None) -> bool:
        """Step ``seconds`` of sensor time, or until ``stop()`` (checked after each step) or a fall; whether
        ``stop`` ended it."""
        for _ in range(int(round(seconds * NS_PER_S / self.period_ns))):
            self.step()
            if stop is not None and stop():
                return True
            if self.fallen:
                return False
        return False

    # ------------------------------------------------------------------ faults
    def kill(self, name: str) -> None:
        """The node dies: no more calls, no more outputs."""
        self.alive[name] = False

    def restart(self, name: str) -> None:
        """A fresh instance of the node, fed the latched plan."""
        if name == "walk_behavior":
            self.supervisor = WalkSupervisor(self.supervisor_params, self.robot)
        elif name == "mpc_planner":
            self.planner = PlannerStage(self.robot, self.planner_params)
            if self.plan is not None:
                self.planner.set_plan(self.plan)
        else:
            self.whole_body = WholeBodyStage(self.robot, self.whole_body_params)
            if self.plan is not None:
                self.whole_body.set_plan(self.plan)
        self.alive[name] = True

    # ------------------------------------------------------------------ walking
    def feet(self) -> tuple:
        """The (left, right) sole poses, simulator truth (to write a client's footsteps)."""
        poses = self.robot.foot_poses(np.asarray(self.sim.state.q))
        return tuple(FootPose(tuple(poses[f][0]), yaw_of(poses[f][1]))
                     for f in (self.robot.left_foot_frame, self.robot.right_foot_frame))

    def send(self, count: int, goal: bytes, step_length: float = 0.2, duration: float = 0.8):
        """A Walk goal of ``count`` steps forward from where the feet are; its steps. Raises RuntimeError
        when the supervisor refuses it."""
        left, right = self.feet()
        steps = footsteps.walk_forward(left, right, step_length * (count - 1), step_length,
                                       width=lateral_width(left, right), duration=duration)
        answer, output = self.supervisor.submit_goal(goal, steps, True, self.stamp)
        if not answer.accepted:
            raise RuntimeError(f"goal refused: {answer}")
        self._supervise(output)
        return steps

    def result_of(self, goal: bytes):
        """The supervisor's result of ``goal``, or None while it runs."""
        done = [r for r in self.results if r.goal_id == goal]
        return done[0] if done else None

    def walk_to_the_end(self, goal: bytes, limit: float = 10.0):
        """Step until ``goal`` ends (or ``limit`` seconds, or a fall); its result or None."""
        self.run(limit, lambda: self.result_of(goal) is not None)
        return self.result_of(goal)


def lateral_width(left: FootPose, right: FootPose) -> float:
    """Distance [m] between two soles across their mean heading (a walk's ``width``): a stop can leave one
    foot a step ahead of the other, whose distance is then no width (0.43 m on the graph, beyond the step
    limits: the walk after the restart could not be written)."""
    yaw = left.yaw + 0.5 * math.remainder(right.yaw - left.yaw, 2.0 * math.pi)
    dx, dy = (left.position[i] - right.position[i] for i in (0, 1))
    return abs(-math.sin(yaw) * dx + math.cos(yaw) * dy)


def phase_name(timeline: Timeline, t: float) -> str:
    """The gait phase of ``timeline`` at ``t`` [s]: ``sway``, ``double``, ``catch``, ``stand`` or, in single
    support, ``swing early`` / ``swing late`` (first / second half), with the step index."""
    phase = timeline.phase_at(t)
    if phase.kind is PhaseKind.SINGLE:
        half = "early" if phase.progress(t) < 0.5 else "late"
        return f"step {phase.step_index} swing {half}"
    if phase.kind is PhaseKind.DOUBLE:
        return f"step {phase.step_index} double"
    return phase.kind.name.lower()


@dataclasses.dataclass
class DrillRow:
    """One scenario of :func:`drill`.

    Attributes:
        node: The node killed.
        kill_at: Time [s] into the walk of the kill (None: while standing).
        phase: The gait phase then (:func:`phase_name`).
        result: The walk's result code name ("-" for walk_behavior: no server to answer).
        end_s: Sensor time [s] from the kill to the walk's result (nan without one).
        message: The result's message.
        fell: Whether the robot fell (simulator truth), and ``fall_reason``.
        max_reference_m: Largest distance [m] of a CoM reference to the nearest sole, from the kill on.
        recovery_s: Sensor time [s] from the restart to the loop running (the ik's first OK command on a
            reference after it; for walk_behavior, its first status), nan if it did not.
        after: The result code name of the 2-step walk after the restart ("" if not tried).
        after_message: Its message.
    """

    node: str
    kill_at: Optional[float]
    phase: str
    result: str = ""
    end_s: float = math.nan
    message: str = ""
    fell: bool = False
    fall_reason: str = ""
    max_reference_m: float = math.nan
    recovery_s: float = math.nan
    after: str = ""
    after_message: str = ""

    @property
    def passed(self) -> bool:
        """The acceptance of issue 17: the walk ended within 2 s, not NONE for the planner or ik, no fall, no
        reference beyond 1.5 m of the feet, the walk after the restart succeeded."""
        ended = self.node == "walk_behavior" or self.kill_at is None or self.end_s <= 2.0
        succeeded = self.node != "walk_behavior" and self.result == WalkErrorCode.NONE.name
        return (ended and not succeeded and not self.fell and self.max_reference_m < 1.5
                and self.after == WalkErrorCode.NONE.name)


def drill(graph: DrillGraph, node: str, kill_at: Optional[float], steps: int = 4, dead_for: float = 1.0,
          settle: float = 1.0, seed: int = 0) -> DrillRow:
    """Kill ``node`` ``kill_at`` seconds into a ``steps``-step walk (None: while standing), let the walk end
    (walk_behavior: the stages finish the latched plan), restart the node ``dead_for`` seconds later, wait
    ``settle`` seconds, walk 2 steps (sent again for up to :data:`RETRY_TIME` while refused because the robot
    does not stand on Stand's feet yet). ``graph`` must have run long enough for the loop to run."""
    goal = b"walk-%d" % seed
    row = DrillRow(node, kill_at, "standing")
    if kill_at is not None:
        graph.send(steps, goal)
        graph.run(kill_at)
        row.phase = phase_name(graph.whole_body.timeline, (graph.stamp - graph.plan.stamp_ns) / NS_PER_S) \
            if graph.plan is not None and graph.plan.walking else "standing"
    killed = graph.stamp
    graph.kill(node)
    if kill_at is not None and node != "walk_behavior":
        result = graph.walk_to_the_end(goal)
        if result is not None:
            row.result, row.message = WalkErrorCode(result.error_code).name, result.error_msg
            row.end_s = (graph.stamp - killed) / NS_PER_S
        graph.run(dead_for)
    else:
        row.result = "-"
        graph.run(steps * 0.8 + 1.0 if kill_at is not None else dead_for)  # the stages finish the plan
    restarted = graph.stamp
    if not graph.fallen:
        graph.restart(node)
        ticks, statuses = len(graph.reference_ticks), graph.statuses
        if node == "walk_behavior":
            up = graph.run(2.0, lambda: graph.statuses > statuses)
        else:
            up = graph.run(2.0, lambda: len(graph.reference_ticks) > ticks)
        if up:
            row.recovery_s = (graph.stamp - restarted) / NS_PER_S
        graph.run(max(0.0, settle - (graph.stamp - restarted) / NS_PER_S))
    if not graph.fallen:
        after = b"after-%d" % seed
        sent, retry_until = False, graph.stamp + round(RETRY_TIME * NS_PER_S)
        while not sent:
            try:
                graph.send(2, after)
                sent = True
            except RuntimeError as exc:
                # As a client does (GraphClient.walk_after_restart): a goal refused while the robot does not
                # stand on Stand's feet yet is sent again once the walk behavior has re-anchored Stand.
                if "INCONSISTENT_STEPS" not in str(exc) or graph.stamp >= retry_until or graph.fallen:
                    row.after, row.after_message = "refused", str(exc)
                    break
                graph.run(0.1)
        if sent:
            result = graph.walk_to_the_end(after)
            if result is not None:
                row.after, row.after_message = WalkErrorCode(result.error_code).name, result.error_msg
            graph.run(1.0)  # standing after it
    row.fell, row.fall_reason = graph.fallen, graph.falls.reason
    distances = [d for stamp, d in zip(graph.reference_stamps, graph.reference_distances) if stamp >= killed]
    row.max_reference_m = max(distances) if distances else math.nan
    return row


__all__ = ["DEATH_CODES", "GRAPH_WHOLE_BODY", "NODES", "ORIGIN_NS", "DrillGraph", "DrillRow", "drill",
           "lateral_width", "phase_name"]
