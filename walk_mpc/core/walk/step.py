"""Footstep type shared by the walk behavior, the MPC and the IK (mirror of msg/StepData)."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Tuple

from walk_mpc.core.errors import InvalidStepError

Vec3 = Tuple[float, float, float]


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
        normal: Unit normal of the ground at touchdown in the world frame.
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
        norm = math.sqrt(sum(v * v for v in self.normal))
        if norm < 1e-9:
            raise InvalidStepError(self.step_index, f"normal {self.normal!r} has zero length")
        object.__setattr__(self, "normal", tuple(v / norm for v in self.normal))
        for name in ("duration", "yaw", "swing_height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidStepError(self.step_index, f"{name} {value!r} is not a finite number")
            object.__setattr__(self, name, float(value))
        if self.duration < 0.0:
            raise InvalidStepError(self.step_index, f"duration {self.duration!r} s is negative")
        if self.swing_height < 0.0:
            raise InvalidStepError(self.step_index, f"swing_height {self.swing_height!r} m is negative")

    def replace(self, **changes) -> Step:
        """Copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)
