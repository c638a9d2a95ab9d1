"""RobotFrames: the TF tree of a measured robot matches pinocchio forward kinematics and the URDF's tree."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from walk_mpc.core.body.frames import RobotFrames, quaternions_xyzw
from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.sensors import SensorSample


@pytest.fixture(scope="module")
def frames():
    return RobotFrames(RobotFrames.Parameters(frame_prefix="talos1/", world_frame="odom"))


def _sample(robot: RobotModel, rng, base=True, names=None) -> SensorSample:
    names = tuple(robot.joint_names) if names is None else tuple(names)
    lower, upper = robot.model.lowerPositionLimit[7:], robot.model.upperPositionLimit[7:]
    positions = dict(zip(robot.joint_names, rng.uniform(np.maximum(lower, -3.0), np.minimum(upper, 3.0))))
    joint_pos = [positions.get(name, 0.0) for name in names]
    quaternion = rng.normal(size=4)
    quaternion /= np.linalg.norm(quaternion)
    return SensorSample(time=0.0, joint_names=names, joint_pos=joint_pos, joint_vel=np.zeros(len(names)),
                        motor_names=(), motor_pos=(), motor_vel=(), motor_torque=(),
                        base_estimate_valid=base, base_position=rng.uniform(-2.0, 2.0, 3),
                        base_orientation_xyzw=quaternion)


def _world_poses(tree, world: str) -> dict:
    """Pose in ``world`` of every frame of a tree, by chaining its edges (parents come first)."""
    poses = {world: np.eye(4)}
    for edge in tree:
        poses[edge.child] = poses[edge.parent] @ edge.matrix()
    return poses


def test_every_link_matches_pinocchio_forward_kinematics_of_the_measured_state(frames):
    robot = frames.robot
    rng = np.random.default_rng(7)
    for _ in range(5):
        sample = _sample(robot, rng)
        q = robot.configuration_from_joints(dict(zip(sample.joint_names, sample.joint_pos)),
                                            sample.base_position, sample.base_orientation_xyzw)
        data = robot.model.createData()
        pin.framesForwardKinematics(robot.model, data, q)
        poses = _world_poses(frames.observe(sample), "odom")
        for link in frames.link_names:
            expected = data.oMf[robot.model.getFrameId(link, pin.FrameType.BODY)].homogeneous
            np.testing.assert_allclose(poses[f"talos1/{link}"], expected, atol=1e-9, err_msg=link)


@pytest.mark.parametrize("robot", ["g1", "solo12"])
def test_other_robots_links_match_forward_kinematics_too(robot):
    try:
        frames = RobotFrames(RobotFrames.Parameters(robot=RobotModel.Parameters(robot=robot)))
    except Exception as exc:  # the robot's description is not installed here
        pytest.skip(f"{robot}: {exc}")
    model = frames.robot
    sample = _sample(model, np.random.default_rng(9))
    q = frames.configuration(sample)
    data = model.model.createData()
    pin.framesForwardKinematics(model.model, data, q)
    poses = _world_poses(frames.observe(sample), "world")
    assert len(poses) == len(frames.link_names) + 1
    for link in frames.link_names:
        expected = data.oMf[model.model.getFrameId(link, pin.FrameType.BODY)].homogeneous
        np.testing.assert_allclose(poses[link], expected, atol=1e-9, err_msg=link)


def test_the_tree_is_the_urdf_tree_with_the_prefix_and_the_world_frame_above_the_root(frames):
    urdf = ET.parse(frames.robot.urdf_path).getroot()
    links = {link.get("name") for link in urdf.findall("link")}
    parent_of = {joint.find("child").get("link"): joint.find("parent").get("link")
                 for joint in urdf.findall("joint")}
    tree = frames.observe(_sample(frames.robot, np.random.default_rng(1)))
    assert (tree.parents[0], tree.children[0]) == ("odom", "talos1/base_link")
    assert set(tree.children) == {f"talos1/{link}" for link in links}
    assert len(set(tree.children)) == len(tree.children)  # one parent per frame
    for parent, child in zip(tree.parents[1:], tree.children[1:]):
        assert parent == f"talos1/{parent_of[child.removeprefix('talos1/')]}"
    assert tree.translations.shape == (len(links), 3) and tree.rotations_xyzw.shape == (len(links), 4)
    assert not tree.translations.flags.writeable and not tree.rotations_xyzw.flags.writeable
    np.testing.assert_allclose(np.linalg.norm(tree.rotations_xyzw, axis=1), 1.0)
    assert np.all(tree.rotations_xyzw[:, 3] >= 0.0)


def test_a_sample_without_base_estimate_has_no_world_edge_and_the_same_joint_transforms(frames):
    rng = np.random.default_rng(3)
    sample = _sample(frames.robot, rng)
    without = SensorSample(**{**sample.__dict__, "base_estimate_valid": False})
    with_base, without_base = frames.observe(sample), frames.observe(without)
    assert without_base.children == with_base.children[1:]
    np.testing.assert_allclose(without_base.translations, with_base.translations[1:], atol=1e-12)
    assert frames.last is without_base
    frames.reset()
    assert frames.last is None


def test_sample_joints_in_another_order_extra_or_missing_give_the_same_tree():
    frames = RobotFrames()
    robot = frames.robot
    rng = np.random.default_rng(5)
    sample = _sample(robot, rng)
    names = list(reversed(sample.joint_names))[:-3] + ["a_wheel_the_model_lacks"]
    values = dict(zip(sample.joint_names, sample.joint_pos))
    shuffled = SensorSample(**{**sample.__dict__, "joint_names": tuple(names),
                               "joint_pos": [values.get(n, 9.0) for n in names],
                               "joint_vel": np.zeros(len(names))})
    missing = set(sample.joint_names) - set(names)
    q = frames.configuration(shuffled)
    reference = robot.reference_configuration()
    for name in robot.joint_names:
        expected = reference[robot.joint_index_q(name)] if name in missing else values[name]
        assert q[robot.joint_index_q(name)] == pytest.approx(expected), name


def test_a_non_finite_sample_is_refused_naming_the_value():
    frames = RobotFrames()
    sample = _sample(frames.robot, np.random.default_rng(2))
    joint_pos = np.array(sample.joint_pos)
    joint_pos[4] = math.nan
    with pytest.raises(InputError, match="joint_pos"):
        frames.observe(SensorSample(**{**sample.__dict__, "joint_pos": joint_pos}))


def test_bad_frame_names_and_mesh_uris_are_refused():
    for field, value in (("world_frame", ""), ("world_frame", "/odom"), ("frame_prefix", "bad prefix/"),
                         ("mesh_uris", "http")):
        with pytest.raises(ParameterError, match=field):
            RobotFrames.Parameters(**{field: value})


def test_description_resolves_package_meshes_to_existing_files_or_keeps_the_urdf():
    frames = RobotFrames()
    text = frames.description()
    meshes = [mesh.get("filename") for mesh in ET.fromstring(text).iter("mesh")]
    assert meshes and all(uri.startswith("file://") for uri in meshes)
    assert all(Path(uri.removeprefix("file://")).is_file() for uri in meshes)
    kept = RobotFrames(RobotFrames.Parameters(mesh_uris="package"), robot=frames.robot).description()
    assert kept == Path(frames.robot.urdf_path).read_text()


def test_quaternions_match_scipy_on_random_and_half_turn_rotations():
    from scipy.spatial.transform import Rotation

    rotations = Rotation.random(500, random_state=11)
    matrices = np.concatenate((rotations.as_matrix(), [np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]),
                                                       np.diag([-1.0, -1.0, 1.0]), np.eye(3)]))
    expected = Rotation.from_matrix(matrices).as_quat()
    expected[expected[:, 3] < 0.0] *= -1.0
    got = quaternions_xyzw(matrices)
    # a half turn has w = 0: q and -q are both w >= 0, compare the rotations
    np.testing.assert_allclose(Rotation.from_quat(got).as_matrix(), matrices, atol=1e-12)
    np.testing.assert_allclose(got[:500], expected[:500], atol=1e-12)
