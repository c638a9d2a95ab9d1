"""SensorSample and check_sample (core), and the SensorState -> SensorSample conversion of the nodes.

The sample's arrays are float64 copies nothing can write; shapes are checked by the constructor, naming the
field; check_sample's fast path rejects exactly what the value-by-value check rejects, with its messages.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

from walk_mpc.core.errors import InputError, ShapeError
from walk_mpc.core.sensors import SensorSample, _check_in_detail, check_sample, immutable_float64
from walk_mpc.core.sim.kinematic import KinematicSim

ARRAYS = ("joint_pos", "joint_vel", "motor_pos", "motor_vel", "motor_torque", "contact",
          "imu_orientation_xyzw", "imu_angular_vel", "imu_linear_acc",
          "base_position", "base_orientation_xyzw", "base_linear_velocity", "base_angular_velocity")
NAMED_VECTORS = ("joint_pos", "joint_vel", "motor_pos", "motor_vel", "motor_torque", "contact")
STAMP_NS = 1_234_567_890_123


@pytest.fixture(scope="module")
def sample(talos) -> SensorSample:
    """A Talos sample of the kinematic plant after a few steps, with noise on the joints and the IMU (no
    value is a round number), base estimate valid, one IMU, eight contact sensors."""
    sim = KinematicSim(KinematicSim.Parameters(joint_position_noise=1e-3, joint_velocity_noise=1e-2,
                                               imu_angular_velocity_noise=1e-2,
                                               imu_linear_acceleration_noise=1e-2, seed=3), robot=talos)
    for _ in range(5):
        sim.step()
    out = sim.sensor_sample()
    assert out.base_estimate_valid and len(out.imu_names) == 1 and len(out.contact_names) == 8
    return out


def small(**changes) -> SensorSample:
    """A two-joint sample with a base estimate, one IMU and two contacts."""
    fields = dict(time=0.5, joint_names=("a", "b"), joint_pos=[0.1, 0.2], joint_vel=[0.0, -0.3],
                  motor_names=("a",), motor_pos=[0.1], motor_vel=[0.0], motor_torque=[1.5],
                  contact_names=("c0", "c1"), contact=[10.0, 20.0], imu_names=("imu",),
                  imu_orientation_xyzw=[[0.0, 0.0, 0.0, 1.0]], imu_angular_vel=[[0.0, 0.1, 0.0]],
                  imu_linear_acc=[[0.0, 0.0, 9.81]], base_estimate_valid=True, base_position=[0.0, 0.0, 1.0],
                  base_orientation_xyzw=[0.0, 0.0, 0.0, 1.0], base_linear_velocity=[0.1, 0.0, 0.0],
                  base_angular_velocity=[0.0, 0.0, 0.2])
    fields.update(changes)
    return SensorSample(**fields)


def replaced(sample: SensorSample, name: str, index, value: float) -> SensorSample:
    """``sample`` with ``name[index]`` = ``value``."""
    values = np.array(getattr(sample, name))
    values[index] = value
    return dataclasses.replace(sample, **{name: values})


def assert_immutable(array: np.ndarray) -> None:
    assert type(array) is np.ndarray and array.dtype == np.float64
    assert not array.flags.writeable
    with pytest.raises(ValueError):
        array.setflags(write=True)
    if array.size:
        with pytest.raises(ValueError):
            array.reshape(-1)[0] = 1.0


# ------------------------------------------------------------------------------------------- constructor
def test_constructor_makes_tuples_and_immutable_float64_copies():
    joint_pos = np.array([0.1, 0.2])
    motor_torque = np.array([3], dtype=np.int64)
    s = small(joint_names=["a", "b"], joint_pos=joint_pos, motor_torque=motor_torque)
    assert s.joint_names == ("a", "b") and type(s.joint_names) is tuple
    for name in ARRAYS:
        assert_immutable(getattr(s, name))
    assert s.motor_torque.tolist() == [3.0]
    joint_pos[0] = 99.0  # the caller's array is not the sample's
    assert s.joint_pos.tolist() == [0.1, 0.2]
    # A read-only array the caller can make writable again (it owns its memory) is copied too.
    owned = np.array([0.1, 0.2])
    owned.setflags(write=False)
    s = small(joint_pos=owned)
    owned.setflags(write=True)
    owned[0] = 99.0
    assert s.joint_pos.tolist() == [0.1, 0.2]
    # A non-contiguous view is copied in order.
    s = small(imu_orientation_xyzw=np.arange(8.0).reshape(4, 2).T[:1])
    assert s.imu_orientation_xyzw.tolist() == [[0.0, 2.0, 4.0, 6.0]]


def test_defaults_and_immutable_arrays_are_shared_not_copied():
    s = SensorSample(time=0.0, joint_names=(), joint_pos=(), joint_vel=(), motor_names=(), motor_pos=(),
                     motor_vel=(), motor_torque=())
    assert s.imu_orientation_xyzw.shape == (0, 4) and s.imu_linear_acc.shape == (0, 3)
    assert s.base_orientation_xyzw.tolist() == [0.0, 0.0, 0.0, 1.0] and not s.base_estimate_valid
    for name in ARRAYS:
        assert_immutable(getattr(s, name))
    t = small()
    again = dataclasses.replace(t, time=1.0)
    assert all(getattr(again, name) is getattr(t, name) for name in ARRAYS)
    values = immutable_float64([0.3, 0.4, 0.5])
    assert_immutable(values)
    assert immutable_float64(values) is values
    assert small(joint_pos=values[:2]).joint_pos.base is values


@pytest.mark.parametrize("name, value, shape", [
    ("joint_pos", [0.1], (2,)), ("joint_vel", [0.0, 0.0, 0.0], (2,)), ("motor_pos", [], (1,)),
    ("motor_vel", [0.0, 0.0], (1,)), ("motor_torque", [[1.0]], (1,)), ("contact", [1.0], (2,)),
    ("imu_orientation_xyzw", [[0.0, 0.0, 1.0]], (1, 4)), ("imu_angular_vel", [0.0, 0.1, 0.0], (1, 3)),
    ("imu_linear_acc", np.zeros((2, 3)), (1, 3)), ("base_position", [0.0, 1.0], (3,)),
    ("base_orientation_xyzw", [0.0, 0.0, 1.0], (4,)), ("base_linear_velocity", np.zeros((1, 3)), (3,)),
    ("base_angular_velocity", [0.0], (3,)),
])
def test_wrong_shapes_raise_shape_error_naming_the_field(name, value, shape):
    with pytest.raises(ShapeError) as info:
        small(**{name: value})
    assert info.value.name == name
    assert info.value.expected == f"shape {shape}"


# ------------------------------------------------------------------------------------------ check_sample
def test_check_sample_accepts_good_samples(sample):
    check_sample(sample)
    check_sample(small())
    check_sample(small(base_estimate_valid=False, base_position=[math.nan] * 3,
                       base_orientation_xyzw=[0.0, 0.0, 0.0, 0.0]))  # a base not estimated is not read
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_sample(small(joint_pos=[1e308, -1e308], contact=[np.finfo(float).max] * 2,
                           base_position=[1e200, 0.0, 0.0]))  # large, finite
    with pytest.raises(InputError, match="a SensorSample"):
        check_sample({"joint_pos": [0.0]})


def test_check_sample_names_the_non_finite_joint(sample):
    index = sample.joint_names.index("leg_left_4_joint")
    for name in ("joint_pos", "joint_vel"):
        with pytest.raises(InputError) as info:
            check_sample(replaced(sample, name, index, math.nan))
        assert info.value.name == f"{name}['leg_left_4_joint']"
        assert str(info.value) == (f"input '{name}['leg_left_4_joint']' = nan is invalid: "
                                   "expected a finite value")
    with pytest.raises(InputError) as info:  # the first bad value is named
        check_sample(replaced(replaced(sample, "joint_pos", 7, -math.inf), "joint_pos", 3, math.inf))
    assert info.value.name == f"joint_pos[{sample.joint_names[3]!r}]" and info.value.value == math.inf


@pytest.mark.parametrize("name, index, where", [
    ("motor_torque", 5, "motor_torque[5]"), ("contact", 2, "contact[2]"),
    ("imu_orientation_xyzw", (0, 3), "imu_orientation_xyzw[3]"),
    ("imu_angular_vel", (0, 1), "imu_angular_vel[1]"), ("imu_linear_acc", (0, 2), "imu_linear_acc[2]"),
])
def test_check_sample_names_other_non_finite_values(sample, name, index, where):
    with pytest.raises(InputError) as info:
        check_sample(replaced(sample, name, index, math.nan))
    assert info.value.name == where and info.value.expected == "a finite value"


@pytest.mark.parametrize("name", ["base_position", "base_orientation_xyzw", "base_linear_velocity",
                                  "base_angular_velocity"])
def test_check_sample_rejects_a_non_finite_base(sample, name):
    bad = replaced(sample, name, 1, math.inf)
    with pytest.raises(InputError) as info:
        check_sample(bad)
    assert info.value.name == name and info.value.expected == "finite values"
    assert info.value.value == getattr(bad, name).tolist()
    check_sample(dataclasses.replace(bad, base_estimate_valid=False))


@pytest.mark.parametrize("quaternion", [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0], [0.5, 0.5, 0.5, 0.2],
                                        [0.0, 0.0, 0.0, 1.11]])
def test_check_sample_rejects_a_bad_quaternion(sample, quaternion):
    with pytest.raises(InputError) as info:
        check_sample(dataclasses.replace(sample, base_orientation_xyzw=quaternion))
    assert info.value.name == "base_orientation_xyzw"
    assert str(info.value) == (f"input 'base_orientation_xyzw' = {quaternion!r} is invalid: "
                               "expected a unit quaternion (x, y, z, w)")
    check_sample(dataclasses.replace(sample, base_orientation_xyzw=[0.0, 0.0, 0.0, 1.09]))


def test_check_sample_fast_path_agrees_with_the_value_by_value_check(sample):
    rng = np.random.default_rng(7)
    for _ in range(200):
        name = ARRAYS[rng.integers(len(ARRAYS))]
        shape = getattr(sample, name).shape
        index = tuple(int(rng.integers(n)) for n in shape)
        value = (math.nan, math.inf, -math.inf, 1e300, 0.0, 1.2)[rng.integers(6)]
        bad = dataclasses.replace(replaced(sample, name, index, value),
                                  base_estimate_valid=bool(rng.integers(2)))
        try:
            _check_in_detail(bad)
            expected = None
        except InputError as exc:
            expected = str(exc)
        try:
            check_sample(bad)
            got = None
        except InputError as exc:
            got = str(exc)
        assert got == expected, (name, index, value)


# ----------------------------------------------------------------------------------- the message path
@pytest.fixture(scope="module")
def messages():
    pytest.importorskip("walk_mpc.msg", reason="the built walk_mpc interfaces are not importable")
    from walk_mpc.nodes import conversions, sim

    return conversions.sensor_sample_from_msg, sim.sensor_state_msg


@pytest.mark.ros
def test_conversion_round_trips_a_kinematic_sample_exactly(sample, messages):
    from_msg, to_msg = messages
    msg = to_msg(sample, STAMP_NS)
    converted = from_msg(msg)
    assert converted.time == STAMP_NS / 1e9
    for field in dataclasses.fields(SensorSample):
        if field.name == "time":
            continue
        got, want = getattr(converted, field.name), getattr(sample, field.name)
        if isinstance(want, np.ndarray):
            assert got.shape == want.shape and got.dtype == np.float64, field.name
            assert got.tobytes() == want.tobytes(), field.name  # bit for bit
            assert_immutable(got)
        else:
            assert type(got) is type(want) and got == want, field.name
    check_sample(converted)
    # The sample does not share memory with the message.
    msg.joint_pos[0] += 1.0
    msg.contact[0] += 1.0
    assert converted.joint_pos[0] == sample.joint_pos[0] and converted.contact[0] == sample.contact[0]


@pytest.mark.ros
def test_conversion_of_a_sample_without_base_imu_or_contacts(messages):
    from_msg, to_msg = messages
    sample = SensorSample(time=0.0, joint_names=("a", "b"), joint_pos=[0.5, -0.5], joint_vel=[0.0, 1.0],
                          motor_names=(), motor_pos=(), motor_vel=(), motor_torque=())
    converted = from_msg(to_msg(sample, 5))
    assert converted.time == 5e-9
    for name in ARRAYS:
        assert np.array_equal(getattr(converted, name), getattr(sample, name)), name
        assert getattr(converted, name).shape == getattr(sample, name).shape, name
    assert not converted.base_estimate_valid and converted.imu_names == () and converted.contact_names == ()


@pytest.mark.ros
def test_conversion_of_an_empty_joint_vel_is_zero(sample, messages):
    from_msg, to_msg = messages
    msg = to_msg(sample, STAMP_NS)
    msg.joint_vel = []
    converted = from_msg(msg)
    assert converted.joint_vel.tolist() == [0.0] * len(sample.joint_names)
    assert_immutable(converted.joint_vel)
    assert converted.joint_pos.tobytes() == sample.joint_pos.tobytes()


@pytest.mark.ros
@pytest.mark.parametrize("field", NAMED_VECTORS)
def test_conversion_of_a_wrong_array_length_raises_shape_error_naming_the_field(sample, messages, field):
    from_msg, to_msg = messages
    for change in (lambda values: values[:-1], lambda values: list(values) + [0.0]):
        msg = to_msg(sample, STAMP_NS)
        setattr(msg, field, change(getattr(msg, field)))
        with pytest.raises(ShapeError) as info:
            from_msg(msg)
        assert info.value.name == field


@pytest.mark.ros
@pytest.mark.parametrize("field, name", [("imu_orientation", "imu_orientation_xyzw"),
                                         ("imu_angular_vel", "imu_angular_vel"),
                                         ("imu_linear_acc", "imu_linear_acc")])
def test_conversion_of_a_wrong_imu_count_raises_shape_error_naming_the_field(sample, messages, field, name):
    from_msg, to_msg = messages
    msg = to_msg(sample, STAMP_NS)
    values = getattr(msg, field)
    setattr(msg, field, values + values)
    with pytest.raises(ShapeError) as info:
        from_msg(msg)
    assert info.value.name == name
    msg = to_msg(sample, STAMP_NS)
    setattr(msg, field, [])
    with pytest.raises(ShapeError) as info:
        from_msg(msg)
    assert info.value.name == name


@pytest.mark.ros
def test_conversion_keeps_bad_values_for_check_sample(sample, messages):
    from_msg, to_msg = messages
    index = sample.joint_names.index("arm_right_2_joint")
    msg = to_msg(sample, STAMP_NS)
    msg.joint_pos[index] = math.nan
    with pytest.raises(InputError) as info:
        check_sample(from_msg(msg))
    assert info.value.name == "joint_pos['arm_right_2_joint']"
    msg = to_msg(sample, STAMP_NS)
    msg.base_pose.orientation.w = 3.0
    with pytest.raises(InputError, match="a unit quaternion"):
        check_sample(from_msg(msg))
    msg = to_msg(sample, STAMP_NS)
    msg.base_twist.angular.z = -math.inf
    with pytest.raises(InputError) as info:
        check_sample(from_msg(msg))
    assert info.value.name == "base_angular_velocity"
