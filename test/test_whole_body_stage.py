"""The whole-body stage: what the ik node decides each tick, without ROS (seed 001, seed 003)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from walk_mpc.core.body.gesture import GestureDof, gesture_transform, inverse_transform
from walk_mpc.core.body.targets import foot_targets_at
from walk_mpc.core.control.stamps import StampGuardParameters
from walk_mpc.core.control.types import CoMReference, WalkPlan, WholeBodyStatus
from walk_mpc.core.control.whole_body_stage import (
    LANDING_TIME,
    BadReference,
    WholeBodyStage,
    WholeBodyStageParameters,
)
from walk_mpc.core.errors import JointNotFound, ParameterError
from walk_mpc.core.sensors import SensorSample
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

T = 0.02  # [s] the default control period
T_NS = 20_000_000
PLAN_STAMP_NS = 100_000_000_000  # sensor time of t = 0 of the plan
COM_HEIGHT = 0.86  # [m]
OK = WholeBodyStatus.OK


class ListLog:
    """A Log keeping (level, message) pairs."""

    def __init__(self):
        self.lines = []

    def debug(self, msg):
        self.lines.append(("debug", msg))

    def info(self, msg):
        self.lines.append(("info", msg))

    def warning(self, msg):
        self.lines.append(("warning", msg))

    def error(self, msg):
        self.lines.append(("error", msg))

    def count(self, level, text):
        return sum(lvl == level and text in msg for lvl, msg in self.lines)


def walk_timeline():
    steps = [Step(1, Foot.LEFT, 0.8, (0.1, 0.085, 0.0), yaw=0.1, swing_height=0.05),
             Step(2, Foot.RIGHT, 0.8, (0.2, -0.085, 0.0), yaw=0.1, swing_height=0.05)]
    return Timeline(FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0)), steps,
                    GaitTiming(sway_duration=0.6, double_support_duration=0.2, catch_duration=0.6))


def com_at(timeline, t):
    """A reachable CoM: above the middle of the feet, swaying 2 cm towards the next stance foot."""
    feet = foot_targets_at(timeline, t)
    middle = 0.5 * (feet[Foot.LEFT].position + feet[Foot.RIGHT].position)
    return middle + [0.0, 0.02 * math.sin(math.pi * t / 0.8), COM_HEIGHT]


def ns(t):
    """Stamp [ns] of plan time ``t`` [s]."""
    return PLAN_STAMP_NS + int(round(t * 1e9))


def reference(timeline, t, plan_id=1, offset=0.0):
    coms = [com_at(timeline, t + dt) for dt in (T, 2 * T)]
    coms[0] = coms[0] + [offset, 0.0, 0.0]
    return CoMReference(ns(t), plan_id, (T, 2 * T), coms, np.zeros((2, 3)), np.zeros((2, 3)))


def fixed_reference(stamp_ns, com, plan_id=1):
    return CoMReference(stamp_ns, plan_id, (T, 2 * T), [com, com], np.zeros((2, 3)), np.zeros((2, 3)))


def sample_of(robot, q, base=False, contacts=(), forces=(), offset=(0.0, 0.0, 0.0)):
    """A sensor sample measuring configuration ``q`` (with its base pose, shifted by ``offset``, if
    ``base``)."""
    joints = robot.joint_positions(q)
    n = len(joints)
    return SensorSample(time=0.0, joint_names=tuple(joints), joint_pos=list(joints.values()),
                        joint_vel=np.zeros(n), motor_names=(), motor_pos=[], motor_vel=[], motor_torque=[],
                        contact_names=tuple(contacts), contact=list(forces), base_estimate_valid=base,
                        base_position=np.asarray(q[0:3]) + offset, base_orientation_xyzw=q[3:7])


def plan(timeline, plan_id=1, walking=True, stamp_ns=PLAN_STAMP_NS):
    return WalkPlan(plan_id, walking, stamp_ns, timeline)


def rows(command):
    return [command.positions[0].tolist(), command.positions[1].tolist(), command.velocities.tolist()]


# ------------------------------------------------------------------ ticks
def test_nothing_before_a_sample_then_resync_at_each_support_change_and_holds_without_references(talos):
    stage = WholeBodyStage(talos, WholeBodyStage.Parameters(sensor_timeout=1e3))  # sparse samples
    timeline = walk_timeline()
    assert stage.on_reference(reference(timeline, 0.0)) is None  # no state: nothing to command yet
    assert not stage.initialised and stage.configuration is None
    # a measured posture with the knees more bent than the model's: re-synchronised at support changes
    q_measured = talos.reference_configuration()
    knees = [i for i, name in enumerate(talos.joint_names) if "leg" in name and "_4_" in name]
    assert len(knees) == 2
    q_measured[7 + np.array(knees)] += 0.05
    sample = sample_of(talos, q_measured)
    hold = stage.observe(ns(-1.0), sample)  # no references: a standing tick holds the measured posture
    assert hold.status == OK and hold.source == "sensor" and hold.stamp_ns == ns(-1.0)
    np.testing.assert_allclose(stage.configuration[7:], q_measured[7:])
    np.testing.assert_allclose(hold.positions[0], talos.actuated_positions(q_measured), atol=1e-9)
    stage.set_plan(plan(timeline))
    commands, changes, stance = [], 0, None
    for k in range(int(round(timeline.t_end / T))):
        t = k * T
        now = timeline.phase_at(t).stance_feet
        changes += stance is not None and now != stance
        stance = now
        command = stage.on_reference(reference(timeline, t))
        assert command.status == OK and command.source == "reference" and command.times[:2] == (T, 2 * T)
        single = timeline.phase_at(t + 2 * T)  # the landing tail: the 2T posture held, then the foot put down
        held_until = 2 * T + WholeBodyStageParameters().reference_timeout + 2 * T
        if len(command.times) == 4:
            assert single.kind is PhaseKind.SINGLE
            assert command.times[2:] == pytest.approx((held_until, held_until + LANDING_TIME))
            np.testing.assert_array_equal(command.positions[2], command.positions[1])
        else:  # no tail: double support, or the swing foot still on the ground (lift-off, touchdown)
            assert len(command.times) == 2
        np.testing.assert_allclose(command.velocities[1], (command.positions[1] - command.positions[0]) / T)
        previous = (commands[-1] if commands else hold).positions[0]
        np.testing.assert_allclose(command.velocities[0], (command.positions[1] - previous) / (2 * T))
        commands.append(command)
    assert changes == 4  # sway -> single -> double -> single -> double
    assert stage.resyncs == changes
    # standing, references stopped: sensor-driven ticks hold the posture where it is (no jump)
    last = commands[-1].positions[0]
    standing = stage.observe(ns(timeline.t_end + 1.0), sample)
    assert standing.status == OK and standing.source == "sensor"
    np.testing.assert_allclose(standing.positions[0], last, atol=1e-9)


def test_a_walk_starting_without_references_waits_reference_timeout_then_holds_stale(talos):
    stage = WholeBodyStage(talos)
    sample = sample_of(talos, talos.reference_configuration())
    assert stage.observe(ns(-0.02), sample).status == OK
    stage.set_plan(plan(walk_timeline()))  # reference_timeout 0.1 s from the latest sample, -0.02 s
    assert stage.observe(ns(0.0), sample) is None  # the walk's first references are on their way
    report = stage.report  # not silent: a report of what it waits for, on the tick's sample
    assert report.status == WholeBodyStatus.WAITING_FOR_REFERENCES and report.stamp_ns == ns(0.0)
    assert "plan 1" in report.reason and "is the mpc_planner running?" in report.reason
    assert stage.observe(ns(0.06), sample) is None and stage.report.stamp_ns == ns(0.06)
    stale = stage.observe(ns(0.08), sample)
    assert stale.status == WholeBodyStatus.REFERENCE_STALE and stage.report is None
    assert "is the mpc_planner running?" in stale.reason


def test_references_in_flight_for_the_previous_plan_are_solved_on_it(talos):
    stage = WholeBodyStage(talos)
    timeline = walk_timeline()
    stage.set_plan(plan(timeline, 1))
    assert stage.on_reference(reference(timeline, 0.0)) is None  # before any measurement: ignored
    stage.observe(ns(-1.0), sample_of(talos, talos.reference_configuration()))
    assert stage.on_reference(reference(timeline, 0.0)).status == OK
    # plan 2 arrives (the walk behavior extended the queue) while a reference for plan 1 is in flight
    stage.set_plan(plan(timeline, 2))
    assert stage.on_reference(reference(timeline, T, plan_id=1)).status == OK
    assert stage.plan_id == 1
    assert stage.on_reference(reference(timeline, 2 * T, plan_id=2)).status == OK  # the planner switched
    assert stage.plan_id == 2
    # A plan never received (in flight across a restart): skipped, not a failure; the stage keeps its plan.
    assert stage.on_reference(reference(timeline, 3 * T, plan_id=7)) is None
    assert stage.plan_id == 2


def test_references_of_a_planner_without_a_plan_are_followed_while_standing_only(talos):
    """Issue 17: a restarted planner that has not heard the latched plan yet stands at the measured feet and
    names plan 0; the stage follows it while its own plan stands (the loop runs before the plan reaches the
    planner), never in a walk, and keeps its plan."""
    from walk_mpc.core.control.types import NO_PLAN

    stand = Timeline(FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0)), [])
    stage = WholeBodyStage(talos)
    stage.set_plan(plan(stand, 5, walking=False))
    stage.observe(ns(-1.0), sample_of(talos, talos.reference_configuration()))
    com = talos.com(talos.reference_configuration())
    assert stage.on_reference(fixed_reference(ns(0.0), com, plan_id=5)).status == OK
    assert stage.on_reference(fixed_reference(ns(T), com, plan_id=NO_PLAN)).status == OK
    assert stage.plan_id == 5
    assert stage.on_reference(fixed_reference(ns(2 * T), com, plan_id=5)).status == OK  # the planner heard it
    stage.set_plan(plan(walk_timeline(), 6))  # a walk the planner has not heard yet: its references wait
    assert stage.on_reference(fixed_reference(ns(3 * T), com, plan_id=NO_PLAN)) is None
    assert stage.plan_id == 5
    # ... and its next sample ticks without references: the walk installed, waiting, naming the planner.
    assert stage.observe(ns(4 * T), sample_of(talos, talos.reference_configuration())) is None
    assert stage.plan_id == 6 and stage.report.status == WholeBodyStatus.WAITING_FOR_REFERENCES
    assert "plan 0" in stage.report.reason and "is the mpc_planner running?" in stage.report.reason

    walking = WholeBodyStage(talos)
    timeline = walk_timeline()
    walking.set_plan(plan(timeline, 1))
    walking.observe(ns(-1.0), sample_of(talos, talos.reference_configuration()))
    assert walking.on_reference(reference(timeline, 0.0)).status == OK
    assert walking.on_reference(reference(timeline, T, plan_id=NO_PLAN)) is None  # in a walk: skipped
    assert walking.plan_id == 1


def test_the_stance_foot_is_targeted_at_its_measured_pose_from_the_lift_off_on(talos):
    timeline = walk_timeline()
    q = talos.reference_configuration()
    offset = np.array([0.003, 0.002, 0.0])  # the robot stands 3 mm ahead and 2 mm left of the plan
    sample = sample_of(talos, q, base=True, offset=offset)
    liftoff = timeline.phases[1].t_start
    runs = {}
    for prepared in (True, False):
        stage = WholeBodyStage(talos)
        if not prepared:
            stage._prepare_tick = lambda now: None  # everything at the reference's tick
        stage.observe(ns(-T), sample)
        stage.set_plan(plan(timeline))
        commands = []
        for k in range(int(round((liftoff + 0.1) / T))):
            t = k * T
            assert stage.observe(ns(t), sample) is None  # references flowing: no sensor-driven tick
            commands.append(stage.on_reference(reference(timeline, t)))
        assert all(c.status == OK for c in commands)
        right = talos.foot_poses(q)[talos.right_foot_frame][0] + offset  # the stance foot of step 1
        corrected = stage.timeline.phases[0].right
        np.testing.assert_allclose(corrected.position[:2], right[:2], atol=1e-9)
        assert corrected.position[2] == timeline.phases[0].right.position[2]  # planned height
        assert stage.timeline.steps == timeline.steps  # the swing foot keeps its planned world pose
        # Made on arrival of the sample, while the planner computes the lift-off's reference.
        assert stage.prepared == (1 if prepared else 0)
        assert (stage._pose_targets is not None) == prepared  # and the targets but their CoM
        runs[prepared] = [rows(c) for c in commands]
    assert runs[True] == runs[False]  # the same commands either way


def run_announced_walk(talos, ahead, inject=None, steady=False):
    """The walk with a sample between ticks (on which the planner announces the next tick's reference) and
    the tick's sample; ``inject(stage, k, steady_ns)`` adds inputs after each tick. Returns the stage and
    the commands."""
    timeline = walk_timeline()
    stage = WholeBodyStage(talos)
    sample = sample_of(talos, talos.reference_configuration())

    def observe(t):
        return stage.observe(ns(t), sample, ns(t) - PLAN_STAMP_NS + 5_000 if steady else None)

    commands = [observe(-T)]
    stage.set_plan(plan(timeline))
    for k in range(int(round((timeline.t_end + 0.2) / T))):
        t = k * T
        if k:
            assert observe(t - T / 2) is None  # between ticks
            if ahead:
                # the tick's sample changed the planner's solve: another CoM than announced
                announced = reference(timeline, t, offset=1e-9 if k % 10 == 4 else 0.0)
                solved = stage.on_reference_ahead(announced)
                assert solved is stage.ahead_command
        assert observe(t) is None
        expected = stage.ahead_command
        command = stage.on_reference(reference(timeline, t))
        assert (command is expected) == (ahead and k > 0 and k % 10 != 4)  # the command solved ahead
        commands.append(command)
        if inject is not None:
            inject(stage, k, ns(t) - PLAN_STAMP_NS + 6_000)
    assert all(c.status == OK for c in commands)
    return stage, commands


def test_a_reference_announced_ahead_is_solved_before_its_tick_with_the_same_commands(talos):
    """The tick of an announced reference returns the command solved when it was announced (or when the
    tick's sample arrived, if that sample re-syncs or corrects the support), if the tick solves exactly
    that problem; otherwise (another CoM than announced, nothing announced) it solves as usual."""
    runs = {}
    for ahead in (True, False):
        stage, commands = run_announced_walk(talos, ahead)
        ticks = len(commands) - 1
        expected = ticks - 1 - sum(k % 10 == 4 for k in range(1, ticks)) if ahead else 0
        assert stage.resyncs == 4 and stage.prepared == 3 and stage.ahead_ticks == expected  # 3 corrected
        runs[ahead] = [rows(c) for c in commands]
    assert runs[True] == runs[False]  # the same commands either way


def test_rogue_stamps_and_malformed_samples_are_rejected_without_state_change_and_the_walk_goes_on(talos):
    """One SensorState stamped 2147483647 s (issue 16), samples stamped before the last one, a sample whose
    arrays do not match its names, one with NaN: each rejected (logged once per series), and the walk's
    commands are those of the walk without them, bit for bit."""
    _, clean = run_announced_walk(talos, True, steady=True)
    q = talos.reference_configuration()
    rogue = sample_of(talos, q)
    short = sample_of(talos, q)
    object.__setattr__(short, "joint_pos", short.joint_pos[:-1])  # around the constructor's check
    nan = sample_of(talos, q)
    object.__setattr__(nan, "joint_pos", np.where(np.arange(len(nan.joint_pos)) == 3, np.nan, nan.joint_pos))

    def inject(stage, k, steady_ns):
        if k % 7 != 3:
            return
        before = stage.configuration, stage.rejected_samples
        for _ in range(6):  # a burst: never a consistent new time base
            assert stage.observe(2147483647 * 1_000_000_000, rogue, steady_ns) is None
        assert stage.observe(ns(k * T) - T_NS // 2, rogue, steady_ns) is None  # before the last one
        assert stage.observe(ns(k * T) + 1, short, steady_ns) is None
        assert stage.observe(ns(k * T) + 2, nan, steady_ns) is None
        assert np.array_equal(stage.configuration, before[0])
        assert stage.rejected_samples == before[1] + 9

    stage, commands = run_announced_walk(talos, True, inject, steady=True)
    assert [rows(c) for c in commands] == [rows(c) for c in clean]
    assert stage.rejected_samples > 9

    log = ListLog()
    stage = WholeBodyStage(talos, log=log)
    stage.observe(ns(0.0), rogue, 0)
    for _ in range(3):
        assert stage.observe(2147483647 * 1_000_000_000, rogue, 20_000_000) is None
    assert stage.observe(ns(0.02), rogue, 20_000_000).status == OK
    warnings = [msg for level, msg in log.lines if level == "warning"]
    assert len(warnings) == 1 and "2147483647" in warnings[0] and "ahead of the steady clock" in warnings[0]
    assert log.count("info", "accepted again") == 1  # and the recovery


def test_backward_stamps_of_a_restarted_clock_re_anchor_and_restart_from_the_measurement(talos):
    """A simulator restarted with its clock from 0 (the robot elsewhere): its first samples are before the
    last accepted one and rejected; once resync_samples of them are consistent the stage re-anchors on them
    and restarts as after an outage: the measured posture held, where the robot now is."""
    log = ListLog()
    stage = WholeBodyStage(talos, WholeBodyStage.Parameters(stamps=StampGuardParameters(resync_samples=5)),
                           log)
    q = talos.reference_configuration()
    here = sample_of(talos, q, base=True)
    steady = 0
    for k in range(10):
        steady = k * 10_000_000
        stage.observe(ns(k * 0.01), here, steady)
    standing = Timeline(FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0)), [])
    stage.set_plan(plan(standing, walking=False))
    moved = sample_of(talos, q, base=True, offset=(-0.7, 0.1, 0.0))
    before = stage.configuration
    for k in range(4):
        steady += 10_000_000
        assert stage.observe(10_000_000 * (k + 1), moved, steady) is None  # rejected: not later
        assert np.array_equal(stage.configuration, before)
    steady += 10_000_000
    held = stage.observe(50_000_000, moved, steady)  # the 5th consistent one: a new time base
    assert held is not None and held.status == OK and held.source == "sensor"
    np.testing.assert_allclose(stage.configuration[:3], q[:3] + [-0.7, 0.1, 0.0], atol=1e-12)
    np.testing.assert_allclose(held.positions[0], talos.actuated_positions(q), atol=1e-6)
    assert log.count("warning", "re-anchored") == 1 and log.count("info", "accepted again") == 1
    steady += 20_000_000
    assert stage.observe(70_000_000, moved, steady).status == OK  # ticking on the new time base


def test_samples_resuming_after_an_outage_restart_from_the_measured_configuration(talos):
    """A simulator restarted while standing puts the robot back elsewhere (0.7 m behind, 0.1 m left). The
    planner's first reference after the outage can come before this stage's first sample of it: skipped.
    That sample (stamps more than sensor_timeout apart) re-initialises the model from the measurement and
    holds it; the references that follow (CoM where the robot is, same plan) keep the robot standing where
    it is, not at the plan's feet, until a new plan."""
    q = talos.reference_configuration()
    soles = talos.foot_poses(q)
    left, right = (FootPose(tuple(soles[frame][0]), 0.0) for frame in (talos.left_foot_frame,
                                                                       talos.right_foot_frame))
    stage = WholeBodyStage(talos)
    stage.set_plan(plan(Timeline(left, right, []), walking=False))
    here, moved = np.zeros(3), np.array([-0.7, 0.1, 0.0])
    commands = []

    def tick(t, offset):
        commands.append(stage.observe(ns(t), sample_of(talos, q, base=True, offset=offset)))
        if round(t * 100) % 2 == 0:
            commands.append(stage.on_reference(fixed_reference(ns(t), talos.com(q) + offset)))

    for k in range(40):  # 0.4 s standing on references
        tick(0.01 * k, here)
    commands = [c for c in commands if c is not None]
    assert {c.status for c in commands} == {OK} and stage.tick_source == "reference"
    t = 0.4 + 0.8  # the outage
    assert stage.on_reference(fixed_reference(ns(t), talos.com(q) + moved)) is None  # saw its end first
    held = stage.observe(ns(t), sample_of(talos, q, base=True, offset=moved))
    np.testing.assert_allclose(stage.configuration[:3], q[:3] + moved, atol=1e-12)
    measured = talos.actuated_positions(q)
    np.testing.assert_allclose(held.positions[0], measured, atol=1e-6)  # the measured posture held
    commands = []
    for k in range(1, 40):
        tick(t + 0.01 * k, moved)
    commands = [c for c in commands if c is not None]
    assert {c.status for c in commands} == {OK} and stage.tick_source == "reference"
    np.testing.assert_allclose(commands[-1].positions[0], measured, atol=1e-3)
    np.testing.assert_allclose(stage.configuration[:3], q[:3] + moved, atol=2e-3)


@pytest.mark.parametrize("bad", ["nan", "order", "malformed"])
def test_a_bad_reference_holds_the_last_command_with_bad_reference(talos, bad):
    stage = WholeBodyStage(talos)
    q = talos.reference_configuration()
    first = stage.observe(ns(0.0), sample_of(talos, q))
    com = talos.com(q)
    if bad == "nan":
        ref = fixed_reference(ns(0.02), [math.nan, 0.0, COM_HEIGHT])
    elif bad == "order":
        ref = CoMReference(ns(0.02), 0, (2 * T, 2 * T), [com, com], np.zeros((2, 3)), np.zeros((2, 3)))
    else:
        ref = BadReference(ns(0.02), 0, "reference has 1 times and 1 CoM positions")
    hold = stage.on_reference(ref)
    assert hold.status == WholeBodyStatus.BAD_REFERENCE and hold.held and hold.reason
    assert hold.positions.tolist() == [first.positions[0].tolist()] * 2 and not hold.velocities.any()
    assert stage.on_reference(fixed_reference(ns(0.04), com)).status == OK  # the next good one is solved


def test_an_unreachable_com_holds_the_last_command_with_ik_failed(talos):
    stage = WholeBodyStage(talos)
    q = talos.reference_configuration()
    first = stage.observe(ns(0.0), sample_of(talos, q))
    hold = stage.on_reference(fixed_reference(ns(0.02), talos.com(q) + [0.0, 0.0, 0.5]))
    assert hold.status == WholeBodyStatus.IK_FAILED and "IK solution" in hold.reason
    assert hold.positions.tolist() == [first.positions[0].tolist()] * 2
    assert stage.on_reference(fixed_reference(ns(0.04), talos.com(q))).status == OK


def test_parameters_and_joint_names_are_checked(talos, solo):
    with pytest.raises(ParameterError, match="control_period"):
        WholeBodyStage.Parameters(control_period=0.0)
    with pytest.raises(ParameterError, match="safe_stop_speedup"):
        WholeBodyStage.Parameters(safe_stop_speedup=0.5)
    with pytest.raises(ParameterError, match="safe_stop_shift_duration"):
        WholeBodyStage.Parameters(safe_stop_shift_duration=0.0)
    with pytest.raises(ParameterError, match="safe_stop_stance_radius"):
        WholeBodyStage.Parameters(safe_stop_stance_radius=-0.01)
    with pytest.raises(ParameterError, match="max_settle_distance"):
        WholeBodyStage.Parameters(max_settle_distance=0.0)
    with pytest.raises(ParameterError, match="contact_force_threshold"):
        WholeBodyStage.Parameters(contact_force_threshold=-1.0)
    with pytest.raises(JointNotFound):
        WholeBodyStage(talos, WholeBodyStage.Parameters(joint_names=("no_such_joint",)))
    with pytest.raises(ParameterError, match="contact_prefixes"):
        WholeBodyStage(solo, WholeBodyStage.Parameters(contact_prefixes=("FL",)))
    stage = WholeBodyStage(solo)
    assert not stage.set_plan(plan(walk_timeline()))  # a quadruped ignores plans and stands
    assert stage.plan_id is None


# ------------------------------------------------------------------ safe stop (issue 17)
def walk_on_references(stage, timeline, t_stop, sample):
    """The references of ``timeline`` at every tick before plan time ``t_stop`` [s], each after its sample;
    the commands."""
    commands = []
    for k in range(int(round(t_stop / T))):
        assert stage.observe(ns(k * T), sample) is None
        commands.append(stage.on_reference(reference(timeline, k * T)))
    return commands


def sensor_ticks(stage, t_start, t_end, sample):
    """Samples every T over [t_start, t_end) and no references: {time [s]: (command, configuration)}."""
    ticks = {}
    for k in range(int(round(t_start / T)), int(round(t_end / T))):
        command = stage.observe(ns(k * T), sample)
        if command is not None:
            ticks[round(k * T, 6)] = (command, stage.configuration)
    return ticks


def soles(talos, q):
    poses = talos.foot_poses(q)
    return {foot: poses[frame] for foot, frame in ((Foot.LEFT, talos.left_foot_frame),
                                                   (Foot.RIGHT, talos.right_foot_frame))}


def test_references_stopping_mid_swing_land_the_foot_on_time_then_settle_in_double_support(talos):
    """Issue 17: the planner dies while the left foot swings. Instead of freezing mid-swing (the former
    REFERENCE_STALE hold), the stage finishes the step on the timeline (the foot lands at its step at the
    planned touchdown), moves the CoM to the middle of the soles on a reference of its own (SAFE_STOP
    commands), then stands on the landed feet; the stopped plan's references are no longer followed."""
    timeline = walk_timeline()
    stage = WholeBodyStage(talos)
    sample = sample_of(talos, talos.reference_configuration())
    stage.observe(ns(-T), sample)
    stage.set_plan(plan(timeline))
    single = timeline.phases[1]  # the left foot swings over [0.6, 1.2) to step 1
    step = timeline.steps[0]
    cut = single.t_start + 0.3
    assert all(c.status == OK for c in walk_on_references(stage, timeline, cut, sample))
    ticks = sensor_ticks(stage, cut, cut + 0.06, sample)
    assert not ticks  # within reference_timeout: nothing yet
    # During the stop, a late reference is ignored and a new plan waits (the robot lands first).
    ticks = sensor_ticks(stage, cut + 0.06, cut + 0.1, sample)
    assert [c.status for c, _ in ticks.values()] == [WholeBodyStatus.SAFE_STOP]
    assert stage.on_reference(reference(timeline, cut + 0.08)) is None
    elsewhere = Timeline(FootPose((0.5, 0.085, 0.0)), FootPose((0.5, -0.085, 0.0)), ())
    stage.set_plan(plan(elsewhere, plan_id=2, walking=False))
    assert stage.plan_id == 1 and stage.walking and stage.safe_stop is not None
    ticks.update(sensor_ticks(stage, cut + 0.1, cut + 2.5, sample))
    commands = [c for c, _ in ticks.values()]
    statuses = [c.status for c in commands]
    stops = statuses.count(WholeBodyStatus.SAFE_STOP)
    assert stops > 10 and statuses == [WholeBodyStatus.SAFE_STOP] * stops + [OK] * (len(statuses) - stops)
    assert all(c.source == "sensor" and not c.held for c in commands)
    assert "safe stop, landing step 1 at t = 1.200 s (on time)" in commands[0].reason
    # The swing foot is above the ground until the planned touchdown, then on its step; the stance foot stays.
    stance = soles(talos, ticks[round(cut + 0.08, 6)][1])[Foot.RIGHT][0]
    for t, (_, q) in ticks.items():
        feet = soles(talos, q)
        np.testing.assert_allclose(feet[Foot.RIGHT][0], stance, atol=1e-4)
        left, rotation = feet[Foot.LEFT]
        if t + T < single.t_end - 0.1:
            assert left[2] > 0.01, t
        if t + T >= single.t_end:
            np.testing.assert_allclose(left, step.position, atol=1e-4, err_msg=str(t))
            yaw = math.atan2(rotation[1, 0], rotation[0, 0])
            assert abs(math.remainder(yaw - step.yaw, 2 * math.pi)) < 1e-3
    # Settled: the CoM over the middle of the soles, standing on the landed feet; the plan received during
    # the stop is installed, its feet ignored (the robot stands where it landed).
    q = stage.configuration
    feet = soles(talos, q)
    middle = 0.5 * (feet[Foot.LEFT][0] + feet[Foot.RIGHT][0])
    np.testing.assert_allclose(talos.com(q)[:2], middle[:2], atol=1e-3)
    assert stage.safe_stop is None and stage.stopped_plan_id == 1 and not stage.walking
    assert stage.plan_id == 2 and stage.safe_stops == 1
    np.testing.assert_allclose(commands[-1].positions[0], commands[-2].positions[0], atol=1e-9)  # held
    # A new walk from there is followed again.
    again = Timeline(FootPose(tuple(feet[Foot.LEFT][0]), step.yaw), FootPose(tuple(stance)),
                     [Step(1, Foot.RIGHT, 0.8, (0.2, -0.085, 0.0), yaw=0.1)])
    later = ns(cut + 2.5)
    stage.set_plan(WalkPlan(3, True, later, again))
    assert stage.observe(later, sample) is None  # references for the walk are on their way
    reply = stage.on_reference(fixed_reference(later, talos.com(q), plan_id=3))
    assert reply.status == OK and reply.source == "reference" and stage.plan_id == 3 and stage.walking


def test_references_stopping_in_double_support_keep_the_feet_and_move_the_com_between_them(talos):
    timeline = walk_timeline()
    stage = WholeBodyStage(talos)
    sample = sample_of(talos, talos.reference_configuration())
    stage.observe(ns(-T), sample)
    stage.set_plan(plan(timeline))
    double = timeline.phases[2]  # after step 1: [1.2, 1.4)
    walk_on_references(stage, timeline, double.t_start + 0.04, sample)
    before = soles(talos, stage.configuration)
    ticks = sensor_ticks(stage, double.t_start + 0.04, double.t_start + 2.5, sample)
    commands = [c for c, _ in ticks.values()]
    assert commands[0].status == WholeBodyStatus.SAFE_STOP and "no step in progress" in commands[0].reason
    assert commands[-1].status == OK
    for _, q in ticks.values():
        for foot, (position, _) in soles(talos, q).items():
            np.testing.assert_allclose(position, before[foot][0], atol=2e-4)
    q = stage.configuration
    middle = 0.5 * (before[Foot.LEFT][0] + before[Foot.RIGHT][0])
    np.testing.assert_allclose(talos.com(q)[:2], middle[:2], atol=1e-3)
    assert stage.on_reference(reference(timeline, double.t_start + 2.5)) is None  # the stopped plan


def test_a_foot_on_the_ground_far_from_the_stand_plan_stays_where_it_is(talos):
    """After a fault a Stand plan may put a foot where it never went: a fresh stage ticking on references
    keeps a foot that is on the plan's ground farther than max_settle_distance from it where it is (the
    planner stands at that measured sole too); a nearer one settles onto the plan's pose."""
    q = talos.reference_configuration()
    feet = soles(talos, q)
    left, right = (FootPose(tuple(feet[f][0])) for f in (Foot.LEFT, Foot.RIGHT))
    for shift, stays in ((0.4, True), (0.05, False)):
        stage = WholeBodyStage(talos)
        ahead = FootPose(tuple(np.add(left.position, (shift, 0.0, 0.0))))
        stage.set_plan(plan(Timeline(ahead, right, ()), walking=False))
        sample = sample_of(talos, q)
        assert stage.observe(ns(0.0), sample).source == "sensor"
        commands = [stage.on_reference(fixed_reference(ns(k * T), talos.com(q))) for k in range(1, 60)]
        assert all(c.status == OK for c in commands)
        moved = np.linalg.norm(soles(talos, stage.configuration)[Foot.LEFT][0] - feet[Foot.LEFT][0])
        assert moved < 1e-3 if stays else abs(moved - shift) < 1e-3, (shift, moved)


# ------------------------------------------------------------------ gestures
SOLO_FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


def standing_solo(solo, forces=None):
    """A Solo-12 stage holding its measured posture, and the sample (contact sensors named after the feet
    when ``forces`` are given)."""
    stage = WholeBodyStage(solo)
    q = solo.reference_configuration()
    sample = (sample_of(solo, q, base=True) if forces is None else
              sample_of(solo, q, base=True, contacts=SOLO_FEET, forces=forces))
    assert stage.observe(ns(0.0), sample).status == OK
    return stage, sample


def test_gestures_of_one_tick_compose_in_the_seed_order_whatever_their_call_order(solo):
    """Issue 16: RZ 0.35 then TX 0.04 in one tick, applied as they came, left the body 1.4 cm off the
    seed's Rz Ry Rx Tz Ty Tx composition."""
    gestures = [(GestureDof.RZ, 0.35), (GestureDof.TX, 0.04)]
    expected_body = None
    commands = []
    for order in (gestures, gestures[::-1]):
        stage, sample = standing_solo(solo)
        body = stage._standing_targets().gestures.body_pose_in_world
        before = stage.configuration
        for dof, value in order:
            reply = stage.exec_gesture(dof, value)
            assert reply.success and reply.body_moved and "queued" in reply.message
        assert np.array_equal(stage.configuration, before)  # nothing moves before the next tick
        command = stage.observe(ns(0.02), sample)
        assert command.status == OK
        moved = stage._standing_targets().gestures.body_pose_in_world
        expected_body = body @ inverse_transform(gesture_transform(dict(gestures)))
        np.testing.assert_allclose(moved, expected_body, atol=1e-12)
        commands.append(command.positions.tolist())
    assert commands[0] == commands[1]
    # the base follows the body: yawed by -0.35 rad after a -0.04 m x translation in the body frame
    np.testing.assert_allclose(stage.configuration[0:2], expected_body[0:2, 3], atol=1e-4)


def test_a_repeated_dof_in_one_tick_adds_up(solo):
    stage, sample = standing_solo(solo)
    body = stage._standing_targets().gestures.body_pose_in_world
    assert stage.exec_gesture(GestureDof.TY, 0.01).success
    assert stage.exec_gesture(GestureDof.TY, 0.02).success
    stage.observe(ns(0.02), sample)
    np.testing.assert_allclose(stage._standing_targets().gestures.body_pose_in_world[1, 3], body[1, 3] - 0.03,
                               atol=1e-12)


def test_legs_off_the_ground_by_their_contact_sensors_do_not_carry_the_body(solo):
    """Seed 003: if the legs with effect do not properly support the body, only the legs move. Two feet
    unloaded (0 N on their sensors) leave 2 support legs < min_support_legs 3."""
    stage, sample = standing_solo(solo, forces=(6.0, 6.0, 0.0, 0.0))
    assert stage.legs_in_contact() == (True, True, False, False)
    gestures = stage._standing_targets().gestures
    body = gestures.body_pose_in_world
    leg = gestures.leg_pose_in_body("FL_FOOT")
    reply = stage.exec_gesture(GestureDof.RZ, 0.1)
    assert reply.success and not reply.body_moved and "2 support legs" in reply.message
    assert stage.observe(ns(0.02), sample).status == OK
    np.testing.assert_array_equal(gestures.body_pose_in_world, body)  # the body stays
    np.testing.assert_allclose(gestures.leg_pose_in_body("FL_FOOT"),
                               gesture_transform({GestureDof.RZ: 0.1}) @ leg, atol=1e-12)
    # all four loaded: the body moves
    loaded = sample_of(solo, solo.reference_configuration(), base=True, contacts=SOLO_FEET,
                       forces=(6.0, 6.0, 6.0, 6.0))
    stage.observe(ns(0.03), loaded)
    assert stage.exec_gesture(GestureDof.RZ, 0.1).body_moved
    stage.observe(ns(0.04), loaded)
    assert not np.allclose(gestures.body_pose_in_world, body)


def test_contact_sensors_are_assigned_to_legs_by_prefix_and_a_leg_without_sensors_touches(talos):
    stage = WholeBodyStage(talos, WholeBodyStage.Parameters(contact_force_threshold=5.0))
    assert stage.legs_in_contact() == (True, True)  # no sample: assumed
    q = talos.reference_configuration()
    corners = ("fl", "fr", "bl", "br")
    names = tuple(f"{foot}_{c}" for foot in ("left_foot", "right_foot") for c in corners)  # the simulators'
    stage.observe(ns(0.0), sample_of(talos, q, contacts=names, forces=[200.0] * 4 + [1.0] * 4))
    assert stage.legs_in_contact() == (True, False)  # 4 N on the right sole < 5 N
    stage.observe(ns(0.01), sample_of(talos, q, contacts=names[:4], forces=[0.0] * 4))
    assert stage.legs_in_contact() == (False, True)  # no right sensors: assumed touching
    stage.observe(ns(0.02), sample_of(talos, q))
    assert stage.legs_in_contact() == (True, True)


def test_gesture_requests_are_refused_without_state_while_walking_and_for_bad_values(talos, solo):
    stage = WholeBodyStage(solo)
    assert "no state" in stage.exec_gesture(GestureDof.RZ, 0.1).message
    stage.observe(ns(0.0), sample_of(solo, solo.reference_configuration(), base=True))
    unknown = stage.exec_gesture(9, 0.1)
    assert not unknown.success and "dof" in unknown.message
    assert not stage.exec_gesture(GestureDof.TX, math.inf).success
    assert not stage.set_gesture_effect(4, True).success
    assert stage.set_gesture_effect(3, False).success
    stage._standing = None
    reply = stage.exec_gesture(GestureDof.RZ, 0.1)
    assert reply.success and stage._standing.gestures.affected_legs == SOLO_FEET[:3]  # the selection holds
    walking = WholeBodyStage(talos)
    timeline = walk_timeline()
    walking.observe(ns(-1.0), sample_of(talos, talos.reference_configuration()))
    walking.set_plan(plan(timeline))
    walking.on_reference(reference(timeline, 0.0))
    refused = walking.exec_gesture(GestureDof.RZ, 0.1)
    assert not refused.success and "walk" in refused.message
    bad_leg = walking.set_gesture_effect(2, False)
    assert not bad_leg.success and "left_sole_link" in bad_leg.message


def test_reset_forgets_everything(talos):
    stage = WholeBodyStage(talos)
    stage.observe(ns(0.0), sample_of(talos, talos.reference_configuration()))
    stage.set_plan(plan(walk_timeline()))
    stage.reset()
    assert not stage.initialised and stage.plan_id is None and stage.resyncs == 0
    assert stage.observe(ns(-5.0), sample_of(talos, talos.reference_configuration())).status == OK
