"""Can a biped's legs cross? The leg clearance of crossing steps at the IK's postures (issue 18).

A crossover step (``RecoveryStepParameters.crossover``) catches a sideways push on the loaded foot by the
unloaded foot landing across it. Whether the legs can take that step is geometry: this script places the
swinging (right) sole around the stance (left) sole of the standing robot, solves the whole-body IK for
the posture (stance sole fixed, the CoM over it at the standing height, the torso upright) and measures the
smallest distance between the left and the right leg's collision geoms (:meth:`MujocoSim.leg_distance`: the
URDF's own collision meshes of the description's ``leg_links``, as MuJoCo's ``leg_collisions`` collides them,
convex hulls; negative: they interpenetrate by that much).

Offsets in the stance sole's frame: ``forward`` [m] of the swinging sole's centre, ``across`` [m] its lateral
distance beyond the stance sole's centre toward the stance foot's outer side (0: in line with it, > 0: a
crossing step; the standing feet are at ``-standing width``), ``toe out`` [rad] its yaw turned outward (the
right toe to the right). Each cell: the largest clearance [cm] over the toe-out angles and that angle;
``*``: no posture within 5 mm of the target (out of reach).

1. **Landing**: the swinging sole on the ground.
2. **Swinging across** at ``--swing-height`` (5 cm): for each forward offset, the sole moved across from its
   standing place (the worst cell along the way: a swing path at that forward offset clears only when every
   cell does).

    bash -c 'source tools/env.sh && source install/setup.bash && python -P benchmarks/crossover_clearance.py'
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from walk_mpc.core.body.ik import IKSolver, IKTargets
from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.sim.mujoco import MujocoSim
from walk_mpc.core.walk.step import Foot

FORWARD = (-0.4, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5)  # [m]
ACROSS = (0.0, 0.05, 0.1, 0.15, 0.2)  # [m] beyond the stance sole's centre
TOE_OUT = (-0.6, -0.3, 0.0, 0.3, 0.6)  # [rad]
REACH = 0.005  # [m] largest IK position error of a reached posture
ITERATIONS = 30  # IK solves from the standing posture (each one a step of the solver)


def rotation_z(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class Scan:
    """Postures of the swinging right sole around the standing left one, and their leg clearance."""

    def __init__(self, robot: RobotModel) -> None:
        self.robot = robot
        self.sim = MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(leg_clearance=True,
                                                                             leg_collisions=False),
                             robot=robot)
        self.q0 = self.sim.initial_configuration()
        feet = robot.foot_poses(self.q0)
        self.left, self.left_rotation = feet[robot.foot_frames[0]]
        right = feet[robot.foot_frames[1]][0]
        self.width = float(self.left[1] - right[1])
        self.com = robot.com(self.q0)
        self.solver = IKSolver(robot)

    def clearance(self, forward: float, across: float, height: float, toe_out: float) -> tuple:
        """(distance [m], (left link, right link), reached) of the posture with the right sole there."""
        target = self.left + np.array([forward, across, height])
        com = np.array([self.left[0], self.left[1], self.com[2]])
        targets = IKTargets(com_position=com,
                            foot_positions={Foot.LEFT: self.left, Foot.RIGHT: target},
                            foot_rotations={Foot.LEFT: self.left_rotation, Foot.RIGHT: rotation_z(-toe_out)},
                            torso_orientation=np.eye(3))
        q = self.q0
        for _ in range(ITERATIONS):
            q = self.solver.solve(targets, q).q
        error = float(np.linalg.norm(self.robot.foot_poses(q)[self.robot.foot_frames[1]][0] - target))
        distance, pair = self.sim.leg_distance(q)
        return distance, pair, error <= REACH

    def best(self, forward: float, across: float, height: float) -> tuple:
        """(distance [m], toe out [rad], pair, reached) of the toe-out angle that clears most."""
        results = []
        for toe in TOE_OUT:
            distance, pair, reached = self.clearance(forward, across, height, toe)
            results.append((reached, distance, toe, pair))
        reached, distance, toe, pair = max(results)
        return distance, toe, pair, reached


def cell(distance: float, toe: float, reached: bool) -> str:
    return f"{100 * distance:+5.1f} ({toe:+.1f}){'' if reached else '*'}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robot", default="talos", help="robot description (default talos)")
    parser.add_argument("--swing-height", type=float, default=0.05, help="[m] of the swinging-across table")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    scan = Scan(RobotModel(RobotModel.Parameters(robot=args.robot)))
    standing, pair = scan.sim.leg_distance(scan.q0)
    print(f"{args.robot}: standing width {scan.width:.3f} m, standing leg clearance {100 * standing:+.1f} cm "
          f"({pair[0]}/{pair[1]}); cells: the largest clearance [cm] over toe out {TOE_OUT} rad "
          "(its toe out)")
    header = "| forward [m] | " + " | ".join(f"across {a:.2f}" for a in ACROSS) + " |"
    rule = "|---" * (len(ACROSS) + 1) + "|"
    print("\n1. Landing (the swinging sole on the ground)\n")
    print(header)
    print(rule)
    cleared = []
    for forward in FORWARD:
        row = []
        for across in ACROSS:
            distance, toe, _, reached = scan.best(forward, across, 0.0)
            row.append(cell(distance, toe, reached))
            if distance >= 0.0 and reached and across >= 0.1:
                cleared.append((forward, across))
        print(f"| {forward:+.2f} | " + " | ".join(row) + " |")
    path = [-scan.width + 0.05, -0.05, 0.0, 0.05, 0.1, 0.15]
    print(f"\n2. Swinging across at {100 * args.swing_height:.0f} cm: the worst cell along the way from "
          f"across {path[0]:+.2f} to {path[-1]:+.2f} m, and where\n")
    print("| forward [m] | worst clearance [cm] (toe out) | at across [m] | links |")
    print("|---|---|---|---|")
    for forward in FORWARD:
        worst = min((scan.best(forward, across, args.swing_height) + (across,) for across in path),
                    key=lambda r: (r[3], r[0]))
        distance, toe, pair, reached, across = worst
        print(f"| {forward:+.2f} | {cell(distance, toe, reached)} | {across:+.2f} | {pair[0]}/{pair[1]} |")
    print(f"\nLandings at least 0.1 m across that clear: {cleared if cleared else 'none'}")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
