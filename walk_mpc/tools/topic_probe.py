"""Print the messages of a topic as JSON lines (``ros2 topic echo`` for machines without ros2cli).

Usage: python -m walk_mpc.tools.topic_probe TOPIC TYPE [--count N] [--timeout S]
TYPE is e.g. walk_mpc/msg/SensorState. Exit code 0 after N messages, 1 on timeout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.qos import qos_profile_sensor_data

from walk_mpc.nodes._common import is_shutdown
from walk_mpc.tools.msgdict import message_type, to_dict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("topic")
    parser.add_argument("type", help="message type, e.g. walk_mpc/msg/SensorState")
    parser.add_argument("--count", type=int, default=1, help="messages to print before exiting")
    parser.add_argument("--timeout", type=float, default=30.0, help="[s] give up after this long")
    parser.add_argument("--sensor-qos", action="store_true", help="best-effort sensor-data QoS")
    args = parser.parse_args(argv)
    cls = message_type(args.type)
    rclpy.init()
    node = rclpy.create_node("topic_probe")
    received = []

    def callback(msg) -> None:
        received.append(msg)
        print(json.dumps(to_dict(msg)), flush=True)

    qos = qos_profile_sensor_data if args.sensor_qos else 10
    node.create_subscription(cls, args.topic, callback, qos)
    deadline = time.monotonic() + args.timeout
    try:
        while len(received) < args.count and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
    except (KeyboardInterrupt, RuntimeError, ExternalShutdownException) as exc:
        if not is_shutdown(exc):  # SIGINT while publishing/taking: a shutdown, not an error
            raise
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    if len(received) < args.count:
        print(f"topic_probe: {len(received)}/{args.count} messages on {args.topic} before timeout",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
