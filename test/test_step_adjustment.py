"""Step adjustment from the measured DCM (issue 18): core/control/step_adjustment.py, the walk behavior's
adjusted committed steps, the supervisor and the in-process loop deciding alike, a push on MuJoCo."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from walk_mpc.core.control.step_adjustment import (
    StepAdjustmentParameters,
    adjusted_steps,
    nominal_touchdown_dcm,
)
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.walk.behavior import WalkBehavior
from walk_mpc.core.walk.footsteps import walk_forward
from walk_mpc.core.walk.saturation import SaturationFlags, StepLimits
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline

LEFT, RIGHT = FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0))
TIMING = GaitTiming(sway_duration=0.6, double_support_duration=0.3, catch_duration=0.6)


def straight(n: int = 6) -> Timeline:
    steps = walk_forward(LEFT, RIGHT, 0.2 * (n - 1), step_length=0.2, width=0.17, duration=1.1)
    return Timeline(LEFT, RIGHT, steps, TIMING)


def test_parameters_are_checked_and_off_by_default():
    assert not StepAdjustmentParameters().enabled
    with pytest.raises(ParameterError, match="deadband"):
        StepAdjustmentParameters(deadband=-0.01)
    with pytest.raises(ParameterError, match="enabled"):
        StepAdjustmentParameters(enabled=1)


def test_adjusted_steps_stay_within_the_step_limits_and_keep_indices():
    timeline = straight()
    limits = StepLimits()
    step = timeline.steps[2]
    steps = adjusted_steps(timeline, step.step_index, (step.position[0] + 0.5, step.position[1]), limits)
    assert [s.step_index for s in steps] == [s.step_index for s in timeline.steps]
    assert [s.foot for s in steps] == [s.foot for s in timeline.steps]
    moved = steps[2]
    stance = steps[1]
    assert moved.position[0] == pytest.approx(stance.position[0] + limits.max_forward)  # saturated
    assert steps[:2] == timeline.steps[:2]
    # The step after it is within its limits from the moved step (here: it was 0.1 m ahead, now behind).
    assert steps[3].position[0] >= moved.position[0] - limits.max_backward - 1e-9


def test_nominal_touchdown_dcm_lies_between_the_feet_near_the_landed_sole():
    timeline = straight()
    omega = 3.4
    for step in timeline.steps[:-1]:
        xi = nominal_touchdown_dcm(timeline, step.step_index, omega)
        # Behind the landed sole (the double support carries it across), ahead of the previous stance.
        assert step.position[0] - 0.2 < xi[0] < step.position[0]
    last = timeline.steps[-1]
    final = timeline.phases[-1]
    middle = 0.5 * (np.array(final.left.position[:2]) + np.array(final.right.position[:2]))
    assert np.allclose(nominal_touchdown_dcm(timeline, last.step_index, omega), middle)


def test_behavior_moves_committed_steps_without_changing_their_indices():
    timing = TIMING
    behavior = WalkBehavior(WalkBehavior.Parameters(timing=timing), LEFT, RIGHT)
    steps = straight().steps
    assert behavior.submit_goal(steps, True).accepted
    behavior.step(1.0)  # step 1 swings
    status = behavior.status
    place = (steps[0].position[0] + 0.08, steps[0].position[1])
    moved = adjusted_steps(status.timeline, 1, place, StepLimits())
    assert behavior.adjust_steps(moved) == (1,)
    status = behavior.status
    assert status.step_queue_saturated[0].position[0] == pytest.approx(steps[0].position[0] + 0.08)
    assert [s.step_index for s in status.step_queue_saturated] == [1, 2, 3, 4]
    assert status.step_saturation[0] == SaturationFlags.NONE
    assert status.timeline.steps[0].position == status.step_queue_saturated[0].position
    assert status.next_step_index_needed == 5
    # The user's committed steps may still be re-sent as sent (Atlas semantics), not changed.
    assert behavior.queue_steps(steps[:4], False).accepted
    assert not behavior.queue_steps([dataclasses.replace(steps[0], yaw=0.1)], False).accepted
    # A landed step is not moved.
    behavior.step(1.0)
    assert behavior.adjust_steps([moved[0].replace(position=(0.5, 0.1, 0.0))]) == ()


# ---------------------------------------------------------------------------------------------------- MuJoCo
def _push_walk(rb, impulse: float, adjust: bool, direction: str = "backward"):
    from walk_mpc.core.body.robot import RobotModel

    robot = RobotModel()
    gait = rb.Gait(steps=6)
    t0, unit = rb.push_directions(robot, gait, True)[direction]
    force = impulse / rb.PUSH_DURATION * np.array([unit[0], unit[1], 0.0])
    return rb.run_walk(robot, True, gait, push=(t0, force), adjust=adjust,
                       duration=rb.timeline_of(robot, gait).t_end + rb.PUSH_SETTLE)


@pytest.mark.parametrize("impulse", [37.0, 39.0])
def test_a_backward_push_that_fell_is_survived_with_step_adjustment(estimated, impulse):
    """State estimated, stabilizer on: 37 and 39 N s backward in step 3's single support fell (the bisection
    without step adjustment: 34.4 N s); with the step moved back by the DCM error, again as the estimate
    settles, its swing re-planned from where the foot is, it walks (the README: every direction)."""
    assert not estimated.walked(_push_walk(estimated, impulse, False))
    assert estimated.walked(_push_walk(estimated, impulse, True))


def test_a_40_n_s_backward_push_is_survived_with_step_adjustment_and_the_pelvis_kept_upright(estimated,
                                                                                             monkeypatch):
    """State estimated, stabilizer on, step adjustment: 40 N s backward in step 3's single support falls (on a
    grid step adjustment walks up to 37.5 N s); with the IK keeping the pelvis upright on every solve
    (``pelvis_level_gain`` 1) it walks (up to 40)."""
    assert not estimated.walked(_push_walk(estimated, 40.0, True))
    monkeypatch.setattr(estimated, "IK", {"pelvis_level_gain": 1.0})
    assert estimated.walked(_push_walk(estimated, 40.0, True))


def test_defaults_move_steps_only_backward_and_again_as_the_dcm_settles():
    p = StepAdjustmentParameters()
    assert (p.max_forward_shift, p.max_widening_shift, p.max_narrowing_shift) == (0.0, 0.0, 0.0)
    assert p.max_backward_shift > 0.0 and p.update_distance == 0.03
    with pytest.raises(ParameterError, match="max_widening_shift"):
        StepAdjustmentParameters(max_widening_shift=-0.1)


def test_a_step_moved_in_the_air_does_not_make_the_swing_foot_target_jump(estimated):
    """The pushed walk of the test above: the whole-body stage re-plans the swing of each moved step from
    where the foot is (:func:`retarget_swing`): its target moves < 1.5 cm per 10 ms sample, where the bare
    adjusted timeline jumps by several cm."""
    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.core.body.swing import RetargetedPhase
    from walk_mpc.core.body.targets import foot_targets_at
    from walk_mpc.core.control.closed_loop import ClosedLoopParameters, ClosedLoopWalk
    from walk_mpc.core.control.stabilizer import StabilizerParameters
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.sim.mujoco import MujocoSim

    rb = estimated
    robot = RobotModel()
    gait = rb.Gait(steps=6)
    timeline = rb.timeline_of(robot, gait)
    t0, unit = rb.push_directions(robot, gait, True)["backward"]
    kp = rb.LEG_KP
    physics = MujocoSim.Parameters(gain_patterns=("leg_",), gain_kp=(kp,), gain_kd=(kp / 100.0,))
    sim = MujocoSim(KinematicSim.Parameters(), physics, robot=robot)
    truth = sim.sensor_sample
    sim.sensor_sample = lambda: dataclasses.replace(truth(), base_estimate_valid=False)
    loop = ClosedLoopWalk(robot, sim, timeline, params=ClosedLoopParameters(settle_time=0.2),
                          stage_options={"whole_body": {"stabilizer": StabilizerParameters(enabled=True)}},
                          step_adjustment=StepAdjustmentParameters(enabled=True))
    previous, jumps, replanned = None, [], 0
    while sim.time < 5.0 - 1e-9:
        pushing = t0 - 1e-9 <= sim.time < t0 + rb.PUSH_DURATION - 1e-9
        sim.set_base_force(np.array([unit[0], unit[1], 0.0]) * (390.0 if pushing else 0.0))
        plans = len(loop.plans)
        loop.step()
        stage = loop.whole_body.timeline
        t = sim.time
        phase = stage.phase_at(t)
        replanned += isinstance(phase, RetargetedPhase)
        if phase.kind.name != "SINGLE":
            previous = None
            continue
        target = foot_targets_at(stage, t)[phase.swing_foot].position
        if previous is not None:
            assert np.linalg.norm(target - previous) < 0.015
        if len(loop.plans) > plans:  # the bare adjusted plan's target, for scale
            bare = foot_targets_at(loop.plans[-1].timeline, t)[phase.swing_foot].position
            jumps.append(float(np.linalg.norm(bare - target)))
        previous = target
    assert not loop.fallen
    assert len(loop.plans) > 2 and replanned > 0
    assert max(jumps) > 0.03


def test_enabled_without_disturbance_changes_nothing_bit_for_bit(estimated):
    """Undisturbed, the adjuster decides nothing: the commands are those of the loop without it."""
    from push_replay import undisturbed_commands

    from walk_mpc.core.body.robot import RobotModel

    robot = RobotModel()
    commands = undisturbed_commands(estimated, robot, (None, StepAdjustmentParameters(enabled=True)))
    assert len(commands[0]) == len(commands[1])
    for a, b in zip(*commands):
        assert a.stamp_ns == b.stamp_ns and np.array_equal(a.positions, b.positions)


def test_the_walk_supervisor_moves_the_steps_the_in_process_loop_moves(estimated):
    """The same samples (a pushed in-process walk, replayed) give the WalkSupervisor (the walk_behavior node's
    core) the same adjusted steps as the loop's plans: the graph and the loop run one adjuster."""
    from push_replay import pushed_walk_replayed

    from walk_mpc.core.body.robot import RobotModel

    timeline, loop, supervisor, plans = pushed_walk_replayed(
        estimated, RobotModel(), "backward", 370.0, 4.0, StepAdjustmentParameters(enabled=True))
    assert len(loop.plans) > 1  # the push moved steps
    # (The behavior's plans also change at the touchdowns that commit the last steps.)
    assert supervisor.step_adjuster.adjustments == loop.adjuster.adjustments == len(loop.plans) - 1
    ours, theirs = plans[-1].timeline.steps, loop.plans[-1].timeline.steps
    assert [s.step_index for s in ours] == [s.step_index for s in theirs]
    for a, b in zip(ours, theirs):
        assert a.position == pytest.approx(b.position, abs=1e-9)  # (the behavior's clock sums its dt)
    assert any(a.position != c.position for a, c in zip(ours, timeline.steps))
    # One stamp: the ik's whole-body stage re-plans the moved swing (a plan of another stamp is another walk).
    assert len({plan.stamp_ns for plan in plans}) == 1
