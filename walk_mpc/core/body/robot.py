"""Kinematic robot model on pinocchio: URDF loading, named frames, CoM, foot poses, joint maps.

Error policy: every pinocchio error raised while loading or querying the model is
re-raised as :class:`~walk_mpc.core.errors.ModelError` (or one of its subclasses
:class:`FrameNotFound` / :class:`JointNotFound`, which list the valid names).

Only the kinematic tree and inertias are built: no geometry, no meshes.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pinocchio as pin

from walk_mpc.core._validate import finite_vector
from walk_mpc.core.errors import FrameNotFound, InputError, JointNotFound, ModelError, ParameterError

ROBOT_DATA_SUBDIR = os.path.join("share", "example-robot-data", "robots")


@dataclasses.dataclass(frozen=True)
class RobotPreset:
    """Where a known example-robot-data robot lives and which frames it walks with.

    Attributes:
        urdf: URDF path relative to the example-robot-data ``robots`` directory.
        srdf: SRDF path (named reference postures), relative to the same directory.
        reference_posture: Name of the standing posture in the SRDF.
        base_frame: Floating-base frame.
        left_foot_frame: Left sole frame ('' for non-bipeds).
        right_foot_frame: Right sole frame ('' for non-bipeds).
        torso_frame: Frame whose orientation the IK regulates.
        leg_frames: Foot frames of a multi-legged robot (point contacts), else empty.
    """

    urdf: str
    srdf: str
    reference_posture: str
    base_frame: str
    left_foot_frame: str = ""
    right_foot_frame: str = ""
    torso_frame: str = ""
    leg_frames: tuple[str, ...] = ()


PRESETS: dict[str, RobotPreset] = {
    "talos_reduced": RobotPreset(
        urdf="talos_data/robots/talos_reduced.urdf",
        srdf="talos_data/srdf/talos.srdf",
        reference_posture="half_sitting",
        base_frame="base_link",
        left_foot_frame="left_sole_link",
        right_foot_frame="right_sole_link",
        torso_frame="torso_2_link",
    ),
    "solo12": RobotPreset(
        urdf="solo_description/robots/solo12.urdf",
        srdf="solo_description/srdf/solo.srdf",
        reference_posture="standing",
        base_frame="base_link",
        torso_frame="base_link",
        leg_frames=("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"),
    ),
    "go2": RobotPreset(
        urdf="go2_description/urdf/go2.urdf",
        srdf="go2_description/srdf/go2.srdf",
        reference_posture="standing",
        base_frame="base",
        torso_frame="base",
        leg_frames=("FL_foot", "FR_foot", "RL_foot", "RR_foot"),
    ),
}


def robot_data_directories() -> tuple[Path, ...]:
    """Candidate example-robot-data ``robots`` directories, most specific first.

    Looks at ``$EXAMPLE_ROBOT_DATA_MODEL_DIR``, the ``cmeel.prefix`` of the installed
    pinocchio wheel and of every ``sys.path`` entry, ``$AMENT_PREFIX_PATH`` and
    ``$CMAKE_PREFIX_PATH`` entries, and ``/opt/openrobots``.
    """
    candidates = []
    env = os.environ.get("EXAMPLE_ROBOT_DATA_MODEL_DIR")
    if env:
        candidates.append(Path(env))
    pin_dir = Path(pin.__file__).resolve().parent  # .../cmeel.prefix/lib/pythonX.Y/site-packages/pinocchio
    candidates.append(pin_dir.parents[3] / ROBOT_DATA_SUBDIR)
    for entry in sys.path:
        if entry:
            candidates.append(Path(entry) / "cmeel.prefix" / ROBOT_DATA_SUBDIR)
    for var in ("AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH"):
        for prefix in os.environ.get(var, "").split(os.pathsep):
            if prefix:
                candidates.append(Path(prefix) / ROBOT_DATA_SUBDIR)
    candidates.append(Path("/opt/openrobots") / ROBOT_DATA_SUBDIR)
    seen, found = set(), []
    for path in candidates:
        if path.is_dir() and path.resolve() not in seen:
            seen.add(path.resolve())
            found.append(path.resolve())
    return tuple(found)


def find_robot_file(relative: str) -> Path:
    """Absolute path of ``relative`` inside the first example-robot-data directory holding it.

    Raises:
        ModelError: If no candidate directory holds the file.
    """
    directories = robot_data_directories()
    for directory in directories:
        path = directory / relative
        if path.is_file():
            return path
    raise ModelError(
        f"cannot find '{relative}' in example-robot-data; searched {[str(d) for d in directories]} "
        "(set EXAMPLE_ROBOT_DATA_MODEL_DIR to the 'robots' directory)"
    )


def rotation_z(yaw: float) -> np.ndarray:
    """Rotation matrix of angle ``yaw`` [rad] about the world z axis."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def yaw_of(rotation: np.ndarray) -> float:
    """Yaw [rad] of a rotation matrix (angle of its x axis projected on the ground)."""
    return math.atan2(rotation[1, 0], rotation[0, 0])


class RobotModel:
    """Floating-base kinematic model of a legged robot.

    The configuration ``q`` follows pinocchio: base position [m] (x, y, z), base
    orientation quaternion (x, y, z, w), then the actuated joints in model order
    (:attr:`joint_names`). Velocities ``v`` have ``nv = 6 + n_actuated_dofs``.

    Example:
        >>> robot = RobotModel(RobotModel.Parameters(robot="talos_reduced"))
        >>> q = robot.reference_configuration()
        >>> robot.com(q)[2]  # ~0.877 m
    """

    @dataclasses.dataclass(frozen=True)
    class Parameters:
        """Robot model configuration.

        Empty frame names take the value of the preset of a known robot name
        (see :data:`PRESETS`); for a URDF path they mean "none".

        Attributes:
            robot: example-robot-data name ('talos_reduced', 'solo12', 'go2') or path to a URDF file.
            srdf: Path to an SRDF with named postures ('' = the preset's, if any).
            base_frame: Floating-base frame name.
            left_foot_frame: Left sole frame name (bipeds).
            right_foot_frame: Right sole frame name (bipeds).
            torso_frame: Frame whose orientation the IK regulates (base frame for quadrupeds).
            leg_frames: Foot frames of a multi-legged robot (point contacts).
            reference_posture: Named SRDF posture used as the standing reference ('' = preset's,
                'neutral' = the model's neutral configuration).
            reference_joint_names: Joints whose reference position is overridden.
            reference_joint_positions: Their positions [rad or m], same order.
        """

        robot: str = "talos_reduced"
        srdf: str = ""
        base_frame: str = ""
        left_foot_frame: str = ""
        right_foot_frame: str = ""
        torso_frame: str = ""
        leg_frames: tuple[str, ...] = ()
        reference_posture: str = ""
        reference_joint_names: tuple[str, ...] = ()
        reference_joint_positions: tuple[float, ...] = ()

        def __post_init__(self) -> None:
            if not isinstance(self.robot, str) or not self.robot:
                raise ParameterError("robot", self.robot, f"a robot name in {sorted(PRESETS)} or a URDF path")
            if self.robot not in PRESETS and not self.robot.endswith(".urdf"):
                expected = f"a robot name in {sorted(PRESETS)} or a *.urdf path"
                raise ParameterError("robot", self.robot, expected)
            object.__setattr__(self, "leg_frames", tuple(self.leg_frames))
            object.__setattr__(self, "reference_joint_names", tuple(self.reference_joint_names))
            positions = tuple(float(v) for v in self.reference_joint_positions)
            object.__setattr__(self, "reference_joint_positions", positions)
            if len(self.reference_joint_names) != len(positions):
                raise ParameterError(
                    "reference_joint_positions", positions,
                    f"{len(self.reference_joint_names)} values, one per reference_joint_names entry",
                )
            for value in positions:
                if not math.isfinite(value):
                    raise ParameterError("reference_joint_positions", positions, "finite numbers")
            if bool(self.left_foot_frame) != bool(self.right_foot_frame):
                raise ParameterError(
                    "right_foot_frame" if self.left_foot_frame else "left_foot_frame", "",
                    "both foot frames set, or both empty",
                )

    def __init__(self, params: RobotModel.Parameters | None = None) -> None:
        """Load the model.

        Args:
            params: Configuration; defaults to Talos (``talos_reduced``).

        Raises:
            ModelError: If the URDF/SRDF cannot be read or parsed.
            FrameNotFound: If a configured frame is not in the model.
            JointNotFound: If a reference joint is not in the model.
        """
        self.params = params if params is not None else RobotModel.Parameters()
        p = self.params
        preset = PRESETS.get(p.robot)
        if preset is not None:
            urdf_path = find_robot_file(preset.urdf)
            srdf_path: Path | None = Path(p.srdf) if p.srdf else find_robot_file(preset.srdf)
        else:
            urdf_path = Path(p.robot)
            srdf_path = Path(p.srdf) if p.srdf else None
        if not urdf_path.is_file():
            raise ModelError(f"URDF file '{urdf_path}' does not exist")
        try:
            self.model: pin.Model = pin.buildModelFromUrdf(str(urdf_path), pin.JointModelFreeFlyer())
        except Exception as exc:  # pinocchio raises ValueError/RuntimeError on malformed URDFs
            raise ModelError(f"cannot build a model from '{urdf_path}': {exc}") from exc
        self.urdf_path = urdf_path
        self.data: pin.Data = self.model.createData()
        self.name = p.robot if preset is not None else urdf_path.stem
        self._frame_names = [frame.name for frame in self.model.frames]

        def pick(value: str, preset_value: str) -> str:
            return value or (preset_value if preset is not None else "")

        self.base_frame = pick(p.base_frame, preset.base_frame if preset else "")
        if not self.base_frame:
            bodies = [
                f.name for f in self.model.frames if f.parentJoint == 1 and f.type == pin.FrameType.BODY
            ]
            self.base_frame = bodies[0] if bodies else self.model.names[1]
        self.left_foot_frame = pick(p.left_foot_frame, preset.left_foot_frame if preset else "")
        self.right_foot_frame = pick(p.right_foot_frame, preset.right_foot_frame if preset else "")
        self.torso_frame = pick(p.torso_frame, preset.torso_frame if preset else "") or self.base_frame
        self.leg_frames: tuple[str, ...] = p.leg_frames or (preset.leg_frames if preset else ())
        for frame in (self.base_frame, self.left_foot_frame, self.right_foot_frame, self.torso_frame,
                      *self.leg_frames):
            if frame:
                self.frame_id(frame)

        # Actuated joints: every joint after the free flyer, in model order.
        self.joint_names: tuple[str, ...] = tuple(self.model.names[2:])
        self._joint_idx_q = {n: self.model.joints[self.model.getJointId(n)].idx_q for n in self.joint_names}
        self._joint_idx_v = {n: self.model.joints[self.model.getJointId(n)].idx_v for n in self.joint_names}
        self._joint_nq = {n: self.model.joints[self.model.getJointId(n)].nq for n in self.joint_names}
        self._joint_nv = {n: self.model.joints[self.model.getJointId(n)].nv for n in self.joint_names}
        self._mass = float(pin.computeTotalMass(self.model))

        self._reference = self._load_reference(srdf_path, preset)

    # ----------------------------------------------------------------- loading
    def _load_reference(self, srdf_path: Path | None, preset: RobotPreset | None) -> np.ndarray:
        p = self.params
        posture = p.reference_posture or (preset.reference_posture if preset else "neutral")
        if posture == "neutral":
            q = self.neutral_configuration()
        else:
            if srdf_path is None:
                raise ModelError(f"reference posture '{posture}' needs an SRDF (parameter 'srdf')")
            try:
                pin.loadReferenceConfigurations(self.model, str(srdf_path), False)
            except Exception as exc:
                raise ModelError(f"cannot read reference postures from '{srdf_path}': {exc}") from exc
            names = [name for name in self.model.referenceConfigurations]
            names = [n.key() if hasattr(n, "key") else n for n in names]
            if posture not in names:
                raise ModelError(f"posture '{posture}' not in '{srdf_path}'; postures: {names + ['neutral']}")
            q = np.array(self.model.referenceConfigurations[posture], dtype=float)
        for name, value in zip(p.reference_joint_names, p.reference_joint_positions):
            idx = self._joint_idx_q.get(name)
            if idx is None:
                raise JointNotFound(name, self.joint_names)
            q[idx] = value
        if self.is_biped:
            # Centre the soles about the world origin, flat at z = 0 (SRDF postures are micrometres off).
            pin.framesForwardKinematics(self.model, self.data, q)
            soles = [self.data.oMf[self.frame_id(f)].translation for f in self.foot_frames]
            q[0:3] -= np.mean(soles, axis=0)
        return q

    # ----------------------------------------------------------------- names
    @property
    def nq(self) -> int:
        """Dimension of the configuration vector (7 base + actuated)."""
        return self.model.nq

    @property
    def nv(self) -> int:
        """Dimension of the velocity vector (6 base + actuated)."""
        return self.model.nv

    @property
    def mass(self) -> float:
        """Total mass [kg]."""
        return self._mass

    @property
    def frame_names(self) -> tuple[str, ...]:
        """Every frame name of the model."""
        return tuple(self._frame_names)

    @property
    def is_biped(self) -> bool:
        """True when left and right sole frames are configured."""
        return bool(self.left_foot_frame)

    @property
    def foot_frames(self) -> tuple[str, ...]:
        """Contact frames: (left, right) sole frames for a biped, else the leg frames."""
        if self.is_biped:
            return (self.left_foot_frame, self.right_foot_frame)
        return self.leg_frames

    def frame_id(self, name: str) -> int:
        """Pinocchio index of frame ``name``.

        Raises:
            FrameNotFound: If the model has no such frame (lists the valid frames).
        """
        if not isinstance(name, str) or not self.model.existFrame(name):
            raise FrameNotFound(name, self._frame_names)
        return self.model.getFrameId(name)

    def joint_index_q(self, name: str) -> int:
        """Index of actuated joint ``name`` in the configuration vector.

        Raises:
            JointNotFound: If no actuated joint has this name (lists the valid joints).
        """
        try:
            return self._joint_idx_q[name]
        except (KeyError, TypeError):
            raise JointNotFound(name, self.joint_names) from None

    def joint_index_v(self, name: str) -> int:
        """Index of actuated joint ``name`` in the velocity vector.

        Raises:
            JointNotFound: If no actuated joint has this name.
        """
        try:
            return self._joint_idx_v[name]
        except (KeyError, TypeError):
            raise JointNotFound(name, self.joint_names) from None

    # ----------------------------------------------------------------- configurations
    def neutral_configuration(self) -> np.ndarray:
        """Pinocchio's neutral configuration (joints at zero, base at the origin)."""
        return np.array(pin.neutral(self.model), dtype=float)

    def reference_configuration(self) -> np.ndarray:
        """Standing reference configuration.

        For a biped the soles are centred about the world origin, flat at z = 0 (Talos: half-sitting,
        soles at y = +-0.085 m, CoM height ~0.877 m).
        """
        return self._reference.copy()

    def check_configuration(self, q, name: str = "q") -> np.ndarray:
        """Validated float copy of ``q`` with a unit base quaternion.

        Raises:
            ShapeError: If ``q`` does not have shape (nq,).
            InputError: If ``q`` holds NaN/inf or a zero quaternion.
        """
        q = finite_vector(name, q, self.nq).copy()
        norm = float(np.linalg.norm(q[3:7]))
        if norm < 1e-9:
            raise InputError(name, q[3:7], "a nonzero base quaternion (x, y, z, w)")
        q[3:7] /= norm
        return q

    def joint_positions(self, q) -> dict[str, float]:
        """Actuated joint positions by name [rad or m] (continuous joints as an angle)."""
        q = self.check_configuration(q)
        out = {}
        for name in self.joint_names:
            idx = self._joint_idx_q[name]
            if self._joint_nq[name] == 2 and self._joint_nv[name] == 1:  # continuous: (cos, sin)
                out[name] = math.atan2(q[idx + 1], q[idx])
            else:
                out[name] = float(q[idx])
        return out

    def actuated_positions(self, q) -> np.ndarray:
        """Actuated joint positions in :attr:`joint_names` order."""
        positions = self.joint_positions(q)
        return np.array([positions[name] for name in self.joint_names])

    def configuration_from_joints(
        self,
        joint_positions: Mapping[str, float],
        base_position: Sequence[float] = (0.0, 0.0, 0.0),
        base_quaternion_xyzw: Sequence[float] = (0.0, 0.0, 0.0, 1.0),
        default=None,
    ) -> np.ndarray:
        """Full configuration from joint positions by name and a base pose.

        Args:
            joint_positions: Positions [rad or m] by actuated joint name; joints not
                listed keep their value in ``default``.
            base_position: Base position in the world [m].
            base_quaternion_xyzw: Base orientation (x, y, z, w), normalised here.
            default: Configuration providing the unlisted joints (reference configuration if None).

        Raises:
            JointNotFound: For an unknown joint name.
            InputError: For non-finite values.
        """
        if default is None:
            q = self.reference_configuration()
        else:
            q = self.check_configuration(default, "default")
        q[0:3] = finite_vector("base_position", base_position, 3)
        quat = finite_vector("base_quaternion_xyzw", base_quaternion_xyzw, 4)
        if np.linalg.norm(quat) < 1e-9:
            raise InputError("base_quaternion_xyzw", quat, "a nonzero quaternion")
        q[3:7] = quat / np.linalg.norm(quat)
        for name, value in joint_positions.items():
            idx = self.joint_index_q(name)
            value = float(value)
            if not math.isfinite(value):
                raise InputError(f"joint_positions[{name!r}]", value, "a finite number")
            if self._joint_nq[name] == 2 and self._joint_nv[name] == 1:
                q[idx], q[idx + 1] = math.cos(value), math.sin(value)
            else:
                q[idx] = value
        return q

    def configuration_from_actuated(self, positions, base_position=(0.0, 0.0, 0.0),
                                    base_quaternion_xyzw=(0.0, 0.0, 0.0, 1.0)) -> np.ndarray:
        """Inverse of :meth:`actuated_positions`: positions in :attr:`joint_names` order plus a base pose."""
        positions = finite_vector("positions", positions, len(self.joint_names))
        return self.configuration_from_joints(
            dict(zip(self.joint_names, positions)), base_position, base_quaternion_xyzw
        )

    def clamp_to_limits(self, q) -> np.ndarray:
        """Copy of ``q`` with joints clipped to their position limits."""
        q = self.check_configuration(q)
        lower, upper = self.model.lowerPositionLimit, self.model.upperPositionLimit
        out = q.copy()
        out[7:] = np.clip(q[7:], lower[7:], upper[7:])
        return out

    # ----------------------------------------------------------------- kinematics
    def com(self, q) -> np.ndarray:
        """Centre of mass in the world frame [m]."""
        q = self.check_configuration(q)
        return np.array(pin.centerOfMass(self.model, self.data, q, False))

    def frame_pose(self, q, frame: str) -> tuple[np.ndarray, np.ndarray]:
        """Pose of ``frame`` in the world: (position [m], 3x3 rotation matrix).

        Raises:
            FrameNotFound: If ``frame`` is not in the model.
        """
        frame_id = self.frame_id(frame)
        q = self.check_configuration(q)
        pin.forwardKinematics(self.model, self.data, q)
        placement = pin.updateFramePlacement(self.model, self.data, frame_id)
        return np.array(placement.translation), np.array(placement.rotation)

    def foot_poses(self, q) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Poses of :attr:`foot_frames` by frame name: (position [m], rotation)."""
        q = self.check_configuration(q)
        pin.forwardKinematics(self.model, self.data, q)
        out = {}
        for frame in self.foot_frames:
            placement = pin.updateFramePlacement(self.model, self.data, self.frame_id(frame))
            out[frame] = (np.array(placement.translation), np.array(placement.rotation))
        return out

    def lower_limits(self) -> np.ndarray:
        """Lower position limits of the actuated joints (``q[7:]``)."""
        return np.array(self.model.lowerPositionLimit[7:])

    def upper_limits(self) -> np.ndarray:
        """Upper position limits of the actuated joints (``q[7:]``)."""
        return np.array(self.model.upperPositionLimit[7:])
