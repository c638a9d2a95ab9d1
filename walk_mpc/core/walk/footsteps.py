"""Footstep generators: straight, sideways, turning, arc and go-to-pose walks as alternating Step lists.

Every generator moves a *center frame* (midpoint of the soles, mean yaw) from the
current stance to a target along a path sampled at ``n`` poses ``c_1 .. c_n``. Step
``k`` puts the next foot at ``c_k``, half a ``width`` to its side; one last step
puts the trailing foot beside the leading one at ``c_n`` (feet together). ``n`` is
the smallest count that keeps each step within the requested step sizes *and*
within :class:`~.saturation.StepLimits` relative to the previous step (checked with
:func:`~.saturation.saturate_step`), so the returned plans are never saturated.
Indices are consecutive from ``start_index`` (1 for a new walk); feet alternate;
the first foot is the one on the side of the motion (left for left turns and left
sidesteps, left for straight walks), unless only the other foot makes a valid plan.
``n`` grows by one from the step-size estimate (then by 10 %), so it is minimal in
practice. A stance the limits cannot leave (e.g. feet too far apart) raises InputError.
A zero motion gives an empty list.
"""

from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence, Tuple

from walk_mpc.core.errors import InputError
from walk_mpc.core.params import check_finite, check_positive
from walk_mpc.core.walk.saturation import (
    SaturationFlags,
    StepLimits,
    relative_offset,
    saturate_step,
    wrap_angle,
)
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose

Pose2 = Tuple[float, float, float]  # x [m], y [m], yaw [rad]

#: Cap on how many times the generators raise the step count (by 1, then by 10 %) before giving up.
MAX_REFINEMENTS = 60


def stance_center(left: FootPose, right: FootPose) -> Tuple[float, float, float, float]:
    """Midpoint of the soles and their mean yaw: (x [m], y [m], z [m], yaw [rad])."""
    yaw = left.yaw + 0.5 * wrap_angle(right.yaw - left.yaw)
    return (
        0.5 * (left.position[0] + right.position[0]),
        0.5 * (left.position[1] + right.position[1]),
        0.5 * (left.position[2] + right.position[2]),
        yaw,
    )


def step_flags(
    left: FootPose, right: FootPose, steps: Sequence[Step], limits: StepLimits = StepLimits()
) -> Tuple[SaturationFlags, ...]:
    """Saturation flags of each step of a plan starting from the stance (left, right).

    Each step is checked against the previous step's sole (the other foot's initial pose
    for the first step); NONE everywhere means Walk will execute the plan unmodified.
    """
    feet = {Foot.LEFT: left, Foot.RIGHT: right}
    previous: Optional[Step] = None
    flags = []
    for step in steps:
        reference = FootPose.of_step(previous) if previous is not None else feet[step.foot.other]
        flags.append(saturate_step(step, reference, limits)[1])
        previous = step
    return tuple(flags)


def _place(center: Tuple[float, float, float, float], foot: Foot, width: float) -> Tuple[Tuple, float]:
    x, y, z, yaw = center
    side = 0.5 * width if foot is Foot.LEFT else -0.5 * width
    return (x - math.sin(yaw) * side, y + math.cos(yaw) * side, z), yaw


def _steps_through(
    centers: Sequence[Tuple[float, float, float, float]],
    first_foot: Foot,
    width: float,
    duration: float,
    swing_height: float,
    start_index: int,
) -> List[Step]:
    steps: List[Step] = []
    foot = first_foot
    for center in list(centers) + [centers[-1]]:
        position, yaw = _place(center, foot, width)
        steps.append(Step(start_index + len(steps), foot, duration, position, yaw, swing_height=swing_height))
        foot = foot.other
    return steps


def _generate(
    left: FootPose,
    right: FootPose,
    pose_at: Callable[[float], Pose2],
    n_min: int,
    width: float,
    duration: float,
    swing_height: float,
    start_index: int,
    limits: StepLimits,
    what: str,
) -> List[Step]:
    """Smallest valid plan through ``pose_at(k / n)``, k = 1..n, trying the preferred first foot first."""
    check_positive("width", width)
    check_positive("duration", duration)
    check_finite("swing_height", swing_height)
    if not limits.min_width <= width <= limits.max_width:
        raise InputError("width", width,
                         f"a width in [{limits.min_width}, {limits.max_width}] m (step limits)")
    if not limits.min_duration <= duration <= limits.max_duration:
        raise InputError("duration", duration,
                         f"a duration in [{limits.min_duration}, {limits.max_duration}] s (step limits)")
    if not 0.0 <= swing_height <= limits.max_swing_height:
        raise InputError("swing_height", swing_height,
                         f"a height in [0, {limits.max_swing_height}] m (step limits)")
    z = stance_center(left, right)[2]
    x1, y1, yaw1 = pose_at(1.0 / max(n_min, 1))
    x0, y0, _, yaw0 = stance_center(left, right)
    lateral = relative_offset(FootPose((x0, y0, z), yaw0), (x1, y1, z))[1]
    turn = wrap_angle(yaw1 - yaw0)
    if abs(lateral) > 1e-9:
        preferred = Foot.LEFT if lateral > 0.0 else Foot.RIGHT
    else:
        preferred = Foot.RIGHT if turn < -1e-9 else Foot.LEFT
    n = max(n_min, 1)
    for attempt in range(MAX_REFINEMENTS):
        if attempt:
            n = n + 1 if attempt < 20 else math.ceil(n * 1.1)
        centers = [(*pose_at(k / n)[:2], z, pose_at(k / n)[2]) for k in range(1, n + 1)]
        for first in (preferred, preferred.other):
            steps = _steps_through(centers, first, width, duration, swing_height, start_index)
            if not any(step_flags(left, right, steps, limits)):
                return steps
    raise InputError(what, (left, right), f"a motion reachable within the step limits {limits}")


def _heading(yaw: float) -> Tuple[float, float]:
    return math.cos(yaw), math.sin(yaw)


def _steps_needed(amount: float, per_step: float) -> int:
    """Fewest steps covering ``|amount|`` at most ``per_step`` at a time (ties do not add a step)."""
    return math.ceil(abs(amount) / per_step - 1e-9)


def _walk_straight(left: FootPose, right: FootPose, distance: float, step_length: float, sideways: bool,
                   width: float, duration: float, swing_height: float, start_index: int,
                   limits: StepLimits) -> List[Step]:
    """Move the stance center by ``distance`` [m] along its heading (or to its left if ``sideways``)."""
    check_finite("distance", distance)
    check_positive("step_length", step_length)
    x0, y0, _, yaw0 = stance_center(left, right)
    if distance == 0.0:
        return []
    hx, hy = _heading(yaw0)
    dx, dy = (-hy, hx) if sideways else (hx, hy)
    return _generate(left, right, lambda s: (x0 + s * distance * dx, y0 + s * distance * dy, yaw0),
                     _steps_needed(distance, step_length), width, duration, swing_height,
                     start_index, limits, "distance")


def walk_forward(
    left: FootPose,
    right: FootPose,
    distance: float,
    step_length: float = 0.2,
    width: float = 0.2,
    duration: float = 0.8,
    swing_height: float = 0.05,
    start_index: int = 1,
    limits: StepLimits = StepLimits(),
) -> List[Step]:
    """Walk straight ahead by ``distance`` [m] (negative: backward) with steps of at most ``step_length`` [m].

    Args:
        left: Current left sole pose.
        right: Current right sole pose.
        distance: Signed distance along the current heading [m].
        step_length: Largest center advance per step [m].
        width: Lateral distance between the soles [m].
        duration: Duration of each step [s].
        swing_height: Swing apex [m].
        start_index: Index of the first step.
        limits: Step limits the plan must satisfy.

    Raises:
        ParameterError: On a non-positive step length, width or duration.
        InputError: If no plan within the limits exists.
    """
    return _walk_straight(left, right, distance, step_length, False, width, duration, swing_height,
                          start_index, limits)


def walk_backward(left: FootPose, right: FootPose, distance: float, step_length: float = 0.1,
                  **kwargs) -> List[Step]:
    """Walk straight back by ``distance`` [m] (>= 0); see :func:`walk_forward` for the other arguments."""
    return walk_forward(left, right, -distance, step_length, **kwargs)


def walk_sideways(
    left: FootPose,
    right: FootPose,
    distance: float,
    step_length: float = 0.1,
    width: float = 0.2,
    duration: float = 0.8,
    swing_height: float = 0.05,
    start_index: int = 1,
    limits: StepLimits = StepLimits(),
) -> List[Step]:
    """Sidestep by ``distance`` [m] to the left (negative: right), at most ``step_length`` [m] per step.

    Same arguments as :func:`walk_forward`.
    """
    return _walk_straight(left, right, distance, step_length, True, width, duration, swing_height,
                          start_index, limits)


def turn_in_place(
    left: FootPose,
    right: FootPose,
    angle: float,
    max_step_yaw: float = 0.4,
    width: float = 0.2,
    duration: float = 0.8,
    swing_height: float = 0.05,
    start_index: int = 1,
    limits: StepLimits = StepLimits(),
) -> List[Step]:
    """Turn about the stance center by ``angle`` [rad] (positive: left), at most ``max_step_yaw`` per step.

    The final yaw of both soles is the initial mean yaw plus ``angle`` (not wrapped).
    """
    check_finite("angle", angle)
    check_positive("max_step_yaw", max_step_yaw)
    x0, y0, _, yaw0 = stance_center(left, right)
    if angle == 0.0:
        return []
    return _generate(left, right, lambda s: (x0, y0, yaw0 + s * angle),
                     _steps_needed(angle, max_step_yaw), width, duration, swing_height,
                     start_index, limits, "angle")


def walk_arc(
    left: FootPose,
    right: FootPose,
    radius: float,
    angle: float,
    step_length: float = 0.2,
    max_step_yaw: float = 0.4,
    width: float = 0.2,
    duration: float = 0.8,
    swing_height: float = 0.05,
    start_index: int = 1,
    limits: StepLimits = StepLimits(),
) -> List[Step]:
    """Walk forward along a circular arc of ``radius`` [m] (> 0) turning by ``angle`` [rad] (positive: left).

    The center frame travels ``radius * |angle|`` [m] along the arc, at most ``step_length``
    [m] and ``max_step_yaw`` [rad] per step. Other arguments as :func:`walk_forward`.
    """
    check_positive("radius", radius)
    check_finite("angle", angle)
    check_positive("step_length", step_length)
    check_positive("max_step_yaw", max_step_yaw)
    x0, y0, _, yaw0 = stance_center(left, right)
    if angle == 0.0:
        return []
    rho = math.copysign(radius, angle)  # signed distance to the turn center, positive to the left
    cx, cy = x0 - rho * math.sin(yaw0), y0 + rho * math.cos(yaw0)

    def pose_at(s: float) -> Pose2:
        yaw = yaw0 + s * angle
        return cx + rho * math.sin(yaw), cy - rho * math.cos(yaw), yaw

    n_min = max(_steps_needed(radius * angle, step_length), _steps_needed(angle, max_step_yaw))
    return _generate(left, right, pose_at, n_min, width, duration, swing_height, start_index, limits, "angle")


def walk_to_pose(
    left: FootPose,
    right: FootPose,
    x: float,
    y: float,
    yaw: float,
    step_length: float = 0.2,
    lateral_step: float = 0.1,
    max_step_yaw: float = 0.4,
    width: float = 0.2,
    duration: float = 0.8,
    swing_height: float = 0.05,
    start_index: int = 1,
    limits: StepLimits = StepLimits(),
) -> List[Step]:
    """Walk so that the stance center ends at (x, y) [m] with yaw ``yaw`` [rad] (world frame).

    The center moves on a straight line while turning uniformly (the shortest way, so the
    final soles have ``yaw`` modulo 2 pi), each step advancing at most ``step_length`` [m]
    forward, ``lateral_step`` [m] sideways and ``max_step_yaw`` [rad]. Other arguments as
    :func:`walk_forward`.
    """
    for name, value in (("x", x), ("y", y), ("yaw", yaw)):
        check_finite(name, value)
    check_positive("step_length", step_length)
    check_positive("lateral_step", lateral_step)
    check_positive("max_step_yaw", max_step_yaw)
    x0, y0, z0, yaw0 = stance_center(left, right)
    turn = wrap_angle(yaw - yaw0)
    if math.hypot(x - x0, y - y0) < 1e-12 and abs(turn) < 1e-12:
        return []
    forward, lateral, _ = relative_offset(FootPose((x0, y0, z0), yaw0), (x, y, z0))
    n_min = max(
        _steps_needed(forward, step_length),
        _steps_needed(lateral, lateral_step),
        _steps_needed(turn, max_step_yaw),
    )
    return _generate(left, right, lambda s: (x0 + s * (x - x0), y0 + s * (y - y0), yaw0 + s * turn),
                     n_min, width, duration, swing_height, start_index, limits, "pose")
