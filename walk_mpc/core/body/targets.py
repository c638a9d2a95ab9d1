"""IK targets of one instant: feet from the timeline, CoM from the MPC, torso yaw from the feet; gestures.

Walking (:func:`walk_targets`): at time ``t`` of a :class:`~walk_mpc.core.walk.timeline.Timeline`,

* the stance feet are at their planned poses (the phase's ``left`` / ``right``) exactly;
* in single support the swing foot follows :func:`~walk_mpc.core.body.swing.swing_pose` from the phase's
  ``swing_start`` to its touchdown pose, with the phase progress as normalised swing time;
* soles lie flat on their ground: turned by their yaw about the world z axis, rolled and pitched by the
  ground's normal (:attr:`~walk_mpc.core.walk.timeline.FootPose.tilt`, ``Rz(yaw) Ry(pitch) Rx(roll)``; level
  ground: the rotation about z alone, bit for bit); the swing sole's tilt goes from its lift-off ground's to
  its touchdown ground's (:func:`~walk_mpc.core.body.swing.phase_swing_tilt`);
* the torso yaw is the mean of the two feet's yaws (on the circle), times an optional constant tilt
  (e.g. the reference posture's torso pitch);
* the CoM is the MPC's reference for that instant.

Fed the support-corrected timeline (:class:`~walk_mpc.core.mpc.support_correction.SupportCorrector`, as the
ik node and the in-process closed loop do), the stance feet are at their measured poses from the
lift-off on, and the swing foot aims at its planned world pose from where it really lifted off.

Standing (:class:`StandingTargets`): the feet, body and CoM of a standing robot under gestures (seed 003,
:class:`~walk_mpc.core.body.gesture.GestureController` with one leg per foot frame). Legs moved by gestures
move their foot target; when the body moves (friction, enough support legs) the body, the torso and the
CoM are carried by the body's displacement ``D = B_now B_start^-1`` while the feet stay.

Pure numpy (and :class:`RobotModel` forward kinematics for :meth:`StandingTargets.from_configuration`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from walk_mpc.core._validate import finite_number, finite_vector
from walk_mpc.core.body.gesture import GestureController, inverse_transform
from walk_mpc.core.body.ik import IKTargets, _posture_vector, _rotation
from walk_mpc.core.body.robot import RobotModel, rotation_z, sole_rotation, yaw_of
from walk_mpc.core.body.swing import (
    phase_swing_position_yaw,
    phase_swing_tilt,
    swing_position_yaw,
    wrap_angle,
)
from walk_mpc.core.errors import InputError, ShapeError
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import PhaseKind, Timeline


@dataclasses.dataclass(frozen=True)
class FootTarget:
    """Sole target of one foot at one instant.

    Attributes:
        position: Sole position in the world frame [m], shape (3,) (read-only).
        yaw: Sole yaw in the world frame [rad].
        swinging: True when the foot is in the air (single support, swing foot).
        tilt: Roll and pitch [rad] of the sole (its ground's, :func:`sole_tilts_at`).
    """

    position: np.ndarray
    yaw: float
    swinging: bool = False
    tilt: tuple = (0.0, 0.0)

    @property
    def rotation(self) -> np.ndarray:
        """The sole's orientation, ``Rz(yaw) Ry(pitch) Rx(roll)`` (3x3)."""
        return _sole_rotation(self.yaw, self.tilt)


def foot_targets_at(timeline: Timeline, t: float) -> dict[Foot, FootTarget]:
    """Sole targets of both feet at time ``t`` [s] of ``timeline``.

    Stance feet are at the phase's poses; the swing foot of a single-support phase follows
    :func:`swing_pose` with ``s = phase.progress(t)``.
    """
    t = finite_number("t", t)
    feet = _feet_at(timeline, t)
    tilts = sole_tilts_at(timeline, t)
    return {foot: FootTarget(position, yaw, swinging, tilt)
            for foot, (position, yaw, swinging), tilt in zip(Foot, feet, tilts)}


def sole_tilts_at(timeline: Timeline, t: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """Roll and pitch [rad] of the left then the right sole at time ``t`` [s] of ``timeline``: their ground's
    (StepData normal, :attr:`~walk_mpc.core.walk.timeline.FootPose.tilt`), the swing sole's on its way from
    its lift-off ground's to its touchdown ground's (:func:`~walk_mpc.core.body.swing.phase_swing_tilt`);
    ``(0.0, 0.0)`` exactly on level ground."""
    phase = timeline.phase_at(t)
    swing = phase.swing_foot if phase.kind is PhaseKind.SINGLE else None
    tilts = []
    for foot in (Foot.LEFT, Foot.RIGHT):
        if foot is swing:
            tilts.append(phase_swing_tilt(phase, phase.progress(t)))
        else:
            pose = phase.foot(foot)
            tilts.append((0.0, 0.0) if pose.level else pose.tilt)
    return tilts[0], tilts[1]


def _sole_rotation(yaw: float, tilt: tuple) -> np.ndarray:
    """``rotation_z(yaw)`` on level ground (bit for bit), else ``sole_rotation(yaw, roll, pitch)``."""
    if tilt[0] == 0.0 and tilt[1] == 0.0:
        return rotation_z(yaw)
    return sole_rotation(yaw, tilt[0], tilt[1])


def _feet_at(timeline: Timeline, t: float) -> tuple[tuple[np.ndarray, float, bool], ...]:
    """(position (read-only), yaw, swinging) of the left then the right sole at finite time ``t``."""
    phase = timeline.phase_at(t)
    swing = phase.swing_foot if phase.kind is PhaseKind.SINGLE else None
    feet = []
    for foot in (Foot.LEFT, Foot.RIGHT):
        pose = phase.foot(foot)
        if foot is swing:
            # Timeline poses are finite and swing heights >= 0 (Step): swing_pose without its checks.
            start = phase.swing_start
            if getattr(phase, "retarget", None) is not None:  # re-planned mid-swing (step adjustment)
                point, yaw = phase_swing_position_yaw(phase, phase.progress(t))
            else:
                point, yaw = swing_position_yaw(start.position, start.yaw, pose.position, pose.yaw,
                                                phase.swing_height, phase.progress(t))
            position = np.array(point)
        else:
            position, yaw = np.array(pose.position), pose.yaw
        position.flags.writeable = False
        feet.append((position, float(yaw), foot is swing))
    return tuple(feet)


def torso_yaw(left_yaw: float, right_yaw: float) -> float:
    """Mean of two yaws on the circle [rad], the one half-way along the shortest arc from left to right."""
    return left_yaw + 0.5 * wrap_angle(right_yaw - left_yaw)


def walk_targets(
    timeline: Timeline,
    t: float,
    com_position,
    torso_tilt=None,
    posture=None,
) -> IKTargets:
    """IK targets of a walking robot at time ``t`` of ``timeline``.

    Args:
        timeline: Gait timeline (same time origin as ``t``).
        t: Time [s].
        com_position: CoM reference at ``t`` in the world frame [m], shape (3,).
        torso_tilt: Torso orientation with zero yaw (3x3), applied after the yaw; identity if None.
        posture: Preferred configuration for the IK null space (nq,), or None.

    Returns:
        Targets keyed by :class:`Foot` (6D soles), with CoM and torso orientation.

    Raises:
        InputError: If ``t`` or ``com_position`` is not finite, or the tilted torso orientation is
            not a rotation (the same errors as :class:`IKTargets`).
    """
    return with_com(walk_pose_targets(timeline, t, torso_tilt, posture), com_position)


def walk_pose_targets(timeline: Timeline, t: float, torso_tilt=None, posture=None) -> IKTargets:
    """The targets of :func:`walk_targets` without the CoM: soles and torso at time ``t`` [s].

    They depend on the timeline only, so they can be built before the CoM reference of the instant is
    known (:func:`with_com` completes them).

    Raises:
        InputError: If ``t`` is not finite or the tilted torso orientation is not a rotation.
    """
    t = finite_number("t", t)
    (left, left_yaw, _), (right, right_yaw, _) = _feet_at(timeline, t)
    left_tilt, right_tilt = sole_tilts_at(timeline, t)
    # Timeline poses and rotations about z are valid by construction: no IKTargets checks for them.
    torso = rotation_z(torso_yaw(left_yaw, right_yaw))
    if torso_tilt is not None:
        torso = _rotation("targets.torso_orientation", torso @ np.asarray(torso_tilt, dtype=float))
    return IKTargets._trusted(
        com_position=None,
        foot_positions={Foot.LEFT: left, Foot.RIGHT: right},
        foot_rotations={Foot.LEFT: _sole_rotation(left_yaw, left_tilt),
                        Foot.RIGHT: _sole_rotation(right_yaw, right_tilt)},
        torso_orientation=torso,
        posture=None if posture is None else _posture_vector(posture),
    )


def with_com(targets: IKTargets, com_position) -> IKTargets:
    """``targets`` with the CoM target ``com_position`` [m], shape (3,) (validated; the rest is shared).

    Raises:
        InputError: If ``com_position`` is not a finite 3-vector.
    """
    com = finite_vector("targets.com_position", com_position, 3, read_only=True)
    return IKTargets._trusted(com, dict(targets.foot_positions), dict(targets.foot_rotations),
                              targets.torso_orientation, targets.posture)


def yaw_free(rotation) -> np.ndarray:
    """``rotation`` with its yaw removed (``Rz(-yaw) R``), e.g. the torso tilt of a reference posture."""
    rotation = np.asarray(rotation, dtype=float)
    if rotation.shape != (3, 3):
        raise ShapeError("rotation", rotation.shape, (3, 3))
    return rotation_z(-yaw_of(rotation)) @ rotation


def pose_matrix(position, rotation=None) -> np.ndarray:
    """4x4 homogeneous transform of a position [m] and a rotation (3x3, or a yaw [rad], identity if None)."""
    pose = np.eye(4)
    pose[:3, 3] = np.asarray(position, dtype=float)
    if rotation is not None:
        pose[:3, :3] = rotation_z(float(rotation)) if np.ndim(rotation) == 0 else np.asarray(rotation)
    return pose


class StandingTargets:
    """IK targets of a standing robot whose legs and body follow gestures (seed 003).

    The legs of the :attr:`gestures` controller are the foot frames (their index is their position
    in ``foot_frames``), the body is ``body_frame``. Every leg starts with gesture effect and in
    contact; with Talos (2 legs) and ``min_support_legs = 3`` only the legs move, with a quadruped
    and friction the body moves by the inverse of the gesture and the feet stay.

    Example:
        >>> robot = RobotModel(RobotModel.Parameters(robot="solo12"))
        >>> standing = StandingTargets.from_configuration(robot, robot.reference_configuration())
        >>> standing.gestures.exec_gesture(GestureDof.RZ, 0.1).body_moved
        True
        >>> targets = standing.targets()  # feet unchanged, body yawed by -0.1 rad
    """

    def __init__(
        self,
        foot_frames: Sequence[str],
        foot_poses_in_world: Sequence,
        body_frame: str,
        body_pose_in_world,
        com_position,
        torso_rotation,
        oriented_feet: bool = True,
        params: GestureController.Parameters | None = None,
    ) -> None:
        """Create the standing targets.

        Args:
            foot_frames: Foot frame names, the gesture legs.
            foot_poses_in_world: Foot poses in the world (4x4 each), same order.
            body_frame: Frame of the gesture body (floating base).
            body_pose_in_world: Its pose in the world (4x4).
            com_position: CoM [m] held when no CoM reference is given to :meth:`targets`.
            torso_rotation: Torso orientation (3x3) at the start, carried by the body.
            oriented_feet: Whether foot targets include their orientation (bipeds) or
                only their position (point feet).
            params: Gesture parameters.

        Raises:
            InputError, ShapeError: If a pose or the CoM is malformed.
        """
        self.foot_frames = tuple(foot_frames)
        self.body_frame = str(body_frame)
        self.oriented_feet = bool(oriented_feet)
        body = np.array(body_pose_in_world, dtype=float)
        if body.shape != (4, 4) or not np.all(np.isfinite(body)):
            raise InputError("body_pose_in_world", body_pose_in_world, "a finite 4x4 transform")
        body_inverse = inverse_transform(body)
        legs_in_body = [body_inverse @ np.asarray(pose, dtype=float) for pose in foot_poses_in_world]
        self._gestures = GestureController(self.foot_frames, legs_in_body, body, params)
        self._body_start_inverse = body_inverse
        self._com = IKTargets(com_position=com_position).com_position
        self._torso = IKTargets(torso_orientation=torso_rotation).torso_orientation

    @classmethod
    def from_configuration(
        cls,
        robot: RobotModel,
        q,
        params: GestureController.Parameters | None = None,
        foot_poses: Mapping[str, np.ndarray] | None = None,
        torso_rotation=None,
    ) -> StandingTargets:
        """Standing targets met by configuration ``q`` (body = the robot's base frame).

        Args:
            robot: The robot model.
            q: Configuration (nq,).
            params: Gesture parameters.
            foot_poses: Foot poses (4x4) by frame overriding the forward kinematics of ``q``
                (e.g. the planned feet of a biped).
            torso_rotation: Torso orientation (3x3) overriding the one of ``q`` (e.g. upright over the
                planned feet), or None.
        """
        feet = robot.foot_poses(q)
        poses = []
        for frame in robot.foot_frames:
            if foot_poses is not None and frame in foot_poses:
                poses.append(np.asarray(foot_poses[frame], dtype=float))
            else:
                poses.append(pose_matrix(*feet[frame]))
        body = pose_matrix(*robot.frame_pose(q, robot.base_frame))
        torso = robot.frame_pose(q, robot.torso_frame)[1] if torso_rotation is None else torso_rotation
        return cls(robot.foot_frames, poses, robot.base_frame, body, robot.com(q), torso,
                   oriented_feet=robot.is_biped, params=params)

    @property
    def gestures(self) -> GestureController:
        """The gesture controller (legs = foot frames): exec_gesture, set_gesture_effect, set_contact."""
        return self._gestures

    @property
    def body_displacement(self) -> np.ndarray:
        """Displacement of the body since the start, ``B_now B_start^-1`` (4x4, world frame)."""
        return self._gestures.body_pose_in_world @ self._body_start_inverse

    def targets(self, com_position=None, posture=None) -> IKTargets:
        """IK targets after the gestures so far.

        Args:
            com_position: CoM reference [m] (e.g. from the MPC) before the body displacement; None
                holds the body frame's position instead of a CoM.
            posture: Preferred configuration for the IK null space (nq,), or None.

        Returns:
            Foot targets (6D if ``oriented_feet``, else positions), torso orientation carried by the
            body, and either the displaced CoM or the body frame's position.
        """
        displacement = self.body_displacement
        gestures = self._gestures
        feet = {frame: gestures.leg_pose_in_world(frame) for frame in self.foot_frames}
        positions = {frame: np.ascontiguousarray(pose[:3, 3]) for frame, pose in feet.items()}
        rotations = ({frame: np.ascontiguousarray(pose[:3, :3]) for frame, pose in feet.items()}
                     if self.oriented_feet else {})
        com = None
        if com_position is not None:
            com = finite_vector("targets.com_position", com_position, 3)  # the caller's input
            com = displacement[:3, :3] @ com + displacement[:3, 3]
        else:
            positions[self.body_frame] = np.ascontiguousarray(gestures.body_pose_in_world[:3, 3])
        # Everything else comes from validated poses and rotations (the gestures validate their input):
        # no second validation on the control tick's path (it cost ~60 us per tick).
        return IKTargets._trusted(com, positions, rotations, displacement[:3, :3] @ self._torso,
                                  None if posture is None else _posture_vector(posture))

    @property
    def com_position(self) -> np.ndarray:
        """CoM [m] at the start, carried by the body displacement."""
        displacement = self.body_displacement
        return displacement[:3, :3] @ self._com + displacement[:3, 3]


__all__ = [
    "FootTarget",
    "StandingTargets",
    "foot_targets_at",
    "pose_matrix",
    "sole_tilts_at",
    "torso_yaw",
    "walk_pose_targets",
    "walk_targets",
    "with_com",
    "yaw_free",
]
