"""Swing-foot trajectory from lift-off to touchdown, with the Atlas swing-height definition.

The foot moves from its lift-off pose to its touchdown pose along

    p(s) = p0 + (p1 - p0) b(s) + swing_height * a(s) * z

with ``s`` in [0, 1] the normalised swing time, ``b(s) = 10 s^3 - 15 s^4 + 6 s^5``
(quintic blend: zero velocity and acceleration at both ends) and the apex bump
``a(s) = 64 s^3 (1 - s)^3`` (also zero velocity and acceleration at both ends,
``a(1/2) = 1``). Hence at mid-swing the sole is ``swing_height`` above the midpoint
of the lift-off and touchdown positions (Atlas ``swing_height``); on flat ground that
is the apex. Yaw follows the same blend along the shortest angular path.

Derivatives are returned with respect to ``s``; divide by the swing duration [s]
(and its square for accelerations) to get time derivatives.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from walk_mpc.core._validate import finite_number, finite_vector
from walk_mpc.core.errors import InputError


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
            lift-off and touchdown positions [m], >= 0.
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
    b, db, ddb = blend(s)
    a, da, dda = apex_bump(s)
    delta = p1 - p0
    position = p0 + delta * b
    velocity = delta * db
    acceleration = delta * ddb
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
    s2 = s * s
    b = s2 * s * (10.0 - 15.0 * s + 6.0 * s2)  # blend(s)[0]
    u = s * (1.0 - s)
    a = 64.0 * u**3  # apex_bump(s)[0]
    x0, y0, z0 = start_position
    x1, y1, z1 = end_position
    z = z0 + (z1 - z0) * b
    z += swing_height * a
    return (x0 + (x1 - x0) * b, y0 + (y1 - y0) * b, z), start_yaw + wrap_angle(end_yaw - start_yaw) * b
