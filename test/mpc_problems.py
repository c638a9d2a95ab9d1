"""Shared MPC problem factories for the tests: the smpc_solver reference walk and timeline walks."""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path
from typing import List, Tuple

import numpy as np

from walk_mpc.core.mpc.preview import Preview, SoleParameters
from walk_mpc.core.mpc.problem import MpcParameters, MpcWeights
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline

DATA = Path(__file__).resolve().parent / "data" / "smpc_test13"

#: The reference walk's MPC: NAO-sized LIPM, T = 40 ms, N = 40, weights of smpc_solver test_13.
SMPC_PARAMS = MpcParameters(
    com_height=0.252007, gravity=9.81, sampling_period=0.04, horizon=40,
    weights=MpcWeights(zmp=8000.0, velocity=1.0, acceleration=0.02, jerk=1.0), backend="exact")
SMPC_TICKS = 142


@dataclasses.dataclass(frozen=True)
class ReferenceWalk:
    """The smpc_test13 problem as per-grid-point arrays plus the reference closed-loop solution."""

    angles: np.ndarray  # (G,) support box angle at grid point g (time g T)
    lower: np.ndarray  # (G, 2)
    upper: np.ndarray  # (G, 2)
    zmp_ref: np.ndarray  # (G, 2)
    reference: dict  # column name -> (142,) array of reference_walk.csv

    def preview(self, tick: int, params: MpcParameters = SMPC_PARAMS, durations=None) -> Preview:
        """Preview of tick ``tick`` (interval i takes the support active at its start)."""
        n, dt = params.horizon, params.sampling_period
        sl = slice(tick, tick + n)
        durations = np.full(n, dt) if durations is None else durations
        return Preview(durations, self.angles[sl], self.lower[sl], self.upper[sl], self.zmp_ref[sl],
                       t_start=tick * dt)


def load_reference_walk(params: MpcParameters = SMPC_PARAMS) -> ReferenceWalk:
    """Load steps.csv and reference_walk.csv (copied from /work/shared/bench/smpc_test13)."""
    with open(DATA / "steps.csv", newline="") as stream:
        rows = [r for r in csv.DictReader(stream) if int(r["duration_ms"]) > 0]
    count = SMPC_TICKS + params.horizon - 1
    angles = np.zeros(count)
    lower = np.zeros((count, 2))
    upper = np.zeros((count, 2))
    ref = np.zeros((count, 2))
    dt_ms = round(params.sampling_period * 1000)
    for g in range(count):
        t_ms = g * dt_ms
        active = (r for r in rows if int(r["start_ms"]) <= t_ms < int(r["start_ms"]) + int(r["duration_ms"]))
        row = next(active, rows[-1])  # past the sequence (longer horizons): keep the final double support
        x, y, a = float(row["x"]), float(row["y"]), float(row["angle_rad"])
        c, s = math.cos(a), math.sin(a)
        local = np.array([c * x + s * y, -s * x + c * y])
        angles[g] = a
        lower[g] = local - (float(row["d_back"]), float(row["d_right"]))
        upper[g] = local + (float(row["d_front"]), float(row["d_left"]))
        ref[g] = float(row["zref_x"]), float(row["zref_y"])
    with open(DATA / "reference_walk.csv", newline="") as stream:
        table = list(csv.DictReader(stream))
    reference = {key: np.array([float(r[key]) for r in table]) for key in table[0]}
    return ReferenceWalk(angles, lower, upper, ref, reference)


def run_reference_walk(mpc, walk: ReferenceWalk, ticks: int = SMPC_TICKS):
    """Closed loop on the LIPM: apply the first jerk, advance one interval. Returns the plans."""
    state = np.zeros((3, 2))
    plans = []
    for k in range(ticks):
        plan = mpc.solve(state, walk.preview(k, mpc.params, mpc.durations))
        plans.append(plan)
        state = np.stack([plan.com_position[0], plan.com_velocity[0], plan.com_acceleration[0]])
    return plans


def straight_steps(count: int, length: float, width: float, duration: float = 0.8,
                   lateral: float = 0.0, yaw_step: float = 0.0) -> Tuple[FootPose, FootPose, List[Step]]:
    """Initial feet and ``count`` alternating steps (first: right foot), each advancing ``length`` [m]
    forward and ``lateral`` [m] sideways in the walking frame, which turns by ``yaw_step`` [rad] per step."""
    half = 0.5 * width
    left, right = FootPose((0.0, half, 0.0)), FootPose((0.0, -half, 0.0))
    steps = []
    centre = np.zeros(2)
    heading = 0.0
    for k in range(count):
        foot = Foot.RIGHT if k % 2 == 0 else Foot.LEFT
        heading += yaw_step
        centre = centre + _rot(heading) @ np.array([length, lateral])
        side = -half if foot is Foot.RIGHT else half
        position = centre + _rot(heading) @ np.array([0.0, side])
        steps.append(Step(k + 1, foot, duration, (position[0], position[1], 0.0), yaw=heading))
    return left, right, steps


def _rot(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


WALKS = {
    "straight": dict(count=8, length=0.15, width=0.17),
    "turning": dict(count=12, length=0.05, width=0.17, yaw_step=math.pi / 2 / 12),
    "lateral": dict(count=8, length=0.0, width=0.17, lateral=0.05),
    "backward": dict(count=8, length=-0.1, width=0.17),
}


def walk_timeline(name: str, timing: GaitTiming = GaitTiming(0.6, 0.2, 0.6)) -> Timeline:
    """Timeline of one of the standard test walks (see WALKS)."""
    left, right, steps = straight_steps(**WALKS[name])
    return Timeline(left, right, steps, timing)


TALOS_SOLE = SoleParameters()
