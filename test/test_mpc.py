"""Specification of the walking MPC: exact reference walk, backends, fallbacks, parameters."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from mpc_problems import SMPC_PARAMS, SMPC_TICKS, load_reference_walk, run_reference_walk, walk_timeline

from walk_mpc.core.errors import InputError, ParameterError, ShapeError
from walk_mpc.core.mpc import daqp_backend as mpc_daqp
from walk_mpc.core.mpc import exact as mpc_exact
from walk_mpc.core.mpc.preview import Preview, PreviewBuilder, SoleParameters
from walk_mpc.core.mpc.problem import Mpc, MpcParameters, MpcWeights, OsqpSettings, PlanStatus
from walk_mpc.core.params import from_mapping, to_mapping


@pytest.fixture(scope="module")
def walk():
    return load_reference_walk()


def _state(plan):
    return np.stack([plan.com_position[0], plan.com_velocity[0], plan.com_acceleration[0]])


@pytest.fixture(params=["kernel", "numpy"])
def exact_impl(request, monkeypatch):
    """Run a test with the compiled kernels of the exact and daqp backends (if numba is installed) and with
    their numpy implementations."""
    if request.param == "numpy":
        monkeypatch.setattr(mpc_exact, "USE_KERNEL", False)
        monkeypatch.setattr(mpc_daqp, "USE_KERNEL", False)
    elif mpc_exact._load_kernel() is None:
        pytest.skip("numba not installed")
    return request.param


@pytest.mark.parametrize("backend, tolerance", [("exact", 1e-9), ("daqp", 1e-9), ("osqp", 1e-5)])
def test_reference_walk_reproduces_smpc_solver_on_all_142_ticks(walk, backend, tolerance, exact_impl):
    if backend == "osqp" and exact_impl == "numpy":
        pytest.skip("implementation switch only concerns the exact and daqp backends")
    mpc = Mpc(dataclasses.replace(SMPC_PARAMS, backend=backend))
    plans = run_reference_walk(mpc, walk)
    assert len(plans) == SMPC_TICKS
    ref = walk.reference
    com = np.array([p.com_position[0] for p in plans])
    zmp = np.array([p.zmp[0] for p in plans])
    assert all(p.status is PlanStatus.SOLVED for p in plans)
    assert np.abs(com[:, 0] - ref["com_x"]).max() < tolerance
    assert np.abs(com[:, 1] - ref["com_y"]).max() < tolerance
    assert np.abs(zmp[:, 0] - ref["zmp_x"]).max() < tolerance
    assert np.abs(zmp[:, 1] - ref["zmp_y"]).max() < tolerance
    vel = np.array([p.com_velocity[0] for p in plans])
    assert np.abs(vel[:, 0] - ref["com_vx"]).max() < 100 * tolerance
    bound = 1e-4 if backend == "osqp" else 1e-10
    for k, plan in enumerate(plans):  # every predicted ZMP of every tick inside its rectangle
        assert walk.preview(k).violation(plan.zmp).max() <= bound


def test_exact_backend_matches_daqp_on_rotated_coupled_boxes(exact_impl):
    rng = np.random.default_rng(7)
    params = MpcParameters(horizon=30)
    exact, daqp = Mpc(params), Mpc(dataclasses.replace(params, backend="daqp"))
    n = params.horizon
    for _ in range(20):
        angles = np.cumsum(rng.uniform(-0.3, 0.3, n))
        lower = rng.uniform(-0.05, 0.0, size=(n, 2)) + np.cumsum(rng.uniform(0, 0.02, (n, 2)), axis=0)
        upper = lower + rng.uniform(0.02, 0.1, size=(n, 2))
        ref = rng.uniform(-0.2, 0.5, size=(n, 2))
        preview = Preview(exact.durations, angles, lower, upper, ref)
        state = rng.normal(scale=[[0.05], [0.1], [0.3]], size=(3, 2))
        a, b = exact.solve(state, preview), daqp.solve(state, preview)
        assert a.status is b.status is PlanStatus.SOLVED
        np.testing.assert_allclose(a.jerk, b.jerk, atol=1e-6)
        np.testing.assert_allclose(a.zmp, b.zmp, atol=1e-9)
        assert preview.violation(a.zmp).max() < 1e-10


def test_exact_backend_warm_started_with_every_bound_solves_within_its_arrays(exact_impl):
    """Regression, recorded in the graph: after a simulator restart moved the robot 0.7 m from its plan, the
    planned CoM state ran ~100 m away from the support box, which pins every ZMP of the window to a bound
    (a working set of all 2N bounds). With that warm start, roundoff on a bound already in the working set
    made the loop add it again: past the 2N entries of the compiled kernel's arrays (heap corruption, a
    crash at the process' exit), or a failed solve. Bounds in the working set are no longer candidates."""
    case = np.load(Path(__file__).resolve().parent / "data" / "exact_full_working_set.npz")
    params = MpcParameters(com_height=0.8767)
    mpc = Mpc(params, first_interval=0.02)
    n = mpc.horizon
    active, sides = case["active"], case["sides"]
    assert sorted(active.tolist()) == list(range(2 * n))  # every bound, as recorded
    preview = Preview(mpc.durations, case["angles"], case["lower"], case["upper"], case["zmp_ref"])
    if exact_impl == "kernel":
        from walk_mpc.core.mpc import exact_kernel as mpc_exact_kernel

        backend = mpc._backend
        work = [np.array(a) for a in (active, sides, backend.mw, backend.k_inv, backend.k_work)]
        # the kernel's own source under numpy's bounds checks (compiled, it would write out of range)
        kernel_source = getattr(mpc_exact_kernel.exact_tick, "py_func", mpc_exact_kernel.exact_tick)
        status, count, _ = kernel_source(
            backend.k_consts, backend.k_dyn, backend.zeta, case["x0"], preview.packed, work[0], work[1],
            2 * n, backend.shift, backend.max_iterations, work[2], work[3], work[4], np.empty((5 * n, 2)))
        assert (status, count) == (0, 2 * n)
        mpc._backend.restore((2 * n, active, sides))
    else:
        mpc._backend.restore((2 * n, tuple(active.tolist()), tuple(sides.tolist())))
    plan = mpc.solve(case["x0"], preview)
    assert plan.status is PlanStatus.SOLVED
    assert preview.violation(plan.zmp).max() < 1e-9
    daqp = Mpc(dataclasses.replace(params, backend="daqp"), first_interval=0.02).solve(case["x0"], preview)
    assert daqp.status is PlanStatus.SOLVED
    np.testing.assert_allclose(plan.zmp, daqp.zmp, atol=1e-6)


def test_daqp_warm_start_keeps_few_iterations_and_matches_the_exact_backend(walk, exact_impl):
    """DAQP starts each tick from the previous active set shifted by one interval, each bound on its side
    (upper, or lower: DAQP's LOWER flag): on the steady reference walk a tick takes about two iterations
    (DAQP counts its final check), far fewer than from a cold start, and the plans are the exact backend's.
    Also on a turning walk, whose rotated boxes change the constraint matrix from tick to tick."""
    daqp = Mpc(dataclasses.replace(SMPC_PARAMS, backend="daqp"))
    assert daqp._backend.accelerated == (exact_impl == "kernel")
    plans, sides = [], set()
    state = np.zeros((3, 2))
    for k in range(SMPC_TICKS):
        plans.append(daqp.solve(state, walk.preview(k)))
        sides.update(daqp.save()[1].tolist())  # the warm start of the next tick
        state = _state(plans[-1])
    assert sides == {0, 1, 3}  # bounds active at their upper (1) and at their lower (1 + 2) limit
    exact = run_reference_walk(Mpc(SMPC_PARAMS), walk)
    for a, b in zip(plans, exact):
        assert a.status is PlanStatus.SOLVED
        np.testing.assert_allclose(a.zmp, b.zmp, atol=1e-9)
        np.testing.assert_allclose(a.jerk, b.jerk, atol=1e-6)
    warm = np.mean([p.iterations for p in plans[1:]])
    cold = Mpc(dataclasses.replace(SMPC_PARAMS, backend="daqp"))
    cold_iterations = []
    for k, plan in enumerate(exact[:-1]):  # from the same states, without the warm start
        cold.reset()
        cold_iterations.append(cold.solve(_state(plan), walk.preview(k + 1)).iterations)
    assert warm <= 3.0 < np.mean(cold_iterations)
    timeline = walk_timeline("turning")
    builder = PreviewBuilder(timeline, SoleParameters(), 0.04, 40)
    solvers = {name: Mpc(MpcParameters(backend=name)) for name in ("daqp", "exact")}
    states = {name: np.zeros((3, 2)) for name in solvers}
    iterations = []
    for t in np.arange(0.0, timeline.t_end, 0.04):
        preview = builder.build(float(t))
        turning = {name: mpc.solve(states[name], preview) for name, mpc in solvers.items()}
        np.testing.assert_allclose(turning["daqp"].zmp, turning["exact"].zmp, atol=1e-9)
        iterations.append(turning["daqp"].iterations)
        states = {name: _state(plan) for name, plan in turning.items()}
    assert np.mean(iterations[1:]) <= 3.0


def test_plan_is_self_consistent_and_shifts_by_one_interval(walk):
    mpc = Mpc(SMPC_PARAMS)
    plan = run_reference_walk(mpc, walk, ticks=30)[-1]
    np.testing.assert_allclose(plan.state_at(plan.durations[0]), _state(plan), atol=1e-12)
    np.testing.assert_allclose(plan.state_at(float(plan.durations[:5].sum()))[0], plan.com_position[4],
                               atol=1e-12)
    shifted = plan.shifted(mpc.model)
    assert shifted.status is PlanStatus.SHIFTED_PREVIOUS and shifted.is_fallback
    assert shifted.t_start == pytest.approx(plan.t_start + plan.durations[0])
    np.testing.assert_allclose(shifted.com_position[:-1], plan.com_position[1:], atol=1e-12)
    np.testing.assert_array_equal(shifted.jerk[:-1], plan.jerk[1:])
    np.testing.assert_array_equal(shifted.jerk[-1], 0.0)
    np.testing.assert_allclose(shifted.zmp, shifted.com_position - mpc.model.zeta * shifted.com_acceleration,
                               atol=1e-12)


@pytest.mark.parametrize("backend", ["exact", "daqp", "osqp"])
def test_impossible_polygon_returns_infeasible_and_the_previous_plan_shifted(walk, backend, exact_impl):
    mpc = Mpc(dataclasses.replace(SMPC_PARAMS, backend=backend))
    plans = run_reference_walk(mpc, walk, ticks=10)
    good = walk.preview(10, durations=mpc.durations)
    upper = good.upper.copy()
    upper[5, 1] = good.lower[5, 1] - 0.01  # empty box
    bad = dataclasses.replace(good, upper=upper)
    plan = mpc.solve(_state(plans[-1]), bad)
    assert plan.status is PlanStatus.INFEASIBLE and plan.is_fallback
    assert all(np.all(np.isfinite(a)) for a in (plan.jerk, plan.com_position, plan.zmp))
    np.testing.assert_allclose(plan.com_position[:-1], plans[-1].com_position[1:], atol=1e-12)
    # The MPC recovers on the next feasible tick.
    assert mpc.solve(_state(plan), walk.preview(11)).status is PlanStatus.SOLVED


def test_infeasible_first_tick_holds_the_current_state_without_nan(exact_impl):
    mpc = Mpc(MpcParameters(horizon=10))
    preview = Preview(mpc.durations, np.zeros(10), np.ones((10, 2)), np.zeros((10, 2)), np.zeros((10, 2)))
    state = np.array([[0.1, 0.0], [0.2, 0.0], [0.0, 0.0]])
    plan = mpc.solve(state, preview)
    assert plan.status is PlanStatus.INFEASIBLE and plan.is_fallback
    np.testing.assert_array_equal(plan.jerk, 0.0)
    np.testing.assert_allclose(plan.com_position[0], [0.1 + 0.2 * 0.04, 0.0])


def test_solver_exception_becomes_failed_with_fallback(monkeypatch, walk):
    mpc = Mpc(SMPC_PARAMS)
    plans = run_reference_walk(mpc, walk, ticks=3)

    def boom(*_):
        raise RuntimeError("solver crashed")

    monkeypatch.setattr(mpc._backend, "solve", boom)
    plan = mpc.solve(_state(plans[-1]), walk.preview(3))
    assert plan.status is PlanStatus.FAILED and plan.is_fallback
    np.testing.assert_array_equal(plan.jerk[:-1], plans[-1].jerk[1:])


def test_variable_first_interval_keeps_the_zmp_in_its_boxes_closed_loop(exact_impl):
    timeline = walk_timeline("turning")
    params = MpcParameters()
    mpc = Mpc(params, first_interval=0.01)
    builder = PreviewBuilder(timeline, SoleParameters(), params.sampling_period, params.horizon, 0.01)
    state = np.zeros((3, 2))
    for k in range(int(timeline.t_end / 0.01)):
        preview = builder.build(k * 0.01)
        plan = mpc.solve(state, preview)
        assert plan.status is PlanStatus.SOLVED
        assert preview.violation(plan.zmp).max() < 1e-10
        state = _state(plan)


@pytest.mark.parametrize("field, value", [
    ("horizon", 1), ("horizon", 40.0), ("sampling_period", -0.04), ("sampling_period", 2.0),
    ("com_height", 0.0), ("gravity", math.inf), ("backend", "proxqp")])
def test_bad_parameters_are_rejected_with_clear_messages(field, value):
    with pytest.raises(ParameterError) as info:
        MpcParameters(**{field: value})
    assert info.value.name == field
    assert repr(value) in str(info.value)


def test_bad_weights_settings_grid_and_inputs_are_rejected():
    with pytest.raises(ParameterError, match="zmp"):
        MpcWeights(zmp=0.0)
    with pytest.raises(ParameterError, match="velocity"):
        MpcWeights(velocity=-1.0)
    with pytest.raises(ParameterError, match="eps_abs"):
        OsqpSettings(eps_abs=0.0)
    with pytest.raises(ParameterError, match="first_interval"):
        Mpc(MpcParameters(), first_interval=0.05)
    mpc = Mpc(MpcParameters(horizon=5))
    preview = Preview(np.full(5, 0.04), np.zeros(5), -np.ones((5, 2)), np.ones((5, 2)), np.zeros((5, 2)))
    with pytest.raises(ShapeError):
        mpc.solve(np.zeros((2, 3)), preview)
    with pytest.raises(InputError):
        mpc.solve(np.full((3, 2), np.nan), preview)
    with pytest.raises(ShapeError):
        Mpc(MpcParameters(horizon=6)).solve(np.zeros((3, 2)), preview)
    with pytest.raises(InputError):
        Mpc(MpcParameters(horizon=5), first_interval=0.02).solve(np.zeros((3, 2)), preview)


def test_parameters_round_trip_through_a_nested_mapping():
    params = MpcParameters(horizon=60, weights=MpcWeights(zmp=1000.0), backend="osqp")
    mapping = to_mapping(params)
    assert mapping["weights"]["zmp"] == 1000.0
    assert from_mapping(MpcParameters, mapping) == params


def test_failure_with_a_short_first_interval_resamples_the_previous_plan(monkeypatch):
    timeline = walk_timeline("straight")
    mpc = Mpc(MpcParameters(), first_interval=0.01)
    builder = PreviewBuilder(timeline, SoleParameters(), 0.04, 40, first_interval=0.01)
    good = mpc.solve(np.zeros((3, 2)), builder.build(0.0))
    monkeypatch.setattr(mpc._backend, "solve", lambda *_: (PlanStatus.FAILED, None, 0))
    first = mpc.solve(_state(good), builder.build(0.01))
    second = mpc.solve(_state(first), builder.build(0.02))
    for plan, t in ((first, 0.01), (second, 0.02)):
        assert plan.is_fallback and plan.status is PlanStatus.FAILED
        assert plan.t_start == pytest.approx(t)
        for dt in (0.01, 0.02, 0.05, 0.3, 1.0):  # the previous prediction, exactly
            np.testing.assert_allclose(plan.state_at(dt), good.state_at(t + dt), atol=1e-12)


def test_compiled_kernels_off_takes_the_numpy_loops_of_every_backend_and_the_window(walk):
    """``compiled_kernels`` False (the graph's mpc_planner: a quicker start): no compiled loop is loaded by
    the exact and daqp backends nor by the preview builder, the walk is the same; a non-bool is refused."""
    from walk_mpc.core.mpc.planner import MpcPlanner, PlannerParameters

    plain = dataclasses.replace(SMPC_PARAMS, compiled_kernels=False)
    assert Mpc(plain)._backend.kernel is None
    assert Mpc(dataclasses.replace(plain, backend="daqp"))._backend._kernels is None
    plans = run_reference_walk(Mpc(plain), walk)
    com = np.array([p.com_position[0] for p in plans])
    assert np.abs(com[:, 0] - walk.reference["com_x"]).max() < 1e-9
    planner = MpcPlanner(dataclasses.replace(PlannerParameters(), mpc=dataclasses.replace(
        PlannerParameters().mpc, compiled_kernels=False)))
    planner.set_timeline(walk_timeline("straight"))
    assert not planner._builder.accelerated
    with pytest.raises(ParameterError, match="compiled_kernels"):
        MpcParameters(compiled_kernels="no")
