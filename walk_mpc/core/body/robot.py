"""Robot descriptions (config/robots/<name>.yaml) and the kinematic model on pinocchio: URDF or MJCF
loading, named frames, CoM, foot poses, joint maps, and the values derived from the model (CoM height,
planner soles, leg length, step limits).

A robot is its description (a URDF, or an MJCF file read by pinocchio's MJCF parser: bodies, joints and
sites become frames, a ``freejoint`` on the root body becomes the free flyer, one is added otherwise) plus
one small YAML (:class:`RobotDescription`): sole frames (added on a link when the description has none)
and sole size, frames the description lacks, standing posture (a named SRDF posture and/or joint values),
joint groups with their simulated servo gains, torque limits and rotor inertias, IMU frame, contact sensor
prefixes, step limits. Nothing robot-specific lives in code: a new robot needs only its YAML.

Error policy: every pinocchio error raised while loading or querying the model is
re-raised as :class:`~walk_mpc.core.errors.ModelError` (or one of its subclasses
:class:`FrameNotFound` / :class:`JointNotFound`, which list the valid names).

Only the kinematic tree and inertias are built: no geometry, no meshes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pinocchio as pin

from walk_mpc.core._validate import finite_vector
from walk_mpc.core.errors import (
    ConfigError,
    FrameNotFound,
    InputError,
    JointNotFound,
    ModelError,
    ParameterError,
)
from walk_mpc.core.params import check_nonnegative, check_positive, from_mapping, load_yaml

ROBOT_DATA_SUBDIR = os.path.join("share", "example-robot-data", "robots")


#: Robot description files (``<name>.yaml``) are looked up in ``$WALK_MPC_ROBOTS_DIR`` (``os.pathsep``
#: separated), the source tree's ``config/robots``, then ``share/walk_mpc/config/robots`` of every
#: ``$AMENT_PREFIX_PATH`` entry and of ``sys.prefix`` (colcon and pip installs).
ROBOTS_SUBDIR = os.path.join("share", "walk_mpc", "config", "robots")


def _vector(name: str, value, size: int) -> tuple[float, ...]:
    values = tuple(float(v) for v in value) if isinstance(value, (list, tuple)) else ()
    if len(values) != size or not all(math.isfinite(v) for v in values):
        raise ParameterError(name, value, f"{size} finite numbers")
    return values


@dataclasses.dataclass(frozen=True)
class SoleFrame:
    """One sole frame of a biped: a frame of the description, or one added on a link.

    Attributes:
        frame: Sole frame name (x forward, z up, origin on the bottom of the sole).
        parent: Frame (usually the ankle link) the sole frame is added to when the description has no
            frame ``frame`` ('' = the description has it).
        position: Position of the added frame in ``parent`` [m].
        rpy: Orientation of the added frame in ``parent`` (roll, pitch, yaw) [rad].
    """

    frame: str = ""
    parent: str = ""
    position: tuple[float, ...] = (0.0, 0.0, 0.0)
    rpy: tuple[float, ...] = (0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "position", _vector("position", self.position, 3))
        object.__setattr__(self, "rpy", _vector("rpy", self.rpy, 3))
        if self.parent and not self.frame:
            raise ParameterError("frame", self.frame, "a sole frame name when parent is set")


@dataclasses.dataclass(frozen=True)
class SoleSize:
    """Contact area of a sole, from its sole frame along the foot axes (0 everywhere: none given).

    Attributes:
        front: Extent towards the toes [m].
        back: Extent towards the heel [m].
        left: Extent towards the foot's left (+y) [m].
        right: Extent towards the foot's right (-y) [m].
        planner_margin: The planner's support region is the sole shrunk by this on every side [m].
    """

    front: float = 0.0
    back: float = 0.0
    left: float = 0.0
    right: float = 0.0
    planner_margin: float = 0.01

    def __post_init__(self) -> None:
        for name in ("front", "back", "left", "right", "planner_margin"):
            check_nonnegative(name, getattr(self, name))
        if self.given:
            if self.front + self.back <= 2.0 * self.planner_margin:
                raise ParameterError("front", self.front, "front + back > 2 planner_margin [m]")
            if self.left + self.right <= 2.0 * self.planner_margin:
                raise ParameterError("left", self.left, "left + right > 2 planner_margin [m]")

    @property
    def given(self) -> bool:
        """Whether a size was given (not all four extents zero)."""
        return any((self.front, self.back, self.left, self.right))


@dataclasses.dataclass(frozen=True)
class JointGroup:
    """Joints sharing servo gains in simulation (e.g. the legs).

    Attributes:
        name: Group name (``legs``, ``arms``...).
        joints: Regular expressions matched against whole joint names (``leg_.*``) or joint names.
        kp: Proportional gain of the position servos [N m/rad].
        kd: Derivative gain [N m s/rad].
        torque_limit: Largest servo torque [N m] (0 = the description's effort limits).
        armature: Reflected rotor inertia of each joint [kg m^2] (light links on stiff servos need it to
            stay stable at a 1 ms physics step).
    """

    name: str
    joints: tuple[str, ...]
    kp: float
    kd: float
    torque_limit: float = 0.0
    armature: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ParameterError("joint_groups.name", self.name, "a group name")
        object.__setattr__(self, "joints", tuple(self.joints))
        if not self.joints or not all(isinstance(j, str) and j for j in self.joints):
            raise ParameterError(f"joint_groups.{self.name}.joints", self.joints, "joint name patterns")
        for pattern in self.joints:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ParameterError(f"joint_groups.{self.name}.joints", pattern,
                                     f"a regular expression ({exc})") from None
        for name in ("kp", "kd", "torque_limit", "armature"):
            check_nonnegative(f"joint_groups.{self.name}.{name}", getattr(self, name))

    def matches(self, joint: str) -> bool:
        """Whether ``joint`` belongs to the group."""
        return any(re.fullmatch(pattern, joint) for pattern in self.joints)


@dataclasses.dataclass(frozen=True)
class LegLinks:
    """The links of a biped's left and right legs (the simulator's optional leg-leg collisions).

    Attributes:
        left: Regular expressions matched against whole link names (``leg_left_.*``).
        right: The same for the right leg.
    """

    left: tuple[str, ...] = ()
    right: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for side in ("left", "right"):
            patterns = tuple(getattr(self, side))
            object.__setattr__(self, side, patterns)
            for pattern in patterns:
                if not isinstance(pattern, str) or not pattern:
                    raise ParameterError(f"leg_links.{side}", pattern, "link name patterns")
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ParameterError(f"leg_links.{side}", pattern,
                                         f"a regular expression ({exc})") from None
        if bool(self.left) != bool(self.right):
            raise ParameterError("leg_links", self, "both legs' links, or neither")

    @property
    def given(self) -> bool:
        """Whether the legs' links are named."""
        return bool(self.left)


@dataclasses.dataclass(frozen=True)
class Posture:
    """Standing posture: a named SRDF posture (or 'neutral') with joint values on top.

    Attributes:
        name: SRDF group state ('' or 'neutral' = the model's neutral configuration).
        joints: Joint positions [rad or m] by joint name, applied after the named posture.
    """

    name: str = ""
    joints: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.joints, Mapping):
            raise ParameterError("posture.joints", self.joints, "a mapping joint name -> position")
        joints = {}
        for joint, value in self.joints.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ParameterError(f"posture.joints.{joint}", value, "a finite number")
            joints[str(joint)] = float(value)
        object.__setattr__(self, "joints", joints)


@dataclasses.dataclass(frozen=True)
class StepLimits:
    """Steps the robot can take (0 = derived from the leg length, see :meth:`RobotModel.step_limits`).

    Attributes:
        max_forward: Longest step forward [m].
        max_backward: Longest step backward [m].
        min_width: Smallest lateral distance between the soles [m].
        max_width: Largest lateral distance between the soles [m].
        max_yaw_change: Largest yaw change per step [rad].
        single_support: Single support duration of the robot's nominal step [s].
        double_support: Double support duration [s].
        swing_height: Swing foot apex height [m].
        max_crossover_width: Widest crossing step [m] the legs clear: a sole landing this far across the
            other sole's centre (the recovery's crossover step, walk limits with crossover widths); 0 (the
            default): no crossing step, e.g. legs that collide when crossed
            (``benchmarks/crossover_clearance.py`` measures it).
    """

    max_forward: float = 0.0
    max_backward: float = 0.0
    min_width: float = 0.0
    max_width: float = 0.0
    max_yaw_change: float = 0.5
    single_support: float = 0.8
    double_support: float = 0.3
    swing_height: float = 0.05
    max_crossover_width: float = 0.0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            check_nonnegative(f"steps.{field.name}", getattr(self, field.name))
        for name in ("single_support", "double_support", "swing_height", "max_yaw_change"):
            check_positive(f"steps.{name}", getattr(self, name))


@dataclasses.dataclass(frozen=True)
class RobotDescription:
    """A robot: its description (URDF or MJCF) and the few facts it lacks, from ``config/robots/<name>.yaml``.

    Attributes:
        name: Robot name.
        urdf: URDF: absolute path, path relative to the YAML file, or relative to example-robot-data's
            ``robots`` directory ('' = the robot is an MJCF, :attr:`mjcf`).
        mjcf: MJCF (MuJoCo XML) instead of a URDF, same lookup: pinocchio builds the kinematic model from
            it (sites and bodies are frames) and the MuJoCo simulator loads it as it is. Exactly one of
            ``urdf`` and ``mjcf`` is given.
        srdf: SRDF with named postures (same lookup; '' = none).
        aliases: Other names of the robot.
        base_frame: Floating-base frame ('' = the root link).
        torso_frame: Frame whose orientation the IK regulates ('' = the base frame).
        imu_frame: Frame of the IMU ('' = the base frame).
        left_foot: Left sole frame (bipeds).
        right_foot: Right sole frame (bipeds).
        frames: Frames added on a parent frame (same fields as a sole frame), e.g. a forward-facing base
            frame when the description's root link looks backwards; added before the sole frames.
        leg_frames: Foot frames of a multi-legged robot (point contacts).
        contact_sensors: Contact sensor names of the feet: a biped's sole prefixes (each sole has four
            corner sensors ``<prefix>_fl``, ``_fr``, ``_bl``, ``_br``; the graph's nodes expect
            ``left_foot``, ``right_foot``, the only ones accepted for now), one normal-force sensor per foot
            of a multi-legged robot (default: its foot frames).
        sole: Sole size (bipeds).
        foot_radius: Radius of the contact sphere of each point foot [m] (multi-legged robots; 0 = 1 cm).
        posture: Standing posture.
        joint_groups: Servo gains of joint groups in simulation (first matching group wins).
        leg_links: The links of the left and right legs (MuJoCo's optional leg-leg collisions).
        servo_default: Gains of the joints in no group (kp 0: the simulator's default).
        steps: Step limits and nominal timing.
    """

    name: str
    urdf: str = ""
    mjcf: str = ""
    srdf: str = ""
    aliases: tuple[str, ...] = ()
    base_frame: str = ""
    torso_frame: str = ""
    imu_frame: str = ""
    left_foot: SoleFrame = SoleFrame()
    right_foot: SoleFrame = SoleFrame()
    frames: tuple[SoleFrame, ...] = ()
    leg_frames: tuple[str, ...] = ()
    contact_sensors: tuple[str, ...] = ("left_foot", "right_foot")
    sole: SoleSize = SoleSize()
    foot_radius: float = 0.0
    posture: Posture = dataclasses.field(default_factory=Posture)
    joint_groups: tuple[JointGroup, ...] = ()
    leg_links: LegLinks = LegLinks()
    servo_default: JointGroup = JointGroup("default", (".*",), 0.0, 0.0)
    steps: StepLimits = StepLimits()
    directory: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ParameterError("name", self.name, "a non-empty string")
        for name in ("urdf", "mjcf"):
            if not isinstance(getattr(self, name), str):
                raise ParameterError(name, getattr(self, name), "a file path (a string)")
        if self.urdf and self.mjcf:
            raise ParameterError("mjcf", self.mjcf, f"no 'mjcf' next to urdf = {self.urdf!r}: one "
                                 "description, a URDF ('urdf') or an MJCF ('mjcf')")
        if not self.urdf and not self.mjcf:
            raise ParameterError("urdf", self.urdf, "a robot description: 'urdf' (a URDF file) or 'mjcf' "
                                 "(an MJCF file), absolute, next to the YAML or in example-robot-data")
        for name in ("aliases", "frames", "leg_frames", "contact_sensors", "joint_groups"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for frame in self.frames:
            if not frame.parent:
                raise ParameterError("frames.parent", frame.frame, "the parent frame of each added frame")
        if bool(self.left_foot.frame) != bool(self.right_foot.frame):
            raise ParameterError("right_foot" if self.left_foot.frame else "left_foot", "",
                                 "both sole frames, or neither")
        if self.left_foot.frame and not self.sole.given:
            raise ParameterError("sole", self.sole, "the sole size of a biped (front, back, left, right)")
        check_nonnegative("foot_radius", self.foot_radius)
        if self.left_foot.frame and self.contact_sensors != ("left_foot", "right_foot"):
            raise ParameterError("contact_sensors", self.contact_sensors,
                                 "[left_foot, right_foot] for a biped (the graph's sole sensor prefixes)")
        if self.leg_frames and self.contact_sensors == ("left_foot", "right_foot"):  # the default
            object.__setattr__(self, "contact_sensors", self.leg_frames)
        groups = [g.name for g in self.joint_groups]
        if len(set(groups)) != len(groups):
            raise ParameterError("joint_groups", groups, "distinct group names")

    @property
    def description_format(self) -> str:
        """``"urdf"`` or ``"mjcf"``: which description the robot has."""
        return "urdf" if self.urdf else "mjcf"

    @property
    def description_file(self) -> str:
        """The description file as given (:attr:`urdf` or :attr:`mjcf`)."""
        return self.urdf or self.mjcf

    def resolve(self, relative: str) -> Path:
        """Path of a description file (see :attr:`urdf`)."""
        path = Path(relative).expanduser()
        if path.is_absolute():
            return path
        if self.directory and (Path(self.directory) / path).is_file():
            return Path(self.directory) / path
        return find_robot_file(relative)

    def servo(self, joint: str) -> JointGroup | None:
        """The group giving ``joint`` its gains (:attr:`servo_default` if none matches and its kp > 0)."""
        for group in self.joint_groups:
            if group.matches(joint):
                return group
        return self.servo_default if self.servo_default.kp > 0.0 else None


def robot_directories() -> tuple[Path, ...]:
    """Directories holding robot description files, most specific first (see :data:`ROBOTS_SUBDIR`)."""
    candidates = [Path(p) for p in os.environ.get("WALK_MPC_ROBOTS_DIR", "").split(os.pathsep) if p]
    candidates.append(Path(__file__).resolve().parents[3] / "config" / "robots")
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            candidates.append(Path(prefix) / ROBOTS_SUBDIR)
    candidates.append(Path(sys.prefix) / ROBOTS_SUBDIR)
    seen, found = set(), []
    for path in candidates:
        if path.is_dir() and path.resolve() not in seen:
            seen.add(path.resolve())
            found.append(path.resolve())
    return tuple(found)


@functools.lru_cache(maxsize=8)
def _robot_files(directories: tuple[Path, ...]) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for directory in reversed(directories):  # the most specific directory wins
        for path in sorted(directory.glob("*.yaml")):
            files[path.stem] = path
    aliases: dict[str, Path] = {}
    for path in files.values():
        try:
            import yaml

            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except Exception:  # a broken file is reported when it is loaded by name
            continue
        for alias in data.get("aliases", []) if isinstance(data, dict) else []:
            aliases.setdefault(str(alias), path)
    return {**aliases, **files}


def robot_names() -> tuple[str, ...]:
    """Names (and aliases) of the robots with a description file (see :func:`robot_directories`)."""
    return tuple(sorted(_robot_files(robot_directories())))


def robot_file(name: str) -> Path:
    """The description file of robot ``name``.

    Raises:
        ConfigError: No such robot (the message lists the known ones).
    """
    files = _robot_files(robot_directories())
    if name not in files:
        raise ConfigError(f"unknown robot '{name}'; known robots: {sorted(files)} (a robot is "
                          "config/robots/<name>.yaml, or give a *.yaml or *.urdf path)", "robot")
    return files[name]


def load_robot_description(robot: str | os.PathLike) -> RobotDescription:
    """The description of robot ``robot``: a name (see :func:`robot_names`) or a YAML file path.

    Raises:
        ConfigError: Unknown name, unreadable file, unknown keys or values of the wrong type.
        ParameterError: A value out of its domain.
    """
    text = str(robot)
    path = Path(text) if text.endswith((".yaml", ".yml")) else robot_file(text)
    data = load_yaml(path)
    data.setdefault("name", path.stem)
    if "directory" in data:
        raise ConfigError("unknown key 'directory'", "directory", str(path))
    data["directory"] = str(path.resolve().parent)
    return from_mapping(RobotDescription, data, source=str(path))


#: File name endings of a bare MJCF path given as ``RobotModel.Parameters.robot``.
MJCF_SUFFIXES = (".xml", ".mjcf")


def _is_description_path(robot: str) -> bool:
    return robot.endswith((".urdf", ".yaml", ".yml") + MJCF_SUFFIXES)


def build_model(path: str | os.PathLike, description_format: str = "urdf") -> pin.Model:
    """Pinocchio model with a free-flyer root of a URDF or an MJCF file.

    An MJCF whose root body has a ``freejoint`` keeps it as the free flyer (named after it); any other
    gets one named ``root_joint`` (as a URDF). MJCF sites and bodies become frames.

    Raises:
        ModelError: No such file, an unknown format, or pinocchio cannot parse the file.
    """
    path = Path(path)
    if description_format not in ("urdf", "mjcf"):
        raise ModelError(f"unknown description format {description_format!r}; expected 'urdf' or 'mjcf'")
    if not path.is_file():
        raise ModelError(f"{description_format.upper()} file '{path}' does not exist")
    try:
        if description_format == "urdf":
            return pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
        if hasattr(pin, "buildModelFromMJCFAndRootJoint"):  # pinocchio >= 3.8: no deprecated tuple
            return pin.buildModelFromMJCFAndRootJoint(str(path), pin.JointModelFreeFlyer(), "root_joint")
        built = pin.buildModelFromMJCF(str(path), pin.JointModelFreeFlyer(), "root_joint")
        return built[0] if isinstance(built, tuple) else built
    except Exception as exc:  # pinocchio raises ValueError/RuntimeError on malformed files
        raise ModelError(f"cannot build a model from {description_format.upper()} '{path}': {exc}") from exc


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


def sole_rotation(yaw: float, roll: float, pitch: float) -> np.ndarray:
    """Rotation ``Rz(yaw) Ry(pitch) Rx(roll)`` of a sole of ``yaw`` [rad] rolled and pitched by ``roll``,
    ``pitch`` [rad] about its axes (a sole on sloped ground: :func:`~walk_mpc.core.walk.step.ground_tilt`)."""
    return pin.rpy.rpyToMatrix(roll, pitch, yaw)


def roll_pitch_of(rotation: np.ndarray) -> tuple[float, float]:
    """Roll and pitch [rad] of a rotation ``Rz(yaw) Ry(pitch) Rx(roll)`` (Z-Y-X angles; the inverse of
    :func:`sole_rotation` for pitches within +-90 degrees)."""
    roll, pitch, _ = pin.rpy.matrixToRpy(np.asarray(rotation, dtype=float))
    return float(roll), float(pitch)


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

        Non-empty fields override the robot description's (``config/robots/<name>.yaml``); for a bare
        URDF path empty fields mean "none".

        Attributes:
            robot: Robot name (see :func:`robot_names`: talos / talos_reduced, g1, romeo, solo12, go2...),
                path to a robot description ``*.yaml``, or path to a bare ``*.urdf`` or MJCF ``*.xml``.
            srdf: Path to an SRDF with named postures ('' = the description's, if any).
            base_frame: Floating-base frame name.
            left_foot_frame: Left sole frame name (bipeds).
            right_foot_frame: Right sole frame name (bipeds).
            torso_frame: Frame whose orientation the IK regulates (base frame for quadrupeds).
            leg_frames: Foot frames of a multi-legged robot (point contacts).
            reference_posture: Named SRDF posture used as the standing reference ('' = the description's,
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
                raise ParameterError("robot", self.robot, f"a robot name in {list(robot_names())} or a path")
            if not _is_description_path(self.robot) and self.robot not in robot_names():
                expected = (f"a robot name in {list(robot_names())}, a robot *.yaml, a *.urdf or an MJCF "
                            "*.xml path")
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
            ConfigError: The robot description file is unknown or malformed.
            ModelError: If the URDF/MJCF/SRDF cannot be found, read or parsed.
            FrameNotFound: If a configured frame is not in the model.
            JointNotFound: If a reference joint is not in the model.
        """
        self.params = params if params is not None else RobotModel.Parameters()
        p = self.params
        if p.robot.endswith((".urdf",) + MJCF_SUFFIXES):
            self.description: RobotDescription | None = None
            path = Path(p.robot)
            fmt = "urdf" if p.robot.endswith(".urdf") else "mjcf"
            srdf_path: Path | None = Path(p.srdf) if p.srdf else None
        else:
            self.description = load_robot_description(p.robot)
            fmt = self.description.description_format
            path = self._description_path(fmt, self.description.description_file)
            srdf = p.srdf or self.description.srdf
            srdf_path = (Path(p.srdf) if p.srdf else self._description_path("srdf", srdf)) if srdf else None
        d = self.description
        self.model: pin.Model = build_model(path, fmt)
        #: The description file and its format ("urdf" or "mjcf").
        self.description_path, self.description_format = path, fmt
        #: The URDF (None for an MJCF robot: :attr:`description_path`).
        self.urdf_path: Path | None = path if fmt == "urdf" else None
        self.name = d.name if d is not None else path.stem
        self._frame_names = [frame.name for frame in self.model.frames]
        if d is not None:
            for index, frame in enumerate(d.frames):
                self._add_sole_frame(frame, f"frames[{index}]")
            for key, foot in (("left_foot", d.left_foot), ("right_foot", d.right_foot)):
                self._add_sole_frame(foot, key)
        self.data: pin.Data = self.model.createData()

        def pick(value: str, described: str) -> str:
            return value or described

        self.base_frame = pick(p.base_frame, d.base_frame if d else "")
        if not self.base_frame:
            bodies = [
                f.name for f in self.model.frames if f.parentJoint == 1 and f.type == pin.FrameType.BODY
            ]
            self.base_frame = bodies[0] if bodies else self.model.names[1]
        self.left_foot_frame = pick(p.left_foot_frame, d.left_foot.frame if d else "")
        self.right_foot_frame = pick(p.right_foot_frame, d.right_foot.frame if d else "")
        self.torso_frame = pick(p.torso_frame, d.torso_frame if d else "") or self.base_frame
        self.imu_frame = (d.imu_frame if d else "") or self.base_frame
        self.leg_frames: tuple[str, ...] = p.leg_frames or (d.leg_frames if d else ())
        named = (("base_frame", self.base_frame), ("left_foot.frame", self.left_foot_frame),
                 ("right_foot.frame", self.right_foot_frame), ("torso_frame", self.torso_frame),
                 ("imu_frame", self.imu_frame), *(("leg_frames", f) for f in self.leg_frames))
        for key, frame in named:
            if frame and frame not in self._frame_names:
                raise FrameNotFound(frame, self._frame_names,
                                    f"{key} of '{self.name}': a frame of {self.description_path.name}")

        # Actuated joints: every joint after the free flyer, in model order.
        self.joint_names: tuple[str, ...] = tuple(self.model.names[2:])
        self._joint_idx_q = {n: self.model.joints[self.model.getJointId(n)].idx_q for n in self.joint_names}
        self._joint_idx_v = {n: self.model.joints[self.model.getJointId(n)].idx_v for n in self.joint_names}
        self._joint_nq = {n: self.model.joints[self.model.getJointId(n)].nq for n in self.joint_names}
        self._joint_nv = {n: self.model.joints[self.model.getJointId(n)].nv for n in self.joint_names}
        self._mass = float(pin.computeTotalMass(self.model))
        if d is not None:
            for group in d.joint_groups:
                if not any(group.matches(n) for n in self.joint_names):
                    raise ModelError(f"joint group '{group.name}' of '{self.name}' matches no joint "
                                     f"({list(group.joints)}); joints: {list(self.joint_names)}")

        self._reference = self._load_reference(srdf_path)

    def _description_path(self, key: str, relative: str) -> Path:
        """The file ``relative`` of the description's ``key`` (see :meth:`RobotDescription.resolve`).

        Raises:
            ModelError: No such file (says which key of which YAML, and where it was looked for).
        """
        d = self.description
        try:
            path = d.resolve(relative)
        except ModelError:
            path = None
        if path is None or not path.is_file():
            where = (f"'{path}'" if path is not None and Path(relative).expanduser().is_absolute()
                     else f"'{relative}' next to the YAML ({d.directory}) or in example-robot-data "
                          f"({[str(x) for x in robot_data_directories()]})")
            raise ModelError(f"{key} = '{relative}' of robot '{d.name}' ({d.directory}): no such file; "
                             f"expected an existing {key.upper()} file, looked for {where}")
        return path

    def _add_sole_frame(self, foot: SoleFrame, key: str = "") -> None:
        """Add ``foot``'s frame on its parent frame unless the description has it (``key``: its YAML key)."""
        if not foot.frame or self.model.existFrame(foot.frame):
            if foot.frame and foot.parent:
                raise ModelError(f"{key or 'sole'} frame '{foot.frame}' is already in '{self.name}': drop "
                                 "its parent")
            return
        source = self.description_path.name
        if not foot.parent:
            site = " (an MJCF site or body)" if self.description_format == "mjcf" else ""
            raise FrameNotFound(foot.frame, self._frame_names,
                                f"{key}.frame of '{self.name}': a frame of {source}{site}, or give "
                                f"{key}.parent to add it")
        if not self.model.existFrame(foot.parent):
            raise FrameNotFound(foot.parent, self._frame_names,
                                f"{key}.parent of '{self.name}': a frame of {source} to add "
                                f"'{foot.frame}' on")
        parent_id = self.frame_id(foot.parent)
        parent = self.model.frames[parent_id]
        local = pin.SE3(pin.rpy.rpyToMatrix(*foot.rpy), np.array(foot.position))
        self.model.addFrame(pin.Frame(foot.frame, parent.parentJoint, parent_id, parent.placement * local,
                                      pin.FrameType.OP_FRAME))
        self._frame_names.append(foot.frame)
        self.__dict__.pop("_frame_ids", None)  # frame_id's index, rebuilt with the new frame

    # ----------------------------------------------------------------- loading
    def _load_reference(self, srdf_path: Path | None) -> np.ndarray:
        p, d = self.params, self.description
        posture = p.reference_posture or (d.posture.name if d else "") or "neutral"
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
        joints = list(d.posture.joints.items()) if d else []
        for name, value in joints + list(zip(p.reference_joint_names, p.reference_joint_positions)):
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
        ids = self.__dict__.get("_frame_ids")
        if ids is None:  # name -> index, once (pinocchio's lookup compares the names one by one)
            ids = self.__dict__["_frame_ids"] = {}
            for index, frame in enumerate(self.model.frames):
                ids.setdefault(frame.name, index)  # the first of a repeated name, as getFrameId
        try:
            return ids[name]
        except (KeyError, TypeError):
            raise FrameNotFound(name, self._frame_names) from None

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

    # ----------------------------------------------------------------- description and derived values
    @property
    def sole_size(self) -> SoleSize:
        """Contact area of each sole (the description's).

        Raises:
            ModelError: The robot has no description giving a sole size.
        """
        if self.description is None or not self.description.sole.given:
            raise ModelError(f"'{self.name}' has no sole size: give 'sole' in its robot description "
                             "(config/robots/<name>.yaml) or the simulator's sole_* parameters")
        return self.description.sole

    def planner_sole(self):
        """The MPC's support region of one sole: :attr:`sole_size` shrunk by its ``planner_margin``
        (a :class:`~walk_mpc.core.mpc.preview.SoleParameters`; Talos: 0.09 / 0.09 / 0.055 / 0.055 m)."""
        from walk_mpc.core.mpc.preview import SoleParameters  # the planner's type; imports no model

        sole = self.sole_size
        margin = sole.planner_margin
        return SoleParameters(*(round(getattr(sole, name) - margin, 9)
                                for name in ("front", "back", "left", "right")))

    def standing_com_height(self, q=None) -> float:
        """CoM height [m] above the mean height of the feet at ``q`` (reference posture if None)."""
        q = self.reference_configuration() if q is None else self.check_configuration(q)
        feet = [position[2] for position, _ in self.foot_poses(q).values()]
        return float(self.com(q)[2] - (np.mean(feet) if feet else 0.0))

    def leg_length(self) -> float:
        """Longest distance [m] from a hip (the first joint of a leg) to its foot, legs straight (neutral)."""
        if not self.foot_frames:
            raise ModelError(f"'{self.name}' has no feet")
        q = self.neutral_configuration()
        pin.framesForwardKinematics(self.model, self.data, q)
        lengths = []
        for frame in self.foot_frames:
            joint = self.model.frames[self.frame_id(frame)].parentJoint
            while self.model.parents[joint] > 1:
                joint = self.model.parents[joint]
            hip = self.data.oMi[joint].translation
            lengths.append(float(np.linalg.norm(self.data.oMf[self.frame_id(frame)].translation - hip)))
        return max(lengths)

    def step_limits(self) -> StepLimits:
        """The description's step limits, the unset ones derived from :meth:`leg_length` and the standing
        sole distance: forward 0.35 l, backward 0.2 l, width from 0.7 to 2.2 times the standing one."""
        limits = self.description.steps if self.description is not None else StepLimits()
        length = self.leg_length()
        width = self.standing_sole_distance() if self.is_biped else 0.0
        derived = {"max_forward": 0.35 * length, "max_backward": 0.2 * length,
                   "min_width": 0.7 * width, "max_width": 2.2 * width}
        return dataclasses.replace(limits, **{name: round(value, 3) for name, value in derived.items()
                                              if getattr(limits, name) == 0.0})

    def standing_sole_distance(self) -> float:
        """Lateral distance [m] between the soles in the reference posture (bipeds)."""
        feet = self.foot_poses(self.reference_configuration())
        return float(abs(feet[self.left_foot_frame][0][1] - feet[self.right_foot_frame][0][1]))

    def servo_gains(self, joint: str) -> tuple[float, float, float] | None:
        """(kp [N m/rad], kd [N m s/rad], torque limit [N m], 0 = effort limit) of ``joint`` in simulation
        from the description's joint groups, or None (no group and no default: the simulator's own)."""
        group = self.servo_group(joint)
        return None if group is None else (group.kp, group.kd, group.torque_limit)

    def servo_group(self, joint: str) -> JointGroup | None:
        """The description's joint group of ``joint`` (see :meth:`RobotDescription.servo`), or None.

        Raises:
            JointNotFound: No actuated joint has this name.
        """
        self.joint_index_q(joint)
        return self.description.servo(joint) if self.description is not None else None
