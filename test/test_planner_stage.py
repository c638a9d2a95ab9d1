"""Planner stage (walk_mpc.core.control.planner_stage): the mpc_planner's decisions, without ROS."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.control.planner_stage import PlannerStage, PlannerStageParameters, PlannerTick
from walk_mpc.core.control.types import PlannerStatus, WalkPlan
from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.mpc.problem import PlanStatus
from walk_mpc.core.sensors import SensorSample
from walk_mpc.core.walk.footsteps import walk_forward
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

S0 = 100_000_000_000  # [ns] stamp of the first sample and of t = 0 of the plans
HW = 10_000_000  # [ns] hardware period
ROGUE = 2_147_483_647 * 1_000_000_000  # [ns] the stamp of issue 16


@pytest.fixture(scope="module")
def talos():
    return RobotModel(RobotModel.Parameters(robot="talos_reduced"))


@pytest.fixture(scope="module")
def robot(talos):
    """The reference posture: joint names and positions, base pose, soles, CoM."""
    q = talos.reference_configuration()
    joints = talos.joint_positions(q)
    poses = talos.foot_poses(q)
    frames = (talos.left_foot_frame, talos.right_foot_frame)
    soles = [FootPose(tuple(poses[frame][0]), 0.0) for frame in frames]
    return dataclasses.make_dataclass("Posture", ["names", "positions", "q", "left", "right", "com"])(
        tuple(joints), np.array(list(joints.values())), q, soles[0], soles[1], talos.com(q))


def sample(robot, shift=(0.0, 0.0, 0.0), base=True, names=None, positions=None) -> SensorSample:
    """A sample of the reference posture, the robot translated by ``shift`` [m]."""
    names = robot.names if names is None else names
    positions = robot.positions if positions is None else positions
    return SensorSample(time=0.0, joint_names=names, joint_pos=positions, joint_vel=np.zeros(len(names)),
                        motor_names=(), motor_pos=(), motor_vel=(), motor_torque=(), base_estimate_valid=base,
                        base_position=robot.q[0:3] + np.asarray(shift), base_orientation_xyzw=robot.q[3:7])


def walk(robot, shift=(0.0, 0.0, 0.0)) -> Timeline:
    """A 4-step forward walk of 10 cm steps from the reference soles translated by ``shift``."""
    left, right = (FootPose(tuple(np.add(f.position, shift)), f.yaw) for f in (robot.left, robot.right))
    steps = walk_forward(left, right, 0.3, step_length=0.1, width=left.position[1] - right.position[1])
    return Timeline(left, right, steps, GaitTiming())


def stage_of(talos, **changes) -> PlannerStage:
    return PlannerStage(talos, PlannerStageParameters(**changes))


class Stream:
    """Samples every 10 ms into a stage, with a steady clock that advances as the stamps (a node's view)."""

    def __init__(self, stage: PlannerStage, robot, stamp_ns: int = S0, steady: bool = True) -> None:
        self.stage, self.robot, self.stamp_ns, self.steady = stage, robot, stamp_ns, steady
        self.steady_ns = 5_000_000_000
        self.ticks: list[PlannerTick] = []  # the ticks, in order

    def send(self, sample_=None, stamp_ns=None, advance=True) -> PlannerTick:
        """One sample at ``stamp_ns`` (default: the stream's next stamp); ``advance`` moves the stream on."""
        stamp = self.stamp_ns if stamp_ns is None else stamp_ns
        tick = self.stage.observe(stamp, sample(self.robot) if sample_ is None else sample_,
                                  self.steady_ns if self.steady else None)
        if tick.ticked:
            self.ticks.append(tick)
        if advance:
            self.stamp_ns += HW
            self.steady_ns += HW
        return tick

    def run(self, count: int, sample_=None) -> list[PlannerTick]:
        return [self.send(sample_) for _ in range(count)]

    def gap(self, ns: int) -> None:
        """No samples for ``ns`` (stamps and steady clock alike)."""
        self.stamp_ns += ns
        self.steady_ns += ns


def outputs_equal(a: list[PlannerTick], b: list[PlannerTick]) -> None:
    assert len(a) == len(b)
    for k, (x, y) in enumerate(zip(a, b)):
        assert (x.status, x.reference.stamp_ns, x.reference.plan_id) == \
               (y.status, y.reference.stamp_ns, y.reference.plan_id), k
        for name in ("com_position", "com_velocity", "zmp"):
            np.testing.assert_array_equal(getattr(x.reference, name), getattr(y.reference, name),
                                          err_msg=str(k))


def state_of(stage: PlannerStage) -> tuple:
    """What a rejected sample must not change (objects compared by identity where they are objects)."""
    return (stage.ticks, stage.plan_id, stage.origin_ns, id(stage.last_output), id(stage.timeline),
            id(stage.planner.prepared_output), stage.prepared_ticks, stage.corrections)


# ---------------------------------------------------------------------- parameters
@pytest.mark.parametrize(("changes", "name"), [
    ({"hardware_period": 0.015}, "hardware_period"),
    ({"hardware_period": 0.0}, "hardware_period"),
    ({"sensor_timeout": -1.0}, "sensor_timeout"),
    ({"prepare_ahead": "yes"}, "prepare_ahead"),
    ({"feedback_enabled": 1}, "feedback_enabled"),
    ({"stamps": {"max_lead": 1.0}}, "stamps"),
    ({"max_com_distance": 0.0}, "max_com_distance"),
    ({"resync_distance": 0.6}, "resync_distance"),  # not less than max_com_distance
    ({"resync_time": -0.1}, "resync_time"),
])
def test_bad_parameters_name_the_value_and_the_expectation(changes, name):
    with pytest.raises(ParameterError) as error:
        PlannerStageParameters(**changes)
    assert error.value.name == name and repr(changes[name]) in str(error.value)


def test_a_robot_without_soles_is_refused(talos):
    with pytest.raises(ParameterError, match="biped"):
        PlannerStage(RobotModel(RobotModel.Parameters(robot="solo12")))
    with pytest.raises(ParameterError, match="PlannerStageParameters"):
        PlannerStage(talos, {"hardware_period": 0.01})


# ---------------------------------------------------------------------- tick rule
def test_ticks_follow_the_sample_stamps_not_their_count(talos, robot):
    stage = stage_of(talos)
    ticked = []
    for ms in [0, 10, 20, 30, 50, 60, 70, 75, 80, 90, 100]:  # a dropped sample, a jittered one
        tick = stage.observe(S0 + ms * 1_000_000, sample(robot))
        if tick.ticked:
            ticked.append(ms)
            assert tick.status is PlannerStatus.OK and tick.reference.stamp_ns == S0 + ms * 1_000_000
        else:
            assert tick.reference is None and tick.output is None and tick.rejected == ""
    assert ticked == [0, 20, 50, 70, 90] and stage.ticks == 5 and stage.skipped_samples == 0


def test_a_control_period_of_one_sample_ticks_on_every_sample(talos, robot):
    planner = dataclasses.replace(PlannerStageParameters().planner, control_period=0.005)
    stage = stage_of(talos, planner=planner, hardware_period=0.005)
    ticks = [stage.observe(S0 + k * 5_000_000, sample(robot)) for k in range(6)]
    assert all(t.ticked and t.ahead is None for t in ticks)
    assert [t.reference.times for t in ticks] == [(0.005, 0.01)] * 6


def test_before_any_plan_the_robot_stands_at_the_measured_feet(talos, robot):
    stage = stage_of(talos)
    shift = np.array([0.3, -0.2, 0.0])
    tick = Stream(stage, robot).send(sample(robot, shift))
    assert stage.plan_id == 0 and tick.reference.plan_id == 0
    first = stage.timeline.phases[0]
    assert stage.timeline.steps == () and stage.timeline.t0 == 0.0 and stage.origin_ns == S0
    for sole, planned in ((first.left, robot.left), (first.right, robot.right)):
        np.testing.assert_allclose(sole.position[:2], np.add(planned.position[:2], shift[:2]), atol=1e-9)
    np.testing.assert_allclose(tick.output.initial_state[0], robot.com[:2] + shift[:2], atol=1e-9)
    np.testing.assert_array_equal(tick.output.initial_state[1:], np.zeros((2, 2)))


# ---------------------------------------------------------------------- plans
def test_a_plan_is_installed_at_the_next_tick_on_the_planners_clock(talos, robot):
    stage = stage_of(talos)
    stream = Stream(stage, robot, stamp_ns=S0 - 30 * HW)  # origin 0.3 s before t = 0 of the plan
    stream.run(5)
    timeline = walk(robot)
    assert stage.set_plan(WalkPlan(7, True, S0, timeline))
    assert stage.plan_id == 0  # received, not yet installed
    before_tick = stream.send()  # the sample before a tick: nothing prepared while a plan waits
    assert not before_tick.ticked and before_tick.ahead is None
    tick = stream.send()
    assert tick.ticked and stage.plan_id == 7 and tick.reference.plan_id == 7
    assert stage.timeline.t0 == pytest.approx(0.3, abs=1e-12) and stage.timeline.steps == timeline.steps
    assert stage.timeline is stage.corrector.timeline


def test_a_standing_plan_places_the_feet_only_and_the_com_stays_continuous(talos, robot):
    stage = stage_of(talos, feedback_enabled=False)
    stream = Stream(stage, robot)
    stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    stream.run(40)
    planned = stage.planner.planned_state((stream.stamp_ns - S0) / 1e9)  # at the next sample, a tick
    stage.set_plan(WalkPlan(2, False, stream.stamp_ns, walk(robot)))
    assert stream.send().ticked
    assert stage.plan_id == 2 and stage.timeline.steps == ()
    np.testing.assert_allclose(stream.ticks[-1].output.initial_state, planned, atol=1e-12)


def test_what_is_not_a_plan_is_refused_and_the_plan_kept(talos, robot, caplog):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    stream.run(4)
    with caplog.at_level(logging.ERROR, logger="walk_mpc.planner"):
        assert not stage.set_plan(walk(robot))  # a Timeline, not a WalkPlan
    assert "not a WalkPlan" in caplog.text
    stream.run(2)
    assert stage.plan_id == 1 and len(stage.timeline.steps) == 4


def test_the_same_plan_id_again_changes_nothing(talos, robot):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    stream.run(3)
    timeline = stage.timeline
    stage.set_plan(WalkPlan(1, True, S0 + 10 * HW, walk(robot, (0.1, 0.0, 0.0))))
    stream.run(2)
    assert stage.timeline is timeline


# ---------------------------------------------------------------------- prepared ahead
def test_the_sample_before_a_tick_announces_it_and_a_confirming_tick_returns_that_reference(talos, robot):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    stream.send()
    for _ in range(30):
        announce = stream.send()
        assert not announce.ticked and announce.ahead.stamp_ns == stream.stamp_ns  # the next sample's stamp
        tick = stream.send()
        if stage.planner.last_step_prepared:
            assert tick.reference is announce.ahead
        else:  # feedback beyond the threshold, or a correction at a lift-off: solved again
            assert tick.reference is not announce.ahead and tick.reference.stamp_ns == announce.ahead.stamp_ns
    assert 0 < stage.prepared_ticks < stage.ticks


def test_prepared_ticks_give_exactly_the_unprepared_references(talos, robot):
    runs = []
    for prepare in (True, False):
        stage = stage_of(talos, prepare_ahead=prepare)
        stream = Stream(stage, robot)
        stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
        for k in range(300):
            stream.send(sample(robot, (0.0, 0.01 if k % 40 in (20, 21) else 0.0, 0.0)))
        runs.append((stream.ticks, stage.prepared_ticks))
    outputs_equal(runs[0][0], runs[1][0])
    assert runs[0][1] > 0 and runs[1][1] == 0


# ---------------------------------------------------------------------- outages and time base
def test_samples_resuming_after_an_outage_restart_standing_at_the_measured_feet(talos, robot):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    stream.run(60)
    stream.gap(15 * HW)  # dropped samples, shorter than sensor_timeout: the walk goes on
    tick = stream.send()
    assert tick.ticked and len(stage.timeline.steps) == 4 and tick.output.initial_state[1].any()
    stream.gap(80 * HW)  # an outage; the robot is elsewhere
    shift = np.array([-0.7, 0.1, 0.0])
    tick = stream.send(sample(robot, shift))
    assert tick.ticked and stage.plan_id == 1 and stage.timeline.steps == ()
    first = stage.timeline.phases[0]
    np.testing.assert_allclose(first.left.position[:2], np.add(robot.left.position[:2], shift[:2]), atol=1e-9)
    np.testing.assert_allclose(tick.output.initial_state[0], robot.com[:2] + shift[:2], atol=1e-9)
    np.testing.assert_array_equal(tick.output.initial_state[1:], np.zeros((2, 2)))
    later = stream.run(60, sample(robot, shift))
    assert stage.timeline.steps == () and all(t.status is PlannerStatus.OK for t in later if t.ticked)


def test_a_plan_received_during_an_outage_that_walks_is_followed_from_the_measured_com(talos, robot):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    stream.run(60)
    stream.gap(50 * HW)
    shift = (0.2, 0.1, 0.0)
    stage.set_plan(WalkPlan(2, True, stream.stamp_ns, walk(robot, shift)))
    tick = stream.send(sample(robot, shift))
    assert stage.plan_id == 2 and len(stage.timeline.steps) == 4
    np.testing.assert_allclose(tick.output.initial_state[0], robot.com[:2] + shift[:2], atol=1e-9)
    np.testing.assert_array_equal(tick.output.initial_state[1:], np.zeros((2, 2)))


def test_a_rogue_stamp_and_malformed_samples_mid_walk_are_rejected_and_change_nothing(talos, robot):
    """Issue 16: one sample stamped 2147483647 s wedged the graph. Here it and samples the stage cannot
    use come in the middle of a walk: each is rejected, and the walk gives exactly the references of a
    run without them."""
    clean, dirty = stage_of(talos), stage_of(talos)
    streams = [Stream(clean, robot), Stream(dirty, robot)]
    for stage in (clean, dirty):
        stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    missing = sample(robot, names=robot.names[1:], positions=robot.positions[1:])
    short = sample(robot)
    object.__setattr__(short, "joint_pos", short.joint_pos[:-1])  # arrays that no longer match their names
    bad = {100: sample(robot), 101: missing, 150: short, 151: sample(robot, base=True)}
    for k in range(260):
        streams[0].send()
        if k in bad:
            stream = streams[1]
            stamp = ROGUE if k in (100, 151) else stream.stamp_ns + HW // 2
            before = state_of(dirty)
            tick = stream.send(bad[k], stamp_ns=stamp, advance=False)
            assert not tick.ticked and tick.ahead is None and tick.rejected, k
            assert state_of(dirty) == before
        streams[1].send()
    assert dirty.skipped_samples == 4 and clean.skipped_samples == 0
    outputs_equal(streams[0].ticks, streams[1].ticks)
    assert dirty.prepared_ticks == clean.prepared_ticks and dirty.corrections == clean.corrections > 0


def test_nan_samples_are_skipped_without_changing_state(talos, robot):
    clean, dirty = stage_of(talos), stage_of(talos)
    streams = [Stream(clean, robot), Stream(dirty, robot)]
    nan = robot.positions.copy()
    nan[3] = np.nan
    tilted = sample(robot)
    object.__setattr__(tilted, "base_orientation_xyzw", np.array([0.0, 0.0, 0.0, 0.1]))
    for stage in (clean, dirty):
        stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    for k in range(120):
        streams[0].send()
        if k % 7 == 3:  # between two samples: either a prepare or a tick, had it been used
            bad = sample(robot, positions=nan) if k % 2 else tilted
            before = state_of(dirty)
            tick = streams[1].send(bad, stamp_ns=streams[1].stamp_ns + HW // 2, advance=False)
            assert tick == PlannerTick(rejected=tick.rejected) and tick.rejected
            assert state_of(dirty) == before
        streams[1].send()
    outputs_equal(streams[0].ticks, streams[1].ticks)
    assert dirty.prepared_ticks == clean.prepared_ticks
    assert dirty.skipped_samples == sum(k % 7 == 3 for k in range(120))


def test_a_bad_sample_due_to_tick_is_skipped_and_the_next_good_sample_ticks(talos, robot):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    nan = robot.positions.copy()
    nan[0] = np.inf
    assert stream.send().ticked
    stream.send()
    rejected = stream.send(sample(robot, positions=nan))
    assert not rejected.ticked and "finite" in rejected.rejected
    assert stream.send().ticked and stage.ticks == 2


def test_stamps_going_back_reanchor_and_restart_standing_at_the_measured_feet(talos, robot):
    """A simulator restarted with its clock at zero: the stamps go back by seconds while the steady clock
    goes on. The first samples are refused (not after the last accepted stamp); ``resync_samples``
    consistent ones are a new time base: the planner restarts there, standing at the measured feet."""
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    stream.run(150)
    last_output = stage.last_output
    stream.stamp_ns = S0 - 40 * HW  # the restarted clock, before the previous samples
    shift = np.array([-0.5, 0.2, 0.0])
    refused = stream.run(stage.params.stamps.resync_samples - 1, sample(robot, shift))
    assert all(not t.ticked and "not later" in t.rejected for t in refused)
    assert stage.last_output is last_output and len(stage.timeline.steps) == 4
    tick = stream.send(sample(robot, shift))
    assert tick.ticked and tick.status is PlannerStatus.OK and tick.reference.stamp_ns == stream.stamp_ns - HW
    assert stage.origin_ns == tick.reference.stamp_ns and stage.plan_id == 1 and stage.timeline.steps == ()
    first = stage.timeline.phases[0]
    np.testing.assert_allclose(first.right.position[:2], np.add(robot.right.position[:2], shift[:2]),
                               atol=1e-9)
    np.testing.assert_allclose(tick.output.initial_state[0], robot.com[:2] + shift[:2], atol=1e-9)
    np.testing.assert_array_equal(tick.output.initial_state[1:], np.zeros((2, 2)))
    after = stream.run(6, sample(robot, shift))
    assert [t.ticked for t in after] == [False, True] * 3  # the new time base ticks as before
    stage.set_plan(WalkPlan(2, True, stream.stamp_ns + 2 * HW, walk(robot, shift)))  # a plan on the new base
    stream.run(4, sample(robot, shift))
    assert stage.plan_id == 2 and stage.timeline.t0 == pytest.approx(0.09, abs=1e-12)  # from the re-anchor


def test_without_a_steady_clock_a_rogue_stamp_is_recovered_from_by_reanchoring(talos, robot):
    """In process (no steady clock) only the order of stamps is checked: a rogue stamp is accepted, the real
    samples after it are refused, and ``resync_samples`` of them re-anchor on the real time base."""
    stage = stage_of(talos)
    stream = Stream(stage, robot, steady=False)
    stream.run(10)
    assert stream.send(stamp_ns=ROGUE, advance=False).ticked  # accepted: an outage restart, far in the future
    refused = stream.run(stage.params.stamps.resync_samples - 1)
    assert all(not t.ticked and t.rejected for t in refused)
    tick = stream.send()
    assert tick.ticked and stage.origin_ns == tick.reference.stamp_ns and stage.timeline.steps == ()
    assert [t.ticked for t in stream.run(4)] == [False, True] * 2


# ---------------------------------------------------------------------- measurement, corrections, failures
def test_a_sample_without_base_estimate_is_placed_by_its_stance_sole(talos, robot):
    with_base, without = stage_of(talos), stage_of(talos)
    for stage in (with_base, without):
        stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    for k in range(0, 60, 2):
        a = with_base.observe(S0 + k * HW, sample(robot))
        b = without.observe(S0 + k * HW, sample(robot, base=False))
    # The reference soles are ~2 mrad from flat: the anchored CoM is within 2 mm of the estimated one.
    np.testing.assert_allclose(b.reference.com_position, a.reference.com_position, atol=2e-3)


def test_each_lift_off_corrects_the_support_foot_with_its_measured_pose(talos, robot):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    timeline = walk(robot)
    stage.set_plan(WalkPlan(1, True, S0, timeline))
    liftoff = next(p.t_start for p in timeline.phases if p.kind is PhaseKind.SINGLE and p.step_index == 2)
    stream.run(int(round((liftoff + 0.05) * 100)) + 1)
    assert stage.corrections == 2 and stage.planner.timeline is stage.corrector.timeline
    np.testing.assert_allclose(stage.timeline.steps[0].position, robot.left.position, atol=1e-9)
    assert stage.timeline.steps[1:] == timeline.steps[1:]
    disabled = stage_of(talos, support_correction=dataclasses.replace(
        PlannerStageParameters().support_correction, enabled=False))
    disabled.set_plan(WalkPlan(1, True, S0, timeline))
    Stream(disabled, robot).run(int(round((liftoff + 0.05) * 100)) + 1)
    assert disabled.corrections == 0 and disabled.timeline.steps == timeline.steps


def test_a_planner_failure_is_reported_and_consumes_the_tick(talos, robot, caplog):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    step = stage.planner.step
    outcomes = iter([None, PlanStatus.INFEASIBLE, PlanStatus.FAILED, "raise", None])

    def faulty_step(t, measured=None):
        outcome = next(outcomes)
        if outcome == "raise":
            raise InputError("t", t, "a planner that works")
        out = step(t, measured)
        return out if outcome is None else dataclasses.replace(out, status=outcome)

    stage.planner.step = faulty_step
    with caplog.at_level(logging.WARNING, logger="walk_mpc.planner"):
        stream.run(10)
    assert [t.status for t in stream.ticks] == [PlannerStatus.OK, PlannerStatus.INFEASIBLE,
                                                PlannerStatus.SOLVER_FAILED, PlannerStatus.PLANNER_ERROR,
                                                PlannerStatus.OK]
    failed = stream.ticks[3]
    assert failed.reference is None and failed.output is None and stage.ticks == 4
    assert "a planner that works" in caplog.text and "following the previous plan" in caplog.text


# ---------------------------------------------------------------------- references the robot does not follow
def farthest_from_the_stance_soles(stage: PlannerStage, tick: PlannerTick) -> float:
    """Horizontal distance [m] of the tick's farthest CoM or ZMP target to the nearest stance sole of its
    phase."""
    phase = stage.timeline.phase_at(tick.output.t)
    soles = [np.asarray(phase.foot(foot).position[:2]) for foot in phase.stance_feet]
    points = np.vstack([tick.reference.com_position[:, :2], tick.reference.zmp[:, :2]])
    return max(min(np.linalg.norm(p - sole) for sole in soles) for p in points)


def test_a_frozen_robot_never_gets_a_reference_out_of_reach_and_the_planner_re_syncs_on_it(
        talos, robot, caplog):
    """Issue 17: the ik killed mid-walk, the robot stands frozen while the planner walks on. With the CoM
    feedback of the graph (gain 0.1) the planned CoM diverged (74-114 m three seconds after the walk, 1e32 m
    forty seconds later). The planner now re-syncs on the measured CoM when it is not followed, so over 40 s
    of samples every reference stays within max_com_distance of the stance soles and near the robot."""
    planner = dataclasses.replace(PlannerStageParameters().planner, feedback_gain=0.1)
    stage = stage_of(talos, planner=planner)
    stream = Stream(stage, robot, steady=False)
    left, right = robot.left, robot.right
    steps = walk_forward(left, right, 1.0, step_length=0.2, width=left.position[1] - right.position[1],
                         duration=1.1)
    stage.set_plan(WalkPlan(1, True, S0, Timeline(left, right, steps, GaitTiming(0.6, 0.3, 0.6))))
    reach = []
    with caplog.at_level(logging.DEBUG, logger="walk_mpc.planner"):
        for _ in range(4000):  # 40 s of samples of the reference posture
            tick = stream.send()
            if tick.reference is not None:
                reach.append(farthest_from_the_stance_soles(stage, tick))
    assert len(stream.ticks) == len(reach) == 2000 and all(t.status is PlannerStatus.OK for t in stream.ticks)
    assert max(reach) <= 0.5
    farthest = max(np.max(np.linalg.norm(t.reference.com_position[:, :2] - robot.com[:2], axis=1))
                   for t in stream.ticks)
    assert farthest < 1.2  # the plan walks 1 m ahead of the frozen robot, no farther
    assert stage.resyncs >= 2
    warnings = [r for r in caplog.records if "re-synced" in r.getMessage() and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "not followed" in warnings[0].getMessage()  # logged once
    assert sum("re-synced" in r.getMessage() for r in caplog.records) == stage.resyncs


def test_a_reference_beyond_max_com_distance_is_not_given_and_the_next_tick_re_syncs(talos, robot, caplog):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    step = stage.planner.step
    far = iter([False, False, True, True, False, False])

    def drifting_step(t, measured=None):  # a planner whose state left the robot on two ticks
        out = step(t, measured)
        return dataclasses.replace(out, com_targets=out.com_targets + [0.6, 0.0, 0.0]) if next(far) else out

    stage.planner.step = drifting_step
    with caplog.at_level(logging.INFO, logger="walk_mpc.planner"):
        stream.run(12)
    assert [t.status for t in stream.ticks] == [PlannerStatus.OK] * 2 + [
        PlannerStatus.REFERENCE_OUT_OF_REACH] * 2 + [PlannerStatus.OK] * 2
    assert all(t.reference is None and t.output is None for t in stream.ticks[2:4])
    assert stage.ticks == 4 and stage.resyncs == 2  # the ticks after each: from the measured CoM, at rest
    np.testing.assert_allclose(stream.ticks[4].output.initial_state[0], robot.com[:2], atol=1e-12)
    np.testing.assert_array_equal(stream.ticks[4].output.initial_state[1:], np.zeros((2, 2)))
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "max_com_distance 0.5 m" in errors[0]  # the first of the series
    assert "within reach again" in caplog.text


def test_an_out_of_reach_solve_is_never_announced_ahead(talos, robot):
    stage = stage_of(talos, max_com_distance=0.05, resync_distance=0.01)  # the middle of the feet is 8.5 cm
    stream = Stream(stage, robot)
    ticks = stream.run(20)
    assert all(t.ahead is None and t.reference is None for t in ticks)
    assert [t.status for t in stream.ticks] == [PlannerStatus.REFERENCE_OUT_OF_REACH] * 10


def test_a_new_plan_far_from_the_measured_com_starts_from_it(talos, robot):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    stream.run(10)  # standing
    shift = (0.15, 0.0, 0.0)  # the robot was carried 15 cm forward (no outage)
    stream.run(2, sample(robot, shift))
    stage.set_plan(WalkPlan(1, True, stream.stamp_ns, walk(robot, shift)))
    tick = stream.send(sample(robot, shift))
    assert stage.plan_id == 1 and stage.resyncs == 1
    np.testing.assert_allclose(tick.output.initial_state[0], robot.com[:2] + shift[:2], atol=1e-12)
    np.testing.assert_array_equal(tick.output.initial_state[1:], np.zeros((2, 2)))


def test_a_stand_plan_away_from_the_measured_feet_stands_at_the_feet_on_the_ground(talos, robot, caplog):
    """The walk behavior stops a walk at the planned feet; after a fault (a killed ik froze the robot) they
    may be elsewhere: a Stand plan's foot farther than resync_distance from its measured sole stands there,
    unless that sole is not on the plan's ground (a foot in the air keeps the pose it is landing on)."""
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    stream.run(4)
    ahead = FootPose(tuple(np.add(robot.left.position, (0.4, 0.0, 0.0))))
    stage.set_plan(WalkPlan(1, False, stream.stamp_ns, Timeline(ahead, robot.right, ())))
    with caplog.at_level(logging.WARNING, logger="walk_mpc.planner"):
        stream.run(2)
    first = stage.timeline.phases[0]
    np.testing.assert_allclose(first.left.position, robot.left.position, atol=1e-9)  # the measured sole
    assert first.right == robot.right and "standing at the measured soles" in caplog.text
    lower = FootPose(tuple(np.add(robot.left.position, (0.4, 0.0, -0.05))))  # a ground 5 cm lower
    stage.set_plan(WalkPlan(2, False, stream.stamp_ns, Timeline(lower, robot.right, ())))
    stream.run(2)
    assert stage.timeline.phases[0].left == lower
    near = FootPose(tuple(np.add(robot.left.position, (0.05, 0.0, 0.0))))  # within resync_distance
    stage.set_plan(WalkPlan(3, False, stream.stamp_ns, Timeline(near, robot.right, ())))
    stream.run(2)
    assert stage.timeline.phases[0].left == near


def test_reset_forgets_the_time_base_the_plan_and_the_counters(talos, robot):
    stage = stage_of(talos)
    stream = Stream(stage, robot)
    stage.set_plan(WalkPlan(1, True, S0, walk(robot)))
    stream.run(20)
    stage.reset()
    assert (stage.ticks, stage.plan_id, stage.last_output, stage.origin_ns) == (0, 0, None, None)
    assert stage.timeline is None
    tick = stage.observe(S0 - 10 * HW, sample(robot))  # earlier than before: a first sample again
    assert tick.ticked and stage.timeline.steps == () and stage.origin_ns == S0 - 10 * HW


def test_on_a_known_slope_the_reference_carries_the_soles_tilts_and_on_level_ground_none(talos, robot):
    """The soles' roll and pitch at T and 2T (StepData normal, for the stabilizer's sole offsets): those of
    the stage's timeline at the targets' times; a level plan's references carry none (as before)."""
    import math

    from walk_mpc.core.body.targets import sole_tilts_at

    slope = math.radians(5.0)
    level = walk(robot)
    steps = [s.replace(normal=(-math.sin(slope), 0.0, math.cos(slope))) if s.step_index >= 2 else s
             for s in level.steps]
    for timeline, sloped in ((level, False), (Timeline(level.phases[0].left, level.phases[0].right, steps,
                                                       level.timing), True)):
        stage = stage_of(talos)
        stream = Stream(stage, robot)
        assert stage.set_plan(WalkPlan(1, True, S0, timeline))
        ticks = [t for t in stream.run(600) if t.reference is not None]
        assert len(ticks) > 200
        tilts = [t.reference.sole_tilt for t in ticks]
        if not sloped:
            assert all(tilt is None for tilt in tilts)
            continue
        assert sum(tilt is not None for tilt in tilts) > 100
        for tick in ticks:
            if tick.reference.sole_tilt is not None:
                wanted = [sole_tilts_at(stage.timeline, t) for t in tick.output.target_times]
                np.testing.assert_allclose(tick.reference.sole_tilt, wanted, atol=1e-12)
        standing = [[0.0, -slope], [0.0, -slope]]  # both soles on the slope at the end
        np.testing.assert_allclose(ticks[-1].reference.sole_tilt[0], standing, atol=1e-12)
