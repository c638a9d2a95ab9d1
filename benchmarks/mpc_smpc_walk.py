"""Benchmark: the smpc_solver test_13 reference walk (142 ticks, closed loop) with every MPC backend and
qpmpc + ProxQP, then the timeline walks of the tests as MpcPlanner ticks them.

Like is compared with like, in one run: the *solve* (the QP given its data: ``Mpc.solve`` given the
preview; qpmpc: ProxQP given the QP qpmpc built) with the solve, the *tick* (the tick's data and the
solve: the checked :class:`Preview` of the walk's per-interval arrays + ``Mpc.solve``; qpmpc: MPCProblem
+ its QP + ProxQP, both axes) with the tick. Each figure is a median and a p99 [us], and the ratio of
medians to the exact backend of the same run. The timeline walks (straight, turning, lateral) tick
every 20 ms as MpcPlanner does: the window from :class:`PreviewBuilder` (trusted path) + ``Mpc.solve``,
a fresh builder per walk (phases filled as the window reaches them). Also printed: the largest
deviation from reference_walk.csv, the largest ZMP bound violation and the mean solver iterations. Run
with ``OPENBLAS_NUM_THREADS=1``::

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

from mpc_problems import SMPC_PARAMS, SMPC_TICKS, load_reference_walk, walk_timeline  # noqa: E402

from walk_mpc.core.mpc import daqp_backend as mpc_daqp  # noqa: E402
from walk_mpc.core.mpc import exact as mpc_exact  # noqa: E402
from walk_mpc.core.mpc.planner import PlannerParameters  # noqa: E402
from walk_mpc.core.mpc.preview import Preview, PreviewBuilder  # noqa: E402
from walk_mpc.core.mpc.problem import Mpc  # noqa: E402


def _state(plan) -> np.ndarray:
    return np.stack([plan.com_position[0], plan.com_velocity[0], plan.com_acceleration[0]])


def run_backend(walk, backend: str, repeat: int, use_kernel: bool = True):
    """Closed loop ``repeat`` times after an untimed one; returns (solve times, tick times [us], last
    run's rows, largest violation, mean iterations)."""
    mpc_exact.USE_KERNEL = mpc_daqp.USE_KERNEL = use_kernel
    mpc = Mpc(dataclasses.replace(SMPC_PARAMS, backend=backend))
    n = mpc.horizon
    solve_times, tick_times, iterations = [], [], []
    rows, violation = [], 0.0
    for run in range(repeat + 1):  # the first walk warms up (compiled loops, caches), not counted
        if run == 1:
            solve_times, tick_times, iterations = [], [], []
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
            iterations.append(plan.iterations)
            state = _state(plan)
            violation = max(violation, float(preview.violation(plan.zmp).max()))
            rows.append((k, (k + 1) * 0.04, state, plan.zmp[0], walk.zmp_ref[k], walk.lower[k],
                         walk.upper[k]))
    mpc_exact.USE_KERNEL = mpc_daqp.USE_KERNEL = True
    return (np.array(solve_times) * 1e6, np.array(tick_times) * 1e6, rows, violation,
            float(np.mean(iterations)))


def run_qpmpc(walk, repeat: int):
    """The same QP per axis with qpmpc + ProxQP (qpmpc's cost is uniform on the state, so the state is
    scaled: xi = diag(sqrt(zmp), sqrt(velocity), sqrt(acceleration)) (z, v, a)). Returns (solve times,
    tick times [us], CoM, ZMP), after an untimed walk."""
    import qpmpc
    from qpmpc.mpc_qp import MPCQP
    from qpsolvers import solve_problem

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
    solve_times, tick_times, com, zmp = [], [], None, None
    for run in range(repeat + 1):
        if run == 1:
            solve_times, tick_times = [], []
        state = np.zeros((3, 2))
        com, zmp = [], []
        for k in range(SMPC_TICKS):
            start = time.perf_counter()
            solving = 0.0
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
                qp = MPCQP(problem).problem  # what qpmpc.solve_mpc does, with the solve timed apart
                before = time.perf_counter()
                solution = solve_problem(qp, solver="proxqp")
                solving += time.perf_counter() - before
                jerk[axis] = qpmpc.Plan(problem, solution).first_input[0]
            tick_times.append(time.perf_counter() - start)
            solve_times.append(solving)
            state = a_c @ state + b_c @ jerk[None, :]
            com.append(state[0].copy())
            zmp.append(state[0] - zeta * state[2])
    return np.array(solve_times) * 1e6, np.array(tick_times) * 1e6, np.array(com), np.array(zmp)


class TimelineWalk:
    """MpcPlanner's ticks (20 ms, first interval 20 ms) on a test walk, closed loop, a fresh builder per
    walk (phases filled as the window first reaches them): :meth:`run` times one walk."""

    def __init__(self, name: str, backend: str) -> None:
        self.params = PlannerParameters()
        self.mpc_params = dataclasses.replace(self.params.mpc, backend=backend)
        self.timeline = walk_timeline(name)
        self.mpc = Mpc(self.mpc_params, first_interval=self.params.control_period)
        self.times = np.arange(0.0, self.timeline.t_end, self.params.control_period)
        self.builds, self.solves, self.iterations = [], [], []
        self.run()  # warm-up (compiled loops, caches), not counted
        self.builds, self.solves, self.iterations = [], [], []

    def run(self) -> None:
        params, mpc = self.params, self.mpc
        builder = PreviewBuilder(self.timeline, params.sole, self.mpc_params.sampling_period,
                                 self.mpc_params.horizon, params.control_period)
        builder.durations = mpc.durations  # shared with the MPC, as MpcPlanner does
        mpc.reset()
        state = np.zeros((3, 2))
        for t in self.times:
            start = time.perf_counter()
            preview = builder.build(float(t))
            built = time.perf_counter()
            plan = mpc.solve(state, preview)
            done = time.perf_counter()
            self.builds.append(built - start)
            self.solves.append(done - built)
            self.iterations.append(plan.iterations)
            state = _state(plan)


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


def _figures(times: np.ndarray, base: float) -> str:
    """median, p99 and median / base."""
    return f"{np.median(times):9.1f} {np.percentile(times, 99):7.1f} {np.median(times) / base:6.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="closed-loop walks per fast backend")
    parser.add_argument("--repeat-slow", type=int, default=3, help="walks for osqp, daqp and qpmpc")
    parser.add_argument("--out", help="write the exact backend's per-tick CoM/ZMP to this CSV")
    parser.add_argument("--skip-qpmpc", action="store_true")
    parser.add_argument("--skip-timeline", action="store_true", help="skip the timeline walks")
    args = parser.parse_args()
    walk = load_reference_walk()
    kernel = mpc_exact._load_kernel() is not None
    best = "exact" if kernel else "exact[numpy]"
    print(f"smpc_test13 reference walk: {SMPC_TICKS} ticks, N = {SMPC_PARAMS.horizon}, T = "
          f"{SMPC_PARAMS.sampling_period} s, closed loop. Times in us: median, p99, median / median of "
          f"{best}")
    print("  solve = the QP given its data; tick = the tick's data (checked Preview of the per-interval")
    print("  arrays; qpmpc: MPCProblem and its QP, both axes) + the solve")
    print(f"{'backend':14s} {'solve med':>9s} {'p99':>7s} {'ratio':>7s} {'tick med':>9s} {'p99':>7s} "
          f"{'ratio':>7s} {'iters':>6s} {'max dev [m]':>12s} {'max viol [m]':>12s}")
    configs = [("exact", "exact", True)] if kernel else []
    configs += [("exact[numpy]", "exact", False), ("daqp", "daqp", True), ("daqp[numpy]", "daqp", False),
                ("osqp", "osqp", True)]
    results = {}
    for label, backend, use_kernel in configs:
        repeat = args.repeat if backend == "exact" else args.repeat_slow
        solve, tick, rows, viol, iterations = run_backend(walk, backend, repeat, use_kernel)
        results[label] = (solve, tick)
        base_solve, base_tick = (np.median(t) for t in results[best])
        com = np.array([r[2][0] for r in rows])
        zmp = np.array([r[3] for r in rows])
        print(f"{label:14s} {_figures(solve, base_solve)} {_figures(tick, base_tick)} {iterations:6.2f} "
              f"{deviation(walk, com, zmp):12.2e} {viol:12.2e}")
        if args.out and label == configs[0][0]:
            write_csv(args.out, rows)
    base_solve, base_tick = (np.median(t) for t in results[best])
    if not args.skip_qpmpc:
        solve, tick, com, zmp = run_qpmpc(walk, args.repeat_slow)
        print(f"{'qpmpc+proxqp':14s} {_figures(solve, base_solve)} {_figures(tick, base_tick)} {'':6s} "
              f"{deviation(walk, com, zmp):12.2e}")
        print(f"qpmpc+ProxQP / {best}: tick vs tick {np.median(tick) / base_tick:.0f}x, solve vs solve "
              f"{np.median(solve) / base_solve:.0f}x (medians)")
    print("C++ smpc_solver active set on this machine kind (README): 15.8 us median, 23 us p99 per solve")
    if args.skip_timeline:
        return
    params = PlannerParameters()
    print(f"\ntimeline walks (tests' mpc_problems), MpcPlanner's grid: {params.control_period * 1e3:.0f} ms "
          f"ticks, N = {params.mpc.horizon}, T = {params.mpc.sampling_period} s, closed loop; times in us: "
          "median, p99")
    print("  build = PreviewBuilder.build; tick = build + Mpc.solve")
    print(f"{'walk':16s} {'build med':>9s} {'p99':>7s} {'solve med':>9s} {'p99':>7s} {'tick med':>9s} "
          f"{'p99':>7s} {'tick/solve':>10s} {'p99/med':>8s} {'iters':>6s}")
    names, backends = ("straight", "turning", "lateral"), ("exact", "daqp")
    walks = {(backend, name): TimelineWalk(name, backend) for backend in backends for name in names}
    for _ in range(max(1, args.repeat // 4)):  # interleaved: every walk sees the machine alike
        for walk in walks.values():
            walk.run()
    medians = {}
    for (backend, name), walk in walks.items():
        build, solve = np.array(walk.builds) * 1e6, np.array(walk.solves) * 1e6
        tick = build + solve
        medians[(backend, name)] = np.median(solve)
        print(f"{name + ' ' + backend:16s} {np.median(build):9.1f} {np.percentile(build, 99):7.1f} "
              f"{np.median(solve):9.1f} {np.percentile(solve, 99):7.1f} {np.median(tick):9.1f} "
              f"{np.percentile(tick, 99):7.1f} {np.median(tick) / np.median(solve):9.2f}x "
              f"{np.percentile(tick, 99) / np.median(tick):7.2f}x {np.mean(walk.iterations):6.2f}")
    for backend in backends:
        turning, straight, lateral = (medians[(backend, name)] for name in names)
        print(f"{backend} solve medians: turning / straight {turning / straight:.2f}x, turning / lateral "
              f"(aligned boxes) {turning / lateral:.2f}x")
    print("daqp / exact solve medians: " + ", ".join(
        f"{name} {medians[('daqp', name)] / medians[('exact', name)]:.2f}x" for name in names))

if __name__ == "__main__":
    main()
