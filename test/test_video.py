"""The walk video: a short MuJoCo physics walk rendered offscreen into an MP4 that decodes, with the walk's
duration; the same from a recording; URDF visuals; parameters."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")
imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")

from walk_mpc.core.body.frames import RobotFrames  # noqa: E402
from walk_mpc.core.errors import ConfigError, InputError, ParameterError  # noqa: E402
from walk_mpc.core.walk.timeline import FootPose  # noqa: E402
from walk_mpc.tools.video import VideoParameters, WalkVideo, urdf_visuals  # noqa: E402

#: Small and slow frames: a software OpenGL renders them on a loaded 2-core machine.
SMALL = VideoParameters(width=320, height=240, fps=10.0)


@pytest.fixture(scope="module")
def frames():
    return RobotFrames()


def _video(path, frames, params=SMALL) -> WalkVideo:
    try:
        return WalkVideo(path, frames, params)
    except ConfigError as exc:  # no OpenGL backend on this machine
        pytest.skip(str(exc))


def _decoded(path: Path) -> list[np.ndarray]:
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    return [np.frombuffer(frame, np.uint8).reshape(height, width, 3) for frame in reader]


def test_a_short_physics_walk_makes_a_video_that_decodes_with_the_walks_duration(tmp_path, frames):
    from walk_mpc.core.body.robot import yaw_of
    from walk_mpc.core.control.closed_loop import ClosedLoopWalk
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.core.sim.mujoco import MujocoSim
    from walk_mpc.core.walk.footsteps import walk_forward
    from walk_mpc.core.walk.timeline import GaitTiming, Timeline

    robot = frames.robot
    feet = {name: FootPose(tuple(p), yaw_of(r)) for name, (p, r) in
            robot.foot_poses(robot.reference_configuration()).items()}
    left, right = feet[robot.left_foot_frame], feet[robot.right_foot_frame]
    steps = walk_forward(left, right, 0.2, step_length=0.2, width=abs(left.position[1] - right.position[1]),
                         duration=1.1)
    timeline = Timeline(left, right, steps, GaitTiming(sway_duration=0.6, double_support_duration=0.3,
                                                       catch_duration=0.6))
    loop = ClosedLoopWalk(robot, MujocoSim(KinematicSim.Parameters(), robot=robot), timeline)
    path = tmp_path / "walk.mp4"
    video = _video(path, frames)
    video.set_footsteps([left, right, *(FootPose(tuple(step.position), step.yaw) for step in steps)])
    first = last = None
    while loop.backend.time < timeline.t_end - 1e-9 and not loop.fallen:
        loop.step()
        sample = loop.backend.sensor_sample()
        first = sample if first is None else first
        last = sample
        video.observe(sample)
    video.close()
    assert not loop.fallen
    walk_duration = last.time - first.time
    assert walk_duration == pytest.approx(timeline.t_end, abs=0.02)

    assert path.is_file() and path.stat().st_size > 0
    images = _decoded(path)
    count, seconds = imageio_ffmpeg.count_frames_and_secs(str(path))
    assert len(images) == count == video.frame_count
    assert images[0].shape == (SMALL.height, SMALL.width, 3)
    # one frame per 1/fps of sample time from the first sample: the walk's duration, to a frame
    assert video.frame_count == math.floor(walk_duration * SMALL.fps + 1e-6) + 1
    assert seconds == pytest.approx(walk_duration, abs=1.5 / SMALL.fps)
    assert images[0].std() > 10.0  # a picture, not a blank frame
    assert np.abs(images[-1].astype(int) - images[0].astype(int)).mean() > 1.0  # the robot moved


def test_a_recorded_walk_is_rendered_from_the_start_of_walk_with_its_footsteps(tmp_path, frames):
    """write_walk_video reads /sensor_state and /walk/plan of an MCAP recording (ROS 2 CDR)."""
    pytest.importorskip("rclpy")
    pytest.importorskip("walk_mpc.msg")
    from walk_mpc.core.sensors import SensorSample
    from walk_mpc.core.sim.kinematic import KinematicSim
    from walk_mpc.msg import FootstepPlan, StepData
    from walk_mpc.nodes.sim import sensor_state_msg
    from walk_mpc.tools.recorder import McapRecorder
    from walk_mpc.tools.video import write_walk_video

    sample = KinematicSim(KinematicSim.Parameters()).sensor_sample()
    recording = McapRecorder(tmp_path / "walk.mcap")
    start_ns = 1_000_000_000
    plan = FootstepPlan(walking=True, steps=[StepData(step_index=k + 1, foot_index=k % 2, duration=1.1)
                                             for k in range(3)])
    plan.header.stamp.sec = 2  # Walk starts 1 s after the first sample
    for k in range(300):  # 3 s at 100 Hz
        stamp = start_ns + 10_000_000 * k
        if k == 100:  # received at the start of Walk
            recording.write("walk/plan", "walk_mpc/msg/FootstepPlan", plan, stamp)
        moved = SensorSample(**{**sample.__dict__, "time": stamp * 1e-9,
                                "base_position": sample.base_position + [0.002 * k, 0.0, 0.0]})
        recording.write("sensor_state", "walk_mpc/msg/SensorState", sensor_state_msg(moved, stamp), stamp)
    recording.close()
    try:
        summary = write_walk_video(tmp_path / "walk.mcap", tmp_path / "walk.mp4", params=SMALL, lead_time=0.5)
    except ConfigError as exc:
        pytest.skip(str(exc))
    assert summary.start_time == pytest.approx(1.5)  # lead_time (0.5 s) before the walking plan came (2 s)
    assert summary.samples == 250 and summary.frames == 25  # 2.49 s at 10 frames per second
    assert summary.missing_meshes == ()
    assert len(_decoded(summary.path)) == 25
    assert imageio_ffmpeg.count_frames_and_secs(str(summary.path))[1] == pytest.approx(2.5, abs=0.15)
    # no walking plan (e.g. the robot fell before Walk): every sample
    everything = write_walk_video(tmp_path / "walk.mcap", tmp_path / "all.mp4", params=SMALL,
                                  plan_topic="/no/plan")
    assert everything.start_time == pytest.approx(1.0) and everything.frames == 30
    with pytest.raises(InputError, match="samples on /no/samples"):
        write_walk_video(tmp_path / "walk.mcap", tmp_path / "none.mp4", params=SMALL,
                         sensor_topic="/no/samples")


def test_urdf_visuals_are_the_talos_meshes_with_their_materials(frames):
    visuals, missing = urdf_visuals(frames.description(), Path(frames.robot.urdf_path).parent)
    assert missing == []
    assert {v.link for v in visuals} <= set(frames.link_names)
    meshes = [v for v in visuals if v.kind == "mesh"]
    assert len(meshes) >= 40 and all(v.mesh_file.is_file() for v in meshes)
    assert any(v.rgba == (0.1, 0.1, 0.1, 1.0) for v in visuals)  # FlatBlack, defined once at the top


def test_urdf_primitives_and_unresolved_meshes():
    urdf = """<robot name="r"><material name="red"><color rgba="1 0 0 1"/></material>
      <link name="a"><visual><origin xyz="0 0 0.5" rpy="0 0 1.5707963"/><geometry><box size="0.2 0.4 0.6"/>
      </geometry><material name="red"/></visual></link>
      <link name="b"><visual><geometry><cylinder radius="0.1" length="0.3"/></geometry></visual>
      <visual><geometry><mesh filename="package://nowhere/m.stl"/></geometry></visual></link></robot>"""
    visuals, missing = urdf_visuals(urdf, Path("."))
    box, cylinder = visuals
    assert box.size == (0.1, 0.2, 0.3) and box.rgba == (1.0, 0.0, 0.0, 1.0)
    np.testing.assert_allclose(box.origin[:3, 3], (0.0, 0.0, 0.5))
    np.testing.assert_allclose(box.origin[:3, 0], (0.0, 1.0, 0.0), atol=1e-7)  # x turned onto y
    assert cylinder.kind == "cylinder" and cylinder.size == (0.1, 0.15)
    assert missing == ["package://nowhere/m.stl"]


def test_samples_going_back_in_time_are_refused(tmp_path, frames):
    from walk_mpc.core.sim.kinematic import KinematicSim

    sample = KinematicSim(KinematicSim.Parameters()).sensor_sample()
    video = _video(tmp_path / "v.mp4", frames)
    try:
        assert video.observe(sample) == 1  # the first sample makes the first frame
        later = type(sample)(**{**sample.__dict__, "time": sample.time + 0.25})
        assert video.observe(later) == 2  # 0.1 and 0.2 s
        with pytest.raises(InputError, match="time"):
            video.observe(sample)
        with pytest.raises(InputError, match="FootPose"):
            video.set_footsteps([(0.0, 0.0, 0.0)])
    finally:
        video.close()
    assert video.duration == pytest.approx(0.3)


def test_bad_video_parameters_are_refused_naming_them():
    for field, value in (("width", 100), ("height", 0), ("fps", 0.0), ("camera_distance", -1.0),
                         ("footstep_rgba", (1.0, 0.0)), ("multisamples", -1), ("quality", 11)):
        with pytest.raises(ParameterError, match=field):
            VideoParameters(**{field: value})
