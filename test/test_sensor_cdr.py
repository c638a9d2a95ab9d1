"""walk_mpc.nodes.sensor_cdr: SensorState serialized and read with numpy, as rclpy would (de)serialize it."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from walk_mpc.core.errors import InputError, ShapeError
from walk_mpc.core.sensors import SensorSample

pytestmark = pytest.mark.ros

STAMP_NS = 1_234_567_891_234_567_891


@pytest.fixture(scope="module")
def kinematic_sample(talos) -> SensorSample:
    from walk_mpc.core.sim.kinematic import KinematicSim

    sim = KinematicSim(KinematicSim.Parameters(), robot=talos)
    sim.step()
    return sim.sensor_sample()


def random_sample(rng: random.Random) -> SensorSample:
    """Names of every length (so every padding), arrays of 0-7 elements, IMUs 0-2, random values."""

    def names(count: int, prefix: str) -> tuple:
        return tuple(prefix + "x" * rng.randrange(0, 9) + str(i) for i in range(count))

    def values(*shape) -> np.ndarray:
        return np.array([rng.uniform(-1e3, 1e3) for _ in range(int(np.prod(shape)))]).reshape(shape)

    joints, motors, contacts, imus = (rng.randrange(0, 8) for _ in range(4))
    quaternions = values(imus, 4)
    return SensorSample(
        time=0.0, joint_names=names(joints, "j"), joint_pos=values(joints), joint_vel=values(joints),
        motor_names=names(motors, "m"), motor_pos=values(motors), motor_vel=values(motors),
        motor_torque=values(motors), contact_names=names(contacts, "c"), contact=values(contacts),
        imu_names=names(imus, "i"), imu_linear_acc=values(imus, 3), imu_angular_vel=values(imus, 3),
        imu_orientation_xyzw=quaternions, base_estimate_valid=rng.random() < 0.5,
        base_position=values(3), base_orientation_xyzw=values(4), base_linear_velocity=values(3),
        base_angular_velocity=values(3))


def assert_same_sample(got: SensorSample, want: SensorSample) -> None:
    for field in dataclasses.fields(SensorSample):
        a, b = getattr(got, field.name), getattr(want, field.name)
        if isinstance(b, np.ndarray):
            assert a.shape == b.shape and a.dtype == np.float64, field.name
            assert a.tobytes() == b.tobytes(), field.name  # bit for bit
            assert not a.flags.writeable, field.name
        else:
            assert type(a) is type(b) and a == b, field.name


def test_what_is_written_deserializes_to_the_sims_message(kinematic_sample):
    from rclpy.serialization import deserialize_message

    from walk_mpc.msg import SensorState
    from walk_mpc.nodes.sensor_cdr import sensor_state_cdr
    from walk_mpc.nodes.sim import sensor_state_msg

    rng = random.Random(1)
    for sample, frame in [(kinematic_sample, "world"), (kinematic_sample, "robot1/world")] + [
            (random_sample(rng), "w" * rng.randrange(0, 7)) for _ in range(300)]:
        written = deserialize_message(sensor_state_cdr(sample, STAMP_NS, frame), SensorState)
        assert written == sensor_state_msg(sample, STAMP_NS, frame)


def test_what_rclpy_serializes_reads_as_the_message_conversion(kinematic_sample):
    from rclpy.serialization import serialize_message

    from walk_mpc.nodes.conversions import sensor_sample_from_msg, stamp_ns
    from walk_mpc.nodes.sensor_cdr import SensorStateReader
    from walk_mpc.nodes.sim import sensor_state_msg

    rng = random.Random(2)
    reader = SensorStateReader()
    samples = [kinematic_sample] * 3 + [random_sample(rng) for _ in range(300)]
    for k, sample in enumerate(samples):
        msg = sensor_state_msg(sample, STAMP_NS + k, "w" * (k % 5))
        if k % 7 == 3:
            msg.joint_vel = []  # zeros, as the message conversion makes them
        stamp, read = reader.read(serialize_message(msg))
        assert stamp == stamp_ns(msg.header.stamp)
        assert_same_sample(read, sensor_sample_from_msg(msg))


def test_the_names_are_reused_while_their_bytes_do_not_change(kinematic_sample):
    from walk_mpc.nodes.sensor_cdr import SensorStateReader, sensor_state_cdr

    reader = SensorStateReader()
    _, first = reader.read(sensor_state_cdr(kinematic_sample, STAMP_NS))
    _, second = reader.read(sensor_state_cdr(kinematic_sample, STAMP_NS + 10))
    assert second.joint_names is first.joint_names
    renamed = dataclasses.replace(kinematic_sample, joint_names=("other",) + kinematic_sample.joint_names[1:])
    _, third = reader.read(sensor_state_cdr(renamed, STAMP_NS + 20))
    assert third.joint_names == renamed.joint_names


def test_a_wrong_array_length_raises_shape_error_as_the_message_conversion(kinematic_sample):
    from rclpy.serialization import serialize_message

    from walk_mpc.nodes.sensor_cdr import SensorStateReader
    from walk_mpc.nodes.sim import sensor_state_msg

    for field in ("joint_pos", "motor_torque", "contact"):
        msg = sensor_state_msg(kinematic_sample, STAMP_NS)
        setattr(msg, field, list(getattr(msg, field))[:-1])
        with pytest.raises(ShapeError, match=field):
            SensorStateReader().read(serialize_message(msg))


def test_bytes_that_are_no_sensor_state_raise_input_error():
    from walk_mpc.nodes.sensor_cdr import CDR_LE, SensorStateReader

    for data in (b"", CDR_LE, CDR_LE + b"\xff" * 40, b"\x00\x01\x00\x00" + bytes(3)):
        with pytest.raises(InputError):
            SensorStateReader().read(data)


def test_sensor_input_takes_bytes_and_messages(kinematic_sample):
    from walk_mpc.nodes.sensor_cdr import SensorStateReader, sensor_input, sensor_state_cdr
    from walk_mpc.nodes.sim import sensor_state_msg

    reader = SensorStateReader()
    from_bytes = sensor_input(sensor_state_cdr(kinematic_sample, STAMP_NS), reader)
    from_msg = sensor_input(sensor_state_msg(kinematic_sample, STAMP_NS), reader)
    assert from_bytes[0] == from_msg[0] == STAMP_NS
    assert_same_sample(from_bytes[1], from_msg[1])


# ---------------------------------------------------------------------------- ComReference, JointTrajectory
def random_reference_msg(rng: random.Random):
    from geometry_msgs.msg import Point, Vector3

    from walk_mpc.msg import ComReference

    def points(kind, count):
        return [kind(x=rng.uniform(-2, 2), y=rng.uniform(-2, 2), z=rng.uniform(0, 1)) for _ in range(count)]

    n = rng.choice([2, 2, 2, 0, 1, 3])
    msg = ComReference(plan_id=rng.randrange(0, 2**32),
                       time_from_stamp=[rng.uniform(0, 0.1) for _ in range(n)],
                       com_position=points(Point, n if rng.random() < 0.8 else rng.randrange(0, 4)),
                       com_velocity=points(Vector3, rng.choice([n, 0])),
                       zmp=points(Point, rng.choice([n, 0, 1])),
                       sole_tilt=[rng.uniform(-0.3, 0.3) for _ in range(rng.choice([0, 0, 4 * n, 3]))])
    msg.header.stamp.sec, msg.header.stamp.nanosec = rng.randrange(0, 2**31), rng.randrange(0, 10**9)
    msg.header.frame_id = "w" * rng.randrange(0, 9)
    return msg


def test_a_com_reference_written_deserializes_to_the_message_and_reads_as_its_conversion():
    from rclpy.serialization import deserialize_message, serialize_message

    from walk_mpc.msg import ComReference
    from walk_mpc.nodes.conversions import stamp_ns
    from walk_mpc.nodes.joint_messages import com_reference_from_msg, com_reference_input
    from walk_mpc.nodes.sensor_cdr import com_reference_cdr

    rng = random.Random(3)
    for _ in range(300):
        msg = random_reference_msg(rng)
        if len(msg.com_position) == len(msg.com_velocity) == len(msg.zmp):
            rows = [np.array([(p.x, p.y, p.z) for p in getattr(msg, f)]).reshape(-1, 3)
                    for f in ("com_position", "com_velocity", "zmp")]
            written = com_reference_cdr(stamp_ns(msg.header.stamp), msg.header.frame_id, msg.plan_id,
                                        list(msg.time_from_stamp), *rows, list(msg.sole_tilt))
            assert deserialize_message(written, ComReference) == msg
        got, want = com_reference_input(serialize_message(msg)), com_reference_from_msg(msg)
        assert type(got) is type(want)
        for field in ("stamp_ns", "plan_id", "times", "reason"):
            assert getattr(got, field, None) == getattr(want, field, None), field
        for field in ("com_position", "com_velocity", "zmp"):
            if hasattr(want, field):
                assert getattr(got, field).tobytes() == getattr(want, field).tobytes(), field
        if hasattr(want, "sole_tilt"):  # known sloped ground: 4 tilts per time, else None (level)
            assert (got.sole_tilt is None) == (want.sole_tilt is None) == (len(msg.sole_tilt) < 8
                                                                           or not any(msg.sole_tilt))
            if want.sole_tilt is not None:
                assert got.sole_tilt.tobytes() == want.sole_tilt.tobytes()
    with pytest.raises(InputError):
        com_reference_input(b"\x00\x01\x00\x00" + b"\xff" * 7)


def test_a_serialized_joint_trajectory_reads_as_its_message():
    from builtin_interfaces.msg import Duration
    from rclpy.serialization import serialize_message
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from walk_mpc.nodes.sensor_cdr import read_joint_trajectory
    from walk_mpc.nodes.sim import _trajectory_fields

    rng = random.Random(4)
    for _ in range(300):
        joints = rng.randrange(0, 6)
        msg = JointTrajectory(joint_names=["j" * rng.randrange(1, 9) + str(i) for i in range(joints)])
        msg.header.stamp.sec, msg.header.stamp.nanosec = rng.randrange(0, 2**31), rng.randrange(0, 10**9)
        msg.header.frame_id = "f" * rng.randrange(0, 5)
        for _ in range(rng.randrange(0, 4)):
            msg.points.append(JointTrajectoryPoint(
                positions=[rng.uniform(-3, 3) for _ in range(joints)],
                velocities=[rng.uniform(-3, 3) for _ in range(rng.choice([joints, 0]))],
                accelerations=[rng.uniform(-3, 3) for _ in range(rng.choice([joints, 0]))],
                time_from_start=Duration(sec=rng.randrange(0, 3), nanosec=rng.randrange(0, 10**9))))
        got, want = read_joint_trajectory(serialize_message(msg)), _trajectory_fields(msg)
        for field in ("sec", "nanosec", "frame_id", "joint_names", "points"):
            assert getattr(got, field) == getattr(want, field), field
    assert read_joint_trajectory(b"\x00\x01\x00\x00" + b"\xff" * 7) is None


def test_a_serialized_tick_timing_reads_as_its_stamp_status_and_reason():
    from rclpy.serialization import serialize_message

    from walk_mpc.msg import TickTiming
    from walk_mpc.nodes.sensor_cdr import read_tick_timing, tick_timing_input

    rng = random.Random(5)
    for _ in range(200):
        msg = TickTiming(component="c" * rng.randrange(0, 7), solve_time=rng.random(), tick_time=rng.random(),
                         status=rng.randrange(0, 2**32), trigger="/t" * rng.randrange(0, 5),
                         reason=rng.choice(["", "walk plan 3 refused: left sole 7.0 cm away", "é" * 3]))
        msg.header.stamp.sec, msg.header.stamp.nanosec = rng.randrange(0, 2**31), rng.randrange(0, 10**9)
        msg.header.frame_id = "f" * rng.randrange(0, 5)
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        data = serialize_message(msg)
        assert read_tick_timing(data) == (stamp, msg.status, msg.reason)
        assert tick_timing_input(data) == tick_timing_input(msg) == (stamp, msg.status, msg.reason)
    assert read_tick_timing(b"\x00\x01\x00\x00" + b"\xff" * 7) is None
