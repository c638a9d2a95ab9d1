"""Fall detection of the in-process loop (ClosedLoopWalk, scored on the simulator's truth): a fall that
happens after the timeline's end plus ``settle_time`` is still caught, the robot being watched until it has
settled; the torso, not the base, carries the tilt limit's meaning."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("mujoco")

from walk_mpc.core.body.robot import yaw_of  # noqa: E402
from walk_mpc.core.control.closed_loop import ClosedLoopParameters, ClosedLoopWalk  # noqa: E402
from walk_mpc.core.errors import ParameterError  # noqa: E402
from walk_mpc.core.sim.kinematic import KinematicSim  # noqa: E402
from walk_mpc.core.sim.mujoco import MujocoSim  # noqa: E402
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline  # noqa: E402


def standing(robot) -> Timeline:
    poses = {name: FootPose(tuple(p), yaw_of(r))
             for name, (p, r) in robot.foot_poses(robot.reference_configuration()).items()}
    return Timeline(poses[robot.left_foot_frame], poses[robot.right_foot_frame], [], GaitTiming())


def pushed_at_the_end(robot, params: ClosedLoopParameters) -> ClosedLoopWalk:
    """A standing robot pushed sideways hard (100 N s over 0.1 s) 0.1 s before the run's end."""
    sim = MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(), robot=robot)
    timeline = standing(robot)
    loop = ClosedLoopWalk(robot, sim, timeline, params=params)
    end = timeline.t_end + params.settle_time
    while sim.time < end - 0.1 - 1e-9:
        loop.step()
    sim.set_base_force(np.array([0.0, 1000.0, 0.0]))
    while sim.time < end - 1e-9:
        loop.step()
    sim.set_base_force(np.zeros(3))
    return loop


def test_a_fall_that_starts_at_the_end_of_the_run_is_watched_until_it_happens(talos):
    params = ClosedLoopParameters(settle_time=0.5)
    loop = pushed_at_the_end(talos, params)
    assert not loop.fallen  # still upright when the run's time is up
    outcome = loop.run(until=None)
    assert outcome.fallen
    assert loop.fall_reason
    assert outcome.sim_time <= standing(talos).t_end + params.settle_time + params.settle_wait + 0.011


def test_without_the_watch_the_same_fall_is_missed(talos):
    params = ClosedLoopParameters(settle_time=0.5, settle_wait=0.0)
    loop = pushed_at_the_end(talos, params)
    assert not loop.run(until=None).fallen


def test_fall_parameters_are_validated():
    with pytest.raises(ParameterError, match="torso_fall_tilt"):
        ClosedLoopParameters(torso_fall_tilt=0.0)
    with pytest.raises(ParameterError, match="settle_wait"):
        ClosedLoopParameters(settle_wait=-1.0)
    assert ClosedLoopParameters().torso_fall_tilt == pytest.approx(math.radians(10.0))
