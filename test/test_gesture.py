"""Specification tests of gestures (seed 003)."""

import math
import subprocess
import sys

import numpy as np
import pytest

from walk_mpc.core.body.gesture import (
    GestureController,
    GestureDof,
    UnknownLegError,
    elementary_transform,
    gesture_transform,
    inverse_transform,
)
from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.params import from_mapping, to_mapping

LEGS = {
    "FL": (0.2, 0.15, -0.25),
    "FR": (0.2, -0.15, -0.25),
    "HL": (-0.2, 0.15, -0.25),
    "HR": (-0.2, -0.15, -0.25),
}


def make(**kwargs):
    return GestureController(list(LEGS), list(LEGS.values()), **kwargs)


def yaw(pose):
    return math.atan2(pose[1, 0], pose[0, 0])


def test_rz_with_four_legs_in_contact_and_friction_keeps_feet_and_yaws_the_body_back():
    gestures = make()
    feet_before = gestures.foot_positions_in_world()
    result = gestures.exec_gesture(GestureDof.RZ, 0.1)
    assert result.body_moved
    for name, position in gestures.foot_positions_in_world().items():
        np.testing.assert_allclose(position, feet_before[name], atol=1e-12)
    assert yaw(gestures.body_pose_in_world) == pytest.approx(-0.1)
    np.testing.assert_allclose(gestures.leg_pose_in_body("FL")[:3, 3],
                               elementary_transform(GestureDof.RZ, 0.1)[:3, :3] @ LEGS["FL"])


@pytest.mark.parametrize("dof", list(GestureDof))
def test_every_dof_keeps_supporting_feet_fixed_in_the_world(dof):
    gestures = make()
    feet_before = gestures.foot_positions_in_world()
    gestures.exec_gesture(dof, 0.07)
    for name, position in gestures.foot_positions_in_world().items():
        np.testing.assert_allclose(position, feet_before[name], atol=1e-12)
    assert not np.allclose(gestures.body_pose_in_world, np.eye(4))


def test_without_friction_only_the_legs_move():
    gestures = make()
    gestures.set_friction(False)
    result = gestures.exec_gesture(GestureDof.RZ, 0.1)
    assert not result.body_moved
    np.testing.assert_array_equal(gestures.body_pose_in_world, np.eye(4))
    rotated = elementary_transform(GestureDof.RZ, 0.1)[:3, :3] @ LEGS["HR"]
    np.testing.assert_allclose(gestures.foot_positions_in_world()["HR"], rotated)


def test_with_only_two_legs_in_contact_only_the_legs_move():
    gestures = make()
    gestures.set_contact("FL", False)
    gestures.set_contact(3, False)
    result = gestures.exec_gesture(GestureDof.TX, 0.05)
    assert not result.body_moved
    assert result.support_legs == ("FR", "HL")
    np.testing.assert_array_equal(gestures.body_pose_in_world, np.eye(4))
    np.testing.assert_allclose(gestures.leg_pose_in_body("FR")[:3, 3], np.add(LEGS["FR"], (0.05, 0, 0)))


def test_three_supporting_legs_with_effect_move_the_body_and_legs_without_effect_are_carried():
    gestures = make()
    gestures.set_gesture_effect("HR", False)
    result = gestures.exec_gesture(GestureDof.TY, 0.03)
    assert result.body_moved and result.moved_legs == ("FL", "FR", "HL")
    np.testing.assert_allclose(gestures.body_pose_in_world[:3, 3], (0.0, -0.03, 0.0))
    np.testing.assert_allclose(gestures.leg_pose_in_body("HR")[:3, 3], LEGS["HR"])  # unchanged in the body
    np.testing.assert_allclose(gestures.foot_positions_in_world()["HR"], np.add(LEGS["HR"], (0, -0.03, 0)))


@pytest.mark.parametrize("lifted", [(), ("FL",), ("FL", "HR"), ("FL", "FR", "HL", "HR")])
def test_support_legs_and_moves_body_tell_what_the_next_gesture_does(lifted):
    gestures = make()
    gestures.set_gesture_effect("HL", False)
    for leg in lifted:
        gestures.set_contact(leg, False)
    support, moves = gestures.support_legs, gestures.moves_body
    assert gestures.affected_legs == ("FL", "FR", "HR")
    assert support == tuple(leg for leg in ("FL", "FR", "HR") if leg not in lifted)
    result = gestures.exec_gesture(GestureDof.RZ, 0.1)
    assert (result.support_legs, result.body_moved, result.moved_legs) == (support, moves, ("FL", "FR", "HR"))
    assert moves == (not lifted)


def test_min_support_legs_is_a_parameter():
    gestures = make(params=GestureController.Parameters(min_support_legs=2))
    gestures.set_contact("FL", False)
    gestures.set_contact("FR", False)
    assert gestures.exec_gesture(GestureDof.TZ, 0.01).body_moved


def test_one_slice_composes_in_the_seed_order_and_not_the_reverse():
    values = {GestureDof.TX: 0.1, GestureDof.TY: -0.05, GestureDof.TZ: 0.02,
              GestureDof.RX: 0.2, GestureDof.RY: -0.1, GestureDof.RZ: 0.3}
    e = {dof: elementary_transform(dof, v) for dof, v in values.items()}
    tx, ty, tz, rx, ry, rz = (e[dof] for dof in GestureDof)
    seed = rz @ ry @ rx @ tz @ ty @ tx
    reverse = tx @ ty @ tz @ rx @ ry @ rz
    np.testing.assert_allclose(gesture_transform(values), seed)
    assert not np.allclose(seed, reverse)
    gestures = make()
    gestures.set_friction(False)
    gestures.exec_gestures(dict(reversed(list(values.items()))))  # mapping order does not matter
    p = np.append(LEGS["FL"], 1.0)
    np.testing.assert_allclose(gestures.leg_pose_in_body("FL")[:, 3], seed @ p)


def test_the_body_receives_the_seed_inverse():
    values = {GestureDof.TX: 0.1, GestureDof.RZ: 0.3, GestureDof.RY: 0.1}
    gestures = make()
    gestures.exec_gestures(values)
    expected = (elementary_transform(GestureDof.TX, -0.1) @ elementary_transform(GestureDof.RY, -0.1)
                @ elementary_transform(GestureDof.RZ, -0.3))
    np.testing.assert_allclose(gestures.body_pose_in_world, expected, atol=1e-12)
    np.testing.assert_allclose(inverse_transform(gesture_transform(values)), expected, atol=1e-12)


def test_gestures_accumulate_and_reset_restores_the_start():
    gestures = make()
    for _ in range(10):
        gestures.exec_gesture(GestureDof.TX, 0.01)
    np.testing.assert_allclose(gestures.body_pose_in_world[:3, 3], (-0.1, 0, 0), atol=1e-12)
    gestures.reset()
    np.testing.assert_array_equal(gestures.body_pose_in_world, np.eye(4))


def test_unknown_leg_or_dof_or_bad_values_raise_clear_errors():
    gestures = make()
    with pytest.raises(UnknownLegError) as info:
        gestures.set_gesture_effect(7, True)
    assert info.value.legs == ["FL", "FR", "HL", "HR"]
    assert "FL" in str(info.value)
    with pytest.raises(UnknownLegError):
        gestures.set_contact("tail", True)
    with pytest.raises(InputError, match="dof"):
        gestures.exec_gesture(6, 0.1)
    with pytest.raises(InputError, match="RZ"):
        gestures.exec_gesture(GestureDof.RZ, float("nan"))
    with pytest.raises(InputError):
        GestureController(["a", "a"], [(0, 0, 0), (1, 0, 0)])
    with pytest.raises(InputError):
        GestureController(["a"], [np.ones((4, 4))])


def test_parameters_are_validated_and_round_trip():
    with pytest.raises(ParameterError, match="min_support_legs"):
        GestureController.Parameters(min_support_legs=0)
    params = GestureController.Parameters(min_support_legs=4, friction=False)
    assert from_mapping(GestureController.Parameters, to_mapping(params)) == params
    assert not make(params=params).friction


def test_gesture_core_does_not_import_pinocchio():
    code = "import sys, walk_mpc.core.body.gesture; print('pinocchio' in sys.modules)"
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
