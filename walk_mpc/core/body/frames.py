"""The transform tree of a measured robot (what robot_state_publisher computes), from pinocchio kinematics.

:class:`RobotFrames` turns a :class:`~walk_mpc.core.sensors.SensorSample` into the transforms a TF tree
holds: ``world_frame -> base`` (the sample's base pose, REP-105 ``odom`` or ``world``) then, for every link
of the URDF, ``parent link -> link`` (URDF link names, as robot_state_publisher names them), optionally
prefixed per robot (``frame_prefix``, e.g. ``"talos1/"`` for a namespaced robot; the world frame is not
prefixed, give it the prefix yourself for a per-robot ``odom``). The values come from pinocchio forward
kinematics of the measured configuration: ``parent -> child = oMf[parent]^-1 oMf[child]``.

It also gives the URDF text for ``robot_description`` (mesh ``package://`` URIs optionally resolved to
``file://`` paths, so a viewer without the robot's ROS package finds the meshes) and each link's pose in
the world (for renderers).

Error policy: a sample that is not finite raises :class:`~walk_mpc.core.errors.InputError` (from
:func:`~walk_mpc.core.sensors.check_sample`); joints of the sample that the model does not have are ignored
(a sensor may report more joints than the model), model joints missing from the sample keep their
reference posture.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from pathlib import Path
from typing import Optional

import numpy as np
import pinocchio as pin
from scipy.spatial.transform import Rotation

from walk_mpc.core.body.robot import RobotModel, robot_data_directories
from walk_mpc.core.errors import FrameNotFound, ModelError, ParameterError
from walk_mpc.core.params import check_choice
from walk_mpc.core.sensors import SensorSample, check_sample

#: Values of ``RobotFrames.Parameters.mesh_uris``.
MESH_URIS = ("file", "package")

#: Effort [N m] and velocity [rad/s] limits written to :meth:`RobotFrames.kinematic_urdf` for a joint without
#: (a URDF cannot say infinite).
UNLIMITED = 1e9

_FRAME_NAME = re.compile(r"^[A-Za-z0-9_/.\-]*$")
_PACKAGE_URI = re.compile(r'package://([^/"\s]+)/([^"\s<]*)')


@dataclasses.dataclass(frozen=True)
class Transform:
    """One edge of the transform tree: the pose of ``child`` in ``parent`` (read-only arrays).

    Attributes:
        parent: Parent frame name (prefixed).
        child: Child frame name (prefixed).
        translation: Position of the child's origin in the parent frame [m], shape (3,).
        rotation_xyzw: Orientation of the child in the parent frame, unit quaternion (x, y, z, w), w >= 0.
    """

    parent: str
    child: str
    translation: np.ndarray
    rotation_xyzw: np.ndarray

    def matrix(self) -> np.ndarray:
        """Homogeneous 4x4 matrix of the transform (child coordinates -> parent coordinates)."""
        out = np.eye(4)
        out[:3, :3] = Rotation.from_quat(self.rotation_xyzw).as_matrix()
        out[:3, 3] = self.translation
        return out


@dataclasses.dataclass(frozen=True)
class TransformTree:
    """The transforms of one sample, parents before children (read-only arrays, one row per edge).

    Attributes:
        parents: Parent frame of each edge (prefixed names).
        children: Child frame of each edge.
        translations: Child origin in its parent [m], shape (n, 3).
        rotations_xyzw: Child orientation in its parent, unit quaternions (x, y, z, w) with w >= 0, (n, 4).
    """

    parents: tuple[str, ...]
    children: tuple[str, ...]
    translations: np.ndarray
    rotations_xyzw: np.ndarray

    def __len__(self) -> int:
        return len(self.children)

    def __getitem__(self, index: int) -> Transform:
        return Transform(self.parents[index], self.children[index], self.translations[index],
                         self.rotations_xyzw[index])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def transform(self, child: str) -> Transform:
        """The edge ending at ``child`` (a prefixed frame name).

        Raises:
            FrameNotFound: No edge ends at ``child`` (the message lists the frames).
        """
        try:
            return self[self.children.index(child)]
        except ValueError:
            raise FrameNotFound(child, list(self.children)) from None


def quaternions_xyzw(rotations: np.ndarray) -> np.ndarray:
    """Unit quaternions (x, y, z, w), w >= 0, of rotation matrices of shape (n, 3, 3) (Shepperd's method,
    vectorised: from the largest of the four squared components)."""
    m = rotations
    m00, m11, m22 = m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]
    a, b = m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0]  # 4 w x, 4 w y
    c, d = m[:, 1, 0] - m[:, 0, 1], m[:, 0, 1] + m[:, 1, 0]  # 4 w z, 4 x y
    e, f = m[:, 0, 2] + m[:, 2, 0], m[:, 1, 2] + m[:, 2, 1]  # 4 x z, 4 y z
    diagonal = np.stack((m00 + m11 + m22, m00 - m11 - m22, m11 - m00 - m22, m22 - m00 - m11), axis=1)
    largest = np.argmax(diagonal, axis=1)
    s = 2.0 * np.sqrt(np.maximum(1.0 + diagonal[np.arange(len(m)), largest], 1e-300))  # 4 |component|
    candidates = np.stack((
        np.stack((a, b, c, s * s / 4.0), axis=1),  # w largest: (x, y, z, w) * s
        np.stack((s * s / 4.0, d, e, a), axis=1),  # x largest
        np.stack((d, s * s / 4.0, f, b), axis=1),  # y largest
        np.stack((e, f, s * s / 4.0, c), axis=1),  # z largest
    ))
    out = candidates[largest, np.arange(len(m))] / s[:, None]
    out /= np.linalg.norm(out, axis=1)[:, None]
    out[out[:, 3] < 0.0] *= -1.0
    return out


def _read_only(values: np.ndarray) -> np.ndarray:
    values.setflags(write=False)
    return values


class RobotFrames:
    """World -> base and parent -> child transforms of every link of a robot, from a sensor sample.

    Example:
        >>> frames = RobotFrames(RobotFrames.Parameters(frame_prefix="talos1/"))
        >>> transforms = frames.observe(sample)  # world -> talos1/base_link, talos1/base_link -> ...
    """

    @dataclasses.dataclass(frozen=True)
    class Parameters:
        """Frame names and robot model.

        Attributes:
            robot: Robot model (URDF) whose links make the tree.
            world_frame: Parent of the base (REP-105: ``odom`` for odometry, ``world`` or ``map`` for a
                fixed world frame); the frame of the sample's base pose. Not prefixed.
            frame_prefix: Prepended to every link name (e.g. ``"talos1/"`` under a namespace; '' = none).
            mesh_uris: ``"file"``: ``package://`` mesh URIs of the description resolved to ``file://``
                paths where the package is found (example-robot-data, ament prefixes); ``"package"``:
                the URDF as it is.
        """

        robot: RobotModel.Parameters = dataclasses.field(default_factory=RobotModel.Parameters)
        world_frame: str = "world"
        frame_prefix: str = ""
        mesh_uris: str = "file"

        def __post_init__(self) -> None:
            if not isinstance(self.robot, RobotModel.Parameters):
                raise ParameterError("robot", self.robot, "a RobotModel.Parameters")
            for field in ("world_frame", "frame_prefix"):
                value = getattr(self, field)
                if not isinstance(value, str) or not _FRAME_NAME.match(value) or value.startswith("/"):
                    raise ParameterError(field, value, "a frame name of letters, digits, '_', '-', '.', '/' "
                                                       "not starting with '/'")
            if not self.world_frame:
                raise ParameterError("world_frame", self.world_frame, "a frame name (e.g. 'odom', 'world')")
            check_choice("mesh_uris", self.mesh_uris, MESH_URIS)

    def __init__(self, params: Optional[RobotFrames.Parameters] = None,
                 robot: Optional[RobotModel] = None) -> None:
        """Build the link tree of the robot.

        Args:
            params: Parameters (defaults if None).
            robot: An already loaded model of ``params.robot`` (loaded here if None).

        Raises:
            ModelError: The robot cannot be loaded.
        """
        self.params = params or RobotFrames.Parameters()
        self.robot = robot if robot is not None else RobotModel(self.params.robot)
        model = self.robot.model
        self._data = model.createData()
        frames = model.frames
        bodies = [i for i, f in enumerate(frames) if f.type == pin.FrameType.BODY]
        # The root link: the body frame on the free flyer (its joint frame hangs from 'universe').
        root = next(i for i in bodies if frames[i].parentJoint == 1)
        self._root = root
        self._edges = []  # (parent body frame id, child body frame id) in tree order
        for i in bodies:
            if i == root:
                continue
            parent = self._parent_body(i)
            if parent is not None:
                self._edges.append((parent, i))
        prefix = self.params.frame_prefix
        names = {i: prefix + frames[i].name for i in bodies}
        self.base_frame = names[root]
        self._link_ids = [root] + [child for _, child in self._edges]  # root first, parents before children
        row = {frame_id: k for k, frame_id in enumerate(self._link_ids)}
        self._parent_rows = np.array([row[parent] for parent, _ in self._edges], dtype=int)
        self._parents = tuple(names[parent] for parent, _ in self._edges)
        self._children = tuple(names[child] for _, child in self._edges)
        self._world_parents = (self.params.world_frame,) + self._parents
        self._world_children = (self.base_frame,) + self._children
        #: URDF link names (unprefixed), the root link first.
        self.link_names = tuple(frames[i].name for i in self._link_ids)
        self._layouts: dict = {}
        self._last: Optional[TransformTree] = None
        self._description: Optional[str] = None

    def _parent_body(self, frame_id: int) -> Optional[int]:
        """The body (link) frame above a body frame: through its joint frame (moving or fixed)."""
        frames = self.robot.model.frames
        current = frames[frame_id].parentFrame
        for _ in range(len(frames)):
            if frames[current].type == pin.FrameType.BODY:
                return current
            if current == 0:
                return None
            current = frames[current].parentFrame
        return None

    # ------------------------------------------------------------------ inputs
    def configuration(self, sample: SensorSample) -> np.ndarray:
        """Pinocchio configuration of a sample: its base pose (identity at the origin when it has none) and
        its joint positions (model joints it lacks at the reference posture).

        Raises:
            InputError: The sample is not a valid, finite SensorSample.
        """
        check_sample(sample)
        layout = self._layouts.get(sample.joint_names)
        if layout is None:
            layout = self._layout(sample.joint_names)
        sample_index, q_index, continuous_index, continuous_q = layout
        q = self.robot.reference_configuration()
        if sample.base_estimate_valid:
            q[0:3] = sample.base_position
            quaternion = np.asarray(sample.base_orientation_xyzw, dtype=float)
            q[3:7] = quaternion / math.sqrt(float(quaternion @ quaternion))
        else:
            q[0:7] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
        values = sample.joint_pos
        q[q_index] = values[sample_index]
        if continuous_index.size:
            angles = values[continuous_index]
            q[continuous_q], q[continuous_q + 1] = np.cos(angles), np.sin(angles)
        return q

    def _layout(self, names: tuple) -> tuple:
        """Index maps sample -> configuration of one ``joint_names`` (computed once per names)."""
        last = {name: i for i, name in enumerate(names)}  # a repeated name: its last value
        robot = self.robot
        plain, continuous = [], []
        for name in robot.joint_names:
            if name not in last:
                continue
            joint = robot.model.joints[robot.model.getJointId(name)]
            (continuous if joint.nq == 2 and joint.nv == 1 else plain).append((last[name], joint.idx_q))
        layout = (np.array([s for s, _ in plain], dtype=int), np.array([q for _, q in plain], dtype=int),
                  np.array([s for s, _ in continuous], dtype=int),
                  np.array([q for _, q in continuous], dtype=int))
        if len(self._layouts) >= 16:
            self._layouts.clear()
        self._layouts[names] = layout
        return layout

    # ------------------------------------------------------------------ outputs
    def observe(self, sample: SensorSample) -> TransformTree:
        """The transforms of a sample: ``world_frame -> base`` (only when the sample has a base estimate)
        then ``parent -> child`` for every other link, in tree order (parents first).

        Raises:
            InputError: The sample is not a valid, finite SensorSample.
        """
        q = self.configuration(sample)
        self._last = self.transforms(q, with_world=sample.base_estimate_valid)
        return self._last

    def transforms(self, q, with_world: bool = True) -> TransformTree:
        """The transforms of configuration ``q`` (see :meth:`observe`); ``with_world`` adds world -> base."""
        placements = self._placements(q)
        poses = np.array([placements[i].homogeneous for i in self._link_ids])  # (n, 4, 4), root first
        parent = poses[self._parent_rows]  # the parent's pose of each edge
        child = poses[1:]
        rotation_t = np.swapaxes(parent[:, :3, :3], 1, 2)
        rotations = rotation_t @ child[:, :3, :3]
        translations = np.einsum("nij,nj->ni", rotation_t, child[:, :3, 3] - parent[:, :3, 3])
        if with_world:
            rotations = np.concatenate((poses[:1, :3, :3], rotations))
            translations = np.concatenate((poses[:1, :3, 3], translations))
            parents, children = self._world_parents, self._world_children
        else:
            parents, children = self._parents, self._children
        quaternions = quaternions_xyzw(rotations)
        return TransformTree(parents, children, _read_only(translations), _read_only(quaternions))

    def link_poses(self, q) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Pose in the world of every link (URDF name, unprefixed): (position [m], rotation matrix)."""
        placements = self._placements(q)
        frames = self.robot.model.frames
        return {frames[i].name: (placements[i].translation.copy(), placements[i].rotation.copy())
                for i in self._link_ids}

    def _placements(self, q) -> list:
        q = self.robot.check_configuration(q)
        pin.framesForwardKinematics(self.robot.model, self._data, q)
        return self._data.oMf

    @property
    def last(self) -> Optional[TransformTree]:
        """Transforms of the last observed sample (None before any, and after :meth:`reset`)."""
        return self._last

    def reset(self) -> None:
        """Forget the last observed sample."""
        self._last = None

    def description(self) -> str:
        """The URDF text for ``robot_description`` (mesh URIs per ``mesh_uris``), read once; for a robot
        described by an MJCF, a URDF of its kinematic tree (:meth:`kinematic_urdf`: links and joints, no
        visuals)."""
        if self._description is None and self.robot.urdf_path is None:
            self._description = self.kinematic_urdf()
        if self._description is None:
            text = Path(self.robot.urdf_path).read_text()
            if self.params.mesh_uris == "file":
                text = _PACKAGE_URI.sub(_file_uri, text)
            self._description = text
        return self._description


    def kinematic_urdf(self) -> str:
        """A URDF of the model's link tree: one link per body frame (:attr:`link_names`, so the TF tree and
        the description agree), its joints at the neutral configuration, no inertia and no geometry.

        Raises:
            ModelError: A joint type a URDF cannot hold (only revolute, continuous and prismatic ones).
        """
        model, robot = self.robot.model, self.robot
        data = model.createData()
        pin.framesForwardKinematics(model, data, robot.neutral_configuration())
        frames = model.frames

        def origin(placement: pin.SE3) -> str:
            xyz = " ".join(f"{v:.9g}" for v in placement.translation)
            rpy = " ".join(f"{v:.9g}" for v in pin.rpy.matrixToRpy(placement.rotation))
            return f'<origin xyz="{xyz}" rpy="{rpy}"/>'

        links = [f'<link name="{frames[i].name}"/>' for i in self._link_ids]
        joints = []
        for parent, child in self._edges:
            p_frame, c_frame = frames[parent], frames[child]
            names = (frames[parent].name, frames[child].name)
            if c_frame.parentJoint == p_frame.parentJoint:  # rigidly attached: a fixed joint
                joints.append(f'<joint name="{names[0]}_to_{names[1]}" type="fixed">'
                              f'<parent link="{names[0]}"/><child link="{names[1]}"/>'
                              f'{origin(data.oMf[parent].actInv(data.oMf[child]))}</joint>')
                continue
            j = c_frame.parentJoint
            joint = model.joints[j]
            kind, axis = _urdf_joint(joint, model.names[j])
            link = names[1] if c_frame.placement.isIdentity() else f"{names[1]}__joint"
            if link != names[1]:  # the body sits away from its joint: a link on the joint, then fixed
                links.append(f'<link name="{link}"/>')
                joints.append(f'<joint name="{link}_to_{names[1]}" type="fixed"><parent link="{link}"/>'
                              f'<child link="{names[1]}"/>{origin(c_frame.placement)}</joint>')
            limits = ""
            if kind != "continuous":
                lower, upper = model.lowerPositionLimit[joint.idx_q], model.upperPositionLimit[joint.idx_q]
                effort, velocity = (value if math.isfinite(value) else UNLIMITED for value in
                                    (model.effortLimit[joint.idx_v], model.velocityLimit[joint.idx_v]))
                limits = (f'<limit lower="{lower:.9g}" upper="{upper:.9g}" effort="{effort:.9g}" '
                          f'velocity="{velocity:.9g}"/>')
            joints.append(f'<joint name="{model.names[j]}" type="{kind}"><parent link="{names[0]}"/>'
                          f'<child link="{link}"/>{origin(data.oMf[parent].actInv(data.oMi[j]))}'
                          f'<axis xyz="{" ".join(f"{v:.9g}" for v in axis)}"/>{limits}</joint>')
        body = "\n  ".join(links + joints)
        return f'<?xml version="1.0"?>\n<robot name="{robot.name}">\n  {body}\n</robot>\n'


def _urdf_joint(joint, name: str) -> tuple[str, tuple[float, ...]]:
    """URDF type and axis of a one-DoF pinocchio joint."""
    short = joint.shortname()
    axes = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}
    if short in ("JointModelRX", "JointModelRY", "JointModelRZ"):
        return "revolute", axes[short[-1]]
    if short in ("JointModelPX", "JointModelPY", "JointModelPZ"):
        return "prismatic", axes[short[-1]]
    if short.startswith("JointModelRUB"):
        return "continuous", axes[short[-1]]
    if short in ("JointModelRevoluteUnaligned", "JointModelPrismaticUnaligned"):
        kind = "revolute" if "Revolute" in short else "prismatic"
        return kind, tuple(float(v) for v in joint.extract().axis)
    raise ModelError(f"joint '{name}' is a {short}: a URDF holds revolute, continuous or prismatic joints")


def package_directory(package: str) -> Optional[Path]:
    """Directory of a ROS package or example-robot-data robot package named ``package`` (None if unknown).

    Looks in the example-robot-data ``robots`` directories (and example-robot-data itself), then
    ``share/<package>`` of the ament prefixes.
    """
    for directory in robot_data_directories():  # .../share/example-robot-data/robots
        if (directory / package).is_dir():
            return directory / package
        if directory.parent.name == package:  # package://example-robot-data/robots/...
            return directory.parent
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix and (Path(prefix) / "share" / package).is_dir():
            return Path(prefix) / "share" / package
    return None


def _file_uri(match: re.Match) -> str:
    directory = package_directory(match.group(1))
    if directory is None:
        return match.group(0)
    return (directory / match.group(2)).resolve().as_uri()


__all__ = ["MESH_URIS", "RobotFrames", "Transform", "TransformTree", "package_directory"]
