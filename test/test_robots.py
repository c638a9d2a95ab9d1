"""Robots from their description: config/robots/<name>.yaml presets, a robot written here, derived values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from walk_mpc.core.body.robot import RobotModel, load_robot_description, robot_names, yaw_of
from walk_mpc.core.control.closed_loop import ClosedLoopWalk
from walk_mpc.core.errors import ConfigError, FrameNotFound, ModelError, ParameterError
from walk_mpc.core.mpc.planner import PlannerParameters
from walk_mpc.core.mpc.preview import SoleParameters
from walk_mpc.core.mpc.problem import MpcParameters
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.walk.footsteps import walk_forward
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline


def _box_inertia(mass: float, x: float, y: float, z: float) -> str:
    ixx, iyy, izz = (mass * (b * b + c * c) / 12.0 for b, c in ((y, z), (x, z), (x, y)))
    return f'<inertia ixx="{ixx:.6f}" iyy="{iyy:.6f}" izz="{izz:.6f}" ixy="0" ixz="0" iyz="0"/>'


def _link(name: str, mass: float, com_z: float, size=(0.08, 0.08, 0.08)) -> str:
    return (f'<link name="{name}"><inertial><origin xyz="0 0 {com_z}"/><mass value="{mass}"/>'
            f"{_box_inertia(mass, *size)}</inertial></link>")


def _joint(name: str, parent: str, child: str, xyz: str, axis: str, lower=-2.0, upper=2.0) -> str:
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}"/><axis xyz="{axis}"/>'
            f'<limit lower="{lower}" upper="{upper}" effort="300" velocity="10"/></joint>')


def toy_biped_urdf() -> str:
    """A 12-DoF biped of boxes: 0.3 m thighs and shins, ankles 5 cm above the soles, 30 kg, no sole frame."""
    parts = ['<robot name="toy">', _link("pelvis", 16.0, 0.15, (0.2, 0.3, 0.4))]
    for side, y in (("l", 0.09), ("r", -0.09)):
        chain = [("hip_yaw", f"0 {y} -0.05", "0 0 1", 1.0, 0.0), ("hip_roll", "0 0 0", "1 0 0", 1.0, 0.0),
                 ("hip_pitch", "0 0 0", "0 1 0", 3.0, -0.15), ("knee", "0 0 -0.3", "0 1 0", 2.0, -0.15),
                 ("ankle_pitch", "0 0 -0.3", "0 1 0", 0.5, 0.0), ("ankle_roll", "0 0 0", "1 0 0", 1.0, -0.03)]
        parent = "pelvis"
        for joint, xyz, axis, mass, com_z in chain:
            child = f"{side}_{joint}_link"
            size = (0.2, 0.1, 0.04) if joint == "ankle_roll" else (0.08, 0.08, 0.3 if com_z else 0.08)
            parts += [_link(child, mass, com_z, size), _joint(f"{side}_{joint}", parent, child, xyz, axis)]
            parent = child
    parts.append("</robot>")
    return "\n".join(parts)


TOY_YAML = """
name: toy
urdf: toy.urdf                       # next to this file
base_frame: pelvis
left_foot: {frame: l_sole, parent: l_ankle_roll_link, position: [0.0, 0.0, -0.05]}
right_foot: {frame: r_sole, parent: r_ankle_roll_link, position: [0.0, 0.0, -0.05]}
sole: {front: 0.1, back: 0.1, left: 0.05, right: 0.05, planner_margin: 0.01}
posture:
  joints: {l_hip_pitch: -0.4, l_knee: 0.8, l_ankle_pitch: -0.4, r_hip_pitch: -0.4, r_knee: 0.8,
           r_ankle_pitch: -0.4}
joint_groups:
  - {name: legs, joints: ["[lr]_.*"], kp: 3000.0, kd: 30.0, armature: 0.01}
steps: {single_support: 0.8, double_support: 0.3}
"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> RobotModel:
    directory = tmp_path_factory.mktemp("toy")
    (directory / "toy.urdf").write_text(toy_biped_urdf())
    (directory / "toy.yaml").write_text(TOY_YAML)
    return RobotModel(RobotModel.Parameters(robot=str(directory / "toy.yaml")))


def straight_timeline(robot: RobotModel, steps: int, length: float) -> Timeline:
    q0 = robot.reference_configuration()
    poses = {name: FootPose(tuple(p), yaw_of(r)) for name, (p, r) in robot.foot_poses(q0).items()}
    left, right = poses[robot.left_foot_frame], poses[robot.right_foot_frame]
    limits = robot.step_limits()
    footsteps = walk_forward(left, right, length * (steps - 1), step_length=length,
                             width=robot.standing_sole_distance(),
                             duration=limits.single_support + limits.double_support)
    return Timeline(left, right, footsteps, GaitTiming(sway_duration=0.6, catch_duration=0.6,
                                                       double_support_duration=limits.double_support))


def planner_parameters(robot: RobotModel) -> PlannerParameters:
    """What the loop's defaults take from the robot (closed_loop.default_planner_parameters)."""
    return PlannerParameters(mpc=MpcParameters(com_height=robot.standing_com_height()),
                             sole=robot.planner_sole(), control_period=0.02, feedback_gain=0.1)


# ---------------------------------------------------------------------------------------------- a new robot


def test_a_robot_written_here_loads_from_its_urdf_and_yaml_with_sole_frames_added_on_the_ankles(toy):
    assert toy.name == "toy" and toy.is_biped and len(toy.joint_names) == 12
    assert toy.foot_frames == ("l_sole", "r_sole")
    q = toy.reference_configuration()
    feet = toy.foot_poses(q)
    np.testing.assert_allclose(feet["l_sole"][0], [0.0, 0.09, 0.0], atol=1e-9)  # centred, flat on z = 0
    np.testing.assert_allclose(feet["r_sole"][0], [0.0, -0.09, 0.0], atol=1e-9)
    assert toy.joint_positions(q)["l_knee"] == pytest.approx(0.8)
    assert toy.planner_sole() == SoleParameters(0.09, 0.09, 0.04, 0.04)
    assert toy.servo_gains("l_knee") == (3000.0, 30.0, 0.0)
    assert 0.5 < toy.standing_com_height() < 0.8
    assert toy.leg_length() == pytest.approx(0.65, abs=1e-9)  # hip to sole, legs straight
    limits = toy.step_limits()  # derived from the leg length and the standing width
    assert limits.max_forward == pytest.approx(0.35 * 0.65, abs=1e-3)
    assert limits.min_width == pytest.approx(0.7 * 0.18, abs=1e-3)


def test_a_robot_written_here_walks_four_steps_in_the_closed_loop_with_no_code_change(toy):
    sim = KinematicSim(KinematicSim.Parameters(robot=toy.params), robot=toy)
    assert (sim.params.sole_front, sim.params.sole_left) == (0.1, 0.05)  # its description's sole
    outcome = ClosedLoopWalk(toy, sim, straight_timeline(toy, 4, 0.15), planner_parameters(toy)).run()
    assert not outcome.fallen
    assert sorted(outcome.landing_errors) == [1, 2, 3, 4]
    assert max(outcome.landing_errors.values()) < 0.01
    assert outcome.ik_failures == 0


def test_a_robot_written_here_stands_in_mujoco_with_its_gains(toy):
    pytest.importorskip("mujoco")
    from walk_mpc.core.sim.mujoco import MujocoSim

    sim = MujocoSim(KinematicSim.Parameters(robot=toy.params), robot=toy)
    m = sim.model
    knee = m.actuator("l_knee").id
    assert m.actuator_gainprm[knee][0] == 3000.0
    assert m.dof_armature[m.jnt_dofadr[m.joint("l_knee").id]] == pytest.approx(0.01)
    states = [sim.step() for _ in range(100)]
    assert not any(s.fallen for s in states)
    assert states[-1].in_contact == (True, True)
    assert sim.sensor_sample().contact.sum() == pytest.approx(toy.mass * 9.81, rel=0.02)


# ---------------------------------------------------------------------------------------------- from an MJCF


def _mjcf_inertial(mass: float, com_z: float, size) -> str:
    x, y, z = size
    diagonal = " ".join(f"{mass * (b * b + c * c) / 12.0:.6f}" for b, c in ((y, z), (x, z), (x, y)))
    return f'<inertial pos="0 0 {com_z}" mass="{mass}" diaginertia="{diagonal}"/>'


def toy_biped_mjcf(free_joint: bool = True) -> str:
    """toy_biped_urdf as an MJCF: the same bodies, joints and inertias, sole sites 5 cm below the ankles; plus
    what a description for MuJoCo carries and the simulator replaces (a floor, a collision box per foot, a
    site named 'imu', a motor, a sensor, a keyframe)."""
    parts = ['<mujoco model="toy">', '<compiler angle="radian" autolimits="true"/>', "<worldbody>",
             '<geom name="floor" type="plane" size="5 5 0.1"/>', '<body name="pelvis" pos="0 0 0.7">',
             '<freejoint name="root"/>' if free_joint else "", _mjcf_inertial(16.0, 0.15, (0.2, 0.3, 0.4)),
             '<site name="imu" pos="0 0 0.1"/>']
    for side, y in (("l", 0.09), ("r", -0.09)):
        chain = [("hip_yaw", f"0 {y} -0.05", "0 0 1", 1.0, 0.0), ("hip_roll", "0 0 0", "1 0 0", 1.0, 0.0),
                 ("hip_pitch", "0 0 0", "0 1 0", 3.0, -0.15), ("knee", "0 0 -0.3", "0 1 0", 2.0, -0.15),
                 ("ankle_pitch", "0 0 -0.3", "0 1 0", 0.5, 0.0), ("ankle_roll", "0 0 0", "1 0 0", 1.0, -0.03)]
        for joint, pos, axis, mass, com_z in chain:
            size = (0.2, 0.1, 0.04) if joint == "ankle_roll" else (0.08, 0.08, 0.3 if com_z else 0.08)
            parts += [f'<body name="{side}_{joint}_link" pos="{pos}">',
                      f'<joint name="{side}_{joint}" axis="{axis}" range="-2 2" '
                      'actuatorfrcrange="-300 300"/>',
                      _mjcf_inertial(mass, com_z, size)]
        parts += [f'<geom name="{side}_foot" type="box" size="0.1 0.05 0.02" pos="0 0 -0.03" mass="0"/>',
                  f'<site name="{side}_sole" pos="0 0 -0.05"/>', "</body>" * len(chain)]
    parts += ["</body>", "</worldbody>", '<actuator><motor name="l_knee" joint="l_knee"/></actuator>',
              '<sensor><jointpos name="knee" joint="l_knee"/></sensor>']
    if free_joint:
        parts.append('<keyframe><key name="home" qpos="0 0 0.7 1 0 0 0' + " 0" * 12 + '"/></keyframe>')
    parts.append("</mujoco>")
    return "\n".join(parts)


TOY_MJCF_YAML = TOY_YAML.replace("urdf: toy.urdf ", "mjcf: toy.xml  ").replace(
    "{frame: l_sole, parent: l_ankle_roll_link, position: [0.0, 0.0, -0.05]}", "{frame: l_sole}").replace(
    "{frame: r_sole, parent: r_ankle_roll_link, position: [0.0, 0.0, -0.05]}", "{frame: r_sole}")


@pytest.fixture(scope="module")
def toy_mjcf(tmp_path_factory) -> RobotModel:
    directory = tmp_path_factory.mktemp("toy_mjcf")
    (directory / "toy.xml").write_text(toy_biped_mjcf())
    (directory / "toy.yaml").write_text(TOY_MJCF_YAML)
    return RobotModel(RobotModel.Parameters(robot=str(directory / "toy.yaml")))


def test_the_mjcf_yaml_differs_from_the_urdf_one_only_by_its_description():
    assert "mjcf: toy.xml" in TOY_MJCF_YAML and "urdf" not in TOY_MJCF_YAML
    assert "left_foot: {frame: l_sole}" in TOY_MJCF_YAML  # a site of the MJCF: nothing to add


@pytest.mark.parametrize("free_joint", [True, False])
def test_a_robot_from_an_mjcf_has_the_kinematic_model_of_the_same_urdf(toy, free_joint, tmp_path):
    (tmp_path / "toy.xml").write_text(toy_biped_mjcf(free_joint))
    (tmp_path / "toy.yaml").write_text(TOY_MJCF_YAML)
    robot = RobotModel(RobotModel.Parameters(robot=str(tmp_path / "toy.yaml")))
    assert robot.description_format == "mjcf" and robot.urdf_path is None
    assert robot.nq == toy.nq and robot.joint_names == toy.joint_names
    assert robot.mass == pytest.approx(toy.mass, abs=1e-9)
    assert robot.foot_frames == ("l_sole", "r_sole")
    q = robot.reference_configuration()
    np.testing.assert_allclose(q, toy.reference_configuration(), atol=1e-9)
    for frame, (position, rotation) in robot.foot_poses(q).items():
        np.testing.assert_allclose(position, toy.foot_poses(q)[frame][0], atol=1e-9)
        np.testing.assert_allclose(rotation, toy.foot_poses(q)[frame][1], atol=1e-9)
    assert robot.standing_com_height() == pytest.approx(toy.standing_com_height(), abs=1e-9)
    assert robot.leg_length() == pytest.approx(toy.leg_length(), abs=1e-9)
    np.testing.assert_allclose(robot.lower_limits(), toy.lower_limits())
    assert robot.planner_sole() == toy.planner_sole() and robot.step_limits() == toy.step_limits()
    assert robot.servo_gains("l_knee") == (3000.0, 30.0, 0.0)


def test_a_bare_mjcf_path_loads_too(tmp_path):
    (tmp_path / "toy.xml").write_text(toy_biped_mjcf())
    robot = RobotModel(RobotModel.Parameters(robot=str(tmp_path / "toy.xml"), left_foot_frame="l_sole",
                                             right_foot_frame="r_sole"))
    assert robot.name == "toy" and robot.is_biped and len(robot.joint_names) == 12


def test_a_robot_from_an_mjcf_stands_in_mujoco_on_its_sole_boxes_with_its_gains(toy_mjcf):
    pytest.importorskip("mujoco")
    from walk_mpc.core.sim.mujoco import MujocoSim

    sim = MujocoSim(KinematicSim.Parameters(robot=toy_mjcf.params), robot=toy_mjcf)
    m = sim.model
    assert m.nu == 12 and m.nkey == 0  # the simulator's servos only: the MJCF's motor and keyframe are gone
    knee = m.actuator("l_knee").id
    assert m.actuator_gainprm[knee][0] == 3000.0
    assert m.dof_armature[m.jnt_dofadr[m.joint("l_knee").id]] == pytest.approx(0.01)
    assert m.njnt == 13 and m.joint("root").type == 0  # its own free joint, no second one
    assert m.site("mjcf_imu").id >= 0 and m.geom("mjcf_floor").conaffinity == 0  # renamed, not colliding
    states = [sim.step() for _ in range(100)]
    assert not any(s.fallen for s in states)
    assert states[-1].in_contact == (True, True)
    assert sim.sensor_sample().contact.sum() == pytest.approx(toy_mjcf.mass * 9.81, rel=0.02)
    np.testing.assert_allclose(states[-1].q[7:], toy_mjcf.reference_configuration()[7:], atol=0.01)


def test_mujoco_sole_sites_sit_on_the_pinocchio_soles_when_a_joint_is_away_from_its_body_origin(tmp_path):
    pytest.importorskip("mujoco")
    from walk_mpc.core.sim.mujoco import MujocoSim

    (tmp_path / "toy.xml").write_text(toy_biped_mjcf().replace(  # pinocchio's joint frame moves, the body not
        '<joint name="l_ankle_roll" axis', '<joint name="l_ankle_roll" pos="0.02 0 0.03" axis'))
    (tmp_path / "toy.yaml").write_text(TOY_MJCF_YAML)
    robot = RobotModel(RobotModel.Parameters(robot=str(tmp_path / "toy.yaml")))
    sim = MujocoSim(KinematicSim.Parameters(robot=robot.params), robot=robot)
    soles = robot.foot_poses(sim.configuration())
    for foot, frame in (("left_foot", "l_sole"), ("right_foot", "r_sole")):
        np.testing.assert_allclose(sim.data.site_xpos[sim.model.site(f"{foot}_sole").id], soles[frame][0],
                                   atol=1e-9)


def test_a_robot_from_an_mjcf_walks_four_steps_in_mujoco(toy_mjcf):
    pytest.importorskip("mujoco")
    from walk_mpc.core.sim.mujoco import MujocoSim

    sim = MujocoSim(KinematicSim.Parameters(robot=toy_mjcf.params), robot=toy_mjcf)
    outcome = ClosedLoopWalk(toy_mjcf, sim, straight_timeline(toy_mjcf, 4, 0.1),
                             planner_parameters(toy_mjcf)).run()
    assert_walked(outcome, 4)


@pytest.mark.parametrize("offset", ["", 'pos="0.02 0 0.03" '])
def test_robot_description_of_an_mjcf_robot_is_a_urdf_of_its_link_tree(tmp_path, offset):
    from walk_mpc.core.body.frames import RobotFrames

    (tmp_path / "toy.xml").write_text(toy_biped_mjcf().replace(  # with a joint away from its body's origin
        '<joint name="l_ankle_roll" axis', f'<joint name="l_ankle_roll" {offset}axis'))
    (tmp_path / "toy.yaml").write_text(TOY_MJCF_YAML)
    robot = RobotModel(RobotModel.Parameters(robot=str(tmp_path / "toy.yaml")))
    (tmp_path / "described.urdf").write_text(RobotFrames(robot=robot).description())  # robot_description
    described = RobotModel(RobotModel.Parameters(robot=str(tmp_path / "described.urdf")))
    assert described.joint_names == robot.joint_names
    q = robot.reference_configuration()
    q[7:] += 0.1
    poses, urdf_poses = RobotFrames(robot=robot).link_poses(q), RobotFrames(robot=described).link_poses(q)
    assert len(poses) == 13 and set(poses) <= set(urdf_poses)  # the TF tree's links
    for link, (position, rotation) in poses.items():
        np.testing.assert_allclose(urdf_poses[link][0], position, atol=1e-12)
        np.testing.assert_allclose(urdf_poses[link][1], rotation, atol=1e-12)


def test_mjcf_description_errors_name_the_value_and_what_was_expected(tmp_path):
    (tmp_path / "toy.xml").write_text(toy_biped_mjcf())
    both = TOY_MJCF_YAML.replace("mjcf: toy.xml", "urdf: toy.urdf\nmjcf: toy.xml")
    (tmp_path / "both.yaml").write_text(both)
    with pytest.raises(ParameterError, match="'mjcf' = 'toy.xml'.*urdf = 'toy.urdf'"):
        load_robot_description(tmp_path / "both.yaml")
    (tmp_path / "neither.yaml").write_text(TOY_MJCF_YAML.replace("mjcf: toy.xml", ""))
    with pytest.raises(ParameterError, match="'urdf' = ''.*'urdf' .* or 'mjcf'"):
        load_robot_description(tmp_path / "neither.yaml")
    (tmp_path / "missing.yaml").write_text(TOY_MJCF_YAML.replace("mjcf: toy.xml", "mjcf: missing.xml"))
    with pytest.raises(ModelError, match="mjcf = 'missing.xml' of robot 'toy'.*expected an existing MJCF"):
        RobotModel(RobotModel.Parameters(robot=str(tmp_path / "missing.yaml")))
    (tmp_path / "frame.yaml").write_text(TOY_MJCF_YAML.replace("{frame: l_sole}", "{frame: l_foot_sole}"))
    with pytest.raises(FrameNotFound, match="'l_foot_sole' .left_foot.frame of 'toy': a frame of toy.xml "
                                            ".an MJCF site or body., or give left_foot.parent") as info:
        RobotModel(RobotModel.Parameters(robot=str(tmp_path / "frame.yaml")))
    assert "l_sole" in info.value.frames
    (tmp_path / "parent.yaml").write_text(TOY_MJCF_YAML.replace(
        "{frame: l_sole}", "{frame: l_heel, parent: l_ankle, position: [-0.1, 0.0, -0.05]}"))
    with pytest.raises(FrameNotFound, match="'l_ankle' .left_foot.parent of 'toy'"):
        RobotModel(RobotModel.Parameters(robot=str(tmp_path / "parent.yaml")))
    (tmp_path / "broken.xml").write_text("<mujoco><worldbody><body name='a'>")
    with pytest.raises(ModelError, match="cannot build a model from MJCF"):
        RobotModel(RobotModel.Parameters(robot=str(tmp_path / "broken.xml")))


def test_description_errors_name_the_key_and_what_was_expected(tmp_path):
    (tmp_path / "bad.yaml").write_text("name: bad\nurdf: x.urdf\nsole_size: 1\n")
    with pytest.raises(ConfigError, match="sole_size"):
        load_robot_description(tmp_path / "bad.yaml")
    (tmp_path / "half.yaml").write_text("name: half\nurdf: x.urdf\nleft_foot: {frame: l_sole}\n")
    with pytest.raises(ParameterError, match="right_foot"):
        load_robot_description(tmp_path / "half.yaml")
    (tmp_path / "nosole.yaml").write_text(
        "name: nosole\nurdf: x.urdf\nleft_foot: {frame: l}\nright_foot: {frame: r}\n")
    with pytest.raises(ParameterError, match="sole"):
        load_robot_description(tmp_path / "nosole.yaml")


def test_a_joint_group_matching_no_joint_is_a_model_error(tmp_path):
    (tmp_path / "toy.urdf").write_text(toy_biped_urdf())
    (tmp_path / "toy.yaml").write_text(TOY_YAML.replace('"[lr]_.*"', '"leg_.*"'))
    with pytest.raises(ModelError, match="matches no joint"):
        RobotModel(RobotModel.Parameters(robot=str(tmp_path / "toy.yaml")))


# ---------------------------------------------------------------------------------------------- presets


def test_presets_are_the_robot_files_and_an_unknown_name_lists_them():
    names = robot_names()
    for name in ("talos", "talos_reduced", "g1", "romeo", "icub", "solo12", "go2"):
        assert name in names
    with pytest.raises(ParameterError) as info:
        RobotModel.Parameters(robot="atlas")
    assert "g1" in str(info.value) and "talos" in str(info.value)


def test_talos_description_keeps_the_former_defaults(talos):
    assert talos.name == "talos"
    assert talos.planner_sole() == SoleParameters()  # 0.09 / 0.055: the planner's default
    assert talos.standing_com_height() == pytest.approx(0.8767, abs=1e-4)  # config/walk_mpc.yaml's
    sole = talos.sole_size
    assert (sole.front, sole.back, sole.left, sole.right) == (0.1, 0.1, 0.065, 0.065)
    assert talos.servo_gains("leg_left_4_joint") == (8000.0, 80.0, 0.0)
    assert talos.servo_gains("arm_left_4_joint") == (2000.0, 20.0, 0.0)


@pytest.mark.parametrize("name", ["g1", "romeo", "icub"])
def test_humanoid_presets_stand_with_flat_soles_and_the_com_above_their_middle(name):
    robot = RobotModel(RobotModel.Parameters(robot=name))
    q = robot.reference_configuration()
    feet = robot.foot_poses(q)
    for position, rotation in feet.values():
        assert abs(position[2]) < 1e-5  # G1: joint values rounded to 0.1 mrad
        np.testing.assert_allclose(rotation[2], [0.0, 0.0, 1.0], atol=2e-3)
    com = robot.com(q)
    assert np.linalg.norm(com[:2]) < 0.01  # computed postures: the CoM above the middle of the soles
    robot.planner_sole()
    assert robot.step_limits().max_forward >= 0.1


@pytest.mark.parametrize("relative", ["romeo_description/urdf/romeo.urdf",
                                      "icub_description/robots/icub_reduced.urdf"])
def test_romeo_and_icub_compile_in_mujoco_through_the_compiler_bounds(relative):
    pytest.importorskip("mujoco")
    from walk_mpc.core.body.robot import find_robot_file
    from walk_mpc.core.sim import mjcf

    path = find_robot_file(relative)
    with pytest.raises(ModelError, match="cannot compile"):
        mjcf.compile_spec(mjcf.load_urdf_spec(path, bounds="never"))
    model = mjcf.compile_spec(mjcf.load_urdf_spec(path))
    assert model.nbody > 20


def test_talos_compiles_without_bounds_so_its_model_is_unchanged():
    pytest.importorskip("mujoco")
    from walk_mpc.core.body.robot import find_robot_file
    from walk_mpc.core.sim import mjcf

    path = find_robot_file("talos_data/robots/talos_reduced.urdf")
    plain = mjcf.compile_spec(mjcf.load_urdf_spec(path, bounds="never"))
    default = mjcf.compile_spec(mjcf.load_urdf_spec(path))
    assert np.array_equal(plain.body_mass, default.body_mass)
    assert np.array_equal(plain.body_inertia, default.body_inertia)


# ------------------------------------------------------------------------------------------ walks in MuJoCo


def mujoco_walk(name: str, steps: int, length: float):
    pytest.importorskip("mujoco")
    from walk_mpc.core.sim.mujoco import MujocoSim

    robot = RobotModel(RobotModel.Parameters(robot=name))
    sim = MujocoSim(KinematicSim.Parameters(robot=robot.params), robot=robot)
    timeline = straight_timeline(robot, steps, length)
    return ClosedLoopWalk(robot, sim, timeline, planner_parameters(robot)).run()


def assert_walked(outcome, steps: int, ik_failures: int = 0) -> None:
    assert not outcome.fallen
    assert math.degrees(outcome.max_tilt) < 5.0
    assert sorted(outcome.landing_errors) == list(range(1, steps + 1))
    assert max(outcome.landing_errors.values()) < 0.02  # each foot within 2 cm of the plan
    assert outcome.final_com_error < 0.03
    assert outcome.ik_failures <= ik_failures


def test_g1_walks_six_steps_of_15_cm_in_mujoco():
    assert_walked(mujoco_walk("g1", 6, 0.15), 6)


@pytest.mark.slow
def test_g1_walks_twenty_steps_of_15_cm_in_mujoco_each_foot_within_2_cm_of_the_plan():
    assert_walked(mujoco_walk("g1", 20, 0.15), 20)


def test_icub_regulates_a_forward_facing_pelvis_frame_added_by_its_description():
    robot = RobotModel(RobotModel.Parameters(robot="icub"))
    q = robot.reference_configuration()
    assert robot.base_frame == "root_link" and robot.torso_frame == "pelvis_forward"
    assert yaw_of(robot.frame_pose(q, "root_link")[1]) == pytest.approx(math.pi, abs=1e-6)  # looks backwards
    np.testing.assert_allclose(robot.frame_pose(q, "pelvis_forward")[1], np.eye(3), atol=1e-6)
    assert robot.standing_com_height() == pytest.approx(0.45, abs=1e-4)


def test_icub_walks_ten_steps_of_10_cm_in_mujoco():
    assert_walked(mujoco_walk("icub", 10, 0.1), 10)


@pytest.mark.slow
def test_romeo_walks_ten_steps_of_10_cm_in_mujoco():
    # Its IK misses a few ticks near the ankle pitch limit (5 of 735 measured); the walk holds them.
    assert_walked(mujoco_walk("romeo", 10, 0.1), 10, ik_failures=10)
