"""Specification of the IK targets of walking (timeline + CoM reference) and standing under gestures."""

import math

import numpy as np
import pytest

from walk_mpc.core.body.gesture import GestureController, GestureDof
from walk_mpc.core.body.ik import IKSolver, IKTargets
from walk_mpc.core.body.robot import rotation_z, yaw_of
from walk_mpc.core.body.targets import (
    StandingTargets,
    foot_targets_at,
    pose_matrix,
    torso_yaw,
    walk_pose_targets,
    walk_targets,
    with_com,
    yaw_free,
)
from walk_mpc.core.errors import InputError
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

LEFT0 = FootPose((0.0, 0.085, 0.0), 0.0)
RIGHT0 = FootPose((0.0, -0.085, 0.0), 0.0)
TIMING = GaitTiming(sway_duration=0.6, double_support_duration=0.2, catch_duration=0.6)
COM = np.array([0.0, 0.0, 0.86])


def turning_walk():
    steps = [
        Step(1, Foot.LEFT, 1.0, (0.1, 0.12, 0.0), yaw=0.3, swing_height=0.06),
        Step(2, Foot.RIGHT, 1.0, (0.2, -0.08, 0.02), yaw=0.3, swing_height=0.04),
        Step(3, Foot.LEFT, 1.0, (0.25, 0.1, 0.02), yaw=-3.0, swing_height=0.05),
    ]
    return Timeline(LEFT0, RIGHT0, steps, TIMING)


def sample_times(timeline, count=400):
    return np.linspace(-0.1, timeline.t_end + 0.5, count)


# ------------------------------------------------------------------------------------------ walking


def test_stance_feet_are_exactly_at_their_planned_poses_at_every_instant():
    timeline = turning_walk()
    for t in sample_times(timeline):
        phase = timeline.phase_at(t)
        targets = walk_targets(timeline, t, COM)
        for foot in phase.stance_feet:
            planned = phase.foot(foot)
            assert targets.foot_positions[foot].tolist() == list(planned.position), (t, foot)
            np.testing.assert_array_equal(targets.foot_rotations[foot], rotation_z(planned.yaw))


def test_swing_foot_starts_at_lift_off_reaches_the_apex_mid_swing_and_ends_at_touchdown():
    timeline = turning_walk()
    for phase in (p for p in timeline.phases if p.kind is PhaseKind.SINGLE):
        start, end = phase.swing_start, phase.foot(phase.swing_foot)
        lift_off = foot_targets_at(timeline, phase.t_start)[phase.swing_foot]
        middle = foot_targets_at(timeline, phase.t_start + 0.5 * phase.duration)[phase.swing_foot]
        touchdown = foot_targets_at(timeline, phase.t_end - 1e-12)[phase.swing_foot]
        assert lift_off.swinging and middle.swinging and touchdown.swinging
        np.testing.assert_allclose(lift_off.position, start.position, atol=1e-12)
        assert lift_off.yaw == pytest.approx(start.yaw)
        midpoint = 0.5 * (np.array(start.position) + np.array(end.position))
        if start.position[2] == end.position[2]:
            np.testing.assert_allclose(middle.position, midpoint + [0.0, 0.0, phase.swing_height], atol=1e-12)
        else:  # a height change (body/swing.py): swing_height above the higher sole
            top = max(start.position[2], end.position[2])
            assert middle.position[2] == pytest.approx(top + phase.swing_height, abs=1e-12)
        np.testing.assert_allclose(touchdown.position, end.position, atol=1e-9)
        assert math.cos(touchdown.yaw - end.yaw) == pytest.approx(1.0)
        # the next phase (double support) holds it exactly at its touchdown pose
        after = foot_targets_at(timeline, phase.t_end)[phase.swing_foot]
        assert not after.swinging and after.position.tolist() == list(end.position)


def test_swing_foot_never_goes_below_the_lower_of_its_two_ends():
    timeline = turning_walk()
    for t in sample_times(timeline, 2000):
        phase = timeline.phase_at(t)
        if phase.kind is PhaseKind.SINGLE:
            z = foot_targets_at(timeline, t)[phase.swing_foot].position[2]
            assert z >= min(phase.swing_start.position[2], phase.foot(phase.swing_foot).position[2]) - 1e-12


def test_torso_yaws_half_way_between_the_feet_along_the_short_arc():
    timeline = turning_walk()
    for t in sample_times(timeline):
        feet = foot_targets_at(timeline, t)
        torso = walk_targets(timeline, t, COM).torso_orientation
        left, right = feet[Foot.LEFT].yaw, feet[Foot.RIGHT].yaw
        half = math.atan2(math.sin(right - left), math.cos(right - left)) / 2.0
        assert math.cos(yaw_of(torso) - (left + half)) == pytest.approx(1.0, abs=1e-12)
        assert abs(math.sin(yaw_of(torso) - left)) <= abs(math.sin(half)) + 1e-12
    assert torso_yaw(3.0, -3.0) == pytest.approx(math.pi)  # not 0: the feet are both near pi
    assert torso_yaw(0.2, 0.4) == pytest.approx(0.3)


def test_torso_tilt_is_kept_under_the_feet_yaw():
    c, s = math.cos(0.1), math.sin(0.1)
    tilt = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    targets = walk_targets(turning_walk(), 100.0, COM, torso_tilt=rotation_z(0.5) @ tilt)
    # yaw_free removes a yaw given with the tilt; walk_targets uses the tilt as given
    np.testing.assert_allclose(yaw_free(rotation_z(0.7) @ tilt), tilt, atol=1e-12)
    expected = rotation_z(torso_yaw(-3.0, 0.3)) @ rotation_z(0.5) @ tilt
    np.testing.assert_allclose(targets.torso_orientation, expected, atol=1e-12)


def test_com_and_posture_pass_through_and_nan_is_rejected():
    timeline = turning_walk()
    posture = np.arange(5.0)
    targets = walk_targets(timeline, 1.0, [0.1, 0.02, 0.8], posture=posture)
    assert targets.com_position.tolist() == [0.1, 0.02, 0.8]
    assert targets.posture.tolist() == posture.tolist()
    with pytest.raises(InputError, match="com_position"):
        walk_targets(timeline, 1.0, [0.1, math.nan, 0.8])
    with pytest.raises(InputError, match="t"):
        walk_targets(timeline, math.nan, COM)


def test_walk_targets_equal_the_fully_validated_targets_and_are_read_only():
    timeline = turning_walk()
    c, s = math.cos(0.1), math.sin(0.1)
    tilt = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    for t in sample_times(timeline, 120):
        for torso_tilt in (None, tilt):
            targets = walk_targets(timeline, float(t), COM + [0.01 * t, 0.0, 0.0], torso_tilt, posture=COM)
            feet = foot_targets_at(timeline, float(t))
            yaw = torso_yaw(feet[Foot.LEFT].yaw, feet[Foot.RIGHT].yaw)
            expected = IKTargets(  # the public constructor validates every array
                com_position=COM + [0.01 * t, 0.0, 0.0],
                foot_positions={foot: target.position for foot, target in feet.items()},
                foot_rotations={foot: rotation_z(target.yaw) for foot, target in feet.items()},
                torso_orientation=rotation_z(yaw) @ (np.eye(3) if torso_tilt is None else tilt),
                posture=COM,
            )
            assert isinstance(targets, IKTargets)
            assert targets.com_position.tobytes() == expected.com_position.tobytes()
            np.testing.assert_array_equal(targets.torso_orientation, expected.torso_orientation)
            assert targets.posture.tobytes() == expected.posture.tobytes()
            assert list(targets.foot_positions) == list(targets.foot_rotations) == [Foot.LEFT, Foot.RIGHT]
            for foot in Foot:
                assert targets.foot_positions[foot].tobytes() == expected.foot_positions[foot].tobytes()
                assert targets.foot_rotations[foot].tobytes() == expected.foot_rotations[foot].tobytes()
            arrays = [targets.com_position, targets.torso_orientation, targets.posture,
                      *targets.foot_positions.values(), *targets.foot_rotations.values()]
            assert not any(array.flags.writeable for array in arrays)
            with pytest.raises(TypeError):
                targets.foot_positions[Foot.LEFT] = COM


def test_pose_targets_completed_with_the_com_are_the_walk_targets():
    # The ik node builds the soles and torso before the CoM reference arrives, then adds the CoM.
    timeline = turning_walk()
    for t in sample_times(timeline, 60):
        pose = walk_pose_targets(timeline, float(t), yaw_free(rotation_z(0.2)))
        assert pose.com_position is None
        for com in (COM, COM + [0.02, -0.01, 0.0]):
            full = with_com(pose, com)
            expected = walk_targets(timeline, float(t), com, yaw_free(rotation_z(0.2)))
            assert full.com_position.tobytes() == expected.com_position.tobytes()
            assert full.torso_orientation.tobytes() == expected.torso_orientation.tobytes()
            for foot in Foot:
                assert full.foot_positions[foot].tobytes() == expected.foot_positions[foot].tobytes()
                assert full.foot_rotations[foot].tobytes() == expected.foot_rotations[foot].tobytes()
        assert pose.com_position is None  # completing does not change the shared targets
    with pytest.raises(InputError, match="targets.com_position"):
        with_com(pose, [0.1, math.nan, 0.8])


def test_walk_targets_reject_what_ik_targets_reject():
    timeline = turning_walk()
    with pytest.raises(InputError, match="targets.com_position"):
        walk_targets(timeline, 1.0, [0.1, math.inf, 0.8])
    with pytest.raises(InputError, match="(?s)targets.torso_orientation.*rotation matrix"):
        walk_targets(timeline, 1.0, COM, torso_tilt=2.0 * np.eye(3))
    with pytest.raises(InputError, match="(?s)targets.torso_orientation.*rotation matrix"):
        walk_targets(timeline, 1.0, COM, torso_tilt=np.diag([1.0, 1.0, -1.0]))  # a reflection
    with pytest.raises(InputError, match="(?s)targets.torso_orientation.*finite"):
        walk_targets(timeline, 1.0, COM, torso_tilt=np.full((3, 3), math.nan))
    with pytest.raises(InputError, match="targets.posture"):
        walk_targets(timeline, 1.0, COM, posture=[0.0, math.nan])


def test_before_the_timeline_and_after_its_end_the_feet_stand_still():
    timeline = turning_walk()
    assert foot_targets_at(timeline, -5.0)[Foot.LEFT].position.tolist() == list(LEFT0.position)
    final = timeline.phases[-1]
    late = foot_targets_at(timeline, 1e6)
    assert late[Foot.LEFT].position.tolist() == list(final.left.position)
    assert late[Foot.RIGHT].position.tolist() == list(final.right.position)


def test_talos_ik_meets_walk_targets_along_a_walk(talos):
    timeline = Timeline(LEFT0, RIGHT0, [
        Step(1, Foot.LEFT, 0.8, (0.1, 0.085, 0.0)), Step(2, Foot.RIGHT, 0.8, (0.2, -0.085, 0.0))], TIMING)
    solver = IKSolver(talos)
    q = talos.reference_configuration()
    for t in np.arange(0.0, timeline.t_end, 0.02):
        feet = foot_targets_at(timeline, t)
        middle = 0.5 * (feet[Foot.LEFT].position + feet[Foot.RIGHT].position)
        result = solver.solve(walk_targets(timeline, t, middle + [0.0, 0.0, 0.86]), q)
        assert result.success, (t, result.message, dict(result.residuals))
        q = result.q
        for foot, frame in ((Foot.LEFT, talos.left_foot_frame), (Foot.RIGHT, talos.right_foot_frame)):
            np.testing.assert_allclose(talos.frame_pose(q, frame)[0], feet[foot].position, atol=1e-4)


# ------------------------------------------------------------------------------------------ standing


def test_standing_targets_from_a_configuration_are_met_by_it(talos, solo):
    for robot in (talos, solo):
        q = robot.reference_configuration()
        standing = StandingTargets.from_configuration(robot, q)
        result = IKSolver(robot).solve(standing.targets(), q)
        assert result.success and result.iterations == 0
        with_com = standing.targets(com_position=robot.com(q))
        assert IKSolver(robot).solve(with_com, q).iterations == 0
        assert standing.oriented_feet is robot.is_biped


def test_talos_rz_moves_only_the_feet_about_the_body_and_keeps_the_com_reference(talos):
    q = talos.reference_configuration()
    standing = StandingTargets.from_configuration(talos, q)
    result = standing.gestures.exec_gesture(GestureDof.RZ, 0.1)
    assert not result.body_moved and set(result.moved_legs) == set(talos.foot_frames)
    base = talos.frame_pose(q, talos.base_frame)[0]
    targets = standing.targets(com_position=[0.01, 0.0, 0.85])
    assert targets.com_position.tolist() == [0.01, 0.0, 0.85]
    for frame, (position, rotation) in talos.foot_poses(q).items():
        expected = base + rotation_z(0.1) @ (position - base)
        np.testing.assert_allclose(targets.foot_positions[frame], expected, atol=1e-12)
        np.testing.assert_allclose(targets.foot_rotations[frame], rotation_z(0.1) @ rotation, atol=1e-12)
    np.testing.assert_allclose(targets.torso_orientation, talos.frame_pose(q, talos.torso_frame)[1])


def test_quadruped_rz_keeps_the_feet_and_yaws_body_torso_and_com_back(solo):
    q = solo.reference_configuration()
    standing = StandingTargets.from_configuration(solo, q)
    com = solo.com(q) + [0.01, 0.0, 0.0]
    result = standing.gestures.exec_gesture(GestureDof.RZ, 0.1)
    assert result.body_moved
    targets = standing.targets(com_position=com)
    for frame, (position, _) in solo.foot_poses(q).items():
        np.testing.assert_allclose(targets.foot_positions[frame], position, atol=1e-12)
    assert targets.foot_rotations == {}  # point feet
    assert yaw_of(targets.torso_orientation) == pytest.approx(-0.1)
    base = solo.frame_pose(q, solo.base_frame)[0]
    np.testing.assert_allclose(targets.com_position, base + rotation_z(-0.1) @ (com - base), atol=1e-12)
    # without a CoM reference the body frame's position is held instead
    held = standing.targets()
    assert held.com_position is None
    np.testing.assert_allclose(held.foot_positions[solo.base_frame], base, atol=1e-12)
    solved = IKSolver(solo).solve(held, q)
    assert solved.success
    assert yaw_of(solo.frame_pose(solved.q, solo.base_frame)[1]) == pytest.approx(-0.1, abs=1e-4)


def test_quadruped_tz_lowers_the_body_and_com_by_the_gesture(solo):
    q = solo.reference_configuration()
    standing = StandingTargets.from_configuration(solo, q)
    standing.gestures.exec_gesture(GestureDof.TZ, 0.03)  # legs extend 3 cm in the body frame...
    np.testing.assert_allclose(standing.com_position, solo.com(q) - [0.0, 0.0, 0.03], atol=1e-12)
    result = IKSolver(solo).solve(standing.targets(), q)  # ...so the body goes 3 cm down
    assert result.success
    assert solo.frame_pose(result.q, solo.base_frame)[0][2] == pytest.approx(
        solo.frame_pose(q, solo.base_frame)[0][2] - 0.03, abs=1e-4)


def test_without_friction_the_quadruped_moves_its_feet_not_its_body(solo):
    q = solo.reference_configuration()
    standing = StandingTargets.from_configuration(solo, q, GestureController.Parameters(friction=False))
    standing.gestures.exec_gesture(GestureDof.TX, 0.02)
    np.testing.assert_array_equal(standing.body_displacement, np.eye(4))
    for frame, (position, _) in solo.foot_poses(q).items():
        np.testing.assert_allclose(standing.targets().foot_positions[frame], position + [0.02, 0, 0])


def test_planned_foot_poses_override_the_forward_kinematics(talos):
    q = talos.reference_configuration()
    planned = {talos.left_foot_frame: pose_matrix((0.0, 0.085, 0.0), 0.0)}
    standing = StandingTargets.from_configuration(talos, q, foot_poses=planned)
    targets = standing.targets()
    assert targets.foot_positions[talos.left_foot_frame].tolist() == [0.0, 0.085, 0.0]
    np.testing.assert_allclose(targets.foot_rotations[talos.left_foot_frame], np.eye(3), atol=1e-15)
    fk_right = talos.foot_poses(q)[talos.right_foot_frame][1]
    np.testing.assert_allclose(targets.foot_rotations[talos.right_foot_frame], fk_right, atol=1e-12)


# ---------------------------------------------------------------------------- known sloped ground (normals)
def test_a_sole_on_sloped_ground_has_the_normal_as_its_z_axis_and_keeps_its_yaw():
    """The orientation from StepData's normal: z axis = the normal, x axis in the vertical plane of the
    heading (the yaw is the step's), for random headings and normals up to MAX_GROUND_TILT (seeded)."""
    from walk_mpc.core.body.robot import roll_pitch_of, sole_rotation
    from walk_mpc.core.walk.step import MAX_GROUND_TILT, ground_tilt

    rng = np.random.default_rng(18)
    for _ in range(200):
        yaw = rng.uniform(-math.pi, math.pi)
        tilt, direction = rng.uniform(0.0, MAX_GROUND_TILT), rng.uniform(-math.pi, math.pi)
        normal = (math.sin(tilt) * math.cos(direction), math.sin(tilt) * math.sin(direction), math.cos(tilt))
        step = Step(1, Foot.LEFT, 1.0, (0.0, 0.0, 0.0), yaw=yaw, normal=normal)
        roll, pitch = step.tilt
        rotation = sole_rotation(yaw, roll, pitch)
        np.testing.assert_allclose(rotation[:, 2], normal, atol=1e-12)
        assert yaw_of(rotation) == pytest.approx(math.remainder(yaw, 2 * math.pi), abs=1e-12)
        heading = np.array([math.cos(yaw), math.sin(yaw), 0.0])
        assert np.cross(heading, [0.0, 0.0, 1.0]) @ rotation[:, 0] == pytest.approx(0.0, abs=1e-12)
        assert roll_pitch_of(rotation) == pytest.approx((roll, pitch), abs=1e-12)
        assert ground_tilt(yaw, normal) == pytest.approx((roll, pitch), abs=1e-12)
    # A 10 degree slope up along +x: the toe up (negative pitch), no roll; across it: a roll.
    up = (-math.sin(math.radians(10.0)), 0.0, math.cos(math.radians(10.0)))
    assert ground_tilt(0.0, up) == pytest.approx((0.0, -math.radians(10.0)))
    assert ground_tilt(0.5 * math.pi, up) == pytest.approx((-math.radians(10.0), 0.0))  # rising on the right
    assert ground_tilt(0.3, (0.0, 0.0, 1.0)) == (0.0, 0.0)


@pytest.mark.parametrize("normal, match", [
    ((0.0, 0.0, 0.0), "normal .* has zero length; expected a unit ground normal"),
    ((math.nan, 0.0, 1.0), "normal .* is not 3 finite numbers"),
    ((0.0, math.inf, 1.0), "normal .* is not 3 finite numbers"),
    ((math.sin(0.5), 0.0, math.cos(0.5)), r"normal .* is 28.6 deg from the vertical; expected at most 25"),
    ((0.0, 0.0, -1.0), r"is 180.0 deg from the vertical; expected at most 25 deg .* positive z"),
    ((1.0, 0.0), "normal .* is not 3 finite numbers"),
])
def test_an_invalid_normal_is_refused_naming_it_and_what_is_expected(normal, match):
    from walk_mpc.core.errors import InvalidStepError

    with pytest.raises(InvalidStepError, match=match):
        Step(1, Foot.LEFT, 1.0, (0.0, 0.0, 0.0), normal=normal)
    if len(normal) == 3 and all(math.isfinite(v) for v in normal):
        with pytest.raises(InvalidStepError, match=match):
            FootPose((0.0, 0.0, 0.0), 0.0, normal)


def test_a_normal_is_scaled_to_unit_length_and_the_vertical_is_level_ground():
    step = Step(1, Foot.LEFT, 1.0, (0.0, 0.0, 0.0), normal=(0.0, 0.1, 2.0))
    assert math.hypot(*step.normal) == pytest.approx(1.0)
    assert Step(1, Foot.LEFT, 1.0, (0.0, 0.0, 0.0), normal=(0.0, 0.0, 3.0)).normal == (0.0, 0.0, 1.0)
    assert FootPose.of_step(step).normal == step.normal and not FootPose.of_step(step).level


def ramp_walk(degrees=10.0):
    """Two steps onto a slope of ``degrees`` along +x (the plan knows its heights and normal), one beyond."""
    a = math.radians(degrees)
    normal = (-math.sin(a), 0.0, math.cos(a))
    steps = [Step(1, Foot.LEFT, 1.0, (0.2, 0.085, 0.0)),
             Step(2, Foot.RIGHT, 1.0, (0.4, -0.085, 0.2 * math.tan(a)), normal=normal),
             Step(3, Foot.LEFT, 1.0, (0.6, 0.085, 0.4 * math.tan(a)), normal=normal)]
    return Timeline(LEFT0, RIGHT0, steps, TIMING)


def test_soles_land_and_stand_flat_on_known_sloped_ground_and_swing_from_one_tilt_to_the_other():
    from walk_mpc.core.body.robot import sole_rotation
    from walk_mpc.core.body.targets import sole_tilts_at

    timeline = ramp_walk()
    slope = math.radians(10.0)
    for phase in timeline.phases:
        if phase.kind is not PhaseKind.SINGLE:
            continue
        foot = phase.swing_foot
        ends = [walk_pose_targets(timeline, t) for t in (phase.t_start, phase.t_end)]
        start_pose, end_pose = phase.swing_start, phase.foot(foot)
        for targets, pose in zip(ends, (start_pose, end_pose)):
            rotation = targets.foot_rotations[foot]
            np.testing.assert_allclose(rotation, sole_rotation(pose.yaw, *pose.tilt), atol=1e-12)
            np.testing.assert_allclose(rotation[:, 2], pose.normal, atol=1e-12)
        stance = walk_pose_targets(timeline, 0.5 * (phase.t_start + phase.t_end)).foot_rotations[foot.other]
        np.testing.assert_allclose(stance[:, 2], phase.foot(foot.other).normal, atol=1e-12)
        times = np.linspace(phase.t_start, phase.t_end, 50)
        pitches = [sole_tilts_at(timeline, t)[int(foot)][1] for t in times]
        assert all(min(a, b) - 1e-12 <= p <= max(a, b) + 1e-12 for p, a, b in
                   zip(pitches, [start_pose.tilt[1]] * 50, [end_pose.tilt[1]] * 50))
        assert np.all(np.diff(pitches) <= 1e-12) or np.all(np.diff(pitches) >= -1e-12)  # monotonic
    for tilt in sole_tilts_at(timeline, timeline.t_end + 1.0):  # standing on the slope
        assert tilt == pytest.approx((0.0, -slope))


def test_on_level_ground_the_sole_rotations_are_the_yaw_rotations_bit_for_bit():
    timeline = turning_walk()
    for t in sample_times(timeline, 60):
        targets = walk_pose_targets(timeline, t)
        feet = foot_targets_at(timeline, t)
        for foot in Foot:
            assert targets.foot_rotations[foot].tobytes() == rotation_z(feet[foot].yaw).tobytes()
            assert feet[foot].tilt == (0.0, 0.0)
