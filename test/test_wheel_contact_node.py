"""The wheel_contact node over real DDS: same outputs as the core observer, faults survived, reset service."""

from __future__ import annotations

import pytest
from ros_helpers import matched, wait_until, with_debug_log

from walk_mpc.core.wheel.contact import WheelContact
from walk_mpc.tools.wheel_scenario import make_scenario

pytestmark = pytest.mark.ros

EXPECTED_PERIOD = 1e-3  # the node's default expected_period [s]
SERVICE = "/wheel_contact/reset_contact"


# ---------------------------------------------------------------------------------------------------
# The node's documented contract, computed with the core observer in the test process
# ---------------------------------------------------------------------------------------------------


def expected_outputs(scenario, params=None):
    """Per sample, per wheel: (contact, inertia, abs_torque, abs_acceleration, rejected_samples).

    The contract of the node's module docstring: dt = stamp difference to the previous sample that
    carried the wheel (expected_period for the first), the reference stamp advances even when the
    observer rejects the sample; a sample the node cannot read for a wheel leaves it untouched and
    counts as rejected.
    """
    observers = {w: WheelContact(params or WheelContact.Parameters()) for w in scenario.wheels}
    last_stamp = dict.fromkeys(scenario.wheels)
    unreadable = dict.fromkeys(scenario.wheels, 0)
    rows = []
    for k, stamp in enumerate(scenario.stamps_ns):
        fault = scenario.faults.get(k)
        for w in scenario.wheels:
            if fault in ("mismatch", f"missing:{w}"):
                unreadable[w] += 1
                continue
            dt = EXPECTED_PERIOD if last_stamp[w] is None else (stamp - last_stamp[w]) / 1e9
            last_stamp[w] = stamp
            observers[w].observe(scenario.torque[w][k], scenario.velocity[w][k], dt)
        rows.append({w: observed(observers[w], unreadable[w]) for w in scenario.wheels})
    return rows, observers


def observed(observer, unreadable=0):
    return (observer.contact, observer.inertia, observer.abs_torque, observer.abs_acceleration,
            observer.rejected_samples + unreadable)


def published(msg):
    """Stamp [ns] and per-wheel outputs of a WheelContactArray, in message order."""
    stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
    wheels = [(w.wheel_name, (w.contact, w.inertia, w.abs_torque, w.abs_acceleration, w.rejected_samples))
              for w in msg.wheels]
    return stamp, wheels


# ---------------------------------------------------------------------------------------------------
# Test-process ROS node: listens to the node's output, calls its service, publishes probe samples
# ---------------------------------------------------------------------------------------------------


class Listener:
    """A ROS node in the test process, spun explicitly while waiting on conditions."""

    def __init__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        from walk_mpc.msg import SensorState, WheelContactArray
        from walk_mpc.srv import ResetWheelContact

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("wheel_contact_test", context=self.context)
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5000, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        self.received = []
        self.subscription = self.node.create_subscription(
            WheelContactArray, "wheel_contact", self.received.append, qos)
        self.publisher = self.node.create_publisher(SensorState, "sensor_state", qos)
        self.client = self.node.create_client(ResetWheelContact, SERVICE)
        self.srv_type = ResetWheelContact
        self.msg_type = SensorState
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin_until(self, condition, what, process=None, timeout=20.0):
        """Spin until ``condition()``; fail with ``what`` (and the node's log) on timeout or node exit."""
        wait_until(condition, what, process, timeout, poll=lambda: self.executor.spin_once(timeout_sec=0.05))

    def publish(self, samples, process, window=100):
        """Publish SensorState dicts, at most ``window`` ahead of the node's answers; wait for all."""
        from walk_mpc.tools.msgdict import from_dict

        first = len(self.received)
        for count, sample in enumerate(samples, start=1):
            self.publisher.publish(from_dict(self.msg_type, sample))
            self.spin_until(lambda sent=first + count: sent - len(self.received) <= window,
                            "the node's answers", process)
        self.spin_until(lambda: len(self.received) >= first + count,
                        lambda: f"the node's answers ({len(self.received) - first} of {count})", process)

    def reset(self, names, process):
        self.spin_until(lambda: self.client.service_is_ready(), f"service {SERVICE}", process)
        future = self.client.call_async(self.srv_type.Request(wheel_names=list(names)))
        self.spin_until(future.done, "the reset_contact response", process)
        return future.result()

    def close(self):
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def listener():
    ros = Listener()
    yield ros
    ros.close()


def start_wheel_contact(start_node, listener, *args):
    """Start the node and wait until its output and input are
    matched with the test process on both sides: the node's answers to the first samples would be lost
    if its writer had not matched the test's reader yet."""
    node = start_node("wheel_contact", *with_debug_log("wheel_contact", args))
    listener.spin_until(lambda: listener.subscription.get_publisher_count() >= 1
                        and listener.publisher.get_subscription_count() >= 1
                        and matched(node, "/wheel_contact", "subscriber") >= 1
                        and matched(node, "/sensor_state", "publisher") >= 1, "the node's endpoints", node)
    return node


# ---------------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------------


def test_contact_follows_ground_lift_touchdown_exactly_as_the_core_observer(start_node, listener):
    scenario = make_scenario(ground=1.5, air=1.0, touchdown=1.5, seed=0, faults=True)
    expected, _ = expected_outputs(scenario)
    # a writer history holding the whole stream: nothing lost even if this process lags behind
    node = start_wheel_contact(start_node, listener, "--ros-args", "-p", f"queue_depth:={len(scenario)}")
    feeder = start_node("walk_mpc.tools.wheel_scenario", "--publish", "--faults", "--seed", "0",
                        "--ground", "1.5", "--air", "1.0", "--touchdown", "1.5",
                        "--ack-topic", "wheel_contact", "--window", "100")
    listener.spin_until(lambda: len(listener.received) >= len(scenario), "all answers", node, timeout=60.0)
    assert feeder.proc.wait(timeout=10) == 0, feeder.output()
    assert len(listener.received) == len(scenario)

    # sample for sample: the stamp of the sample, and exactly the core observer's values
    for k, msg in enumerate(listener.received):
        stamp, wheels = published(msg)
        assert stamp == scenario.stamps_ns[k], f"sample {k}"
        assert [name for name, _ in wheels] == list(scenario.wheels)
        assert dict(wheels) == expected[k], f"sample {k}: {wheels} vs {expected[k]}"

    # the physics: on the ground before the lift, off after it, on again after touchdown
    def contacts(k):
        return [w.contact for w in listener.received[k].wheels]

    assert contacts(scenario.ground_end - 1) == [True, True]
    assert contacts(scenario.touchdown - 1) == [False, False]
    assert contacts(len(scenario) - 1) == [True, True]


def test_faulty_samples_are_survived_counted_and_logged(start_node, listener):
    scenario = make_scenario(ground=0.2, air=0.0, touchdown=0.0, seed=1, faults=True)
    missing, mismatch, backwards, joint_velocity = sorted(scenario.faults)
    expected, _ = expected_outputs(scenario)
    node = start_wheel_contact(start_node, listener)
    listener.publish(scenario.samples(), node)
    assert node.proc.poll() is None, node.output()
    rejected = [dict((w.wheel_name, w.rejected_samples) for w in m.wheels) for m in listener.received]
    assert [dict(published(m)[1]) for m in listener.received] == expected
    assert rejected[missing] == {"left_wheel": 0, "right_wheel": 1}  # the missing wheel only
    assert rejected[mismatch] == {"left_wheel": 1, "right_wheel": 2}  # both wheels: arrays inconsistent
    assert rejected[backwards] == {"left_wheel": 2, "right_wheel": 3}  # dt < 0 for both
    assert rejected[joint_velocity] == rejected[backwards] == rejected[-1]  # velocity from joint_vel
    # the missing wheel keeps its previous state in that sample
    def right_wheel(k):
        return dict(published(listener.received[k])[1])["right_wheel"]

    assert right_wheel(missing)[:4] == right_wheel(missing - 1)[:4]
    # reported in the node's log (first warning of the throttled series)
    listener.spin_until(lambda: "right_wheel: not in motor_names" in node.output(), "the warning", node)


def test_reset_contact_service_resets_listed_wheels_and_keeps_filters(start_node, listener):
    scenario = make_scenario(ground=1.0, air=0.0, touchdown=0.0, seed=0)
    expected, observers = expected_outputs(scenario)
    assert all(contact for contact, *_ in expected[-1].values())  # both wheels on the ground
    node = start_wheel_contact(start_node, listener)
    listener.publish(scenario.samples(), node)
    last = scenario.sample(len(scenario) - 1)

    def probe():
        """A sample that decides nothing (repeated stamp: dt = 0) shows the state the service left."""
        listener.publish([last], node)
        return dict(published(listener.received[-1])[1])

    response = listener.reset(["left_wheel", "middle_wheel"], node)
    assert not response.success
    assert "middle_wheel" in response.message
    assert "left_wheel" in response.message and "right_wheel" in response.message
    assert {w: v[0] for w, v in probe().items()} == {"left_wheel": True, "right_wheel": True}  # nothing reset

    response = listener.reset(["left_wheel"], node)
    assert response.success, response.message
    state = probe()
    observers["left_wheel"].reset_contact()
    for w, observer in observers.items():
        for _ in range(2):  # the two probes so far, rejected (dt = 0)
            observer.observe(0.0, 0.0, 0.0)
        assert state[w] == observed(observer), w  # contact cleared on the left only, filters kept
    assert {w: v[0] for w, v in state.items()} == {"left_wheel": False, "right_wheel": True}

    assert listener.reset([], node).success  # empty list: all wheels
    assert {w: v[0] for w, v in probe().items()} == {"left_wheel": False, "right_wheel": False}


@pytest.mark.parametrize(
    "override, name",
    [
        ("observer.liftoff_inertia:=0.01", "observer.liftoff_inertia"),  # above touchdown_inertia
        ("expected_period:=0.2", "observer.cutoff_period"),  # cutoff_period <= 2 expected_period
        ("sensor_qos:=fast", "sensor_qos"),
        ("observer.cutoff_frequency:=5.0", "observer.cutoff_frequency"),  # unknown parameter
    ],
)
def test_bad_parameter_exits_with_code_2_naming_it(start_node, override, name):
    node = start_node("wheel_contact", "--ros-args", "-p", override)
    assert node.proc.wait(timeout=20) == 2, node.output()
    output = node.output()
    assert "configuration error" in output and f"'{name}'" in output, output
