"""In-process closed loop (core.control.closed_loop) on the kinematic plant: accuracy, plumbing and options.

Issue 7's accuracy contract, without ROS: Talos walks on the kinematic plant, closed through the MPC
planner and the IK with the shared support-foot correction, and every foot lands within 1 mm (and 1 mrad)
of its step; the ZMP read back from the plant's corner forces stays in the support polygon on every
sample, the plant never clips the ZMP, and the contacts never flap in double support.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from walk_mpc.core.body.robot import RobotModel, yaw_of
from walk_mpc.core.control.closed_loop import ClosedLoopParameters, ClosedLoopWalk, WalkOutcome
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.sim.kinematic import CORNERS, FEET, KinematicSim
from walk_mpc.core.walk import footsteps
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

SINGLE_SUPPORT, DOUBLE_SUPPORT = 0.8, 0.3  # [s]
LANDING_TOLERANCE = 1e-3  # [m]
YAW_TOLERANCE = 1e-3  # [rad]


def start_feet(robot: RobotModel) -> tuple[FootPose, FootPose, float]:
    """The feet measured on the plant at rest (as the walk behavior plans from them): Talos' reference
    posture puts its left sole 0.29 mm above the right one, so the plan is a fraction of a millimetre off
    the plant's ground."""
    q = KinematicSim(KinematicSim.Parameters(), robot=robot).state.q
    feet = {n: FootPose(tuple(p), yaw_of(r)) for n, (p, r) in robot.foot_poses(q).items()}
    left, right = feet[robot.left_foot_frame], feet[robot.right_foot_frame]
    return left, right, abs(left.position[1] - right.position[1])


def timeline_of(robot: RobotModel, kind: str = "forward") -> Timeline:
    left, right, width = start_feet(robot)
    duration = SINGLE_SUPPORT + DOUBLE_SUPPORT
    if kind == "forward":  # 10 steps of 0.2 m (the last one closes the feet)
        steps = footsteps.walk_forward(left, right, 1.8, step_length=0.2, width=width, duration=duration)
    elif kind == "turn":  # a quarter turn on an arc of 0.6 m radius
        steps = footsteps.walk_arc(left, right, 0.6, math.pi / 2, step_length=0.2, width=width,
                                   duration=duration)
    elif kind == "lateral":  # 0.5 m to the left
        steps = footsteps.walk_sideways(left, right, 0.5, step_length=0.1, width=width, duration=duration)
    else:  # short walk for the plumbing tests
        steps = footsteps.walk_forward(left, right, 0.4, step_length=0.2, width=width, duration=1.1)
    return Timeline(left, right, steps, GaitTiming(0.6, DOUBLE_SUPPORT, 0.6))


@dataclasses.dataclass
class Trace:
    """A closed-loop walk with every plant sample."""

    loop: ClosedLoopWalk
    sim: KinematicSim
    outcome: WalkOutcome
    times: list
    soles: list  # per sample: {Foot: (position, yaw)} by forward kinematics of the measured state
    contact: list  # per sample: in_contact flags
    contact_zmp: list  # per sample: ZMP of the corner forces [m]
    polygons: list  # per sample: corners (n, 2) of the soles in contact
    planned_zmp: list  # (time, ZMP target) of each control tick


def walk_traced(robot: RobotModel, timeline: Timeline, **sim_params) -> Trace:
    sim = KinematicSim(KinematicSim.Parameters(**sim_params), robot=robot)
    loop = ClosedLoopWalk(robot, sim, timeline)
    frames = {Foot.LEFT: robot.left_foot_frame, Foot.RIGHT: robot.right_foot_frame}
    trace = Trace(loop, sim, None, [], [], [], [], [], [])
    end = timeline.t_end + loop.params.settle_time
    while sim.time < end - 1e-9 and not loop.fallen:
        record = loop.step()
        if record is not None:
            trace.planned_zmp.append((record.output.target_times[0], record.output.zmp_targets[0, :2]))
        state, sample = sim.state, sim.sensor_sample()
        corners = sim.corner_positions()
        q = np.asarray(state.q)
        trace.times.append(sim.time)
        trace.soles.append({foot: (lambda pose: (pose[0], yaw_of(pose[1])))(robot.frame_pose(q, frame))
                            for foot, frame in frames.items()})
        trace.contact.append(state.in_contact)
        trace.contact_zmp.append(sample.zmp_from_contacts(corners)[:2])
        trace.polygons.append(np.array([corners[f"{FEET[i]}_{c}"][:2] for i in (0, 1) if state.in_contact[i]
                                        for c in CORNERS]))
    trace.outcome = loop.outcome()
    return trace


@pytest.fixture(scope="module", params=["forward", "turn", "lateral"])
def walked(request, talos):
    timeline = timeline_of(talos, request.param)
    return timeline, walk_traced(talos, timeline)


def distance_outside(point: np.ndarray, corners: np.ndarray) -> float:
    """Signed distance [m] of ``point`` outside the convex hull of ``corners`` (< 0: inside)."""
    hull = ConvexHull(corners)
    return max(float(eq[:2] @ point + eq[2]) for eq in hull.equations)


def stance_windows(timeline: Timeline):
    """Per step: (step, touchdown time, next lift-off time of the same foot or the end)."""
    singles = [p for p in timeline.phases if p.kind is PhaseKind.SINGLE]
    for k, phase in enumerate(singles):
        step = next(s for s in timeline.steps if s.step_index == phase.step_index)
        liftoff = next((q.t_start for q in singles[k + 1:] if q.swing_foot is phase.swing_foot), math.inf)
        yield step, phase.t_end, liftoff


# ---------------------------------------------------------------------------------------------- accuracy


def test_every_foot_lands_within_a_millimetre_and_a_milliradian_of_its_step(walked):
    timeline, trace = walked
    assert not trace.outcome.fallen and trace.outcome.ik_failures == 0
    for step, touchdown, liftoff in stance_windows(timeline):
        measured = [(sole[step.foot], flags[int(step.foot)])
                    for t, sole, flags in zip(trace.times, trace.soles, trace.contact)
                    if touchdown <= t < liftoff]
        assert measured and all(in_contact for _, in_contact in measured), step.step_index
        for (position, yaw), _ in measured:
            assert np.linalg.norm(position - np.asarray(step.position)) < LANDING_TOLERANCE, step.step_index
            assert abs(math.remainder(yaw - step.yaw, 2 * math.pi)) < YAW_TOLERANCE, step.step_index
    outcome = trace.outcome
    assert sorted(outcome.landing_errors) == [s.step_index for s in timeline.steps]
    assert max(outcome.landing_errors.values()) < LANDING_TOLERANCE
    assert max(abs(e) for e in outcome.landing_yaw_errors.values()) < YAW_TOLERANCE


def test_landing_errors_do_not_grow_along_the_walk(walked):
    timeline, trace = walked
    errors = [trace.outcome.landing_errors[s.step_index] for s in timeline.steps]
    assert max(errors[len(errors) // 2:]) <= max(errors[:len(errors) // 2]) + 1e-4


def test_contact_force_zmp_is_in_the_support_polygon_on_every_sample(walked):
    _, trace = walked
    worst = max(distance_outside(z, corners) for z, corners in zip(trace.contact_zmp, trace.polygons))
    assert worst <= 1e-9


def test_plant_never_clips_the_zmp_and_the_com_ends_between_the_feet(walked):
    _, trace = walked
    assert trace.sim.state.zmp_clip_count == 0
    assert trace.outcome.final_com_error < 0.005


def test_contacts_change_only_at_lift_off_and_touchdown(walked):
    timeline, trace = walked
    changes = sum(a != b for a, b in zip(trace.contact, trace.contact[1:]))
    assert changes == 2 * len(timeline.steps)  # one lift-off and one touchdown per step: no flapping


def test_contact_force_zmp_follows_the_planned_zmp_after_the_servo_and_filter_delays(walked):
    _, trace = walked
    times, targets = zip(*trace.planned_zmp)
    targets = np.array(targets)
    delay = 0.02  # [s] servo lag (10 ms) + acceleration window and filter (about 10 ms)
    errors = [np.linalg.norm(z - [np.interp(t - delay, times, targets[:, i]) for i in (0, 1)])
              for t, z in zip(trace.times, trace.contact_zmp) if t > 0.1]
    # p99 within a centimetre; the largest deviations are at the lift-offs, where the base moves onto the
    # stance foot (most at the first one: the plan is a fraction of a millimetre off the plant's ground).
    assert np.percentile(errors, 99) < 0.01 and max(errors) < 0.05  # [m]


# ---------------------------------------------------------------------------------------------- plumbing


def test_kinematic_plant_walks_with_feet_on_the_plan_and_ticks_every_control_period(talos):
    sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
    loop = ClosedLoopWalk(talos, sim, timeline_of(talos, "short"))
    ticks = []
    outcome = loop.run(on_tick=ticks.append)
    assert not outcome.fallen and outcome.ik_failures == 0
    assert sorted(outcome.landing_errors) == [s.step_index for s in loop.original_timeline.steps]
    assert max(outcome.landing_errors.values()) < LANDING_TOLERANCE
    assert outcome.final_com_error < 0.01
    # the first sample (after the first hardware step, as the sim node publishes it) ticks, then every 2nd
    assert [round(r.t, 6) for r in ticks[:3]] == [0.01, 0.03, 0.05]
    assert outcome.real_time_factor > 0.0


def test_planner_walks_on_the_corrector_timeline_with_measured_support_feet(talos):
    sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
    loop = ClosedLoopWalk(talos, sim, timeline_of(talos, "short"))
    loop.run()
    assert loop.planner.timeline is loop.corrector.timeline
    corrections = loop.corrector.corrections
    assert {c.foot for c in corrections} == {Foot.LEFT, Foot.RIGHT}
    for c in corrections:  # each correction put the measured pose in the timeline
        assert all(c.applied for c in corrections)
        poses = [s for s in loop.timeline.steps if s.step_index == c.step_index]
        pose = poses[0].position if poses else loop.timeline.phases[0].foot(c.foot).position
        assert pose == c.measured.position


def test_without_the_support_correction_the_loop_still_measures_the_landings(talos):
    sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
    timeline = timeline_of(talos, "short")
    loop = ClosedLoopWalk(talos, sim, timeline, params=ClosedLoopParameters(support_correction=False))
    outcome = loop.run()
    assert loop.timeline is loop.corrector.plan and not loop.corrector.corrections
    assert sorted(outcome.landing_errors) == [s.step_index for s in timeline.steps]


def test_control_period_must_be_a_multiple_of_the_hardware_period(talos):
    sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
    with pytest.raises(ParameterError):
        ClosedLoopWalk(talos, sim, timeline_of(talos, "short"),
                       params=ClosedLoopParameters(control_period=0.015))


def test_parameters_reject_non_boolean_switches_and_non_positive_periods():
    with pytest.raises(ParameterError):
        ClosedLoopParameters(com_feedback=1)
    with pytest.raises(ParameterError):
        ClosedLoopParameters(measured_support_height="yes")
    with pytest.raises(ParameterError):
        ClosedLoopParameters(control_period=0.0)
