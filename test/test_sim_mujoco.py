"""MuJoCo backends: Talos stands, weighs m g, reads like the kinematic plant, falls; upkie wheels."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

pytest.importorskip("mujoco")

from walk_mpc.core.errors import InputError, JointNotFound, ParameterError  # noqa: E402
from walk_mpc.core.sim import GRAVITY, JointTrajectoryCommand, create_backend  # noqa: E402
from walk_mpc.core.sim.kinematic import KinematicSim  # noqa: E402
from walk_mpc.core.sim.mujoco import MujocoSim, MujocoWheelSim  # noqa: E402
from walk_mpc.core.sim.wheels import WheelPlant  # noqa: E402
from walk_mpc.core.wheel.contact import WheelContact  # noqa: E402


def make_sim(talos, mujoco=None, **kwargs):
    return MujocoSim(KinematicSim.Parameters(**kwargs), mujoco, robot=talos)


def tilt_degrees(q: np.ndarray) -> float:
    rotation = pin.Quaternion(q[3:7]).toRotationMatrix()
    return math.degrees(math.acos(min(1.0, float(rotation[2, 2]))))


def run(sim, seconds: float):
    return [sim.step() for _ in range(round(seconds / sim.hardware_period))]


# ---------------------------------------------------------------------------------------------- standing


def test_talos_stands_two_seconds_in_the_reference_posture_with_default_gains_and_feedforward(talos):
    sim = make_sim(talos)
    states = run(sim, 2.0)
    assert max(tilt_degrees(s.q) for s in states) < 1.0
    assert not any(s.fallen for s in states)
    assert all(s.in_contact == (True, True) for s in states)
    sample = sim.sensor_sample()
    reference = sim.initial_configuration()[7:]
    assert np.max(np.abs(sample.joint_pos - reference)) < 0.005  # rad
    assert sample.time == pytest.approx(2.0)
    assert states[-1].step_count == 200


def test_contact_forces_sum_to_the_weight_at_rest_and_their_cop_is_between_the_feet(talos):
    sim = make_sim(talos)
    run(sim, 1.0)
    sample, state = sim.sensor_sample(), sim.state
    weight = talos.mass * GRAVITY
    assert sample.contact.sum() == pytest.approx(weight, rel=0.02)
    left, right = sample.contact[:4].sum(), sample.contact[4:].sum()
    # Stiff (5 ms) contacts make the split of a statically indeterminate stance sensitive to sub-millimetre
    # leg length differences: 45/55 % of the weight (49/51 % with MuJoCo's 20 ms default).
    assert abs(left - right) < 0.15 * weight
    assert np.all(sample.contact >= 0.0)
    zmp = sample.zmp_from_contacts(sim.corner_positions())
    assert zmp[:2] == pytest.approx(state.cop[:2], abs=1e-6)  # corners carry each sole's CoP exactly
    assert abs(zmp[0] - state.com[0]) < 0.01 and abs(zmp[1] - state.com[1]) < 0.01  # static: CoP under CoM


def test_gravity_feedforward_reduces_the_standing_joint_error(talos):
    errors = []
    for feedforward in (True, False):
        sim = make_sim(talos, MujocoSim.Parameters(gravity_feedforward=feedforward))
        run(sim, 0.5)
        errors.append(np.max(np.abs(sim.sensor_sample().joint_pos - sim.initial_configuration()[7:])))
    assert errors[0] < 0.2 * errors[1]


def test_imu_at_rest_reads_plus_g_upward_and_no_rotation(talos):
    sim = make_sim(talos)
    run(sim, 1.0)
    sample = sim.sensor_sample()
    assert sample.imu_linear_acc[0] == pytest.approx([0.0, 0.0, GRAVITY], abs=0.05)
    assert np.linalg.norm(sample.imu_angular_vel[0]) < 1e-2
    assert sample.imu_orientation_xyzw[0] == pytest.approx(sample.base_orientation_xyzw, abs=1e-9)
    assert sample.base_estimate_valid
    assert sample.base_position == pytest.approx(sim.state.q[0:3], abs=1e-9)  # base frame = root joint


# ---------------------------------------------------------------------------------------------- interface


def test_sensor_names_and_order_match_the_kinematic_plant(talos):
    physics, kinematic = make_sim(talos), KinematicSim(robot=talos)
    a, b = physics.sensor_sample(), kinematic.sensor_sample()
    for field in ("joint_names", "motor_names", "contact_names", "imu_names"):
        assert getattr(a, field) == getattr(b, field)
    assert physics.joint_names == kinematic.joint_names == talos.joint_names
    assert physics.contact_names == kinematic.contact_names
    assert set(physics.corner_positions()) == set(kinematic.corner_positions())
    for name, position in kinematic.corner_positions().items():  # same geometry, same posture
        assert physics.corner_positions()[name] == pytest.approx(position, abs=5e-4)  # SRDF soles: not flat
    assert physics.state.contact_bodies == kinematic.state.contact_bodies


def test_create_backend_by_name_builds_the_mujoco_biped():
    sim = create_backend("mujoco", KinematicSim.Parameters())
    assert isinstance(sim, MujocoSim)
    assert sim.hardware_period == 0.01 and sim.substeps == 10


def test_trajectory_command_moves_a_joint_to_its_last_point(talos):
    sim = make_sim(talos)
    name = "arm_left_4_joint"
    k = sim.joint_names.index(name)
    start = sim.sensor_sample().joint_pos[k]
    command = JointTrajectoryCommand((name,), (0.2, 0.4), [[start - 0.1], [start - 0.3]])
    sim.set_trajectory(command)
    run(sim, 0.2)
    halfway = sim.sensor_sample().joint_pos[k]
    assert start - 0.13 < halfway < start - 0.05  # following the first segment (PD lag)
    run(sim, 0.8)
    assert sim.sensor_sample().joint_pos[k] == pytest.approx(start - 0.3, abs=0.01)
    assert not sim.state.fallen


def ramp_tracking_error(talos, mujoco) -> float:
    """Error [rad] of an arm joint following a 1 rad/s ramp, 0.3 s in."""
    sim = make_sim(talos, mujoco)
    name = "arm_left_4_joint"
    k = sim.joint_names.index(name)
    start = sim.sensor_sample().joint_pos[k]
    sim.set_trajectory(JointTrajectoryCommand((name,), (0.0, 0.5), [[start], [start - 0.5]], stamp=0.0))
    run(sim, 0.3)
    return abs(sim.sensor_sample().joint_pos[k] - (start - 0.3))


def test_velocity_feedforward_removes_most_of_the_lag_behind_a_ramp(talos):
    lagging = ramp_tracking_error(talos, MujocoSim.Parameters())
    feedforward = ramp_tracking_error(talos, MujocoSim.Parameters(velocity_feedforward=True))
    assert lagging > 0.005  # about kd / kp * 1 rad/s = 10 mrad
    assert feedforward < 0.3 * lagging


def sole_heights(sim) -> np.ndarray:
    """Height [m] of each sole frame after a second of standing."""
    run(sim, 1.0)
    return np.array([sim.data.site_xpos[s][2] for s in sim._sole_sites])


def test_stiff_contacts_keep_the_standing_soles_within_a_tenth_of_a_millimetre_of_the_floor(talos):
    stiff = sole_heights(make_sim(talos))  # default contact time constant: 5 ms
    soft = sole_heights(make_sim(talos, MujocoSim.Parameters(contact_time_constant=0.02)))
    assert np.all(np.abs(stiff) < 1e-4)
    assert np.all(soft < -5e-4)  # MuJoCo's default 20 ms: the soles sink 0.7 mm


def test_command_with_an_unknown_joint_is_rejected_as_a_whole(talos):
    sim = make_sim(talos)
    with pytest.raises(JointNotFound):
        sim.set_command(("arm_left_4_joint", "no_such_joint"), (0.0, 0.0))


def test_dt_must_be_a_multiple_of_the_physics_timestep(talos):
    sim = make_sim(talos)
    with pytest.raises(InputError):
        sim.step(0.0105)
    sim.step(0.002)
    assert sim.time == pytest.approx(0.002)
    with pytest.raises(ParameterError):
        make_sim(talos, MujocoSim.Parameters(timestep=0.003))


def test_parameters_reject_a_non_positive_contact_time_constant():
    with pytest.raises(ParameterError):
        MujocoSim.Parameters(contact_time_constant=0.0)
    with pytest.raises(ParameterError):
        MujocoSim.Parameters(velocity_feedforward=1)


def test_parameters_reject_gains_that_do_not_match_their_patterns():
    with pytest.raises(ParameterError, match="gain_kp"):
        MujocoSim.Parameters(gain_patterns=("leg_", "arm_"), gain_kp=(1.0,), gain_kd=(1.0, 1.0))
    with pytest.raises(ParameterError, match="integrator"):
        MujocoSim.Parameters(integrator="verlet")
    gains = MujocoSim.Parameters(gain_patterns=("leg_",), gain_kp=(9.0,), gain_kd=(1.0,), kp=3.0, kd=0.5)
    assert gains.gains("leg_left_4_joint") == (9.0, 1.0)
    assert gains.gains("arm_left_4_joint") == (3.0, 0.5)


def test_servo_gains_come_from_the_robot_description_joint_groups_after_the_patterns(talos):
    gains = MujocoSim.Parameters(kp=3.0, kd=0.5)
    assert gains.gains("leg_left_4_joint", talos) == (8000.0, 80.0)  # config/robots/talos.yaml: legs
    assert gains.gains("arm_left_4_joint", talos) == (2000.0, 20.0)  # its servo_default
    tuned = MujocoSim.Parameters(gain_patterns=("leg_",), gain_kp=(9.0,), gain_kd=(1.0,))
    assert tuned.gains("leg_left_4_joint", talos) == (9.0, 1.0)
    sim = make_sim(talos)
    m = sim.model
    assert m.actuator_gainprm[m.actuator("leg_left_4_joint").id][0] == 8000.0
    assert m.actuator_gainprm[m.actuator("arm_left_4_joint").id][0] == 2000.0


def test_same_parameters_and_commands_give_identical_samples(talos):
    samples = []
    for _ in range(2):
        sim = make_sim(talos, joint_position_noise=1e-3, seed=3)
        sim.set_command(("torso_2_joint",), (0.1,), stamp=0.3)
        run(sim, 0.5)
        samples.append(sim.sensor_sample())
    for field in ("joint_pos", "joint_vel", "motor_torque", "contact", "imu_linear_acc", "base_position"):
        assert np.array_equal(getattr(samples[0], field), getattr(samples[1], field))


def test_reset_returns_to_time_zero_and_the_same_first_sample(talos):
    sim = make_sim(talos)
    first = sim.step()
    run(sim, 0.3)
    sim.reset()
    assert sim.time == 0.0 and sim.state.step_count == 0
    again = sim.step()
    assert np.array_equal(first.q, again.q)


# ---------------------------------------------------------------------------------------------- falls


def test_fall_is_detected_and_latched_when_the_gains_are_zero(talos):
    limp = MujocoSim.Parameters(gain_patterns=("_joint",), gain_kp=(0.0,), gain_kd=(0.0,),
                                gravity_feedforward=False)
    sim = make_sim(talos, limp)
    states = run(sim, 2.0)
    assert not states[0].fallen
    assert states[-1].fallen
    fallen_at = next(i for i, s in enumerate(states) if s.fallen)
    assert all(s.fallen for s in states[fallen_at:])
    sim.reset()
    assert not sim.state.fallen


def test_fall_is_detected_when_the_base_is_pushed_over(talos):
    sim = make_sim(talos)
    run(sim, 0.2)
    sim.set_base_force([0.0, 600.0, 0.0])  # sideways, at the pelvis
    run(sim, 0.3)
    sim.set_base_force([0.0, 0.0, 0.0])
    states = run(sim, 2.0)
    assert states[-1].fallen
    assert tilt_degrees(states[-1].q) > math.degrees(sim.params.fall_tilt) or (
        states[-1].q[2] < 0.9 * states[0].q[2])


def test_a_small_push_does_not_make_the_robot_fall(talos):
    sim = make_sim(talos)
    sim.set_base_force([20.0, 0.0, 0.0])
    states = run(sim, 1.0)
    assert not any(s.fallen for s in states)


def test_base_force_acts_at_the_base_origin_on_a_floating_robot(talos):
    """Without gravity nor contact, a force F at the base origin p changes the robot's momentum by h F and
    its angular momentum about the centre of mass c by h (p - c) x F (joint torques are internal)."""
    sim = make_sim(talos, MujocoSim.Parameters(gravity_feedforward=False))
    sim.model.opt.gravity[:] = 0.0
    sim.data.qpos[2] += 1.0  # 1 m above the floor: no contact
    sim._mj.mj_forward(sim.model, sim.data)
    model, data = talos.model, talos.model.createData()
    q = sim.configuration()
    pin.framesForwardKinematics(model, data, q)
    origin = data.oMf[talos.frame_id(talos.base_frame)].translation.copy()  # the root body's origin
    com = pin.centerOfMass(model, data, q)
    force = np.array([60.0, -80.0, 0.0])
    h = sim.mujoco_params.timestep
    sim.set_base_force(force)
    state = sim.step(h)
    assert state.in_contact == (False, False)
    momentum = pin.computeCentroidalMomentum(model, data, state.q, state.v)
    assert momentum.linear == pytest.approx(h * force, rel=1e-3, abs=1e-6)
    expected = h * np.cross(origin - com, force)
    # At the base body's centre of mass instead (MuJoCo's xfrc_applied alone), the moment would be off by
    # h (origin - body com) x F: two thirds of the expected moment here.
    assert np.linalg.norm(momentum.angular - expected) < 0.01 * np.linalg.norm(expected)


# ---------------------------------------------------------------------------------------------- upkie


@pytest.fixture(scope="module")
def upkie_run():
    """Upkie rolling 1.5 s, lifted 1 s, back on the ground 1.5 s, with a wheel contact observer per wheel."""
    sim = MujocoWheelSim(WheelPlant.Parameters(ground=1.5, air=1.0, touchdown=1.5))
    observers = [WheelContact() for _ in sim.wheels]
    index = [sim.joint_names.index(w) for w in sim.wheels]
    contact, truth, in_air, torques, velocities = [], [], [], [], []
    for _ in range(4000):
        state = sim.step()
        sample = sim.sensor_sample()
        for observer, i in zip(observers, index):
            torque, velocity = float(sample.motor_torque[i]), float(sample.joint_vel[i])
            assert observer.observe(torque, velocity, sim.hardware_period)
        contact.append([o.contact for o in observers])
        truth.append(state.in_contact)
        in_air.append(sim.in_air)
        torques.append(sample.motor_torque[index])
        velocities.append(sample.joint_vel[index])
    return sim, {name: np.array(v) for name, v in (("contact", contact), ("truth", truth), ("in_air", in_air),
                                                   ("torque", torques), ("velocity", velocities))}


def test_upkie_wheels_roll_on_the_ground_and_spin_freely_when_lifted(upkie_run):
    sim, run_ = upkie_run
    t = np.arange(1, 4001) * sim.hardware_period
    assert sim.wheels == ("left_wheel", "right_wheel")
    assert run_["truth"][(t > 0.2) & (t < 1.5)].all()  # tires touch the floor
    assert not run_["truth"][(t > 1.7) & (t < 2.5)].any()  # lifted
    assert run_["truth"][(t > 2.8)].all()  # back on the floor
    ground = np.abs(run_["torque"][(t > 0.5) & (t < 1.5)]).mean()
    air = np.abs(run_["torque"][(t > 1.8) & (t < 2.5)]).mean()
    assert air < 0.2 * ground  # the same speed profile needs little torque without the ground's load
    assert np.abs(run_["velocity"]).max() > 5.0  # rad/s


def test_wheel_contact_observer_finds_contact_on_the_ground_loses_it_lifted_and_finds_it_again(upkie_run):
    sim, run_ = upkie_run
    t = np.arange(1, 4001) * sim.hardware_period
    contact = run_["contact"]
    assert contact[(t > 0.3) & (t < 1.5)].all()
    lifted = contact[(t > 1.5) & (t < 2.5)]
    assert not lifted[-1].any()  # lost before touchdown
    assert contact[(t > 3.2)].all()  # found again after touchdown


def test_upkie_wheels_are_scripted_and_legs_are_commanded():
    sim = MujocoWheelSim(WheelPlant.Parameters(air=0.0))
    with pytest.raises(InputError):
        sim.set_command(("left_wheel",), (0.0,))
    k = sim.joint_names.index("left_knee")
    sim.set_command(("left_knee", "right_knee"), (0.2, -0.2))
    for _ in range(500):
        sim.step()
    assert sim.sensor_sample().joint_pos[k] == pytest.approx(0.2, abs=0.03)
