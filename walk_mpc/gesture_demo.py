"""Seed 003 made visible: a quadruped standing on its four feet in MuJoCo executes gesture sequences.

The gestures go through the ik's core exactly as the ik node's ``ik/exec_gesture`` and
``ik/set_gesture_effect`` services pass them (:meth:`WholeBodyStage.exec_gesture`,
:meth:`WholeBodyStage.set_gesture_effect`), in process on MuJoCo physics (:class:`MujocoSim` with point
feet): body translations and rotations with the feet fixed (friction on, four legs with effect), a leg
lifted by taking its gesture effect away and raising the body on the three others, that leg moving alone
with the body still (one leg with effect: fewer than ``gesture.min_support_legs``), and back. Each gesture
is ramped over ``ramp`` seconds in control-period slices. Prints what each gesture did and plots the feet
and the body over time (``gestures.png``). ROS-free (``make demo ROBOT=solo12 SIM=mujoco`` runs it)::

    python -m walk_mpc.gesture_demo [--robot solo12] [--out-dir .]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pinocchio as pin

#: The gesture sequence: (what, legs with effect from then on or None = unchanged, dof, value [m or rad]).
GESTURES = (
    ("body down, feet fixed", None, "TZ", 0.03), ("body up", None, "TZ", -0.03),
    ("body back", None, "TX", 0.03), ("body forward", None, "TX", -0.03),
    ("body right", None, "TY", 0.03), ("body left", None, "TY", -0.03),
    ("body roll", None, "RX", 0.15), ("roll back", None, "RX", -0.15),
    ("body pitch", None, "RY", 0.15), ("pitch back", None, "RY", -0.15),
    ("body yaw", None, "RZ", 0.2), ("yaw back", None, "RZ", -0.2),
    ("body over the three other feet", None, "TX", 0.03), ("", None, "TY", 0.03),
    ("front-left effect taken away, body up: foot lifted", (1, 2, 3), "TZ", -0.03),
    ("front-left leg alone has effect: it moves, body still", (0,), "TX", 0.04),
    ("leg back", (0,), "TX", -0.04),
    ("effect away again, body down: foot put down", (1, 2, 3), "TZ", 0.03),
    ("all legs, body back to the middle", (0, 1, 2, 3), "TX", -0.03), ("", None, "TY", -0.03),
)


@dataclasses.dataclass
class GestureRun:
    """What a gesture run did (arrays over the hardware samples).

    Attributes:
        times: Sample times [s], shape (n,).
        body: Base position [m] and roll, pitch, yaw [rad], shape (n, 6).
        feet: Foot positions [m] (contact sensor order), shape (n, legs, 3).
        marks: (time [s] at the end of a gesture, its line of :data:`GESTURES`, whether the body moved).
        fallen: Whether the robot fell.
        foot_names: Names of the feet (contact sensors).
    """

    times: np.ndarray
    body: np.ndarray
    feet: np.ndarray
    marks: list
    fallen: bool
    foot_names: tuple


def gesturing_robot(robot: str) -> bool:
    """Whether ``robot`` names a multi-legged robot description (config/robots/<robot>.yaml)."""
    from walk_mpc.core.body.robot import load_robot_description, robot_names

    return robot in robot_names() and bool(load_robot_description(robot).leg_frames)


def run_gestures(robot_name: str = "solo12", gestures=GESTURES, ramp: float = 0.5, settle: float = 0.2,
                 verbose: bool = True) -> GestureRun:
    """Stand ``robot_name`` on MuJoCo and execute ``gestures`` (see the module docstring)."""
    from walk_mpc.core.body.gesture import GestureDof
    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.core.control.types import NS_PER_S
    from walk_mpc.core.control.whole_body_stage import WholeBodyStage
    from walk_mpc.core.sim.backend import JointTrajectoryCommand
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.sim.mujoco import MujocoSim

    robot = RobotModel(RobotModel.Parameters(robot=robot_name))
    # Gestures lower the body: a base at a third of its height (or a tilt) is a fall here.
    sim = MujocoSim(KinematicSim.Parameters(robot=robot.params), MujocoSim.Parameters(fall_height_ratio=0.33),
                    robot=robot)
    stage = WholeBodyStage(robot)
    origin, period = 1000 * NS_PER_S, int(round(sim.hardware_period * NS_PER_S))
    slice_steps = int(round(stage.params.control_period / sim.hardware_period))
    times, body, feet, marks = [], [], [], []

    def step() -> None:
        state = sim.step()
        command = stage.observe(origin + state.step_count * period, sim.sensor_sample())
        if command is not None:
            sim.set_trajectory(JointTrajectoryCommand(stage.joint_names, command.times, command.positions,
                                                      stamp=(command.stamp_ns - origin) / NS_PER_S,
                                                      velocities=command.velocities))
        times.append(state.time)
        rotation = pin.Quaternion(np.asarray(state.q[3:7])).toRotationMatrix()
        body.append(np.concatenate((state.q[0:3], pin.rpy.matrixToRpy(rotation))))
        feet.append(np.array(list(sim.corner_positions().values())))

    def hold(seconds: float) -> None:
        for _ in range(int(round(seconds / sim.hardware_period))):
            step()

    hold(0.5)
    if verbose:
        print(f"{robot.name} stands on {len(robot.foot_frames)} feet in MuJoCo: {list(sim.contact_names)}")
    for line in gestures:
        what, effect, dof, value = line
        if effect is not None:
            for leg in range(len(stage.legs)):
                stage.set_gesture_effect(leg, leg in effect)
        slices = max(1, int(round(ramp / stage.params.control_period)))
        for _ in range(slices):
            reply = stage.exec_gesture(int(GestureDof[dof]), value / slices)
            if not reply.success:
                raise RuntimeError(f"gesture {dof} {value} refused: {reply.message}")
            for _ in range(slice_steps):
                step()
        hold(settle)
        marks.append((times[-1], line, reply.body_moved))
        if verbose:
            moved = "body moved" if reply.body_moved else "legs moved, body still"
            base = body[-1]
            print(f"  {dof} {value:+.2f}  {what:55s} {moved:22s} body xyz {np.round(base[:3], 3)} "
                  f"rpy {np.round(base[3:], 3)}  feet z {np.round(feet[-1][:, 2], 3)}")
        if sim.state.fallen:
            break
    return GestureRun(np.array(times), np.array(body), np.array(feet), marks, bool(sim.state.fallen),
                      tuple(sim.contact_names))


def plot_gestures(run: GestureRun, path: Path, title: str) -> None:
    """Feet (height, x) and body (position, orientation) over time, gesture ends marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t, b, f = run.times, run.body, run.feet
    fig, axes = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    for i, name in enumerate(run.foot_names):
        axes[0].plot(t, f[:, i, 2], label=name)
        axes[1].plot(t, f[:, i, 0] - f[0, i, 0], label=f"{name} x")
    axes[0].set_ylabel("foot height [m]")
    axes[1].set_ylabel("foot x - start [m]")
    for i, name in enumerate(("x", "y", "z")):
        axes[2].plot(t, b[:, i] - b[0, i], label=f"body {name} [m]")
    for i, name in enumerate(("roll", "pitch", "yaw")):
        axes[2].plot(t, b[:, 3 + i], "--", label=f"body {name} [rad]")
    axes[2].set_ylabel("body - start")
    axes[2].set_xlabel("t [s]")
    for axis in axes:
        for time, _, _ in run.marks:
            axis.axvline(time, color="0.85", lw=0.8, zorder=0)
        axis.legend(loc="upper right", fontsize=7, ncol=3)
        axis.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="solo12", help="a multi-legged robot of config/robots")
    parser.add_argument("--out-dir", type=Path, default=Path("."), help="where gestures.png goes")
    args = parser.parse_args(argv)
    if not gesturing_robot(args.robot):
        print(f"gesture demo: '{args.robot}' is not a multi-legged robot description of config/robots",
              file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    run = run_gestures(args.robot)
    print(f"{'fell' if run.fallen else 'stood to the end'} after {run.times[-1]:.1f} s")
    path = args.out_dir / "gestures.png"
    try:
        plot_gestures(run, path, f"walk_mpc demo ({args.robot}, mujoco): gestures (seed 003), feet and body")
        print(f"Plot: {path}")
    except Exception as exc:  # the gestures matter more than the plot
        print(f"Plot failed: {exc}", file=sys.stderr)
    return 1 if run.fallen else 0


if __name__ == "__main__":
    sys.exit(main())
