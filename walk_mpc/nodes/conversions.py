"""Conversions between walk_mpc messages and core types (no algorithm, no rclpy node)."""

from __future__ import annotations

import array
import math
from typing import Iterable, List, Sequence, Tuple

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3

from walk_mpc.core.control.types import WalkPlan
from walk_mpc.core.errors import InputError
from walk_mpc.core.sensors import SensorSample, immutable_float64
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline
from walk_mpc.msg import FootstepPlan, SensorState, StepData


def step_from_msg(msg: StepData) -> Step:
    """Step from a StepData message (an all-zero normal means (0, 0, 1)).

    Raises:
        InvalidStepError: A field is not finite, foot_index is not 0/1, or a length is negative.
    """
    normal = (msg.normal.x, msg.normal.y, msg.normal.z)
    if normal == (0.0, 0.0, 0.0):
        normal = (0.0, 0.0, 1.0)
    return Step(
        step_index=int(msg.step_index),
        foot=msg.foot_index,  # validated by Step
        duration=msg.duration,
        position=(msg.position.x, msg.position.y, msg.position.z),
        yaw=msg.yaw,
        normal=normal,
        swing_height=msg.swing_height,
    )


def step_to_msg(step: Step) -> StepData:
    """StepData message of a Step."""
    msg = StepData()
    msg.step_index = int(step.step_index)
    msg.foot_index = int(step.foot)
    msg.duration = float(step.duration)
    msg.position = Point(x=step.position[0], y=step.position[1], z=step.position[2])
    msg.yaw = float(step.yaw)
    msg.normal = Vector3(x=step.normal[0], y=step.normal[1], z=step.normal[2])
    msg.swing_height = float(step.swing_height)
    return msg


def steps_from_msgs(msgs: Iterable[StepData]) -> List[Step]:
    """Steps from StepData messages (raises InvalidStepError on the first bad one)."""
    return [step_from_msg(m) for m in msgs]


def yaw_quaternion(yaw: float) -> Quaternion:
    """Quaternion of a rotation about z by ``yaw`` [rad]."""
    return Quaternion(x=0.0, y=0.0, z=math.sin(yaw / 2.0), w=math.cos(yaw / 2.0))


def quaternion_yaw(q: Quaternion) -> float:
    """Yaw [rad] of a quaternion (ZYX convention)."""
    return math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))


def foot_pose_to_msg(pose: FootPose) -> Pose:
    """Pose message of a sole pose."""
    x, y, z = pose.position
    return Pose(position=Point(x=x, y=y, z=z), orientation=yaw_quaternion(pose.yaw))


def point(v: Sequence[float]) -> Point:
    """Point message of a 3-vector."""
    return Point(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def vector3(v: Sequence[float]) -> Vector3:
    """Vector3 message of a 3-vector."""
    return Vector3(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def plan_to_msg(timeline: Timeline, plan_id: int, walking: bool, stamp) -> FootstepPlan:
    """FootstepPlan message of a timeline whose t = 0 is ``stamp``."""
    first = timeline.phases[0]
    msg = FootstepPlan()
    msg.header.stamp = stamp
    msg.header.frame_id = "world"
    msg.plan_id = int(plan_id)
    msg.walking = bool(walking)
    msg.left_start_position = point(first.left.position)
    msg.left_start_yaw = first.left.yaw
    msg.right_start_position = point(first.right.position)
    msg.right_start_yaw = first.right.yaw
    msg.steps = [step_to_msg(s) for s in timeline.steps]
    msg.sway_duration = timeline.timing.sway_duration
    msg.double_support_duration = timeline.timing.double_support_duration
    msg.catch_duration = timeline.timing.catch_duration
    return msg


def timeline_from_msg(msg: FootstepPlan) -> Timeline:
    """Timeline (t = 0 at ``msg.header.stamp``) of a FootstepPlan message.

    Raises:
        WalkMpcError: If the plan's steps or timing are invalid.
    """
    left = FootPose((msg.left_start_position.x, msg.left_start_position.y, msg.left_start_position.z),
                    msg.left_start_yaw)
    right = FootPose((msg.right_start_position.x, msg.right_start_position.y, msg.right_start_position.z),
                     msg.right_start_yaw)
    timing = GaitTiming(msg.sway_duration, msg.double_support_duration, msg.catch_duration)
    return Timeline(left, right, steps_from_msgs(msg.steps), timing)


def time_msg(ns: int) -> Time:
    """builtin_interfaces/Time of a stamp in integer nanoseconds (clamped at 0)."""
    ns = max(0, int(ns))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def stamp_ns(stamp) -> int:
    """Integer nanoseconds of a builtin_interfaces/Time (exact, no float rounding)."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def plan_from_msg(msg: FootstepPlan) -> WalkPlan:
    """The core plan of a FootstepPlan message, validated.

    Raises:
        WalkMpcError: If the plan's steps or timing are invalid.
    """
    return WalkPlan(int(msg.plan_id), bool(msg.walking), stamp_ns(msg.header.stamp), timeline_from_msg(msg))


class PlanMessage:
    """Former name of :class:`~walk_mpc.core.control.types.WalkPlan` construction from a message."""

    from_msg = staticmethod(plan_from_msg)


def sensor_sample_from_msg(msg: SensorState) -> SensorSample:
    """The core sensor sample of a SensorState (``time`` = the stamp in seconds), shapes checked.

    One copy of the values, no per-element work on the float64[] fields: their bytes and those of the base
    and IMU fields are joined in one ``bytes`` object, and the sample's arrays are read-only views of it,
    which ``SensorSample`` keeps without another copy (see :func:`~walk_mpc.core.sensors.immutable_float64`).
    An empty ``joint_vel`` means zero velocities.

    Raises:
        ShapeError: An array whose length does not match its names.
    """
    joint_names = tuple(msg.joint_names)
    joint_vel = msg.joint_vel
    if not len(joint_vel):
        joint_vel = array.array("d", bytes(8 * len(joint_names)))
    measured = (msg.joint_pos, joint_vel, msg.motor_pos, msg.motor_vel, msg.motor_torque, msg.contact)
    base_and_imu, orientations, rates = _base_and_imu_values(msg)
    joined = b"".join([*map(_float64_bytes, measured), base_and_imu])
    values = immutable_float64(np.frombuffer(joined))  # float64, read-only over the bytes: kept as it is
    views = []
    start = 0
    for field in measured:
        end = start + len(field)
        views.append(values[start:end])
        start = end
    joint_pos, joint_vel, motor_pos, motor_vel, motor_torque, contact = views
    imu = start + 13
    rate = imu + 4 * orientations
    acc = rate + 3 * rates
    return SensorSample(
        time=stamp_ns(msg.header.stamp) / 1e9,
        joint_names=joint_names, joint_pos=joint_pos, joint_vel=joint_vel,
        motor_names=tuple(msg.motor_names), motor_pos=motor_pos, motor_vel=motor_vel,
        motor_torque=motor_torque,
        contact_names=tuple(msg.contact_names), contact=contact,
        imu_names=tuple(msg.imu_names),
        imu_orientation_xyzw=values[imu:rate].reshape(orientations, 4),
        imu_angular_vel=values[rate:acc].reshape(rates, 3),
        imu_linear_acc=values[acc:].reshape(-1, 3),
        base_estimate_valid=bool(msg.base_estimate_valid),
        base_position=values[start:start + 3], base_orientation_xyzw=values[start + 3:start + 7],
        base_linear_velocity=values[start + 7:start + 10], base_angular_velocity=values[start + 10:imu],
    )


def _float64_bytes(values) -> object:
    """A float64[] message field as a buffer of native doubles: itself when it is an ``array('d')``, as
    rclpy makes it."""
    if type(values) is array.array and values.typecode == "d":
        return values
    return np.asarray(values, dtype=float).tobytes()


def _base_and_imu_values(msg: SensorState) -> Tuple[array.array, int, int]:
    """The base pose and twist of a SensorState (13 doubles), then its IMU orientations (x, y, z, w),
    angular velocities and linear accelerations; the numbers of orientations and of angular velocities."""
    pose, twist = msg.base_pose, msg.base_twist
    p, q, v, w = pose.position, pose.orientation, twist.linear, twist.angular
    values = [p.x, p.y, p.z, q.x, q.y, q.z, q.w, v.x, v.y, v.z, w.x, w.y, w.z]
    orientations, rates = msg.imu_orientation, msg.imu_angular_vel
    for q in orientations:
        values += (q.x, q.y, q.z, q.w)
    for w in rates:
        values += (w.x, w.y, w.z)
    for a in msg.imu_linear_acc:
        values += (a.x, a.y, a.z)
    return array.array("d", values), len(orientations), len(rates)


def named_values(names: Sequence[str], values: Sequence[float], what: str) -> dict[str, float]:
    """Dict name -> value of two parallel message arrays.

    Raises:
        InputError: If the arrays have different lengths.
    """
    if len(names) != len(values):
        raise InputError(what, f"{len(values)} values for {len(names)} names", "one value per name")
    return dict(zip(names, (float(v) for v in values)))


def sensor_joint_positions(msg: SensorState) -> dict[str, float]:
    """Joint positions [rad] by name from a SensorState."""
    return named_values(msg.joint_names, msg.joint_pos, "joint_pos")


def sensor_base_pose(msg: SensorState) -> Tuple[np.ndarray, np.ndarray] | None:
    """Base position [m] and quaternion (x, y, z, w) of a SensorState, or None if not valid."""
    if not msg.base_estimate_valid:
        return None
    p, q = msg.base_pose.position, msg.base_pose.orientation
    return np.array([p.x, p.y, p.z]), np.array([q.x, q.y, q.z, q.w])


__all__ = [
    "Foot",
    "PlanMessage",
    "plan_from_msg",
    "sensor_sample_from_msg",
    "stamp_ns",
    "foot_pose_to_msg",
    "named_values",
    "plan_to_msg",
    "point",
    "quaternion_yaw",
    "sensor_base_pose",
    "sensor_joint_positions",
    "step_from_msg",
    "step_to_msg",
    "steps_from_msgs",
    "timeline_from_msg",
    "vector3",
    "yaw_quaternion",
]
