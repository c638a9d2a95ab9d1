"""Benchmark: the smpc_solver test_13 reference walk (142 ticks, closed loop) with every MPC backend and
qpmpc + ProxQP, then the timeline walks of the tests as MpcPlanner ticks them.

Like is compared with like, in one run: the *solve* (the QP given its data: ``Mpc.solve`` given the
preview; qpmpc: ProxQP given the QP qpmpc built) with the solve, the *tick* (the tick's data and the
solve: the checked :class:`Preview` of the walk's per-interval arrays + ``Mpc.solve``; qpmpc: MPCProblem
+ its QP + ProxQP, both axes) with the tick. Each figure is a median and a p99 [us], and the ratio of
medians to the exact backend of the same run; the backends walk in interleaved rounds, so that a slower
period of the machine weighs on all of them alike. The timeline walks (straight, turning, lateral) tick
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


class BackendWalk:
    """The reference walk with one backend: :meth:`run` times one closed-loop walk (solve and tick), keeping
    the per-tick rows of the last one, the largest ZMP bound violation and the iterations."""

    def __init__(self, walk, backend: str, use_kernel: bool = True) -> None:
        mpc_exact.USE_KERNEL = mpc_daqp.USE_KERNEL = use_kernel
        self.mpc = Mpc(dataclasses.replace(SMPC_PARAMS, backend=backend))
        mpc_exact.USE_KERNEL = mpc_daqp.USE_KERNEL = True
        self.walk = walk
        self.rows, self.violation = [], 0.0
        self.solves, self.ticks, self.iterations = [], [], []
        self.run()  # warm-up (compiled loops, caches), not counted
        self.solves, self.ticks, self.iterations = [], [], []

    def run(self) -> None:
        mpc, walk, n = self.mpc, self.walk, self.mpc.horizon
        mpc.reset()
        state = np.zeros((3, 2))
        self.rows = []
        for k in range(SMPC_TICKS):
            sl = slice(k, k + n)
            start = time.perf_counter()
            preview = Preview(mpc.durations, walk.angles[sl], walk.lower[sl], walk.upper[sl],
                              walk.zmp_ref[sl], t_start=k * 0.04)
            built = time.perf_counter()
            plan = mpc.solve(state, preview)
            done = time.perf_counter()
            self.solves.append(done - built)
            self.ticks.append(done - start)
            self.iterations.append(plan.iterations)
            state = _state(plan)
            self.violation = max(self.violation, float(preview.violation(plan.zmp).max()))
            self.rows.append((k, (k + 1) * 0.04, state, plan.zmp[0], walk.zmp_ref[k], walk.lower[k],
                              walk.upper[k]))

    def trajectory(self):
        """CoM and ZMP of the last walk, (142, 2) each."""
        return np.array([r[2][0] for r in self.rows]), np.array([r[3] for r in self.rows])


class QpmpcWalk:
    """The same QP per axis with qpmpc + ProxQP (qpmpc's cost is uniform on the state, so the state is
    scaled: xi = diag(sqrt(zmp), sqrt(velocity), sqrt(acceleration)) (z, v, a)): :meth:`run` times one
    walk, the solve (ProxQP given the QP qpmpc built) apart from the tick (MPCProblem, QP, solve, plan)."""

    def __init__(self, walk) -> None:
        p = SMPC_PARAMS
        self.walk = walk
        self.n, dt, self.zeta, self.w = p.horizon, p.sampling_period, p.com_height / p.gravity, p.weights
        w = self.w
        self.a_c = np.array([[1.0, dt, dt * dt / 2], [0.0, 1.0, dt], [0.0, 0.0, 1.0]])
        self.b_c = np.array([[dt**3 / 6], [dt * dt / 2], [dt]])
        to_zva = np.array([[1, 0, -self.zeta], [0, 1, 0], [0, 0, 1]])
        self.to_xi = np.diag(np.sqrt([w.zmp, w.velocity, w.acceleration])) @ to_zva
        self.a_xi = self.to_xi @ self.a_c @ np.linalg.inv(self.to_xi)
        self.b_xi = self.to_xi @ self.b_c
        g = np.array([[1.0 / np.sqrt(w.zmp), 0.0, 0.0]])  # ZMP row in xi coordinates
        self.c_k = np.vstack([g @ self.a_xi, -g @ self.a_xi])  # constraint at stage k acts on x_{k+1}
        self.d_k = np.vstack([g @ self.b_xi, -g @ self.b_xi])
        self.com, self.zmp = None, None
        self.solves, self.ticks = [], []
        self.run()  # warm-up, not counted
        self.solves, self.ticks = [], []

    def run(self) -> None:
        import qpmpc
        from qpmpc.mpc_qp import MPCQP
        from qpsolvers import solve_problem

        walk, n, w = self.walk, self.n, self.w
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
                    transition_state_matrix=self.a_xi, transition_input_matrix=self.b_xi,
                    ineq_state_matrix=self.c_k, ineq_input_matrix=self.d_k,
                    ineq_vector=[np.array([hi[i], -lo[i]]) for i in range(n)],
                    nb_timesteps=n, terminal_cost_weight=1.0, stage_state_cost_weight=1.0,
                    stage_input_cost_weight=w.jerk, initial_state=self.to_xi @ state[:, axis],
                    goal_state=goal, target_states=targets.ravel())
                qp = MPCQP(problem).problem  # what qpmpc.solve_mpc does, with the solve timed apart
                before = time.perf_counter()
                solution = solve_problem(qp, solver="proxqp")
                solving += time.perf_counter() - before
                jerk[axis] = qpmpc.Plan(problem, solution).first_input[0]
            self.ticks.append(time.perf_counter() - start)
            self.solves.append(solving)
            state = self.a_c @ state + self.b_c @ jerk[None, :]
            com.append(state[0].copy())
            zmp.append(state[0] - self.zeta * state[2])
        self.com, self.zmp = np.array(com), np.array(zmp)


class TimelineWalk:
    """MpcPlanner's ticks (20 ms, first interval 20 ms) on a test walk, closed loop, a fresh builder per
    walk (its phases filled when it is made, once per plan, as MpcPlanner makes it at a plan change: timed
    apart, ``constructs``): :meth:`run` times one walk."""

    def __init__(self, name: str, backend: str) -> None:
        self.params = PlannerParameters()
        self.mpc_params = dataclasses.replace(self.params.mpc, backend=backend)
        self.timeline = walk_timeline(name)
        self.mpc = Mpc(self.mpc_params, first_interval=self.params.control_period)
        self.times = np.arange(0.0, self.timeline.t_end, self.params.control_period)
        self.builds, self.solves, self.iterations, self.constructs = [], [], [], []
        self.run()  # warm-up (compiled loops, caches), not counted
        self.builds, self.solves, self.iterations, self.constructs = [], [], [], []

    def run(self) -> None:
        params, mpc = self.params, self.mpc
        start = time.perf_counter()
        builder = PreviewBuilder(self.timeline, params.sole, self.mpc_params.sampling_period,
                                 self.mpc_params.horizon, params.control_period)
        self.constructs.append(time.perf_counter() - start)
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
    parser.add_argument("--repeat", type=int, default=20, help="closed-loop walks of exact and daqp")
    parser.add_argument("--repeat-slow", type=int, default=3,
                        help="interleaved rounds; osqp and qpmpc walk once per round")
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
    runs = {label: BackendWalk(walk, backend, use_kernel) for label, backend, use_kernel in configs}
    if not args.skip_qpmpc:
        runs["qpmpc+proxqp"] = QpmpcWalk(walk)
    # Interleaved rounds: in each, the fast backends walk repeat / repeat_slow times, the others once, so
    # that every ratio compares one period of the machine.
    rounds = max(1, args.repeat_slow)
    for _ in range(rounds):
        for label, run in runs.items():
            fast = label.startswith("exact") or label.startswith("daqp")
            for _ in range(max(1, args.repeat // rounds) if fast else 1):
                run.run()
    base_solve, base_tick = np.median(runs[best].solves), np.median(runs[best].ticks)
    for label, run in runs.items():
        solve, tick = np.array(run.solves) * 1e6, np.array(run.ticks) * 1e6
        if isinstance(run, QpmpcWalk):
            com, zmp, iterations, viol = run.com, run.zmp, "", ""
        else:
            (com, zmp), viol = run.trajectory(), f"{run.violation:12.2e}"
            iterations = f"{np.mean(run.iterations):6.2f}"
        print(f"{label:14s} {_figures(solve, base_solve * 1e6)} {_figures(tick, base_tick * 1e6)} "
              f"{iterations:>6s} {deviation(walk, com, zmp):12.2e} {viol}")
    if args.out:
        write_csv(args.out, runs[configs[0][0]].rows)
    if not args.skip_qpmpc:
        qp = runs["qpmpc+proxqp"]
        print(f"qpmpc+ProxQP / {best}: tick vs tick {np.median(qp.ticks) / base_tick:.0f}x, solve vs solve "
              f"{np.median(qp.solves) / base_solve:.0f}x (medians)")
    print("C++ smpc_solver active set on this machine kind (README): 15.8 us median, 23 us p99 per solve")
    if args.skip_timeline:
        return
    params = PlannerParameters()
    print(f"\ntimeline walks (tests' mpc_problems), MpcPlanner's grid: {params.control_period * 1e3:.0f} ms "
          f"ticks, N = {params.mpc.horizon}, T = {params.mpc.sampling_period} s, closed loop; times in us: "
          "median, p99")
    print("  build = PreviewBuilder.build; tick = build + Mpc.solve")
    print("  p99/med: of every tick of every walk (the machine's interruptions included); work p99/med: of "
          "each tick's fastest run over the walks (the work's spread over the ticks, without them)")
    print(f"{'walk':16s} {'build med':>9s} {'p99':>7s} {'solve med':>9s} {'p99':>7s} {'tick med':>9s} "
          f"{'p99':>7s} {'tick/solve':>10s} {'p99/med':>8s} {'work p99/med':>12s} {'iters':>6s}")
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
        work = tick.reshape(-1, len(walk.times)).min(axis=0)  # each tick's fastest run over the walks
        print(f"{name + ' ' + backend:16s} {np.median(build):9.1f} {np.percentile(build, 99):7.1f} "
              f"{np.median(solve):9.1f} {np.percentile(solve, 99):7.1f} {np.median(tick):9.1f} "
              f"{np.percentile(tick, 99):7.1f} {np.median(tick) / np.median(solve):9.2f}x "
              f"{np.percentile(tick, 99) / np.median(tick):7.2f}x "
              f"{np.percentile(work, 99) / np.median(work):11.2f}x {np.mean(walk.iterations):6.2f}")
    for backend in backends:
        turning, straight, lateral = (medians[(backend, name)] for name in names)
        print(f"{backend} solve medians: turning / straight {turning / straight:.2f}x, turning / lateral "
              f"(aligned boxes) {turning / lateral:.2f}x")
    print("daqp / exact solve medians: " + ", ".join(
        f"{name} {medians[('daqp', name)] / medians[('exact', name)]:.2f}x" for name in names))
    made = {name: walks[("exact", name)] for name in names}
    print("PreviewBuilder made once per plan (phases filled), median [us]: " + ", ".join(
        f"{name} {np.median(w.constructs) * 1e6:.0f} ({len(w.timeline.phases)} phases)"
        for name, w in made.items()))

if __name__ == "__main__":
    main()
