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
  ``d_ij = angle_i - angle_j``, assembled with a few vectorised products (coupled path).

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

from .mpc import PlanStatus

_PRIMAL_TOL = 1e-11  # [m] bound violation accepted
_DUAL_TOL = 1e-12  # multiplier sign tolerance


class ExactBackend:
    """Dual active-set solver of the condensed LIPM QP (see module docstring)."""

    def __init__(self, mpc) -> None:
        cond = mpc.condensed
        n = cond.horizon
        self.n = n
        self.shift = 1 if mpc.shift_warm_start else 0
        alpha = cond.weights.zmp
        factor = cho_factor(cond.hessian)
        q = cho_solve(factor, cond.uz.T)  # H^-1 Uz^T
        m = cond.uz @ q
        m = 0.5 * (m + m.T)
        ej = -cho_solve(factor, cond.gx)  # unconstrained jerk = ej x0 + alpha q zref
        kz = cond.pz + cond.uz @ ej
        self.m = m
        # z* (2, N) = [x0^T, zref^T] @ s1t
        self.s1t = np.ascontiguousarray(np.hstack([kz, alpha * m]).T)
        # jerk = ej x0 + alpha q zref - q mu ; outputs = [Pc..Pz] x0 + [Uc..Uz] jerk
        jmap = np.hstack([ej, alpha * q, -q])
        out_x0 = np.hstack([cond.outputs[:, :3], np.zeros((4 * n, 2 * n))])
        big = np.vstack([jmap, out_x0 + cond.outputs[:, 3:] @ jmap])
        self.bigt = np.ascontiguousarray(big.T)  # (3 + 2N, 5N)
        self.m2 = np.zeros((2 * n, 2 * n))
        self.m2[:n, :n] = m
        self.m2[n:, n:] = m
        self.mw = np.zeros((2 * n, 2 * n))
        self.rhs = np.zeros((2, 3 + 2 * n))
        self.max_iterations = 8 * n
        self.reset()

    def reset(self) -> None:
        """Forget the warm start."""
        self._active = np.zeros(0, dtype=np.intp)
        self._sides = np.zeros(0)

    def _warm_set(self):
        active, sides = self._active, self._sides
        if not self.shift or active.size == 0:
            return active, sides
        n = self.n
        index = active % n
        keep = index >= 1
        return active[keep] - 1, sides[keep]

    def solve(self, x0: np.ndarray, preview):
        """Solve one tick; returns (status, (jerk, pos, vel, acc, zmp), iterations)."""
        n = self.n
        rhs = self.rhs
        rhs[:, :3] = x0.T
        rhs[:, 3:3 + n] = preview.zmp_ref.T
        zs = rhs[:, :3 + n] @ self.s1t  # (2, N) unconstrained ZMP
        angles = preview.angles
        theta = angles[0]
        aligned = bool((angles == theta).all())
        if aligned:
            mat = self.m2
            if theta == 0.0:
                cos = sin = None
                ws = zs.ravel()
            else:
                cos, sin = math.cos(theta), math.sin(theta)
                ws = np.concatenate([cos * zs[0] + sin * zs[1], cos * zs[1] - sin * zs[0]])
        else:
            cos, sin = np.cos(angles), np.sin(angles)
            cdiff = np.multiply.outer(cos, cos)
            cdiff += np.multiply.outer(sin, sin)
            sdiff = np.multiply.outer(sin, cos)
            sdiff -= np.multiply.outer(cos, sin)
            mat = self.mw
            m = self.m
            np.multiply(m, cdiff, out=mat[:n, :n])
            mat[n:, n:] = mat[:n, :n]
            np.multiply(m, sdiff, out=mat[:n, n:])
            np.negative(mat[:n, n:], out=mat[n:, :n])
            ws = np.concatenate([cos * zs[0] + sin * zs[1], cos * zs[1] - sin * zs[0]])
        lo = preview.lower.T.ravel()
        hi = preview.upper.T.ravel()
        active, sides = self._warm_set()
        result = _dual_active_set(mat, ws, lo, hi, active, sides, self.max_iterations)
        if result is None:
            self.reset()
            return PlanStatus.FAILED, None, self.max_iterations
        active, sides, mu, iterations = result
        self._active, self._sides = active, sides
        muz = rhs[:, 3 + n:]
        muz[:] = 0.0
        if active.size:
            mw = np.zeros(2 * n)
            mw[active] = mu
            if cos is None:
                muz[:] = mw.reshape(2, n)
            else:
                mx, my = mw[:n], mw[n:]
                muz[0] = cos * mx - sin * my
                muz[1] = sin * mx + cos * my
        out = rhs @ self.bigt  # (2, 5N): jerk, c, v, a, z
        out.flags.writeable = False
        return (PlanStatus.SOLVED,
                (out[:, :n].T, out[:, n:2 * n].T, out[:, 2 * n:3 * n].T, out[:, 3 * n:4 * n].T,
                 out[:, 4 * n:].T),
                iterations)


def _inverse(mat: np.ndarray) -> np.ndarray:
    return np.linalg.inv(mat)


def _dual_active_set(mat, ws, lo, hi, active, sides, max_iterations):
    """Goldfarb-Idnani dual active set for ``min 0.5 w'M^-1 w - w'M^-1 ws, lo <= w <= hi``.

    Args:
        mat: Inverse Hessian M (2N, 2N), symmetric positive definite.
        ws: Unconstrained optimum (2N,).
        lo, hi: Bounds (2N,), lo <= hi.
        active, sides: Warm-start active set (indices, +1 upper / -1 lower).
        max_iterations: Bound on active-set changes.

    Returns:
        (active, sides, mu, iterations) with signed multipliers ``mu`` (``w = ws - M[:, active] mu``),
        or None if the iteration limit was hit.
    """
    if active.size:
        bound = np.where(sides > 0.0, hi[active], lo[active])
        rows = mat[active]
        inv = _inverse(rows[:, active])
        mu = inv @ (ws[active] - bound)
        lam = sides * mu
        while active.size and lam.min() < -_DUAL_TOL:
            k = int(lam.argmin())
            inv = _delete(inv, k)
            active = np.delete(active, k)
            sides = np.delete(sides, k)
            bound = np.delete(bound, k)
            rows = np.delete(rows, k, axis=0)
            mu = inv @ (ws[active] - bound)
            lam = sides * mu
        w = ws - mu @ rows if active.size else ws.copy()
    else:
        inv = np.zeros((0, 0))
        mu = np.zeros(0)
        lam = mu
        rows = np.zeros((0, ws.shape[0]))
        w = ws.copy()
    iterations = 0
    while True:
        over = w - hi
        under = lo - w
        pu = int(over.argmax())
        pl = int(under.argmax())
        if over[pu] >= under[pl]:
            p, sp, viol = pu, 1.0, over[pu]
        else:
            p, sp, viol = pl, -1.0, under[pl]
        if viol <= _PRIMAL_TOL:
            return active, sides, mu, iterations
        target = hi[p] if sp > 0.0 else lo[p]
        lam_p = 0.0
        while True:
            iterations += 1
            if iterations > max_iterations:
                return None
            row = mat[p]
            if active.size:
                r = inv @ row[active]
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
                    active = np.delete(active, k)
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
            active = np.append(active, p)
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
