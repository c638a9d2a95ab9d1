"""MuJoCo backend time per sensor step (Talos standing and swaying, upkie): median, p99, real-time factor.

``--walk``: the closed-loop 10-step Talos walk (core.control.closed_loop) for a few leg gains: outcome,
wall time per sensor step with and without a control tick (planner + 2 IK), real-time factor.
"""

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


def walk_report(leg_kp: float, leg_kd: float) -> None:
    """Closed-loop 10-step walk of 0.2 m steps (0.8 s single, 0.3 s double support) at these leg gains."""
    import math

    from walk_mpc.core.body.robot import RobotModel, yaw_of
    from walk_mpc.core.control.closed_loop import ClosedLoopWalk
    from walk_mpc.core.walk.footsteps import walk_forward
    from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline

    robot = RobotModel(RobotModel.Parameters(robot="talos_reduced"))
    feet = {n: FootPose(tuple(p), yaw_of(r)) for n, (p, r) in robot.foot_poses(
        robot.reference_configuration()).items()}
    left, right = feet[robot.left_foot_frame], feet[robot.right_foot_frame]
    steps = walk_forward(left, right, 1.8, step_length=0.2, width=abs(left.position[1] - right.position[1]),
                         duration=1.1)
    timeline = Timeline(left, right, steps, GaitTiming(0.6, 0.3, 0.6))
    sim = MujocoSim(None, MujocoSim.Parameters(gain_kp=(leg_kp,), gain_kd=(leg_kd,)), robot=robot)
    loop = ClosedLoopWalk(robot, sim, timeline)
    control, physics = [], []
    start = time.perf_counter()
    while sim.time < timeline.t_end + loop.params.settle_time - 1e-9 and not loop.fallen:
        t0 = time.perf_counter()
        ticked = loop.step() is not None
        (control if ticked else physics).append(time.perf_counter() - t0)
    out = loop.outcome(time.perf_counter() - start)
    control_ms, physics_ms = np.array(control) * 1e3, np.array(physics) * 1e3
    print(f"walk leg kp {leg_kp:g} kd {leg_kd:g}: fallen {out.fallen}, {len(out.landing_errors)} steps, "
          f"max landing error {max(out.landing_errors.values(), default=math.nan) * 100:.1f} cm, final CoM "
          f"error {out.final_com_error * 100:.1f} cm, max tilt {math.degrees(out.max_tilt):.1f} deg; "
          f"sensor step with control tick median {np.median(control_ms):.2f} ms p99 "
          f"{np.percentile(control_ms, 99):.2f} ms, without median {np.median(physics_ms):.2f} ms p99 "
          f"{np.percentile(physics_ms, 99):.2f} ms; {out.sim_time:.1f} s simulated in {out.wall_time:.1f} s "
          f"(real-time factor {out.real_time_factor:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=1000, help="sensor steps to time per case")
    parser.add_argument("--walk", action="store_true", help="time the closed-loop walk instead")
    args = parser.parse_args()
    if args.walk:
        for kp in (16000.0, 8000.0, 4000.0, 3000.0, 2500.0, 2000.0):
            walk_report(kp, kp / 100.0)
        return
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
