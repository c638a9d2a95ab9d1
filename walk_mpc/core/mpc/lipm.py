"""Linear inverted pendulum (LIPM) with constant CoM height, jerk-controlled, exactly discretised.

Per horizontal axis the state is ``x = (c, c', c'')`` (CoM position [m], velocity [m/s],
acceleration [m/s^2]) and the control is the CoM jerk ``j`` [m/s^3], held constant over a
sampling interval. The zero-moment point is ``z = c - (h / g) c''`` with ``h`` the CoM height
above the ground and ``g`` the gravity. For a piecewise-constant jerk the discretisation is
exact (no approximation):

    x_{k+1} = A(T) x_k + B(T) j_k,  A = [[1, T, T^2/2], [0, 1, T], [0, 0, 1]],  B = [T^3/6, T^2/2, T].

In the ZMP coordinates ``(z, c', c'')`` of the smpc_solver this is the same system with
``B_z = T^3/6 - (h/g) T``. The x and y axes share the matrices; states are stored as arrays of
shape (3, 2): rows (position, velocity, acceleration), columns (x, y).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Tuple

import numpy as np

from walk_mpc.core.errors import InputError, ShapeError
from walk_mpc.core.params import check_positive


@dataclasses.dataclass(frozen=True)
class LipmModel:
    """Constant-height LIPM.

    Attributes:
        com_height: CoM height above the ground [m].
        gravity: Gravity acceleration [m/s^2].
    """

    com_height: float = 0.877
    gravity: float = 9.81

    def __post_init__(self) -> None:
        check_positive("com_height", self.com_height)
        check_positive("gravity", self.gravity)

    @property
    def zeta(self) -> float:
        """Ratio h / g [s^2] of the ZMP equation ``z = c - zeta c''``."""
        return self.com_height / self.gravity

    @property
    def omega(self) -> float:
        """Natural frequency sqrt(g / h) [1/s]."""
        return math.sqrt(self.gravity / self.com_height)

    @property
    def zmp_row(self) -> np.ndarray:
        """Output row ``D`` with ``z = D x`` (shape (3,))."""
        return np.array([1.0, 0.0, -self.zeta])

    @staticmethod
    def discretize(dt: float) -> Tuple[np.ndarray, np.ndarray]:
        """Exact discretisation over an interval of ``dt`` [s] with constant jerk.

        Returns:
            ``(A, B)``: the (3, 3) state matrix and the (3,) jerk input vector.

        Raises:
            InputError: If ``dt`` is not finite and > 0.
        """
        if not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0.0):
            raise InputError("dt", dt, "a finite duration > 0 [s]")
        a = np.array([[1.0, dt, 0.5 * dt * dt], [0.0, 1.0, dt], [0.0, 0.0, 1.0]])
        b = np.array([dt**3 / 6.0, 0.5 * dt * dt, dt])
        return a, b

    def zmp(self, state: np.ndarray) -> np.ndarray:
        """ZMP [m] of a state of shape (3,) or (3, k): ``c - zeta c''``."""
        state = np.asarray(state, dtype=float)
        return state[0] - self.zeta * state[2]

    def integrate(self, state: np.ndarray, jerk: np.ndarray, dt: float) -> np.ndarray:
        """State after ``dt`` [s] of constant ``jerk`` (exact).

        Args:
            state: Shape (3,) or (3, k) (columns are axes).
            jerk: Scalar or shape (k,) [m/s^3].
            dt: Duration [s], >= 0.

        Returns:
            The new state, same shape as ``state``.
        """
        state = check_state(state, allow_1d=True)
        if dt == 0.0:
            return state.copy()
        return integrate_state(state, np.asarray(jerk, dtype=float), dt)


def integrate_state(state: np.ndarray, jerk: np.ndarray, dt: float) -> np.ndarray:
    """Unchecked exact integration: state (3,) or (3, k) after ``dt`` [s] > 0 of constant ``jerk``."""
    a, b = LipmModel.discretize(dt)
    return a @ state + np.multiply.outer(b, jerk)


def check_state(state, name: str = "state", allow_1d: bool = False) -> np.ndarray:
    """Return ``state`` as a finite float array of shape (3, 2) (or (3,) if ``allow_1d``).

    Raises:
        ShapeError: On a wrong shape.
        InputError: On non-finite entries.
    """
    try:
        array = np.array(state, dtype=float)
    except (TypeError, ValueError):
        raise InputError(name, state, "an array of numbers") from None
    ok = array.shape == (3, 2) or (allow_1d and array.ndim >= 1 and array.shape[0] == 3 and array.ndim <= 2)
    if not ok:
        raise ShapeError(name, array.shape, "(3, 2): rows position/velocity/acceleration, columns x/y")
    if not np.all(np.isfinite(array)):
        raise InputError(name, state, "finite values")
    return array
