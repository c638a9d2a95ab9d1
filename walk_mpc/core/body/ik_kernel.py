"""Compiled (numba) Gauss-Newton steps of :class:`walk_mpc.core.body.ik.IKSolver`: the same damped step as
``IKSolver._solve_step`` when no joint limit binds, and the chord step, in one call each.

Importing this module requires numba; :mod:`.ik` falls back to its numpy/LAPACK implementation when
numba is not installed. :func:`full_step` also runs the joint-limit active set of ``_solve_step``
(e.g. Talos' grippers resting at a limit); when the Gram matrix is not positive definite or the step
is not finite it returns a status telling the caller to take its numpy path (error reporting) instead.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

STEP_OK = 0
STEP_NOT_POSITIVE_DEFINITE = 1
STEP_LEAVES_LIMITS = 2
STEP_NOT_FINITE = 3
STEP_LIMITED = 4  # valid step with joints held at a limit (``free[k] == 0``); no reusable factor
_ACTIVE_SET_ROUNDS = 8  # as IKSolver._solve_step


@njit(cache=True)
def _bounded(dq, max_step, dq_lower, dq_upper):
    """Scale ``dq`` in place to ``max |dq| <= max_step``; the status of the scaled step."""
    n = dq.shape[0]
    peak = 0.0
    for k in range(n):
        peak = max(peak, abs(dq[k]))
    if not math.isfinite(peak):
        return STEP_NOT_FINITE
    if peak > max_step:
        scale = max_step / peak
        for k in range(n):
            dq[k] *= scale
    for k in range(n):
        if dq[k] < dq_lower[k] or dq[k] > dq_upper[k]:
            return STEP_LEAVES_LIMITS
    return STEP_OK


@njit(cache=True)
def full_step(jacobian, error, damping, error_damping, row_inverse_weight, dq_p, dq_lower, dq_upper,
              max_step, dq, factor, free):
    """Damped least-squares step ``dq = dq_p + J^T (J J^T + diag(rho))^-1 (e - J dq_p)``, then the
    active set of ``IKSolver._solve_step`` on the step bounds.

    ``rho = (damping + error_damping |e|^2) row_inverse_weight``; the step is scaled to
    ``max |dq| <= max_step``. Writes ``dq`` (nv,), ``free`` (nv,: 1 for free joints, 0 for joints
    held at a limit) and, with STEP_OK, the lower Cholesky factor of ``J J^T + diag(rho)`` into
    ``factor`` (m, m).

    Returns:
        STEP_OK (no limit binds), STEP_LIMITED, or the reason the caller must take its numpy path.
    """
    m, n = jacobian.shape
    scale = 0.0
    for i in range(m):
        scale += error[i] * error[i]
    scale = damping + error_damping * scale
    rho = np.empty(m)
    for i in range(m):
        rho[i] = scale * row_inverse_weight[i]
    fixed = np.zeros(n)
    for k in range(n):
        free[k] = 1.0
    if not _masked_step(jacobian, error, rho, dq_p, free, fixed, factor, dq):
        return STEP_NOT_POSITIVE_DEFINITE
    status = _bounded(dq, max_step, dq_lower, dq_upper)
    if status != STEP_LEAVES_LIMITS:
        return status
    for _ in range(_ACTIVE_SET_ROUNDS):  # each round fixes at least one more joint at its limit
        outside = False
        for k in range(n):
            if dq[k] < dq_lower[k] or dq[k] > dq_upper[k]:
                outside = True
                free[k] = 0.0
                fixed[k] = min(max(dq[k], dq_lower[k]), dq_upper[k])
        if not outside:
            break
        if not _masked_step(jacobian, error, rho, dq_p, free, fixed, factor, dq):
            return STEP_NOT_POSITIVE_DEFINITE
        if _bounded(dq, max_step, dq_lower, dq_upper) == STEP_NOT_FINITE:
            return STEP_NOT_FINITE
    for k in range(n):
        dq[k] = min(max(dq[k], dq_lower[k]), dq_upper[k])
    return STEP_LIMITED


@njit(cache=True)
def _masked_step(jacobian, error, rho, dq_p, free, fixed, factor, dq):
    """``dq = free (dq_p + Jf^T (Jf Jf^T + diag(rho))^-1 (e - J fixed - Jf dq_p)) + fixed`` with
    ``Jf = J diag(free)``; the lower Cholesky factor goes to ``factor``. False if not positive definite."""
    m, n = jacobian.shape
    x = np.empty(m)
    for i in range(m):
        acc = error[i]
        for k in range(n):
            acc -= jacobian[i, k] * (fixed[k] + free[k] * dq_p[k])
        x[i] = acc
        for j in range(i + 1):
            acc = 0.0
            for k in range(n):
                acc += jacobian[i, k] * jacobian[j, k] * free[k]
            factor[i, j] = acc
        factor[i, i] += rho[i]
    for j in range(m):  # Cholesky, lower triangle
        d = factor[j, j]
        for k in range(j):
            d -= factor[j, k] * factor[j, k]
        if not d > 0.0:
            return False
        d = math.sqrt(d)
        factor[j, j] = d
        for i in range(j + 1, m):
            acc = factor[i, j]
            for k in range(j):
                acc -= factor[i, k] * factor[j, k]
            factor[i, j] = acc / d
    _cholesky_solve(factor, x)
    for k in range(n):
        acc = dq_p[k]
        for i in range(m):
            acc += jacobian[i, k] * x[i]
        dq[k] = free[k] * acc + fixed[k]
    return True


@njit(cache=True)
def chord_step(factor, jacobian, error, dq_lower, dq_upper, max_step, dq):
    """Step ``dq = J^T (L L^T)^-1 e`` with the factor ``L`` and Jacobian of the last full step.

    Returns:
        True when the step needs no scaling and stays within the step bounds (else the caller takes
        a full step).
    """
    m, n = jacobian.shape
    x = error.copy()
    _cholesky_solve(factor, x)
    for k in range(n):
        acc = 0.0
        for i in range(m):
            acc += jacobian[i, k] * x[i]
        if not (abs(acc) <= max_step and dq_lower[k] <= acc <= dq_upper[k]):
            return False
        dq[k] = acc
    return True


@njit(cache=True)
def _cholesky_solve(factor, x):
    """In place: ``x <- (L L^T)^-1 x`` with ``L`` the lower triangle of ``factor``."""
    m = x.shape[0]
    for i in range(m):
        acc = x[i]
        for k in range(i):
            acc -= factor[i, k] * x[k]
        x[i] = acc / factor[i, i]
    for i in range(m - 1, -1, -1):
        acc = x[i]
        for k in range(i + 1, m):
            acc -= factor[k, i] * x[k]
        x[i] = acc / factor[i, i]
