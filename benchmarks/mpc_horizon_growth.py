"""Benchmark: MPC time against the horizon N = 20..160 on the smpc_test13 walk (closed loop).

The walk's final double support is extended for the longer previews. Per N, like with like: the *solve*
(``Mpc.solve`` given the preview) and the *tick* (the checked :class:`Preview` of the walk's
per-interval arrays + the solve), each as median and p99 [us] and the ratio of medians to N = 40 in the
same run (target: N = 160 at most 4x N = 40). The walks of every N are interleaved (one walk of each N
in turn, ``repeat`` rounds) so that a slower period of the machine weighs on all of them alike. Run with
``OPENBLAS_NUM_THREADS=1``::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -P benchmarks/mpc_horizon_growth.py
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from mpc_problems import SMPC_PARAMS, SMPC_TICKS, load_reference_walk  # noqa: E402

from walk_mpc.core.mpc import daqp_backend as mpc_daqp  # noqa: E402
from walk_mpc.core.mpc import exact as mpc_exact  # noqa: E402
from walk_mpc.core.mpc.preview import Preview  # noqa: E402
from walk_mpc.core.mpc.problem import Mpc  # noqa: E402


class Walk:
    """One N: the MPC and the walk's per-interval arrays."""

    def __init__(self, backend: str, horizon: int, use_kernel: bool) -> None:
        mpc_exact.USE_KERNEL = mpc_daqp.USE_KERNEL = use_kernel
        self.params = dataclasses.replace(SMPC_PARAMS, horizon=horizon, backend=backend)
        self.walk = load_reference_walk(self.params)
        self.mpc = Mpc(self.params)
        mpc_exact.USE_KERNEL = mpc_daqp.USE_KERNEL = True
        self.mpc.solve(np.zeros((3, 2)), self.walk.preview(0, self.params, self.mpc.durations))  # set up
        self.solves, self.ticks = [], []

    def run(self) -> None:
        """One closed-loop walk, timed."""
        mpc, walk, n = self.mpc, self.walk, self.params.horizon
        mpc.reset()
        state = np.zeros((3, 2))
        for k in range(SMPC_TICKS):
            sl = slice(k, k + n)
            start = time.perf_counter()
            preview = Preview(mpc.durations, walk.angles[sl], walk.lower[sl], walk.upper[sl],
                              walk.zmp_ref[sl], t_start=k * self.params.sampling_period)
            built = time.perf_counter()
            plan = mpc.solve(state, preview)
            done = time.perf_counter()
            self.solves.append(done - built)
            self.ticks.append(done - start)
            state = np.stack([plan.com_position[0], plan.com_velocity[0], plan.com_acceleration[0]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--backends", default="exact,exact[numpy]",
                        help="comma list: exact, exact[numpy], osqp, daqp, daqp[numpy]")
    args = parser.parse_args()
    horizons = list(range(20, 161, 20))
    for label in args.backends.split(","):
        backend = label.split("[")[0]
        use_kernel = "numpy" not in label
        if backend == "exact" and use_kernel and mpc_exact._load_kernel() is None:
            print(f"{label}: numba not installed, skipped")
            continue
        walks = {n: Walk(backend, n, use_kernel) for n in horizons}
        for _ in range(args.repeat):
            for walk in walks.values():
                walk.run()
        print(f"{label}: times in us, median, p99, median / median(N=40) of this run")
        print(f"  {'N':>5s} {'solve med':>9s} {'p99':>7s} {'ratio':>6s} {'tick med':>9s} {'p99':>7s} "
              f"{'ratio':>6s}")
        base_solve, base_tick = np.median(walks[40].solves), np.median(walks[40].ticks)
        for n, walk in walks.items():
            solve, tick = np.array(walk.solves), np.array(walk.ticks)
            print(f"  N={n:3d} {np.median(solve) * 1e6:9.1f} {np.percentile(solve, 99) * 1e6:7.1f} "
                  f"{np.median(solve) / base_solve:5.2f}x {np.median(tick) * 1e6:9.1f} "
                  f"{np.percentile(tick, 99) * 1e6:7.1f} {np.median(tick) / base_tick:5.2f}x")


if __name__ == "__main__":
    main()
