"""OSQP backend: sparse formulation (states and jerks of both axes as variables), built once.

Variables ``v = (s_1, ..., s_N, u_0, ..., u_{N-1})`` with ``s_i = (c, c', c'')_x, (c, c', c'')_y`` the
state at the end of interval ``i`` and ``u_i`` the jerks (x, y). Constraints: the exact dynamics as
equalities (``s_1 - B_0 u_0 = A_0 x0`` carries the initial state in its bounds) and two rows per
interval ``lower_i <= R_i^T z(s_i) <= upper_i``. Per tick only ``q`` (ZMP reference), ``l``/``u``
(initial state, boxes) and, when the box angles changed, the rotation entries of the constraint
matrix are updated; the solver is warm-started with the previous solution shifted by one interval.
The returned trajectories are re-integrated exactly from the jerks.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from walk_mpc.core.mpc.status import PlanStatus

_MAX_VIOLATION = 1e-4  # [m] accepted ZMP bound violation of an inaccurate solution


class OsqpBackend:
    """Warm-started sparse OSQP solver of the MPC QP."""

    def __init__(self, mpc) -> None:
        import osqp

        self._osqp = osqp
        cond = mpc.condensed
        n = cond.horizon
        self.cond = cond
        self.n = n
        self.shift = bool(mpc.shift_warm_start)
        w = cond.weights
        zeta = cond.model.zeta
        d = np.array([1.0, 0.0, -zeta])
        q3 = w.zmp * np.outer(d, d) + np.diag([0.0, w.velocity, w.acceleration])
        ns, nu = 6 * n, 2 * n
        self.nv = ns + nu
        p = sp.block_diag([sp.kron(sp.eye(2 * n), sp.csc_matrix(q3)), w.jerk * sp.eye(nu)], format="csc")
        self.d_zmp = d
        # Dynamics rows.
        rows, cols, vals = [], [], []
        self.a0 = []
        for i in range(n):
            a, b = cond.model.discretize(float(cond.durations[i]))
            if i == 0:
                self.a0 = a
            for axis in range(2):
                base_r = 6 * i + 3 * axis
                for r in range(3):
                    rows.append(base_r + r)
                    cols.append(6 * i + 3 * axis + r)
                    vals.append(1.0)
                    if i > 0:
                        for c in range(3):
                            if a[r, c] != 0.0:
                                rows.append(base_r + r)
                                cols.append(6 * (i - 1) + 3 * axis + c)
                                vals.append(-a[r, c])
                    rows.append(base_r + r)
                    cols.append(ns + 2 * i + axis)
                    vals.append(-b[r])
        # ZMP rows (placeholder 1.0 so that every rotation entry is structural).
        zrow0 = ns
        for i in range(n):
            for out_axis in range(2):
                for axis in range(2):
                    for c in (0, 2):
                        rows.append(zrow0 + 2 * i + out_axis)
                        cols.append(6 * i + 3 * axis + c)
                        vals.append(1.0)
        a_mat = sp.csc_matrix((vals, (rows, cols)), shape=(ns + 2 * n, self.nv))
        a_mat.sort_indices()
        # Positions in a_mat.data of the ZMP-row entries, in the order (i, out_axis, axis, c).
        index = []
        for i in range(n):
            for out_axis in range(2):
                for axis in range(2):
                    for c in (0, 2):
                        col = 6 * i + 3 * axis + c
                        start, end = a_mat.indptr[col], a_mat.indptr[col + 1]
                        hit = np.nonzero(a_mat.indices[start:end] == zrow0 + 2 * i + out_axis)[0][0]
                        k = start + int(hit)
                        index.append(k)
        self.zmp_idx = np.array(index)
        self.a_mat = a_mat
        self.p = p
        self.zrow0 = zrow0
        self.settings = mpc.params.osqp
        self.lower = np.zeros(ns + 2 * n)
        self.upper = np.zeros(ns + 2 * n)
        self.q = np.zeros(self.nv)
        self._solver = None
        self._angles = None
        self.reset()

    def reset(self) -> None:
        """Forget the warm start (the solver is set up again at the next tick)."""
        self._solver = None
        self._x = None
        self._y = None

    def save(self) -> tuple:
        """The warm start (solver, primal and dual iterates), for :meth:`restore`. OSQP's adaptive step
        size stays where the last solve left it: a solve after :meth:`restore` matches the one it
        replays within the solver's tolerances, not bit for bit."""
        return self._solver, self._x, self._y

    def restore(self, saved: tuple) -> None:
        """Warm start as :meth:`save` returned it; the ZMP rows of the constraint matrix are sent again at
        the next solve (the solver may hold another preview's)."""
        self._solver, self._x, self._y = saved
        self._angles = None

    def _zmp_values(self, angles: np.ndarray) -> np.ndarray:
        cos, sin = np.cos(angles), np.sin(angles)
        rot = np.stack([np.stack([cos, sin], 1), np.stack([-sin, cos], 1)], 1)  # (N, out_axis, axis)
        dz = self.d_zmp[[0, 2]]
        return (rot[:, :, :, None] * dz[None, None, None, :]).reshape(-1)

    def _setup(self, angles: np.ndarray) -> None:
        s = self.settings
        self.a_mat.data[self.zmp_idx] = self._zmp_values(angles)
        solver = self._osqp.OSQP()
        solver.setup(self.p, self.q, self.a_mat, self.lower, self.upper, verbose=False,
                     eps_abs=s.eps_abs, eps_rel=s.eps_rel, max_iter=s.max_iter, polishing=s.polish,
                     rho=s.rho, adaptive_rho_interval=s.adaptive_rho_interval, warm_starting=True,
                     eps_prim_inf=1e-6, polish_refine_iter=5)
        self._solver = solver
        self._angles = angles.copy()

    def solve(self, x0: np.ndarray, preview):
        """Solve one tick; returns (status, (jerk, pos, vel, acc, zmp), iterations)."""
        n, ns = self.n, 6 * self.n
        cond = self.cond
        if (preview.lower > preview.upper).any():
            return PlanStatus.INFEASIBLE, None, 0
        # Bounds: dynamics equalities, then ZMP boxes.
        first = self.a0 @ x0  # (3, 2)
        self.lower[:ns] = 0.0
        self.lower[0:3] = first[:, 0]
        self.lower[3:6] = first[:, 1]
        self.upper[:ns] = self.lower[:ns]
        self.lower[ns:] = preview.lower.reshape(-1)
        self.upper[ns:] = preview.upper.reshape(-1)
        q_states = self.q[:ns].reshape(n, 2, 3)
        q_states[:] = 0.0
        q_states[:, :, 0] = -cond.weights.zmp * preview.zmp_ref
        q_states[:, :, 2] = cond.weights.zmp * cond.model.zeta * preview.zmp_ref
        angles = preview.angles
        if self._solver is None:
            self._setup(angles)
        else:
            update = dict(q=self.q, l=self.lower, u=self.upper)
            if not np.array_equal(angles, self._angles):
                update.update(Ax=self._zmp_values(angles)[np.argsort(self.zmp_idx)],
                              Ax_idx=np.sort(self.zmp_idx))
                self._angles = angles.copy()
            self._solver.update(**update)
            if self._x is not None:
                self._solver.warm_start(x=self._x, y=self._y)
        result = self._solver.solve(raise_error=False)
        status_val = result.info.status_val
        statuses = self._osqp.SolverStatus
        iterations = int(result.info.iter)
        if status_val in (statuses.OSQP_PRIMAL_INFEASIBLE, statuses.OSQP_PRIMAL_INFEASIBLE_INACCURATE):
            self.reset()
            return PlanStatus.INFEASIBLE, None, iterations
        if status_val not in (statuses.OSQP_SOLVED, statuses.OSQP_SOLVED_INACCURATE):
            self.reset()
            return PlanStatus.FAILED, None, iterations
        x = result.x
        jerk = np.ascontiguousarray(x[ns:].reshape(n, 2))
        pos, vel, acc, zmp = (np.ascontiguousarray(v) for v in cond.trajectories(x0, jerk))
        if not np.all(np.isfinite(x)) or preview.violation(zmp).max() > _MAX_VIOLATION:
            self.reset()
            return PlanStatus.FAILED, None, iterations
        self._store_warm_start(x, result.y)
        arrays = (jerk, pos, vel, acc, zmp)
        for v in arrays:
            v.flags.writeable = False
        return PlanStatus.SOLVED, arrays, iterations

    def _store_warm_start(self, x: np.ndarray, y: np.ndarray) -> None:
        ns = 6 * self.n
        if not self.shift:
            self._x, self._y = x.copy(), y.copy()
            return
        xs = np.empty_like(x)
        xs[:ns - 6] = x[6:ns]
        xs[ns - 6:ns] = x[ns - 6:ns]
        xs[ns:-2] = x[ns + 2:]
        xs[-2:] = 0.0
        ys = np.empty_like(y)
        ys[:ns - 6] = y[6:ns]
        ys[ns - 6:ns] = 0.0
        ys[ns:-2] = y[ns + 2:]
        ys[-2:] = y[-2:]
        self._x, self._y = xs, ys
