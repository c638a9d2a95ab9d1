"""Benchmark: the in-process control tick of a Talos walk (MPC planner step, IK targets, two IK solutions).

Every 20 ms tick does what the graph does (mpc_planner then ik, seed 001):

1. measured CoM: forward kinematics of the previous tick's first IK solution (the kinematic plant);
2. ``MpcPlanner.step(t, measured_com)`` -> CoM targets at t + T and t + 2T;
3. ``walk_targets`` at t + T and t + 2T (torso tilt of the reference posture);
4. ``IKSolver.solve_two`` from the previous tick's first solution.

Walk: Talos (``talos_reduced``), 10 footsteps from ``walk_mpc.core.walk.footsteps.walk_forward`` (0.2 m steps,
single support 0.8 s, double support 0.3 s, 0.6 s sway and catch), default planner parameters (exact
backend, N = 40, T = 40 ms) with the CoM height of the reference posture. With ``--correct-support``
the planner also gets the measured sole pose at each touchdown (``correct_support``: new timeline,
cold preview caches), as a node doing seed 001's second feedback would.

Baseline, in the same process, alternating with ours every pass over the walk (``--interleave``: every
tick, which cools the caches of both): a planner whose preview
builder is the straightforward per-interval loop (the implementation before the vectorised builder;
support boxes cached per phase), IK targets built with the public, fully validating ``IKTargets``
constructor, and the plain damped Gauss-Newton of ``benchmarks/ik_talos.py`` for each IK solution.
Printed: median, p99 and max of each part and of the whole tick (wall clock), and the ratio ours /
baseline; the last line is the thread CPU time of the whole tick, which leaves out the time other
processes held the core (compare its p99 with the wall-clock one to see how much is machine load).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -P benchmarks/control_tick.py [--repeats 10] [--correct-support]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # ik_talos.PlainDampedGaussNewton (with python -P)

from ik_talos import PlainDampedGaussNewton  # noqa: E402

from walk_mpc.core.body.ik import IKSolver, IKTargets  # noqa: E402
from walk_mpc.core.body.robot import RobotModel, rotation_z, yaw_of  # noqa: E402
from walk_mpc.core.body.targets import foot_targets_at, torso_yaw, walk_targets, yaw_free  # noqa: E402
from walk_mpc.core.mpc.planner import MpcPlanner, PlannerParameters  # noqa: E402
from walk_mpc.core.mpc.preview import Preview, PreviewBuilder, double_support_box  # noqa: E402
from walk_mpc.core.mpc.problem import MpcParameters  # noqa: E402
from walk_mpc.core.walk.footsteps import walk_forward  # noqa: E402
from walk_mpc.core.walk.step import Foot  # noqa: E402
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline  # noqa: E402

T = 0.02  # [s] control period
STEP_LENGTH = 0.2  # [m]
SINGLE_SUPPORT = 0.8  # [s]
DOUBLE_SUPPORT = 0.3  # [s]
N_STEPS = 10
PARTS = ("measured CoM", "planner.step", "targets (T, 2T)", "IK both solutions", "whole tick")
CPU = "tick, CPU time"  # thread CPU time of the whole tick: without the time other processes took the core


class LoopPreviewBuilder(PreviewBuilder):
    """The per-interval Python loop (boxes cached per phase): the builder before vectorisation."""

    def build(self, t: float) -> Preview:
        n = self.durations.shape[0]
        angles, lower, upper, ref = np.empty(n), np.empty((n, 2)), np.empty((n, 2)), np.empty((n, 2))
        timeline, boxes = self.timeline, self._loop_boxes
        for i, offset in enumerate(np.cumsum(self.durations)):
            ts = t + offset + 1e-9
            index = timeline.phase_index_at(ts)
            phase = timeline.phases[index]
            box = boxes.get(index)
            if box is None:
                if phase.kind is PhaseKind.SINGLE:
                    box = self.sole.box(phase.foot(phase.swing_foot.other))
                else:
                    box = double_support_box(phase.left, phase.right, self.sole)
                boxes[index] = box
            angles[i], lower[i], upper[i] = box
            ref[i] = self.zmp_reference(index, phase, ts)
        return Preview(self.durations, angles, lower, upper, ref, t_start=t)


class BaselinePlanner(MpcPlanner):
    """MpcPlanner whose preview is built by :class:`LoopPreviewBuilder`."""

    def set_timeline(self, timeline: Timeline) -> None:
        super().set_timeline(timeline)
        builder = LoopPreviewBuilder(timeline, self.params.sole, self.params.mpc.sampling_period,
                                     self.params.mpc.horizon, first_interval=self.params.control_period)
        builder._loop_boxes = {}
        builder.durations = self.mpc.durations
        self._builder = builder


SOLES = {Foot.LEFT: "left_sole_link", Foot.RIGHT: "right_sole_link"}  # Talos (PlainDampedGaussNewton keys)


def validated_walk_targets(timeline: Timeline, t: float, com, tilt) -> IKTargets:
    """walk_targets through the public IKTargets constructor (every array validated)."""
    feet = foot_targets_at(timeline, t)
    yaw = torso_yaw(feet[Foot.LEFT].yaw, feet[Foot.RIGHT].yaw)
    return IKTargets(
        com_position=com,
        foot_positions={SOLES[foot]: target.position for foot, target in feet.items()},
        foot_rotations={SOLES[foot]: rotation_z(target.yaw) for foot, target in feet.items()},
        torso_orientation=rotation_z(yaw) @ np.asarray(tilt, dtype=float),
    )


def talos_walk(robot: RobotModel) -> Timeline:
    """The 10-step straight walk from the reference posture's soles."""
    q0 = robot.reference_configuration()
    feet = robot.foot_poses(q0)
    poses = {name: FootPose(tuple(p), yaw_of(r)) for name, (p, r) in feet.items()}
    left, right = poses[robot.left_foot_frame], poses[robot.right_foot_frame]
    width = abs(left.position[1] - right.position[1])
    steps = walk_forward(left, right, STEP_LENGTH * (N_STEPS - 1), step_length=STEP_LENGTH, width=width,
                         duration=SINGLE_SUPPORT + DOUBLE_SUPPORT)
    assert len(steps) == N_STEPS, len(steps)
    return Timeline(left, right, steps, GaitTiming(sway_duration=0.6, double_support_duration=DOUBLE_SUPPORT,
                                                   catch_duration=0.6))


class Loop:
    """One closed loop (planner, targets, IK) with its own state and timings."""

    def __init__(self, robot, planner, targets_of, solve_two, timeline, tilt, correct_support):
        self.robot, self.planner, self.targets_of, self.solve_two = robot, planner, targets_of, solve_two
        self.timeline, self.tilt, self.correct_support = timeline, tilt, correct_support
        self.samples = {part: [] for part in (*PARTS, CPU)}
        self.q0 = robot.reference_configuration()

    def start(self) -> None:
        self.planner.reset()
        self.planner.set_timeline(self.timeline)
        self.q = self.q0
        self.landed = 0

    def tick(self, t: float) -> float:
        robot, clock = self.robot, time.perf_counter_ns
        cpu = time.thread_time_ns()
        c0 = clock()
        measured = robot.com(self.q)
        c1 = clock()
        out = self.planner.step(t, measured)
        c2 = clock()
        targets = [self.targets_of(self.timeline, t + dt, com, self.tilt)
                   for dt, com in zip((T, 2 * T), out.com_targets)]
        c3 = clock()
        q_first, q_second = self.solve_two(targets[0], targets[1], self.q)
        c4 = clock()
        self.samples[CPU].append(time.thread_time_ns() - cpu)
        self.q = q_first
        for part, ns in zip(PARTS, (c1 - c0, c2 - c1, c3 - c2, c4 - c3, c4 - c0)):
            self.samples[part].append(ns)
        if self.correct_support:  # outside the timed tick: only its effect on the next ticks counts
            done = self.timeline.completed_step_index(t)
            if done != self.landed:
                self.landed = done
                step = next(s for s in self.timeline.steps if s.step_index == done)
                position, rotation = robot.frame_pose(q_first, robot.left_foot_frame if step.foot is Foot.LEFT
                                                      else robot.right_foot_frame)
                self.planner.correct_support(step.foot, FootPose(tuple(position), yaw_of(rotation)), t)
        return float(np.linalg.norm(out.com_targets[0] - robot.com(q_first)))


def summary(label: str, ours: list[int], base: list[int]) -> None:
    o, b = np.asarray(ours) * 1e-3, np.asarray(base) * 1e-3
    om, op, bm, bp = np.median(o), np.percentile(o, 99), np.median(b), np.percentile(b, 99)
    print(f"  {label:<18s} median {om:7.1f} us  p99 {op:7.1f} us  max {o.max():7.1f} us | baseline median "
          f"{bm:7.1f} us  p99 {bp:7.1f} us | ratio median {om / bm:4.2f}  p99 {op / bp:4.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10, help="passes over the walk")
    parser.add_argument("--correct-support", action="store_true",
                        help="report the measured sole at each touchdown to the planner (correct_support)")
    parser.add_argument("--interleave", action="store_true",
                        help="alternate ours and the baseline every tick (default: every pass over the walk)")
    args = parser.parse_args()
    robot = RobotModel(RobotModel.Parameters(robot="talos_reduced"))
    q0 = robot.reference_configuration()
    com_height = float(robot.com(q0)[2] - robot.foot_poses(q0)[robot.left_foot_frame][0][2])
    params = PlannerParameters(mpc=MpcParameters(com_height=com_height), control_period=T)
    timeline = talos_walk(robot)
    tilt = yaw_free(robot.frame_pose(q0, robot.torso_frame)[1])

    solver = IKSolver(robot)
    gauss_newton = PlainDampedGaussNewton(robot, IKSolver.Parameters())

    def ours_two(a, b, q):
        first, second = solver.solve_two(a, b, q)
        ours_two.failures += not (first.success and second.success)
        ours_two.iterations.append((first.iterations, second.iterations))
        return first.q, second.q

    ours_two.failures, ours_two.iterations = 0, []

    def base_two(a, b, q):
        first = gauss_newton.solve(a, q)[0]
        return first, gauss_newton.solve(b, first)[0]

    ours = Loop(robot, MpcPlanner(params), walk_targets, ours_two, timeline, tilt, args.correct_support)
    base = Loop(robot, BaselinePlanner(params), validated_walk_targets, base_two, timeline, tilt,
                args.correct_support)
    ticks = int(round((timeline.t_end + 0.4) / T))
    tracking = []
    gc.collect()
    wall = time.perf_counter()
    for _ in range(args.repeats):
        ours.start()
        base.start()
        if args.interleave:
            for k in range(ticks):
                tracking.append(ours.tick(k * T))
                base.tick(k * T)
        else:
            tracking += [ours.tick(k * T) for k in range(ticks)]
            for k in range(ticks):
                base.tick(k * T)
    wall = time.perf_counter() - wall
    load = os.getloadavg()
    print(f"Talos control tick: {ticks} ticks x {args.repeats} repeats = {ticks * args.repeats} per loop, "
          f"{N_STEPS} steps of {STEP_LENGTH} m, SS {SINGLE_SUPPORT} s DS {DOUBLE_SUPPORT} s, "
          f"correct_support {'on' if args.correct_support else 'off'}")
    print(f"  ours: IK failures {ours_two.failures}, iterations (first, second) median "
          f"{[int(v) for v in np.median(ours_two.iterations, axis=0)]} max "
          f"{np.max(ours_two.iterations, axis=0).tolist()}, |CoM target(T) - CoM(q_T)| max "
          f"{max(tracking) * 1e3:.4f} mm")
    print(f"  machine: {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"(after the run; concurrent work inflates p99), run {wall:.1f} s, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    for part in (*PARTS, CPU):
        summary(part, ours.samples[part], base.samples[part])


if __name__ == "__main__":
    main()
