"""Footstep type shared by the walk behavior, the MPC and the IK (mirror of msg/StepData)."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Tuple

from walk_mpc.core.errors import InvalidStepError

Vec3 = Tuple[float, float, float]

#: Steepest ground a step may land on [rad]: the angle between its normal and the vertical (Talos' ankle
#: pitch and roll and its sole friction leave little beyond; a normal pointing down is far beyond it).
MAX_GROUND_TILT = math.radians(25.0)
VERTICAL: Vec3 = (0.0, 0.0, 1.0)


def ground_tilt(yaw: float, normal: Vec3) -> Tuple[float, float]:
    """Roll and pitch [rad] of a sole of ``yaw`` [rad] lying flat on ground of unit ``normal`` (world frame).

    The sole's rotation is ``Rz(yaw) Ry(pitch) Rx(roll)`` (:func:`walk_mpc.core.body.robot.sole_rotation`):
    its x axis stays in the vertical plane of its heading ``yaw`` (the yaw is the step's), its z axis is the
    normal. ``(0.0, 0.0)`` exactly for the vertical normal. In the sole's yaw frame the normal is
    ``(cos(roll) sin(pitch), -sin(roll), cos(roll) cos(pitch))``.
    """
    nx, ny, nz = normal
    if nx == 0.0 and ny == 0.0:
        return 0.0, 0.0
    c, s = math.cos(yaw), math.sin(yaw)
    forward, left = c * nx + s * ny, -s * nx + c * ny  # the normal in the yaw frame
    return math.asin(max(-1.0, min(1.0, -left))), math.atan2(forward, nz)


class Foot(enum.IntEnum):
    """Foot index, as StepData.foot_index (FOOT_LEFT=0, FOOT_RIGHT=1)."""

    LEFT = 0
    RIGHT = 1

    @property
    def other(self) -> Foot:
        """The opposite foot."""
        return Foot.RIGHT if self is Foot.LEFT else Foot.LEFT


@dataclasses.dataclass(frozen=True)
class Step:
    """One footstep (Atlas ``AtlasBehaviorStepData``).

    Attributes:
        step_index: 1-based, strictly increasing along a walk; 0 is the stance
            at the start of Walk, -1 means "not a step".
        foot: Which foot lands.
        duration: Duration of the step [s] (swing plus the following double support).
        position: Sole position at touchdown in the world frame [m].
        yaw: Sole yaw at touchdown in the world frame [rad].
        normal: Unit normal of the ground at touchdown in the world frame (normalised here; at most
            :data:`MAX_GROUND_TILT` from the vertical): the sole lands flat on it, rolled and pitched by
            :func:`ground_tilt`, turned by ``yaw``.
        swing_height: Swing apex above the midpoint between lift-off and touchdown [m] (above the higher
            of them when their heights differ: :mod:`walk_mpc.core.body.swing`).
    """

    step_index: int
    foot: Foot
    duration: float
    position: Vec3
    yaw: float = 0.0
    normal: Vec3 = (0.0, 0.0, 1.0)
    swing_height: float = 0.05

    def __post_init__(self) -> None:
        if isinstance(self.step_index, bool) or not isinstance(self.step_index, int):
            raise InvalidStepError(-1, f"step_index {self.step_index!r} is not an integer")
        try:
            foot = Foot(int(self.foot))
        except (ValueError, TypeError):
            raise InvalidStepError(
                self.step_index, f"foot_index {self.foot!r} is invalid; expected 0 (left) or 1 (right)"
            ) from None
        object.__setattr__(self, "foot", foot)
        for name in ("position", "normal"):
            value = getattr(self, name)
            try:
                vec = tuple(float(v) for v in value)
            except (TypeError, ValueError):
                raise InvalidStepError(self.step_index, f"{name} {value!r} is not 3 numbers") from None
            if len(vec) != 3 or not all(math.isfinite(v) for v in vec):
                raise InvalidStepError(self.step_index, f"{name} {value!r} is not 3 finite numbers")
            object.__setattr__(self, name, vec)
        object.__setattr__(self, "normal", unit_normal(self.normal, self.step_index))
        for name in ("duration", "yaw", "swing_height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidStepError(self.step_index, f"{name} {value!r} is not a finite number")
            object.__setattr__(self, name, float(value))
        if self.duration < 0.0:
            raise InvalidStepError(self.step_index, f"duration {self.duration!r} s is negative")
        if self.swing_height < 0.0:
            raise InvalidStepError(self.step_index, f"swing_height {self.swing_height!r} m is negative")

    @property
    def tilt(self) -> Tuple[float, float]:
        """Roll and pitch [rad] of the sole at touchdown (:func:`ground_tilt` of ``yaw`` and ``normal``)."""
        return ground_tilt(self.yaw, self.normal)

    def replace(self, **changes) -> Step:
        """Copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def unit_normal(normal, step_index: int = -1) -> Vec3:
    """``normal`` (3 finite numbers) scaled to unit length, checked to be at most :data:`MAX_GROUND_TILT`
    from the vertical (the vertical itself returned as is).

    Raises:
        InvalidStepError: On a zero-length or too steep normal (naming it and what is expected).
    """
    vec = tuple(float(v) for v in normal)
    if vec == VERTICAL:
        return VERTICAL
    norm = math.sqrt(sum(v * v for v in vec))
    if not norm > 1e-9:
        raise InvalidStepError(step_index, f"normal {vec!r} has zero length; expected a unit ground normal "
                                           "(e.g. (0, 0, 1) for level ground)")
    unit = vec if abs(norm - 1.0) < 1e-12 else tuple(v / norm for v in vec)  # a unit one is kept as is
    tilt = math.acos(max(-1.0, min(1.0, unit[2])))
    if tilt > MAX_GROUND_TILT + 1e-12:
        limit = math.degrees(MAX_GROUND_TILT)
        raise InvalidStepError(step_index, f"normal {vec!r} is {math.degrees(tilt):.1f} deg from the "
                                           f"vertical; expected at most {limit:.0f} deg (MAX_GROUND_TILT) "
                                           "with a positive z")
    return unit
