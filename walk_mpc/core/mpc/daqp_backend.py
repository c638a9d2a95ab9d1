"""DAQP backend: the condensed jerk QP of both axes (coupled through rotated boxes) solved by DAQP.

Variables: jerks ``(j_x, j_y)`` (2N). Constraints: ``lower_i <= R_i^T (Pz x0 + Uz j)_i <= upper_i``.
Exact (dual active set), used as an independent cross-check of the ``exact`` backend.
"""

from __future__ import annotations

import numpy as np

from walk_mpc.core.mpc.status import PlanStatus


class DaqpBackend:
    """Condensed QP solved with ``daqp.solve`` each tick (warm-started with the shifted active set)."""

    def __init__(self, mpc) -> None:
        import daqp  # noqa: F401 - imported here so that the package is only needed for this backend

        cond = mpc.condensed
        n = cond.horizon
        self.cond = cond
        self.n = n
        self.shift = bool(mpc.shift_warm_start)
        self.hessian = np.kron(np.eye(2), cond.hessian)  # blocks (x, y)
        self.reset()

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
        import daqp

        cond, n = self.cond, self.n
        if (preview.lower > preview.upper).any():
            return PlanStatus.INFEASIBLE, None, 0
        grad = cond.gradient(x0, preview.zmp_ref)  # (N, 2)
        f = np.concatenate([grad[:, 0], grad[:, 1]])
        cos, sin = np.cos(preview.angles)[:, None], np.sin(preview.angles)[:, None]
        uz = cond.uz
        a = np.block([[cos * uz, sin * uz], [-sin * uz, cos * uz]])
        free = cond.pz @ x0  # (N, 2) ZMP under zero jerk
        offset = np.concatenate([cos[:, 0] * free[:, 0] + sin[:, 0] * free[:, 1],
                                 -sin[:, 0] * free[:, 0] + cos[:, 0] * free[:, 1]])
        upper = np.concatenate([preview.upper[:, 0], preview.upper[:, 1]]) - offset
        lower = np.concatenate([preview.lower[:, 0], preview.lower[:, 1]]) - offset
        sense = np.zeros(2 * n, dtype=np.int32)
        if self._sense is not None:
            if self.shift:
                sense[:n - 1] = self._sense[1:n]
                sense[n:2 * n - 1] = self._sense[n + 1:]
            else:
                sense[:] = self._sense
        x, _, exitflag, info = daqp.solve(self.hessian, f, a, upper, lower, sense,
                                          primal_tol=1e-12, dual_tol=1e-12)
        iterations = int(info.get("iterations", 0)) if isinstance(info, dict) else 0
        if exitflag == -1:
            self.reset()
            return PlanStatus.INFEASIBLE, None, iterations
        if exitflag < 1:
            self.reset()
            return PlanStatus.FAILED, None, iterations
        jerk = np.stack([x[:n], x[n:]], axis=1)
        residual = a @ x
        self._sense = ((residual >= upper - 1e-10) | (residual <= lower + 1e-10)).astype(np.int32)
        pos, vel, acc, zmp = cond.trajectories(x0, jerk)
        arrays = tuple(np.ascontiguousarray(v) for v in (jerk, pos, vel, acc, zmp))
        for v in arrays:
            v.flags.writeable = False
        return PlanStatus.SOLVED, arrays, iterations
