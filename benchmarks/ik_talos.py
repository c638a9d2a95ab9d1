"""Benchmark: one whole-body IK solution for Talos, warm-started from the previous tick's solution.

Walking trajectory: 20 ms control ticks (seed 001), 0.2 m steps, 0.5 s single support,
0.1 s double support, CoM at 0.85 m swaying +-6 cm; the swing foot follows
walk_mpc.core.body.swing. Each sample times IKSolver.solve(targets[k + 1], q_k) where q_k
is the solution of tick k, and compares with a plain 3-iteration Gauss-Newton
(normal equations over all nv = 38 velocities, posture rows included) in the same
process. Run with:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -P benchmarks/ik_talos.py
"""

from __future__ import annotations

import argparse
import gc
import math
import time

import numpy as np
import pinocchio as pin

from walk_mpc.core.body.ik import IKSolver, IKTargets
from walk_mpc.core.body.robot import RobotModel, rotation_z
from walk_mpc.core.body.swing import swing_pose

TICK = 0.02  # [s] control period of seed 001
STEP_LENGTH = 0.2  # [m]
SINGLE_SUPPORT = 0.5  # [s]
DOUBLE_SUPPORT = 0.1  # [s]
COM_HEIGHT = 0.85  # [m]
SWAY = 0.06  # [m]
SWING_HEIGHT = 0.05  # [m]


def walking_targets(robot: RobotModel, n_steps: int) -> list[IKTargets]:
    """IK targets every tick along a straight walk (first step with the left foot)."""
    q0 = robot.reference_configuration()
    feet = robot.foot_poses(q0)
    left = feet[robot.left_foot_frame][0].copy()
    right = feet[robot.right_foot_frame][0].copy()
    com_x0 = robot.com(q0)[0]
    step_time = SINGLE_SUPPORT + DOUBLE_SUPPORT
    targets = []
    n_ticks = int(round(n_steps * step_time / TICK))
    for k in range(n_ticks + 1):
        t = k * TICK
        index = min(int(t // step_time), n_steps - 1)
        phase = t - index * step_time
        swing_is_left = index % 2 == 0
        # Feet before step `index`: every earlier step advanced its foot (the first by one step length).
        lf, rf = left.copy(), right.copy()
        for i in range(index):
            advanced = lf if i % 2 == 0 else rf
            advanced[0] += STEP_LENGTH if i == 0 else 2 * STEP_LENGTH
        start = lf if swing_is_left else rf
        end = start.copy()
        end[0] += STEP_LENGTH if index == 0 else 2 * STEP_LENGTH
        s = min(1.0, phase / SINGLE_SUPPORT)
        swing = swing_pose(start, 0.0, end, 0.0, SWING_HEIGHT, s)
        if swing_is_left:
            lf = swing.position
        else:
            rf = swing.position
        com = np.array([
            com_x0 + STEP_LENGTH * t / step_time,
            SWAY * math.sin(math.pi * t / step_time),
            COM_HEIGHT,
        ])
        targets.append(IKTargets(
            com_position=com,
            foot_positions={robot.left_foot_frame: lf, robot.right_foot_frame: rf},
            foot_rotations={robot.left_foot_frame: np.eye(3), robot.right_foot_frame: np.eye(3)},
            torso_orientation=rotation_z(0.0),
        ))
    return targets


class PlainGaussNewton:
    """Baseline: 3 undamped-ish Gauss-Newton iterations on the full normal equations (nv x nv)."""

    def __init__(self, robot: RobotModel, iterations: int = 3) -> None:
        self.model = robot.model
        self.data = robot.model.createData()
        self.iterations = iterations
        self.left = robot.frame_id(robot.left_foot_frame)
        self.right = robot.frame_id(robot.right_foot_frame)
        self.torso = robot.frame_id(robot.torso_frame)
        self.reference = robot.reference_configuration()
        self.left_name, self.right_name = robot.left_foot_frame, robot.right_foot_frame
        self.posture_rows = np.eye(robot.nv)[6:] * 1e-3
        self.regularisation = 1e-9 * np.eye(robot.nv)

    def solve(self, targets: IKTargets, q: np.ndarray) -> np.ndarray:
        model, data = self.model, self.data
        for _ in range(self.iterations):
            pin.computeJointJacobians(model, data, q)
            pin.framesForwardKinematics(model, data, q)
            jcom = pin.jacobianCenterOfMass(model, data, q, False)
            com = data.com[0]
            rows, errors = [jcom], [targets.com_position - com]
            for fid, name in ((self.left, self.left_name), (self.right, self.right_name)):
                oMf = data.oMf[fid]
                rows.append(pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED))
                errors.append(targets.foot_positions[name] - oMf.translation)
                errors.append(pin.log3(targets.foot_rotations[name] @ oMf.rotation.T))
            rows.append(pin.getFrameJacobian(model, data, self.torso, pin.LOCAL_WORLD_ALIGNED)[3:])
            errors.append(pin.log3(targets.torso_orientation @ data.oMf[self.torso].rotation.T))
            rows.append(self.posture_rows)
            errors.append(1e-3 * pin.difference(model, q, self.reference)[6:])
            jac = np.vstack(rows)
            err = np.concatenate(errors)
            dq = np.linalg.solve(jac.T @ jac + self.regularisation, jac.T @ err)
            q = pin.integrate(model, q, dq)
        return q


def percentile_us(samples_ns: list[int], p: float) -> float:
    return float(np.percentile(np.asarray(samples_ns) * 1e-3, p))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="number of footsteps of the walk")
    parser.add_argument("--repeats", type=int, default=5, help="passes over the walk")
    parser.add_argument("--tolerance", type=float, default=IKSolver.Parameters().tolerance,
                        help="IK position tolerance [m] (default: the Parameters default)")
    args = parser.parse_args()

    robot = RobotModel(RobotModel.Parameters(robot="talos_reduced"))
    solver = IKSolver(robot, IKSolver.Parameters(tolerance=args.tolerance))
    baseline = PlainGaussNewton(robot)
    targets = walking_targets(robot, args.steps)

    # Chain of solutions q_k (tick k), starting from a converged standing posture.
    first = solver.solve(targets[0], robot.reference_configuration())
    assert first.success, first
    chain = [first.q]
    for target in targets[1:]:
        chain.append(solver.solve(target, chain[-1]).q)

    com_moves = [np.linalg.norm(b.com_position - a.com_position) for a, b in zip(targets, targets[1:])]
    swing_moves = [
        max(np.linalg.norm(b.foot_positions[f] - a.foot_positions[f]) for f in robot.foot_frames)
        for a, b in zip(targets, targets[1:])
    ]
    ours_ns, base_ns, residuals, base_residuals, iterations, failures = [], [], [], [], [], 0
    gc.collect()
    for _ in range(args.repeats):
        for k in range(len(targets) - 1):
            q_prev, target = chain[k], targets[k + 1]
            t0 = time.perf_counter_ns()
            result = solver.solve(target, q_prev)
            t1 = time.perf_counter_ns()
            q_base = baseline.solve(target, q_prev)
            t2 = time.perf_counter_ns()
            ours_ns.append(t1 - t0)
            base_ns.append(t2 - t1)
            residuals.append(max(result.position_residual, 0.0))
            iterations.append(result.iterations)
            failures += not result.success
            base_residuals.append(np.linalg.norm(robot.com(q_base) - target.com_position))

    print(f"Talos IK benchmark: nq={robot.nq} nv={robot.nv}, {len(ours_ns)} solves "
          f"({len(targets) - 1} ticks x {args.repeats}), tick {TICK * 1e3:.0f} ms, "
          f"tolerance {args.tolerance * 1e3:g} mm")
    print(f"  per-tick target motion: CoM median {np.median(com_moves) * 1e3:.1f} mm (max "
          f"{np.max(com_moves) * 1e3:.1f}), swing foot median {np.median(swing_moves) * 1e3:.1f} mm "
          f"(max {np.max(swing_moves) * 1e3:.1f})")
    print(f"  IKSolver.solve : median {percentile_us(ours_ns, 50):7.1f} us   "
          f"p99 {percentile_us(ours_ns, 99):7.1f} us"
          f"   max position residual {max(residuals) * 1e3:.4f} mm   iterations "
          f"{dict(zip(*(a.tolist() for a in np.unique(iterations, return_counts=True))))}   "
          f"failures {failures}")
    print(f"  baseline GN x3 : median {percentile_us(base_ns, 50):7.1f} us   "
          f"p99 {percentile_us(base_ns, 99):7.1f} us"
          f"   max CoM residual {max(base_residuals) * 1e3:.4f} mm")
    print(f"  ratio ours/baseline: median {percentile_us(ours_ns, 50) / percentile_us(base_ns, 50):.2f}"
          f"   p99 {percentile_us(ours_ns, 99) / percentile_us(base_ns, 99):.2f}")


if __name__ == "__main__":
    main()
