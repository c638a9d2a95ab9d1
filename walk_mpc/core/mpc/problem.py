"""LIPM walking MPC: Problem (state + Preview) -> QP (built once, vectors updated per tick) -> Plan.

QP solved at every tick, per horizontal axis with the jerk as control (see :mod:`.lipm`)::

    minimise 0.5 * sum_{i=1..N} [ zmp |z_i - zref_i|^2 + velocity |c'_i|^2
                                  + acceleration |c''_i|^2 + jerk |j_{i-1}|^2 ]
    subject to  x_{i} = A_{i-1} x_{i-1} + B_{i-1} j_{i-1}   (exact LIPM, first interval T0, then T)
                lower_i <= R(angle_i)^T z_i <= upper_i        (ZMP in the support box of interval i)

Backends (same interface, selected by ``MpcParameters.backend``):

* ``"exact"`` (default, fastest): dual active-set (Goldfarb-Idnani) on the condensed problem in
  ZMP coordinates, see :mod:`.mpc_exact`. Exact to machine precision.
* ``"daqp"``: the DAQP dual active-set solver on the same condensed problem (exact, slower).
* ``"osqp"``: sparse formulation (states and jerks as variables), warm-started ADMM with polishing,
  see :mod:`.mpc_osqp`.

Error policy: bad parameters raise :class:`ParameterError` at construction; a malformed state or
preview raises :class:`InputError`/:class:`ShapeError`. An infeasible or failed solve never raises
and never returns NaN: the plan carries status INFEASIBLE/FAILED and holds the previous plan shifted
by one interval (or a zero-jerk hold from the current state when there is none), with
``is_fallback`` set. Third-party solver exceptions are caught and reported as FAILED.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Optional, Tuple

import numpy as np

from walk_mpc.core.errors import InputError, ParameterError, ShapeError
from walk_mpc.core.mpc.lipm import LipmModel, integrate_state
from walk_mpc.core.mpc.preview import Preview
from walk_mpc.core.mpc.status import PlanStatus
from walk_mpc.core.params import check_choice, check_int_range, check_nonnegative, check_positive

BACKENDS = ("exact", "daqp", "osqp")


@dataclasses.dataclass(frozen=True)
class MpcWeights:
    """Cost weights (all >= 0, zmp and jerk > 0).

    Attributes:
        zmp: Weight of the squared ZMP tracking error [1/m^2].
        velocity: Weight of the squared CoM velocity [s^2/m^2].
        acceleration: Weight of the squared CoM acceleration [s^4/m^2].
        jerk: Weight of the squared CoM jerk [s^6/m^2].
    """

    zmp: float = 8000.0
    velocity: float = 1.0
    acceleration: float = 0.02
    jerk: float = 1.0

    def __post_init__(self) -> None:
        check_positive("zmp", self.zmp)
        check_nonnegative("velocity", self.velocity)
        check_nonnegative("acceleration", self.acceleration)
        check_positive("jerk", self.jerk)


@dataclasses.dataclass(frozen=True)
class OsqpSettings:
    """Settings of the OSQP backend (tuned so that ZMP bounds hold to 0.1 mm; polishing makes it exact
    whenever the active set is identified).

    Attributes:
        eps_abs: Absolute tolerance.
        eps_rel: Relative tolerance.
        max_iter: Maximum ADMM iterations.
        polish: Polish the solution (active-set refinement).
        rho: Initial ADMM step size.
        adaptive_rho_interval: Iterations between rho updates (0 = automatic).
    """

    eps_abs: float = 1e-6
    eps_rel: float = 1e-6
    max_iter: int = 4000
    polish: bool = True
    rho: float = 0.1
    adaptive_rho_interval: int = 25

    def __post_init__(self) -> None:
        check_positive("eps_abs", self.eps_abs)
        check_nonnegative("eps_rel", self.eps_rel)
        check_int_range("max_iter", self.max_iter, 1)
        check_positive("rho", self.rho)
        check_int_range("adaptive_rho_interval", self.adaptive_rho_interval, 0)
        if not isinstance(self.polish, bool):
            raise ParameterError("polish", self.polish, "true or false")


@dataclasses.dataclass(frozen=True)
class MpcParameters:
    """Parameters of the walking MPC.

    Attributes:
        com_height: Constant CoM height above the ground [m].
        gravity: Gravity [m/s^2].
        sampling_period: Preview sampling period T [s].
        horizon: Number of preview intervals N.
        weights: Cost weights.
        backend: QP backend, one of ``BACKENDS``.
        osqp: Settings of the ``"osqp"`` backend.
        compiled_kernels: Take the compiled (numba) loops when numba is installed: the exact backend's tick,
            DAQP's data, the preview window of :class:`~walk_mpc.core.mpc.preview.PreviewBuilder`; False:
            their numpy implementations (the same algorithms). On the Talos walks of
            ``benchmarks/mpc_smpc_walk.py`` the compiled ones take 7 us a tick (window and exact solve)
            against 56 us, and cost about 0.35 s when the planner is built (numba's import and the kernels
            loaded from its cache). The graph keeps them: without, a restarted mpc_planner's loop came back
            0.15 s sooner (median) but four robots' sensor -> command medians were 0.3 ms longer (issue 17,
            docs/faults.md).
    """

    com_height: float = 0.877
    gravity: float = 9.81
    sampling_period: float = 0.04
    horizon: int = 40
    weights: MpcWeights = MpcWeights()
    backend: str = "exact"
    osqp: OsqpSettings = OsqpSettings()
    compiled_kernels: bool = True

    def __post_init__(self) -> None:
        check_positive("com_height", self.com_height)
        check_positive("gravity", self.gravity)
        check_positive("sampling_period", self.sampling_period)
        if self.sampling_period > 1.0:
            raise ParameterError("sampling_period", self.sampling_period, "a period in (0, 1] s")
        check_int_range("horizon", self.horizon, 2, 1000)
        check_choice("backend", self.backend, BACKENDS)
        if not isinstance(self.weights, MpcWeights):
            raise ParameterError("weights", self.weights, "an MpcWeights")
        if not isinstance(self.osqp, OsqpSettings):
            raise ParameterError("osqp", self.osqp, "an OsqpSettings")
        if not isinstance(self.compiled_kernels, bool):
            raise ParameterError("compiled_kernels", self.compiled_kernels, "true or false")

    @property
    def model(self) -> LipmModel:
        """The LIPM of these parameters."""
        return LipmModel(self.com_height, self.gravity)


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


@dataclasses.dataclass(frozen=True)
class Plan:
    """Result of one MPC tick: the jerk sequence and the predicted trajectory.

    All per-interval arrays have shape (N, 2) (columns x, y, world frame) and give the values at the
    END of each interval (``times``), except ``jerk`` which is held during each interval.

    Attributes:
        status: Solve outcome.
        t_start: Time of ``initial_state`` [s].
        durations: Interval durations [s], shape (N,).
        initial_state: CoM state at ``t_start``, shape (3, 2) (position, velocity, acceleration).
        jerk: CoM jerk per interval [m/s^3].
        com_position: Predicted CoM position [m].
        com_velocity: Predicted CoM velocity [m/s].
        com_acceleration: Predicted CoM acceleration [m/s^2].
        zmp: Predicted ZMP [m].
        solve_time: Wall time of the solve [s].
        iterations: Solver iterations (active-set changes for ``exact``, ADMM iterations for osqp).
        is_fallback: True when the arrays are the previous plan shifted (solve not SOLVED).
        backend: Backend name.
    """

    status: PlanStatus
    t_start: float
    durations: np.ndarray
    initial_state: np.ndarray
    jerk: np.ndarray
    com_position: np.ndarray
    com_velocity: np.ndarray
    com_acceleration: np.ndarray
    zmp: np.ndarray
    solve_time: float = 0.0
    iterations: int = 0
    is_fallback: bool = False
    backend: str = ""

    @classmethod
    def _unchecked(cls, status, t_start, durations, initial_state, arrays, solve_time, iterations,
                   is_fallback, backend) -> Plan:
        """Hot-path constructor for the solver (fields already validated and read-only)."""
        plan = object.__new__(cls)
        jerk, pos, vel, acc, zmp = arrays
        plan.__dict__.update(status=status, t_start=t_start, durations=durations, initial_state=initial_state,
                             jerk=jerk, com_position=pos, com_velocity=vel, com_acceleration=acc, zmp=zmp,
                             solve_time=solve_time, iterations=iterations, is_fallback=is_fallback,
                             backend=backend)
        return plan

    @property
    def horizon(self) -> int:
        """Number of intervals N."""
        return self.durations.shape[0]

    @property
    def is_solved(self) -> bool:
        """True when the QP was solved this tick."""
        return self.status is PlanStatus.SOLVED

    @property
    def times(self) -> np.ndarray:
        """End time of each interval [s], shape (N,)."""
        return self.t_start + np.cumsum(self.durations)

    @property
    def first_jerk(self) -> np.ndarray:
        """Jerk to apply during the first interval [m/s^3], shape (2,)."""
        return self.jerk[0]

    def state_at(self, dt: float) -> np.ndarray:
        """CoM state (3, 2) at ``t_start + dt`` [s] following the plan's jerks (exact; zero jerk
        beyond the horizon)."""
        state = self.initial_state
        remaining = float(dt)
        if remaining < 0.0:
            raise ParameterError("dt", dt, "a duration >= 0 [s]")
        for k in range(self.horizon):
            step = min(remaining, float(self.durations[k]))
            if step <= 0.0:
                return state.copy()
            state = integrate_state(state, self.jerk[k], step)
            remaining -= step
        if remaining > 0.0:
            state = integrate_state(state, np.zeros(2), remaining)
        return state

    def shifted(self, model: LipmModel, status: PlanStatus = PlanStatus.SHIFTED_PREVIOUS,
                solve_time: float = 0.0) -> Plan:
        """This plan advanced by its first interval (see :meth:`advanced`)."""
        return self.advanced(float(self.durations[0]), model, status, solve_time)

    def advanced(self, dt: float, model: LipmModel, status: PlanStatus = PlanStatus.SHIFTED_PREVIOUS,
                 solve_time: float = 0.0) -> Plan:
        """The same trajectory seen from ``t_start + dt`` (``0 <= dt <= horizon duration``).

        The new plan starts with what remains of the interval containing ``t_start + dt``, keeps the
        following intervals and jerks, and is padded at the end with intervals of the last duration
        holding zero jerk, so it still has N intervals. Its predictions are this plan's (exact).

        Args:
            dt: Time advance [s].
            model: The LIPM (for the ZMP).
            status: Status of the new plan.
            solve_time: Solve time to report [s].
        """
        n = self.horizon
        ends = np.cumsum(self.durations)
        if not 0.0 <= dt <= ends[-1] + 1e-12:
            raise ParameterError("dt", dt, f"a time advance in [0, {ends[-1]}] s")
        k = min(int(np.searchsorted(ends, dt + 1e-12, side="right")), n)
        durations = np.empty(n)
        jerk = np.zeros((n, 2))
        rest = n - k
        if rest:
            durations[:rest] = self.durations[k:]
            durations[0] = ends[k] - dt
            jerk[:rest] = self.jerk[k:]
        durations[rest:] = self.durations[-1]
        state = self.state_at(dt)
        initial = state.copy()
        out = np.empty((4, n, 2))
        for i in range(n):
            state = integrate_state(state, jerk[i], float(durations[i]))
            out[0, i], out[1, i], out[2, i] = state
            out[3, i] = state[0] - model.zeta * state[2]
        return Plan(status, self.t_start + dt, _frozen(durations), _frozen(initial), _frozen(jerk),
                    _frozen(out[0]), _frozen(out[1]), _frozen(out[2]), _frozen(out[3]), solve_time, 0, True,
                    self.backend)


class CondensedLipm:
    """Condensed (jerk-only) matrices of the LIPM over a preview grid, shared by x and y.

    Per axis, with ``X = (c_1..c_N, v_1..v_N, a_1..a_N)`` the states at the interval ends::

        c = Pc x0 + Uc j,  v = Pv x0 + Uv j,  a = Pa x0 + Ua j,  z = Pz x0 + Uz j.

    The cost is ``0.5 j^T H j + j^T (Gx x0 - zmp_w Uz^T zref)``.

    Args:
        model: The LIPM.
        durations: Interval durations [s], shape (N,).
        weights: Cost weights.
    """

    def __init__(self, model: LipmModel, durations: np.ndarray, weights: MpcWeights) -> None:
        self.model = model
        self.durations = np.asarray(durations, dtype=float)
        self.weights = weights
        n = self.durations.shape[0]
        self.horizon = n
        phi = np.zeros((n, 3, 3))
        gamma = np.zeros((n, 3, n))
        x_phi = np.eye(3)
        x_gam = np.zeros((3, n))
        for i in range(n):
            a, b = model.discretize(float(self.durations[i]))
            x_phi = a @ x_phi
            x_gam = a @ x_gam
            x_gam[:, i] = b
            phi[i] = x_phi
            gamma[i] = x_gam
        self.pc, self.pv, self.pa = phi[:, 0, :], phi[:, 1, :], phi[:, 2, :]
        self.uc, self.uv, self.ua = gamma[:, 0, :], gamma[:, 1, :], gamma[:, 2, :]
        zeta = model.zeta
        self.pz = self.pc - zeta * self.pa
        self.uz = self.uc - zeta * self.ua
        w = weights
        self.hessian = (
            w.zmp * self.uz.T @ self.uz + w.velocity * self.uv.T @ self.uv
            + w.acceleration * self.ua.T @ self.ua + w.jerk * np.eye(n)
        )
        self.hessian = 0.5 * (self.hessian + self.hessian.T)
        self.gx = (w.zmp * self.uz.T @ self.pz + w.velocity * self.uv.T @ self.pv
                   + w.acceleration * self.ua.T @ self.pa)
        #: Output map: rows (c, v, a, z) x N, columns (x0 (3), j (N)).
        self.outputs = np.block([
            [self.pc, self.uc], [self.pv, self.uv], [self.pa, self.ua], [self.pz, self.uz]])

    def gradient(self, x0: np.ndarray, zmp_ref: np.ndarray) -> np.ndarray:
        """Cost gradient at zero jerk, shape (N, 2) for x0 (3, 2) and zmp_ref (N, 2)."""
        return self.gx @ x0 - self.weights.zmp * self.uz.T @ zmp_ref

    def trajectories(self, x0: np.ndarray, jerk: np.ndarray) -> Tuple[np.ndarray, ...]:
        """(com_position, com_velocity, com_acceleration, zmp), each (N, 2), for jerks (N, 2)."""
        out = self.outputs @ np.vstack([x0, jerk])
        n = self.horizon
        return out[:n], out[n:2 * n], out[2 * n:3 * n], out[3 * n:]


class Mpc:
    """Walking MPC with a fixed grid: first interval ``first_interval``, then ``sampling_period``.

    Build once, then call :meth:`solve` every tick with the current CoM state and the preview.

    Args:
        params: MPC parameters.
        first_interval: Duration of the first interval [s] (default: the sampling period), e.g. the
            control period when it is shorter than the sampling period.

    Raises:
        ParameterError: On invalid parameters.
    """

    def __init__(self, params: MpcParameters = MpcParameters(),
                 first_interval: Optional[float] = None) -> None:
        if not isinstance(params, MpcParameters):
            raise ParameterError("params", params, "an MpcParameters")
        first = params.sampling_period if first_interval is None else first_interval
        check_positive("first_interval", first)
        if first > params.sampling_period * (1.0 + 1e-9):
            raise ParameterError("first_interval", first,
                                 f"a duration <= sampling_period = {params.sampling_period} s")
        self.params = params
        self.model = params.model
        durations = np.full(params.horizon, params.sampling_period)
        durations[0] = first
        self.durations = _frozen(durations)
        self.condensed = CondensedLipm(self.model, durations, params.weights)
        #: Warm start shifts the active set by one interval only on a uniform grid.
        self.shift_warm_start = bool(abs(first - params.sampling_period) < 1e-12)
        self._backend = _make_backend(params.backend, self)
        self._backend_name = params.backend
        self._previous: Optional[Plan] = None
        self._checked_durations: Optional[np.ndarray] = self.durations

    @property
    def horizon(self) -> int:
        """Number of intervals N."""
        return self.params.horizon

    @property
    def backend(self) -> str:
        """Backend name."""
        return self.params.backend

    @property
    def previous_plan(self) -> Optional[Plan]:
        """Last plan returned by :meth:`solve` (None after reset)."""
        return self._previous

    def reset(self) -> None:
        """Forget the previous plan and the warm start."""
        self._previous = None
        self._backend.reset()

    def save(self) -> tuple:
        """What the next :meth:`solve` starts from (the previous plan and the backend's warm start), for
        :meth:`restore`: solve ahead, then go back as if that solve had not happened."""
        return self._previous, self._backend.save()

    def restore(self, saved: tuple) -> None:
        """Go back to a :meth:`save`d start; the next solve is the one that would have followed it (bit for
        bit with the exact and daqp backends, within tolerances with osqp, see its backend)."""
        self._previous, backend = saved
        self._backend.restore(backend)

    def check_preview(self, preview: Preview) -> None:
        """Raise ShapeError unless the preview matches this MPC's grid."""
        if preview.durations is self._checked_durations:
            return
        if preview.horizon != self.horizon:
            raise ShapeError("preview.durations", preview.durations.shape, (self.horizon,))
        if np.max(np.abs(preview.durations - self.durations)) > 1e-9:
            raise InputError("preview.durations", preview.durations,
                             f"{self.durations[0]} s then {self.params.sampling_period} s (the MPC grid)")
        self._checked_durations = preview.durations  # previews are immutable: check each array once

    def solve(self, state: np.ndarray, preview: Preview) -> Plan:
        """Solve one tick.

        Args:
            state: CoM state at ``preview.t_start``, shape (3, 2): rows position [m], velocity [m/s],
                acceleration [m/s^2]; columns x, y.
            preview: Support boxes and ZMP references of the window.

        Returns:
            The plan; on INFEASIBLE/FAILED the previous plan shifted (``is_fallback``).

        Raises:
            ShapeError, InputError: On a malformed state or a preview on another grid.
        """
        x0 = np.array(state, dtype=float)
        if x0.shape != (3, 2):
            raise ShapeError("state", x0.shape, "(3, 2): rows position/velocity/acceleration, columns x/y")
        self.check_preview(preview)
        start = time.perf_counter()
        try:
            status, arrays, iterations = self._backend.solve(x0, preview)
        except Exception:  # noqa: BLE001 - third-party solver errors become FAILED (module policy)
            status, arrays, iterations = PlanStatus.FAILED, None, 0
            self._backend.reset()
        if status is PlanStatus.SOLVED:  # backends only report SOLVED with finite arrays
            x0.flags.writeable = False
            plan = Plan._unchecked(status, preview.t_start, self.durations, x0, arrays,
                                   time.perf_counter() - start, iterations, False, self._backend_name)
        else:
            if not np.all(np.isfinite(x0)):  # checked here only: a non-finite state never solves
                raise InputError("state", state, "finite values")
            plan = self._fallback(status, x0, preview.t_start, time.perf_counter() - start)
        self._previous = plan
        return plan

    def _fallback(self, status: PlanStatus, x0: np.ndarray, t_start: float, elapsed: float) -> Plan:
        """The previous plan advanced to ``t_start`` (by one interval in the usual case, see
        :meth:`Plan.advanced`), or a zero-jerk hold from ``x0`` when no previous plan covers it."""
        previous = self._previous
        if previous is not None:
            dt = t_start - previous.t_start
            if -1e-12 <= dt <= float(np.sum(previous.durations)):
                plan = previous.advanced(max(dt, 0.0), self.model, status, elapsed)
                return dataclasses.replace(plan, backend=self._backend_name)
        jerk = np.zeros((self.horizon, 2))
        pos, vel, acc, zmp = (np.ascontiguousarray(a) for a in self.condensed.trajectories(x0, jerk))
        return Plan(status, t_start, self.durations, _frozen(x0), _frozen(jerk), _frozen(pos), _frozen(vel),
                    _frozen(acc), _frozen(zmp), elapsed, 0, True, self._backend_name)


def _make_backend(name: str, mpc: Mpc):
    if name == "exact":
        from walk_mpc.core.mpc.exact import ExactBackend

        return ExactBackend(mpc)
    if name == "daqp":
        from walk_mpc.core.mpc.daqp_backend import DaqpBackend

        return DaqpBackend(mpc)
    from walk_mpc.core.mpc.osqp_backend import OsqpBackend

    return OsqpBackend(mpc)
