"""Uneven ground for the MuJoCo biped: planks and ramps the controllers do not know about.

:class:`TerrainMujocoSim` is :class:`~walk_mpc.core.sim.mujoco.MujocoSim` with a :class:`Terrain` added to
the model it builds, before MuJoCo compiles it (the backend's own construction, extended by a subclass;
nothing of the backend is edited): static collision boxes in the world body, with the floor's friction and
contact softness, and the floor plane lowered under a descending ramp. The robot starts on flat ground at
z = 0 (x < ``ramp_start`` and away from the planks); the plan does not know the terrain (unseen ground).

* :attr:`Terrain.planks`: boxes lying on the floor, ``(x_centre, y_centre, length, width, height)`` [m].
* :attr:`Terrain.ramp_angle`: a ramp of that slope [rad] (positive: up) along +x from ``ramp_start`` for
  ``ramp_length`` [m], then flat at the height it reached (a plateau; below a descending ramp, the floor).
* :meth:`Terrain.stairs`: a flight of steps along +x from its edges (planks from each edge to the next).
  Stairs are *known* terrain when the plan's steps carry their heights (StepData z, e.g. from
  :meth:`Terrain.height`): ``benchmarks/robustness.py``'s known stairs row. A ramp is known terrain when the
  steps also carry its normal (StepData normal, :meth:`Terrain.normal`): the known ramp rows.

Pure MuJoCo (through :mod:`walk_mpc.core.sim.mjcf`'s helpers); no ROS.
"""

from __future__ import annotations

import dataclasses
import math

from walk_mpc.core.errors import ParameterError
from walk_mpc.core.params import check_finite, check_positive, check_range
from walk_mpc.core.sim import mjcf
from walk_mpc.core.sim.mujoco import MujocoSim

_THICKNESS = 0.05  # [m] half-thickness of the ramp and platform boxes
_HALF_WIDTH = 2.0  # [m] half-width (along y) of the ramp and platform boxes
_EXTENT = 20.0  # [m] length of a plateau or start platform


@dataclasses.dataclass(frozen=True)
class Terrain:
    """Ground the robot walks on besides the flat floor.

    Attributes:
        planks: Boxes on the floor: ``(x_centre, y_centre, length, width, height)`` [m] each.
        ramp_angle: Slope of the ramp [rad] (positive: uphill along +x; 0: no ramp).
        ramp_start: Where the ramp starts along x [m] (the ground before it is flat at z = 0).
        ramp_length: Horizontal length of the ramp [m]; flat at its final height after it.
    """

    planks: tuple = ()
    ramp_angle: float = 0.0
    ramp_start: float = 0.4
    ramp_length: float = 0.8

    def __post_init__(self) -> None:
        planks = tuple(tuple(float(v) for v in plank) for plank in self.planks)
        for plank in planks:
            if len(plank) != 5 or not all(math.isfinite(v) for v in plank) or min(plank[2:]) <= 0.0:
                raise ParameterError("planks", plank, "(x, y, length > 0, width > 0, height > 0) [m]")
        object.__setattr__(self, "planks", planks)
        check_range("ramp_angle", self.ramp_angle, -0.3, 0.3)
        check_finite("ramp_start", self.ramp_start)
        check_positive("ramp_length", self.ramp_length)

    @classmethod
    def stairs(cls, edges, width: float = 2.0, y: float = 0.0) -> Terrain:
        """Stairs along +x: ``edges`` are ``(x [m], height [m] after it)`` with increasing x; the ground
        between an edge and the next (the last: 20 m on) is at its height, 0 before the first edge (heights
        of 0 are left to the floor). ``width`` [m]: of every tread, centred on ``y`` [m].

        Raises:
            ParameterError: On edges not increasing in x, negative heights or a width <= 0.
        """
        edges = tuple((float(x), float(h)) for x, h in edges)
        check_positive("width", width)
        check_finite("y", y)
        if any(b[0] <= a[0] for a, b in zip(edges, edges[1:])) or any(h < 0.0 for _, h in edges):
            raise ParameterError("edges", edges, "(x, height >= 0) [m] with increasing x")
        planks = []
        for i, (x, h) in enumerate(edges):
            end = edges[i + 1][0] if i + 1 < len(edges) else x + _EXTENT
            if h > 0.0:
                planks.append((0.5 * (x + end), float(y), end - x, float(width), h))
        return cls(planks=tuple(planks))

    @property
    def ramp_height(self) -> float:
        """Height [m] the ramp reaches (negative downhill)."""
        return self.ramp_length * math.tan(self.ramp_angle)

    def height(self, x: float, y: float) -> float:
        """Ground height [m] at ``(x, y)`` (the top of the highest plank there, else the ramp's profile)."""
        s = min(max((x - self.ramp_start) / self.ramp_length, 0.0), 1.0)
        ground = s * self.ramp_height if self.ramp_angle else 0.0
        for px, py, length, width, h in self.planks:
            if abs(x - px) <= length / 2 and abs(y - py) <= width / 2:
                ground = max(ground, h)
        return ground

    def normal(self, x: float, y: float) -> tuple:
        """Unit ground normal at ``(x, y)``: the ramp's on its slope (``ramp_start < x < ramp_start +
        ramp_length``, not on a plank), else vertical ``(0.0, 0.0, 1.0)`` (planks, floor, plateau)."""
        on_slope = self.ramp_angle and self.ramp_start < x < self.ramp_start + self.ramp_length
        if not on_slope or any(abs(x - px) <= length / 2 and abs(y - py) <= width / 2
                               for px, py, length, width, _ in self.planks):
            return (0.0, 0.0, 1.0)
        return (-math.sin(self.ramp_angle), 0.0, math.cos(self.ramp_angle))

    def add_to(self, spec, friction: float, solref) -> None:
        """Add the terrain's geoms to a MuJoCo spec (before compiling; the floor is named ``floor``)."""
        world = spec.worldbody
        quat_identity = [1.0, 0.0, 0.0, 0.0]
        boxes = []  # (name, centre, half size, quat wxyz)
        for i, (px, py, length, width, h) in enumerate(self.planks):
            boxes.append((f"plank_{i}", [px, py, h / 2], [length / 2, width / 2, h / 2], quat_identity))
        if self.ramp_angle:
            a, x0, rise = self.ramp_angle, self.ramp_start, self.ramp_height
            x1 = x0 + self.ramp_length
            half_length = 0.5 * math.hypot(self.ramp_length, rise)
            # Top face through (x0, 0) and (x1, rise): the centre lies _THICKNESS below the top's middle.
            normal = (-math.sin(a), math.cos(a))
            centre = [0.5 * (x0 + x1) - _THICKNESS * normal[0], 0.0, 0.5 * rise - _THICKNESS * normal[1]]
            # Rotation about y by -a lifts +x for a > 0 (a positive rotation about y lowers +x).
            quat = [math.cos(-a / 2), 0.0, math.sin(-a / 2), 0.0]
            boxes.append(("ramp", centre, [half_length, _HALF_WIDTH, _THICKNESS], quat))
            if rise > 0.0:  # plateau at the top
                boxes.append(("plateau", [x1 + _EXTENT / 2, 0.0, rise - _THICKNESS],
                              [_EXTENT / 2, _HALF_WIDTH, _THICKNESS], quat_identity))
            else:  # start platform at z = 0, the floor at the bottom of the ramp
                boxes.append(("platform", [x0 - _EXTENT / 2, 0.0, -_THICKNESS],
                              [_EXTENT / 2, _HALF_WIDTH, _THICKNESS], quat_identity))
                floor = spec.geom("floor")
                if floor is None:
                    raise ParameterError("ramp_angle", self.ramp_angle, "a model with a plane named 'floor'")
                floor.pos = [0.0, 0.0, rise]
        mj = mjcf.require_mujoco()
        for name, centre, half, quat in boxes:
            world.add_geom(name=f"terrain_{name}", type=mj.mjtGeom.mjGEOM_BOX, pos=list(centre),
                           size=list(half), quat=list(quat), friction=[friction, 0.005, 0.0001],
                           solref=list(solref))


class TerrainMujocoSim(MujocoSim):
    """:class:`~walk_mpc.core.sim.mujoco.MujocoSim` on a :class:`Terrain` (module docstring).

    Args:
        terrain: The ground besides the floor.
        params, mujoco, robot: As :class:`MujocoSim`.
        noslip_iterations: MuJoCo's ``noslip_iterations`` (0: MuJoCo's default, none). MuJoCo's soft contacts
            let a loaded sole creep along a slope although friction holds it (Talos on a 10 degree ramp,
            friction 1: about 1 cm down the slope every stance), which no leg odometry sees (a real sole on
            a ramp that steep does not slip); the noslip solver removes the creep.
    """

    def __init__(self, terrain: Terrain, params=None, mujoco=None, robot=None,
                 noslip_iterations: int = 0) -> None:
        if not isinstance(terrain, Terrain):
            raise ParameterError("terrain", terrain, "a Terrain")
        iterations = noslip_iterations
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
            raise ParameterError("noslip_iterations", noslip_iterations, "an integer >= 0")
        self.terrain = terrain
        self.noslip_iterations = noslip_iterations
        super().__init__(params, mujoco, robot)

    def ground_height(self, x: float, y: float) -> float:
        """Height [m] of the terrain at ``(x, y)`` (:meth:`Terrain.height`)."""
        return self.terrain.height(x, y)

    def _init_common(self, spec, *args, **kwargs) -> None:
        opt = self.mujoco_params
        if self.noslip_iterations:
            spec.option.noslip_iterations = self.noslip_iterations
        self.terrain.add_to(spec, opt.friction, (opt.contact_time_constant, opt.contact_damping_ratio))
        super()._init_common(spec, *args, **kwargs)


__all__ = ["Terrain", "TerrainMujocoSim"]
