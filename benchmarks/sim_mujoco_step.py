"""MuJoCo backend time per sensor step (Talos standing and swaying, upkie): median, p99, real-time factor."""

from __future__ import annotations

import argparse
import time

import numpy as np

from walk_mpc.core.sim import JointTrajectoryCommand
from walk_mpc.core.sim.mujoco import MujocoSim, MujocoWheelSim

SWAY_JOINTS = ("leg_left_2_joint", "leg_right_2_joint", "leg_left_6_joint", "leg_right_6_joint",
               "arm_left_1_joint")
SWAY_SIGNS = np.array([-1.0, -1.0, 1.0, 1.0, 1.0])


def time_steps(sim, steps: int, sway: bool) -> np.ndarray:
    """Wall time [ms] of each ``sim.step()``; with ``sway``, a 0.5 Hz hip/ankle roll sway every 20 ms."""
    period = sim.hardware_period
    start = np.array([sim.sensor_sample().joint_pos[sim.joint_names.index(n)] for n in SWAY_JOINTS])
    every = max(1, round(0.02 / period))
    times = []
    for k in range(steps):
        if sway and k % every == 0:  # two points per control period, like the ik node
            omega = 2.0 * np.pi * 0.5
            points = [start + SWAY_SIGNS * 0.03 * (1.0 - np.cos(omega * (k * period + dt)))
                      for dt in (0.02, 0.04)]
            sim.set_trajectory(JointTrajectoryCommand(SWAY_JOINTS, (0.02, 0.04), points, stamp=sim.time))
        t0 = time.perf_counter()
        sim.step()
        times.append(time.perf_counter() - t0)
    return np.array(times[max(1, steps // 20):]) * 1e3


def report(label: str, sim, ms: np.ndarray) -> None:
    period_ms = sim.hardware_period * 1e3
    state = sim.state
    print(f"{label:<44} {len(ms)} steps of {period_ms:g} ms: median {np.median(ms):.3f} ms, "
          f"p99 {np.percentile(ms, 99):.3f} ms, real-time factor {period_ms / np.mean(ms):.1f}x "
          f"(fallen {state.fallen}, contacts {state.in_contact})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=1000, help="sensor steps to time per case")
    args = parser.parse_args()
    for substeps in (1, 5):
        params = MujocoSim.Parameters(feedforward_substeps=substeps)
        for sway in (False, True):
            sim = MujocoSim(None, params)
            label = f"Talos {'sway' if sway else 'standing'}, feed-forward every {substeps} ms"
            report(label, sim, time_steps(sim, args.steps, sway))
    sim = MujocoSim(None, MujocoSim.Parameters(gravity_feedforward=False))
    report("Talos standing, no feed-forward", sim, time_steps(sim, args.steps, False))
    upkie = MujocoWheelSim()
    ms = np.array([_timed(upkie.step) for _ in range(args.steps * 10)])[50:] * 1e3
    report("upkie rolling/lifted (1 ms steps)", upkie, ms)


def _timed(function) -> float:
    t0 = time.perf_counter()
    function()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
