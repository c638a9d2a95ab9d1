"""Messages of the ik node: a ComReference in, a joint command's JointTrajectory, Float64MultiArray and
JointState out (conversions only: no algorithm, no node)."""

from __future__ import annotations

import array
from typing import Optional, Sequence, Union

import numpy as np
from builtin_interfaces.msg import Duration
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from walk_mpc.core.control.types import NS_PER_S, CoMReference, JointCommand
from walk_mpc.core.control.whole_body_stage import BadReference
from walk_mpc.msg import ComReference
from walk_mpc.nodes.conversions import stamp_ns, time_msg
from walk_mpc.nodes.sensor_cdr import deserialized, read_com_reference


def duration_msg(seconds: float) -> Duration:
    """Duration message of ``seconds`` >= 0."""
    total = int(round(seconds * 1e9))
    return Duration(sec=total // NS_PER_S, nanosec=total % NS_PER_S)


def doubles(values: np.ndarray) -> array.array:
    """A float64[] message field of an array, without the per-element checks of the message setter."""
    return array.array("d", np.ascontiguousarray(values, dtype=float).tobytes())


def com_reference_input(msg) -> Union[CoMReference, BadReference]:
    """:func:`com_reference_from_msg` of a ComReference subscription's message: serialized bytes (a ``raw``
    subscription, read with numpy: :func:`~walk_mpc.nodes.sensor_cdr.read_com_reference`) or a message.

    Raises:
        InputError: Bytes that are no ComReference.
    """
    if not isinstance(msg, bytes):
        return com_reference_from_msg(msg)
    fields = read_com_reference(msg)
    if fields is None:
        return com_reference_from_msg(deserialized(msg, ComReference))
    now, plan_id, times, coms = fields.stamp_ns, int(fields.plan_id), fields.times, fields.com_position
    if len(times) < 2 or len(coms) != len(times):
        return BadReference(now, plan_id, f"reference has {len(times)} times and {len(coms)} CoM positions; "
                            "expected 2 (T, 2T) of each")

    def rows(points: np.ndarray) -> np.ndarray:
        return points[:2] if len(points) >= 2 else np.zeros((2, 3))

    tilt = _sole_tilt(now, plan_id, fields.sole_tilt)
    if isinstance(tilt, BadReference):
        return tilt
    return CoMReference(now, plan_id, times[:2], rows(coms), rows(fields.com_velocity), rows(fields.zmp),
                        tilt)


def _sole_tilt(now: int, plan_id: int, values) -> Union[np.ndarray, None, BadReference]:
    """The (2, 2, 2) sole tilts of a ComReference's ``sole_tilt`` (its first two instants), None when empty
    (level ground), or a :class:`BadReference` saying what is malformed."""
    values = np.asarray(values, dtype=float).reshape(-1)
    if not values.size:
        return None
    if values.size < 8 or values.size % 4:
        return BadReference(now, plan_id, f"reference has {values.size} sole tilt values; expected 4 per "
                            "time (left roll, left pitch, right roll, right pitch) for 2 times or more, or "
                            "none")
    tilt = values[:8].reshape(2, 2, 2)
    if not np.all(np.isfinite(tilt)) or np.any(np.abs(tilt) > 0.5 * np.pi):
        return BadReference(now, plan_id, f"reference sole tilts {tilt.reshape(-1).tolist()} are not finite "
                            "roll and pitch angles within +-pi/2 rad")
    return tilt


def com_reference_from_msg(msg: ComReference) -> Union[CoMReference, BadReference]:
    """The core reference of a ComReference (its first two instants; CoM velocity and ZMP zero when not
    given), or a :class:`BadReference` saying what is malformed (the stage holds with BAD_REFERENCE)."""
    now, plan_id = stamp_ns(msg.header.stamp), int(msg.plan_id)
    times, coms = list(msg.time_from_stamp), msg.com_position
    if len(times) < 2 or len(coms) != len(times):
        return BadReference(now, plan_id, f"reference has {len(times)} times and {len(coms)} CoM positions; "
                            "expected 2 (T, 2T) of each")

    def rows(points) -> np.ndarray:
        return np.array([(p.x, p.y, p.z) for p in points[:2]]) if len(points) >= 2 else np.zeros((2, 3))

    tilt = _sole_tilt(now, plan_id, msg.sole_tilt)
    if isinstance(tilt, BadReference):
        return tilt
    return CoMReference(now, plan_id, times[:2], rows(coms), rows(msg.com_velocity), rows(msg.zmp), tilt)


class JointMessages:
    """Builds the messages of a :class:`~walk_mpc.core.control.types.JointCommand`.

    * ``JointTrajectory``: ``header.stamp`` = the command's stamp, ``joint_names``, two points at
      ``time_from_start`` T and 2T with positions and velocities (ros2_control's JointTrajectoryController);
    * ``Float64MultiArray``: the positions of the first point (forward_command_controller style);
    * ``JointState`` (if ``joint_states``): the first point, stamped at the command's stamp + T (the
      instant it is to be reached).

    Args:
        joint_names: The command's joints, in order.
        joint_states: Whether to build the JointState.
    """

    def __init__(self, joint_names: Sequence[str], joint_states: bool = True) -> None:
        self._names = list(joint_names)  # the messages' joint_names (shared, never mutated)
        self._states = bool(joint_states)

    def build(self, command: JointCommand) -> tuple[JointTrajectory, Float64MultiArray, Optional[JointState]]:
        """The trajectory, the commands and the joint state (None if not built) of ``command``."""
        trajectory = JointTrajectory()
        trajectory.header.stamp = time_msg(command.stamp_ns)
        trajectory.joint_names = self._names
        points = [doubles(p) for p in command.positions]
        trajectory.points = [
            JointTrajectoryPoint(positions=p, velocities=doubles(v), time_from_start=duration_msg(dt))
            for dt, p, v in zip(command.times, points, command.velocities)
        ]
        state = None
        if self._states:
            state = JointState()
            state.header.stamp = time_msg(command.stamp_ns + int(round(command.times[0] * 1e9)))
            state.name = self._names
            state.position = points[0]
            state.velocity = trajectory.points[0].velocities
        return trajectory, Float64MultiArray(data=points[0]), state


__all__ = ["JointMessages", "com_reference_from_msg", "com_reference_input", "doubles", "duration_msg"]
