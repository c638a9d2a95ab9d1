"""DAQP backend: the condensed jerk QP of both axes solved by DAQP (dual active set), an independent
cross-check of the ``exact`` backend.

Variables: the jerks ``j`` of both axes, whitened and centred on the unconstrained optimum: ``u = R j +
R^-T g`` per axis, with ``H = R^T R`` the (constant) jerk Hessian and ``g`` the gradient at zero jerk, so
the cost is ``0.5 |u|^2`` (plus a constant). Constraints: ``lower_i <= R_i^T (z* + G u)_i <= upper_i``
with ``z*`` the unconstrained ZMP, ``G = Uz R^-1`` and ``R_i`` the rotation of box ``i``. Variables:
``u_x`` then ``u_y``; constraint rows interleaved per interval (``2 i + a``: the x' and y' bounds of box
``i``, as in the exact backend).

One ``daqp.Model`` workspace is set up at construction; a tick updates the bounds and the warm start,
and the constraint matrix only when the box angles changed (never on a walk whose boxes keep one
orientation, e.g. the smpc reference walk). The Hessian being the identity and the linear cost zero,
DAQP has nothing to factorise and only the bounds to transform. The warm start is the previous active
set shifted by one interval, each bound on its side (DAQP's sense flags: 1 active at the upper bound,
1 + 2 at the lower bound), read from the signs of the multipliers. Given the same data and warm start,
a solve gives the same result bit for bit whatever the workspace solved before (``save``/``restore``).
DAQP's data (bounds, warm start, constraint matrix) and the plan from its solution are computed by
compiled (numba) loops when numba is installed, with numpy otherwise.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cholesky, solve_triangular

from walk_mpc.core.mpc.status import PlanStatus

#: DAQP sense flags of a bound whose multiplier has sign -1, 0, +1: active at its lower bound
#: (ACTIVE | LOWER = 1 + 2), inactive, active at its upper bound (ACTIVE = 1).
_SENSE_OF_SIGN = np.array([3, 0, 1], dtype=np.intc)
_SETTINGS = {"primal_tol": 1e-12, "dual_tol": 1e-12, "eps_prox": 0.0}

#: Use the compiled loops (:func:`_prepare`, :func:`_finish`) when numba is installed (tests switch them
#: off to exercise the numpy implementation).
USE_KERNEL = True


class DaqpBackend:
    """Condensed QP solved by a persistent DAQP workspace, warm-started with the shifted active set (see
    the module docstring)."""

    def __init__(self, mpc) -> None:
        import daqp  # imported here so that the package is only needed for this backend

        cond = mpc.condensed
        n = cond.horizon
        self.cond = cond
        self.n = n
        self.shift = bool(mpc.shift_warm_start)
        r_inv = solve_triangular(cholesky(cond.hessian), np.eye(n))  # j = R^-1 (u - R^-T g)
        g = cond.uz @ r_inv
        self._g2 = np.repeat(g, 2, axis=0)  # ZMP = z* + G u; row i of G twice
        # [x0; zref] (3 + N, 2) -> rows 0..N-1: whitened gradient R^-T g, rows N..2N-1: unconstrained ZMP
        # z* = Pz x0 - G R^-T g.
        grad_map = np.hstack([r_inv.T @ cond.gx, -cond.weights.zmp * (r_inv.T @ cond.uz.T)])
        self._in_map = np.vstack([grad_map, np.hstack([cond.pz, np.zeros((n, n))]) - g @ grad_map])
        # [x0; R j] (3 + N, 2) -> (5N, 2) rows jerk, c, v, a, z (as the exact backend).
        self._out_map = np.vstack([np.hstack([np.zeros((n, 3)), r_inv]),
                                   np.hstack([cond.outputs[:, :3], cond.outputs[:, 3:] @ r_inv])])
        self._rhs = np.zeros((3 + n, 2))
        # Constraint matrix A[2 i + a, b N + k] = G[i, k] R_i^T[a, b], for the box angles (see _set_angles).
        self._a = np.zeros((2 * n, 2 * n))
        self._rot = np.zeros((n, 2, 2))  # R_i^T
        self._kernels = _load_kernels() if USE_KERNEL and mpc.params.compiled_kernels else None
        self._set_angles(np.zeros(n))
        self._zeros = np.zeros(10 * n)
        self._model = daqp.Model()
        infinite = np.full(2 * n, 1e30)
        flag = self._model.setup(np.eye(2 * n), np.zeros(2 * n), self._a, infinite, -infinite,
                                 np.zeros(2 * n, dtype=np.intc))
        flag = flag[0] if isinstance(flag, tuple) else flag
        if flag < 0:
            raise RuntimeError(f"daqp setup failed ({flag})")
        self._model.settings = _SETTINGS
        if self._kernels is not None:
            # The maps transposed (the loops accumulate rows: contiguous, vectorised), and scratch arrays.
            self._in_map_t = np.ascontiguousarray(self._in_map.T)
            self._out_map_t = np.ascontiguousarray(self._out_map.T)
            self._work = np.zeros((2, 5 * n))
            self._bounds = np.zeros((2, 2 * n))
            self._no_sense = np.zeros(0, dtype=np.intc)
            # Compile (or load from numba's cache) now rather than at the first tick.
            zeros = np.zeros((n, 2))
            kernels = self._kernels
            kernels[0](self._in_map_t, self._rot, True, np.zeros((3, 2)), zeros, zeros, zeros, self._no_sense,
                       self.shift, self._work, self._bounds, np.empty(2 * n, dtype=np.intc))
            kernels[1](self._out_map_t, np.zeros((3, 2)), np.zeros(2 * n), np.zeros(2 * n), self._work,
                       np.empty((5 * n, 2)), np.empty(2 * n, dtype=np.intc))
        self.reset()

    @property
    def accelerated(self) -> bool:
        """True when the compiled loops are used."""
        return self._kernels is not None

    def _set_angles(self, angles: np.ndarray) -> None:
        """Box rotations and constraint matrix for these angles."""
        if self._kernels is not None:
            self._kernels[2](self._g2, angles, self._rot, self._a)
        else:
            n = self.n
            cos, sin = np.cos(angles), np.sin(angles)
            rot = self._rot
            rot[:, 0, 0] = cos
            rot[:, 0, 1] = sin
            rot[:, 1, 0] = -sin
            rot[:, 1, 1] = cos
            columns = rot.reshape(2 * n, 2)  # row 2 i + a: R_i^T[a, :]
            np.multiply(self._g2, columns[:, :1], out=self._a[:, :n])
            np.multiply(self._g2, columns[:, 1:], out=self._a[:, n:])
        self._angle_bytes = angles.tobytes()
        self._unrotated = not angles.any()  # every box in the world frame: no rotation of z*

    def reset(self) -> None:
        """Forget the warm start."""
        self._sense = None

    def save(self):
        """The warm start (the previous active set), for :meth:`restore`."""
        return self._sense

    def restore(self, saved) -> None:
        """Warm start as :meth:`save` returned it (never modified in place, so not copied)."""
        self._sense = saved

    def solve(self, x0: np.ndarray, preview):
        """Solve one tick; returns (status, (jerk, pos, vel, acc, zmp), iterations)."""
        n = self.n
        angles = preview.angles
        update_a = angles.tobytes() != self._angle_bytes
        if update_a:
            self._set_angles(angles)
        kernels = self._kernels
        if kernels is None:
            data = self._prepare_numpy(x0, preview)
        else:
            bounds, sense = self._bounds, np.empty(2 * n, dtype=np.intc)
            previous = self._no_sense if self._sense is None else self._sense
            feasible = kernels[0](self._in_map_t, self._rot, self._unrotated, x0, preview.zmp_ref,
                                  preview.lower, preview.upper, previous, self.shift, self._work, bounds,
                                  sense)
            data = (bounds[0], bounds[1], sense) if feasible else None
        if data is None:  # a box with lower > upper
            return PlanStatus.INFEASIBLE, None, 0
        model = self._model
        if model.update(A=self._a if update_a else None, bupper=data[0], blower=data[1], sense=data[2]) < 0:
            self.reset()
            return PlanStatus.FAILED, None, 0
        u, _, exitflag, info = model.solve()
        iterations = int(info["iterations"])
        if exitflag < 1:
            self.reset()
            status = PlanStatus.INFEASIBLE if exitflag == -1 else PlanStatus.FAILED
            return status, None, iterations
        if kernels is None:
            out, self._sense = self._finish_numpy(u, info["lam"])
        else:
            out, self._sense = np.empty((5 * n, 2)), np.empty(2 * n, dtype=np.intc)
            if not kernels[1](self._out_map_t, x0, u, info["lam"], self._work, out, self._sense):
                out = None
        if out is None:  # not finite
            self.reset()
            return PlanStatus.FAILED, None, iterations
        out.flags.writeable = False
        return PlanStatus.SOLVED, (out[:n], out[n:2 * n], out[2 * n:3 * n], out[3 * n:4 * n], out[4 * n:]), \
            iterations

    def _prepare_numpy(self, x0: np.ndarray, preview):
        """(upper bounds, lower bounds, warm start) of DAQP's rows, None if a box is empty (numpy)."""
        n = self.n
        lower, upper = preview.lower, preview.upper
        gap = upper - lower
        if gap.reshape(-1)[gap.argmin()] < 0.0:
            return None
        rhs = self._rhs
        rhs[:3] = x0
        rhs[3:] = preview.zmp_ref
        self._grad_free = grad_free = self._in_map @ rhs
        offset = grad_free[n:]  # z*, in the box frames: R_i^T z*
        if not self._unrotated:
            offset = (self._rot @ offset[:, :, None]).reshape(n, 2)
        # Warm start: the previous active set shifted by one interval (a new last interval is inactive).
        sense = np.zeros(2 * n, dtype=np.intc)
        previous = self._sense
        if previous is not None:
            if self.shift:
                sense[:-2] = previous[2:]
            else:
                sense[:] = previous
        return (upper - offset).reshape(2 * n), (lower - offset).reshape(2 * n), sense

    def _finish_numpy(self, u: np.ndarray, lam: np.ndarray):
        """The plan's (5N, 2) rows jerk, c, v, a, z (None if not finite) and the next warm start: each
        bound with a multiplier on its side (DAQP: > 0 upper, < 0 lower)."""
        n, rhs = self.n, self._rhs
        sense = _SENSE_OF_SIGN.take(np.sign(lam).astype(np.intp) + 1)
        np.subtract(u.reshape(2, n).T, self._grad_free[:n], out=rhs[3:])  # R j
        out = self._out_map @ rhs
        if math.isnan(self._zeros @ out.reshape(10 * n)):  # (a NaN or an infinity makes it NaN)
            return None, sense
        return out, sense


def _prepare(in_map_t, rot, unrotated, x0, zref, lower, upper, previous, shift, work, bounds, sense):
    """:meth:`DaqpBackend._prepare_numpy` as one loop (compiled by numba): DAQP's bounds (rows upper,
    lower) and warm start ``sense``; the whitened gradient and z* stay in ``work`` for :func:`_finish`.
    Returns False if a box is empty."""
    n = zref.shape[0]
    for i in range(n):
        if upper[i, 0] < lower[i, 0] or upper[i, 1] < lower[i, 1]:
            return False
    size = 2 * n
    vx, vy = work[0], work[1]  # [x0; zref] -> (R^-T g, z*) per axis, accumulated row by row
    for i in range(size):
        vx[i] = 0.0
        vy[i] = 0.0
    for k in range(3 + n):
        if k < 3:
            ax, ay = x0[k, 0], x0[k, 1]
        else:
            ax, ay = zref[k - 3, 0], zref[k - 3, 1]
        row = in_map_t[k]
        for i in range(size):
            vx[i] += row[i] * ax
            vy[i] += row[i] * ay
    for i in range(n):
        zx, zy = vx[n + i], vy[n + i]
        if not unrotated:
            zx, zy = rot[i, 0, 0] * zx + rot[i, 0, 1] * zy, rot[i, 1, 0] * zx + rot[i, 1, 1] * zy
        bounds[0, 2 * i] = upper[i, 0] - zx
        bounds[0, 2 * i + 1] = upper[i, 1] - zy
        bounds[1, 2 * i] = lower[i, 0] - zx
        bounds[1, 2 * i + 1] = lower[i, 1] - zy
    for j in range(size):
        sense[j] = 0
    if previous.shape[0]:
        if shift:
            for j in range(size - 2):
                sense[j] = previous[j + 2]
        else:
            for j in range(size):
                sense[j] = previous[j]
    return True


def _finish(out_map_t, x0, u, lam, work, out, sense):
    """:meth:`DaqpBackend._finish_numpy` as one loop (compiled by numba): the plan's rows into ``out``,
    the next warm start into ``sense``. Returns False if the plan is not finite."""
    size = lam.shape[0]
    n = size // 2
    for j in range(size):
        sense[j] = 1 if lam[j] > 0.0 else (3 if lam[j] < 0.0 else 0)  # _SENSE_OF_SIGN
    rows = out.shape[0]
    gx, gy = work[0], work[1]  # R^-T g from _prepare, then the accumulated outputs
    rx = np.empty(3 + n)
    ry = np.empty(3 + n)
    for k in range(3):
        rx[k], ry[k] = x0[k, 0], x0[k, 1]
    for k in range(n):
        rx[3 + k] = u[k] - gx[k]  # R j
        ry[3 + k] = u[n + k] - gy[k]
    for i in range(rows):
        gx[i] = 0.0
        gy[i] = 0.0
    for k in range(3 + n):
        row = out_map_t[k]
        ax, ay = rx[k], ry[k]
        for i in range(rows):
            gx[i] += row[i] * ax
            gy[i] += row[i] * ay
    finite = True
    for i in range(rows):
        out[i, 0] = gx[i]
        out[i, 1] = gy[i]
        if not (math.isfinite(gx[i]) and math.isfinite(gy[i])):
            finite = False
    return finite


def _set_angles(g2, angles, rot, a):
    """:meth:`DaqpBackend._set_angles` as one loop (compiled by numba): ``rot[i] = R_i^T`` and
    ``A[2 i + a, b N + k] = G[i, k] R_i^T[a, b]``."""
    n = angles.shape[0]
    for i in range(n):
        c, s = math.cos(angles[i]), math.sin(angles[i])
        rot[i, 0, 0], rot[i, 0, 1], rot[i, 1, 0], rot[i, 1, 1] = c, s, -s, c
    for r in range(2 * n):
        i, side = r >> 1, r & 1
        first, second = rot[i, side, 0], rot[i, side, 1]
        g_row, a_row = g2[r], a[r]
        for k in range(n):
            a_row[k] = g_row[k] * first
            a_row[n + k] = g_row[k] * second


# (_prepare, _finish, _set_angles) compiled, once per process (empty: not loaded yet; [None]: no numba).
_KERNELS = []


def _load_kernels():
    """:func:`_prepare`, :func:`_finish` and :func:`_set_angles` compiled (or loaded from numba's cache),
    None without numba."""
    if not _KERNELS:
        try:
            from numba import njit
        except ImportError:  # numba not installed: numpy implementation
            _KERNELS.append(None)
        else:
            _KERNELS.append(tuple(njit(cache=True)(kernel) for kernel in (_prepare, _finish, _set_angles)))
    return _KERNELS[0]
