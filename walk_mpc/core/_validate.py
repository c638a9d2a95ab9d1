"""Input validation helpers shared by the core modules: finite numbers and fixed-size vectors."""

from __future__ import annotations

import math

import numpy as np

from walk_mpc.core.errors import InputError, ShapeError


def finite_number(name: str, value) -> float:
    """``value`` as a float.

    Raises:
        InputError: If ``value`` is not a number, or is NaN or infinite.
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(name, value, "a finite number") from None
    if not math.isfinite(number):
        raise InputError(name, value, "a finite number")
    return number


def finite_vector(name: str, value, size: int, *, read_only: bool = False) -> np.ndarray:
    """``value`` as a float array of shape ``(size,)`` with finite entries.

    Args:
        name: Name of the argument, for the error message.
        value: Anything numpy turns into an array.
        size: Expected length.
        read_only: Return a non-writeable copy (the caller's array is never aliased); otherwise the
            array may be ``value`` itself.

    Raises:
        InputError: If ``value`` is not numeric or has NaN/inf entries.
        ShapeError: If its shape is not ``(size,)``.
    """
    try:
        array = np.array(value, dtype=float) if read_only else np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(name, value, f"{size} numbers") from None
    if array.shape != (size,):
        raise ShapeError(name, array.shape, (size,))
    if not np.all(np.isfinite(array)):
        raise InputError(name, array, "finite values (no NaN/inf)")
    if read_only:
        array.setflags(write=False)
    return array
