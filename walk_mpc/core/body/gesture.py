"""Gestures (seed 003): one homogeneous transform applied to every affected leg, or its inverse to the body.

A gesture ``G`` is built from elementary transforms about the body axes. Each leg
``i`` with gesture effect has its pose in the body frame ``T_i`` replaced by
``G T_i``. When friction is active and at least ``min_support_legs`` legs with
effect are in contact, the body pose in the world ``B`` becomes ``B G^-1``, so the
feet of those legs keep their world pose (``B G^-1 G T_i = B T_i``) and the body
moves the opposite way; otherwise only the legs move and the body stays.

Several gestures in one time slice (:meth:`GestureController.exec_gestures`) compose
in the seed's order ``G = Rz(psi) Ry(theta) Rx(phi) Tz(z) Ty(y) Tx(x)``, so the
body receives ``G^-1 = Tx(-x) Ty(-y) Tz(-z) Rx(-phi) Ry(-theta) Rz(-psi)``.
Legs without effect keep their pose in the body frame (they are carried along).

Pure numpy: no pinocchio, no ROS.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence

import numpy as np

from walk_mpc.core._validate import finite_number
from walk_mpc.core.errors import InputError, ParameterError, ShapeError
from walk_mpc.core.params import check_int_range


class GestureDof(enum.IntEnum):
    """Degree of freedom of an elementary gesture (constants TX..RZ of the seed's transform.h)."""

    TX = 0
    TY = 1
    TZ = 2
    RX = 3
    RY = 4
    RZ = 5


#: Order in which a time slice's gestures are applied to a leg (rightmost first in the seed formula).
COMPOSITION_ORDER = (GestureDof.TX, GestureDof.TY, GestureDof.TZ, GestureDof.RX, GestureDof.RY, GestureDof.RZ)


class UnknownLegError(InputError, KeyError):
    """A leg index or name is not one of the controller's legs.

    Attributes:
        leg: The unknown leg.
        legs: The valid leg names (indices are their positions).
    """

    def __init__(self, leg, legs: Sequence[str]) -> None:
        self.leg = leg
        self.legs = list(legs)
        super().__init__("leg", leg, f"a leg index in [0, {len(self.legs) - 1}] or a name in {self.legs}")

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0]


def elementary_transform(dof: GestureDof | int, value: float) -> np.ndarray:
    """4x4 homogeneous transform of one gesture: translation [m] or rotation [rad] about a body axis.

    Raises:
        InputError: For an unknown dof or a non-finite value.
    """
    dof = _dof(dof)
    value = finite_number(f"value of {dof.name}", value)
    transform = np.eye(4)
    if dof <= GestureDof.TZ:
        transform[int(dof), 3] = value
        return transform
    c, s = math.cos(value), math.sin(value)
    i, j = {GestureDof.RX: (1, 2), GestureDof.RY: (2, 0), GestureDof.RZ: (0, 1)}[dof]
    transform[i, i] = c
    transform[j, j] = c
    transform[i, j] = -s
    transform[j, i] = s
    return transform


def gesture_transform(values: Mapping[GestureDof | int, float]) -> np.ndarray:
    """Composite transform of one time slice, ``Rz(psi) Ry(theta) Rx(phi) Tz(z) Ty(y) Tx(x)``.

    Args:
        values: Gesture value by dof; absent dofs are zero.
    """
    by_dof = {_dof(dof): value for dof, value in values.items()}
    transform = np.eye(4)
    for dof in COMPOSITION_ORDER:  # left-multiply: the first applied is the rightmost factor
        if dof in by_dof:
            transform = elementary_transform(dof, by_dof[dof]) @ transform
    return transform


def inverse_transform(transform: np.ndarray) -> np.ndarray:
    """Inverse of a rigid homogeneous transform."""
    inverse = np.eye(4)
    rotation_t = transform[:3, :3].T
    inverse[:3, :3] = rotation_t
    inverse[:3, 3] = -rotation_t @ transform[:3, 3]
    return inverse


def _dof(dof) -> GestureDof:
    try:
        return GestureDof(int(dof))
    except (TypeError, ValueError):
        raise InputError("dof", dof, "one of TX=0, TY=1, TZ=2, RX=3, RY=4, RZ=5") from None


def _pose(name: str, value) -> np.ndarray:
    try:
        pose = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(name, value, "a 4x4 homogeneous transform") from None
    if pose.shape == (3,):  # a position only
        position, pose = pose, np.eye(4)
        pose[:3, 3] = position
    if pose.shape != (4, 4):
        raise ShapeError(name, pose.shape, "(4, 4) or (3,)")
    if not np.all(np.isfinite(pose)):
        raise InputError(name, pose, "finite values")
    rotation = pose[:3, :3]
    if not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-6) or not np.allclose(pose[3], [0, 0, 0, 1]):
        raise InputError(name, pose, "a rigid homogeneous transform (orthonormal rotation, last row 0 0 0 1)")
    return pose


@dataclasses.dataclass(frozen=True)
class GestureResult:
    """Outcome of one gesture time slice.

    Attributes:
        transform: The composite gesture transform G (4x4) applied to the legs with effect.
        body_moved: True when the body received G^-1 (friction and enough support legs).
        moved_legs: Names of the legs whose pose in the body frame changed.
        support_legs: Names of the legs with effect in contact.
        body_pose_in_world: Body pose after the gesture (4x4).
    """

    transform: np.ndarray
    body_moved: bool
    moved_legs: tuple[str, ...]
    support_legs: tuple[str, ...]
    body_pose_in_world: np.ndarray


class GestureController:
    """Applies gestures to a set of legs and to the body (seed 003).

    Legs are addressed by index (their order at construction) or by name. Initially
    every leg has gesture effect and is in contact, and friction is
    ``Parameters.friction``.

    Example:
        >>> legs = {"FL": (0.2, 0.15, -0.25), "FR": (0.2, -0.15, -0.25),
        ...         "HL": (-0.2, 0.15, -0.25), "HR": (-0.2, -0.15, -0.25)}
        >>> gestures = GestureController(list(legs), list(legs.values()))
        >>> gestures.exec_gesture(GestureDof.RZ, 0.1).body_moved  # feet stay, body yaws -0.1 rad
        True
    """

    @dataclasses.dataclass(frozen=True)
    class Parameters:
        """Gesture parameters.

        Attributes:
            min_support_legs: Legs with effect in contact needed for the body to move [-].
            friction: Whether leg friction is active at start (see :meth:`set_friction`).
        """

        min_support_legs: int = 3
        friction: bool = True

        def __post_init__(self) -> None:
            check_int_range("min_support_legs", self.min_support_legs, 1)
            if not isinstance(self.friction, bool):
                raise ParameterError("friction", self.friction, "true or false")

    def __init__(
        self,
        legs: Sequence[str],
        leg_poses_in_body: Sequence,
        body_pose_in_world=None,
        params: GestureController.Parameters | None = None,
    ) -> None:
        """Create the controller.

        Args:
            legs: Leg names; a leg's index is its position here.
            leg_poses_in_body: Foot pose of each leg in the body frame: 4x4 homogeneous
                transform, or a position (3,) [m] with identity orientation.
            body_pose_in_world: Body pose in the world (4x4); identity if None.
            params: Parameters.

        Raises:
            InputError: If the names are not unique or the poses are malformed.
        """
        self.params = params if params is not None else GestureController.Parameters()
        self._legs = tuple(str(name) for name in legs)
        if len(set(self._legs)) != len(self._legs) or not self._legs:
            raise InputError("legs", legs, "at least one leg, with unique names")
        poses = list(leg_poses_in_body)
        if len(poses) != len(self._legs):
            raise InputError("leg_poses_in_body", len(poses), f"{len(self._legs)} poses, one per leg")
        self._initial_legs = [_pose(f"leg_poses_in_body[{i}]", p) for i, p in enumerate(poses)]
        self._initial_body = np.eye(4) if body_pose_in_world is None else _pose(
            "body_pose_in_world", body_pose_in_world)
        self.reset()

    def reset(self) -> None:
        """Back to the initial poses; every leg with effect and in contact; friction from parameters."""
        self._leg_poses = [pose.copy() for pose in self._initial_legs]
        self._body = self._initial_body.copy()
        self._effect = [True] * len(self._legs)
        self._contact = [True] * len(self._legs)
        self._friction = self.params.friction

    # ------------------------------------------------------------------ state
    @property
    def legs(self) -> tuple[str, ...]:
        """Leg names, in index order."""
        return self._legs

    def leg_index(self, leg: int | str) -> int:
        """Index of ``leg`` (index or name).

        Raises:
            UnknownLegError: If there is no such leg.
        """
        if isinstance(leg, str):
            if leg in self._legs:
                return self._legs.index(leg)
        elif isinstance(leg, (int, np.integer)) and not isinstance(leg, bool):
            if 0 <= int(leg) < len(self._legs):
                return int(leg)
        raise UnknownLegError(leg, self._legs)

    def set_gesture_effect(self, leg: int | str, effect: bool) -> None:
        """Select whether gestures move ``leg`` (seed ``gesture_effect``)."""
        self._effect[self.leg_index(leg)] = bool(effect)

    def set_contact(self, leg: int | str, in_contact: bool) -> None:
        """Record whether the foot of ``leg`` is in contact with the ground."""
        self._contact[self.leg_index(leg)] = bool(in_contact)

    def set_friction(self, active: bool) -> None:
        """Activate or deactivate leg friction (without it, gestures never move the body)."""
        self._friction = bool(active)

    @property
    def friction(self) -> bool:
        """Whether leg friction is active."""
        return self._friction

    def gesture_effect(self, leg: int | str) -> bool:
        """Whether gestures move ``leg``."""
        return self._effect[self.leg_index(leg)]

    def in_contact(self, leg: int | str) -> bool:
        """Whether ``leg`` is in contact."""
        return self._contact[self.leg_index(leg)]

    @property
    def affected_legs(self) -> tuple[str, ...]:
        """Names of the legs with gesture effect (a gesture moves them in the body frame)."""
        return tuple(name for name, effect in zip(self._legs, self._effect) if effect)

    @property
    def support_legs(self) -> tuple[str, ...]:
        """Names of the legs with gesture effect in contact (they hold the ground when the body moves)."""
        return tuple(name for name, effect, contact in zip(self._legs, self._effect, self._contact)
                     if effect and contact)

    @property
    def moves_body(self) -> bool:
        """Whether a gesture now moves the body: friction active and at least ``min_support_legs``
        :attr:`support_legs` (else only the legs move)."""
        return self._friction and len(self.support_legs) >= self.params.min_support_legs

    @property
    def body_pose_in_world(self) -> np.ndarray:
        """Body pose in the world frame (4x4 copy)."""
        return self._body.copy()

    def leg_pose_in_body(self, leg: int | str) -> np.ndarray:
        """Foot pose of ``leg`` in the body frame (4x4 copy)."""
        return self._leg_poses[self.leg_index(leg)].copy()

    def leg_pose_in_world(self, leg: int | str) -> np.ndarray:
        """Foot pose of ``leg`` in the world frame (4x4), the IK's foot target."""
        return self._body @ self._leg_poses[self.leg_index(leg)]

    def foot_positions_in_world(self) -> dict[str, np.ndarray]:
        """Foot positions [m] in the world frame by leg name."""
        return {name: (self._body @ pose)[:3, 3] for name, pose in zip(self._legs, self._leg_poses)}

    # ------------------------------------------------------------------ gestures
    def exec_gesture(self, dof: GestureDof | int, value: float) -> GestureResult:
        """Execute one gesture: translation [m] (TX, TY, TZ) or rotation [rad] (RX, RY, RZ)."""
        return self.exec_gestures({dof: value})

    def exec_gestures(self, values: Mapping[GestureDof | int, float]) -> GestureResult:
        """Execute the gestures of one time slice, composed in the seed's order.

        Args:
            values: Value by dof (each dof at most once per slice).

        Raises:
            InputError: For an unknown dof or a non-finite value.
        """
        transform = gesture_transform(values)
        support, body_moves = self.support_legs, self.moves_body
        for i, effect in enumerate(self._effect):
            if effect:
                self._leg_poses[i] = transform @ self._leg_poses[i]
        if body_moves:
            self._body = self._body @ inverse_transform(transform)
        return GestureResult(
            transform=transform,
            body_moved=body_moves,
            moved_legs=self.affected_legs,
            support_legs=support,
            body_pose_in_world=self._body.copy(),
        )
