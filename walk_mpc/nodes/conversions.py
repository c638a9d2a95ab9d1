"""Conversions between walk_mpc messages and core types (no algorithm, no rclpy node)."""

from __future__ import annotations

import math
from typing import Iterable, List, Sequence, Tuple

import numpy as np
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3

from walk_mpc.core.control.types import WalkPlan
from walk_mpc.core.errors import InputError
from walk_mpc.core.sensors import SensorSample
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

    Raises:
        ShapeError: An array whose length does not match its names.
    """
    def vectors(values) -> np.ndarray:
        return np.array([(v.x, v.y, v.z) for v in values], dtype=float).reshape(-1, 3)

    pose, twist = msg.base_pose, msg.base_twist
    return SensorSample(
        time=stamp_ns(msg.header.stamp) / 1e9,
        joint_names=tuple(msg.joint_names), joint_pos=np.asarray(msg.joint_pos, dtype=float),
        joint_vel=np.asarray(msg.joint_vel, dtype=float) if len(msg.joint_vel) else
        np.zeros(len(msg.joint_names)),
        motor_names=tuple(msg.motor_names), motor_pos=np.asarray(msg.motor_pos, dtype=float),
        motor_vel=np.asarray(msg.motor_vel, dtype=float),
        motor_torque=np.asarray(msg.motor_torque, dtype=float),
        contact_names=tuple(msg.contact_names), contact=np.asarray(msg.contact, dtype=float),
        imu_names=tuple(msg.imu_names),
        imu_orientation_xyzw=np.array([(q.x, q.y, q.z, q.w) for q in msg.imu_orientation],
                                      dtype=float).reshape(-1, 4),
        imu_angular_vel=vectors(msg.imu_angular_vel), imu_linear_acc=vectors(msg.imu_linear_acc),
        base_estimate_valid=bool(msg.base_estimate_valid),
        base_position=np.array([pose.position.x, pose.position.y, pose.position.z]),
        base_orientation_xyzw=np.array([pose.orientation.x, pose.orientation.y, pose.orientation.z,
                                        pose.orientation.w]),
        base_linear_velocity=np.array([twist.linear.x, twist.linear.y, twist.linear.z]),
        base_angular_velocity=np.array([twist.angular.x, twist.angular.y, twist.angular.z]),
    )


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
