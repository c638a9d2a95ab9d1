"""Scripted SensorState stream of a wheeled robot: rolling, lifted (wheels spin freely), touchdown.

Each wheel is simulated by :func:`walk_mpc.core.wheel.plant.simulate_wheel` (its own seeded generator),
in the air between ``ground`` and ``ground + air`` seconds. The stream has upkie's motors
(``left_hip``, ``left_knee``, ``left_wheel``, ``right_hip``, ``right_knee``, ``right_wheel``; leg motors
at rest) with the same names as joints, and integer-nanosecond stamps ``t0 + k * period``.

With ``--faults``, four ground samples are altered to exercise a consumer's input checks (indices in
:attr:`WheelScenario.faults`): ``missing:<last wheel>`` (that wheel is left out of the motor arrays),
``mismatch`` (``motor_torque`` one value short), ``backwards`` (stamp one period before the previous
sample's), ``joint_velocity`` (``motor_vel`` empty: velocities only in ``joint_vel``; valid input).

Usage:
  python -m walk_mpc.tools.wheel_scenario --output scenario.jsonl [--ground 1.5 --air 1 --touchdown 1.5]
  python -m walk_mpc.tools.wheel_scenario --publish [--ack-topic wheel_contact --window 100] [--faults]

``--output`` writes JSON lines for ``walk_mpc.tools.sensor_replay --file`` (which re-stamps samples at
``t0 + k * period``, dropping the ``backwards`` fault). ``--publish`` publishes with the scenario's own
stamps, as fast as the flow control allows: with ``--ack-topic``, at most ``--window`` samples ahead of
the WheelContactArray messages received on that topic (the wheel_contact node answers every sample with
its stamp; answers are matched by stamp, so a lost answer does not stall the stream), so a burst never
overflows the consumer's queue; ``--pace`` adds a wall-clock pause between samples.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Iterator

import numpy as np

from walk_mpc.core.wheel.plant import simulate_wheel

#: Wheel names of upkie.
WHEELS = ("left_wheel", "right_wheel")

#: Leg motors of upkie (at rest in the scenario).
LEG_MOTORS = ("left_hip", "left_knee", "right_hip", "right_knee")

#: Fault kinds, in the order they appear in a stream with faults (``missing`` applies to the last wheel).
FAULTS = ("missing", "mismatch", "backwards", "joint_velocity")


@dataclasses.dataclass(frozen=True)
class WheelScenario:
    """A scripted stream: per-wheel measurements, stamps and altered samples.

    Attributes:
        wheels: Wheel names.
        period: Nominal sampling period [s].
        stamps_ns: Stamp of each sample [ns] (``t0 + k * period`` except at a ``backwards`` fault).
        torque: Measured torque of each wheel [N m], one value per sample.
        velocity: Measured velocity of each wheel [rad/s], one value per sample.
        position: Position of each wheel [rad] (measured velocities integrated), one value per sample.
        in_air: Whether the robot is lifted, per sample.
        faults: Altered samples: index -> ``"missing:<wheel>"``, ``"mismatch"``, ``"backwards"`` or
            ``"joint_velocity"``.
        ground_end: Index of the first sample in the air (lift).
        touchdown: Index of the first sample back on the ground.
    """

    wheels: tuple[str, ...]
    period: float
    stamps_ns: tuple[int, ...]
    torque: dict[str, tuple[float, ...]]
    velocity: dict[str, tuple[float, ...]]
    position: dict[str, tuple[float, ...]]
    in_air: tuple[bool, ...]
    faults: dict[int, str]
    ground_end: int
    touchdown: int

    def __len__(self) -> int:
        return len(self.stamps_ns)

    def motor_names(self) -> list[str]:
        """Motor and joint names: upkie's order for two wheels, legs then wheels otherwise."""
        if len(self.wheels) == 2:
            left, right = self.wheels
            return ["left_hip", "left_knee", left, "right_hip", "right_knee", right]
        return [*LEG_MOTORS, *self.wheels]

    def sample(self, k: int) -> dict:
        """Sample ``k`` as a SensorState dict (see :mod:`walk_mpc.tools.msgdict`)."""
        names = self.motor_names()
        position = {name: 0.0 for name in names}
        velocity = {name: 0.0 for name in names}
        torque = {name: 0.0 for name in names}
        for wheel in self.wheels:
            velocity[wheel] = self.velocity[wheel][k]
            torque[wheel] = self.torque[wheel][k]
            position[wheel] = self.position[wheel][k]
        stamp = self.stamps_ns[k]
        fault = self.faults.get(k, "")
        motors = [name for name in names if fault != f"missing:{name}"]
        sample = {
            "header": {"stamp": {"sec": stamp // 1_000_000_000, "nanosec": stamp % 1_000_000_000}},
            "joint_names": names,
            "joint_pos": [position[n] for n in names],
            "joint_vel": [velocity[n] for n in names],
            "motor_names": motors,
            "motor_pos": [position[n] for n in motors],
            "motor_vel": [] if fault == "joint_velocity" else [velocity[n] for n in motors],
            "motor_torque": [torque[n] for n in motors],
        }
        if fault == "mismatch":
            sample["motor_torque"] = sample["motor_torque"][:-1]
        return sample

    def samples(self) -> Iterator[dict]:
        """All samples, in order, as SensorState dicts."""
        for k in range(len(self)):
            yield self.sample(k)


def make_scenario(
    ground: float = 1.5,
    air: float = 1.0,
    touchdown: float = 1.5,
    period: float = 1e-3,
    t0: float = 1000.0,
    seed: int = 0,
    wheels: tuple[str, ...] = WHEELS,
    faults: bool = False,
) -> WheelScenario:
    """Build the scripted stream (deterministic: same arguments, same samples, in any process).

    Args:
        ground: Rolling on the ground before the lift [s].
        air: Lifted, wheels spinning freely [s].
        touchdown: Rolling on the ground after touchdown [s].
        period: Sampling period [s] (a whole number of nanoseconds).
        t0: Stamp of the first sample [s].
        seed: Seed of the wheel simulations (wheel ``i`` uses ``default_rng([seed, i])``).
        wheels: Wheel names.
        faults: Alter four ground samples (see the module docstring).

    Raises:
        ValueError: On a negative duration, a non-positive period, or too short a ground phase for
            the faults.
    """
    if min(ground, air, touchdown) < 0.0 or not period > 0.0 or not wheels:
        raise ValueError("durations must be >= 0, period > 0 and wheels non-empty")
    period_ns = round(period * 1e9)
    duration = ground + air + touchdown
    torque, velocity, position, in_air = {}, {}, {}, None
    for i, wheel in enumerate(wheels):
        rng = np.random.default_rng([seed, i])
        tau, vel, air_flags = simulate_wheel(
            rng, duration=duration, dt=period_ns / 1e9, air_intervals=((ground, ground + air),) if air else ()
        )
        torque[wheel], velocity[wheel] = tuple(tau.tolist()), tuple(vel.tolist())
        position[wheel] = tuple((np.concatenate(([0.0], np.cumsum(vel)[:-1])) * (period_ns / 1e9)).tolist())
        in_air = air_flags
    n = len(in_air)
    t0_ns = round(t0 * 1e9)
    stamps = [t0_ns + k * period_ns for k in range(n)]
    ground_end = round(ground / (period_ns / 1e9))
    fault_map: dict[int, str] = {}
    if faults:
        indices = [round(ground_end * f) for f in (0.3, 0.4, 0.5, 0.6)]
        if indices[0] < 2:
            raise ValueError(f"ground = {ground} s is too short for faults")
        kinds = [f"missing:{wheels[-1]}", "mismatch", "backwards", "joint_velocity"]
        fault_map = dict(zip(indices, kinds, strict=True))
        backwards = indices[2]
        stamps[backwards] = stamps[backwards - 1] - period_ns
    return WheelScenario(
        wheels=tuple(wheels),
        period=period_ns / 1e9,
        stamps_ns=tuple(stamps),
        torque=torque,
        velocity=velocity,
        position=position,
        in_air=tuple(bool(a) for a in in_air),
        faults=fault_map,
        ground_end=ground_end,
        touchdown=round((ground + air) / (period_ns / 1e9)),
    )


def write_jsonl(scenario: WheelScenario, path: str) -> None:
    """Write the samples as JSON lines (``-`` for stdout)."""
    stream = sys.stdout if path == "-" else open(path, "w", encoding="utf-8")
    try:
        for sample in scenario.samples():
            stream.write(json.dumps(sample) + "\n")
    finally:
        if stream is not sys.stdout:
            stream.close()


def publish(scenario: WheelScenario, topic: str, ack_topic: str | None, window: int, pace: float,
            wait_subscribers: int, timeout: float) -> int:
    """Publish the scenario's samples with their own stamps (see the module docstring).

    Returns:
        0 on success, 1 if no subscriber showed up or the acknowledgements stalled for ``timeout``.
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    from walk_mpc.msg import SensorState, WheelContactArray
    from walk_mpc.nodes._common import is_shutdown
    from walk_mpc.tools.msgdict import from_dict

    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)
    rclpy.init()
    node = rclpy.create_node("wheel_scenario")
    publisher = node.create_publisher(SensorState, topic, qos)
    count = {"published": 0, "answered": 0}  # answered: samples up to the last one answered

    def on_answer(msg) -> None:
        # Answers come in sample order. Matching them by stamp (not counting them) keeps the flow control
        # right if the consumer's first answers were published before it discovered this subscription.
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        for k in range(count["answered"], count["published"]):
            if scenario.stamps_ns[k] == stamp:
                count["answered"] = k + 1
                return

    ack = node.create_subscription(WheelContactArray, ack_topic, on_answer, qos) if ack_topic else None

    def wait(condition, what) -> bool:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                print(f"wheel_scenario: {what()} after {timeout} s", file=sys.stderr, flush=True)
                return False
            rclpy.spin_once(node, timeout_sec=0.05)
        return True

    def ahead() -> int:
        return count["published"] - count["answered"]

    try:
        if not wait(lambda: publisher.get_subscription_count() >= wait_subscribers,
                    lambda: f"fewer than {wait_subscribers} subscribers on {topic}"):
            return 1
        if ack is not None and not wait(lambda: ack.get_publisher_count() >= 1,
                                        lambda: f"no publisher on {ack_topic}"):
            return 1
        for sample in scenario.samples():
            publisher.publish(from_dict(SensorState, sample))
            count["published"] += 1
            if ack is not None and not wait(lambda: ahead() <= window,
                                            lambda: f"{ahead()} samples unanswered on {ack_topic}"):
                return 1
            if pace > 0.0:
                time.sleep(pace)  # pacing a replay, not synchronisation
        if ack is not None and not wait(lambda: ahead() <= 0, lambda: f"{ahead()} samples unanswered"):
            return 1
        print(f"wheel_scenario: published {count['published']} samples on {topic}", flush=True)
        return 0
    except (KeyboardInterrupt, RuntimeError, ExternalShutdownException) as exc:
        if not is_shutdown(exc):  # SIGINT while publishing/taking: a shutdown, not an error
            raise
        return 130
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def main(argv: list[str] | None = None) -> int:
    """Command line: write the scenario as JSON lines, or publish it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ground", type=float, default=1.5, help="[s] rolling before the lift")
    parser.add_argument("--air", type=float, default=1.0, help="[s] lifted, wheels spinning freely")
    parser.add_argument("--touchdown", type=float, default=1.5, help="[s] rolling after touchdown")
    parser.add_argument("--period", type=float, default=1e-3, help="[s] sampling period")
    parser.add_argument("--t0", type=float, default=1000.0, help="[s] stamp of the first sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wheel", action="append", help="wheel name (repeat; default: upkie's two wheels)")
    parser.add_argument("--faults", action="store_true", help="alter four ground samples")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--output", help="write JSON lines to this file ('-': stdout)")
    mode.add_argument("--publish", action="store_true", help="publish on --topic")
    parser.add_argument("--topic", default="sensor_state")
    parser.add_argument("--ack-topic", help="WheelContactArray topic answering each sample (flow control)")
    parser.add_argument("--window", type=int, default=100, help="samples published ahead of the answers")
    parser.add_argument("--pace", type=float, default=0.0, help="[s] wall-clock pause between samples")
    parser.add_argument("--wait-subscribers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30.0, help="[s] give up waiting for peers")
    args = parser.parse_args(argv)
    try:
        scenario = make_scenario(args.ground, args.air, args.touchdown, args.period, args.t0, args.seed,
                                 tuple(args.wheel) if args.wheel else WHEELS, args.faults)
    except ValueError as exc:
        parser.error(str(exc))
    if args.output:
        write_jsonl(scenario, args.output)
        return 0
    return publish(scenario, args.topic, args.ack_topic, args.window, args.pace, args.wait_subscribers,
                   args.timeout)


if __name__ == "__main__":
    sys.exit(main())
