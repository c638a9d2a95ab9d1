"""The mpc_planner's preview messages for rviz: predicted CoM and ZMP paths, footstep and target markers."""

from __future__ import annotations

from typing import Optional

import numpy as np
from geometry_msgs.msg import Point, Pose, PoseStamped
from nav_msgs.msg import Path
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from walk_mpc.core.mpc.planner import PlannerOutput
from walk_mpc.core.mpc.preview import SoleParameters
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Timeline
from walk_mpc.nodes.conversions import point, stamp_ns, yaw_quaternion

_NS = 1_000_000_000


class PlannerVisuals:
    """Builds the preview messages of one planner tick, reusing them from tick to tick.

    Args:
        frame_id: World frame of the messages.
        sole: Sole extents (the footstep rectangles).
        zeta: LIPM constant ``com_height / gravity`` [s^2] (the ZMP of the initial state).
    """

    def __init__(self, frame_id: str, sole: SoleParameters, zeta: float) -> None:
        self.frame_id = frame_id
        self.sole = sole
        self.zeta = zeta
        self._paths: dict[str, Path] = {}  # "com"/"zmp" -> reused Path (same number of poses every tick)
        self._footsteps: Optional[tuple] = None  # (timeline, footstep markers) reused while the timeline is

    def _path(self, name: str, size: int) -> Path:
        """The reused Path message ``name`` with ``size`` poses (rebuilt when the size changes)."""
        path = self._paths.get(name)
        if path is None or len(path.poses) != size:
            path = Path()
            path.header.frame_id = self.frame_id
            for _ in range(size):
                pose = PoseStamped()
                pose.header.frame_id = self.frame_id
                pose.pose.orientation.w = 1.0
                path.poses.append(pose)
            self._paths[name] = path
        return path

    def paths(self, header_stamp, out: PlannerOutput) -> tuple[Path, Path]:
        """The predicted CoM and ZMP paths of ``out`` (the tick's state, then each prediction), each pose
        stamped at its prediction time; ``header_stamp`` is the tick's sample stamp (builtin_interfaces Time).
        The messages are reused: publish them before the next call."""
        now = stamp_ns(header_stamp)
        ground = float(out.zmp_targets[0, 2])
        com_z = float(out.com_targets[0, 2])
        s0 = out.initial_state
        times = np.concatenate([[out.t], out.preview_times])
        coms = np.vstack([s0[0], out.preview_com])
        zmps = np.vstack([s0[0] - self.zeta * s0[2], out.preview_zmp])
        stamps = [divmod(now + round((tk - out.t) * _NS), _NS) for tk in times.tolist()]
        paths = []
        for name, points, z in (("com", coms, com_z), ("zmp", zmps, ground)):
            path = self._path(name, len(stamps))
            path.header.stamp = header_stamp
            for pose, (sec, nanosec), (x, y) in zip(path.poses, stamps, points.tolist()):
                pose.header.stamp.sec, pose.header.stamp.nanosec = sec, nanosec
                position = pose.pose.position
                position.x, position.y, position.z = x, y, z
            paths.append(path)
        return paths[0], paths[1]

    def markers(self, stamp, out: PlannerOutput, timeline: Timeline) -> MarkerArray:
        """Footsteps of ``timeline`` as sole rectangles, the support region of the first preview interval,
        CoM and ZMP targets at T."""
        frame = self.frame_id
        sole = self.sole
        markers = [Marker(action=Marker.DELETEALL)]

        def marker(ns: str, kind: int, color: tuple, index: int = 0) -> Marker:
            m = Marker(ns=ns, id=index, type=kind, action=Marker.ADD)
            m.header.stamp = stamp
            m.header.frame_id = frame
            m.color = ColorRGBA(r=color[0], g=color[1], b=color[2], a=color[3])
            m.pose.orientation.w = 1.0
            return m

        if self._footsteps is None or self._footsteps[0] is not timeline:  # built once per timeline
            first = timeline.phases[0]
            soles = [(Foot.LEFT, first.left), (Foot.RIGHT, first.right)]
            soles += [(s.foot, FootPose(s.position, s.yaw)) for s in timeline.steps]
            footsteps = []
            for index, (foot, pose) in enumerate(soles):
                color = (0.2, 0.4, 1.0, 0.5) if foot is Foot.LEFT else (1.0, 0.3, 0.2, 0.5)
                m = marker("footsteps", Marker.CUBE, color, index)
                cx, cy = sole.centre(pose)
                m.pose = Pose(position=Point(x=float(cx), y=float(cy), z=pose.position[2] + 0.0025),
                              orientation=yaw_quaternion(pose.yaw))
                m.scale.x, m.scale.y, m.scale.z = sole.front + sole.back, sole.left + sole.right, 0.005
                footsteps.append(m)
            self._footsteps = (timeline, footsteps)
        for m in self._footsteps[1]:
            m.header.stamp = stamp
            markers.append(m)
        ground = float(out.zmp_targets[0, 2])
        support = marker("support", Marker.LINE_STRIP, (0.1, 0.8, 0.1, 1.0))
        corners = out.preview.corners()[0]
        support.points = [Point(x=float(x), y=float(y), z=ground + 0.006) for x, y in [*corners, corners[0]]]
        support.scale.x = 0.005
        markers.append(support)
        for ns, position, size, color in (("com", out.com_targets[0], 0.05, (1.0, 0.6, 0.0, 1.0)),
                                          ("zmp", out.zmp_targets[0], 0.03, (0.6, 0.1, 0.8, 1.0))):
            m = marker(ns, Marker.SPHERE, color)
            m.pose.position = point(position)
            m.scale.x = m.scale.y = m.scale.z = size
            markers.append(m)
        return MarkerArray(markers=markers)


__all__ = ["PlannerVisuals"]
