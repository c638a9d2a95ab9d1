"""ROS 2 node ``robot_state``: the robot model in the graph, ``robot_description`` and the TF tree.

What robot_state_publisher does, from the core's own kinematics
(:class:`~walk_mpc.core.body.frames.RobotFrames`) and the measured state rather than joint_states:

* publishes ``description_topic`` (``std_msgs/String``, reliable, transient local, depth 1): the URDF text,
  once at start (mesh ``package://`` URIs resolved to ``file://`` paths with ``frames.mesh_uris: file``);
* subscribes ``sensor_topic`` (``walk_mpc/msg/SensorState``, best effort) and publishes ``tf_topic``
  (``tf2_msgs/TFMessage``, reliable, depth 100) for each sample (at most one per ``publish_period`` of
  sample time): ``frames.world_frame -> <prefix>base_link`` from the sample's base pose (REP-105: ``world``
  or ``odom``; only when the sample carries a base estimate), then ``parent -> child`` of every other URDF
  link, every link name prefixed with ``frames.frame_prefix`` (e.g. ``"talos1/"`` for a namespaced robot;
  rviz's RobotModel display takes the same prefix as "TF Prefix"). Fixed joints are on ``tf_topic`` too
  (no ``/tf_static``). Each transform is stamped with the sample's stamp.

Where ``tf2_msgs`` is not installed (the PyPI ROS 2 wheels) there is no TF message type to publish: the
node publishes ``robot_description`` only and says so in its log; the recorder
(:class:`~walk_mpc.tools.recorder.RecorderNode` with ``robot_frames``) computes the same transforms from the
recorded ``sensor_state`` and writes ``/tf`` into the recording with the standard schema, so Foxglove shows
the robot. The TF message is serialized here (:func:`tf_message_cdr`) and published as bytes: building 60
``TransformStamped`` objects per sample would cost more than the kinematics.

A sample the frames refuse (non-finite values) is skipped and logged (at most once per second, with a
count); the node keeps running.
"""

from __future__ import annotations

import dataclasses
import struct
import sys
from typing import Optional, Sequence

import numpy as np
from std_msgs.msg import String

from walk_mpc.core.body.frames import RobotFrames, TransformTree
from walk_mpc.core.errors import ParameterError, WalkMpcError
from walk_mpc.core.params import check_nonnegative
from walk_mpc.msg import SensorState
from walk_mpc.nodes._common import (
    LATCHED_QOS,
    DataclassParameters,
    GraphNode,
    RosLog,
    node_options,
    reliable_qos,
    run,
    stream_input_qos,
)
from walk_mpc.nodes.conversions import stamp_ns
from walk_mpc.nodes.sensor_cdr import SensorStateReader, sensor_input

try:  # absent from the PyPI ROS 2 wheels
    from tf2_msgs.msg import TFMessage
except ImportError:  # pragma: no cover - depends on the install
    TFMessage = None

#: The TF message type, and its definition (tf2_msgs/msg/TFMessage.msg), for installs without tf2_msgs.
TF_TYPE = "tf2_msgs/msg/TFMessage"
TF_MESSAGE_DEFINITION = "geometry_msgs/TransformStamped[] transforms\n"

#: History depth of the TF publisher.
TF_DEPTH = 100


@dataclasses.dataclass(frozen=True)
class RobotStateNodeParameters:
    """Parameters of the robot_state node.

    Attributes:
        sensor_topic: SensorState input.
        tf_topic: TF output (``/tf``: one tree for every robot, their frames told apart by ``frame_prefix``).
        description_topic: URDF output (relative: per namespace, as robot_state_publisher's).
        publish_period: Least sample time between two TF messages [s] (0 = every sample).
        frames: Robot model, world frame, frame prefix and mesh URIs.
    """

    sensor_topic: str = "sensor_state"
    tf_topic: str = "/tf"
    description_topic: str = "robot_description"
    publish_period: float = 0.0
    frames: RobotFrames.Parameters = dataclasses.field(default_factory=RobotFrames.Parameters)

    def __post_init__(self) -> None:
        for field in ("sensor_topic", "tf_topic", "description_topic"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ParameterError(field, getattr(self, field), "a topic name")
        check_nonnegative("publish_period", self.publish_period)
        if not isinstance(self.frames, RobotFrames.Parameters):
            raise ParameterError("frames", self.frames, "a RobotFrames.Parameters")


def _layout(parents: tuple, children: tuple) -> tuple[list, list]:
    """Per transform of a TFMessage, the bytes around its stamp and pose: (padding before the stamp, frame
    names after it up to the pose). They depend on the frame names only: CDR alignment counts from the
    start of the payload (after the 4-byte encapsulation header)."""
    before, after = [], []
    offset = 4  # the sequence length
    for parent, child in zip(parents, children):
        pad = -offset % 4
        offset += pad + 8  # header.stamp: int32 sec, uint32 nanosec
        names = bytearray()
        for name in (parent, child):  # header.frame_id, child_frame_id: uint32 length (with the NUL), bytes
            text = name.encode()
            names += b"\0" * (-(offset + len(names)) % 4) + struct.pack("<I", len(text) + 1) + text + b"\0"
        names += b"\0" * (-(offset + len(names)) % 8)  # transform: float64s
        offset += len(names) + 56  # translation (x, y, z), rotation (x, y, z, w)
        before.append(b"\0" * pad)
        after.append(bytes(names))
    return before, after


_LAYOUTS: dict = {}


def tf_message_cdr(tree: TransformTree, stamp_ns: int) -> bytes:
    """CDR (little endian) bytes of a ``tf2_msgs/msg/TFMessage`` holding every transform of ``tree``, each
    stamped ``stamp_ns`` [ns]: what ``serialize_message`` makes of the message, without tf2_msgs."""
    key = (tree.parents, tree.children)
    layout = _LAYOUTS.get(key)
    if layout is None:
        if len(_LAYOUTS) >= 16:
            _LAYOUTS.clear()
        layout = _LAYOUTS[key] = _layout(*key)
    before, after = layout
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    stamp = struct.pack("<iI", sec, nanosec)
    poses = np.concatenate((tree.translations, tree.rotations_xyzw), axis=1).astype("<f8").tobytes()
    parts = [b"\x00\x01\x00\x00", struct.pack("<I", len(tree))]  # CDR_LE encapsulation, sequence length
    for i, (pad, names) in enumerate(zip(before, after)):
        parts += (pad, stamp, names, poses[56 * i:56 * i + 56])
    return b"".join(parts)


class RobotStateNode(GraphNode):
    """Publish the robot description once and the TF tree of each measured sample."""

    def __init__(self, params: Optional[RobotStateNodeParameters] = None, tf_type=None, **kwargs) -> None:
        """Create the node and load the robot model.

        Args:
            params: Parameters; None reads them from the node's ROS parameters.
            tf_type: Message class of ``tf_topic`` (default: tf2_msgs' TFMessage when installed; None and no
                tf2_msgs: no TF published). The messages are published as serialized TFMessage bytes.
            **kwargs: Passed to ``Node.__init__`` (``parameter_overrides``, ``context``).

        Raises:
            ParameterError, ConfigError, ModelError: Invalid parameters or robot.
        """
        super().__init__("robot_state", **node_options(), **kwargs)
        if params is None:
            params = DataclassParameters(self, RobotStateNodeParameters).read()
        self.params = params
        self.frames = RobotFrames(params.frames)
        self.published = 0  # TF messages published
        self.rejected = 0  # samples refused by the frames
        self._log = RosLog(self.get_logger())
        self._period_ns = round(params.publish_period * 1e9)
        self._last_ns: Optional[int] = None
        self._description_pub = self.create_publisher(String, params.description_topic, LATCHED_QOS)
        self._description_pub.publish(String(data=self.frames.description()))
        tf_type = tf_type if tf_type is not None else TFMessage
        self._tf_pub = self._sensor_sub = None
        if tf_type is not None:
            self._tf_pub = self.create_publisher(tf_type, params.tf_topic, reliable_qos(TF_DEPTH))
            self._sensor_reader = SensorStateReader()
            self._sensor_sub = self.create_subscription(SensorState, params.sensor_topic, self._on_sensor,
                                                        stream_input_qos(), raw=True)
            self.get_logger().info(
                f"{self.frames.robot.name}: {len(self.frames.link_names)} links; TF on "
                f"'{self._tf_pub.topic_name}' from '{self._sensor_sub.topic_name}' ("
                f"{params.frames.world_frame} -> {self.frames.base_frame}), description on "
                f"'{self._description_pub.topic_name}'")
        else:
            self.get_logger().info(
                f"{self.frames.robot.name}: description on '{self._description_pub.topic_name}'; tf2_msgs is "
                "not installed, so no TF is published (the recorder computes /tf from sensor_state into "
                "walk.mcap)")

    @property
    def publishes_tf(self) -> bool:
        """Whether the node publishes the TF tree (tf2_msgs installed, or a ``tf_type`` given)."""
        return self._tf_pub is not None

    def _on_sensor(self, msg) -> None:
        """A SensorState: serialized (the subscription's, see :mod:`~walk_mpc.nodes.sensor_cdr`) or not."""
        if isinstance(msg, SensorState):
            now = stamp_ns(msg.header.stamp)
            if self._last_ns is not None and self._period_ns and 0 <= now - self._last_ns < self._period_ns:
                return
        try:
            now, sample = sensor_input(msg, self._sensor_reader)
            if self._last_ns is not None and self._period_ns and 0 <= now - self._last_ns < self._period_ns:
                return
            tree = self.frames.observe(sample)
        except WalkMpcError as exc:
            self.rejected += 1
            when = f"at {stamp_ns(msg.header.stamp) * 1e-9:.3f} s " if isinstance(msg, SensorState) else ""
            self._log.warning(f"sample {when}skipped ({self.rejected} so far): {exc}")
            return
        self._last_ns = now
        self._tf_pub.publish(tf_message_cdr(tree, now))
        self.published += 1


NODE_CLASS = RobotStateNode


def main(args: Optional[Sequence[str]] = None) -> int:
    """Run the robot_state node until shutdown; exit code 2 on a configuration error."""
    return run(lambda: RobotStateNode(), args)


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["RobotStateNode", "RobotStateNodeParameters", "TF_MESSAGE_DEFINITION", "TF_TYPE", "tf_message_cdr"]
