"""Publish a scripted stream of SensorState messages (replay a JSON-lines file, or a constant sample).

Each published message carries a synthetic stamp ``t0 + k * period`` (message time, not the wall clock),
so consumers that derive dt from stamps see the scripted timing whatever the machine load.

Usage:
  python -m walk_mpc.tools.sensor_replay --file samples.jsonl [--period 0.001] [--wait-subscribers 1]
  python -m walk_mpc.tools.sensor_replay --joint j1=0.1 --joint j2=-0.2 --count 100

A JSON line is a SensorState as a dict (see walk_mpc.tools.msgdict), the header may be omitted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Iterator

import rclpy
from rclpy.executors import ExternalShutdownException

from walk_mpc.msg import SensorState
from walk_mpc.nodes._common import is_shutdown
from walk_mpc.tools.msgdict import from_dict


def _samples(args) -> Iterator[SensorState]:
    if args.file:
        with open(args.file, encoding="utf-8") as stream:
            for line in stream:
                if line.strip():
                    yield from_dict(SensorState, json.loads(line))
        return
    names, values = [], []
    for item in args.joint:
        name, _, value = item.partition("=")
        names.append(name)
        values.append(float(value))
    k = 0
    while args.count == 0 or k < args.count:
        k += 1
        yield SensorState(joint_names=names, joint_pos=values, joint_vel=[0.0] * len(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", default="sensor_state")
    parser.add_argument("--file", help="JSON lines of SensorState dicts")
    parser.add_argument("--joint", action="append", default=[], help="NAME=POSITION of a constant sample")
    parser.add_argument("--count", type=int, default=10, help="constant samples to send (0: until stopped)")
    parser.add_argument("--period", type=float, default=0.01, help="[s] stamp increment between messages")
    parser.add_argument("--t0", type=float, default=1000.0, help="[s] stamp of the first message")
    parser.add_argument("--wait-subscribers", type=int, default=1,
                        help="wait until this many subscribers are matched before publishing")
    parser.add_argument("--pace", type=float, default=0.0,
                        help="[s] wall-clock pause between messages (0: as fast as the queue allows)")
    parser.add_argument("--timeout", type=float, default=30.0, help="[s] give up waiting for subscribers")
    args = parser.parse_args(argv)
    rclpy.init()
    node = rclpy.create_node("sensor_replay")
    publisher = node.create_publisher(SensorState, args.topic, 1000)
    code = 0
    try:
        deadline = time.monotonic() + args.timeout
        while publisher.get_subscription_count() < args.wait_subscribers:
            if time.monotonic() > deadline:
                print(f"sensor_replay: no subscriber on {args.topic} after {args.timeout} s", file=sys.stderr)
                return 1
            rclpy.spin_once(node, timeout_sec=0.05)
        for k, msg in enumerate(_samples(args)):
            stamp = args.t0 + k * args.period
            msg.header.stamp.sec = int(stamp)
            msg.header.stamp.nanosec = int(round((stamp - int(stamp)) * 1e9))
            publisher.publish(msg)
            if args.pace > 0.0:
                time.sleep(args.pace)  # pacing a replay, not synchronisation
        print(f"sensor_replay: published {k + 1} messages on {args.topic}", flush=True)
    except (KeyboardInterrupt, RuntimeError, ExternalShutdownException) as exc:
        if not is_shutdown(exc):  # SIGINT while publishing/taking: a shutdown, not an error
            raise
        pass  # SIGINT ends a replay normally
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
