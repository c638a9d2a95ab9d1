"""Swing-foot trajectory from lift-off to touchdown, with the Atlas swing-height definition.

The foot moves from its lift-off pose to its touchdown pose along

    p(s) = p0 + (p1 - p0) b(s) + swing_height * a(s) * z

with ``s`` in [0, 1] the normalised swing time, ``b(s) = 10 s^3 - 15 s^4 + 6 s^5``
(quintic blend: zero velocity and acceleration at both ends) and the apex bump
``a(s) = 64 s^3 (1 - s)^3`` (also zero velocity and acceleration at both ends,
``a(1/2) = 1``). Hence at mid-swing the sole is ``swing_height`` above the midpoint
of the lift-off and touchdown positions (Atlas ``swing_height``); on flat ground that
is the apex. Yaw follows the same blend along the shortest angular path.

**Height change** (stairs, known terrain: lift-off and touchdown at different heights, ``dz = z1 - z0``):
the sole changes height within a part :data:`HEIGHT_CHANGE_SPAN` of the swing, first going up (it rises,
then moves over the edge), last going down (it moves over the edge, then descends), and it moves
horizontally within the swing but a part ``w = MAX_HORIZONTAL_DELAY * min(1, |dz| / HEIGHT_FOR_FULL_DELAY)``
of it, the first going up, the last going down (:data:`MAX_HORIZONTAL_DELAY`, :data:`HEIGHT_FOR_FULL_DELAY`):

    p(s) = p0 + (p1 - p0)_xy b(g(s)) + dz h(s) z + swing_height * a(s) * z,
    up:   h(s) = b(min(1, s / span)),           g(s) = max(0, (s - w) / (1 - w)),
    down: h(s) = b(max(0, (s - 1 + span) / span)), g(s) = min(1, s / (1 - w)).

So a tread edge between the soles is crossed well above the upper tread (``test_swing``: Talos' 0.25 m steps
onto 10 cm stairs, swing_height 5 cm: the toe going up, the heel going down at least 2 cm above it, for an
edge anywhere between the stance sole's toe and the landing sole's heel, down to 5 mm before it; the heel
cannot clear an edge right at the landing heel: the sole ends its descent there). At mid-swing the sole is
``swing_height`` above the higher of the lift-off and touchdown soles, the midpoint's when they are level:
everything is continuous in ``dz`` (and equal to the level swing, bit for bit, at ``dz == 0``); position,
velocity and acceleration stay continuous in ``s`` (``b`` has zero velocity and acceleration at both ends).
:func:`height_blend` is ``h``.

Derivatives are returned with respect to ``s``; divide by the swing duration [s]
(and its square for accelerations) to get time derivatives.

**Re-planned mid-swing** (:func:`retarget_swing`): when a new plan moves the touchdown of the step in the
air (step adjustment), the foot leaves the trajectory it was following at ``s_r`` for the new touchdown
``p1'`` without a jump: ``p'(s) = p(s) + (p1' - p1) b((s - s_r) / (1 - s_r))`` for ``s > s_r`` (``p`` the
previous trajectory, itself possibly re-planned; ``b`` has zero velocity and acceleration at both ends:
position, velocity and acceleration stay continuous at ``s_r``), the yaw alike. The timeline's swinging
phase carries it (:class:`RetargetedPhase`); :func:`phase_swing_position_yaw` evaluates either kind.
A touchdown that moved in time (step timing adaptation: the single support shortened or lengthened)
re-times the rest of the previous trajectory: from the re-plan on, the previous swing is followed at its
progress ``sigma = s_b + (1 - s_b) (r u + (1 - r) u^3)`` (``u = (s - s_r) / (1 - s_r)``, ``s_b`` the previous
swing's progress at the re-plan, ``r`` the new over the old time left, below 1.5: monotonic): the foot's
velocity and acceleration stay continuous at the re-plan, it lands at the new touchdown time at rest.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Optional

import numpy as np

from walk_mpc.core._validate import finite_number, finite_vector
from walk_mpc.core.errors import InputError
from walk_mpc.core.walk.timeline import Phase, PhaseKind, Timeline


@dataclasses.dataclass(frozen=True)
class SwingSample:
    """Swing-foot pose and its derivatives with respect to normalised time ``s``.

    Attributes:
        position: Sole position in the world frame [m], shape (3,).
        yaw: Sole yaw in the world frame [rad] (continuous from ``start_yaw``, not wrapped).
        velocity: d position / d s [m], shape (3,).
        yaw_velocity: d yaw / d s [rad].
        acceleration: d^2 position / d s^2 [m], shape (3,).
        yaw_acceleration: d^2 yaw / d s^2 [rad].
        s: The (clamped) normalised time used.
    """

    position: np.ndarray
    yaw: float
    velocity: np.ndarray
    yaw_velocity: float
    acceleration: np.ndarray
    yaw_acceleration: float
    s: float


def wrap_angle(angle: float) -> float:
    """Angle wrapped to [-pi, pi) [rad]."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def blend(s: float) -> tuple[float, float, float]:
    """Quintic blend b(s) = 10 s^3 - 15 s^4 + 6 s^5 and its first two derivatives."""
    s2 = s * s
    return (
        s2 * s * (10.0 - 15.0 * s + 6.0 * s2),
        30.0 * s2 * (1.0 - s) ** 2,
        60.0 * s * (1.0 - s) * (1.0 - 2.0 * s),
    )


#: Part of the swing [-] in which the sole changes height when lift-off and touchdown are at different
#: heights (the first part going up, the last going down; module docstring).
HEIGHT_CHANGE_SPAN = 1.0 / 3.0
#: Part of the swing [-] without horizontal motion on a height change of :data:`HEIGHT_FOR_FULL_DELAY` or
#: more (the first going up, the last going down; proportionally less on smaller changes).
MAX_HORIZONTAL_DELAY = 0.2
#: Height change [m] from which the horizontal motion is delayed by :data:`MAX_HORIZONTAL_DELAY`.
HEIGHT_FOR_FULL_DELAY = 0.05


def _warp(s: float, start: float, length: float) -> tuple[float, float, float]:
    """``b((s - start) / length)`` clamped to [0, 1] and its first two derivatives with respect to ``s``."""
    u = (s - start) / length
    if u <= 0.0:
        return 0.0, 0.0, 0.0
    if u >= 1.0:
        return 1.0, 0.0, 0.0
    h, dh, ddh = blend(u)
    return h, dh / length, ddh / (length * length)


def height_blend(s: float, rise: float) -> tuple[float, float, float]:
    """Vertical blend ``h(s)`` of a swing changing height by ``rise`` [m] (module docstring) and its first
    two derivatives with respect to ``s`` in [0, 1]: within the first :data:`HEIGHT_CHANGE_SPAN` of the
    swing going up (``rise > 0``), within the last going down, ``b(s)`` when level (``rise == 0``)."""
    if rise == 0.0:
        return blend(s)
    span = HEIGHT_CHANGE_SPAN
    return _warp(s, 0.0 if rise > 0.0 else 1.0 - span, span)


def horizontal_blend(s: float, rise: float) -> tuple[float, float, float]:
    """Horizontal (and yaw) blend ``b(g(s))`` of a swing changing height by ``rise`` [m] (module docstring)
    and its first two derivatives with respect to ``s`` in [0, 1]; ``b(s)`` when level."""
    if rise == 0.0:
        return blend(s)
    delay = min(MAX_HORIZONTAL_DELAY, abs(rise) / HEIGHT_FOR_FULL_DELAY * MAX_HORIZONTAL_DELAY)
    return _warp(s, delay if rise > 0.0 else 0.0, 1.0 - delay)


def apex_bump(s: float) -> tuple[float, float, float]:
    """Bump a(s) = 64 s^3 (1 - s)^3 (a(1/2) = 1) and its first two derivatives."""
    u = s * (1.0 - s)
    return (
        64.0 * u**3,
        192.0 * u * u * (1.0 - 2.0 * s),
        384.0 * u * (1.0 - 5.0 * s + 5.0 * s * s),
    )


def swing_pose(
    start_position,
    start_yaw: float,
    end_position,
    end_yaw: float,
    swing_height: float,
    s: float,
) -> SwingSample:
    """Swing-foot pose at normalised swing time ``s``.

    Args:
        start_position: Lift-off sole position in the world frame [m].
        start_yaw: Lift-off sole yaw [rad].
        end_position: Touchdown sole position in the world frame [m].
        end_yaw: Touchdown sole yaw [rad].
        swing_height: Height of the sole at mid-swing above the midpoint of the
            lift-off and touchdown positions [m], >= 0 (above the higher of them when they differ
            in height: module docstring).
        s: Normalised swing time; values outside [0, 1] are clamped (the foot
            rests at its lift-off or touchdown pose).

    Returns:
        The pose and its derivatives with respect to ``s``.

    Raises:
        InputError: On non-finite inputs or a negative swing height.
    """
    p0 = finite_vector("start_position", start_position, 3)
    p1 = finite_vector("end_position", end_position, 3)
    yaw0 = finite_number("start_yaw", start_yaw)
    yaw1 = finite_number("end_yaw", end_yaw)
    height = finite_number("swing_height", swing_height)
    if height < 0.0:
        raise InputError("swing_height", swing_height, "a height >= 0 m")
    s = min(1.0, max(0.0, finite_number("s", s)))
    delta = p1 - p0
    rise = float(delta[2])
    b, db, ddb = horizontal_blend(s, rise)
    a, da, dda = apex_bump(s)
    position = p0 + delta * b
    velocity = delta * db
    acceleration = delta * ddb
    if rise != 0.0:  # a height change: the sole's height on its own blend (module docstring)
        h, dh, ddh = height_blend(s, rise)
        position[2] = p0[2] + delta[2] * h
        velocity[2] = delta[2] * dh
        acceleration[2] = delta[2] * ddh
    position[2] += height * a
    velocity[2] += height * da
    acceleration[2] += height * dda
    dyaw = wrap_angle(yaw1 - yaw0)
    return SwingSample(
        position=position,
        yaw=yaw0 + dyaw * b,
        velocity=velocity,
        yaw_velocity=dyaw * db,
        acceleration=acceleration,
        yaw_acceleration=dyaw * ddb,
        s=s,
    )


def swing_position_yaw(
    start_position: tuple[float, float, float],
    start_yaw: float,
    end_position: tuple[float, float, float],
    end_yaw: float,
    swing_height: float,
    s: float,
) -> tuple[tuple[float, float, float], float]:
    """Position and yaw of :func:`swing_pose` only, on trusted inputs (no validation, no derivatives).

    For hot paths whose inputs are already validated (e.g. the poses of a
    :class:`~walk_mpc.core.walk.timeline.Timeline`): finite 3-sequences and floats, ``swing_height >= 0``
    and ``s`` in [0, 1]. The results are bit-identical to ``swing_pose(...).position`` and ``.yaw``.

    Returns:
        ``((x, y, z), yaw)`` in the world frame [m], [rad].
    """
    x0, y0, z0 = start_position
    x1, y1, z1 = end_position
    if z1 == z0:
        s2 = s * s
        b = s2 * s * (10.0 - 15.0 * s + 6.0 * s2)  # blend(s)[0]
        z = z0 + (z1 - z0) * b
    else:  # a height change (module docstring)
        b = horizontal_blend(s, z1 - z0)[0]
        z = z0 + (z1 - z0) * height_blend(s, z1 - z0)[0]
    u = s * (1.0 - s)
    a = 64.0 * u**3  # apex_bump(s)[0]
    z += swing_height * a
    return (x0 + (x1 - x0) * b, y0 + (y1 - y0) * b, z), start_yaw + wrap_angle(end_yaw - start_yaw) * b


@dataclasses.dataclass(frozen=True)
class SwingRetarget:
    """A swing re-planned mid-swing (module docstring).

    Attributes:
        s: Normalised swing time of the re-plan, in (0, 1).
        base: The swinging phase the foot followed until then (its touchdown the previous one).
        base_s: The base phase's normalised time at the re-plan when the touchdown moved in time (the rest
            of the base swing re-timed, module docstring); None: the same times.
        rate: The time left to touchdown at the re-plan, new over old (with ``base_s``).
    """

    s: float
    base: Phase
    base_s: Optional[float] = None
    rate: float = 1.0

    def base_progress(self, s: float) -> float:
        """The base phase's normalised time at this phase's ``s`` >= ``self.s`` (``s`` itself when the
        touchdown did not move in time)."""
        if self.base_s is None:
            return s
        u = min(1.0, max(0.0, (s - self.s) / (1.0 - self.s)))
        r = self.rate
        return min(1.0, self.base_s + (1.0 - self.base_s) * (r * u + (1.0 - r) * u ** 3))


@dataclasses.dataclass(frozen=True)
class RetargetedPhase(Phase):
    """A single-support phase whose swing was re-planned mid-swing (:func:`retarget_swing`)."""

    retarget: Optional[SwingRetarget] = None


def phase_swing_tilt(phase: Phase, s: float) -> tuple[float, float]:
    """Roll and pitch [rad] of the swing sole at normalised time ``s`` in [0, 1] of a single-support
    ``phase``: from its lift-off ground's tilt to its touchdown ground's (their normals,
    :attr:`~walk_mpc.core.walk.timeline.FootPose.tilt`) on the horizontal blend (as the yaw), so that it lands
    flat on sloped ground; ``(0.0, 0.0)`` exactly between level grounds."""
    start, end = phase.swing_start, phase.foot(phase.swing_foot)
    if start.level and end.level:
        return 0.0, 0.0
    (roll0, pitch0), (roll1, pitch1) = start.tilt, end.tilt
    b = horizontal_blend(s, end.position[2] - start.position[2])[0]
    return roll0 + (roll1 - roll0) * b, pitch0 + (pitch1 - pitch0) * b


def phase_swing_position_yaw(phase: Phase, s: float) -> tuple[tuple[float, float, float], float]:
    """Swing foot position and yaw at normalised time ``s`` in [0, 1] of a single-support ``phase`` of a
    timeline (its ``swing_start`` to its touchdown pose, re-planned where it carries a
    :class:`SwingRetarget`)."""
    pose = phase.foot(phase.swing_foot)
    retarget = getattr(phase, "retarget", None)
    if retarget is None:
        start = phase.swing_start
        return swing_position_yaw(start.position, start.yaw, pose.position, pose.yaw, phase.swing_height, s)
    if s <= retarget.s:
        return phase_swing_position_yaw(retarget.base, s if retarget.base_s is None else
                                        retarget.base.progress(phase.t_start + s * phase.duration))
    point, yaw = phase_swing_position_yaw(retarget.base, retarget.base_progress(s))
    g = blend((s - retarget.s) / (1.0 - retarget.s))[0]
    old = retarget.base.foot(phase.swing_foot)
    moved = tuple(p + (n - o) * g for p, n, o in zip(point, pose.position, old.position))
    return moved, yaw + wrap_angle(pose.yaw - old.yaw) * g


def retarget_swing(timeline: Timeline, previous: Optional[Timeline], t: float,
                   replan: bool = True) -> Timeline:
    """``timeline`` (a new plan, or a new correction of it) replacing ``previous`` at time ``t`` [s], with
    the step in the air re-planned from where its foot is (module docstring).

    When both timelines swing the same step at ``t`` (same index, foot and phase times): a touchdown that
    moved gives the phase a :class:`SwingRetarget` at the phase's progress (only with ``replan``); an
    unchanged one keeps the re-plan ``previous`` carried. The same step with the same lift-off and another
    touchdown time (step timing adaptation, only with ``replan``): a re-timed :class:`SwingRetarget`.
    Otherwise ``timeline`` itself is returned.
    """
    if previous is None or previous is timeline:
        return timeline
    index = timeline.phase_index_at(t)
    phase = timeline.phases[index]
    if phase.kind is not PhaseKind.SINGLE:
        return timeline
    before = previous.phase_at(t)
    if (before.kind is not PhaseKind.SINGLE or before.step_index != phase.step_index
            or before.swing_foot is not phase.swing_foot or before.t_start != phase.t_start):
        return timeline
    foot = phase.swing_foot
    if before.t_end != phase.t_end:  # re-timed (step timing adaptation)
        s, base_s = phase.progress(t), before.progress(t)
        if not (replan and 0.0 < s < 1.0 and 0.0 < base_s < 1.0):
            return timeline
        rate = (phase.t_end - t) / (before.t_end - t)
        retarget = SwingRetarget(s, before, base_s, rate)
    elif before.foot(foot) == phase.foot(foot):
        retarget = getattr(before, "retarget", None)
    else:
        s = phase.progress(t)
        retarget = SwingRetarget(s, before) if replan and 0.0 < s < 1.0 else None
    if retarget is None:
        return timeline
    fields = {f.name: getattr(phase, f.name) for f in dataclasses.fields(Phase)}
    result = copy.copy(timeline)
    result.phases = timeline.phases[:index] + (RetargetedPhase(**fields, retarget=retarget),) \
        + timeline.phases[index + 1:]
    return result
