"""Standing recovery steps (issue 18): core/control/recovery_step.py, the walk behavior's recovery walk with
its own timing, the supervisor and the in-process loop deciding alike, a standing push on MuJoCo."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from walk_mpc.core.control.recovery_step import (
    RecoveryStepParameters,
    RecoveryStepper,
    distance_outside,
    support_hull,
)
from walk_mpc.core.control.walk_supervisor import RecoveryStepId, WalkSupervisor, WalkSupervisorParameters
from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.mpc.preview import SoleParameters
from walk_mpc.core.walk.behavior import WalkBehavior, WalkErrorCode
from walk_mpc.core.walk.saturation import StepLimits
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

LEFT, RIGHT = FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0))
SOLE = SoleParameters(0.09, 0.09, 0.055, 0.055)


class _Robot:
    """What the stepper needs of a robot for planning (no sample is measured here): a robot whose legs clear
    crossing steps up to 0.3 m across (its description's ``steps.max_crossover_width``)."""

    name = "crossing_biped"

    def planner_sole(self):
        return SOLE

    def step_limits(self):
        from walk_mpc.core.body.robot import StepLimits as RobotStepLimits

        return RobotStepLimits(max_crossover_width=0.3)


def test_parameters_are_checked_and_off_by_default():
    p = RecoveryStepParameters()
    assert not p.enabled
    assert p.steps == 2 and p.trigger_distance < p.lateral_trigger_distance
    assert p.max_backward == 0.0 and p.crossover_trigger_distance == 0.0
    assert RecoveryStepParameters(steps=4).steps == 4
    with pytest.raises(ParameterError, match="crossover_trigger_distance"):
        RecoveryStepParameters(crossover_trigger_distance=-0.01)
    with pytest.raises(ParameterError, match="steps"):
        RecoveryStepParameters(steps=5)
    with pytest.raises(ParameterError, match="max_backward"):
        RecoveryStepParameters(max_backward=-0.1)
    with pytest.raises(ParameterError, match="sway_duration"):
        RecoveryStepParameters(sway_duration=0.0)
    with pytest.raises(ParameterError, match="trigger_distance"):
        RecoveryStepParameters(trigger_distance=-0.01)
    with pytest.raises(ParameterError, match="enabled"):
        RecoveryStepParameters(enabled=1)
    # The walk supervisor checks the recovery's double support against the behavior's step limits.
    with pytest.raises(ParameterError, match="recovery_step.double_support_duration"):
        WalkSupervisorParameters(recovery_step=RecoveryStepParameters(enabled=True,
                                                                      double_support_duration=0.5))


def test_support_polygon_of_both_soles():
    hull = support_hull((LEFT, RIGHT), SOLE)
    assert len(hull) == 4
    assert distance_outside((0.0, 0.0), hull) == 0.0
    assert distance_outside((0.05, 0.1), hull) == 0.0
    assert distance_outside((0.15, 0.0), hull) == pytest.approx(0.06)
    assert distance_outside((0.0, -0.2), hull) == pytest.approx(0.2 - 0.085 - 0.055)
    turned = support_hull((FootPose((0.0, 0.085, 0.0), 0.5), FootPose((0.0, -0.085, 0.0), 0.5)), SOLE)
    assert distance_outside((0.0, 0.0), turned) == 0.0


def test_capture_steps_go_toward_the_dcm_within_the_step_limits():
    limits = StepLimits()
    stepper = RecoveryStepper(_Robot(), RecoveryStepParameters(enabled=True), limits)
    omega = 3.36
    # Slightly ahead of the soles: the left foot steps forward (not farther than the step limits; a bit wider:
    # the ZMP on the right sole's front inner corner speeds the DCM leftward too), the right one follows.
    first, second = stepper.capture_steps(np.array([0.12, 0.0]), omega, LEFT, RIGHT)
    assert (first.step_index, first.foot, second.step_index, second.foot) == (1, Foot.LEFT, 2, Foot.RIGHT)
    assert 0.09 < first.position[0] <= RIGHT.position[0] + limits.max_forward + 1e-9
    assert LEFT.position[1] <= first.position[1] < LEFT.position[1] + 0.05
    assert second.position[0] >= first.position[0] - 1e-9
    assert second.position[1] <= first.position[1] - (LEFT.position[1] - RIGHT.position[1]) + 1e-9
    p = stepper.params
    assert first.duration == pytest.approx(p.single_support_duration + p.double_support_duration)
    # Far ahead: the first step saturates at max_forward, the second goes on beyond it.
    first, second = stepper.capture_steps(np.array([0.3, 0.0]), omega, LEFT, RIGHT)
    assert first.position[0] == pytest.approx(RIGHT.position[0] + limits.max_forward)
    assert second.position[0] == pytest.approx(first.position[0] + limits.max_forward)
    # Behind and to the right: the right foot steps back (max_backward), wider, never crossing.
    first, _ = stepper.capture_steps(np.array([-0.2, -0.05]), omega, LEFT, RIGHT)
    assert first.foot is Foot.RIGHT
    assert first.position[0] == pytest.approx(LEFT.position[0] - limits.max_backward)
    assert first.position[1] <= RIGHT.position[1] + 1e-9
    one = RecoveryStepper(_Robot(), RecoveryStepParameters(enabled=True, steps=1), limits)
    assert len(one.capture_steps(np.array([0.12, 0.0]), omega, LEFT, RIGHT)) == 1


def test_more_steps_take_the_feet_in_turn_and_max_backward_lengthens_only_the_recovery_steps_back():
    """``steps`` 3: the feet in turn, each toward the DCM predicted at its touchdown (far behind: every step
    saturated at the backward limit from the one before); ``max_backward`` 0.25 m: the recovery's steps (and
    the limits it commits them with) go 0.25 m back instead of the walk's 0.2, the walk's limits unchanged."""
    limits = StepLimits()
    omega = 3.36
    three = RecoveryStepper(_Robot(), RecoveryStepParameters(enabled=True, steps=3), limits)
    steps = three.capture_steps(np.array([-0.4, -0.02]), omega, LEFT, RIGHT)
    assert [(s.step_index, s.foot) for s in steps] == [(1, Foot.RIGHT), (2, Foot.LEFT), (3, Foot.RIGHT)]
    assert [s.position[0] for s in steps] == pytest.approx([-0.2, -0.4, -0.6])
    assert three.walk_limits() is limits
    longer = RecoveryStepper(_Robot(), RecoveryStepParameters(enabled=True, steps=3, max_backward=0.25),
                             limits)
    steps = longer.capture_steps(np.array([-0.4, -0.02]), omega, LEFT, RIGHT)
    assert [s.position[0] for s in steps] == pytest.approx([-0.25, -0.5, -0.75])
    assert longer.walk_limits() == dataclasses.replace(limits, max_backward=0.25)
    assert longer.limits.max_backward == 0.2
    # Caught by the first step (the DCM on its sole at touchdown): the other feet come beside it.
    steps = longer.capture_steps(np.array([-0.12, -0.02]), omega, LEFT, RIGHT)
    assert -0.25 < steps[0].position[0] < -0.15
    assert [s.position[0] for s in steps[1:]] == pytest.approx([steps[0].position[0]] * 2)


def test_recovery_steps_are_quick_within_the_default_step_limits():
    """The default recovery step, 0.3 s of swing and 0.1 s of double support, is within the default step
    limits (``min_duration`` 0.4 s): the walk behavior does not lengthen it; under longer limits its single
    support is lengthened (the step lasts ``min_duration``)."""
    p = RecoveryStepParameters(enabled=True)
    assert (p.single_support_duration, p.double_support_duration) == (0.3, 0.1)
    assert StepLimits().min_duration <= p.single_support_duration + p.double_support_duration
    assert RecoveryStepper(_Robot(), p, StepLimits()).step_duration == pytest.approx(0.4)
    assert RecoveryStepper(_Robot(), p, StepLimits(min_duration=0.5)).step_duration == pytest.approx(0.5)
    behavior = WalkBehavior(WalkBehavior.Parameters(), LEFT, RIGHT)
    steps = RecoveryStepper(_Robot(), p, StepLimits()).capture_steps(np.array([0.2, 0.0]), 3.36, LEFT, RIGHT)
    assert behavior.submit_goal(list(steps), True, timing=RecoveryStepper(_Robot(), p).timing()).accepted
    assert [s.duration for s in behavior.status.timeline.steps] == pytest.approx([0.4, 0.4])


def test_the_behavior_walks_a_goal_with_its_own_timing_then_stands():
    params = WalkBehavior.Parameters()
    behavior = WalkBehavior(params, LEFT, RIGHT)
    timing = GaitTiming(sway_duration=0.1, double_support_duration=0.15, catch_duration=0.6)
    steps = [Step(1, Foot.LEFT, 0.5, (0.2, 0.085, 0.0)), Step(2, Foot.RIGHT, 0.5, (0.2, -0.085, 0.0))]
    with pytest.raises(InputError, match="timing"):
        too_long = GaitTiming(double_support_duration=params.limits.min_duration)
        behavior.submit_goal(steps, True, timing=too_long)
    assert behavior.submit_goal(steps, True, goal_id="recover", timing=timing).accepted
    timeline = behavior.status.timeline
    assert timeline.timing == timing
    single = [p for p in timeline.phases if p.kind is PhaseKind.SINGLE]
    assert single[0].t_start == pytest.approx(0.1) and single[0].duration == pytest.approx(0.35)
    status = behavior.step(timeline.t_end + 0.01)
    assert status.result.error_code == WalkErrorCode.NONE
    # The next walk has the parameters' timing again.
    assert behavior.submit_goal([Step(1, Foot.LEFT, 1.0, (0.4, 0.085, 0.0))], True).accepted
    assert behavior.status.timeline.timing == params.timing


def test_a_sideways_dcm_gets_a_crossover_step_of_the_other_foot_only_when_enabled():
    """DCM beyond the left sole's outer edge: without ``crossover`` the left foot would step (never crossing);
    with it the right foot, unloaded, steps across the left one, in front of it, where the DCM will be
    (within the crossover widths), one step; the walk behavior keeps it with the stepper's walk limits and
    saturates it back to its own side with the default ones."""
    xi, omega = np.array([0.0, 0.2]), 3.36
    plain = RecoveryStepper(_Robot(), RecoveryStepParameters(enabled=True), StepLimits())
    assert plain.capture_steps(xi, omega, LEFT, RIGHT)[0].foot is Foot.LEFT
    assert plain.walk_limits() == StepLimits()
    p = RecoveryStepParameters(enabled=True, crossover=True)
    stepper = RecoveryStepper(_Robot(), p, StepLimits())
    (step,) = stepper.capture_steps(xi, omega, LEFT, RIGHT, crossover=True)
    assert (step.step_index, step.foot) == (1, Foot.RIGHT)
    across = step.position[1] - LEFT.position[1]
    assert p.min_crossover_width <= across <= p.max_crossover_width + 1e-9
    assert step.position[0] == pytest.approx(p.crossover_forward_offset)
    z = LEFT.position[1] + SOLE.left  # the LIPM with the ZMP on the left sole's outer edge
    single = stepper.step_duration - p.double_support_duration
    predicted = z + (xi[1] - z) * math.exp(omega * (p.sway_duration + single))
    assert step.position[1] == pytest.approx(min(predicted, LEFT.position[1] + p.max_crossover_width))
    limits = stepper.walk_limits()
    assert (limits.min_crossover_width, limits.max_crossover_width) == (p.min_crossover_width,
                                                                          p.max_crossover_width)
    for walk_limits, crossed in ((limits, True), (None, False)):
        behavior = WalkBehavior(WalkBehavior.Parameters(), LEFT, RIGHT)
        assert behavior.submit_goal([step], True, timing=stepper.timing(), limits=walk_limits).accepted
        landed = behavior.status.timeline.steps[0].position
        assert (landed[1] > LEFT.position[1]) == crossed
    with pytest.raises(InputError, match="limits"):
        WalkBehavior(WalkBehavior.Parameters(), LEFT, RIGHT).submit_goal([step], True, limits={})
    with pytest.raises(ParameterError, match="min_crossover_width"):
        RecoveryStepParameters(min_crossover_width=0.3, max_crossover_width=0.3)


def test_a_crossover_waits_for_the_dcm_beyond_its_own_trigger(monkeypatch):
    """Standing, the DCM 1 cm beyond the left sole's outer edge: with ``crossover`` the right foot steps
    across at once (the trigger is ``trigger_distance``, 0); with ``crossover_trigger_distance`` 0.02 m no
    step yet (the soles keep it), and a crossover once the DCM is 3 cm out. Forward the trigger stays
    ``trigger_distance``."""
    from walk_mpc.core.control import recovery_step

    timeline = Timeline(LEFT, RIGHT, [], GaitTiming())
    dcm = {"xi": np.zeros(2)}
    monkeypatch.setattr(recovery_step, "measure_dcm", lambda robot, phase, sample: (dcm["xi"].copy(), 3.36))
    edge = LEFT.position[1] + SOLE.left

    def decide(xi, **options):
        params = RecoveryStepParameters(enabled=True, crossover=True, filter_time=0.0, **options)
        stepper = RecoveryStepper(_Robot(), params, StepLimits())
        dcm["xi"] = np.zeros(2)
        assert stepper.observe(0.0, timeline, None) is None
        dcm["xi"] = np.asarray(xi, dtype=float)
        return stepper.observe(1.0, timeline, None)

    (step,) = decide([0.0, edge + 0.01])
    assert step.foot is Foot.RIGHT
    assert decide([0.0, edge + 0.01], crossover_trigger_distance=0.02) is None
    (step,) = decide([0.0, edge + 0.03], crossover_trigger_distance=0.02)
    assert step.foot is Foot.RIGHT and step.position[1] > LEFT.position[1]
    steps = decide([SOLE.front + 0.01, 0.0], crossover_trigger_distance=0.02)
    assert steps is not None and steps[0].position[0] > 0.0


# ---------------------------------------------------------------------------------------------------- MuJoCo
def _standing_push(rb, impulse: float, direction: str, recover: bool, stabilizer: bool = True):
    from walk_mpc.core.body.robot import RobotModel

    robot = RobotModel()
    gait = rb.Gait(steps=0)
    t0, unit = rb.push_directions(robot, gait, False)[direction]
    force = impulse / rb.PUSH_DURATION * np.array([unit[0], unit[1], 0.0])
    return rb.run_walk(robot, stabilizer, gait, push=(t0, force), duration=t0 + 2.0, recover=recover)


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_a_standing_push_that_fell_is_survived_with_a_recovery_step(estimated, direction):
    """State estimated, stabilizer on: 38 N s on the standing pelvis, forward or backward, falls (the
    bisection without recovery: 28-31 N s, the capture limit of the soles); with the recovery steps toward
    the measured DCM the robot stands again."""
    assert not estimated.walked(_standing_push(estimated, 38.0, direction, False))
    assert estimated.walked(_standing_push(estimated, 38.0, direction, True))


def test_a_forward_push_that_fell_with_slower_recovery_steps_is_survived_with_the_quick_ones(estimated,
                                                                                             monkeypatch):
    """State estimated, stabilizer on, 45 N s forward on the standing pelvis: with the former recovery steps
    (0.35 s swing, 0.15 s double support, 0.5 s steps) the first one lands too late (a 0.3 m step cannot
    reach the DCM) and Talos falls; with the default quick ones (0.3 / 0.1 s, 0.4 s steps) it stands."""
    slow = {"single_support_duration": 0.35, "double_support_duration": 0.15}
    monkeypatch.setattr(estimated, "RECOVERY", slow)
    assert not estimated.walked(_standing_push(estimated, 45.0, "forward", True))
    monkeypatch.setattr(estimated, "RECOVERY", {})
    assert estimated.walked(_standing_push(estimated, 45.0, "forward", True))


def test_a_backward_push_that_fell_with_0_15_m_steps_back_is_survived_with_0_2_m(estimated, monkeypatch):
    """State estimated, stabilizer on, 43.75 N s backward on the standing pelvis: with the former step limit
    backward (``max_backward`` 0.15 m) the first recovery step cannot reach the DCM and Talos falls; with
    the default 0.2 m it stands."""
    monkeypatch.setattr(estimated, "LIMITS", {"max_backward": 0.15})
    assert not estimated.walked(_standing_push(estimated, 43.75, "backward", True))
    monkeypatch.setattr(estimated, "LIMITS", {})
    assert StepLimits().max_backward == 0.2
    assert estimated.walked(_standing_push(estimated, 43.75, "backward", True))


@pytest.mark.parametrize("direction", ["left", "right"])
def test_a_sideways_standing_push_that_fell_is_survived_with_a_crossover_step(estimated, monkeypatch,
                                                                               direction):
    """State estimated, stabilizer on (CoM offset released beyond 2 cm out of the support), 55 N s sideways
    on the standing pelvis: with the recovery steps alone Talos falls (no uncrossed step can catch it: the
    bisection stops at 43.8 N s, the capture limit of the soles); with the crossover step it stands, but only
    with the legs passing through each other (``leg_collisions`` off): the crossover's logic. With the legs
    colliding (the default) its knees meet and it falls (the test after this one)."""
    monkeypatch.setattr(estimated, "LEG_COLLISIONS", False)
    monkeypatch.setattr(estimated, "STABILIZER", {"dcm_com_release_distance": 0.02})
    assert not estimated.walked(_standing_push(estimated, 55.0, direction, True))
    monkeypatch.setattr(estimated, "RECOVERY", {"crossover": True})
    assert estimated.walked(_standing_push(estimated, 55.0, direction, True))


def test_with_the_legs_colliding_the_crossover_step_drives_a_knee_into_the_other_and_falls(estimated,
                                                                                             monkeypatch):
    """The crossover step of the test above (55 N s to the left), Talos' legs colliding (MuJoCo
    ``leg_collisions``, the default): the swinging leg hits the stance leg (hundreds of newtons) and Talos
    falls. The crossover is not a recovery Talos can take (docs/balance.md, "Leg collisions")."""
    monkeypatch.setattr(estimated, "LEG_REPORT", True)  # the run's leg contacts in LEG_CONTACTS
    monkeypatch.setattr(estimated, "LEG_CONTACTS", [])
    monkeypatch.setattr(estimated, "STABILIZER", {"dcm_com_release_distance": 0.02})
    monkeypatch.setattr(estimated, "RECOVERY", {"crossover": True})
    assert not estimated.walked(_standing_push(estimated, 55.0, "left", True))
    _, _, contacts = estimated.LEG_CONTACTS[-1]
    assert contacts.touched and contacts.max_force > 100.0


def test_a_forward_push_that_fell_with_the_com_held_back_is_survived_with_it_released(estimated, monkeypatch):
    """State estimated, stabilizer on, recovery steps, 48 N s forward on the standing pelvis: the
    stabilizer's CoM offset against the DCM error holds the CoM back while the step must catch it, and
    Talos falls; released while the DCM is more than 2 cm out of the support (``dcm_com_release_distance``)
    it stands."""
    assert not estimated.walked(_standing_push(estimated, 48.0, "forward", True))
    monkeypatch.setattr(estimated, "STABILIZER", {"dcm_com_release_distance": 0.02})
    assert estimated.walked(_standing_push(estimated, 48.0, "forward", True))


def test_a_60_n_s_forward_push_is_survived_with_quicker_recovery_steps(estimated, monkeypatch):
    """State estimated, stabilizer on with its CoM offset released beyond 2 cm out of the support: 60 N s
    forward on the standing pelvis falls with the default recovery steps (0.1 s sway, 0.3 s swing) and stands
    with a 0.05 s sway and a 0.25 s swing (0.35 s steps: the step limits' ``min_duration`` 0.35 s)."""
    monkeypatch.setattr(estimated, "STABILIZER", {"dcm_com_release_distance": 0.02})
    assert not estimated.walked(_standing_push(estimated, 60.0, "forward", True))
    monkeypatch.setattr(estimated, "RECOVERY", {"sway_duration": 0.05, "single_support_duration": 0.25})
    monkeypatch.setattr(estimated, "LIMITS", {"min_duration": 0.35})
    assert estimated.walked(_standing_push(estimated, 60.0, "forward", True))


def test_a_60_n_s_backward_push_is_survived_with_three_longer_steps_back_and_the_pelvis_upright(estimated,
                                                                                                monkeypatch):
    """State estimated, stabilizer off, the quick recovery steps with the crossover (0.05 s sway, 0.25 s
    swing): 60 N s backward on the standing pelvis falls (two 0.2 m steps back leave the DCM behind the rear
    heel; the bisection stops at 53.1 N s); with three steps, 0.25 m back (``max_backward``) and the pelvis
    kept upright by the IK (``pelvis_level_gain`` 1) Talos stands."""
    quick = {"crossover": True, "sway_duration": 0.05, "single_support_duration": 0.25}
    monkeypatch.setattr(estimated, "RECOVERY", quick)
    monkeypatch.setattr(estimated, "LIMITS", {"min_duration": 0.35})
    assert not estimated.walked(_standing_push(estimated, 60.0, "backward", True, stabilizer=False))
    monkeypatch.setattr(estimated, "RECOVERY", dict(quick, steps=3, max_backward=0.25))
    monkeypatch.setattr(estimated, "IK", {"pelvis_level_gain": 1.0})
    assert estimated.walked(_standing_push(estimated, 60.0, "backward", True, stabilizer=False))


@pytest.mark.parametrize("direction", ["left", "right"])
def test_a_40_n_s_sideways_push_is_survived_with_the_crossover_kept_for_a_dcm_clearly_out(estimated,
                                                                                            monkeypatch,
                                                                                            direction):
    """State estimated, stabilizer off, the standing setting of issue 18 (the quick recovery steps with the
    crossover, three steps 0.25 m back, the pelvis upright): 40 N s sideways on the standing pelvis brings
    the DCM 5 mm beyond the outer sole edge; the crossover it triggers lands 8 cm beyond the DCM, which
    swings back over the inner sole, a second recovery follows and Talos falls (37.5 and 42.5 N s stand).
    With ``crossover_trigger_distance`` 0.02 m no step is taken and it stands."""
    setting = {"crossover": True, "sway_duration": 0.05, "single_support_duration": 0.25, "steps": 3,
               "max_backward": 0.25}
    monkeypatch.setattr(estimated, "RECOVERY", setting)
    monkeypatch.setattr(estimated, "LIMITS", {"min_duration": 0.35})
    monkeypatch.setattr(estimated, "IK", {"pelvis_level_gain": 1.0})
    assert not estimated.walked(_standing_push(estimated, 40.0, direction, True, stabilizer=False))
    monkeypatch.setattr(estimated, "RECOVERY", dict(setting, crossover_trigger_distance=0.02))
    assert estimated.walked(_standing_push(estimated, 40.0, direction, True, stabilizer=False))


def _loop(rb, robot, recovery, samples=None):
    from walk_mpc.core.control.closed_loop import ClosedLoopParameters, ClosedLoopWalk
    from walk_mpc.core.control.stabilizer import StabilizerParameters
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.sim.mujoco import MujocoSim

    kp = rb.LEG_KP
    # A crossover passes the legs through each other (its knees would collide: the test of that above); the
    # equivalence of the decisions is what is tested here.
    physics = MujocoSim.Parameters(gain_patterns=("leg_",), gain_kp=(kp,), gain_kd=(kp / 100.0,),
                                   leg_collisions=recovery is None or not recovery.crossover)
    sim = MujocoSim(KinematicSim.Parameters(), physics, robot=robot)
    truth = sim.sensor_sample

    def sample():
        s = dataclasses.replace(truth(), base_estimate_valid=False)
        if samples is not None:
            samples.append(s)
        return s

    sim.sensor_sample = sample
    timeline = rb.timeline_of(robot, rb.Gait(steps=0))
    loop = ClosedLoopWalk(robot, sim, timeline, params=ClosedLoopParameters(settle_time=0.2),
                          stage_options={"whole_body": {"stabilizer": StabilizerParameters(enabled=True)}},
                          recovery_step=recovery)
    return sim, loop, timeline


def test_enabled_without_disturbance_changes_nothing_bit_for_bit(estimated):
    """Standing undisturbed, the stepper decides nothing: the commands are those of the loop without it."""
    from walk_mpc.core.body.robot import RobotModel

    robot = RobotModel()
    commands = []
    for recovery in (None, RecoveryStepParameters(enabled=True)):
        sim, loop, _ = _loop(estimated, robot, recovery)
        loop.keep_commands = True
        loop.run(until=2.0)
        assert len(loop.plans) == 1 and not loop.fallen
        commands.append(loop.commands)
    assert len(commands[0]) == len(commands[1])
    for a, b in zip(*commands):
        assert a.stamp_ns == b.stamp_ns and np.array_equal(a.positions, b.positions)


@pytest.mark.parametrize("direction, force, crossover, options", [
    ("forward", 380.0, False, {}), ("left", 500.0, True, {}),
    ("backward", 450.0, False, {"steps": 3, "max_backward": 0.25})])
def test_the_walk_supervisor_takes_the_recovery_steps_the_in_process_loop_takes(estimated, direction, force,
                                                                                 crossover, options):
    """The same samples (a pushed standing robot in process, replayed) give the WalkSupervisor (the
    walk_behavior node's core) the same recovery walk as the loop's plans: one decision, shared; goals are
    refused while it walks, and it ends in Stand. Sideways with ``crossover``: the same crossover step (the
    behavior commits it within the stepper's walk limits). Backward with three steps and ``max_backward``
    0.25 m: the same three steps (committed within the recovery's own backward limit)."""
    from walk_mpc.core.body.robot import RobotModel

    robot = RobotModel()
    recovery = RecoveryStepParameters(enabled=True, crossover=crossover, **options)
    if crossover:  # the legs pass through each other here (the decision is what is compared)
        estimated.allow_crossing(robot, recovery.max_crossover_width)
    samples: list = []
    sim, loop, timeline = _loop(estimated, robot, recovery, samples)
    t0, unit = estimated.push_directions(robot, estimated.Gait(steps=0), False)[direction]
    stamps = []
    while sim.time < 3.0 - 1e-9:
        pushing = t0 - 1e-9 <= sim.time < t0 + estimated.PUSH_DURATION - 1e-9
        sim.set_base_force(np.array([unit[0], unit[1], 0.0]) * (force if pushing else 0.0))
        loop.step()
        stamps.append(loop.stamp_ns(sim.state.step_count))
    assert not loop.fallen
    assert loop.recovery.recoveries == 1 and len(loop.plans) > 2  # the recovery walk, its steps moved
    first = timeline.phases[0]
    params = WalkSupervisorParameters(initial_feet=(first.left, first.right), recovery_step=recovery,
                                      stand_follow_distance=0.0)
    supervisor = WalkSupervisor(params, robot)
    start = stamps[0] - round(sim.hardware_period * 1e9)
    supervisor.observe(start, samples[0])
    plans, refused, ended = [], False, []
    for stamp, s in zip(stamps, samples):
        out = supervisor.observe(stamp, s)
        ended += [r for r in out.results if isinstance(r.goal_id, RecoveryStepId)]
        if out.plan is not None and out.plan.walking:
            plans.append(out.plan)
        if supervisor.recovering and not refused:
            answer, _ = supervisor.submit_goal("user", [Step(1, Foot.LEFT, 1.0, (0.2, 0.085, 0.0))], True)
            assert not answer.accepted and "recovery step 1 is in progress" in answer.rejection.message
            refused = True
    assert refused and supervisor.recovery_stepper.recoveries == 1
    assert [r.error_code for r in ended] == [WalkErrorCode.NONE]
    assert not supervisor.walking
    ours, theirs = plans[-1].timeline.steps, loop.plans[-1].timeline.steps
    assert [(s.step_index, s.foot) for s in ours] == [(s.step_index, s.foot) for s in theirs]
    for a, b in zip(ours, theirs):  # (the behavior's clock sums its dt; exp(omega t) amplifies it)
        assert a.position == pytest.approx(b.position, abs=1e-5)  # (6 um seen, crossover: 10 um)
    assert plans[-1].timeline.timing == loop.plans[-1].timeline.timing
    if crossover:  # the right foot across the left one
        assert [s.foot for s in ours] == [Foot.RIGHT] and ours[0].position[1] > first.left.position[1]
    if options:  # three steps, the first beyond the walk's 0.2 m back
        assert len(ours) == 3 and ours[0].position[0] < first.left.position[0] - 0.2
    # One walk (one stamp) at the decision's sample: the ik re-plans the moved swing within it.
    assert len({plan.stamp_ns for plan in plans}) == 1
    assert math.isclose(plans[0].stamp_ns, loop.plans[1].stamp_ns, abs_tol=round(sim.hardware_period * 1e9))


def test_a_crossover_is_refused_on_a_robot_whose_legs_do_not_clear_it():
    """Talos' description allows no crossing step (``steps.max_crossover_width`` 0: its legs collide,
    benchmarks/crossover_clearance.py): a recovery stepper with the crossover, or walk limits with crossing
    steps, is refused at construction, naming the option, the robot and its width; without the crossover,
    or on a robot whose legs clear it (the stub above), it is built."""
    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.core.control.walk_supervisor import WalkSupervisor, WalkSupervisorParameters

    talos = RobotModel()
    assert talos.step_limits().max_crossover_width == 0.0
    with pytest.raises(ParameterError, match="crossover.*none wider than 0.0 m on 'talos'"):
        RecoveryStepper(talos, RecoveryStepParameters(enabled=True, crossover=True))
    RecoveryStepper(talos, RecoveryStepParameters(enabled=True))
    RecoveryStepper(_Robot(), RecoveryStepParameters(enabled=True, crossover=True))
    with pytest.raises(ParameterError, match="crossover.*0.35 m across.*0.3 m on 'crossing_biped'"):
        RecoveryStepper(_Robot(), RecoveryStepParameters(enabled=True, crossover=True,
                                                         max_crossover_width=0.35))
    params = WalkSupervisorParameters()
    crossing = dataclasses.replace(params, behavior=dataclasses.replace(
        params.behavior, limits=StepLimits(min_crossover_width=0.15, max_crossover_width=0.3)))
    with pytest.raises(ParameterError, match="behavior.limits.max_crossover_width.*'talos'"):
        WalkSupervisor(crossing, talos)
    WalkSupervisor(crossing)  # no robot: the feet are not measured, nothing to check against
