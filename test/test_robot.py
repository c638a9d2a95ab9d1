"""Specification tests of the pinocchio robot model wrapper."""

import numpy as np
import pytest

from walk_mpc.core.body.robot import RobotModel, rotation_z, yaw_of
from walk_mpc.core.errors import FrameNotFound, InputError, JointNotFound, ModelError, ParameterError
from walk_mpc.core.params import from_mapping, to_mapping


def test_talos_loads_with_a_free_flyer_and_38_velocities(talos):
    assert (talos.nq, talos.nv) == (39, 38)
    assert len(talos.joint_names) == 32
    assert talos.joint_names[0] == "leg_left_1_joint"
    assert talos.mass == pytest.approx(90.27, abs=0.01)
    assert talos.is_biped
    assert talos.foot_frames == ("left_sole_link", "right_sole_link")
    assert (talos.base_frame, talos.torso_frame) == ("base_link", "torso_2_link")


def test_talos_reference_stands_with_bent_knees_and_flat_soles_at_y_plus_minus_0_085(talos):
    q = talos.reference_configuration()
    assert 0.85 <= talos.com(q)[2] <= 0.88
    feet = talos.foot_poses(q)
    left, right = feet["left_sole_link"], feet["right_sole_link"]
    np.testing.assert_allclose(left[0], [0.0, 0.085, 0.0], atol=1e-6)
    np.testing.assert_allclose(right[0], [0.0, -0.085, 0.0], atol=1e-6)
    np.testing.assert_allclose(left[1], np.eye(3), atol=2e-3)  # the SRDF's half-sitting rolls 1.7 mrad
    knee = talos.joint_positions(q)["leg_left_4_joint"]
    assert knee > 0.3  # bent


@pytest.mark.parametrize("name, feet", [("solo12", 4), ("go2", 4)])
def test_quadrupeds_load_with_four_point_feet(name, feet):
    robot = RobotModel(RobotModel.Parameters(robot=name))
    assert not robot.is_biped
    assert len(robot.foot_frames) == feet
    q = robot.reference_configuration()
    heights = [pose[0][2] for pose in robot.foot_poses(q).values()]
    assert np.ptp(heights) < 1e-6  # all feet at the same height
    assert robot.com(q)[2] > max(heights)


def test_unknown_frame_raises_frame_not_found_listing_valid_frames():
    with pytest.raises(FrameNotFound) as info:
        RobotModel(RobotModel.Parameters(robot="talos_reduced", torso_frame="chest"))
    assert info.value.name == "chest"
    assert "torso_2_link" in info.value.frames
    assert "valid frames" in str(info.value)


def test_unknown_joint_raises_joint_not_found_listing_valid_joints(talos):
    with pytest.raises(JointNotFound) as info:
        RobotModel(RobotModel.Parameters(reference_joint_names=("knee",), reference_joint_positions=(0.1,)))
    assert "leg_left_4_joint" in info.value.joints
    with pytest.raises(JointNotFound):
        talos.configuration_from_joints({"elbow": 0.0})
    with pytest.raises(FrameNotFound):
        talos.frame_pose(talos.reference_configuration(), "nose")


def test_reference_joint_override_is_applied():
    robot = RobotModel(RobotModel.Parameters(
        reference_joint_names=("head_1_joint",), reference_joint_positions=(0.2,)))
    assert robot.joint_positions(robot.reference_configuration())["head_1_joint"] == pytest.approx(0.2)


def test_joint_maps_round_trip(talos):
    rng = np.random.default_rng(1)
    positions = rng.uniform(talos.lower_limits(), talos.upper_limits())
    quaternion = rng.normal(size=4)
    q = talos.configuration_from_actuated(positions, (0.1, 0.2, 0.9), quaternion)
    np.testing.assert_allclose(talos.actuated_positions(q), positions)
    np.testing.assert_allclose(np.linalg.norm(q[3:7]), 1.0)
    by_name = talos.joint_positions(q)
    np.testing.assert_allclose(talos.configuration_from_joints(by_name, q[:3], q[3:7]), q)


def test_frame_pose_moves_with_the_base(talos):
    q = talos.reference_configuration()
    shifted = q.copy()
    shifted[:3] += [0.3, -0.2, 0.1]
    p0, r0 = talos.frame_pose(q, "left_sole_link")
    p1, r1 = talos.frame_pose(shifted, "left_sole_link")
    np.testing.assert_allclose(p1 - p0, [0.3, -0.2, 0.1], atol=1e-12)
    np.testing.assert_allclose(talos.com(shifted) - talos.com(q), [0.3, -0.2, 0.1], atol=1e-12)
    np.testing.assert_allclose(r0, r1)


def test_clamp_to_limits_keeps_joints_inside(talos):
    q = talos.reference_configuration()
    q[7:] = 10.0
    clamped = talos.clamp_to_limits(q)
    np.testing.assert_allclose(clamped[7:], talos.upper_limits())


def test_non_finite_or_misshaped_configuration_is_an_input_error(talos):
    q = talos.reference_configuration()
    q[10] = np.nan
    with pytest.raises(InputError, match="'q'"):
        talos.com(q)
    with pytest.raises(InputError):
        talos.com(np.zeros(5))


def test_missing_or_malformed_urdf_is_a_model_error(tmp_path):
    with pytest.raises(ModelError):
        RobotModel(RobotModel.Parameters(robot=str(tmp_path / "missing.urdf")))
    broken = tmp_path / "broken.urdf"
    broken.write_text("<robot name='x'><link name='a'/><joint name='j' type='revolute'></robot>")
    with pytest.raises(ModelError):
        RobotModel(RobotModel.Parameters(robot=str(broken)))


def test_urdf_path_loads_without_presets(talos):
    robot = RobotModel(RobotModel.Parameters(
        robot=str(talos.urdf_path), left_foot_frame="left_sole_link", right_foot_frame="right_sole_link"))
    assert robot.nv == 38
    assert robot.base_frame == "base_link"
    np.testing.assert_allclose(robot.reference_configuration()[7:], 0.0)  # neutral without an SRDF


def test_parameters_validate_and_round_trip_through_mappings():
    with pytest.raises(ParameterError, match="robot"):
        RobotModel.Parameters(robot="atlas")
    with pytest.raises(ParameterError, match="reference_joint_positions"):
        RobotModel.Parameters(reference_joint_names=("a", "b"), reference_joint_positions=(0.1,))
    with pytest.raises(ParameterError):
        RobotModel.Parameters(left_foot_frame="left_sole_link")
    params = from_mapping(RobotModel.Parameters, {"robot": "solo12", "leg_frames": ["FL_FOOT", "FR_FOOT"]})
    assert params.leg_frames == ("FL_FOOT", "FR_FOOT")
    assert from_mapping(RobotModel.Parameters, to_mapping(params)) == params


def test_yaw_helpers_are_inverse():
    for yaw in np.linspace(-3.1, 3.1, 13):
        assert yaw_of(rotation_z(yaw)) == pytest.approx(yaw)
