"""A pushed in-process walk on MuJoCo, its samples replayed on the WalkSupervisor (the walk_behavior node's
core): shared by test_step_adjustment and test_step_timing, whose tests compare the loop's adjusted plans with
the supervisor's."""

from __future__ import annotations

import dataclasses
from typing import List, Tuple

import numpy as np


def pushed_walk_replayed(estimated, robot, direction: str, force: float, until: float,
                         adjustment) -> Tuple[object, object, object, List]:
    """A 6-step walk of benchmarks/robustness.py (``estimated``: that module; the state estimated, the
    stabilizer on) on MuJoCo, pushed in ``direction`` with ``force`` [N] for its push duration, run to
    ``until`` [s] by ``ClosedLoopWalk(step_adjustment=adjustment)``; then the same samples (and stamps) given
    to a WalkSupervisor with the same step adjustment and the walk as its goal.

    Returns:
        (timeline, loop, supervisor, plans): the walk's timeline, the loop, the supervisor and the walking
        plans the supervisor published.
    """
    from walk_mpc.core.control.closed_loop import ClosedLoopParameters, ClosedLoopWalk
    from walk_mpc.core.control.stabilizer import StabilizerParameters
    from walk_mpc.core.control.walk_supervisor import WalkSupervisor, WalkSupervisorParameters
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.sim.mujoco import MujocoSim
    from walk_mpc.core.walk.behavior import WalkBehavior

    gait = estimated.Gait(steps=6)
    timeline = estimated.timeline_of(robot, gait)
    t0, unit = estimated.push_directions(robot, gait, True)[direction]
    sim = MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(), robot=robot)
    truth = sim.sensor_sample
    samples = []

    def sample():
        s = dataclasses.replace(truth(), base_estimate_valid=False)
        samples.append(s)
        return s

    sim.sensor_sample = sample
    loop = ClosedLoopWalk(robot, sim, timeline, params=ClosedLoopParameters(settle_time=0.2),
                          stage_options={"whole_body": {"stabilizer": StabilizerParameters(enabled=True)}},
                          step_adjustment=adjustment)
    stamps = []
    while sim.time < until - 1e-9:
        pushing = t0 - 1e-9 <= sim.time < t0 + estimated.PUSH_DURATION - 1e-9
        sim.set_base_force(np.array([unit[0], unit[1], 0.0]) * (force if pushing else 0.0))
        loop.step()
        stamps.append(loop.stamp_ns(sim.state.step_count))
    first = timeline.phases[0]
    params = WalkSupervisorParameters(
        behavior=WalkBehavior.Parameters(timing=timeline.timing), initial_feet=(first.left, first.right),
        step_adjustment=adjustment, stand_follow_distance=0.0)
    supervisor = WalkSupervisor(params, robot)
    plans = []
    # The walk starts at the loop's time 0: the stamp of the sample before the first one the loop stepped.
    start = stamps[0] - round(sim.hardware_period * 1e9)
    supervisor.observe(start, dataclasses.replace(samples[0], base_estimate_valid=False))
    answer, _ = supervisor.submit_goal("push", list(timeline.steps), True)
    assert answer.accepted
    for stamp, s in zip(stamps, samples):
        out = supervisor.observe(stamp, s)
        if out.plan is not None and out.plan.walking:
            plans.append(out.plan)
    return timeline, loop, supervisor, plans


def undisturbed_commands(estimated, robot, adjustments) -> List[list]:
    """The joint commands of a 3-step undisturbed walk (``estimated``: benchmarks/robustness.py; the state
    estimated, the stabilizer on) on MuJoCo, once per step adjustment of ``adjustments`` (None: without); each
    walk must keep its one plan (nothing adjusted)."""
    from walk_mpc.core.control.closed_loop import ClosedLoopParameters, ClosedLoopWalk
    from walk_mpc.core.control.stabilizer import StabilizerParameters
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.sim.mujoco import MujocoSim

    timeline = estimated.timeline_of(robot, estimated.Gait(steps=3))
    commands = []
    options = {"whole_body": {"stabilizer": StabilizerParameters(enabled=True)}}
    for adjustment in adjustments:
        sim = MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(), robot=robot)
        truth = sim.sensor_sample
        sim.sensor_sample = lambda truth=truth: dataclasses.replace(truth(), base_estimate_valid=False)
        loop = ClosedLoopWalk(robot, sim, timeline, params=ClosedLoopParameters(settle_time=0.2),
                              stage_options=options, step_adjustment=adjustment)
        loop.keep_commands = True
        loop.run(until=timeline.t_end)
        assert len(loop.plans) == 1
        commands.append(loop.commands)
    return commands
