"""The DCM stabilizer (walk_mpc.core.control.stabilizer) and its place in the whole-body stage."""

from __future__ import annotations

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
