"""MuJoCo models from URDFs without meshes, or from MJCF files: base joint, floor, contact geoms, actuators,
sites.

The URDF's ``<visual>``, ``<collision>`` (except on the links asked for), ``<gazebo>`` and
``<transmission>`` elements are removed (inertias stay), so no mesh or ``package://`` path is needed;
``mujoco.MjSpec.from_string`` loads the rest with static (fixed) frames fused into their parent body.
The helpers below then edit the :class:`mujoco.MjSpec` before it is compiled. Descriptions with
massless links or inertias MuJoCo refuses (Romeo's fingers, iCub's ankles) compile through MuJoCo's
compiler bounds (:data:`BOUND_MASS`, :data:`BOUND_INERTIA`, ``balanceinertia``), set only when the
description does not compile without them (they also raise massless static links that fuse into their
parent: Talos would change by 4 g).

An MJCF description (:func:`load_mjcf_spec`) is loaded as it is (meshes and other assets relative to the
file), then brought to what the URDF path gives: its actuators, sensors and keyframes are removed (the
simulator adds its own servos and IMU; a keyframe would not fit the added base joint), its geoms keep
their mass but stop colliding (only the added sole geoms and floor collide), the same compiler bounds
apply when needed. A ``freejoint`` of its root body is kept as the base joint.

Error policy: MuJoCo's errors (``ValueError`` on parse or compile) are re-raised as
:class:`~walk_mpc.core.errors.ModelError`; a missing ``mujoco`` package is a
:class:`~walk_mpc.core.errors.ConfigError`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

from walk_mpc.core.body.frames import package_directory
from walk_mpc.core.errors import ConfigError, ModelError

try:
    import mujoco
except ImportError:  # pragma: no cover - the venv has mujoco
    mujoco = None

#: URDF elements removed before loading (no meshes, no simulator-specific blocks).
STRIPPED_TAGS = ("visual", "collision", "gazebo", "transmission")

#: Smallest body mass [kg] of the compiled model (MuJoCo ``compiler.boundmass``).
BOUND_MASS = 1e-3

#: Smallest diagonal inertia [kg m^2] of the compiled model (MuJoCo ``compiler.boundinertia``).
BOUND_INERTIA = 1e-6

#: Base joints of :func:`add_base_joint`: a free joint, x/z slides (the base cannot rotate), or none.
BASE_JOINTS = ("free", "planar", "fixed")


def require_mujoco():
    """The ``mujoco`` module.

    Raises:
        ConfigError: If the ``mujoco`` package is not installed.
    """
    if mujoco is None:
        raise ConfigError("the MuJoCo backend needs the 'mujoco' package (pip install mujoco)", "backend")
    return mujoco


def strip_urdf(urdf_path: str | Path, keep_collision_links: Sequence[str] = (),
               continuous_joints: Sequence[str] = ()) -> str:
    """URDF text without visuals, collisions, gazebo and transmission blocks.

    Args:
        urdf_path: URDF file.
        keep_collision_links: Links whose ``<collision>`` elements are kept (e.g. tires).
        continuous_joints: Joints turned into ``continuous`` ones (unlimited revolute, e.g. wheels).

    Raises:
        ModelError: The file cannot be read or parsed, or a named link or joint does not exist.
    """
    try:
        root = ET.parse(str(urdf_path)).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ModelError(f"cannot read URDF '{urdf_path}': {exc}") from exc
    links = {link.get("name"): link for link in root.findall("link")}
    joints = {joint.get("name"): joint for joint in root.findall("joint")}
    for name in keep_collision_links:
        if name not in links:
            raise ModelError(f"no link '{name}' in '{urdf_path}'; links: {sorted(links)}")
    for name in continuous_joints:
        if name not in joints:
            raise ModelError(f"no joint '{name}' in '{urdf_path}'; joints: {sorted(joints)}")
    for parent in list(root.iter()):
        keep = parent.tag == "link" and parent.get("name") in keep_collision_links
        for child in list(parent):
            if child.tag in STRIPPED_TAGS and not (keep and child.tag == "collision"):
                parent.remove(child)
    for name in continuous_joints:
        joint = joints[name]
        joint.set("type", "continuous")
        limit = joint.find("limit")
        if limit is not None:
            for key in ("lower", "upper"):
                limit.attrib.pop(key, None)
    return ET.tostring(root, encoding="unicode")


def resolve_mesh_path(filename: str, urdf_path: str | Path) -> Path:
    """The file of a URDF mesh ``filename``: ``package://<pkg>/<rest>`` under the package's directory
    (:func:`~walk_mpc.core.body.frames.package_directory`: example-robot-data, then the ament prefixes);
    ``file://`` URIs and absolute paths as they are; a relative path relative to the URDF's directory.

    Raises:
        ModelError: No such file.
    """
    if filename.startswith("package://"):
        package, _, rest = filename[len("package://"):].partition("/")
        directory = package_directory(package)
        path = None if directory is None else directory / rest
    elif filename.startswith("file://"):
        path = Path(unquote(urlparse(filename).path))
    else:
        path = Path(filename)
        path = path if path.is_absolute() else Path(urdf_path).resolve().parent / path
    if path is None or not path.is_file():
        raise ModelError(f"cannot find mesh '{filename}' of '{urdf_path}'"
                         + ("" if path is None else f" (looked at '{path}')"))
    return path


def urdf_collisions(urdf_path: str | Path, link_patterns: Sequence[str]) -> list[dict]:
    """The ``<collision>`` elements of the URDF's links whose whole name matches one of ``link_patterns``
    (regular expressions), in file order: dicts with ``link``, ``xyz`` (3,) [m], ``rpy`` (3,) [rad],
    ``type`` ("mesh", "box", "cylinder", "sphere") and ``file`` (resolved, :func:`resolve_mesh_path`) and
    ``scale`` (3,) of a mesh, ``size`` of a box (full extents [m]), ``radius`` / ``length`` [m] of the others.

    Raises:
        ModelError: The URDF cannot be read, a mesh cannot be found or a geometry is unknown.
    """
    try:
        root = ET.parse(str(urdf_path)).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ModelError(f"cannot read URDF '{urdf_path}': {exc}") from exc

    def floats(text, default):
        return np.array([float(v) for v in text.split()]) if text else np.array(default, dtype=float)

    found = []
    for link in root.findall("link"):
        name = link.get("name")
        if not any(re.fullmatch(pattern, name) for pattern in link_patterns):
            continue
        for collision in link.findall("collision"):
            origin = collision.find("origin")
            geometry = collision.find("geometry")
            shape = geometry[0] if geometry is not None and len(geometry) else None
            if shape is None:
                raise ModelError(f"collision of link '{name}' of '{urdf_path}' has no geometry")
            item = {"link": name, "type": shape.tag,
                    "xyz": floats(origin.get("xyz") if origin is not None else "", [0.0, 0.0, 0.0]),
                    "rpy": floats(origin.get("rpy") if origin is not None else "", [0.0, 0.0, 0.0])}
            if shape.tag == "mesh":
                item["file"] = resolve_mesh_path(shape.get("filename", ""), urdf_path)
                item["scale"] = floats(shape.get("scale"), [1.0, 1.0, 1.0])
            elif shape.tag == "box":
                item["size"] = floats(shape.get("size"), [0.0, 0.0, 0.0])
            elif shape.tag in ("cylinder", "sphere"):
                item["radius"] = float(shape.get("radius", 0.0))
                item["length"] = float(shape.get("length", 0.0))
            else:
                raise ModelError(f"unknown collision geometry <{shape.tag}> of link '{name}' of "
                                 f"'{urdf_path}'")
            found.append(item)
    return found


def add_collision_geom(spec, body_name: str, name: str, collision: dict, pos: Sequence[float],
                       quat_wxyz: Sequence[float], contype: int, conaffinity: int) -> None:
    """A massless geom in body ``body_name`` of a :func:`urdf_collisions` entry (a mesh: MuJoCo collides
    its convex hull), placed at ``pos`` / ``quat_wxyz`` in the body, with collision bits ``contype`` and
    ``conaffinity``."""
    mj = require_mujoco()
    kind = collision["type"]
    geom = body(spec, body_name).add_geom(name=name, pos=list(pos), quat=list(quat_wxyz), mass=0.0,
                                          contype=int(contype), conaffinity=int(conaffinity))
    if kind == "mesh":
        mesh = spec.add_mesh(name=f"{name}_mesh", file=str(collision["file"]),
                             scale=[float(v) for v in collision["scale"]])
        geom.type, geom.meshname = mj.mjtGeom.mjGEOM_MESH, mesh.name
    elif kind == "box":
        geom.type, geom.size = mj.mjtGeom.mjGEOM_BOX, [float(v) / 2 for v in collision["size"]]
    elif kind == "cylinder":
        geom.type = mj.mjtGeom.mjGEOM_CYLINDER
        geom.size = [collision["radius"], collision["length"] / 2, 0.0]
    else:
        geom.type, geom.size = mj.mjtGeom.mjGEOM_SPHERE, [collision["radius"], 0.0, 0.0]


#: When :func:`load_urdf_spec` sets the compiler bounds.
BOUNDS = ("when_needed", "always", "never")


def load_urdf_spec(urdf_path: str | Path, keep_collision_links: Sequence[str] = (),
                   continuous_joints: Sequence[str] = (), bounds: str = "when_needed",
                   bound_mass: float = BOUND_MASS, bound_inertia: float = BOUND_INERTIA):
    """A :class:`mujoco.MjSpec` of the stripped URDF (see :func:`strip_urdf`), static frames fused.

    With ``bounds`` "always", or "when_needed" (default) and a description MuJoCo refuses as it is
    (massless links, inertias violating the triangle inequality), bodies lighter than ``bound_mass``
    [kg] or with diagonal inertias below ``bound_inertia`` [kg m^2] are raised to them and inertias
    are balanced (MuJoCo ``boundmass``, ``boundinertia``, ``balanceinertia``).

    Raises:
        ModelError: The URDF cannot be stripped or loaded.
        ConfigError: ``mujoco`` is not installed.
    """
    mj = require_mujoco()
    if bounds not in BOUNDS:
        raise ModelError(f"unknown bounds {bounds!r}; expected one of {list(BOUNDS)}")
    text = strip_urdf(urdf_path, keep_collision_links, continuous_joints)

    def load():
        try:
            spec = mj.MjSpec.from_string(text)
        except ValueError as exc:
            raise ModelError(f"MuJoCo cannot load '{urdf_path}': {exc}") from exc
        spec.compiler.fusestatic = True
        spec.compiler.discardvisual = True
        return spec

    return _bounded(load, bounds, bound_mass, bound_inertia)


def _bounded(load, bounds: str, bound_mass: float, bound_inertia: float):
    """``load()``'s spec with the compiler's mass and inertia bounds set as ``bounds`` says ("when_needed":
    only if a fresh ``load()`` does not compile as it is)."""
    spec = load()
    bound = bounds == "always"
    if bounds == "when_needed":
        try:
            load().compile()
        except ValueError:
            bound = True
    if bound:
        spec.compiler.boundmass = float(bound_mass)
        spec.compiler.boundinertia = float(bound_inertia)
        spec.compiler.balanceinertia = True
    return spec


def load_mjcf_spec(mjcf_path: str | Path, bounds: str = "when_needed", bound_mass: float = BOUND_MASS,
                   bound_inertia: float = BOUND_INERTIA, reserved_names: Sequence[str] = ()):
    """A :class:`mujoco.MjSpec` of an MJCF file prepared like :func:`load_urdf_spec`'s (see the module doc).

    Args:
        mjcf_path: MJCF file.
        bounds: When to set the compiler bounds (see :func:`load_urdf_spec`).
        bound_mass: Smallest body mass [kg] with the bounds.
        bound_inertia: Smallest diagonal inertia [kg m^2] with the bounds.
        reserved_names: Site and geom names the simulator adds (``imu``, ``floor``...): the description's
            sites and geoms of these names are renamed ``mjcf_<name>``.

    Raises:
        ModelError: The file cannot be read, parsed or compiled as it is, or ``bounds`` is unknown.
        ConfigError: ``mujoco`` is not installed.
    """
    mj = require_mujoco()
    if bounds not in BOUNDS:
        raise ModelError(f"unknown bounds {bounds!r}; expected one of {list(BOUNDS)}")
    path = Path(mjcf_path)
    if not path.is_file():
        raise ModelError(f"MJCF file '{path}' does not exist")

    def load():
        try:
            spec = mj.MjSpec.from_file(str(path))
        except ValueError as exc:
            raise ModelError(f"MuJoCo cannot load MJCF '{path}': {exc}") from exc
        for collection in (spec.actuators, spec.sensors, spec.keys):
            for element in list(collection):
                spec.delete(element)
        for geom in spec.geoms:
            geom.contype, geom.conaffinity = 0, 0
        for element in (*spec.sites, *spec.geoms):
            if element.name in reserved_names:
                element.name = f"mjcf_{element.name}"
        return spec

    return _bounded(load, bounds, bound_mass, bound_inertia)


def has_free_joint(spec) -> bool:
    """Whether the root body (:func:`root_body`) already has a free joint (an MJCF ``freejoint``)."""
    mj = require_mujoco()
    return any(joint.type == mj.mjtJoint.mjJNT_FREE for joint in root_body(spec).joints)


def body(spec, name: str):
    """The body ``name`` of ``spec``.

    Raises:
        ModelError: No such body (lists the bodies).
    """
    found = spec.body(name)
    if found is None:
        raise ModelError(f"no body '{name}' in the MuJoCo model; bodies: {[b.name for b in spec.bodies]}")
    return found


def root_body(spec):
    """The first body under the world (the URDF's root link)."""
    children = [b for b in spec.bodies if b.name != "world" and b.parent.name == "world"]
    if not children:
        raise ModelError("the MuJoCo model has no body under the world")
    return children[0]


def add_base_joint(spec, kind: str = "free", damping: float = 0.0) -> str:
    """Give the root body a base joint; returns the root body's name.

    Args:
        spec: Model being built.
        kind: ``"free"`` (six DoF), ``"planar"`` (slides along world x and z: the base translates
            in the sagittal plane without rotating) or ``"fixed"`` (welded to the world).
        damping: Viscous damping of the planar slides [N s/m].
    """
    mj = require_mujoco()
    root = root_body(spec)
    if kind == "free":
        root.add_freejoint(name="base_free")
    elif kind == "planar":
        for axis, name in (((1.0, 0.0, 0.0), "base_x"), ((0.0, 0.0, 1.0), "base_z")):
            joint = root.add_joint(name=name, type=mj.mjtJoint.mjJNT_SLIDE, axis=axis)
            joint.damping = [damping, 0.0, 0.0] if np.ndim(joint.damping) else damping
    elif kind != "fixed":
        raise ModelError(f"unknown base joint {kind!r}; expected one of {list(BASE_JOINTS)}")
    return root.name


def add_floor(spec, friction: float = 1.0, name: str = "floor",
              solref: Sequence[float] = (0.02, 1.0)) -> None:
    """An infinite ground plane at z = 0 with sliding friction ``friction`` and contact ``solref``
    (time constant [s], damping ratio)."""
    mj = require_mujoco()
    spec.worldbody.add_geom(name=name, type=mj.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 1.0],
                            friction=[friction, 0.005, 0.0001], solref=list(solref))


def add_box(spec, body_name: str, name: str, centre: Sequence[float], half_size: Sequence[float],
            quat_wxyz: Sequence[float] = (1.0, 0.0, 0.0, 0.0), friction: float = 1.0,
            solref: Sequence[float] = (0.02, 1.0)) -> None:
    """A massless collision box in body ``body_name`` (centre and orientation in the body frame), with
    contact ``solref`` (time constant [s], damping ratio)."""
    mj = require_mujoco()
    body(spec, body_name).add_geom(name=name, type=mj.mjtGeom.mjGEOM_BOX, pos=list(centre),
                                   quat=list(quat_wxyz), size=list(half_size), mass=0.0,
                                   friction=[friction, 0.005, 0.0001], solref=list(solref))


def add_sphere(spec, body_name: str, name: str, centre: Sequence[float], radius: float,
               friction: float = 1.0, solref: Sequence[float] = (0.02, 1.0)) -> None:
    """A massless collision sphere of ``radius`` [m] in body ``body_name`` (point feet), with contact
    ``solref`` (time constant [s], damping ratio)."""
    mj = require_mujoco()
    body(spec, body_name).add_geom(name=name, type=mj.mjtGeom.mjGEOM_SPHERE, pos=list(centre),
                                   size=[radius, 0.0, 0.0], mass=0.0, friction=[friction, 0.005, 0.0001],
                                   solref=list(solref))


def add_site(spec, body_name: str, name: str, position: Sequence[float],
             quat_wxyz: Sequence[float] = (1.0, 0.0, 0.0, 0.0)) -> None:
    """A site (frame) in body ``body_name``."""
    body(spec, body_name).add_site(name=name, pos=list(position), quat=list(quat_wxyz))


def add_position_actuator(spec, joint: str, kp: float, kd: float, force_limit: float | None = None) -> None:
    """A position servo on ``joint``: torque ``kp (target - q) - kd q'`` [N m], clipped to ``force_limit``."""
    mj = require_mujoco()
    actuator = spec.add_actuator(name=joint, target=joint, trntype=mj.mjtTrn.mjTRN_JOINT)
    actuator.set_to_position(kp=kp, kv=kd)
    _limit(actuator, force_limit)


def add_velocity_actuator(spec, joint: str, kd: float, force_limit: float | None = None) -> None:
    """A velocity servo on ``joint``: torque ``kd (target - q')`` [N m], clipped to ``force_limit``."""
    mj = require_mujoco()
    actuator = spec.add_actuator(name=joint, target=joint, trntype=mj.mjtTrn.mjTRN_JOINT)
    actuator.set_to_velocity(kv=kd)
    _limit(actuator, force_limit)


def _limit(actuator, force_limit: float | None) -> None:
    if force_limit is not None and force_limit > 0.0:
        actuator.forcelimited = True
        actuator.forcerange = [-force_limit, force_limit]


def compile_spec(spec):
    """The compiled :class:`mujoco.MjModel` of ``spec``.

    Raises:
        ModelError: MuJoCo refuses the model.
    """
    try:
        return spec.compile()
    except ValueError as exc:
        raise ModelError(f"MuJoCo cannot compile the model: {exc}") from exc


__all__ = [
    "BASE_JOINTS",
    "BOUND_INERTIA",
    "BOUND_MASS",
    "BOUNDS",
    "STRIPPED_TAGS",
    "add_base_joint",
    "add_box",
    "add_collision_geom",
    "add_floor",
    "add_position_actuator",
    "add_site",
    "add_sphere",
    "add_velocity_actuator",
    "body",
    "compile_spec",
    "has_free_joint",
    "load_mjcf_spec",
    "load_urdf_spec",
    "require_mujoco",
    "resolve_mesh_path",
    "root_body",
    "strip_urdf",
    "urdf_collisions",
]
