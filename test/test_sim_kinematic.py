"""Kinematic and wheel plants: weight on the feet, IMU at rest, servo timing, no slip, contacts, seeds."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.errors import ConfigError, InputError, JointNotFound, ModelError, ParameterError
from walk_mpc.core.sim import GRAVITY, JointServo, JointTrajectoryCommand, create_backend
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.sim.wheels import WheelPlant

RIGHT_LEG = ("leg_right_3_joint", "leg_right_4_joint", "leg_right_5_joint")  # hip, knee, ankle pitch
HIP_AND_ANKLE_ROLL = ("leg_left_2_joint", "leg_right_2_joint", "leg_left_6_joint", "leg_right_6_joint")


def make_sim(talos, **kwargs):
    return KinematicSim(KinematicSim.Parameters(**kwargs), robot=talos)


def joint(sim, name):
    return sim.sensor_sample().joint_pos[sim.joint_names.index(name)]


def foot_forces(sample):
    return sample.contact[:4].sum(), sample.contact[4:].sum()


def ramp(sim, names, deltas, duration):
    """Move ``names`` by ``deltas`` from their current positions over ``duration`` [s], stepping through."""
    start = np.array([joint(sim, n) for n in names])
    sim.set_trajectory(JointTrajectoryCommand(names, (duration,), [start + np.asarray(deltas)]))
    states = [sim.step() for _ in range(round(duration / sim.hardware_period))]
    return states


# ---------------------------------------------------------------------------------------------- at rest


def test_standing_in_the_reference_posture_puts_the_weight_evenly_on_both_feet(talos):
    sim = make_sim(talos)
    for _ in range(5):
        state = sim.step()
    sample = sim.sensor_sample()
    weight = talos.mass * GRAVITY
    left, right = foot_forces(sample)
    assert sample.contact.sum() == pytest.approx(weight, rel=1e-9)
    assert abs(left - right) < 0.01 * weight
    assert state.in_contact == (True, True)
    assert abs(state.zmp[1]) < 0.085 and abs(state.zmp[0]) < 0.1  # between the feet
    assert sample.zmp_from_contacts(sim.corner_positions()) == pytest.approx(state.zmp, abs=1e-9)
    assert state.zmp_clip_count == 0 and not state.fallen


def test_imu_at_rest_reads_plus_g_along_its_vertical_and_no_rotation(talos):
    sim = make_sim(talos)
    for _ in range(5):
        sim.step()
    sample = sim.sensor_sample()
    assert sample.imu_linear_acc.shape == (1, 3)
    assert np.linalg.norm(sample.imu_linear_acc[0]) == pytest.approx(GRAVITY, abs=1e-9)
    assert sample.imu_linear_acc[0, 2] > GRAVITY - 1e-3  # a - g with g = (0, 0, -9.81): +g upwards
    assert np.allclose(sample.imu_angular_vel, 0.0, atol=1e-12)
    assert sample.base_estimate_valid
    assert np.allclose(sample.base_linear_velocity, 0.0, atol=1e-12)
    assert np.linalg.norm(sample.imu_orientation_xyzw[0]) == pytest.approx(1.0)


def test_samples_name_every_model_joint_as_joint_and_motor(talos):
    sample = make_sim(talos).sensor_sample()
    assert sample.joint_names == talos.joint_names == sample.motor_names
    assert sample.contact_names[:4] == ("left_foot_fl", "left_foot_fr", "left_foot_bl", "left_foot_br")
    assert len(sample.contact_names) == 8 and sample.motor_torque.shape == (len(talos.joint_names),)


# ---------------------------------------------------------------------------------------------- servo


def test_step_command_starts_after_the_latency_and_converges_with_the_lag(talos):
    tau, latency = 0.05, 0.03
    sim = make_sim(talos, lag_time_constant=tau, latency=latency)
    q0 = joint(sim, "arm_left_4_joint")
    sim.set_command(["arm_left_4_joint"], [q0 - 0.3])
    for _ in range(60):
        sim.step()
        t = sim.time
        expected = q0 if t <= latency + 1e-12 else q0 - 0.3 * (1.0 - math.exp(-(t - latency) / tau))
        assert joint(sim, "arm_left_4_joint") == pytest.approx(expected, abs=1e-12)
    assert joint(sim, "arm_left_4_joint") == pytest.approx(q0 - 0.3, abs=1e-4)


def test_trajectory_interpolates_linearly_from_the_setpoint_then_holds_the_last_point(talos):
    sim = make_sim(talos, lag_time_constant=0.0)
    q0 = joint(sim, "arm_right_1_joint")
    sim.set_trajectory(JointTrajectoryCommand(("arm_right_1_joint",), (0.02, 0.04), [[q0 + 0.2], [q0 + 0.3]],
                                              stamp=0.0))
    expected = [q0 + 0.1, q0 + 0.2, q0 + 0.25, q0 + 0.3, q0 + 0.3, q0 + 0.3]
    for value in expected:
        sim.step()
        assert joint(sim, "arm_right_1_joint") == pytest.approx(value, abs=1e-12)


def test_lag_is_integrated_exactly_whatever_the_step_size():
    servos = [JointServo(("a",), 0.03, 0.015) for _ in range(2)]
    for servo in servos:
        servo.reset(np.zeros(1))
        servo.command(JointTrajectoryCommand(("a",), (0.02, 0.04), [[1.0], [0.5]], stamp=0.0), 0.0)
    coarse = [servos[0].step(0.01 * k)[0][0] for k in range(1, 11)]
    fine = [servos[1].step(0.0025 * k)[0][0] for k in range(1, 41)][3::4]
    assert coarse == pytest.approx(fine, abs=1e-12)


def test_unknown_joint_rejects_the_whole_command(talos):
    sim = make_sim(talos, lag_time_constant=0.0)
    q0 = joint(sim, "arm_left_1_joint")
    with pytest.raises(JointNotFound) as info:
        sim.set_command(["arm_left_1_joint", "no_such_joint"], [q0 + 0.5, 0.0])
    assert "arm_left_1_joint" in info.value.joints
    sim.step()
    assert joint(sim, "arm_left_1_joint") == q0


def test_malformed_trajectories_are_input_errors():
    with pytest.raises(InputError):
        JointTrajectoryCommand(("a",), (0.02, 0.01), [[0.0], [1.0]])
    with pytest.raises(InputError):
        JointTrajectoryCommand(("a", "b"), (0.02,), [[0.0]])
    with pytest.raises(InputError):
        JointTrajectoryCommand(("a",), (0.02,), [[math.nan]])


# ---------------------------------------------------------------------------------------------- contacts


def test_stance_foot_stays_fixed_while_the_other_leg_lifts_and_lands(talos):
    sim = make_sim(talos)
    sim.step()
    left_before = talos.foot_poses(sim.state.q)["left_sole_link"]
    lift = (-0.15, 0.3, -0.15)
    states = ramp(sim, RIGHT_LEG, lift, 0.5) + [sim.step() for _ in range(10)]
    lifted = states[-1]
    assert lifted.in_contact == (True, False)
    assert foot_forces(sim.sensor_sample())[1] == 0.0
    assert foot_forces(sim.sensor_sample())[0] == pytest.approx(talos.mass * GRAVITY, rel=1e-2)
    assert talos.foot_poses(lifted.q)["right_sole_link"][0][2] > 0.01
    single = [state for state in states if state.in_contact == (True, False)]
    assert len(single) > 10
    anchored = talos.foot_poses(single[0].q)["left_sole_link"]
    # Until lift-off both feet share the mismatch (< contact_height); then the stance foot is fixed.
    assert anchored[0] == pytest.approx(left_before[0], abs=sim.params.contact_height)
    for state in single:
        position, rotation = talos.foot_poses(state.q)["left_sole_link"]
        assert position == pytest.approx(anchored[0], abs=1e-9)  # no slip
        assert rotation == pytest.approx(anchored[1], abs=1e-9)
    ramp(sim, RIGHT_LEG, [-d for d in lift], 0.5)
    landed = [sim.step() for _ in range(10)][-1]
    assert landed.in_contact == (True, True)
    assert foot_forces(sim.sensor_sample())[1] > 0.2 * talos.mass * GRAVITY


def test_slow_sway_keeps_the_zmp_in_the_support_and_readable_from_the_corner_forces(talos):
    sim = make_sim(talos)
    states = ramp(sim, HIP_AND_ANKLE_ROLL, (-0.06, -0.06, 0.06, 0.06), 1.0) + [sim.step() for _ in range(30)]
    assert states[-1].com[1] > 0.03  # the CoM moved toward the left foot
    left, right = foot_forces(sim.sensor_sample())
    assert left > right
    for _ in range(5):
        state = sim.step()
        cop = sim.sensor_sample().zmp_from_contacts(sim.corner_positions())
        assert cop[:2] == pytest.approx(state.zmp[:2], abs=1e-9)
    assert state.zmp_clip_count == 0


def test_lifting_a_foot_with_the_com_between_the_feet_counts_clipped_zmp(talos):
    sim = make_sim(talos)
    states = ramp(sim, RIGHT_LEG, (-0.15, 0.3, -0.15), 0.5)
    assert states[-1].in_contact == (True, False)
    assert states[-1].zmp_clip_count > 0  # the robot would tip over its left foot's inner edge


def base_positions(states):
    return np.array([state.q[:3] for state in states])


def test_double_support_keeps_both_feet_anchored_when_the_commands_press_one_into_the_ground(talos):
    sim = make_sim(talos)
    # Bend the right leg so that its sole goes 1 mm (< contact_height) below the left one: both stay down.
    states = ramp(sim, RIGHT_LEG, (0.002, -0.004, 0.002), 0.2) + [sim.step() for _ in range(20)]
    assert all(state.in_contact == (True, True) for state in states)
    forces = [foot_forces(sim.sensor_sample()) for _ in range(1)]
    assert min(forces[0]) > 0.2 * talos.mass * GRAVITY  # both feet carry weight: no flapping
    assert sim.state.zmp_clip_count == 0


def test_lift_off_moves_the_base_without_a_jump(talos):
    sim = make_sim(talos)
    left_leg = tuple(name.replace("right", "left") for name in RIGHT_LEG)
    states = [sim.step()] + ramp(sim, left_leg, (-0.15, 0.3, -0.15), 0.3)
    flags = [state.in_contact for state in states]
    assert flags[0] == (True, True) and flags[-1] == (False, True)
    # The base moves with the commanded motion only: as the left foot rises the base goes onto the right
    # foot's candidate before the lift-off, so its second differences stay at the ramp's own (a jump of
    # the base would be a spike of the ZMP). (The left foot: Talos' reference posture holds its left sole
    # 0.29 mm above the right one, which the reset puts flat on the ground as well.)
    jerk = np.abs(np.diff(base_positions(states), n=2, axis=0)).max()
    assert jerk < 5e-5  # [m] per step^2: 0.5 m/s^2


def test_a_foot_set_down_a_fraction_of_a_millimetre_above_the_ground_lands(talos):
    sim = make_sim(talos)
    left_leg = tuple(name.replace("right", "left") for name in RIGHT_LEG)
    start = [joint(sim, name) for name in left_leg]
    ramp(sim, left_leg, (-0.15, 0.3, -0.15), 0.5)
    assert sim.state.in_contact == (False, True)
    # Back to the reference posture, whose left sole is 0.29 mm above the right one: above landing_height,
    # but set down (it stops descending) within contact_height: it lands there.
    sim.set_trajectory(JointTrajectoryCommand(left_leg, (0.5,), [start]))
    states = [sim.step() for _ in range(70)]
    assert states[-1].in_contact == (True, True)
    height = talos.foot_poses(states[-1].q)["left_sole_link"][0][2]
    assert sim.params.landing_height < height < sim.params.contact_height
    landed = next(k for k, state in enumerate(states) if state.in_contact == (True, True))
    assert landed > 0 and all(state.in_contact == (True, True) for state in states[landed:])


def test_com_acceleration_is_the_mean_over_the_command_period(talos):
    """Piecewise linear setpoints (a command every 20 ms) make the sample-to-sample second differences
    alternate; the window of one command period gives back the smooth acceleration."""
    zmps = {}
    for window in (0.01, 0.02):
        sim = make_sim(talos, lag_time_constant=0.0, acceleration_window=window,
                       acceleration_filter_time_constant=0.0)
        names = HIP_AND_ANKLE_ROLL
        start = np.array([joint(sim, n) for n in names])
        direction = np.array((-1.0, -1.0, 1.0, 1.0))
        series = []
        for k in range(25):  # constant angular acceleration, commanded at 20 ms knots
            t = 0.02 * k
            points = [start + direction * 0.5 * (t + dt) ** 2 for dt in (0.02, 0.04)]
            sim.set_trajectory(JointTrajectoryCommand(names, (0.02, 0.04), points, stamp=sim.time))
            for _ in range(2):
                series.append(sim.step().zmp[1])
        zmps[window] = np.array(series[10:])
    alternation = {w: np.abs(np.diff(z, n=2)).max() for w, z in zmps.items()}
    assert alternation[0.02] < 0.1 * alternation[0.01]


def test_commands_have_no_effect_on_foot_forces_sum_at_constant_com_height(talos):
    sim = make_sim(talos)
    ramp(sim, ("arm_left_1_joint",), (0.4,), 0.3)
    for _ in range(50):
        sim.step()
    assert sim.sensor_sample().contact.sum() == pytest.approx(talos.mass * GRAVITY, rel=1e-6)


# ---------------------------------------------------------------------------------------------- noise, reset


def test_same_seed_gives_the_same_samples_and_another_seed_differs(talos):
    noise = dict(joint_position_noise=1e-3, joint_velocity_noise=1e-2, imu_angular_velocity_noise=1e-3,
                 imu_linear_acceleration_noise=1e-2)
    runs = []
    for seed in (7, 7, 8):
        sim = make_sim(talos, seed=seed, **noise)
        ramp(sim, ("arm_left_1_joint",), (0.2,), 0.1)
        sample = sim.sensor_sample()
        runs.append(np.concatenate((sample.joint_pos, sample.joint_vel, sample.imu_linear_acc[0])))
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_reset_returns_to_the_initial_state(talos):
    sim = make_sim(talos)
    first = sim.sensor_sample()
    ramp(sim, RIGHT_LEG, (-0.1, 0.2, -0.1), 0.2)
    sim.reset()
    assert sim.time == 0.0 and sim.state.step_count == 0
    assert np.array_equal(sim.sensor_sample().joint_pos, first.joint_pos)
    assert np.array_equal(sim.sensor_sample().contact, first.contact)


def test_parameters_are_checked_with_named_messages():
    with pytest.raises(ParameterError, match="latency"):
        KinematicSim.Parameters(latency=-0.01)
    with pytest.raises(ParameterError, match="hardware_period"):
        KinematicSim.Parameters(hardware_period=0.0)
    with pytest.raises(ParameterError, match="initial_joint_positions"):
        KinematicSim.Parameters(initial_joint_names=("a",), initial_joint_positions=())
    with pytest.raises(ParameterError, match="landing_height"):
        KinematicSim.Parameters(landing_height=0.003, contact_height=0.002)
    with pytest.raises(ParameterError, match="acceleration_window"):
        KinematicSim.Parameters(acceleration_window=-0.01)


def test_step_rejects_non_positive_dt(talos):
    with pytest.raises(InputError):
        make_sim(talos).step(0.0)


def test_quadruped_is_not_a_kinematic_biped():
    with pytest.raises(ModelError, match="biped"):
        KinematicSim(KinematicSim.Parameters(robot=RobotModel.Parameters(robot="solo12")))


@pytest.mark.skipif(importlib.util.find_spec("walk_mpc.core.sim.mujoco") is not None,
                    reason="the MuJoCo backend exists")
def test_missing_mujoco_backend_is_a_clear_configuration_error():
    with pytest.raises(ConfigError, match="mujoco"):
        create_backend("mujoco")


def test_unknown_backend_is_a_configuration_error():
    with pytest.raises(ConfigError, match="kinematic"):
        create_backend("gazebo")


# ---------------------------------------------------------------------------------------------- wheels


def test_wheel_plant_spins_the_wheels_freely_in_the_air_and_rolls_on_the_ground():
    plant = WheelPlant(WheelPlant.Parameters(ground=0.5, air=0.5, touchdown=0.5, seed=3))
    wheels = [plant.joint_names.index(w) for w in plant.wheels]
    assert plant.wheels == ("left_wheel", "right_wheel")
    assert set(plant.wheels) <= set(plant.sensor_sample().motor_names)
    flags, torques = [], []
    for _ in range(1500):
        state = plant.step()
        flags.append(state.in_contact[0])
        torques.append(np.abs(plant.sensor_sample().motor_torque[wheels]).max())
    flags = np.array(flags)
    assert flags[:499].all() and not flags[500:999].any() and flags[1000:].all()
    assert plant.time == pytest.approx(1.5)


def test_wheel_plant_is_deterministic_and_rejects_wheel_commands():
    samples = []
    for _ in range(2):
        plant = WheelPlant(WheelPlant.Parameters(seed=5))
        for _ in range(100):
            plant.step()
        samples.append(plant.sensor_sample().motor_torque)
    assert np.array_equal(samples[0], samples[1])
    with pytest.raises(InputError, match="wheel"):
        plant.set_command(["left_wheel"], [1.0])
    plant.set_command(["left_knee"], [0.3])
