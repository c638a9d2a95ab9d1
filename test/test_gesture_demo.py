"""Seed 003 on physics: Solo-12 standing on four feet in MuJoCo executes gestures through the ik's core."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco")

from walk_mpc.gesture_demo import GESTURES, gesturing_robot, run_gestures  # noqa: E402

RADIUS = 0.0175  # [m] config/robots/solo12.yaml foot_radius: a foot on the ground has its frame this high


@pytest.fixture(scope="module")
def gestures():
    return run_gestures("solo12", verbose=False)


def at(run, index: int) -> int:
    """Sample index at the end of gesture ``index``."""
    return int(np.searchsorted(run.times, run.marks[index][0]))


def test_solo12_stands_on_its_four_feet_with_its_weight_on_the_contact_sensors():
    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.sim.mujoco import MujocoSim

    robot = RobotModel(RobotModel.Parameters(robot="solo12"))
    sim = MujocoSim(KinematicSim.Parameters(robot=robot.params), robot=robot)
    states = [sim.step() for _ in range(100)]
    sample = sim.sensor_sample()
    assert sample.contact_names == ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
    assert sample.contact.sum() == pytest.approx(robot.mass * 9.81, rel=0.01)
    assert np.ptp(sample.contact) < 0.1 * sample.contact.mean()  # symmetric stance
    assert all(s.in_contact == (True,) * 4 and not s.fallen for s in states)


def test_the_sequence_runs_to_the_end_without_a_fall(gestures):
    assert not gestures.fallen
    assert len(gestures.marks) == len(GESTURES)
    np.testing.assert_allclose(gestures.feet[-1][:, 2], RADIUS, atol=2e-3)  # all four feet down again
    assert gesturing_robot("solo12") and not gesturing_robot("talos")


def test_body_gestures_move_the_body_with_the_four_feet_fixed(gestures):
    start = gestures.body[0]
    feet = gestures.feet[: at(gestures, 11)]
    assert np.abs(feet[:, :, :2] - feet[0, :, :2]).max() < 0.01  # no foot slid a centimetre
    np.testing.assert_allclose(feet[:, :, 2], RADIUS, atol=2e-3)  # none left the ground
    assert all(moved for _, _, moved in gestures.marks[:12])
    assert gestures.body[at(gestures, 0), 2] - start[2] == pytest.approx(-0.03, abs=0.005)  # TZ +0.03
    assert gestures.body[at(gestures, 2), 0] - start[0] == pytest.approx(-0.03, abs=0.006)  # TX +0.03
    assert gestures.body[at(gestures, 6), 3] == pytest.approx(-0.15, abs=0.01)  # RX 0.15: roll
    assert gestures.body[at(gestures, 8), 4] == pytest.approx(-0.15, abs=0.01)  # RY: pitch
    assert gestures.body[at(gestures, 10), 5] == pytest.approx(-0.2, abs=0.03)  # RZ: yaw


def test_a_leg_without_effect_is_lifted_and_moves_alone_with_the_body_still(gestures):
    lifted = gestures.feet[at(gestures, 14)]
    assert lifted[0, 2] > RADIUS + 0.02  # front-left foot 2 cm up
    np.testing.assert_allclose(lifted[1:, 2], RADIUS, atol=2e-3)  # on the three others
    start, end = at(gestures, 14), at(gestures, 15)
    assert not gestures.marks[15][2]  # one leg with effect: legs move, not the body
    assert np.abs(gestures.body[end, :3] - gestures.body[start, :3]).max() < 0.006
    assert gestures.feet[end, 0, 0] - gestures.feet[start, 0, 0] > 0.02  # the lifted foot went forward
    assert gestures.feet[end, 0, 2] > RADIUS + 0.01  # still in the air
