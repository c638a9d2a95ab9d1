"""Specification of the walking pattern generator: closed loop, CoM feedback, support correction."""

import dataclasses

import numpy as np
import pytest
from mpc_problems import WALKS, walk_timeline

from walk_mpc.core.errors import InputError, ParameterError, UnknownKeyError
from walk_mpc.core.mpc.lipm import integrate_state
from walk_mpc.core.mpc.planner import MpcPlanner, PlannerParameters
from walk_mpc.core.mpc.problem import MpcParameters, PlanStatus
from walk_mpc.core.params import from_mapping, to_mapping
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, PhaseKind


def _closed_loop(name, control_period, noise=0.0, backend="exact", seed=0):
    """Walk on a simulated LIPM that applies the planned first jerk; optionally noisy CoM feedback."""
    timeline = walk_timeline(name)
    params = PlannerParameters(mpc=MpcParameters(backend=backend), control_period=control_period)
    planner = MpcPlanner(params, timeline)
    rng = np.random.default_rng(seed)
    true_state = None
    outputs = []
    for k in range(int((timeline.t_end + 0.6) / control_period)):
        t = k * control_period
        measured = None
        if noise and true_state is not None:
            measured = true_state[0] + rng.normal(scale=noise, size=2)
        out = planner.step(t, measured)
        outputs.append(out)
        true_state = integrate_state(out.initial_state, out.plan.first_jerk, control_period)
    return planner, outputs


@pytest.mark.parametrize("noise", [0.0, 0.004])
@pytest.mark.parametrize("name", sorted(WALKS))
def test_zmp_stays_in_the_support_polygon_on_every_tick(name, noise):
    _, outputs = _closed_loop(name, 0.02, noise=noise, seed=11)
    for out in outputs:
        assert out.status is PlanStatus.SOLVED
        assert out.preview.violation(out.plan.zmp).max() < 1e-10
    if noise:
        assert any(out.feedback_applied for out in outputs)
        assert not all(out.feedback_applied for out in outputs)


def test_walk_ends_with_the_com_between_the_last_feet():
    planner, outputs = _closed_loop("straight", 0.04)
    last = planner.timeline.phases[-1]
    middle = 0.5 * (np.array(last.left.position[:2]) + np.array(last.right.position[:2]))
    assert np.linalg.norm(outputs[-1].com_targets[0, :2] - middle) < 0.01
    assert outputs[-1].phase is PhaseKind.STAND


def test_targets_are_one_and_two_control_periods_ahead_on_the_plan():
    planner = MpcPlanner(PlannerParameters(control_period=0.01), walk_timeline("turning"))
    for k in range(30):
        out = planner.step(k * 0.01)
    np.testing.assert_allclose(out.target_times, [out.t + 0.01, out.t + 0.02])
    state = out.plan.state_at(0.02)
    np.testing.assert_allclose(out.com_targets[1, :2], state[0], atol=1e-15)
    np.testing.assert_allclose(out.zmp_targets[0, :2], out.plan.zmp[0], atol=1e-12)
    assert out.com_targets[0, 2] == pytest.approx(planner.params.mpc.com_height)
    assert out.preview_com.shape == (planner.params.mpc.horizon, 2)


def test_com_error_below_threshold_changes_nothing():
    planner = MpcPlanner(PlannerParameters(), walk_timeline("straight"))
    planner.step(0.0)
    planned = planner.planned_state(0.02)
    out = planner.step(0.02, planned[0] + [0.003, -0.002])  # |e| = 3.6 mm < 4 mm
    assert not out.feedback_applied
    np.testing.assert_array_equal(out.initial_state, planned)


def test_com_error_above_threshold_adds_exactly_gain_times_error():
    params = PlannerParameters(feedback_threshold=0.004, feedback_gain=0.3)
    planner = MpcPlanner(params, walk_timeline("straight"))
    planner.step(0.0)
    planned = planner.planned_state(0.02)
    error = np.array([0.01, -0.005])
    out = planner.step(0.02, np.append(planned[0] + error, 0.9))
    assert out.feedback_applied
    np.testing.assert_allclose(out.feedback_offset, 0.3 * error, atol=1e-15)
    np.testing.assert_allclose(out.initial_state[0], planned[0] + 0.3 * error, atol=1e-15)
    np.testing.assert_array_equal(out.initial_state[1:], planned[1:])


def test_standing_feedback_never_moves_the_plan_out_of_its_radius_from_the_middle_of_the_soles():
    """A standing robot tipping on its sole edges: the measured CoM runs away; the plan follows it only up to
    ``standing_feedback_radius`` from the middle of the soles (and back in freely). Walking, unbounded."""
    from walk_mpc.core.mpc.preview import stance_centre

    params = PlannerParameters(feedback_threshold=0.004, feedback_gain=0.3, standing_feedback_radius=0.05)
    timeline = walk_timeline("straight")
    stand = timeline.phases[-1]
    assert stand.kind is PhaseKind.STAND
    t = stand.t_start + 0.5
    centre = stance_centre(timeline, t, params.sole)
    planner = MpcPlanner(params, timeline)
    planner.reset(centre)
    planner.step(t)
    distances = []
    for k in range(1, 61):  # the measured CoM 3 cm ahead of the plan, sideways, every tick
        planned = planner.planned_state(t + 0.02 * k)[0]
        out = planner.step(t + 0.02 * k, np.append(planned + [0.0, 0.03], 0.9))
        assert out.feedback_applied
        distances.append(float(np.hypot(*(out.initial_state[0] - centre))))
    assert max(distances) <= 0.05 + 1e-12 and distances[-1] == pytest.approx(0.05)
    back = planner.step(t + 1.24, np.append(centre, 0.9))  # a measurement back in: followed
    assert np.hypot(*(back.initial_state[0] - centre)) < 0.05
    # walking (not a STAND phase): the offset is gain times the error, as seed 001
    unbounded = MpcPlanner(params, timeline)
    unbounded.step(0.0)
    planned = unbounded.planned_state(0.02)[0]
    out = unbounded.step(0.02, np.append(planned + [0.0, 0.2], 0.9))
    np.testing.assert_allclose(out.feedback_offset, [0.0, 0.06], atol=1e-15)


def test_support_correction_moves_the_landed_foot_and_shifts_all_later_steps():
    timeline = walk_timeline("straight")
    planner = MpcPlanner(PlannerParameters(), timeline)
    touchdown = timeline.touchdown_time(2)
    t = 0.0
    while t < touchdown:
        planner.step(t)
        t += 0.02
    planned = {s.step_index: s for s in timeline.steps}
    measured = FootPose((planned[2].position[0] + 0.01, planned[2].position[1] - 0.02, 0.0), yaw=0.05)
    offset = planner.correct_support(Foot.LEFT, measured, t)
    np.testing.assert_allclose(offset, [0.01, -0.02, 0.0], atol=1e-15)
    new = {s.step_index: s for s in planner.timeline.steps}
    assert new[2].position == measured.position and new[2].yaw == 0.05
    for index in (1,):
        assert new[index] == planned[index]
    for index in range(3, len(planned) + 1):
        np.testing.assert_allclose(np.subtract(new[index].position, planned[index].position), offset)
        assert new[index].yaw == planned[index].yaw
    out = planner.step(t)
    assert out.status is PlanStatus.SOLVED
    assert out.preview.violation(out.plan.zmp).max() < 1e-10


def test_support_correction_before_the_first_step_moves_the_initial_foot_and_every_step():
    timeline = walk_timeline("lateral")
    planner = MpcPlanner(PlannerParameters(), timeline)
    planner.step(0.0)
    measured = FootPose((0.002, -0.09, 0.0))
    offset = planner.correct_support(Foot.RIGHT, measured)
    np.testing.assert_allclose(offset, [0.002, -0.005, 0.0], atol=1e-15)
    assert planner.timeline.phases[0].right == measured
    for old, new in zip(timeline.steps, planner.timeline.steps):
        np.testing.assert_allclose(np.subtract(new.position, old.position), offset)


def test_osqp_backend_walks_the_turn_within_a_tenth_of_a_millimetre():
    _, outputs = _closed_loop("turning", 0.04, backend="osqp")
    for out in outputs:
        assert out.status is PlanStatus.SOLVED
        assert out.preview.violation(out.plan.zmp).max() <= 1e-4


@pytest.mark.parametrize("field, value", [("control_period", 0.001), ("control_period", 0.05),
                                          ("feedback_gain", 1.5), ("feedback_threshold", -0.1)])
def test_bad_planner_parameters_are_rejected(field, value):
    with pytest.raises(ParameterError) as info:
        PlannerParameters(**{field: value})
    assert info.value.name == field


def test_parameters_load_from_a_nested_mapping_and_reject_unknown_keys():
    params = PlannerParameters(mpc=MpcParameters(horizon=50), control_period=0.01)
    assert from_mapping(PlannerParameters, to_mapping(params)) == params
    with pytest.raises(UnknownKeyError):
        from_mapping(PlannerParameters, {"mpc": {"horizont": 50}})
    with pytest.raises(ParameterError) as info:
        from_mapping(PlannerParameters, {"mpc": {"weights": {"jerk": 0.0}}})
    assert "jerk" in info.value.name


def test_misuse_is_reported_as_input_errors():
    planner = MpcPlanner()
    with pytest.raises(InputError):
        planner.step(0.0)
    planner.set_timeline(walk_timeline("straight"))
    planner.step(1.0)
    with pytest.raises(InputError):
        planner.step(0.5)
    with pytest.raises(InputError):
        planner.step(1.02, measured_com=[np.nan, 0.0])
    with pytest.raises(InputError):
        planner.step(1.02, measured_com=[0.0, 0.0, 0.0, 0.0])


def test_reset_restarts_at_rest_from_the_given_com():
    planner = MpcPlanner(PlannerParameters(), walk_timeline("straight"))
    planner.step(0.0)
    planner.reset(com_position=[0.01, 0.02])
    out = planner.step(0.0)
    np.testing.assert_array_equal(out.initial_state, [[0.01, 0.02], [0.0, 0.0], [0.0, 0.0]])
    assert dataclasses.is_dataclass(out)


def _walk_with_preparation(backend, prepare, noise=0.004, seed=5, correct_at=None):
    """The noisy closed loop of ``_closed_loop``; with ``prepare``, each step is prepared a control period
    ahead (right after the previous step); ``correct_at``: tick of a support correction between the
    preparation and its step. Returns the outputs and which steps used their preparation."""
    timeline = walk_timeline("turning")
    period = 0.02
    params = PlannerParameters(mpc=MpcParameters(backend=backend), control_period=period)
    planner = MpcPlanner(params, timeline)
    rng = np.random.default_rng(seed)
    true_state, outputs, used = None, [], []
    for k in range(int((timeline.t_end + 0.6) / period)):
        t = k * period
        measured = None if true_state is None else true_state[0] + rng.normal(scale=noise, size=2)
        if k == correct_at:
            planned = planner.timeline.phase_at(t).foot(Foot.LEFT)
            moved = FootPose(np.add(planned.position, [0.004, 0.0, 0.0]), planned.yaw)
            planner.correct_support(Foot.LEFT, moved, t)
        out = planner.step(t, measured)
        outputs.append(out)
        used.append(planner.last_step_prepared)
        true_state = integrate_state(out.initial_state, out.plan.first_jerk, period)
        if prepare:
            assert planner.prepare((k + 1) * period)  # the very float of the next step's time
    return outputs, used


@pytest.mark.parametrize("backend", ["exact", "daqp"])
def test_a_prepared_step_is_the_step_it_replaces_bit_for_bit(backend):
    if backend == "daqp":
        pytest.importorskip("daqp")
    plain, unused = _walk_with_preparation(backend, prepare=False)
    prepared, used = _walk_with_preparation(backend, prepare=True, correct_at=40)
    assert not any(unused)
    for k, (a, b) in enumerate(zip(plain[:40], prepared[:40])):  # before the correction: the same walk
        for name in ("com_targets", "com_velocity_targets", "zmp_targets", "initial_state",
                     "feedback_offset"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=f"{name} at tick {k}")
        np.testing.assert_array_equal(a.plan.jerk, b.plan.jerk)
        assert a.feedback_applied == b.feedback_applied
    applied = [out.feedback_applied for out in prepared]
    # Used exactly when the feedback did not act, after the first step and except at the correction.
    assert used == [k > 0 and not applied[k] and k != 40 for k in range(len(prepared))]
    assert sum(used) > 100 and sum(applied) > 100  # both ways, many times


def test_a_dropped_preparation_leaves_no_trace():
    """Feedback or a new timeline drop the preparation: the step solves as if it had never been made."""
    timeline = walk_timeline("straight")
    a, b = MpcPlanner(PlannerParameters(), timeline), MpcPlanner(PlannerParameters(), timeline)
    for planner in (a, b):
        planner.step(0.0)
    far = a.planned_state(0.02)[0] + [0.02, 0.0]  # above the threshold: feedback
    assert b.prepare(0.02)
    out_a, out_b = a.step(0.02, far), b.step(0.02, far)
    assert out_b.feedback_applied and not b.last_step_prepared
    np.testing.assert_array_equal(out_a.plan.jerk, out_b.plan.jerk)
    assert b.prepare(0.04)
    b.set_timeline(a.timeline)  # the same walk, another timeline object: a changed plan
    out_a, out_b = a.step(0.04), b.step(0.04)
    assert not b.last_step_prepared
    np.testing.assert_array_equal(out_a.plan.jerk, out_b.plan.jerk)
    assert b.prepare(0.06)
    out_a, out_b = a.step(0.07), b.step(0.07)  # another time than prepared
    assert not b.last_step_prepared
    np.testing.assert_array_equal(out_a.plan.jerk, out_b.plan.jerk)
    out_a, out_b = a.step(0.09), b.step(0.09)  # a preparation is used once
    assert not b.last_step_prepared


def test_osqp_prepared_steps_match_within_its_tolerance():
    plain, _ = _walk_with_preparation("osqp", prepare=False)
    prepared, used = _walk_with_preparation("osqp", prepare=True)
    assert sum(used) > 100
    for a, b in zip(plain, prepared):
        np.testing.assert_allclose(a.com_targets, b.com_targets, atol=1e-6)


def test_prepare_is_refused_without_a_timeline_or_in_the_past_and_declines_before_the_first_step():
    planner = MpcPlanner(PlannerParameters())
    with pytest.raises(InputError, match="timeline"):
        planner.prepare(0.0)
    planner.set_timeline(walk_timeline("straight"))
    assert not planner.prepare(0.0)  # the first step starts from the measured CoM
    planner.step(0.1)
    with pytest.raises(InputError, match="0.1"):
        planner.prepare(0.05)
    with pytest.raises(InputError, match="finite"):
        planner.prepare(float("nan"))


def test_on_stairs_the_com_height_follows_the_soles_continuously():
    """Two steps up 10 cm and two down (StepData z, known terrain): the CoM target's height is com_height over
    the mean of the soles in double support and moves between them with the swing sole's height blend, without
    a jump (it jumped by half a swing's height change at each lift-off and touchdown)."""
    from walk_mpc.core.walk.step import Step
    from walk_mpc.core.walk.timeline import GaitTiming, Timeline

    left, right = FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0))
    heights = (0.0, 0.1, 0.2, 0.2, 0.1, 0.0, 0.0)
    steps = [Step(k + 1, Foot.LEFT if k % 2 == 0 else Foot.RIGHT, 1.1,
                  (0.25 * (k + 1), 0.085 if k % 2 == 0 else -0.085, z)) for k, z in enumerate(heights)]
    timeline = Timeline(left, right, steps, GaitTiming(0.6, 0.3, 0.6))
    params = PlannerParameters(control_period=0.02)
    planner = MpcPlanner(params, timeline)
    h = params.mpc.com_height
    outputs = [planner.step(k * 0.02) for k in range(int((timeline.t_end + 0.6) / 0.02))]
    z = np.array([out.com_targets[0, 2] for out in outputs])
    assert np.max(np.abs(np.diff(z))) < 0.02  # under 1 m/s (a swing climbing 2 risers in 0.27 s): no jump
    for out in outputs:
        t = out.target_times[0]
        phase = timeline.phase_at(t)
        if phase.kind is not PhaseKind.SINGLE:
            mean = 0.5 * (phase.left.position[2] + phase.right.position[2])
            assert out.com_targets[0, 2] == pytest.approx(h + mean)
    assert z.max() == pytest.approx(h + 0.2) and z[-1] == pytest.approx(h)
    level = MpcPlanner(params, walk_timeline("straight"))  # level ground: the stance sole's height, as before
    assert all(level.step(k * 0.02).com_targets[0, 2] == h for k in range(100))
