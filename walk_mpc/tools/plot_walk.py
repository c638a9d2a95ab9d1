"""Plot a recorded walk (walk.mcap) to a PNG: footsteps, support polygons, CoM and ZMP (planned and measured).

    python -m walk_mpc.tools.plot_walk walk.mcap [-o walk.png] [--robot talos_reduced]

The measured ZMP is the centre of pressure of the SensorState contact forces, each contact sensor placed at
its sole corner (names ``<foot>_<corner>``, sole extents from --sole) by forward kinematics of the measured
joints and base; the measured CoM comes from the same kinematics.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

CORNERS = {"fl": (1, 1), "fr": (1, -1), "bl": (-1, 1), "br": (-1, -1)}


@dataclass
class WalkRecording:
    """Series extracted from a recording (times in seconds of the sensor clock)."""

    plan: object = None
    plan_stamp: float = 0.0
    ref_t: List[float] = field(default_factory=list)
    ref_com: List[Sequence[float]] = field(default_factory=list)
    ref_zmp: List[Sequence[float]] = field(default_factory=list)
    sensor_t: List[float] = field(default_factory=list)
    measured_zmp: List[Sequence[float]] = field(default_factory=list)
    measured_com: List[Sequence[float]] = field(default_factory=list)
    status_t: List[float] = field(default_factory=list)
    status_flags: List[int] = field(default_factory=list)


def _stamp(header) -> float:
    return header.stamp.sec + 1e-9 * header.stamp.nanosec


def read_recording(path: Path, robot: str = "talos_reduced", sole=(0.1, 0.1, 0.065, 0.065),
                   sensor_stride: int = 2) -> WalkRecording:
    """Read the topics the plot needs from an MCAP recording
    (:func:`~walk_mpc.tools.recorder.decoded_messages`)."""
    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.tools.recorder import decoded_messages

    model = RobotModel(RobotModel.Parameters(robot=robot))
    front, back, left, right = sole
    corner_local = {name: np.array([front if sx > 0 else -back, left if sy > 0 else -right, 0.0])
                    for name, (sx, sy) in CORNERS.items()}
    rec = WalkRecording()
    count = 0
    topics = ["/walk/plan", "/mpc/com_reference", "/sensor_state", "/walk/status"]
    for message in decoded_messages(path, topics):
        topic, msg = message.topic, message.msg
        if topic == "/walk/plan":
            if msg.walking and msg.steps:
                rec.plan, rec.plan_stamp = msg, _stamp(msg.header)
        elif topic == "/mpc/com_reference" and msg.com_position:
            rec.ref_t.append(_stamp(msg.header) + msg.time_from_stamp[0])
            rec.ref_com.append((msg.com_position[0].x, msg.com_position[0].y))
            rec.ref_zmp.append((msg.zmp[0].x, msg.zmp[0].y))
        elif topic == "/walk/status":
            rec.status_t.append(len(rec.status_t))
            rec.status_flags.append(msg.status_flags)
        elif topic == "/sensor_state":
            count += 1
            if count % sensor_stride or not msg.base_estimate_valid:
                continue
            p, o = msg.base_pose.position, msg.base_pose.orientation
            q = model.configuration_from_joints(dict(zip(msg.joint_names, msg.joint_pos)),
                                                (p.x, p.y, p.z), (o.x, o.y, o.z, o.w))
            rec.sensor_t.append(_stamp(msg.header))
            rec.measured_com.append(model.com(q)[:2])
            forces = np.asarray(msg.contact, dtype=float)
            if forces.sum() <= 1e-6:
                rec.measured_zmp.append((math.nan, math.nan))
                continue
            feet = model.foot_poses(q)
            frames = {"left_foot": model.foot_frames[0], "right_foot": model.foot_frames[1]}
            points = []
            for name in msg.contact_names:
                foot, _, corner = name.rpartition("_")
                position, rotation = feet[frames[foot]]
                points.append(position + rotation @ corner_local[corner])
            rec.measured_zmp.append(tuple((forces @ np.array(points))[:2] / forces.sum()))
    return rec


def _rectangle(x: float, y: float, yaw: float, sole) -> np.ndarray:
    front, back, left, right = sole
    local = np.array([[front, left], [front, -right], [-back, -right], [-back, left], [front, left]])
    c, s = math.cos(yaw), math.sin(yaw)
    return local @ np.array([[c, s], [-s, c]]) + np.array([x, y])


def plot(rec: WalkRecording, output: Path, sole=(0.1, 0.1, 0.065, 0.065), title: str = "walk_mpc") -> None:
    """Write the figure: top view (footsteps, CoM, ZMP) and x/y over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(13, 8))
    top = fig.add_subplot(2, 1, 1)
    ax_x = fig.add_subplot(2, 2, 3)
    ax_y = fig.add_subplot(2, 2, 4)
    if rec.plan is not None:
        feet = [(0, rec.plan.left_start_position, rec.plan.left_start_yaw, "start"),
                (1, rec.plan.right_start_position, rec.plan.right_start_yaw, "start")]
        feet += [(s.foot_index, s.position, s.yaw, str(s.step_index)) for s in rec.plan.steps]
        for foot, pos, yaw, label in feet:
            corners = _rectangle(pos.x, pos.y, yaw, sole)
            color = "tab:blue" if foot == 0 else "tab:red"
            top.fill(corners[:, 0], corners[:, 1], color=color, alpha=0.15)
            top.plot(corners[:, 0], corners[:, 1], color=color, lw=1)
            if label != "start":
                top.annotate(label, (pos.x, pos.y), ha="center", va="center", fontsize=7)
    ref_com, ref_zmp = np.array(rec.ref_com).reshape(-1, 2), np.array(rec.ref_zmp).reshape(-1, 2)
    com, zmp = np.array(rec.measured_com).reshape(-1, 2), np.array(rec.measured_zmp).reshape(-1, 2)
    top.plot(ref_zmp[:, 0], ref_zmp[:, 1], color="tab:orange", lw=1.2, label="ZMP planned (MPC)")
    top.plot(zmp[:, 0], zmp[:, 1], ".", color="tab:green", ms=2, label="ZMP measured (contact forces)")
    top.plot(ref_com[:, 0], ref_com[:, 1], color="black", lw=1.5, label="CoM planned")
    top.plot(com[:, 0], com[:, 1], "--", color="tab:purple", lw=1, label="CoM measured")
    top.set_aspect("equal")
    top.set_xlabel("x [m]")
    top.set_ylabel("y [m]")
    top.legend(loc="upper left", fontsize=8, ncol=2)
    top.set_title(f"{title}: footsteps (blue left, red right), CoM and ZMP")
    t0 = min(rec.ref_t[:1] + rec.sensor_t[:1]) if (rec.ref_t or rec.sensor_t) else 0.0
    ref_t, sensor_t = np.array(rec.ref_t) - t0, np.array(rec.sensor_t) - t0
    for axis, i, name in ((ax_x, 0, "x"), (ax_y, 1, "y")):
        axis.plot(ref_t, ref_zmp[:, i], color="tab:orange", lw=1, label="ZMP planned")
        axis.plot(sensor_t, zmp[:, i], ".", color="tab:green", ms=1.5, label="ZMP measured")
        axis.plot(ref_t, ref_com[:, i], color="black", lw=1.2, label="CoM planned")
        axis.plot(sensor_t, com[:, i], "--", color="tab:purple", lw=1, label="CoM measured")
        axis.set_xlabel("t [s]")
        axis.set_ylabel(f"{name} [m]")
        axis.grid(alpha=0.3)
    ax_x.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=Path("walk.png"))
    parser.add_argument("--robot", default="talos_reduced")
    parser.add_argument("--sole", type=float, nargs=4, default=(0.1, 0.1, 0.065, 0.065),
                        metavar=("FRONT", "BACK", "LEFT", "RIGHT"), help="[m] sole extents")
    args = parser.parse_args(argv)
    rec = read_recording(args.recording, args.robot, tuple(args.sole))
    plot(rec, args.output, tuple(args.sole))
    print(f"plot_walk: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())



