"""Step saturation: bring each footstep within kinematic limits relative to the previous one.

Every limit is measured in the frame of the previous step's sole (the foot that
carries the weight while the new step swings): x forward, y to its left.

* ``length``: forward offset ``x`` in ``[-max_backward, max_forward]``.
* ``width``: lateral offset ``y``; a left step lands in ``[min_width, max_width]``
  to the left of the right foot, a right step in ``[-max_width, -min_width]`` (to
  the right of the left foot), so legs never cross; unless ``max_crossover_width`` > 0
  (a crossover step, the standing recovery's): a step on the other side of the previous
  sole lands ``[min_crossover_width, max_crossover_width]`` across it.
* ``yaw``: yaw change (wrapped to (-pi, pi]) in ``[-max_yaw_change, max_yaw_change]``.
* ``height``: height change in ``[-max_height_change, max_height_change]``.
* ``duration`` in ``[min_duration, max_duration]``; ``swing_height`` at most ``max_swing_height``.

Fields within limits are left bit-for-bit unchanged; :class:`SaturationFlags` tells
which ones were changed (the ``SATURATED_*`` bits of ``msg/WalkFeedback``).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Tuple

from walk_mpc.core.errors import ParameterError
from walk_mpc.core.params import check_less, check_nonnegative, check_positive
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose

#: Changes smaller than this are not reported as saturation (float noise) [m] or [rad] or [s].
TOLERANCE = 1e-9


class SaturationFlags(enum.IntFlag):
    """Which fields of a step saturation changed (``WalkFeedback.SATURATED_*``)."""

    NONE = 0
    LENGTH = 1
    WIDTH = 2
    YAW = 4
    HEIGHT = 8
    DURATION = 16
    SWING_HEIGHT = 32


@dataclasses.dataclass(frozen=True)
class StepLimits:
    """Kinematic limits of one step relative to the previous one.

    Attributes:
        max_forward: Largest forward offset from the previous sole [m].
        max_backward: Largest backward offset from the previous sole [m] (positive number). 0.2 m: MuJoCo
            Talos walks 10 steps of 0.2 m backward (state estimated, stabilizer off and on, largest base tilt
            5.6 degrees), and the standing recovery steps caught 46.9 / 43.8 N s backward (stabilizer off /
            on) instead of 40.6 / 40.6 with 0.15 m.
        min_width: Smallest lateral distance from the previous sole, to its outer side [m] (> 0: no crossing).
        max_width: Largest lateral distance from the previous sole [m].
        max_yaw_change: Largest yaw change from the previous sole [rad].
        max_height_change: Largest height change from the previous sole [m].
        min_duration: Shortest step duration [s] (must exceed the double support duration). 0.4 s: the
            standing recovery steps' 0.3 s swing and 0.1 s double support (MuJoCo Talos, state estimated:
            with 0.5 s recovery steps a forward push of 43.75 N s fell, 46.9 stands with 0.4 s ones).
        max_duration: Longest step duration [s].
        max_swing_height: Highest swing apex [m].
        min_crossover_width: Smallest lateral distance [m] of a crossover step from the previous sole, to its
            inner side (with ``max_crossover_width``; at least a sole's width: the soles must not overlap).
        max_crossover_width: Largest lateral distance [m] of a crossover step (a left step landing to the
            right of the previous, right, sole or the reverse); 0 (default): no crossing.
    """

    max_forward: float = 0.30
    max_backward: float = 0.2
    min_width: float = 0.12
    max_width: float = 0.40
    max_yaw_change: float = 0.50
    max_height_change: float = 0.15
    min_duration: float = 0.4
    max_duration: float = 3.0
    max_swing_height: float = 0.15
    min_crossover_width: float = 0.0
    max_crossover_width: float = 0.0

    def __post_init__(self) -> None:
        check_positive("max_forward", self.max_forward)
        check_nonnegative("max_backward", self.max_backward)
        check_positive("min_width", self.min_width)
        check_positive("max_width", self.max_width)
        check_less("min_width", self.min_width, "max_width", self.max_width)
        check_positive("max_yaw_change", self.max_yaw_change)
        if self.max_yaw_change > math.pi:
            raise ParameterError("max_yaw_change", self.max_yaw_change, "a number in (0, pi]")
        check_nonnegative("max_height_change", self.max_height_change)
        check_positive("min_duration", self.min_duration)
        check_positive("max_duration", self.max_duration)
        check_less("min_duration", self.min_duration, "max_duration", self.max_duration)
        check_nonnegative("max_swing_height", self.max_swing_height)
        check_nonnegative("min_crossover_width", self.min_crossover_width)
        check_nonnegative("max_crossover_width", self.max_crossover_width)
        if self.max_crossover_width > 0.0:
            check_less("min_crossover_width", self.min_crossover_width, "max_crossover_width",
                       self.max_crossover_width)


def wrap_angle(angle: float) -> float:
    """Angle wrapped to (-pi, pi] [rad]."""
    wrapped = math.remainder(angle, 2.0 * math.pi)
    return math.pi if wrapped == -math.pi else wrapped


def _clip(value: float, low: float, high: float) -> Tuple[float, bool]:
    """Value clipped to [low, high] and whether it moved by more than TOLERANCE."""
    clipped = min(high, max(low, value))
    return clipped, abs(clipped - value) > TOLERANCE


def relative_offset(previous: FootPose, position: Tuple[float, float, float]) -> Tuple[float, float, float]:
    """Offset of ``position`` in the frame of ``previous`` (x forward, y left, z up) [m]."""
    dx = position[0] - previous.position[0]
    dy = position[1] - previous.position[1]
    c, s = math.cos(previous.yaw), math.sin(previous.yaw)
    return (c * dx + s * dy, -s * dx + c * dy, position[2] - previous.position[2])


def saturate_step(step: Step, previous: FootPose, limits: StepLimits) -> Tuple[Step, SaturationFlags]:
    """Bring ``step`` within ``limits`` relative to the previous sole.

    Args:
        step: Step to saturate; ``step.foot`` decides the side (a left step lands left of ``previous``).
        previous: Pose of the previous step's sole (the other foot, which supports the swing).
        limits: Step limits.

    Returns:
        The saturated step (``step`` itself when nothing changed) and the flags of the changed fields.
    """
    flags = SaturationFlags.NONE
    x, y, z = relative_offset(previous, step.position)
    x, hit = _clip(x, -limits.max_backward, limits.max_forward)
    if hit:
        flags |= SaturationFlags.LENGTH
    side = 1.0 if step.foot is Foot.LEFT else -1.0
    if limits.max_crossover_width > 0.0 and side * y < 0.0:  # a crossover step
        across, hit = _clip(-side * y, limits.min_crossover_width, limits.max_crossover_width)
        y = -side * across
    elif step.foot is Foot.LEFT:
        y, hit = _clip(y, limits.min_width, limits.max_width)
    else:
        y, hit = _clip(y, -limits.max_width, -limits.min_width)
    if hit:
        flags |= SaturationFlags.WIDTH
    z, hit = _clip(z, -limits.max_height_change, limits.max_height_change)
    if hit:
        flags |= SaturationFlags.HEIGHT
    changes = {}
    if flags & (SaturationFlags.LENGTH | SaturationFlags.WIDTH | SaturationFlags.HEIGHT):
        c, s = math.cos(previous.yaw), math.sin(previous.yaw)
        px, py, pz = previous.position
        changes["position"] = (px + c * x - s * y, py + s * x + c * y, pz + z)
    dyaw = wrap_angle(step.yaw - previous.yaw)
    clipped, hit = _clip(dyaw, -limits.max_yaw_change, limits.max_yaw_change)
    if hit:
        flags |= SaturationFlags.YAW
        changes["yaw"] = previous.yaw + clipped
    duration, hit = _clip(step.duration, limits.min_duration, limits.max_duration)
    if hit:
        flags |= SaturationFlags.DURATION
        changes["duration"] = duration
    swing_height, hit = _clip(step.swing_height, 0.0, limits.max_swing_height)
    if hit:
        flags |= SaturationFlags.SWING_HEIGHT
        changes["swing_height"] = swing_height
    if not changes:
        return step, flags
    return step.replace(**changes), flags


def saturation_flags(step: Step, previous: FootPose, limits: StepLimits) -> SaturationFlags:
    """Flags that :func:`saturate_step` would raise (``NONE`` when ``step`` is within limits)."""
    return saturate_step(step, previous, limits)[1]
