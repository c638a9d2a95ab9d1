"""Specification of the measured state: CoM and soles from joints + base estimate or an anchored sole."""

import numpy as np
import pinocchio as pin
import pytest

from walk_mpc.core.body.robot import RobotModel, rotation_z
from walk_mpc.core.body.state_estimation import estimate_state
from walk_mpc.core.errors import FrameNotFound, InputError
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose


@pytest.fixture(scope="module")
def talos():
    return RobotModel(RobotModel.Parameters(robot="talos_reduced"))


def _arrays(robot, q):
    positions = robot.joint_positions(q)
    return list(positions), list(positions.values())


def _random_configuration(robot, rng):
    q = robot.reference_configuration()
    q[7:] += rng.normal(scale=0.05, size=robot.nq - 7)
    q[0:3] += rng.normal(scale=0.1, size=3)
    quat = pin.Quaternion(pin.rpy.rpyToMatrix(*rng.normal(scale=0.1, size=3)))
    q[3:7] = quat.coeffs()  # x, y, z, w
    return q


def test_base_estimate_gives_the_model_com_and_sole_poses(talos):
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = _random_configuration(talos, rng)
        names, positions = _arrays(talos, q)
        state = estimate_state(talos, names, positions, base_pose=(q[0:3], q[3:7]))
        assert state.base_source == "estimate"
        np.testing.assert_allclose(state.configuration, q, atol=1e-12)
        np.testing.assert_allclose(state.com_position, talos.com(q), atol=1e-12)
        poses = talos.foot_poses(q)
        for frame, pose in state.feet.items():
            np.testing.assert_allclose(pose.position, poses[frame][0], atol=1e-12)
        assert state.com_velocity is None


def test_reference_posture_soles_are_flat_at_the_origin_and_com_between_them(talos):
    q = talos.reference_configuration()
    names, positions = _arrays(talos, q)
    state = estimate_state(talos, names, positions, base_pose=(q[0:3], q[3:7]))
    left, right = state.sole(Foot.LEFT), state.sole(Foot.RIGHT)
    assert left.position[1] == pytest.approx(0.085, abs=1e-3)
    assert right.position[1] == pytest.approx(-0.085, abs=1e-3)
    assert abs(left.position[2]) < 1e-9 and abs(left.yaw) < 1e-9
    assert abs(state.com_position[1]) < 0.01 and state.com_position[2] == pytest.approx(0.877, abs=0.01)


def test_anchored_sole_reproduces_the_base_that_puts_it_there(talos):
    rng = np.random.default_rng(5)
    q = talos.reference_configuration()
    q[7:] += rng.normal(scale=0.02, size=talos.nq - 7)
    yaw = 0.3
    q[0:3] = rotation_z(yaw) @ q[0:3] + [0.4, -0.2, 0.0]
    q[3:7] = pin.Quaternion(rotation_z(yaw)).coeffs()
    truth = estimate_state(talos, *_arrays(talos, q), base_pose=(q[0:3], q[3:7]))
    frame = talos.left_foot_frame
    # The anchor is the true sole pose only if the sole is flat: make it flat by anchoring, then compare.
    anchored = estimate_state(talos, *_arrays(talos, q), anchor=(frame, truth.feet[frame]))
    assert anchored.base_source == "anchor"
    np.testing.assert_allclose(anchored.feet[frame].position, truth.feet[frame].position, atol=1e-12)
    assert anchored.feet[frame].yaw == pytest.approx(truth.feet[frame].yaw, abs=1e-12)
    pin.framesForwardKinematics(talos.model, talos.data, anchored.configuration)
    sole_rotation = talos.data.oMf[talos.frame_id(frame)].rotation
    np.testing.assert_allclose(sole_rotation, rotation_z(truth.feet[frame].yaw), atol=1e-12)


def test_anchor_on_the_reference_sole_gives_the_reference_com_within_the_sole_tilt(talos):
    # The SRDF posture's soles are ~2 mrad from flat: the anchored (flat) sole tilts the robot as much.
    q = talos.reference_configuration()
    left = talos.foot_poses(q)[talos.left_foot_frame][0]
    state = estimate_state(talos, *_arrays(talos, q),
                           anchor=(talos.left_foot_frame, FootPose(tuple(left), 0.0)))
    np.testing.assert_allclose(state.com_position, talos.com(q), atol=2e-3)
    right = talos.foot_poses(q)[talos.right_foot_frame][0]
    np.testing.assert_allclose(state.sole(Foot.RIGHT).position, right, atol=1e-3)


def test_com_velocity_is_the_finite_difference_of_the_com_with_a_base_twist(talos):
    rng = np.random.default_rng(7)
    dt = 1e-6
    for _ in range(5):
        q = _random_configuration(talos, rng)
        qdot = rng.normal(scale=0.5, size=talos.nq - 7)
        linear, angular = rng.normal(size=3), rng.normal(size=3)
        names, positions = _arrays(talos, q)
        state = estimate_state(talos, names, positions, base_pose=(q[0:3], q[3:7]), joint_velocities=qdot,
                               base_twist=(linear, angular))
        # Move the base in the world by (linear, angular) and the joints by qdot during dt.
        q2 = q.copy()
        q2[7:] += qdot * dt
        q2[0:3] += linear * dt
        rotation = pin.Quaternion(q[6], q[3], q[4], q[5]).toRotationMatrix()
        q2[3:7] = pin.Quaternion(pin.exp3(angular * dt) @ rotation).coeffs()
        later = estimate_state(talos, names, list(q2[7:]), base_pose=(q2[0:3], q2[3:7]))
        np.testing.assert_allclose(state.com_velocity, (later.com_position - state.com_position) / dt,
                                   atol=1e-4)


def test_anchored_com_velocity_keeps_the_anchored_sole_still(talos):
    rng = np.random.default_rng(9)
    q = talos.reference_configuration()
    names, positions = _arrays(talos, q)
    frame = talos.right_foot_frame
    anchor = (frame, FootPose((0.1, -0.085, 0.0), 0.2))
    dt = 1e-6
    qdot = rng.normal(scale=0.5, size=talos.nq - 7)
    state = estimate_state(talos, names, positions, anchor=anchor, joint_velocities=qdot)
    later = estimate_state(talos, names, list(np.array(positions) + qdot * dt), anchor=anchor)
    np.testing.assert_allclose(state.com_velocity, (later.com_position - state.com_position) / dt, atol=1e-4)


def test_extra_joints_are_ignored_and_missing_or_nan_joints_are_refused(talos):
    q = talos.reference_configuration()
    names, positions = _arrays(talos, q)
    base = (q[0:3], q[3:7])
    state = estimate_state(talos, names + ["no_such_joint"], positions + [1.0], base_pose=base)
    np.testing.assert_allclose(state.configuration, q, atol=1e-12)
    with pytest.raises(InputError, match=names[3]):
        estimate_state(talos, names[:3] + names[4:], positions[:3] + positions[4:], base_pose=base)
    with pytest.raises(InputError, match="finite"):
        estimate_state(talos, names, positions[:5] + [float("nan")] + positions[6:], base_pose=base)
    with pytest.raises(InputError, match="one value per name"):
        estimate_state(talos, names, positions[:-1], base_pose=base)
    with pytest.raises(InputError, match="finite"):
        estimate_state(talos, names, positions, base_pose=([0.0, float("inf"), 0.0], q[3:7]))
    with pytest.raises(InputError, match="quaternion"):
        estimate_state(talos, names, positions, base_pose=(q[0:3], [0.0, 0.0, 0.0, 0.0]))
    with pytest.raises(InputError, match="anchor"):
        estimate_state(talos, names, positions)
    with pytest.raises(FrameNotFound):
        estimate_state(talos, names, positions, anchor=("no_such_sole", FootPose((0.0, 0.0, 0.0))))
