"""Measured robot state from sensor arrays: configuration, CoM position and velocity, sole poses.

The floating base comes either from a base estimate (a state estimator, or ground truth in
simulation) or, without one, from an *anchor*: a sole known to be flat on the ground at a given pose
(kinematic odometry from the stance foot, as on NAO where the support foot is the reference).

CoM velocity is ``J_com v`` (pinocchio), with the base velocity from the base twist, or, with an
anchor, the one that keeps the anchored sole still (``J_sole v = 0``). It is None when the joint
velocities are not given.

Error policy: malformed inputs raise :class:`~walk_mpc.core.errors.InputError` (naming the field),
pinocchio is only called on validated arrays.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np
import pinocchio as pin

from walk_mpc.core.body.robot import RobotModel, rotation_z, yaw_of
from walk_mpc.core.errors import InputError
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Timeline


@dataclasses.dataclass(frozen=True)
class MeasuredState:
    """Robot state estimated from one sensor sample (world frame, read-only arrays).

    Attributes:
        configuration: Pinocchio configuration ``q`` (base position, quaternion xyzw, joints), shape (nq,).
        com_position: Centre of mass [m], shape (3,).
        com_velocity: CoM velocity [m/s], shape (3,), or None without joint velocities.
        feet: Sole poses by foot frame name (position [m], yaw [rad]), in ``RobotModel.foot_frames`` order.
        base_source: ``"estimate"`` (base pose given), ``"anchor"`` (placed by an anchored sole) or
            ``"imu"`` (IMU orientation, leg kinematics of the soles in contact:
            :func:`estimate_state_from_imu`).
    """

    configuration: np.ndarray
    com_position: np.ndarray
    com_velocity: Optional[np.ndarray]
    feet: Mapping[str, FootPose]
    base_source: str

    def sole(self, foot: Foot) -> FootPose:
        """Pose of a biped's ``foot`` (feet are stored left then right for bipeds)."""
        frames = list(self.feet)
        if len(frames) != 2:
            raise InputError("foot", foot, "a biped's foot (the model has no left/right soles)")
        return self.feet[frames[int(Foot(int(foot)))]]


def _vector(name: str, value, size: Optional[int] = None) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(name, value, "numbers") from None
    if size is not None and array.shape[0] != size:
        raise InputError(name, f"{array.shape[0]} values", f"{size} values")
    if not np.all(np.isfinite(array)):
        raise InputError(name, array.tolist(), "finite values (no NaN/inf)")
    return array


class _Layout:
    """Index maps of one (robot, sample joint names) pair, computed once: sample order -> model order."""

    def __init__(self, robot: RobotModel, names: tuple) -> None:
        position = {name: i for i, name in enumerate(names)}  # a repeated name: its last value, as dict(zip)
        self.robot = robot
        self.size = len(names)
        self.missing = [n for n in robot.joint_names if n not in position]
        found = [n for n in robot.joint_names if n in position]
        self.sample = np.array([position[n] for n in found], dtype=int)
        self.idx_q = np.array([robot.joint_index_q(n) for n in found], dtype=int)
        self.idx_v = np.array([robot.joint_index_v(n) for n in found], dtype=int)
        model = robot.model
        continuous = [model.joints[model.getJointId(n)].nq == 2 and model.joints[model.getJointId(n)].nv == 1
                      for n in found]
        self.continuous = np.array(continuous, dtype=bool) if any(continuous) else None


_LAYOUTS: dict = {}  # (id(robot), joint names) -> _Layout
_MAX_LAYOUTS = 64


def _layout(robot: RobotModel, names: Sequence[str]) -> _Layout:
    key = (id(robot), tuple(names))
    layout = _LAYOUTS.get(key)
    if layout is None or layout.robot is not robot:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.clear()
        layout = _LAYOUTS[key] = _Layout(robot, key[1])
    return layout


def _joint_values(robot: RobotModel, layout: _Layout, values, what: str) -> np.ndarray:
    """Values of every actuated joint of the model in model order (extra names ignored, missing refused)."""
    array = np.asarray(values, dtype=float).reshape(-1) if len(values) else np.zeros(0)
    if array.shape[0] != layout.size:
        raise InputError(what, f"{array.shape[0]} values for {layout.size} joint names", "one value per name")
    if layout.missing:
        raise InputError("joint_names", f"missing {layout.missing}", "every actuated joint of the model")
    selected = array[layout.sample]
    if not np.all(np.isfinite(selected)):
        bad = {n: float(v) for n, v in zip(robot.joint_names, selected) if not math.isfinite(v)}
        raise InputError(what, bad, "finite values (no NaN/inf)")
    return selected


def _anchored_base(robot: RobotModel, q: np.ndarray, frame: str, pose: FootPose) -> np.ndarray:
    """``q`` with the base moved so that sole ``frame`` is flat at ``pose``."""
    frame_id = robot.frame_id(frame)
    pin.framesForwardKinematics(robot.model, robot.data, q)
    base = pin.XYZQUATToSE3(q[0:7])
    sole_in_base = base.actInv(robot.data.oMf[frame_id])
    target = pin.SE3(rotation_z(pose.yaw), np.asarray(pose.position, dtype=float))
    q = q.copy()
    q[0:7] = pin.SE3ToXYZQUAT(target * sole_in_base.inverse())
    return q


def estimate_state(
    robot: RobotModel,
    joint_names: Sequence[str],
    joint_positions: Sequence[float],
    base_pose: Optional[tuple] = None,
    anchor: Optional[tuple[str, FootPose]] = None,
    joint_velocities: Optional[Sequence[float]] = None,
    base_twist: Optional[tuple] = None,
) -> MeasuredState:
    """Configuration, CoM and sole poses of one sensor sample.

    Args:
        robot: Robot model.
        joint_names: Joint names of the sample; every actuated joint of the model must be present
            (names the model does not have are ignored).
        joint_positions: Positions [rad or m], ordered as ``joint_names``.
        base_pose: ``(position [m] (3,), quaternion (x, y, z, w))`` of the base in the world frame, or
            None without a base estimate.
        anchor: ``(sole frame name, FootPose)``: used when ``base_pose`` is None; the base is placed so
            that this sole is flat at this pose.
        joint_velocities: Velocities [rad/s or m/s] ordered as ``joint_names`` (empty or None: no
            CoM velocity).
        base_twist: ``(linear [m/s] (3,), angular [rad/s] (3,))`` of the base in the world frame, with
            ``base_pose`` (None: base at rest).

    Returns:
        The measured state.

    Raises:
        InputError: Mismatched lengths, missing joints, NaN/inf values, a zero quaternion, or neither
            a base pose nor an anchor.
        FrameNotFound: Unknown anchor frame.
    """
    layout = _layout(robot, joint_names)
    positions = _joint_values(robot, layout, joint_positions, "joint_pos")
    q = robot.reference_configuration()
    q[0:7] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)  # the base is set below
    if layout.continuous is None:
        q[layout.idx_q] = positions
    else:  # continuous joints: (cos, sin)
        plain = ~layout.continuous
        q[layout.idx_q[plain]] = positions[plain]
        angles = positions[layout.continuous]
        q[layout.idx_q[layout.continuous]] = np.cos(angles)
        q[layout.idx_q[layout.continuous] + 1] = np.sin(angles)
    if base_pose is not None:
        position = _vector("base_pose.position", base_pose[0], 3)
        quaternion = _vector("base_pose.orientation", base_pose[1], 4)
        if np.linalg.norm(quaternion) < 1e-9:
            raise InputError("base_pose.orientation", quaternion.tolist(), "a nonzero quaternion (xyzw)")
        q[0:3] = position
        q[3:7] = quaternion / np.linalg.norm(quaternion)
        source = "estimate"
    elif anchor is not None:
        frame, pose = anchor
        if not isinstance(pose, FootPose):
            raise InputError("anchor", anchor, "(sole frame name, FootPose)")
        q = _anchored_base(robot, q, frame, pose)
        source = "anchor"
    else:
        raise InputError("base_pose", None, "a base estimate or an anchor sole")

    velocity = None
    if joint_velocities is not None and len(joint_velocities):
        v = np.zeros(robot.nv)
        v[layout.idx_v] = _joint_values(robot, layout, joint_velocities, "joint_vel")
        rotation = pin.Quaternion(q[6], q[3], q[4], q[5]).toRotationMatrix()
        if source == "estimate":
            if base_twist is not None:
                v[0:3] = rotation.T @ _vector("base_twist.linear", base_twist[0], 3)
                v[3:6] = rotation.T @ _vector("base_twist.angular", base_twist[1], 3)
        else:
            # The anchored sole is still: J_sole v = 0 gives the base velocity from the joint velocities.
            jacobian = pin.computeFrameJacobian(robot.model, robot.data, q, robot.frame_id(anchor[0]),
                                                pin.LOCAL)
            v[0:6] = np.linalg.solve(jacobian[:, :6], -jacobian[:, 6:] @ v[6:])
        pin.centerOfMass(robot.model, robot.data, q, v, False)
        velocity = np.array(robot.data.vcom[0])
        com = np.array(robot.data.com[0])
    else:
        com = np.array(pin.centerOfMass(robot.model, robot.data, q, False))
    # centerOfMass ran the forward kinematics of q: only the sole frames are left to place.
    feet = {}
    for frame in robot.foot_frames:
        placement = pin.updateFramePlacement(robot.model, robot.data, robot.frame_id(frame))
        feet[frame] = FootPose(tuple(float(x) for x in placement.translation), yaw_of(placement.rotation))
    for array in (q, com, velocity):
        if array is not None:
            array.flags.writeable = False
    return MeasuredState(q, com, velocity, feet, source)


def estimate_state_from_imu(
    robot: RobotModel,
    joint_names: Sequence[str],
    joint_positions: Sequence[float],
    imu_frame: str,
    imu_orientation_xyzw: Sequence[float],
    anchors: Mapping[str, tuple],
    joint_velocities: Optional[Sequence[float]] = None,
    imu_angular_velocity: Optional[Sequence[float]] = None,
) -> MeasuredState:
    """Robot state without the simulator's truth: base orientation from the IMU, base position and velocity
    from the leg kinematics of the soles in contact (what a real robot measures).

    The base is rotated so that ``imu_frame`` has the IMU's orientation, then translated so that the soles
    of ``anchors`` are where the caller knows them (their positions, weighted: the force each carries); its
    linear velocity keeps those soles still (weighted mean of the velocities each still sole implies), its
    angular velocity is the gyro's.

    Args:
        robot: Robot model.
        joint_names: Joint names of the sample (every actuated joint of the model).
        joint_positions: Positions [rad], ordered as ``joint_names``.
        imu_frame: Frame of the IMU in the model.
        imu_orientation_xyzw: Orientation of the IMU in the world (x, y, z, w).
        anchors: Sole frame name -> (position [m] (3,) of the sole in the world, weight > 0 [-]).
        joint_velocities: Velocities [rad/s] ordered as ``joint_names`` (None or empty: no CoM velocity).
        imu_angular_velocity: Gyro [rad/s] in the IMU frame (None: zero).

    Returns:
        The measured state (``base_source`` ``"imu"``).

    Raises:
        InputError: Malformed arrays, no anchor or non-positive weights, a zero quaternion.
        FrameNotFound: Unknown IMU or sole frame.
    """
    if not anchors:
        raise InputError("anchors", anchors, "at least one sole in contact (frame -> (position, weight))")
    weights = np.array([float(w) for _, w in anchors.values()])
    if not np.all(np.isfinite(weights)) or np.any(weights <= 0.0):
        raise InputError("anchors.weights", weights.tolist(), "finite weights > 0")
    weights = weights / weights.sum()
    layout = _layout(robot, joint_names)
    positions = _joint_values(robot, layout, joint_positions, "joint_pos")
    if layout.continuous is not None:
        raise InputError("joint_names", "continuous joints", "one-DoF joints (legged robots)")
    quaternion = _vector("imu_orientation_xyzw", imu_orientation_xyzw, 4)
    norm = float(np.linalg.norm(quaternion))
    if norm < 1e-9:
        raise InputError("imu_orientation_xyzw", quaternion.tolist(), "a nonzero quaternion (xyzw)")
    model, data = robot.model, robot.data
    q = robot.reference_configuration()
    q[0:7] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    q[layout.idx_q] = positions
    pin.framesForwardKinematics(model, data, q)
    imu_in_base = data.oMf[robot.frame_id(imu_frame)]  # base at the origin: the IMU's placement in the base
    imu_rotation = pin.Quaternion(*(quaternion / norm)[[3, 0, 1, 2]]).toRotationMatrix()
    base_rotation = imu_rotation @ imu_in_base.rotation.T
    offset = np.zeros(3)
    frames = list(anchors)
    for frame, weight in zip(frames, weights):
        sole_in_base = data.oMf[robot.frame_id(frame)].translation
        anchor = _vector(f"anchors[{frame!r}]", anchors[frame][0], 3)
        offset += weight * (anchor - base_rotation @ sole_in_base)
    q[0:3] = offset
    q[3:7] = pin.Quaternion(base_rotation).normalized().coeffs()
    velocity = None
    if joint_velocities is not None and len(joint_velocities):
        v = np.zeros(robot.nv)
        v[layout.idx_v] = _joint_values(robot, layout, joint_velocities, "joint_vel")
        gyro = np.zeros(3) if imu_angular_velocity is None else _vector("imu_angular_velocity",
                                                                       imu_angular_velocity, 3)
        v[3:6] = imu_in_base.rotation @ gyro  # angular velocity in the base frame
        linear = np.zeros(3)
        pin.computeJointJacobians(model, data, q)
        for frame, weight in zip(frames, weights):
            jacobian = pin.getFrameJacobian(model, data, robot.frame_id(frame), pin.LOCAL_WORLD_ALIGNED)[:3]
            # The sole is still: J[:, :3] v_lin + J[:, 3:] v_rest = 0.
            linear += weight * np.linalg.solve(jacobian[:, :3], -jacobian[:, 3:] @ v[3:])
        v[0:3] = linear
        pin.centerOfMass(model, data, q, v, False)
        velocity = np.array(data.vcom[0])
        com = np.array(data.com[0])
    else:
        com = np.array(pin.centerOfMass(model, data, q, False))
    feet = {}
    for frame in robot.foot_frames:
        placement = pin.updateFramePlacement(model, data, robot.frame_id(frame))
        feet[frame] = FootPose(tuple(float(x) for x in placement.translation), yaw_of(placement.rotation))
    for array in (q, com, velocity):
        if array is not None:
            array.flags.writeable = False
    return MeasuredState(q, com, velocity, feet, "imu")


def correction_anchor(timeline: Timeline, t: float, foot: Foot) -> tuple[Foot, FootPose]:
    """The sole that places the base when ``foot`` is measured for a support correction at ``t`` [s] without
    a base estimate (a lift-off, or CATCH): the other foot, at its pose of the phase before ``t``'s, where it
    stood until now (kinematic odometry: the new stance sole is measured from the old one before the
    estimate switches to it, so the estimated CoM does not jump by the landing error at the switch).
    """
    other = Foot(int(foot)).other
    index = timeline.phase_index_at(t)
    return other, timeline.phases[max(0, index - 1)].foot(other)


def sole_from_anchor(
    robot: RobotModel,
    joint_names: Sequence[str],
    joint_positions: Sequence[float],
    frame: str,
    anchor: tuple[str, FootPose],
    imu: Optional[tuple] = None,
) -> FootPose:
    """Pose of sole ``frame`` measured from the sole ``anchor = (frame, FootPose)`` (leg kinematics), the base
    oriented by ``imu = (IMU frame, orientation xyzw)`` (:func:`estimate_state_from_imu`), or, without an IMU
    or with one the model does not have, with the anchor sole taken flat (:func:`estimate_state`).

    The support correction of both control stages measures the new stance sole with it, so that they
    correct their timelines identically.
    """
    anchor_frame, pose = anchor
    if imu is not None:
        try:
            robot.frame_id(imu[0])
        except KeyError:  # FrameNotFound
            imu = None
    if imu is None:
        state = estimate_state(robot, joint_names, joint_positions, None, anchor)
    else:
        state = estimate_state_from_imu(robot, joint_names, joint_positions, imu[0], imu[1],
                                        {anchor_frame: (pose.position, 1.0)})
    return state.feet[frame]


__all__ = ["MeasuredState", "correction_anchor", "estimate_state", "estimate_state_from_imu",
           "sole_from_anchor"]
