"""Benchmark: MPC tick time against the horizon N = 20..160 on the smpc_test13 walk (closed loop).

The walk's final double support is extended for the longer previews. Prints median and p99 of
``Mpc.solve`` [us] per N for the exact backend (and optionally OSQP) and the ratio to N = 40
(target: N = 160 at most 4x N = 40). Run with ``OPENBLAS_NUM_THREADS=1``::

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

from walk_mpc.core.mpc import exact as mpc_exact  # noqa: E402
from walk_mpc.core.mpc.problem import Mpc  # noqa: E402


def tick_times(backend: str, horizon: int, repeat: int, use_kernel: bool = True) -> np.ndarray:
    """Per-tick ``Mpc.solve`` times [us] over ``repeat`` closed-loop walks."""
    mpc_exact.USE_KERNEL = use_kernel
    params = dataclasses.replace(SMPC_PARAMS, horizon=horizon, backend=backend)
    walk = load_reference_walk(params)
    mpc = Mpc(params)
    previews = [walk.preview(k, params, mpc.durations) for k in range(SMPC_TICKS)]
    mpc.solve(np.zeros((3, 2)), previews[0])  # compile / set up
    times = []
    for _ in range(repeat):
        mpc.reset()
        state = np.zeros((3, 2))
        for preview in previews:
            start = time.perf_counter()
            plan = mpc.solve(state, preview)
            times.append(time.perf_counter() - start)
            state = np.stack([plan.com_position[0], plan.com_velocity[0], plan.com_acceleration[0]])
    mpc_exact.USE_KERNEL = True
    return np.array(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--backends", default="exact,exact[numpy]",
                        help="comma list: exact, exact[numpy], osqp, daqp")
    args = parser.parse_args()
    horizons = list(range(20, 161, 20))
    for label in args.backends.split(","):
        backend = label.split("[")[0]
        use_kernel = "numpy" not in label
        if backend == "exact" and use_kernel and mpc_exact._load_kernel() is None:
            print(f"{label}: numba not installed, skipped")
            continue
        print(f"{label}: N, median [us], p99 [us], median / median(N=40)")
        results = {n: tick_times(backend, n, args.repeat, use_kernel) for n in horizons}
        base = np.median(results[40])
        for n in horizons:
            t = results[n]
            print(f"  N={n:3d} {np.median(t):9.1f} {np.percentile(t, 99):9.1f} {np.median(t) / base:6.2f}x")


if __name__ == "__main__":
    main()
