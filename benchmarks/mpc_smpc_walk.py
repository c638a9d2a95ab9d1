"""Benchmark: the smpc_solver test_13 reference walk (142 ticks, closed loop) with every MPC backend.

Prints, per backend, the median and p99 tick time [us] (``Mpc.solve`` given the preview, and the full
tick including building the :class:`Preview` from the per-interval arrays), the largest deviation
from reference_walk.csv and the largest ZMP bound violation; then qpmpc + ProxQP on the same QP in
the same run and the speed ratio. Run with ``OPENBLAS_NUM_THREADS=1``::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -P benchmarks/mpc_smpc_walk.py --repeat 20 --out walk.csv
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from mpc_problems import SMPC_PARAMS, SMPC_TICKS, load_reference_walk  # noqa: E402

from walk_mpc.core.mpc import exact as mpc_exact  # noqa: E402
from walk_mpc.core.mpc.preview import Preview  # noqa: E402
from walk_mpc.core.mpc.problem import Mpc  # noqa: E402


def run_backend(walk, backend: str, repeat: int, use_kernel: bool = True):
    """Closed loop ``repeat`` times; returns (solve times, full tick times, last run's rows, violation)."""
    mpc_exact.USE_KERNEL = use_kernel
    mpc = Mpc(dataclasses.replace(SMPC_PARAMS, backend=backend))
    n = mpc.horizon
    solve_times, tick_times = [], []
    rows, violation = [], 0.0
    mpc.solve(np.zeros((3, 2)), walk.preview(0, durations=mpc.durations))  # compile / set up
    for _ in range(repeat):
        mpc.reset()
        state = np.zeros((3, 2))
        rows = []
        for k in range(SMPC_TICKS):
            sl = slice(k, k + n)
            start = time.perf_counter()
            preview = Preview(mpc.durations, walk.angles[sl], walk.lower[sl], walk.upper[sl],
                              walk.zmp_ref[sl], t_start=k * 0.04)
            built = time.perf_counter()
            plan = mpc.solve(state, preview)
            done = time.perf_counter()
            solve_times.append(done - built)
            tick_times.append(done - start)
            state = np.stack([plan.com_position[0], plan.com_velocity[0], plan.com_acceleration[0]])
            violation = max(violation, float(preview.violation(plan.zmp).max()))
            rows.append((k, (k + 1) * 0.04, state, plan.zmp[0], walk.zmp_ref[k], walk.lower[k],
                         walk.upper[k]))
    mpc_exact.USE_KERNEL = True
    return np.array(solve_times) * 1e6, np.array(tick_times) * 1e6, rows, violation


def run_qpmpc(walk, repeat: int):
    """The same QP per axis with qpmpc + ProxQP (qpmpc's cost is uniform on the state, so the state is
    scaled: xi = diag(sqrt(zmp), sqrt(velocity), sqrt(acceleration)) (z, v, a))."""
    import qpmpc

    p = SMPC_PARAMS
    n, dt, zeta, w = p.horizon, p.sampling_period, p.com_height / p.gravity, p.weights
    a_c = np.array([[1.0, dt, dt * dt / 2], [0.0, 1.0, dt], [0.0, 0.0, 1.0]])
    b_c = np.array([[dt**3 / 6], [dt * dt / 2], [dt]])
    to_zva = np.array([[1, 0, -zeta], [0, 1, 0], [0, 0, 1]])
    to_xi = np.diag(np.sqrt([w.zmp, w.velocity, w.acceleration])) @ to_zva
    a_xi = to_xi @ a_c @ np.linalg.inv(to_xi)
    b_xi = to_xi @ b_c
    g = np.array([[1.0 / np.sqrt(w.zmp), 0.0, 0.0]])  # ZMP row in xi coordinates
    c_k = np.vstack([g @ a_xi, -g @ a_xi])  # constraint at stage k acts on x_{k+1}
    d_k = np.vstack([g @ b_xi, -g @ b_xi])
    times, com, zmp = [], None, None
    for _ in range(repeat):
        state = np.zeros((3, 2))
        com, zmp = [], []
        for k in range(SMPC_TICKS):
            start = time.perf_counter()
            jerk = np.zeros(2)
            for axis in range(2):
                sl = slice(k, k + n)
                lo, hi, ref = walk.lower[sl, axis], walk.upper[sl, axis], walk.zmp_ref[sl, axis]
                targets = np.zeros((n, 3))
                targets[1:, 0] = np.sqrt(w.zmp) * ref[:-1]  # stage k >= 1 tracks zref of interval k - 1
                goal = np.array([np.sqrt(w.zmp) * ref[-1], 0.0, 0.0])
                problem = qpmpc.MPCProblem(
                    transition_state_matrix=a_xi, transition_input_matrix=b_xi,
                    ineq_state_matrix=c_k, ineq_input_matrix=d_k,
                    ineq_vector=[np.array([hi[i], -lo[i]]) for i in range(n)],
                    nb_timesteps=n, terminal_cost_weight=1.0, stage_state_cost_weight=1.0,
                    stage_input_cost_weight=w.jerk, initial_state=to_xi @ state[:, axis],
                    goal_state=goal, target_states=targets.ravel())
                plan = qpmpc.solve_mpc(problem, solver="proxqp")
                jerk[axis] = plan.first_input[0]
            times.append(time.perf_counter() - start)
            state = a_c @ state + b_c @ jerk[None, :]
            com.append(state[0].copy())
            zmp.append(state[0] - zeta * state[2])
    return np.array(times) * 1e6, np.array(com), np.array(zmp)


def deviation(walk, com, zmp) -> float:
    """Largest |CoM| or |ZMP| difference from reference_walk.csv [m]."""
    ref = walk.reference
    return float(max(np.abs(com[:, 0] - ref["com_x"]).max(), np.abs(com[:, 1] - ref["com_y"]).max(),
                     np.abs(zmp[:, 0] - ref["zmp_x"]).max(), np.abs(zmp[:, 1] - ref["zmp_y"]).max()))


def write_csv(path: str, rows) -> None:
    """Per-tick CoM and ZMP with the columns of reference_walk.csv."""
    header = ["iter", "t_s", "com_x", "com_y", "com_vx", "com_vy", "com_ax", "com_ay", "zmp_x", "zmp_y",
              "zref_x", "zref_y", "angle", "lb_x", "ub_x", "lb_y", "ub_y", "rzmp_x", "rzmp_y", "inside"]
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        for k, t, s, z, ref, lo, hi in rows:
            inside = int(lo[0] <= z[0] <= hi[0] and lo[1] <= z[1] <= hi[1])
            values = (s[0, 0], s[0, 1], s[1, 0], s[1, 1], s[2, 0], s[2, 1], z[0], z[1])
            writer.writerow([k, f"{t:.3f}", *(f"{v:.12f}" for v in values),
                             *(f"{v:.9f}" for v in (ref[0], ref[1], 0.0, lo[0], hi[0], lo[1], hi[1])),
                             f"{z[0]:.12f}", f"{z[1]:.12f}", inside])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="closed-loop walks per fast backend")
    parser.add_argument("--repeat-slow", type=int, default=3, help="walks for osqp, daqp and qpmpc")
    parser.add_argument("--out", help="write the exact backend's per-tick CoM/ZMP to this CSV")
    parser.add_argument("--skip-qpmpc", action="store_true")
    args = parser.parse_args()
    walk = load_reference_walk()
    print(f"smpc_test13 reference walk: {SMPC_TICKS} ticks, N = {SMPC_PARAMS.horizon}, T = "
          f"{SMPC_PARAMS.sampling_period} s; times in us (median / p99)")
    print(f"{'backend':16s} {'solve med':>9s} {'p99':>7s} {'tick med':>9s} {'p99':>7s} "
          f"{'max dev [m]':>12s} {'max viol [m]':>12s}")
    results = {}
    kernel = mpc_exact._load_kernel() is not None
    configs = [("exact", "exact", True)] if kernel else []
    configs += [("exact[numpy]", "exact", False), ("daqp", "daqp", True), ("osqp", "osqp", True)]
    for label, backend, use_kernel in configs:
        repeat = args.repeat if backend == "exact" else args.repeat_slow
        solve, tick, rows, viol = run_backend(walk, backend, repeat, use_kernel)
        com = np.array([r[2][0] for r in rows])
        zmp = np.array([r[3] for r in rows])
        results[label] = solve
        print(f"{label:16s} {np.median(solve):9.1f} {np.percentile(solve, 99):7.1f} {np.median(tick):9.1f} "
              f"{np.percentile(tick, 99):7.1f} {deviation(walk, com, zmp):12.2e} {viol:12.2e}")
        if args.out and label == configs[0][0]:
            write_csv(args.out, rows)
    if not args.skip_qpmpc:
        times, com, zmp = run_qpmpc(walk, args.repeat_slow)
        print(f"{'qpmpc+proxqp':16s} {np.median(times):9.1f} {np.percentile(times, 99):7.1f} {'':9s} {'':7s} "
              f"{deviation(walk, com, zmp):12.2e}")
        best = configs[0][0]
        ratio = np.median(times) / np.median(results[best])
        print(f"speed ratio qpmpc+ProxQP / {best}: {ratio:.0f}x (median)")
    print("C++ smpc_solver active set on this machine kind (README): 15.8 us median, 23 us p99")


if __name__ == "__main__":
    main()
