"""Compile the numba kernels of the hot path ahead of time (``python -m walk_mpc.core.warmup``).

The exact MPC and the IK use numba kernels cached on disk (``__pycache__``). Compiling them takes about 8 s
the first time, which a node would otherwise spend inside its first control ticks while the simulator keeps
publishing (the references then stop long enough for the IK to report them stale). ``make build`` runs this
module once per change of the kernels: a short straight walk and a short turn through the in-process closed
loop (planner, IK targets, both IK solutions, kinematic plant) compile every kernel variant the graph uses.
"""

from __future__ import annotations

import math
import sys
import time


def warm_up() -> float:
    """Run the short walks; returns the wall time [s] it took. Without numba it only checks imports."""
    from walk_mpc.core.body.robot import RobotModel, yaw_of
    from walk_mpc.core.control.closed_loop import ClosedLoopWalk
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.walk import footsteps
    from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline

    start = time.perf_counter()
    robot = RobotModel()
    for turn in (False, True):
        plant = KinematicSim(KinematicSim.Parameters(), robot=robot)
        feet = {n: FootPose(tuple(p), yaw_of(r)) for n, (p, r) in robot.foot_poses(plant.state.q).items()}
        left, right = feet[robot.left_foot_frame], feet[robot.right_foot_frame]
        if turn:
            steps = footsteps.walk_arc(left, right, 0.6, math.pi / 8, step_length=0.2, width=0.17,
                                       duration=1.1)
        else:
            steps = footsteps.walk_forward(left, right, 0.2, step_length=0.2, width=0.17, duration=1.1)
        loop = ClosedLoopWalk(robot, plant, Timeline(left, right, steps[:2], GaitTiming(0.2, 0.3, 0.2)))
        loop.run()
    return time.perf_counter() - start


def main() -> int:
    try:
        import numba  # noqa: F401
    except ImportError:
        print("warmup: numba is not installed: nothing to compile (the numpy implementations are used)")
        return 0
    print(f"warmup: numba kernels compiled or loaded in {warm_up():.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
