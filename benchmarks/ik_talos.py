"""Benchmark: one whole-body IK solution for Talos, warm-started from the previous tick's solution.

Walking trajectory: 20 ms control ticks (seed 001), 0.2 m steps, 0.5 s single support,
0.1 s double support, CoM at 0.85 m swaying +-6 cm; the swing foot follows
walk_mpc.core.body.swing. Each sample times IKSolver.solve(targets[k + 1], q_k), where q_k
is IKSolver's solution of tick k, and, in the same process from the same q_k, the baseline:
damped Gauss-Newton IK as a pinocchio user writes it (PlainDampedGaussNewton below: the same
tasks, weights, damping, posture step and tolerances as IKSolver.Parameters; per iteration one
computeJointJacobians + updateFramePlacements, jacobianCenterOfMass, getFrameJacobian per task
frame, an m x m solve; stop when every task is within tolerance). Both solutions are checked
with the same independent residual function.

The first figures are with numba (IKSolver's compiled steps); the second line comes from a
subprocess where numba cannot be imported (and NUMBA_DISABLE_JIT=1), i.e. what a user without
numba gets: IKSolver's numpy/LAPACK steps. (NUMBA_DISABLE_JIT=1 alone would run the kernels as
interpreted Python, 40x slower, a debugging mode.) Run with:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -P benchmarks/ik_talos.py
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and "--without-numba" in sys.argv:
    sys.modules["numba"] = None  # import numba raises ImportError: IKSolver takes its numpy path

import argparse  # noqa: E402
import gc  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

from walk_mpc.core.body.ik import IKSolver, IKTargets  # noqa: E402
from walk_mpc.core.body.robot import RobotModel, rotation_z  # noqa: E402
from walk_mpc.core.body.swing import swing_pose  # noqa: E402

TICK = 0.02  # [s] control period of seed 001
STEP_LENGTH = 0.2  # [m]
SINGLE_SUPPORT = 0.5  # [s]
DOUBLE_SUPPORT = 0.1  # [s]
COM_HEIGHT = 0.85  # [m]
SWAY = 0.06  # [m]
SWING_HEIGHT = 0.05  # [m]
_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


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


class PlainDampedGaussNewton:
    """Baseline: damped Gauss-Newton IK written plainly with pinocchio, for IKSolver's problem.

    Tasks: CoM position, both soles (position and orientation), torso orientation, with the weights,
    damping ``rho_i = (damping + error_damping |e|^2) / weight_i``, posture step
    ``dq_p = posture_gain * (reference - q)`` (joints only) and tolerances of ``params``. One iteration:

        dq = dq_p + J^T (J J^T + diag(rho))^-1 (e - J dq_p),   q <- clip(integrate(q, dq))

    with the task Jacobian and errors from one computeJointJacobians + updateFramePlacements pass.
    """

    def __init__(self, robot: RobotModel, params: IKSolver.Parameters) -> None:
        self.model = robot.model
        self.data = robot.model.createData()
        self.params = params
        self.left = robot.frame_id(robot.left_foot_frame)
        self.right = robot.frame_id(robot.right_foot_frame)
        self.torso = robot.frame_id(robot.torso_frame)
        self.left_name, self.right_name = robot.left_foot_frame, robot.right_foot_frame
        self.posture = robot.reference_configuration()
        self.lower = robot.model.lowerPositionLimit[7:].copy()
        self.upper = robot.model.upperPositionLimit[7:].copy()
        weights = [params.com_weight] * 3 + [params.foot_weight] * 12 + [params.torso_weight] * 3
        self.inverse_weight = 1.0 / np.array(weights)

    def solve(self, targets: IKTargets, q: np.ndarray) -> tuple[np.ndarray, int, bool]:
        """(configuration, iterations, converged) from ``q``."""
        model, data, p = self.model, self.data, self.params
        q = q.copy()
        for iteration in range(p.max_iterations + 1):
            pin.computeJointJacobians(model, data, q)
            pin.updateFramePlacements(model, data)
            jcom = pin.jacobianCenterOfMass(model, data, False)  # also sets data.com[0]
            left, right, torso = data.oMf[self.left], data.oMf[self.right], data.oMf[self.torso]
            position_errors = [
                targets.com_position - data.com[0],
                targets.foot_positions[self.left_name] - left.translation,
                targets.foot_positions[self.right_name] - right.translation,
            ]
            rotation_errors = [
                pin.log3(targets.foot_rotations[self.left_name] @ left.rotation.T),
                pin.log3(targets.foot_rotations[self.right_name] @ right.rotation.T),
                pin.log3(targets.torso_orientation @ torso.rotation.T),
            ]
            if (max(np.linalg.norm(e) for e in position_errors) <= p.tolerance
                    and max(np.linalg.norm(e) for e in rotation_errors) <= p.orientation_tolerance):
                return q, iteration, True
            if iteration == p.max_iterations:
                break
            jacobian = np.vstack([
                jcom,
                pin.getFrameJacobian(model, data, self.left, _LWA),
                pin.getFrameJacobian(model, data, self.right, _LWA),
                pin.getFrameJacobian(model, data, self.torso, _LWA)[3:],
            ])
            error = np.concatenate([position_errors[0], position_errors[1], rotation_errors[0],
                                    position_errors[2], rotation_errors[1], rotation_errors[2]])
            dq_p = p.posture_gain * pin.difference(model, q, self.posture)
            dq_p[:6] = 0.0
            rho = (p.damping + p.error_damping * float(error @ error)) * self.inverse_weight
            gram = jacobian @ jacobian.T + np.diag(rho)
            dq = dq_p + jacobian.T @ np.linalg.solve(gram, error - jacobian @ dq_p)
            q = pin.integrate(model, q, dq)
            q[7:] = np.clip(q[7:], self.lower, self.upper)
        return q, p.max_iterations, False


def residuals(robot: RobotModel, targets: IKTargets, q: np.ndarray) -> tuple[float, float]:
    """Largest position residual [m] (CoM, soles) and orientation residual [rad] (soles, torso) of ``q``."""
    positions = [np.linalg.norm(robot.com(q) - targets.com_position)]
    rotations = []
    for frame, target in targets.foot_positions.items():
        position, rotation = robot.frame_pose(q, frame)
        positions.append(np.linalg.norm(position - target))
        rotations.append(np.linalg.norm(pin.log3(targets.foot_rotations[frame] @ rotation.T)))
    torso = robot.frame_pose(q, robot.torso_frame)[1]
    rotations.append(np.linalg.norm(pin.log3(targets.torso_orientation @ torso.T)))
    return float(max(positions)), float(max(rotations))


def percentile_us(samples_ns: list[int], p: float) -> float:
    return float(np.percentile(np.asarray(samples_ns) * 1e-3, p))


def counts(values) -> dict:
    return dict(zip(*(a.tolist() for a in np.unique(values, return_counts=True))))


def run(args, robot: RobotModel, targets: list[IKTargets]) -> dict:
    """Time both solvers over the walk; returns the figures."""
    params = IKSolver.Parameters(tolerance=args.tolerance)
    solver = IKSolver(robot, params)
    baseline = PlainDampedGaussNewton(robot, params)
    # Chain of solutions q_k (tick k), starting from a converged standing posture.
    first = solver.solve(targets[0], robot.reference_configuration())
    assert first.success, first
    chain = [first.q]
    for target in targets[1:]:
        chain.append(solver.solve(target, chain[-1]).q)

    ours_ns, base_ns = [], []
    ours_res, base_res = [], []
    ours_it, base_it = [], []
    ours_fail, base_fail, limited = 0, 0, 0
    gc.collect()
    for _ in range(args.repeats):
        for k in range(len(targets) - 1):
            q_prev, target = chain[k], targets[k + 1]
            t0 = time.perf_counter_ns()
            result = solver.solve(target, q_prev)
            t1 = time.perf_counter_ns()
            q_base, base_iterations, base_ok = baseline.solve(target, q_prev)
            t2 = time.perf_counter_ns()
            ours_ns.append(t1 - t0)
            base_ns.append(t2 - t1)
            ours_res.append(residuals(robot, target, result.q))
            base_res.append(residuals(robot, target, q_base))
            ours_it.append(result.iterations)
            base_it.append(base_iterations)
            ours_fail += not result.success
            base_fail += not base_ok
            limited += bool(result.limited_joints)
    return dict(
        kernel=solver._kernel is not None, ours_ns=ours_ns, base_ns=base_ns, ours_res=np.array(ours_res),
        base_res=np.array(base_res), ours_it=ours_it, base_it=base_it, ours_fail=ours_fail,
        base_fail=base_fail, limited=limited,
    )


def report(label: str, f: dict) -> None:
    ours50, ours99 = percentile_us(f["ours_ns"], 50), percentile_us(f["ours_ns"], 99)
    base50, base99 = percentile_us(f["base_ns"], 50), percentile_us(f["base_ns"], 99)
    steps = "compiled steps" if f["kernel"] else "numpy steps"
    print(f"  {label} ({steps}): IKSolver median {ours50:6.1f} us p99 {ours99:6.1f} us | plain damped GN "
          f"median {base50:6.1f} us p99 {base99:6.1f} us | ratio IKSolver/plain median {ours50 / base50:.2f} "
          f"p99 {ours99 / base99:.2f}")
    for name, res, it, fail in (("IKSolver", f["ours_res"], f["ours_it"], f["ours_fail"]),
                                ("plain   ", f["base_res"], f["base_it"], f["base_fail"])):
        print(f"      {name}: max residual {res[:, 0].max() * 1e3:.4f} mm / {res[:, 1].max() * 1e3:.4f} "
              f"mrad, iterations {counts(it)}, failures {fail}")
    print(f"      IKSolver solves whose last step held a joint at a limit: {f['limited']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="number of footsteps of the walk")
    parser.add_argument("--repeats", type=int, default=5, help="passes over the walk")
    parser.add_argument("--tolerance", type=float, default=IKSolver.Parameters().tolerance,
                        help="IK position tolerance [m] (default: the Parameters default)")
    parser.add_argument("--without-numba", action="store_true",
                        help="(internal) numba not importable: the second line")
    parser.add_argument("--only", action="store_true", help="skip the subprocess without numba")
    args = parser.parse_args()

    robot = RobotModel(RobotModel.Parameters(robot="talos_reduced"))
    targets = walking_targets(robot, args.steps)
    if args.without_numba:
        report("without numba", run(args, robot, targets))
        return

    params = IKSolver.Parameters(tolerance=args.tolerance)
    com_moves = [np.linalg.norm(b.com_position - a.com_position) for a, b in zip(targets, targets[1:])]
    swing_moves = [
        max(np.linalg.norm(b.foot_positions[f] - a.foot_positions[f]) for f in robot.foot_frames)
        for a, b in zip(targets, targets[1:])
    ]
    print(f"Talos IK benchmark: nq={robot.nq} nv={robot.nv}, {(len(targets) - 1) * args.repeats} solves "
          f"({len(targets) - 1} ticks x {args.repeats}), tick {TICK * 1e3:.0f} ms, tolerance "
          f"{args.tolerance * 1e3:g} mm / {params.orientation_tolerance * 1e3:g} mrad")
    print(f"  per-tick target motion: CoM median {np.median(com_moves) * 1e3:.1f} mm (max "
          f"{np.max(com_moves) * 1e3:.1f}), swing foot median {np.median(swing_moves) * 1e3:.1f} mm "
          f"(max {np.max(swing_moves) * 1e3:.1f})")
    report("with numba", run(args, robot, targets))
    sys.stdout.flush()
    if args.only:
        return
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    command = [sys.executable, "-P", os.path.abspath(__file__), "--without-numba", "--steps", str(args.steps),
               "--repeats", str(args.repeats), "--tolerance", repr(args.tolerance)]
    subprocess.run(command, env=env, check=True)


if __name__ == "__main__":
    main()
