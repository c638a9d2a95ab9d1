"""Benchmark: the ik node's per-tick work, two IK solutions (T and 2T, seed 001) along a Talos walk.

Walk: a gait timeline of ``--steps`` 0.15 m steps (0.8 s each, 0.2 s double support, 0.6 s sway and
catch), the CoM above the middle of the feet swaying 3 cm, at 0.86 m; 20 ms ticks. Each tick builds the
targets at t + T and t + 2T with walk_mpc.core.body.targets and calls IKSolver.solve_two from the
previous tick's first solution, as the node does. Printed: median and p99 of the first solve, the
second solve, both solves, and the whole tick (targets + solves); with ``--node`` and rclpy importable,
also the node's ComReference callback in process (targets, solves, message building and publication).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -P benchmarks/ik_two_solutions.py
    (source tools/env.sh && source install/setup.bash && python -P benchmarks/ik_two_solutions.py --node)
"""

from __future__ import annotations

import argparse
import gc
import math
import time

import numpy as np

from walk_mpc.core.body.ik import IKSolver
from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.body.targets import foot_targets_at, walk_targets, yaw_free
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline

T = 0.02  # [s] control period
STEP_LENGTH = 0.15  # [m]
COM_HEIGHT = 0.86  # [m]
SWAY = 0.03  # [m]


def timeline_of(n_steps: int) -> Timeline:
    steps = [Step(k, Foot.LEFT if k % 2 else Foot.RIGHT, 0.8,
                  (k * STEP_LENGTH, 0.085 if k % 2 else -0.085, 0.0)) for k in range(1, n_steps + 1)]
    return Timeline(FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0)), steps,
                    GaitTiming(sway_duration=0.6, double_support_duration=0.2, catch_duration=0.6))


def com_at(timeline: Timeline, t: float) -> np.ndarray:
    feet = foot_targets_at(timeline, t)
    middle = 0.5 * (feet[Foot.LEFT].position + feet[Foot.RIGHT].position)
    return middle + [0.0, SWAY * math.sin(math.pi * t / 0.8), COM_HEIGHT]


def stats(label: str, seconds: list[float]) -> None:
    us = np.asarray(seconds) * 1e6
    print(f"  {label:<34s} median {np.median(us):7.1f} us   p99 {np.percentile(us, 99):7.1f} us   "
          f"max {us.max():7.1f} us")


def core_ticks(robot: RobotModel, timeline: Timeline, repeats: int) -> None:
    solver = IKSolver(robot)
    tilt = yaw_free(robot.frame_pose(robot.reference_configuration(), robot.torso_frame)[1])
    ticks = int(round(timeline.t_end / T))
    first_s, second_s, both_s, tick_s, failures, iterations = [], [], [], [], 0, []
    gc.collect()
    for _ in range(repeats):
        q = robot.reference_configuration()
        for k in range(ticks):
            t = k * T
            start = time.perf_counter()
            targets = [walk_targets(timeline, t + dt, com_at(timeline, t + dt), tilt) for dt in (T, 2 * T)]
            first, second = solver.solve_two(targets[0], targets[1], q)
            tick_s.append(time.perf_counter() - start)
            first_s.append(first.solve_time)
            second_s.append(second.solve_time)
            both_s.append(first.solve_time + second.solve_time)
            iterations.append((first.iterations, second.iterations))
            failures += not (first.success and second.success)
            q = first.q
    median = [int(v) for v in np.median(iterations, axis=0)]
    print(f"Talos ik tick (core): {len(tick_s)} ticks ({ticks} x {repeats}), failures {failures}, "
          f"iterations (first, second) median {median}, max {np.max(iterations, axis=0).tolist()}")
    stats("first solution (T)", first_s)
    stats("second solution (2T)", second_s)
    stats("both solutions", both_s)
    stats("tick: targets + both solutions", tick_s)


def node_ticks(timeline: Timeline, repeats: int) -> None:
    import rclpy

    from walk_mpc.msg import ComReference
    from walk_mpc.nodes.conversions import plan_to_msg, point, time_msg
    from walk_mpc.nodes.ik import IKNode, IKNodeParameters

    context = rclpy.Context()
    rclpy.init(context=context)
    node = IKNode(IKNodeParameters(), context=context)
    timings = []
    publish = node._timing_pub.publish
    node._timing_pub.publish = lambda msg: (timings.append(msg), publish(msg))
    ticks = int(round(timeline.t_end / T))
    try:
        for r in range(repeats):
            origin = 100_000_000_000 + r * 1_000_000_000_000
            node._on_plan(plan_to_msg(timeline, r + 1, True, time_msg(origin)))
            for k in range(ticks):
                msg = ComReference(plan_id=r + 1, time_from_stamp=[T, 2 * T],
                                   com_position=[point(com_at(timeline, k * T + dt)) for dt in (T, 2 * T)])
                msg.header.stamp = time_msg(origin + k * 20_000_000)
                node._on_reference(msg)
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    failed = sum(t.status != 0 for t in timings)
    print(f"ik node callback in process: {len(timings)} ticks, status != 0: {failed}")
    stats("solve_time (both solutions)", [t.solve_time for t in timings])
    stats("tick_time (message in to out)", [t.tick_time for t in timings])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="number of footsteps of the walk")
    parser.add_argument("--repeats", type=int, default=5, help="passes over the walk")
    parser.add_argument("--node", action="store_true", help="also time the node's callback (needs rclpy)")
    args = parser.parse_args()
    robot = RobotModel(RobotModel.Parameters(robot="talos_reduced"))
    timeline = timeline_of(args.steps)
    core_ticks(robot, timeline, args.repeats)
    if args.node:
        node_ticks(timeline, args.repeats)


if __name__ == "__main__":
    main()
