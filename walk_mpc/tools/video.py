"""A video of a walk: the measured robot rendered offscreen by MuJoCo, the camera following it, the planned
footsteps drawn on the floor, written to MP4 with imageio-ffmpeg's bundled encoder.

The robot is drawn from what the robot measures (a :class:`~walk_mpc.core.sensors.SensorSample`: base pose
and joint positions), through the same kinematics as the TF tree
(:class:`~walk_mpc.core.body.frames.RobotFrames`), with the URDF's visual meshes: the same picture whether
the samples come from the MuJoCo backend or the kinematic plant, in process or from a recording (the
simulator's own model carries no meshes). No ROS is needed.

* In a loop: ``video = WalkVideo("walk.mp4", frames)``, then ``video.observe(sample)`` at every sample
  (a frame is rendered whenever the sample time reaches the next frame time, ``fps`` per second of sample
  time), ``video.set_footsteps(poses)`` when the plan changes, ``video.close()``.
* After a recorded walk: ``write_walk_video("walk.mcap", "walk.mp4")`` renders the ``/sensor_state``
  samples from 1 s before the first walking ``/walk/plan`` on, the footsteps of the latest walking plan drawn.

Offscreen rendering needs an OpenGL backend: ``MUJOCO_GL=egl`` (set here when unset; works headless) or
``osmesa``.

    python -m walk_mpc.tools.video walk.mcap walk.mp4 [--robot talos_reduced] [--fps 25]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable, Optional, Sequence
from urllib.parse import unquote, urlparse

import numpy as np

from walk_mpc.core.body.frames import RobotFrames
from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.errors import ConfigError, InputError, ParameterError
from walk_mpc.core.params import check_int_range, check_positive, check_range
from walk_mpc.core.sensors import SensorSample
from walk_mpc.core.walk.timeline import FootPose

#: Colour of links whose URDF gives none (r, g, b, a).
DEFAULT_RGBA = (0.7, 0.7, 0.72, 1.0)


@dataclasses.dataclass(frozen=True)
class Visual:
    """One visual element of a URDF link.

    Attributes:
        link: Link name.
        origin: Pose of the element in the link frame, 4x4.
        kind: ``"mesh"``, ``"box"``, ``"cylinder"`` or ``"sphere"``.
        size: Mesh scale (3), box half sizes (3), cylinder (radius, half length), sphere (radius,) [m].
        rgba: Colour.
        mesh_file: Mesh file (``kind == "mesh"``).
    """

    link: str
    origin: np.ndarray
    kind: str
    size: tuple[float, ...]
    rgba: tuple[float, ...]
    mesh_file: Optional[Path] = None


def _floats(text: Optional[str], default: Sequence[float]) -> list[float]:
    return [float(v) for v in text.split()] if text else list(default)


def _origin(element: Optional[ET.Element]) -> np.ndarray:
    out = np.eye(4)
    if element is None:
        return out
    x, y, z = _floats(element.get("xyz"), (0.0, 0.0, 0.0))
    roll, pitch, yaw = _floats(element.get("rpy"), (0.0, 0.0, 0.0))
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    out[:3, :3] = [[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                   [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                   [-sp, cp * sr, cp * cr]]
    out[:3, 3] = (x, y, z)
    return out


def _mesh_path(uri: str, urdf_directory: Path) -> Optional[Path]:
    if uri.startswith("file://"):
        path = Path(unquote(urlparse(uri).path))
    elif "://" in uri:
        return None  # package:// not resolved (see RobotFrames.description), http://...
    else:
        path = urdf_directory / uri
    return path if path.is_file() else None


def urdf_visuals(urdf: str, urdf_directory: Path) -> tuple[list[Visual], list[str]]:
    """The visual elements of a URDF text, and the mesh URIs that cannot be read (skipped).

    Mesh URIs: ``file://`` paths and paths relative to ``urdf_directory`` (``package://`` URIs must be
    resolved before, e.g. by :meth:`RobotFrames.description`).
    """
    root = ET.fromstring(urdf)
    colours = {}
    for material in root.iter("material"):
        colour = material.find("color")
        if material.get("name") and colour is not None:
            colours[material.get("name")] = tuple(_floats(colour.get("rgba"), DEFAULT_RGBA))
    visuals, missing = [], []
    for link in root.findall("link"):
        for visual in link.findall("visual"):
            geometry = visual.find("geometry")
            if geometry is None or not len(geometry):
                continue
            shape = geometry[0]
            rgba = DEFAULT_RGBA
            material = visual.find("material")
            if material is not None:
                colour = material.find("color")
                rgba = (tuple(_floats(colour.get("rgba"), DEFAULT_RGBA)) if colour is not None
                        else colours.get(material.get("name"), DEFAULT_RGBA))
            origin = _origin(visual.find("origin"))
            name = link.get("name")
            if shape.tag == "mesh":
                path = _mesh_path(shape.get("filename", ""), urdf_directory)
                if path is None or path.suffix.lower() not in (".stl", ".obj", ".msh"):
                    missing.append(shape.get("filename", ""))
                    continue
                scale = tuple(_floats(shape.get("scale"), (1.0, 1.0, 1.0)))
                visuals.append(Visual(name, origin, "mesh", scale, rgba, path))
            elif shape.tag == "box":
                visuals.append(Visual(name, origin, "box",
                                      tuple(0.5 * v for v in _floats(shape.get("size"), (0.1,) * 3)), rgba))
            elif shape.tag == "cylinder":
                size = (float(shape.get("radius", 0.05)), 0.5 * float(shape.get("length", 0.1)))
                visuals.append(Visual(name, origin, "cylinder", size, rgba))
            elif shape.tag == "sphere":
                visuals.append(Visual(name, origin, "sphere", (float(shape.get("radius", 0.05)),), rgba))
    return visuals, missing


@dataclasses.dataclass(frozen=True)
class VideoParameters:
    """Picture, camera and footstep drawing of a walk video.

    Attributes:
        width: Frame width [px] (a multiple of 16 for the encoder).
        height: Frame height [px] (a multiple of 16).
        fps: Frames per second of sample time.
        camera_distance: Camera distance to the followed point [m].
        camera_azimuth: Camera azimuth [deg] (0: looking along +x; 90: along +y).
        camera_elevation: Camera elevation [deg] (negative: looking down).
        camera_height: Height of the followed point above the base's ground projection [m].
        camera_time_constant: The followed point trails the base with this low-pass time constant [s]
            (0 = rigidly attached).
        sole_front: Footstep drawing, from the sole frame towards the toes [m].
        sole_back: Towards the heel [m].
        sole_left: Towards the foot's left [m].
        sole_right: Towards the foot's right [m].
        footstep_rgba: Colour of the planned footsteps.
        quality: Encoder quality, 0 (worst) to 10 (best).
        shadows: Cast shadows (several times the rendering time with a software OpenGL).
        multisamples: Anti-aliasing samples per pixel (0 = none; 4 costs 3x the rendering time with a
            software OpenGL, e.g. EGL on llvmpipe).
    """

    width: int = 640
    height: int = 480
    fps: float = 25.0
    camera_distance: float = 3.0
    camera_azimuth: float = 150.0
    camera_elevation: float = -20.0
    camera_height: float = 0.6
    camera_time_constant: float = 0.3
    sole_front: float = 0.1
    sole_back: float = 0.1
    sole_left: float = 0.065
    sole_right: float = 0.065
    footstep_rgba: tuple[float, ...] = (1.0, 0.55, 0.0, 0.8)
    quality: int = 7
    shadows: bool = False
    multisamples: int = 0

    def __post_init__(self) -> None:
        for name in ("width", "height"):
            check_int_range(name, getattr(self, name), 16, 4096)
            if getattr(self, name) % 16:
                raise ParameterError(name, getattr(self, name), "a multiple of 16 pixels")
        check_range("fps", self.fps, 1.0, 240.0)
        check_positive("camera_distance", self.camera_distance)
        check_range("camera_elevation", self.camera_elevation, -90.0, 90.0)
        for name in ("camera_azimuth", "camera_height", "camera_time_constant"):
            if not math.isfinite(getattr(self, name)) or (name == "camera_time_constant"
                                                          and getattr(self, name) < 0.0):
                raise ParameterError(name, getattr(self, name), "a finite number (>= 0 for a time)")
        for name in ("sole_front", "sole_back", "sole_left", "sole_right"):
            check_positive(name, getattr(self, name))
        object.__setattr__(self, "footstep_rgba", tuple(float(v) for v in self.footstep_rgba))
        if len(self.footstep_rgba) != 4 or not all(0.0 <= v <= 1.0 for v in self.footstep_rgba):
            raise ParameterError("footstep_rgba", self.footstep_rgba, "4 values in [0, 1]")
        check_int_range("quality", self.quality, 0, 10)
        check_int_range("multisamples", self.multisamples, 0, 16)


def _gl_context(width: int, height: int):
    """A current OpenGL context for offscreen rendering, on the backend ``MUJOCO_GL`` names (``egl`` when
    unset: headless), whatever backend ``mujoco`` chose when it was imported.

    Raises:
        ConfigError: The backend cannot make a context.
    """
    backend = os.environ.get("MUJOCO_GL", "").lower() or "egl"
    try:
        if backend == "egl":
            from mujoco.egl import GLContext
        elif backend == "osmesa":
            from mujoco.osmesa import GLContext
        else:
            from mujoco.gl_context import GLContext
        context = GLContext(width, height)
        context.make_current()
    except Exception as exc:
        raise ConfigError(f"cannot render offscreen with MUJOCO_GL={backend}: {exc} (headless: MUJOCO_GL=egl "
                          "or osmesa)", "video") from None
    return context


def _matrix_of_quaternion(wxyz: np.ndarray) -> np.ndarray:
    w, x, y, z = wxyz
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


class WalkVideo:
    """Renders the measured robot at ``fps`` frames per second of sample time into an MP4 file.

    Args:
        path: Output file (``.mp4``).
        frames: The robot's kinematics and URDF (its visuals are drawn).
        params: Picture and camera.

    Raises:
        ConfigError: MuJoCo or imageio-ffmpeg is missing, or no OpenGL context can be made.
    """

    def __init__(self, path: os.PathLike, frames: RobotFrames,
                 params: Optional[VideoParameters] = None) -> None:
        os.environ.setdefault("MUJOCO_GL", "egl")  # headless, for a first import of mujoco here
        try:
            import imageio_ffmpeg
            import mujoco
        except ImportError as exc:
            raise ConfigError(f"the walk video needs mujoco and imageio-ffmpeg ({exc})", "video") from None
        self._mujoco = mujoco
        self.params = params or VideoParameters()
        self.path = Path(path)
        self.frames = frames
        self.visuals, self.missing_meshes = urdf_visuals(frames.description(),
                                                         Path(frames.robot.urdf_path).parent)
        self._model = self._build_model()
        self._data = mujoco.MjData(self._model)
        mujoco.mj_forward(self._model, self._data)
        p = self.params
        self._gl = _gl_context(p.width, p.height)
        try:
            self._context = mujoco.MjrContext(self._model, mujoco.mjtFontScale.mjFONTSCALE_100)
            mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._context)
        except Exception:
            self._gl.free()
            raise
        self._scene = mujoco.MjvScene(self._model, maxgeom=4000)
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(p.shadows)
        self._scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        self._option = mujoco.MjvOption()
        self._perturbation = mujoco.MjvPerturb()
        self._viewport = mujoco.MjrRect(0, 0, p.width, p.height)
        self._pixels = np.empty((p.height, p.width, 3), dtype=np.uint8)
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        self._camera.distance = p.camera_distance
        self._camera.azimuth = p.camera_azimuth
        self._camera.elevation = p.camera_elevation
        self._follow: Optional[np.ndarray] = None
        self._footsteps: list[FootPose] = []
        self._t0: Optional[float] = None
        self._last_time: Optional[float] = None
        self.frame_count = 0
        self._writer = imageio_ffmpeg.write_frames(str(self.path), (p.width, p.height), fps=p.fps,
                                                   quality=p.quality, macro_block_size=16,
                                                   ffmpeg_log_level="error")
        self._writer.send(None)
        self._closed = False

    def _build_model(self):
        """A MuJoCo model holding the floor, the lights and the robot's meshes (as assets only: the robot is
        drawn into the scene at each frame from the measured link poses)."""
        mujoco = self._mujoco
        spec = mujoco.MjSpec()
        spec.visual.global_.offwidth = max(self.params.width, 640)
        spec.visual.global_.offheight = max(self.params.height, 480)
        spec.visual.headlight.ambient = [0.35, 0.35, 0.35]
        spec.visual.quality.offsamples = self.params.multisamples
        try:
            texture = spec.add_texture(name="grid", type=mujoco.mjtTexture.mjTEXTURE_2D,
                                       builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, width=256, height=256,
                                       rgb1=[0.85, 0.85, 0.85], rgb2=[0.7, 0.72, 0.75])
            material = spec.add_material(name="grid", texrepeat=[10, 10], reflectance=0.05)
            material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = texture.name
            floor = {"material": "grid"}
            spec.add_texture(name="sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
                             builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT, width=64, height=64,
                             rgb1=[0.6, 0.75, 0.92], rgb2=[1.0, 1.0, 1.0])
        except (AttributeError, TypeError):  # an older MjSpec API: a plain floor
            floor = {"rgba": [0.8, 0.8, 0.8, 1.0]}
        spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 0.05], **floor)
        spec.worldbody.add_light(pos=[0.0, 0.0, 4.0], dir=[0.0, 0.0, -1.0], castshadow=True,
                                 type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, diffuse=[0.6, 0.6, 0.6])
        self._mesh_ids: dict = {}
        for visual in self.visuals:
            if visual.kind == "mesh":
                key = (str(visual.mesh_file), visual.size)
                if key not in self._mesh_ids:
                    self._mesh_ids[key] = len(self._mesh_ids)
                    spec.add_mesh(name=f"mesh{self._mesh_ids[key]}", file=str(visual.mesh_file),
                                  scale=list(visual.size))
        model = spec.compile()
        # MuJoCo stores mesh vertices in the mesh's inertial frame: v_file = mesh_pos + R(mesh_quat) v.
        self._mesh_offsets = []
        for k in range(model.nmesh):
            offset = np.eye(4)
            offset[:3, :3] = _matrix_of_quaternion(model.mesh_quat[k])
            offset[:3, 3] = model.mesh_pos[k]
            self._mesh_offsets.append(offset)
        return model

    # ------------------------------------------------------------------ inputs
    def set_footsteps(self, footsteps: Iterable[FootPose]) -> None:
        """The footsteps drawn from now on (sole poses in the world: position [m], yaw [rad])."""
        steps = list(footsteps)
        for i, step in enumerate(steps):
            if not isinstance(step, FootPose):
                raise InputError(f"footsteps[{i}]", step, "a FootPose")
        self._footsteps = steps

    def observe(self, sample: SensorSample) -> int:
        """Take a sample; render the frames whose time it reached (none, one, or several after a gap).

        Returns:
            The number of frames rendered.

        Raises:
            InputError: The sample is not finite, or its time goes backwards.
        """
        if self._closed:
            raise InputError("sample", "after close()", "samples before the video is closed")
        t = float(sample.time)
        if self._last_time is not None and t < self._last_time:
            raise InputError("sample.time", t, f">= the previous sample time {self._last_time}")
        q = self.frames.configuration(sample)
        if self._t0 is None:
            self._t0 = t
        base = q[0:3]
        if self._follow is None:
            self._follow = base.copy()
        elif self.params.camera_time_constant > 0.0:
            alpha = 1.0 - math.exp(-(t - self._last_time) / self.params.camera_time_constant)
            self._follow += alpha * (base - self._follow)
        else:
            self._follow = base.copy()
        self._last_time = t
        rendered = 0
        while t + 1e-9 >= self._t0 + self.frame_count / self.params.fps:
            self._render(q)
            rendered += 1
        return rendered

    @property
    def duration(self) -> float:
        """Duration of the frames written so far [s]."""
        return self.frame_count / self.params.fps

    # ------------------------------------------------------------------ drawing
    def _render(self, q: np.ndarray) -> None:
        mujoco = self._mujoco
        self._camera.lookat[:] = (self._follow[0], self._follow[1], self.params.camera_height)
        scene = self._scene
        mujoco.mjv_updateScene(self._model, self._data, self._option, self._perturbation, self._camera,
                               mujoco.mjtCatBit.mjCAT_ALL, scene)
        poses = self.frames.link_poses(q)
        for visual in self.visuals:
            position, rotation = poses[visual.link]
            link = np.eye(4)
            link[:3, :3], link[:3, 3] = rotation, position
            pose = link @ visual.origin
            if visual.kind == "mesh":
                mesh = self._mesh_ids[(str(visual.mesh_file), visual.size)]
                pose = pose @ self._mesh_offsets[mesh]
                self._add_geom(scene, mujoco.mjtGeom.mjGEOM_MESH, np.zeros(3), pose, visual.rgba, mesh)
            else:
                kind = {"box": mujoco.mjtGeom.mjGEOM_BOX, "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
                        "sphere": mujoco.mjtGeom.mjGEOM_SPHERE}[visual.kind]
                size = np.zeros(3)
                size[:len(visual.size)] = visual.size
                self._add_geom(scene, kind, size, pose, visual.rgba)
        p = self.params
        half = np.array([(p.sole_front + p.sole_back) / 2, (p.sole_left + p.sole_right) / 2, 0.002])
        centre = np.array([(p.sole_front - p.sole_back) / 2, (p.sole_left - p.sole_right) / 2, 0.002])
        for step in self._footsteps:
            c, s = math.cos(step.yaw), math.sin(step.yaw)
            pose = np.eye(4)
            pose[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
            pose[:3, 3] = np.asarray(step.position, dtype=float) + pose[:3, :3] @ centre
            self._add_geom(scene, mujoco.mjtGeom.mjGEOM_BOX, half, pose, p.footstep_rgba)
        self._gl.make_current()
        mujoco.mjr_render(self._viewport, scene, self._context)
        mujoco.mjr_readPixels(self._pixels, None, self._viewport, self._context)
        self._writer.send(np.ascontiguousarray(self._pixels[::-1]))  # OpenGL rows go bottom up
        self.frame_count += 1

    def _add_geom(self, scene, kind, size, pose, rgba, mesh: int = -1) -> None:
        if scene.ngeom >= scene.maxgeom:
            return
        geom = scene.geoms[scene.ngeom]
        self._mujoco.mjv_initGeom(geom, kind, np.asarray(size, dtype=float), pose[:3, 3].copy(),
                                  pose[:3, :3].reshape(-1).copy(), np.asarray(rgba, dtype=np.float32))
        if mesh >= 0:
            geom.dataid = 2 * mesh  # the mesh itself (2 * id + 1: its convex hull)
        scene.ngeom += 1

    def close(self) -> Path:
        """Finish the file (idempotent); returns its path."""
        if not self._closed:
            self._closed = True
            self._writer.close()
            self._context.free()
            self._gl.free()
        return self.path

    def __enter__(self) -> WalkVideo:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------- from a recording
def _sample_of(msg) -> SensorSample:
    """A SensorSample of a SensorState decoded by the mcap reader (positions and base pose)."""
    names = tuple(msg.joint_names)
    p, o = msg.base_pose.position, msg.base_pose.orientation
    return SensorSample(time=msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec, joint_names=names,
                        joint_pos=np.asarray(msg.joint_pos, dtype=float), joint_vel=np.zeros(len(names)),
                        motor_names=(), motor_pos=(), motor_vel=(), motor_torque=(),
                        base_estimate_valid=bool(msg.base_estimate_valid), base_position=(p.x, p.y, p.z),
                        base_orientation_xyzw=(o.x, o.y, o.z, o.w))


def plan_footsteps(plan) -> list[FootPose]:
    """Sole poses of a FootstepPlan message: the two starting soles, then every step."""
    def pose(point, yaw):
        return FootPose((float(point.x), float(point.y), float(point.z)), float(yaw))

    return ([pose(plan.left_start_position, plan.left_start_yaw),
             pose(plan.right_start_position, plan.right_start_yaw)]
            + [pose(step.position, step.yaw) for step in plan.steps])


@dataclasses.dataclass(frozen=True)
class VideoSummary:
    """What :func:`write_walk_video` wrote.

    Attributes:
        path: The video file.
        frames: Frames written.
        duration: Video duration [s] (frames / fps).
        start_time: Sample time of the first frame [s] (sensor stamp).
        samples: Samples rendered or skipped between frames.
        missing_meshes: Mesh URIs of the URDF that could not be read (not drawn).
    """

    path: Path
    frames: int
    duration: float
    start_time: float
    samples: int
    missing_meshes: tuple[str, ...]


def walk_start_time(recording: os.PathLike, plan_topic: str = "/walk/plan") -> Optional[float]:
    """Log time [s] of the first walking plan of a recording (the recorder's clock: its receive time), None
    if it has none. The log time, not the plan's stamp: a simulator slower than real time stamps its samples
    behind the wall clock the plans are stamped on."""
    from walk_mpc.tools.recorder import decoded_messages

    for message in decoded_messages(recording, topics=[plan_topic]):
        if message.msg.walking:
            return message.log_time_ns * 1e-9
    return None


def write_walk_video(recording: os.PathLike, path: os.PathLike, robot: Optional[RobotModel.Parameters] = None,
                     params: Optional[VideoParameters] = None, sensor_topic: str = "/sensor_state",
                     plan_topic: str = "/walk/plan", from_walk_start: bool = True,
                     lead_time: float = 1.0) -> VideoSummary:
    """Render the samples of a recording (MCAP, ROS 2 CDR, e.g. the demo's walk.mcap) into a video.

    Args:
        recording: The MCAP file.
        path: Output video file.
        robot: Robot model (default Talos).
        params: Picture and camera.
        sensor_topic: SensorState topic in the recording.
        plan_topic: FootstepPlan topic (the footsteps of the latest walking plan are drawn; before any, those
            of the latest plan).
        from_walk_start: Start with the samples received ``lead_time`` before the first walking plan (the
            start of Walk); False, or a recording without a walking plan: from the first sample.
        lead_time: Standing shown before the start of Walk [s].

    Raises:
        InputError: The recording has no sample to render.
        ConfigError: See :class:`WalkVideo`.
    """
    from walk_mpc.tools.recorder import decoded_messages

    frames = RobotFrames(RobotFrames.Parameters(robot=robot or RobotModel.Parameters()))
    video: Optional[WalkVideo] = None
    walk_start = walk_start_time(recording, plan_topic) if from_walk_start else None
    start = -math.inf if walk_start is None else walk_start - lead_time
    footsteps: list[FootPose] = []
    walked = False
    samples = 0
    first_time = None
    try:
        for message in decoded_messages(recording, topics=[sensor_topic, plan_topic]):
            msg = message.msg
            if message.topic == plan_topic:
                if msg.walking or not walked:  # a Stand plan after a walk keeps the walk's steps drawn
                    walked = walked or msg.walking
                    footsteps = plan_footsteps(msg)
                    if video is not None:
                        video.set_footsteps(footsteps)
                continue
            if message.log_time_ns * 1e-9 < start:
                continue
            sample = _sample_of(msg)
            if video is None:
                video = WalkVideo(path, frames, params)
                video.set_footsteps(footsteps)
                first_time = sample.time
            video.observe(sample)
            samples += 1
    finally:
        if video is not None:
            video.close()
    if video is None:
        raise InputError("recording", str(recording), f"samples on {sensor_topic}")
    return VideoSummary(Path(path), video.frame_count, video.duration, first_time, samples,
                        tuple(video.missing_meshes))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recording", type=Path, help="MCAP recording (e.g. walk.mcap)")
    parser.add_argument("video", type=Path, nargs="?", default=Path("walk.mp4"))
    parser.add_argument("--robot", default="talos_reduced", help="robot name or URDF path")
    parser.add_argument("--fps", type=float, default=25.0)
    parser.add_argument("--all", action="store_true", help="from the first sample, not the walk's start")
    args = parser.parse_args(argv)
    summary = write_walk_video(args.recording, args.video, RobotModel.Parameters(robot=args.robot),
                               VideoParameters(fps=args.fps), from_walk_start=not args.all)
    print(f"Video: {summary.path} ({summary.frames} frames, {summary.duration:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["VideoParameters", "VideoSummary", "Visual", "WalkVideo", "plan_footsteps", "urdf_visuals",
           "walk_start_time", "write_walk_video"]
