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


# ------------------------------------------------------------- on a walk, against the simulator's truth
@pytest.fixture(scope="module")
def estimated_walk(talos):
    """A 6-step 0.2 m walk of Talos on MuJoCo with the samples stripped of their base pose (the planner stage
    and the stabilizer estimate from the IMU and the legs), stabilizer on. Per control tick: time, stance
    feet, the planner stage's estimate, the truth (configuration, CoM, DCM) and the stabilizer's log."""
    import dataclasses
    import sys
    from pathlib import Path

    import pinocchio as pin

    from walk_mpc.core.control.closed_loop import ClosedLoopParameters, ClosedLoopWalk
    from walk_mpc.core.control.stabilizer import StabilizerParameters

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import robustness

    sim = MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(), robot=talos)
    truth = sim.sensor_sample
    sim.sensor_sample = lambda: dataclasses.replace(truth(), base_estimate_valid=False)
    timeline = robustness.timeline_of(talos, robustness.Gait(steps=6))
    loop = ClosedLoopWalk(talos, sim, timeline, params=ClosedLoopParameters(settle_time=0.5),
                          stage_options={"whole_body": {"stabilizer": StabilizerParameters(enabled=True)}})
    ticks = []
    while sim.time < timeline.t_end + 0.5 and not loop.fallen:
        record = loop.step()
        if record is None:
            continue
        q, v = np.asarray(sim.state.q), np.asarray(sim.state.v)
        pin.centerOfMass(talos.model, talos.data, q, v, False)
        com, velocity = np.array(talos.data.com[0]), np.array(talos.data.vcom[0])
        ticks.append(dict(t=record.t, stance=loop.timeline.phase_at(record.t).stance_feet, q=q, com=com,
                          velocity=velocity, measured=loop.planner_stage.last_measured,
                          log=loop.whole_body.stabilizer.log()))
    return loop, ticks


def test_an_estimated_walk_stands_to_the_end(estimated_walk):
    loop, ticks = estimated_walk
    assert not loop.fallen, loop.fall_reason
    assert len(ticks) > 300


def _relative(talos, tick, foot):
    """(estimated, true) horizontal CoM position relative to ``foot``'s sole [m]."""
    frame = talos.foot_frames[int(foot)]
    measured = tick["measured"]
    estimated = measured.com_position[:2] - np.asarray(measured.feet[frame].position)[:2]
    true = tick["com"][:2] - np.asarray(talos.frame_pose(tick["q"], frame)[0])[:2]
    return estimated, true


def test_the_planner_stage_estimates_the_com_over_its_stance_sole_within_2_mm(talos, estimated_walk):
    """The CoM relative to the stance sole (what balance is about) from the IMU and the legs, against the
    truth, at every control tick of single support."""
    _, ticks = estimated_walk
    errors = [np.linalg.norm(np.subtract(*_relative(talos, tick, tick["stance"][0])))
              for tick in ticks if len(tick["stance"]) == 1]
    assert len(errors) > 100
    assert max(errors) < 2e-3, max(errors)


def test_the_estimated_com_drifts_from_the_truth_by_the_landing_errors_only(talos, estimated_walk):
    """The world position of the estimate is the plan's frame (each stance sole at its corrected planned
    pose): it drifts from the truth by where the feet really are, a few mm per step, not more."""
    _, ticks = estimated_walk
    drift = np.array([tick["measured"].com_position[:2] - tick["com"][:2] for tick in ticks])
    assert np.max(np.linalg.norm(drift, axis=1)) < 0.03


def test_each_lift_off_measures_the_new_stance_sole_from_the_old_one_as_the_truth_does(talos, estimated_walk):
    """Leg odometry at the contact switch: the support correction measures the landed sole from the sole it
    leaves (correction_anchor), so the corrected plan has the true step between them (within 1 mm), and
    the estimate then anchored on the new sole goes on from the same place."""
    from walk_mpc.core.body.state_estimation import correction_anchor

    loop, ticks = estimated_walk
    from walk_mpc.core.control.closed_loop import ORIGIN_NS
    from walk_mpc.core.control.types import NS_PER_S

    offset = (loop.planner_stage.origin_ns - ORIGIN_NS) / NS_PER_S  # the planner's clock: from its first tick
    by_time = {round(tick["t"] - offset, 6): tick for tick in ticks}
    corrections = loop.planner_stage.corrector.corrections
    assert len(corrections) >= 6
    for correction in corrections:
        tick = by_time[round(correction.t, 6)]
        other, pose = correction_anchor(loop.timeline, correction.t, correction.foot)
        estimated = np.subtract(correction.measured.position, pose.position)[:2]
        true = np.subtract(talos.frame_pose(tick["q"], talos.foot_frames[int(correction.foot)])[0],
                           talos.frame_pose(tick["q"], talos.foot_frames[int(other)])[0])[:2]
        assert np.linalg.norm(estimated - true) < 1e-3, (correction.t, estimated, true)
    # The whole-body stage corrected its timeline identically.
    assert loop.whole_body.timeline.steps == loop.timeline.steps


def test_the_stabilizer_estimates_the_dcm_over_its_stance_sole_within_5_mm_mostly(talos, estimated_walk):
    """The stabilizer's DCM (IMU, leg kinematics anchored on the IK's sole targets, joint velocities),
    relative to the stance sole, against the truth's, in single support: within 5 mm at most ticks; the
    velocity assumes the stance sole still, and early in single support, while the sole rocks on an edge
    after the load transfer, the error reaches a few cm (rms below 2 cm)."""
    _, ticks = estimated_walk
    errors = []
    for tick in ticks:
        log = tick["log"]
        if len(tick["stance"]) != 1 or not log:
            continue
        frame = talos.foot_frames[int(tick["stance"][0])]
        true_dcm = tick["com"][:2] + tick["velocity"][:2] / log["omega"] - np.asarray(
            talos.frame_pose(tick["q"], frame)[0])[:2]
        estimated_dcm = np.asarray(log["dcm"]) - np.asarray(tick["measured"].feet[frame].position)[:2]
        errors.append(np.linalg.norm(estimated_dcm - true_dcm))
    assert len(errors) > 100
    assert np.median(errors) < 5e-3, np.median(errors)
    assert np.sqrt(np.mean(np.square(errors))) < 0.02, np.sqrt(np.mean(np.square(errors)))
