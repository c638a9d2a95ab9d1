"""State without the simulator's truth (estimate_state_from_imu): base orientation from the IMU, position and
velocity from the legs' kinematics of the soles in contact, against MuJoCo's truth."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco")

from walk_mpc.core.body.state_estimation import estimate_state, estimate_state_from_imu  # noqa: E402
from walk_mpc.core.errors import InputError  # noqa: E402
from walk_mpc.core.sim.kinematic import KinematicSim  # noqa: E402
from walk_mpc.core.sim.mujoco import MujocoSim  # noqa: E402


@pytest.fixture(scope="module")
def pushed_sample(talos):
    """A standing Talos 0.15 s after the start of a 60 N sideways push on the pelvis (it sways)."""
    sim = MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(), robot=talos)
    sim.set_base_force(np.array([0.0, 60.0, 0.0]))
    for _ in range(15):
        sim.step()
    return sim.sensor_sample()


def test_the_imu_and_the_legs_give_the_com_and_its_velocity_of_the_truth(talos, pushed_sample):
    s = pushed_sample
    truth = estimate_state(talos, s.joint_names, s.joint_pos, (s.base_position, s.base_orientation_xyzw),
                           joint_velocities=s.joint_vel, base_twist=(s.base_linear_velocity,
                                                                     s.base_angular_velocity))
    anchors = {frame: (np.array(truth.feet[frame].position), 1.0) for frame in talos.foot_frames}
    estimate = estimate_state_from_imu(talos, s.joint_names, s.joint_pos, s.imu_names[0],
                                       s.imu_orientation_xyzw[0], anchors, s.joint_vel, s.imu_angular_vel[0])
    assert estimate.base_source == "imu"
    assert np.linalg.norm(truth.com_velocity) > 0.01  # the robot moves
    np.testing.assert_allclose(estimate.com_position, truth.com_position, atol=2e-3)
    np.testing.assert_allclose(estimate.com_velocity, truth.com_velocity, atol=0.01)


def test_an_estimate_needs_a_sole_in_contact_with_a_positive_weight(talos, pushed_sample):
    s = pushed_sample
    with pytest.raises(InputError, match="anchors"):
        estimate_state_from_imu(talos, s.joint_names, s.joint_pos, s.imu_names[0], s.imu_orientation_xyzw[0],
                                {})
    frame = talos.foot_frames[0]
    with pytest.raises(InputError, match="weights"):
        estimate_state_from_imu(talos, s.joint_names, s.joint_pos, s.imu_names[0], s.imu_orientation_xyzw[0],
                                {frame: (np.zeros(3), 0.0)})
