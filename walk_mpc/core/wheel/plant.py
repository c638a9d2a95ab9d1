"""Simulated wheel for testing contact observers: rolling on the ground, spinning freely in the air."""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np


def simulate_wheel(
    rng: np.random.Generator,
    duration: float = 3.0,
    dt: float = 1e-3,
    air_intervals: Iterable[tuple[float, float]] = ((2.0, math.inf),),
    ground_inertia: float = 0.01,
    air_inertia: float = 3e-4,
    air_damping: float = 5e-4,
    max_acceleration: float = 20.0,
    torque_noise: float = 0.005,
    velocity_noise: float = 0.02,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Measured (torque, velocity, in_air) of a wheel driven by a smooth random torque.

    On the ground the torque ``ground_inertia * a(t)`` makes the robot roll with acceleration
    ``a(t)`` (sum of three random sinusoids of 0.3-2 Hz: accelerating, decelerating). The same
    torque command goes on when the wheel is in the air, where it spins the bare wheel
    (``air_inertia``, ``air_damping``). At touchdown the wheel stops (impact) and rolls again.

    Args:
        rng: Random generator (the only source of randomness: same seed, same arrays).
        duration: Length of the simulation [s].
        dt: Sampling period [s].
        air_intervals: ``(start, end)`` times [s] during which the wheel is in the air.
        ground_inertia: Robot inertia reflected at the wheel on the ground (2.5 kg at a 6 cm
            wheel radius by default) [kg m^2].
        air_inertia: Inertia of the wheel and rotor alone [kg m^2].
        air_damping: Viscous friction of the free wheel [N m s/rad].
        max_acceleration: Peak rolling acceleration on the ground [rad/s^2].
        torque_noise: Standard deviation of the torque measurement noise [N m].
        velocity_noise: Standard deviation of the velocity measurement noise [rad/s].

    Returns:
        Measured torque [N m], measured velocity [rad/s] and the in-air flag, one entry per sample
        at times ``k * dt``.
    """
    n = round(duration / dt)
    t = np.arange(n) * dt
    freqs = rng.uniform(0.3, 2.0, 3)
    phases = rng.uniform(0.0, 2.0 * np.pi, 3)
    amps = rng.uniform(0.3, 1.0, 3)
    amps *= max_acceleration / amps.sum()
    acc = sum(a * np.sin(2.0 * np.pi * f * t + ph) for a, f, ph in zip(amps, freqs, phases, strict=True))
    torque_cmd = ground_inertia * acc
    in_air = np.zeros(n, dtype=bool)
    for t0, t1 in air_intervals:
        in_air |= (t >= t0) & (t < t1)
    decay = math.exp(-air_damping * dt / air_inertia)
    v = 0.0
    vel = np.empty(n)
    for k in range(n):
        vel[k] = v
        if in_air[k]:
            v_ss = torque_cmd[k] / air_damping
            v = v_ss + (v - v_ss) * decay
        else:
            if k > 0 and in_air[k - 1]:
                v = 0.0
            v += acc[k] * dt
    torque = torque_cmd + torque_noise * rng.standard_normal(n)
    velocity = vel + velocity_noise * rng.standard_normal(n)
    return torque, velocity, in_air
