"""Exact MPC backend: dual active set (Goldfarb-Idnani) on the condensed QP in ZMP coordinates.

Change of variables: per axis the ZMP sequence ``z = Pz x0 + Uz j`` is an invertible affine image of
the jerks (``Uz`` is lower triangular with ``T0^3/6 - (h/g) T0`` on its diagonal). In the box frame
of each interval, ``w_i = R(angle_i)^T z_i``, the support constraints become simple bounds
``lower <= w <= upper`` on 2N variables, and the inverse Hessian in these coordinates is

    M_w = R^T blkdiag(M, M) R,   M = Uz H^-1 Uz^T    (H the constant jerk Hessian, shared by x and y)

so it is never factorised on line: ``M`` is precomputed once, and per tick

* all boxes share one angle (straight, lateral, backward walks; the smpc reference walk): ``M_w =
  blkdiag(M, M)`` is constant, x and y decouple (fast path);
* otherwise (turning): ``M_w[i, j] = M_ij [[cos d_ij, sin d_ij], [-sin d_ij, cos d_ij]]`` with
  ``d_ij = angle_i - angle_j``, assembled with a few vectorised products from the cos/sin of each
  angle, computed once per tick (coupled path; the compiled kernel makes only the rows of the bounds
  it touches, so a turning walk costs about what a straight one does).

The unconstrained optimum ``w*`` costs one (2, 3+N) x (3+N, N) product. The dual active-set method
starts from the previous tick's active set shifted by one interval (multipliers recomputed exactly,
wrong-signed ones dropped), then adds the most violated bound with Goldfarb-Idnani steps, keeping
the inverse of ``M_WW`` (active rows and columns) up to date by rank-one bordering/deletion. Bounds
of distinct variables are always linearly independent, so the method is finite and exact; boxes
with ``lower <= upper`` are always feasible. At the end, one (2, 3+2N) x (3+2N, 5N) product gives
the jerks and every predicted trajectory from ``(x0, zref, multipliers)``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.linalg.lapack import dposv

from walk_mpc.core.mpc.status import PlanStatus

#: Use the compiled kernel of :mod:`.mpc_exact_kernel` when numba is installed (tests switch it off to
#: exercise the numpy implementation).
USE_KERNEL = True
_PRIMAL_TOL = 1e-11  # [m] bound violation accepted
_DUAL_TOL = 1e-12  # multiplier sign tolerance


class ExactBackend:
    """Dual active-set solver of the condensed LIPM QP (see module docstring).

    Variables are interleaved per interval: ``w[2 i + axis]``, so (N, 2) arrays of the preview and
    of the plan are used without transposition.
    """

    def __init__(self, mpc) -> None:
        cond = mpc.condensed
        n = cond.horizon
        self.n = n
        self.shift = bool(mpc.shift_warm_start)
        alpha = cond.weights.zmp
        factor = cho_factor(cond.hessian)
        q = cho_solve(factor, cond.uz.T)  # H^-1 Uz^T
        m = cond.uz @ q
        m = 0.5 * (m + m.T)
        ej = -cho_solve(factor, cond.gx)  # unconstrained jerk = ej x0 + alpha q zref
        kz = cond.pz + cond.uz @ ej
        self.m = m
        # rhs = [x0; zref; mu] (3 + 2N, 2); z* (N, 2) = s1 @ rhs (mu rows are zero then).
        self.s1 = np.zeros((n, 3 + 2 * n))
        self.s1[:, :3 + n] = np.hstack([kz, alpha * m])
        # jerk = ej x0 + alpha q zref - q mu ; outputs = [Pc..Pz] x0 + [Uc..Uz] jerk
        jmap = np.hstack([ej, alpha * q, -q])
        out_x0 = np.hstack([cond.outputs[:, :3], np.zeros((4 * n, 2 * n))])
        self.big = np.vstack([jmap, out_x0 + cond.outputs[:, 3:] @ jmap])  # (5N, 3 + 2N)
        self.m2 = np.kron(m, np.eye(2))
        self.mw = np.zeros((2 * n, 2 * n))
        self.rhs = np.zeros((3 + 2 * n, 2))
        self.bounds = np.zeros((2, n, 2))  # lower, upper of the box-frame ZMP
        self.zeros_out = np.zeros(10 * n)
        self.max_iterations = 8 * n
        # Compiled kernel (numba) when available: same algorithm, one call per tick.
        self.kernel = _load_kernel() if USE_KERNEL and mpc.params.compiled_kernels else None
        if self.kernel is not None:
            self.k_consts = np.ascontiguousarray(np.vstack([kz.T, alpha * m.T, ej.T, alpha * q.T, q.T, m]))
            self.k_dyn = np.array([np.concatenate([a.ravel(), b]) for a, b in (
                cond.model.discretize(float(cond.durations[0])),
                cond.model.discretize(float(cond.durations[1])))])
            self.zeta = float(cond.model.zeta)
            self.k_active = np.zeros(2 * n, dtype=np.int64)
            self.k_sides = np.zeros(2 * n)
            self.k_inv = np.zeros((2 * n + 1, 2 * n + 1))
            self.k_work = np.zeros((13, 2 * n + 1))
            self._warm_up()
        self.reset()

    def _warm_up(self) -> None:
        """Compile (or load from numba's cache) the kernel now rather than at the first tick."""
        n = self.n
        window = np.zeros(((n + 1) // 2 + 3 * n, 2))  # a Preview.packed
        window.flags.writeable = False
        self.kernel(self.k_consts, self.k_dyn, self.zeta, np.zeros((3, 2)), window, self.k_active,
                    self.k_sides, 0, self.shift, self.max_iterations, self.mw, self.k_inv, self.k_work,
                    np.empty((5 * n, 2)))

    @property
    def accelerated(self) -> bool:
        """True when the compiled kernel is used."""
        return self.kernel is not None

    def reset(self) -> None:
        """Forget the warm start."""
        self._count = 0
        self._active: list = []  # variable indices 2 i + axis
        self._sides: list = []  # +1.0 upper bound, -1.0 lower bound

    def save(self) -> tuple:
        """The warm start (copies), for :meth:`restore`."""
        if self.kernel is not None:
            return self._count, self.k_active.copy(), self.k_sides.copy()
        return self._count, tuple(self._active), tuple(self._sides)

    def restore(self, saved: tuple) -> None:
        """Warm start as :meth:`save` returned it (the kernel rebuilds its factorisation from it)."""
        if self.kernel is not None:
            self._count = saved[0]
            self.k_active[:] = saved[1]
            self.k_sides[:] = saved[2]
        else:
            self._count, self._active, self._sides = saved[0], list(saved[1]), list(saved[2])

    def _warm_set(self):
        """Previous active set shifted by one interval; a bound active at the last interval
        (end-of-horizon effect) is usually still active there, so it is kept as well (the sign check
        drops it otherwise)."""
        if not self.shift:
            return self._active, self._sides
        last_index = 2 * self.n - 2
        active, sides, last = [], [], []
        for k, side in zip(self._active, self._sides):
            if k >= 2:
                active.append(k - 2)
                sides.append(side)
            if k >= last_index:
                last.append((k, side))
        for k, side in last:
            active.append(k)
            sides.append(side)
        return active, sides

    def solve(self, x0: np.ndarray, preview):
        """Solve one tick; returns (status, (jerk, pos, vel, acc, zmp), iterations)."""
        n = self.n
        if self.kernel is not None:
            out = np.empty((5 * n, 2))
            status, self._count, iterations = self.kernel(
                self.k_consts, self.k_dyn, self.zeta, x0, preview.packed, self.k_active, self.k_sides,
                self._count, self.shift, self.max_iterations, self.mw, self.k_inv, self.k_work, out)
            if status:
                self._count = 0
                return _STATUS[status], None, iterations
            out.flags.writeable = False
            return PlanStatus.SOLVED, (out[:n], out[n:2 * n], out[2 * n:3 * n], out[3 * n:4 * n],
                                       out[4 * n:]), iterations
        bounds = self.bounds
        bounds[0] = preview.lower
        bounds[1] = preview.upper
        gap = bounds[1] - bounds[0]
        if gap.reshape(-1)[gap.argmin()] < 0.0:
            return PlanStatus.INFEASIBLE, None, 0
        rhs = self.rhs
        rhs[:3] = x0
        rhs[3:3 + n] = preview.zmp_ref
        rhs[3 + n:] = 0.0
        zs = self.s1 @ rhs  # (N, 2) unconstrained ZMP
        angles = preview.angles
        theta = angles[angles.argmin()]
        if theta == angles[angles.argmax()]:
            mat = self.m2
            if theta == 0.0:
                cos = sin = None
                ws = zs.reshape(2 * n)
            else:
                cos, sin = math.cos(theta), math.sin(theta)
                ws = (zs @ np.array([[cos, -sin], [sin, cos]])).reshape(2 * n)
        else:
            cos, sin = np.cos(angles), np.sin(angles)
            cdiff = np.multiply.outer(cos, cos)
            cdiff += np.multiply.outer(sin, sin)  # cos(a_i - a_j)
            sdiff = np.multiply.outer(cos, sin)
            sdiff -= np.multiply.outer(sin, cos)  # sin(a_j - a_i)
            mat = self.mw
            blocks = mat.reshape(n, 2, n, 2)
            m = self.m
            np.multiply(m, cdiff, out=blocks[:, 0, :, 0])
            blocks[:, 1, :, 1] = blocks[:, 0, :, 0]
            np.multiply(m, sdiff, out=blocks[:, 1, :, 0])
            np.negative(blocks[:, 1, :, 0], out=blocks[:, 0, :, 1])
            ws = np.empty(2 * n)
            ws[0::2] = cos * zs[:, 0] + sin * zs[:, 1]
            ws[1::2] = cos * zs[:, 1] - sin * zs[:, 0]
        active, sides = self._warm_set()
        result = _dual_active_set(mat, ws, bounds.reshape(2, 2 * n), active, sides, self.max_iterations)
        if result is None:
            self.reset()
            return PlanStatus.FAILED, None, self.max_iterations
        active, sides, mu, iterations = result
        self._active, self._sides = active, sides
        if active:
            mu_z = rhs[3 + n:]
            mu_z.reshape(2 * n)[active] = mu
            if cos is not None:
                if isinstance(cos, float):
                    mu_z[:] = mu_z @ np.array([[cos, sin], [-sin, cos]])
                else:
                    mx = mu_z[:, 0].copy()
                    mu_z[:, 0] = cos * mx - sin * mu_z[:, 1]
                    mu_z[:, 1] = sin * mx + cos * mu_z[:, 1]
        out = self.big @ rhs  # (5N, 2): jerk, c, v, a, z
        if math.isnan(self.zeros_out @ out.reshape(10 * n)):
            return PlanStatus.FAILED, None, iterations
        out.flags.writeable = False
        arrays = (out[:n], out[n:2 * n], out[2 * n:3 * n], out[3 * n:4 * n], out[4 * n:])
        return PlanStatus.SOLVED, arrays, iterations


_STATUS = {1: PlanStatus.INFEASIBLE, 2: PlanStatus.FAILED}


def _load_kernel():
    try:
        from walk_mpc.core.mpc.exact_kernel import exact_tick
    except ImportError:  # numba not installed: numpy implementation
        return None
    return exact_tick


def _dual_active_set(mat, ws, bounds, active, sides, max_iterations):
    """Goldfarb-Idnani dual active set for ``min 0.5 w'M^-1 w - w'M^-1 ws, lo <= w <= hi``.

    Args:
        mat: Inverse Hessian M (2N, 2N), symmetric positive definite.
        ws: Unconstrained optimum (2N,).
        bounds: (2, 2N) rows lower, upper.
        active, sides: Warm-start active set (variable indices; +1.0 upper, -1.0 lower bound).
        max_iterations: Bound on active-set changes.

    Returns:
        (active, sides, mu, iterations) with signed multipliers ``mu`` (``w = ws - M[:, active] mu``;
        ``mu >= 0`` on upper bounds, ``<= 0`` on lower bounds), or None at the iteration limit.
    """
    lo, hi = bounds[0], bounds[1]
    size = ws.shape[0]
    if active:
        index = np.array(active)
        sides = np.array(sides)
        bound = bounds.reshape(-1).take([k + size if side > 0.0 else k for k, side in zip(active, sides)])
        rows = mat.take(index, 0)
        _, mu, info = dposv(rows.take(index, 1), ws.take(index) - bound)
        if info:
            return None
        lam = sides * mu
        k = lam.argmin()
        while lam[k] < -_DUAL_TOL:
            keep = np.arange(index.size) != k
            index, sides, bound, rows = index[keep], sides[keep], bound[keep], rows[keep]
            if not index.size:
                break
            _, mu, info = dposv(rows.take(index, 1), ws.take(index) - bound)
            if info:
                return None
            lam = sides * mu
            k = lam.argmin()
        if index.size:
            w = ws - mu @ rows
        else:
            w = ws.copy()
            mu = np.zeros(0)
    else:
        index = np.zeros(0, dtype=np.intp)
        sides = mu = np.zeros(0)
        w = ws.copy()
    over = w - hi
    under = lo - w
    over[index] = -math.inf
    under[index] = -math.inf
    pu = over.argmax()
    pl = under.argmax()
    if over[pu] <= _PRIMAL_TOL and under[pl] <= _PRIMAL_TOL:
        return index.tolist(), sides.tolist(), mu, 0
    # Goldfarb-Idnani additions, with an explicit inverse of M_WW kept up to date.
    rows = mat.take(index, 0)
    inv = np.linalg.inv(rows.take(index, 1)) if index.size else np.zeros((0, 0))
    lam = sides * mu
    iterations = 0
    while True:
        over = w - hi
        under = lo - w
        over[index] = -math.inf  # a bound in the working set holds by construction: only roundoff there
        under[index] = -math.inf
        pu = int(over.argmax())
        pl = int(under.argmax())
        if over[pu] >= under[pl]:
            p, sp, viol = pu, 1.0, over[pu]
        else:
            p, sp, viol = pl, -1.0, under[pl]
        if viol <= _PRIMAL_TOL:
            return index.tolist(), sides.tolist(), mu, iterations
        target = hi[p] if sp > 0.0 else lo[p]
        lam_p = 0.0
        while True:
            iterations += 1
            if iterations > max_iterations:
                return None
            row = mat[p]
            if index.size:
                r = inv @ row[index]
                shat = row - r @ rows
                delta = shat[p]
                rate = (sp * sides) * r  # decrease rate of the active multipliers
                t_full = sp * (w[p] - target) / delta
                blocking = rate > 1e-300
                t_drop = math.inf
                if blocking.any():
                    ratios = np.full(rate.shape, math.inf)
                    np.divide(lam, rate, out=ratios, where=blocking)
                    k = int(ratios.argmin())
                    t_drop = ratios[k]
                if t_drop < t_full:
                    step = sp * t_drop
                    mu = mu - step * r
                    w -= step * shat
                    lam_p += t_drop
                    inv = _delete(inv, k)
                    index = np.delete(index, k)
                    sides = np.delete(sides, k)
                    rows = np.delete(rows, k, axis=0)
                    mu = np.delete(mu, k)
                    lam = sides * mu
                    continue
                step = sp * t_full
                mu = mu - step * r
            else:
                r = np.zeros(0)
                shat = row.copy()
                delta = shat[p]
                t_full = sp * (w[p] - target) / delta
                step = sp * t_full
            w -= step * shat
            w[p] = target
            inv = _border(inv, r, delta)
            index = np.append(index, p)
            sides = np.append(sides, sp)
            rows = np.vstack([rows, row])
            mu = np.append(mu, sp * (lam_p + t_full))
            lam = sides * mu
            break


def _border(inv: np.ndarray, r: np.ndarray, delta: float) -> np.ndarray:
    """Inverse of [[A, b], [b', c]] from inv = A^-1, r = A^-1 b and delta = c - b'r."""
    m = inv.shape[0]
    out = np.empty((m + 1, m + 1))
    out[:m, :m] = inv + np.multiply.outer(r, r) / delta
    out[:m, m] = -r / delta
    out[m, :m] = out[:m, m]
    out[m, m] = 1.0 / delta
    return out


def _delete(inv: np.ndarray, k: int) -> np.ndarray:
    """Inverse of A with row and column k removed, from inv = A^-1."""
    col = np.delete(inv[:, k], k)
    reduced = np.delete(np.delete(inv, k, axis=0), k, axis=1)
    return reduced - np.multiply.outer(col, col) / inv[k, k]
