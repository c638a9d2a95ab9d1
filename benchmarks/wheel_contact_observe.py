"""Benchmark of WheelContact.observe: per-call time of each estimator at 1 kHz-like inputs."""

from __future__ import annotations

import argparse
import time

import numpy as np

from walk_mpc.core.wheel.contact import WheelContact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=300, help="number of timed batches")
    parser.add_argument("--batch-size", type=int, default=1000, help="observe calls per batch")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.batch_size
    dt = 1e-3
    torques = (0.1 * np.sin(np.arange(n) * 2e-3) + 0.01 * rng.standard_normal(n)).tolist()
    velocities = (np.cumsum(10.0 * np.cos(np.arange(n) * 2e-3)) * dt + 0.02 * rng.standard_normal(n)).tolist()
    samples = list(zip(torques, velocities, strict=True))
    for estimator in ("ratio", "regression"):
        observer = WheelContact(WheelContact.Parameters(estimator=estimator))
        per_call = []
        for _ in range(args.batches):
            start = time.perf_counter()
            for tau, v in samples:
                observer.observe(tau, v, dt)
            per_call.append((time.perf_counter() - start) / n)
        us = np.array(per_call) * 1e6
        print(
            f"WheelContact.observe [{estimator:>10}]: median {np.median(us):.2f} us, "
            f"p99 {np.percentile(us, 99):.2f} us per call "
            f"({args.batches} batches of {n} calls)"
        )


if __name__ == "__main__":
    main()
