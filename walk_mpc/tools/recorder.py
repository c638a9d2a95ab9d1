"""Record ROS 2 topics to MCAP with ROS 2 (CDR) serialization, openable by Foxglove and ``ros2 bag``.

Library: ``McapRecorder(path).write(topic, type_name, msg, stamp_ns)``; node: ``RecorderNode(path, topics)``.
Schemas are named by the ROS 2 type (``pkg/msg/Type``, as rosbag2 names them) and hold the ``ros2msg``
definitions read from the installed ``share/<pkg>/msg/*.msg`` files, with their dependencies appended the way
rosbag2 does.

The robot model: ``RecorderNode(..., robot_frames=RobotFrames(...))`` also writes ``/robot_description``
(``std_msgs/msg/String``, the URDF, once at start) and ``/tf`` (``tf2_msgs/msg/TFMessage``: the transforms
of every link, computed from each recorded ``sensor_state`` sample by
:class:`~walk_mpc.core.body.frames.RobotFrames`), so that Foxglove shows the robot walking. ``tf2_msgs`` need
not be installed (the PyPI wheels lack it): the message is encoded by
:func:`~walk_mpc.nodes.robot_state.tf_message_cdr` and its schema is the standard definition
(``TF_MESSAGE_DEFINITION``) with its installed geometry_msgs dependencies.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from mcap.writer import CompressionType, Writer
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.serialization import deserialize_message, serialize_message
from std_msgs.msg import String

from walk_mpc.core.body.frames import RobotFrames, TransformTree
from walk_mpc.core.errors import WalkMpcError
from walk_mpc.nodes.conversions import sensor_sample_from_msg
from walk_mpc.nodes.conversions import stamp_ns as message_stamp_ns
from walk_mpc.nodes.robot_state import TF_MESSAGE_DEFINITION, TF_TYPE, tf_message_cdr
from walk_mpc.tools.msgdict import message_type


@dataclasses.dataclass(frozen=True)
class RecordedMessage:
    """A message of a recording: its topic, the recorder's receive time [ns] and the decoded message."""

    topic: str
    log_time_ns: int
    msg: object


def decoded_messages(path: os.PathLike, topics: Optional[Iterable[str]] = None) -> Iterator[RecordedMessage]:
    """The messages of an MCAP recording of ROS 2 (CDR) messages (``topics``: those only), in log-time order,
    each decoded with its recorded schema (mcap_ros2's decoder: no installed message package needed)."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    with open(path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for _schema, channel, message, msg in reader.iter_decoded_messages(
                topics=None if topics is None else list(topics), log_time_order=True):
            yield RecordedMessage(channel.topic, message.log_time, msg)


PRIMITIVES = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
              "uint32", "int64", "uint64", "string", "wstring"}
SEPARATOR = "=" * 80

#: Definitions written here, used when no installed package has them.
KNOWN_DEFINITIONS = {TF_TYPE: TF_MESSAGE_DEFINITION}
DESCRIPTION_TYPE = "std_msgs/msg/String"


def _share_directories() -> List[Path]:
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    return [Path(p) / "share" for p in prefixes]


def msg_file(type_name: str) -> Path:
    """Path of the .msg file of 'pkg/msg/Type' in the ament prefixes.

    Raises:
        FileNotFoundError: If no prefix has it.
    """
    pkg, _, name = type_name.partition("/msg/")
    for share in _share_directories():
        path = share / pkg / "msg" / f"{name}.msg"
        if path.is_file():
            return path
    raise FileNotFoundError(f"no {pkg}/msg/{name}.msg under AMENT_PREFIX_PATH")


def _dependencies(type_name: str, text: str) -> List[str]:
    pkg = type_name.split("/")[0]
    deps = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or "=" in line.split()[0]:
            continue
        parts = line.split()
        if len(parts) < 2 or "=" in parts[1]:
            continue  # constant
        base = re.sub(r"\[.*\]$", "", parts[0])
        base = re.sub(r"<=\d+$", "", base)
        if base in PRIMITIVES:
            continue
        if "/" in base:
            dep_pkg, dep_name = base.split("/")[0], base.split("/")[-1]
        else:
            dep_pkg, dep_name = pkg, base
        deps.append(f"{dep_pkg}/msg/{dep_name}")
    return deps


def msgdef_text(type_name: str) -> str:
    """The ros2msg schema of ``type_name`` ('pkg/msg/Type'): its definition then each dependency's.

    A type of :data:`KNOWN_DEFINITIONS` that no prefix installs takes the definition written here.
    """
    try:
        root = msg_file(type_name).read_text()
    except FileNotFoundError:
        if type_name not in KNOWN_DEFINITIONS:
            raise
        root = KNOWN_DEFINITIONS[type_name]
    parts, seen, queue = [root], {type_name}, _dependencies(type_name, root)
    while queue:
        dep = queue.pop(0)
        if dep in seen:
            continue
        seen.add(dep)
        text = msg_file(dep).read_text()
        pkg, _, name = dep.partition("/msg/")
        parts.append(f"{SEPARATOR}\nMSG: {pkg}/{name}\n{text}")
        queue.extend(_dependencies(dep, text))
    return "\n".join(parts)


class McapRecorder:
    """Writes serialized ROS 2 messages to an MCAP file (one channel per topic)."""

    def __init__(self, path: os.PathLike) -> None:
        self.path = Path(path)
        self._stream = open(self.path, "wb")
        self._writer = Writer(self._stream, compression=CompressionType.ZSTD)
        self._writer.start(profile="ros2", library="walk_mpc")
        self._schemas: Dict[str, int] = {}
        self._channels: Dict[Tuple[str, str], int] = {}
        self._sequence = 0
        self.count = 0

    def _channel(self, topic: str, type_name: str) -> int:
        key = (topic, type_name)
        if key not in self._channels:
            if type_name not in self._schemas:
                self._schemas[type_name] = self._writer.register_schema(
                    name=type_name, encoding="ros2msg",
                    data=msgdef_text(type_name).encode())
            self._channels[key] = self._writer.register_channel(
                topic=topic if topic.startswith("/") else f"/{topic}", message_encoding="cdr",
                schema_id=self._schemas[type_name])
        return self._channels[key]

    def write(self, topic: str, type_name: str, msg, stamp_ns: Optional[int] = None) -> None:
        """Write one message (a message object, or its CDR bytes); ``stamp_ns`` [ns] defaults to now."""
        stamp_ns = time.time_ns() if stamp_ns is None else int(stamp_ns)
        data = msg if isinstance(msg, (bytes, bytearray)) else serialize_message(msg)
        self._writer.add_message(channel_id=self._channel(topic, type_name), log_time=stamp_ns,
                                 data=data, publish_time=stamp_ns, sequence=self._sequence)
        self._sequence += 1
        self.count += 1

    def write_transforms(self, topic: str, tree: TransformTree, stamp_ns: int,
                         sample_stamp_ns: Optional[int] = None) -> None:
        """Write a transform tree as one ``tf2_msgs/msg/TFMessage`` on ``topic``, logged at ``stamp_ns`` [ns];
        each transform's ``header.stamp`` is ``sample_stamp_ns`` (default ``stamp_ns``)."""
        header_ns = stamp_ns if sample_stamp_ns is None else sample_stamp_ns
        self.write(topic, TF_TYPE, tf_message_cdr(tree, header_ns), stamp_ns)

    def write_description(self, topic: str, urdf: str, stamp_ns: Optional[int] = None) -> None:
        """Write the robot description (URDF text) as a ``std_msgs/msg/String`` on ``topic``."""
        self.write(topic, DESCRIPTION_TYPE, String(data=urdf), stamp_ns)

    def topics(self) -> set:
        """Topics written so far (each has its channel from its first message on)."""
        return {topic for topic, _ in self._channels}

    @property
    def closed(self) -> bool:
        """True once :meth:`close` finished the file."""
        return self._stream.closed

    def close(self) -> None:
        """Finish the file (idempotent)."""
        if not self._stream.closed:
            self._writer.finish()
            self._stream.close()


def graph_robot_frames(robot: str = "talos", namespace: str = "",
                       config: Optional[str] = None) -> RobotFrames:
    """The transform tree the robot_state node of a graph publishes: robot ``robot`` of config/graph.yaml,
    its parameters file (``config``: another one), the frames of graph ``namespace`` (``<ns>/world``,
    ``<ns>/<link>``).

    Raises:
        ConfigError: Unknown robot, invalid namespace or parameters.
    """
    from walk_mpc.core.params import flatten, from_mapping, unflatten
    from walk_mpc.graph import load_graph, namespace_frames
    from walk_mpc.nodes._common import config_defaults
    from walk_mpc.nodes.robot_state import RobotStateNodeParameters

    graph = load_graph()
    values = flatten(config_defaults("robot_state", graph.config_path(robot, config)))
    values.update(graph.overrides(robot).get("robot_state", {}))
    values.update(namespace_frames(namespace).get("robot_state", {}))
    params = from_mapping(RobotStateNodeParameters, unflatten(values), source="robot_state")
    return RobotFrames(params.frames)


def type_name_of(cls) -> str:
    """'pkg/msg/Type' of a message class."""
    module = cls.__module__.split(".")
    return f"{module[0]}/{module[1]}/{cls.__name__}"


class RecorderNode(Node):
    """Subscribes to topics and writes every message, stamped with the receive time, to an MCAP file.

    Subscriptions are raw: messages arrive as their CDR bytes and are written as they are (no
    deserialization and serialization again), which keeps the recorder light on a busy machine.

    Its subscriptions are created in the constructor: build it before an executor spins it, then add it
    (adding a node to a spinning executor is safe). Destroy it where no other thread spins it: after the
    executor stopped, or with :meth:`walk_mpc.tools.spin_thread.SpinThread.destroy_node` (destroying
    subscriptions while another thread builds the executor's wait set kills that thread, see
    :mod:`walk_mpc.tools.spin_thread`). The file is finished after the subscriptions are gone; a message
    callback that still runs then is dropped.

    With ``robot_frames``, the recording also holds the robot model (see the module docstring):
    ``description_topic`` once at start, and ``tf_topic`` for each message on ``sensor_topic`` (which must be
    among ``topics``, as ``walk_mpc/msg/SensorState``), its transforms stamped with the sample's stamp and
    logged at the sample's receive time. With ``tf_at_close`` (default) the samples are kept (their CDR bytes)
    and their transforms computed and written when the file is finished: the kinematics cost nothing while
    the graph runs (MCAP readers order messages by log time through the file's index). A sample the frames
    refuse is skipped and counted (:attr:`tf_rejected`). Give no ``robot_frames`` when ``tf`` itself is
    recorded (a ROS 2 install with tf2_msgs, where the robot_state node publishes it).

    Args:
        path: Output file.
        topics: (topic, 'pkg/msg/Type' or message class, QoS profile or depth) triples.
        robot_frames: The robot's transform tree, to record ``/tf`` and ``/robot_description``.
        sensor_topic: The SensorState topic the transforms are computed from.
        tf_topic: Topic of the transforms in the recording.
        description_topic: Topic of the URDF in the recording.
        tf_at_close: Compute the transforms when the file is finished (else as each sample arrives).
    """

    def __init__(self, path: os.PathLike, topics: Iterable[Tuple[str, object, object]],
                 robot_frames: Optional[RobotFrames] = None, sensor_topic: str = "sensor_state",
                 tf_topic: str = "tf", description_topic: str = "robot_description", tf_at_close: bool = True,
                 **kwargs) -> None:
        super().__init__("walk_mpc_recorder", **kwargs)
        self.recorder = McapRecorder(path)
        self._lock = threading.Lock()  # closing the file vs writing a message
        self._subscriptions_by_topic = {}
        self._frames = robot_frames
        self._tf_topic = tf_topic
        self.tf_rejected = 0  # sensor samples whose transforms could not be computed
        self._sensor_class = None
        self._tf_at_close = tf_at_close
        self._pending: List[Tuple[int, bytes]] = []  # (receive stamp [ns], SensorState CDR) for tf_at_close
        for topic, msg_type, qos in topics:
            cls = message_type(msg_type) if isinstance(msg_type, str) else msg_type
            name = type_name_of(cls)
            record = self._record
            if robot_frames is not None and topic.strip("/") == sensor_topic.strip("/"):
                self._sensor_class = cls
                record = self._record_with_tf
            self._subscriptions_by_topic[topic] = self.create_subscription(
                cls, topic, lambda msg, t=topic, n=name, r=record: r(t, n, msg),
                qos if isinstance(qos, (QoSProfile, int)) else 10, raw=True)
        if robot_frames is not None:
            if self._sensor_class is None:
                raise ValueError(f"robot_frames needs the sensor topic '{sensor_topic}' among the topics")
            self.recorder.write_description(description_topic, robot_frames.description(),
                                            self.get_clock().now().nanoseconds)

    def _record(self, topic: str, type_name: str, msg) -> None:
        stamp_ns = self.get_clock().now().nanoseconds
        with self._lock:
            if not self.recorder.closed:
                self.recorder.write(topic, type_name, msg, stamp_ns)

    def _record_with_tf(self, topic: str, type_name: str, msg) -> None:
        """Record a SensorState sample and (now or at close) the transforms of the robot it measures."""
        stamp_ns = self.get_clock().now().nanoseconds
        with self._lock:
            if self.recorder.closed:
                return
            self.recorder.write(topic, type_name, msg, stamp_ns)
            if self._tf_at_close:
                self._pending.append((stamp_ns, bytes(msg)))
                return
        self._write_tf(stamp_ns, msg)

    def _write_tf(self, stamp_ns: int, data: bytes) -> None:
        """Write the transforms of one SensorState (CDR bytes), logged at ``stamp_ns``."""
        try:
            state = deserialize_message(data, self._sensor_class)
            tree = self._frames.observe(sensor_sample_from_msg(state))
        except (WalkMpcError, ValueError, TypeError):
            self.tf_rejected += 1
            return
        sample_ns = message_stamp_ns(state.header.stamp)
        with self._lock:
            if not self.recorder.closed:
                self.recorder.write_transforms(self._tf_topic, tree, stamp_ns, sample_ns)

    def silent_topics(self) -> List[str]:
        """Topics nothing was recorded from yet (e.g. their publishers not discovered yet)."""
        written = self.recorder.topics()
        return [topic for topic in self._subscriptions_by_topic if topic not in written]

    def close(self) -> None:
        """Write the transforms of the kept samples (``tf_at_close``), then finish the file (from any thread:
        messages arriving afterwards are dropped)."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._tf_at_close = False  # a sample arriving from now on is written with its transforms
        for stamp_ns, data in pending:
            self._write_tf(stamp_ns, data)
        with self._lock:
            self.recorder.close()

    def destroy_node(self) -> None:
        """Destroy the subscriptions, then finish the file."""
        super().destroy_node()
        self.close()
