"""The DCM stabilizer (walk_mpc.core.control.stabilizer) and its place in the whole-body stage."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

from walk_mpc.core.control.stabilizer import (
    Stabilizer,
    StabilizerParameters,
    clamp_to_polygon,
    convex_hull,
    sole_rotation,
)
from walk_mpc.core.control.types import CoMReference, WalkPlan
from walk_mpc.core.control.whole_body_stage import WholeBodyStage, WholeBodyStageParameters
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.sensors import SensorSample
from walk_mpc.core.walk.step import Foot

EVENTS = Path(__file__).parent / "data" / "whole_body_stage_events.pkl.gz"


def _digest(command):
    if command is None:
        return None
    data = (np.ascontiguousarray(command.positions).tobytes()
            + np.ascontiguousarray(command.velocities).tobytes())
    return (command.stamp_ns, hashlib.sha256(data).hexdigest(), int(command.status))


def test_a_disabled_stabilizer_gives_bit_for_bit_the_commands_of_the_stage_before_it(talos):
    """Replays the inputs of a 2.2 s MuJoCo walk (start, a lift-off, a touchdown, a support change)
    recorded with the whole-body stage of the commit before the stabilizer (31238a02), and compares every
    command (positions and velocities, bit for bit) with the commands it gave then."""
    from test_mujoco_walk_core import talos_timeline

    with gzip.open(EVENTS, "rb") as f:
        recorded = pickle.load(f)["events"]
    # the recorded stage had no landing tail (a later addition, independent of the stabilizer)
    stage = WholeBodyStage(talos, WholeBodyStageParameters(stabilizer=StabilizerParameters(enabled=False),
                                                           landing_tail=False))
    compared = 0
    for event in recorded:
        kind = event[0]
        if kind == "set_plan":
            _, plan_id, walking, stamp_ns = event
            assert stage.set_plan(WalkPlan(plan_id, walking, stamp_ns, talos_timeline(talos)))
            continue
        if kind == "observe":
            _, stamp_ns, fields, expected = event
            out = stage.observe(stamp_ns, SensorSample(**fields))
        else:
            _, fields, expected = event
            out = getattr(stage, kind)(CoMReference(**fields))
        assert _digest(out) == expected, f"{kind} at event {compared}"
        compared += expected is not None
    assert compared > 200


def test_parameters_reject_negative_gains_and_a_margin_wider_than_the_sole():
    with pytest.raises(ParameterError, match="dcm_gain"):
        StabilizerParameters(dcm_gain=-1.0)
    with pytest.raises(ParameterError, match="support_margin"):
        StabilizerParameters(support_margin=0.07)
    with pytest.raises(ParameterError, match="enabled"):
        StabilizerParameters(enabled=1)
    with pytest.raises(ParameterError, match="stabilizer"):
        WholeBodyStageParameters(stabilizer={"enabled": True})


def test_a_point_inside_the_support_polygon_stays_and_one_outside_goes_to_the_nearest_edge():
    square = convex_hull(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.5, 0.5]]))
    assert len(square) == 4
    assert np.allclose(clamp_to_polygon(np.array([0.3, 0.4]), square), [0.3, 0.4])
    assert np.allclose(clamp_to_polygon(np.array([2.0, 0.5]), square), [1.0, 0.5])
    assert np.allclose(clamp_to_polygon(np.array([-1.0, -1.0]), square), [0.0, 0.0])
    segment = convex_hull(np.array([[0.0, 0.0], [1.0, 0.0]]))
    assert np.allclose(clamp_to_polygon(np.array([0.5, 3.0]), segment), [0.5, 0.0])


def test_sole_rotation_pitches_the_toe_down_for_a_positive_pitch_and_keeps_the_yaw():
    rotation = sole_rotation(0.3, 0.0, 0.1)
    toe = rotation @ np.array([1.0, 0.0, 0.0])
    assert toe[2] < 0.0
    assert math.atan2(toe[1], toe[0]) == pytest.approx(0.3)


def _standing_samples(talos, n):
    pytest.importorskip("mujoco")
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.sim.mujoco import MujocoSim

    sim = MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(), robot=talos)
    samples = []
    for _ in range(n):
        sim.step()
        samples.append(sim.sensor_sample())
    return samples


def _reference(talos, stamp_ns, com_offset):
    """A standing reference: the CoM of the reference posture shifted by ``com_offset`` [m], at rest."""
    q0 = talos.reference_configuration()
    com = np.asarray(talos.com(q0)) + np.asarray(com_offset, dtype=float)
    zmp = np.array([com[0], com[1], 0.0])
    return CoMReference(stamp_ns, 1, (0.02, 0.04), np.array([com, com]), np.zeros((2, 3)),
                        np.array([zmp, zmp]))


@pytest.mark.parametrize("offset_x", [0.02, -0.02])
def test_a_measured_dcm_ahead_of_the_reference_moves_the_com_target_back_and_the_desired_zmp_ahead(talos,
                                                                                                   offset_x):
    """Standing on MuJoCo, the reference's CoM ``offset_x`` away: the DCM error is minus that, the desired ZMP
    moves with the error (inside the soles) and the CoM target moves against it."""
    feet = talos.foot_poses(talos.reference_configuration())
    soles = {Foot.LEFT: (feet[talos.left_foot_frame][0], 0.0),
             Foot.RIGHT: (feet[talos.right_foot_frame][0], 0.0)}
    stabilizer = Stabilizer(talos, StabilizerParameters(enabled=True))
    stamp = 10**12
    for sample in _standing_samples(talos, 30):
        stamp += 10**7
        stabilizer.set_reference(_reference(talos, stamp, (offset_x, 0.0, 0.0)))
        out = stabilizer.observe(stamp, sample, soles)
    log = stabilizer.log()
    error = log["dcm_error"][0]
    assert error == pytest.approx(-offset_x, abs=0.01)
    assert np.sign(log["zmp_desired"][0] - log["zmp_reference"][0]) == np.sign(error)
    assert np.sign(out.com_offset[0]) == -np.sign(error)
    assert abs(log["zmp_desired"][0]) <= 0.1  # inside the soles (x within +-0.1 m of the sole frames)


def _with_forces(sample, left: float, right: float):
    """The sample with its soles' contact sensors scaled to ``left`` and ``right`` [N] (0: off the ground)."""
    contact = np.array(sample.contact, dtype=float)
    names = list(sample.contact_names)
    for prefix, total in (("left_foot", left), ("right_foot", right)):
        rows = [names.index(f"{prefix}_{corner}") for corner in ("fl", "fr", "bl", "br")]
        contact[rows] *= total / contact[rows].sum()
    return dataclasses.replace(sample, contact=contact)


def _bounced_landing(talos, drop: float, loaded: int = 0, **params):
    """The soles' height offsets [m] (left, right) after a swinging left sole, its target ``drop`` [m] below
    the right one's, planned on the ground again, touches it for one sample with a 2500 N impact, carries
    half the weight for ``loaded`` samples (10 ms each) and bounces off for 0.1 s (a standing MuJoCo sample,
    its sole forces replaced; ``params``: further StabilizerParameters)."""
    feet = talos.foot_poses(talos.reference_configuration())
    left = np.array(feet[talos.left_foot_frame][0]) - np.array([0.0, 0.0, drop])
    soles = {Foot.LEFT: (left, 0.0), Foot.RIGHT: (feet[talos.right_foot_frame][0], 0.0)}
    stabilizer = Stabilizer(talos, StabilizerParameters(enabled=True, **params))
    sample = _standing_samples(talos, 30)[-1]
    stamp = 10**12
    both = (Foot.LEFT, Foot.RIGHT)
    plan = [(both, 450.0, 450.0)] * 10 + [((Foot.RIGHT,), 0.0, 900.0)] * 10
    plan += [(both, 2500.0, 900.0)] + [(both, 450.0, 450.0)] * loaded + [(both, 0.0, 900.0)] * 10
    for stance, f_left, f_right in plan:
        stamp += 10**7
        stabilizer.set_reference(_reference(talos, stamp, (0.0, 0.0, 0.0)))
        out = stabilizer.observe(stamp, _with_forces(sample, f_left, f_right), soles, stance)
    return out.sole_offsets[Foot.LEFT][2], out.sole_offsets[Foot.RIGHT][2]


def test_a_step_down_whose_touchdown_bounces_the_sole_off_the_ground_is_a_late_landing_and_lowers_it(talos):
    """Stepping down 20 cm (known stairs), a touchdown impact that bounces the sole off the ground is no
    landing yet (landing_confirm_time): the late landing lowers the sole (the other rises). Before, the
    impact counted as the landing and raised the sole, which then hovered through the double support (on
    MuJoCo Talos tipped over the other sole's edge). A level landing keeps its first contact as its landing
    (the bounced sole is not lowered: a robot tipping sideways lifts a sole too)."""
    left, right = _bounced_landing(talos, 0.2)
    assert left < -0.002
    assert right == pytest.approx(-left)
    left, right = _bounced_landing(talos, 0.0)  # a level landing: its first contact (landing_window 0)
    assert left > 0.0


@pytest.mark.parametrize("loaded", [0, 4])
def test_a_level_landing_bounced_off_the_ground_within_the_landing_window_is_lowered_again(talos, loaded):
    """With ``landing_window`` 0.3 s, a level touchdown that bounces the sole off the ground right after it
    landed (at once, or after carrying half the weight for 0.05 s, as the landings of a MuJoCo Talos walk
    did) is lowered again (the other rises) toward its share of the desired ZMP (here the middle of the
    soles: half the weight). Without (the default), the landed sole is left in the air: on MuJoCo it carried
    nothing for most of the double support."""
    left, right = _bounced_landing(talos, 0.0, loaded, landing_window=0.3)
    assert left < -0.002
    assert right == pytest.approx(-left)
    before, _ = _bounced_landing(talos, 0.0, loaded)
    assert before > left + 0.002


def test_a_sole_leaving_the_ground_after_the_landing_window_is_not_lowered(talos):
    """0.5 s after its landing (standing, a robot tipping over an edge lifts a sole) a sole that leaves the
    ground is not lowered: with ``landing_window`` 0.3 s the offsets are those without it, bit for bit."""
    assert _bounced_landing(talos, 0.0, 50, landing_window=0.3) == _bounced_landing(talos, 0.0, 50)


def test_landing_confirmation_parameters():
    """landing_confirm_time 0 is the former stabilizer (every landing at its first contact), landing_window
    0 (the default) never lowers a sole after its landing; negative values are refused."""
    StabilizerParameters(landing_confirm_time=0.0, landing_confirm_drop=0.0, landing_window=0.0)
    for name in ("landing_confirm_time", "landing_confirm_drop", "landing_window"):
        with pytest.raises(ParameterError):
            StabilizerParameters(**{name: -0.01})


def test_on_known_sloped_ground_the_sole_offsets_are_the_ground_tilt_with_the_ankle_offsets_about_its_axes(
        talos):
    """The reference's sole tilts (StepData normal) become the output's roll and pitch, which the stage turns
    into ``sole_rotation(yaw, roll, pitch)``: without ankle offsets the sole lies on its ground; with them,
    its inclination is the tilted sole's rotated by them about its own axes; level ground leaves the output
    as it was (no tilt given)."""
    from walk_mpc.core.body.robot import roll_pitch_of

    stabilizer = Stabilizer(talos, StabilizerParameters(enabled=True))
    zeros = np.zeros((2, 3))
    tilt = np.array([[[0.02, -0.17], [0.0, -0.1]], [[0.02, -0.16], [0.0, -0.1]]])
    level = CoMReference(1, 1, (0.02, 0.04), zeros, zeros, zeros)
    assert level.sole_tilt is None and CoMReference(1, 1, (0.02, 0.04), zeros, zeros, zeros,
                                                    np.zeros((2, 2, 2))).sole_tilt is None
    stabilizer.set_reference(CoMReference(1, 1, (0.02, 0.04), zeros, zeros, zeros, tilt))
    out = stabilizer.output
    for foot in Foot:
        assert out.sole_offsets[foot][:2] == pytest.approx(tuple(tilt[0, int(foot)]), abs=1e-15)
    assert not out.active  # no offsets: the stage keeps its (tilted) targets
    ankle = {Foot.LEFT: np.array([0.03, -0.05]), Foot.RIGHT: np.array([-0.02, 0.04])}
    stabilizer._ankle = ankle
    stabilizer._publish()
    for foot in Foot:
        roll, pitch, _ = stabilizer.output.sole_offsets[foot]
        wanted = sole_rotation(0.0, *tilt[0, int(foot)]) @ sole_rotation(0.0, *ankle[foot])
        np.testing.assert_allclose(sole_rotation(0.3, roll, pitch)[2], wanted[2], atol=1e-12)  # inclination
        assert roll_pitch_of(wanted) == pytest.approx((roll, pitch), abs=1e-12)
    stabilizer.set_reference(level)
    for foot in Foot:
        assert stabilizer.output.sole_offsets[foot][:2] == tuple(float(a) for a in ankle[foot])


def _tipping_stance(talos, pitch: float, stance=(Foot.RIGHT,), **params):
    """The stabilizer's CoM offset (x, y) [m] and log after 30 samples standing on the right sole alone (the
    left off the ground, planned ``stance``), the robot turned by ``pitch`` [rad] about the world y axis (the
    IMU's orientation: its soles then measured pitched by it; > 0 over the toes, the measured CoM and DCM
    ahead of the reference), the reference the standing CoM (``params``: further StabilizerParameters; no
    ankle admittance: the commanded sole stays flat)."""
    import pinocchio as pin

    feet = talos.foot_poses(talos.reference_configuration())
    soles = {Foot.LEFT: (feet[talos.left_foot_frame][0], 0.0),
             Foot.RIGHT: (feet[talos.right_foot_frame][0], 0.0)}
    sample = _standing_samples(talos, 30)[-1]
    turned = []
    for x, y, z, w in np.asarray(sample.imu_orientation_xyzw, dtype=float):
        rotation = pin.Quaternion(w, x, y, z).toRotationMatrix()
        q = pin.Quaternion(pin.rpy.rpyToMatrix(0.0, pitch, 0.0) @ rotation)
        turned.append([q.x, q.y, q.z, q.w])
    sample = _with_forces(dataclasses.replace(sample, imu_orientation_xyzw=np.array(turned)), 0.0, 900.0)
    stabilizer = Stabilizer(talos, StabilizerParameters(enabled=True, cop_admittance=0.0, **params))
    stamp = 10**12
    for _ in range(30):
        stamp += 10**7
        stabilizer.set_reference(_reference(talos, stamp, (0.0, 0.0, 0.0)))
        out = stabilizer.observe(stamp, sample, soles, stance, walking=True)
    return np.array(out.com_offset[:2]), stabilizer.log()


@pytest.mark.parametrize("pitch", [0.14, -0.14])
def test_a_stance_sole_tipping_over_its_toe_or_heel_with_the_dcm_beyond_it_has_the_com_target_follow_the_com(
        talos, pitch):
    """With ``tip_angle``, the planned stance sole alone on the ground and measured turned 8 degrees over its
    toe (heel) with the DCM beyond that edge: the CoM target follows the measured CoM (the IK's posture then
    has the sole flat where the robot is; on MuJoCo the robot turned about the stance toe by the 9 cm its
    CoM target lagged, the swinging foot landed short and toe first). Without, the CoM target moves
    against the DCM error."""
    reference_x = float(talos.com(talos.reference_configuration())[0])
    sole_x = float(talos.foot_poses(talos.reference_configuration())[talos.right_foot_frame][0][0])
    offset, log = _tipping_stance(talos, pitch, tip_angle=0.035, tip_com_offset_limit=0.3)
    ahead = log["dcm"][0] - sole_x
    assert ahead > 0.09 if pitch > 0.0 else ahead < -0.09  # beyond the toe (heel), the margin inside it
    assert offset[0] == pytest.approx(log["dcm"][0] - reference_x, abs=0.01)  # at rest: the DCM is the CoM
    before, _ = _tipping_stance(talos, pitch)
    assert np.sign(before[0]) == -np.sign(pitch)


def test_the_com_target_does_not_follow_without_a_single_tipping_stance_sole_or_with_the_dcm_inside_it(talos):
    """The CoM offsets are those without ``tip_angle``, bit for bit, when the sole is turned less than it, or
    both soles are planned on the ground (a double support), or the DCM is not beyond the edge the sole
    turns over (here turned over the heel with the DCM ahead of it: a sample turned over the toe, the
    commanded sole pitched further); and the parameter refuses negative values."""
    for pitch, stance, params in ((0.02, (Foot.RIGHT,), {}), (0.14, (Foot.LEFT, Foot.RIGHT), {})):
        assert np.array_equal(_tipping_stance(talos, pitch, stance, tip_angle=0.035, **params)[0],
                              _tipping_stance(talos, pitch, stance, **params)[0])
    stabilizer = Stabilizer(talos, StabilizerParameters(enabled=True, tip_angle=0.035))
    stabilizer._dcm = np.array([0.05, 0.0])  # ahead of the sole's frame, behind its toe
    turned = sole_rotation(0.0, 0.0, 0.1)
    assert not stabilizer._tips(Foot.RIGHT, (np.zeros(3), turned), 0.0)  # over the toe, DCM inside
    stabilizer._dcm = np.array([0.095, 0.0])  # beyond the toe's margin
    assert stabilizer._tips(Foot.RIGHT, (np.zeros(3), turned), 0.0)
    heel = sole_rotation(0.0, 0.0, -0.1)
    assert not stabilizer._tips(Foot.RIGHT, (np.zeros(3), heel), 0.0)  # over the heel, DCM ahead
    stabilizer._ankle[Foot.RIGHT] = np.array([0.0, 0.1])  # commanded pitched as measured: no tipping
    assert not stabilizer._tips(Foot.RIGHT, (np.zeros(3), turned), 0.0)
    for name in ("tip_angle", "tip_com_offset_limit"):
        with pytest.raises(ParameterError, match=name):
            StabilizerParameters(**{name: -0.01})
    for name in ("tip_com_follow_time", "tip_release_time"):
        with pytest.raises(ParameterError, match=name):
            StabilizerParameters(**{name: 0.0})
