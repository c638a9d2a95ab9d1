"""Compiled (numba) tick of the exact backend: the same dual active-set algorithm as
:func:`walk_mpc.core.mpc.exact._dual_active_set`, fused with the output computation in one call.

Importing this module requires numba; :mod:`.mpc_exact` falls back to its numpy implementation
when numba is not installed. Status codes returned by :func:`exact_tick`: 0 solved, 1 infeasible
(a box with lower > upper), 2 failed (iteration limit or non-finite result).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

PRIMAL_TOL = 1e-11  # [m]
DUAL_TOL = 1e-12


@njit(cache=True, inline="always")
def _mget(m, mw, coupled, j, k):
    """``M_w[j, k]`` (symmetric); on the coupled path row ``j`` must have been made by :func:`_row`."""
    if coupled:
        return mw[j, k]
    if (k & 1) != (j & 1):
        return 0.0
    return m[j >> 1, k >> 1]


@njit(cache=True)
def _row(m, mw, cos_a, sin_a, ready, j):
    """Coupled path: row ``j`` of ``M_w`` into ``mw[j]``, unless this tick already made it.

    ``M_w[2 i + a, 2 l + b] = M[i, l]`` times ``cos(a_i - a_l)`` (a = b), ``sin(a_l - a_i)`` (a = 1, b = 0)
    or ``-sin(a_l - a_i)`` (a = 0, b = 1), from the per-tick cos/sin of the angles. Only the rows of the
    bounds the solve touches (working set and candidates) are made, O(N) each, instead of all 4 N^2
    entries every tick.
    """
    if ready[j] != 0.0:
        return
    ready[j] = 1.0
    n = cos_a.shape[0]
    col = j >> 1
    cl, sl = cos_a[col], sin_a[col]
    row = mw[j]
    mrow = m[col]  # M is symmetric: M[i, l] = M[l, i]
    if j & 1:
        for i in range(n):
            ci, si = cos_a[i], sin_a[i]
            mil = mrow[i]
            row[2 * i] = -mil * (ci * sl - si * cl)  # -sin(a_l - a_i)
            row[2 * i + 1] = mil * (ci * cl + si * sl)  # cos(a_i - a_l)
    else:
        for i in range(n):
            ci, si = cos_a[i], sin_a[i]
            mil = mrow[i]
            row[2 * i] = mil * (ci * cl + si * sl)
            row[2 * i + 1] = mil * (ci * sl - si * cl)


@njit(cache=True, inline="always")
def _axpy(m, mw, coupled, j, alpha, y, n):
    """``y -= M_w[j, :] * alpha`` (each entry as ``y[k] -= M_w[j, k] * alpha``)."""
    if coupled:
        row = mw[j]
        for k in range(2 * n):
            y[k] -= row[k] * alpha
    else:
        mrow = m[j >> 1]
        b = j & 1
        for i in range(n):
            y[2 * i + b] -= mrow[i] * alpha
            y[2 * i + 1 - b] -= 0.0 * alpha


@njit(cache=True)
def _delete(inv, size, k):
    """In place: inverse of A without row/column k, from inv = A^-1 (size x size)."""
    pivot = inv[k, k]
    for i in range(size):
        if i == k:
            continue
        f = inv[i, k] / pivot
        for j in range(size):
            if j != k:
                inv[i, j] -= f * inv[k, j]
    # compact rows/columns
    for i in range(k, size - 1):
        for j in range(size):
            inv[i, j] = inv[i + 1, j]
    for j in range(k, size - 1):
        for i in range(size - 1):
            inv[i, j] = inv[i, j + 1]


@njit(cache=True)
def _affine(rows, x0, zref, n, outx, outy):
    """out = rows^T [x0; zref] per axis; ``rows`` is (3 + N, N)."""
    for i in range(n):
        outx[i] = 0.0
        outy[i] = 0.0
    for k in range(3 + n):
        if k < 3:
            vx, vy = x0[k, 0], x0[k, 1]
        else:
            vx, vy = zref[k - 3, 0], zref[k - 3, 1]
        row = rows[k]
        for i in range(n):
            outx[i] += row[i] * vx
            outy[i] += row[i] * vy


@njit(cache=True)
def _remove(array, size, k):
    for i in range(k, size - 1):
        array[i] = array[i + 1]


@njit(cache=True)
def exact_tick(consts, dyn, zeta, x0, window,
               active, sides, m_prev, shift, max_iterations, mw, inv, work, out):
    """One MPC tick (see module docstring). Returns (status, active count, iterations).

    ``window`` is the preview's packed window (:attr:`walk_mpc.core.mpc.preview.Preview.packed`,
    ``(ceil(N / 2) + 3 N, 2)``): the interval angles 2 per row, then the box bounds ``lower``, ``upper``
    and the ZMP reference ``zref``, N rows each.

    ``consts`` (6 + 4N, N) stacks, transposed, ``[Kz | alpha M]`` (z* = . [x0; zref]),
    ``[Ej | Fj]`` (unconstrained jerk), ``Q = H^-1 Uz^T`` and ``M``. ``dyn`` (2, 12) holds ``A``
    (row-major) and ``B`` of the first and of the other intervals. ``active``/``sides`` (2N) hold the
    previous active set on entry (``m_prev`` entries) and the new one on exit. ``work`` is a scratch
    array (13, 2N + 1); ``out`` receives (5N, 2) rows jerk, c, v, a, z.
    """
    n = consts.shape[1]
    half = (n + 1) // 2
    lower = window[half:half + n]
    upper = window[half + n:half + 2 * n]
    zref = window[half + 2 * n:half + 3 * n]
    size = 2 * n
    s1t = consts[0:3 + n]
    jt = consts[3 + n:6 + 2 * n]
    qt = consts[6 + 2 * n:6 + 3 * n]
    m = consts[6 + 3 * n:6 + 4 * n]
    vec_x = work[8]
    vec_y = work[9]
    ws = work[0]
    w = work[1]
    lo = work[2]
    hi = work[3]
    mu = work[4]
    r = work[5]
    shat = work[6]
    tmp = work[7]
    # Unconstrained ZMP z* = [Kz | alpha M] [x0; zref] (axpy form: contiguous, vectorised).
    _affine(s1t, x0, zref, n, vec_x, vec_y)
    for i in range(n):
        tmp[2 * i] = vec_x[i]
        tmp[2 * i + 1] = vec_y[i]
    theta = window[0, 0]  # angle i: window[i >> 1, i & 1]
    aligned = True
    for i in range(n):
        if window[i >> 1, i & 1] != theta:
            aligned = False
            break
    coupled = not aligned
    # cos/sin of every interval angle, once per tick (one pair when all the angles are equal).
    cos_a = work[11, :n]
    sin_a = work[11, n:2 * n]
    if aligned:
        c, s = math.cos(theta), math.sin(theta)
        for i in range(n):
            cos_a[i] = c
            sin_a[i] = s
    else:
        for i in range(n):
            angle = window[i >> 1, i & 1]
            cos_a[i] = math.cos(angle)
            sin_a[i] = math.sin(angle)
    for i in range(n):
        c = cos_a[i]
        s = sin_a[i]
        zx, zy = tmp[2 * i], tmp[2 * i + 1]
        ws[2 * i] = c * zx + s * zy
        ws[2 * i + 1] = c * zy - s * zx
        lo[2 * i], lo[2 * i + 1] = lower[i, 0], lower[i, 1]
        hi[2 * i], hi[2 * i + 1] = upper[i, 0], upper[i, 1]
    ready = work[12]  # coupled path: 1.0 where the row of M_w is made this tick (see _row)
    if coupled:
        for k in range(size):
            ready[k] = 0.0
    # Warm start: previous set shifted by one interval (bounds at the last interval kept too).
    count = 0
    if shift:
        extra = 0
        for t in range(m_prev):
            if active[t] >= size - 2:
                extra += 1
        # collect shifted, then the kept last-interval ones
        kept_a = np.empty(extra, np.int64)
        kept_s = np.empty(extra)
        e = 0
        for t in range(m_prev):
            k = active[t]
            if k >= size - 2:
                kept_a[e] = k
                kept_s[e] = sides[t]
                e += 1
            if k >= 2:
                active[count] = k - 2
                sides[count] = sides[t]
                count += 1
        for e in range(extra):
            active[count] = kept_a[e]
            sides[count] = kept_s[e]
            count += 1
    else:
        count = m_prev
    # Explicit inverse of M_WW (Cholesky), multipliers, drop wrong signs.
    while True:
        if count > 0:
            if coupled:
                for i in range(count):
                    _row(m, mw, cos_a, sin_a, ready, active[i])
            for i in range(count):
                for j in range(count):
                    inv[i, j] = _mget(m, mw, coupled, active[j], active[i])
            # in-place Cholesky L (lower) then inverse via L^-1
            chol = np.zeros((count, count))
            for j in range(count):
                d = inv[j, j]
                for k in range(j):
                    d -= chol[j, k] * chol[j, k]
                if d <= 0.0:
                    return 2, 0, 0
                chol[j, j] = math.sqrt(d)
                for i in range(j + 1, count):
                    v = inv[i, j]
                    for k in range(j):
                        v -= chol[i, k] * chol[j, k]
                    chol[i, j] = v / chol[j, j]
            linv = np.zeros((count, count))
            for i in range(count):
                linv[i, i] = 1.0 / chol[i, i]
                for j in range(i):
                    v = 0.0
                    for k in range(j, i):
                        v -= chol[i, k] * linv[k, j]
                    linv[i, j] = v / chol[i, i]
            for i in range(count):
                for j in range(i + 1):
                    v = 0.0
                    for k in range(i, count):
                        v += linv[k, i] * linv[k, j]
                    inv[i, j] = v
                    inv[j, i] = v
            for i in range(count):
                k = active[i]
                r[i] = ws[k] - (hi[k] if sides[i] > 0.0 else lo[k])
            worst = 0.0
            drop = -1
            for i in range(count):
                v = 0.0
                for j in range(count):
                    v += inv[i, j] * r[j]
                mu[i] = v
                if sides[i] * v < worst - DUAL_TOL:
                    worst = sides[i] * v
                    drop = i
            if drop >= 0:
                _remove(active, count, drop)
                _remove(sides, count, drop)
                count -= 1
                continue
        break
    for k in range(size):
        w[k] = ws[k]
    for t in range(count):  # w = ws - M_w[:, W] mu, accumulated over t for each k as before
        _axpy(m, mw, coupled, active[t], mu[t], w, n)
    iterations = 0
    checked = False
    inactive = work[10]  # 1.0 where the bound is not in the working set (an active one holds by construction)
    while True:
        for k in range(size):
            inactive[k] = 1.0
        for t in range(count):
            inactive[active[t]] = 0.0
        p = -1
        viol = PRIMAL_TOL
        sp = 1.0
        for k in range(size):
            if inactive[k] == 0.0:
                continue
            if w[k] - hi[k] > viol:
                viol = w[k] - hi[k]
                p = k
                sp = 1.0
            elif lo[k] - w[k] > viol:
                viol = lo[k] - w[k]
                p = k
                sp = -1.0
        if p < 0:
            break
        if not checked:
            for k in range(size):
                if lo[k] > hi[k]:
                    return 1, 0, 0
            checked = True
        target = hi[p] if sp > 0.0 else lo[p]
        lam_p = 0.0
        while True:
            iterations += 1
            if iterations > max_iterations or count >= size:  # (count < size always holds: p is inactive)
                return 2, 0, iterations
            if coupled:
                _row(m, mw, cos_a, sin_a, ready, p)
            for t in range(count):
                tmp[t] = _mget(m, mw, coupled, p, active[t])
            for t in range(count):
                v = 0.0
                for u in range(count):
                    v += inv[t, u] * tmp[u]
                r[t] = v
            for k in range(size):
                shat[k] = _mget(m, mw, coupled, p, k)
            for t in range(count):
                _axpy(m, mw, coupled, active[t], r[t], shat, n)
            delta = shat[p]
            if delta <= 0.0:
                return 2, 0, iterations
            t_full = sp * (w[p] - target) / delta
            t_drop = math.inf
            drop = -1
            for t in range(count):
                rate = sp * sides[t] * r[t]
                if rate > 1e-300:
                    ratio = sides[t] * mu[t] / rate
                    if ratio < t_drop:
                        t_drop = ratio
                        drop = t
            if drop >= 0 and t_drop < t_full:
                step = sp * t_drop
                for t in range(count):
                    mu[t] -= step * r[t]
                for k in range(size):
                    w[k] -= step * shat[k]
                lam_p += t_drop
                _delete(inv, count, drop)
                _remove(active, count, drop)
                _remove(sides, count, drop)
                _remove(mu, count, drop)
                count -= 1
                continue
            step = sp * t_full
            for t in range(count):
                mu[t] -= step * r[t]
            for k in range(size):
                w[k] -= step * shat[k]
            w[p] = target
            # border the inverse
            for t in range(count):
                for u in range(count):
                    inv[t, u] += r[t] * r[u] / delta
                inv[t, count] = -r[t] / delta
                inv[count, t] = -r[t] / delta
            inv[count, count] = 1.0 / delta
            active[count] = p
            sides[count] = sp
            mu[count] = sp * (lam_p + t_full)
            count += 1
            break
    # World-frame multipliers per interval (stored in tmp, interleaved), then jerks and states.
    for k in range(size):
        tmp[k] = 0.0
    for t in range(count):
        tmp[active[t]] = mu[t]
    for i in range(n):
        c = cos_a[i]
        s = sin_a[i]
        mx, my = tmp[2 * i], tmp[2 * i + 1]
        tmp[2 * i] = c * mx - s * my
        tmp[2 * i + 1] = s * mx + c * my
    _affine(jt, x0, zref, n, vec_x, vec_y)  # unconstrained jerks
    for j in range(n):  # - Q mu_z over the intervals with an active bound
        mx, my = tmp[2 * j], tmp[2 * j + 1]
        if mx != 0.0 or my != 0.0:
            row = qt[j]
            for i in range(n):
                vec_x[i] -= row[i] * mx
                vec_y[i] -= row[i] * my
    finite = True
    for a in range(2):
        c, v, acc = x0[0, a], x0[1, a], x0[2, a]
        jerks = vec_x if a == 0 else vec_y
        for i in range(n):
            jerk = jerks[i]
            out[i, a] = jerk
            d = dyn[0] if i == 0 else dyn[1]
            c, v, acc = (d[0] * c + d[1] * v + d[2] * acc + d[9] * jerk,
                         v + d[5] * acc + d[10] * jerk,
                         acc + d[11] * jerk)
            out[n + i, a] = c
            out[2 * n + i, a] = v
            out[3 * n + i, a] = acc
            out[4 * n + i, a] = c - zeta * acc
            if not (math.isfinite(c) and math.isfinite(jerk)):
                finite = False
    if not finite:
        return 2, 0, iterations
    return 0, count, iterations
