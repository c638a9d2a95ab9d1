"""Hardware-step time of the kinematic plant (Talos) under a moving command: median and p99."""

from __future__ import annotations

import argparse
import time

import numpy as np

from walk_mpc.core.sim import JointTrajectoryCommand
from walk_mpc.core.sim.kinematic import KinematicSim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=3000, help="hardware steps to time")
    args = parser.parse_args()
    sim = KinematicSim()
    period = sim.hardware_period
    names = ("leg_left_2_joint", "leg_right_2_joint", "leg_left_6_joint", "leg_right_6_joint",
             "arm_left_1_joint")
    start = np.array([sim.sensor_sample().joint_pos[sim.joint_names.index(n)] for n in names])
    sign = np.array([-1.0, -1.0, 1.0, 1.0, 1.0])
    times = []
    for k in range(args.steps):
        if k % 2 == 0:  # a two-point trajectory every control period (20 ms), like the ik node: a 0.5 Hz sway
            omega = 2.0 * np.pi * 0.5
            points = [start + sign * 0.03 * (1.0 - np.cos(omega * (k * period + dt))) for dt in (0.02, 0.04)]
            sim.set_trajectory(JointTrajectoryCommand(names, (0.02, 0.04), points, stamp=sim.time))
        t0 = time.perf_counter()
        sim.step()
        times.append(time.perf_counter() - t0)
    ms = np.array(times[100:]) * 1e3
    state = sim.state
    print(f"kinematic plant, Talos ({len(sim.joint_names)} joints), {len(ms)} steps of {period:g} s: "
          f"median {np.median(ms):.3f} ms, p99 {np.percentile(ms, 99):.3f} ms "
          f"(zmp clips {state.zmp_clip_count}, contacts {state.in_contact})")


if __name__ == "__main__":
    main()
