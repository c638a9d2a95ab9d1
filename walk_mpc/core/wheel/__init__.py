"""Wheels: the upkie-style wheel contact observer (seed 002) and a simulated wheel to test it.

Modules:
    contact: :class:`WheelContact`, apparent-inertia contact observer with hysteresis.
    plant: :func:`simulate_wheel`, a wheel rolling on the ground and spinning in the air.
"""
