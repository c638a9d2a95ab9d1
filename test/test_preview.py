"""Specification of the MPC preview: support boxes (4 half-planes) and ZMP references."""

import math

import numpy as np
import pytest
from mpc_problems import WALKS, walk_timeline
from scipy.spatial import ConvexHull

from walk_mpc.core.errors import InputError, ParameterError, ShapeError
from walk_mpc.core.mpc import preview as mpc_preview
from walk_mpc.core.mpc.preview import Preview, PreviewBuilder, SoleParameters, double_support_box
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

SOLE = SoleParameters(front=0.09, back=0.03, left=0.025, right=0.025)


def _sole_corners(pose: FootPose, sole: SoleParameters) -> np.ndarray:
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    local = np.array([[sole.front, sole.left], [-sole.back, sole.left], [-sole.back, -sole.right],
                      [sole.front, -sole.right]])
    return local @ np.array([[c, s], [-s, c]]) + np.array(pose.position[:2])


def _box_corners(box) -> np.ndarray:
    angle, lower, upper = box
    preview = Preview([0.1], [angle], [lower], [upper], [0.5 * (lower + upper)])
    return preview.corners()[0]


def _inside_hull(points: np.ndarray, hull_points: np.ndarray, tol: float = 1e-12) -> bool:
    hull = ConvexHull(hull_points)
    return bool(np.all(points @ hull.equations[:, :2].T + hull.equations[:, 2] <= tol))


def test_single_support_box_is_the_rotated_sole_rectangle():
    pose = FootPose((0.3, -0.1, 0.0), yaw=0.7)
    box = SOLE.box(pose)
    corners = _box_corners(box)
    expected = _sole_corners(pose, SOLE)
    for corner in expected:
        assert np.min(np.linalg.norm(corners - corner, axis=1)) < 1e-12


def test_double_support_of_side_by_side_feet_is_their_whole_hull():
    # smpc_test13 initial double support: x in [-0.03, 0.09], y in [-0.075, 0.075].
    angle, lower, upper = double_support_box(FootPose((0, 0.05, 0)), FootPose((0, -0.05, 0)), SOLE)
    assert angle == 0.0
    np.testing.assert_allclose(lower, [-0.03, -0.075], atol=1e-15)
    np.testing.assert_allclose(upper, [0.09, 0.075], atol=1e-15)


@pytest.mark.parametrize("same_yaw", [True, False])
def test_double_support_box_lies_in_the_hull_of_both_soles_and_contains_both_centres(same_yaw):
    rng = np.random.default_rng(3 if same_yaw else 4)
    for _ in range(300):
        yaw_a = rng.uniform(-math.pi, math.pi)
        yaw_b = yaw_a if same_yaw else yaw_a + rng.uniform(-0.8, 0.8)
        a = FootPose((rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3), 0.0), yaw_a)
        b = FootPose((rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3), 0.0), yaw_b)
        box = double_support_box(a, b, SOLE)
        corners = _box_corners(box)
        soles = np.vstack([_sole_corners(a, SOLE), _sole_corners(b, SOLE)])
        assert _inside_hull(corners, soles, tol=1e-9)
        centres = np.stack([SOLE.centre(a), SOLE.centre(b)])
        preview = Preview([0.1, 0.1], [box[0]] * 2, [box[1]] * 2, [box[2]] * 2, centres)
        assert preview.violation(centres).max() < 1e-12


def test_feet_with_one_yaw_and_short_steps_give_axis_aligned_previews():
    timeline = walk_timeline("lateral")
    builder = PreviewBuilder(timeline, SoleParameters(), 0.04, 40)
    for t in np.arange(0.0, timeline.t_end, 0.04):
        assert builder.build(float(t)).is_axis_aligned


@pytest.mark.parametrize("name", sorted(WALKS))
def test_zmp_reference_is_inside_its_support_box_along_every_walk(name):
    timeline = walk_timeline(name)
    builder = PreviewBuilder(timeline, SoleParameters(), 0.04, 40, first_interval=0.02)
    for t in np.arange(0.0, timeline.t_end + 1.0, 0.02):
        preview = builder.build(float(t))
        assert preview.violation(preview.zmp_ref).max() < 1e-12


def test_single_support_reference_is_the_stance_sole_centre_and_box_its_sole():
    timeline = walk_timeline("straight")
    sole = SoleParameters()
    builder = PreviewBuilder(timeline, sole, 0.04, 10)
    single = next(p for p in timeline.phases if p.kind is PhaseKind.SINGLE)
    t = single.t_start + 0.01
    preview = builder.build(t - 0.04)  # first interval ends at t
    stance = single.foot(single.swing_foot.other)
    np.testing.assert_allclose(preview.zmp_ref[0], sole.centre(stance))
    angle, lower, upper = sole.box(stance)
    np.testing.assert_allclose(preview.lower[0], lower)
    np.testing.assert_allclose(preview.upper[0], upper)


def test_sway_goes_from_the_midpoint_to_the_first_stance_and_catch_returns_to_the_midpoint():
    left, right = FootPose((0.0, 0.1, 0.0)), FootPose((0.0, -0.1, 0.0))
    steps = [Step(1, Foot.RIGHT, 0.8, (0.1, -0.1, 0.0)), Step(2, Foot.LEFT, 0.8, (0.2, 0.1, 0.0))]
    timeline = Timeline(left, right, steps, GaitTiming(0.6, 0.2, 0.6))
    sole = SoleParameters(front=0.1, back=0.1, left=0.05, right=0.05)
    builder = PreviewBuilder(timeline, sole, 0.02, 1)
    np.testing.assert_allclose(builder.build(-0.02).zmp_ref[0], [0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(builder.build(0.6 - 0.02 - 1e-6).zmp_ref[0], [0.0, 0.1], atol=1e-4)
    catch_end = timeline.t_end
    np.testing.assert_allclose(builder.build(catch_end).zmp_ref[0], [0.15, 0.0], atol=1e-12)


def test_halfplanes_agree_with_the_violation_measure():
    rng = np.random.default_rng(5)
    n = 20
    lower = rng.uniform(-0.2, 0.0, size=(n, 2))
    preview = Preview(np.full(n, 0.04), rng.uniform(-3, 3, n), lower, lower + 0.1, np.zeros((n, 2)))
    a, b = preview.halfplanes()
    assert a.shape == (n, 4, 2) and b.shape == (n, 4)
    for _ in range(50):
        zmp = rng.uniform(-0.3, 0.3, size=(n, 2))
        inside = np.all(np.einsum("nkj,nj->nk", a, zmp) <= b, axis=1)
        np.testing.assert_array_equal(inside, preview.violation(zmp) == 0.0)


def test_malformed_previews_are_rejected():
    ok = dict(durations=[0.04, 0.04], angles=[0.0, 0.0], lower=np.zeros((2, 2)), upper=np.ones((2, 2)),
              zmp_ref=np.zeros((2, 2)))
    with pytest.raises(ShapeError):
        Preview(**{**ok, "lower": np.zeros((3, 2))})
    with pytest.raises(InputError):
        Preview(**{**ok, "zmp_ref": [[0.0, np.nan], [0.0, 0.0]]})
    with pytest.raises(InputError):
        Preview(**{**ok, "durations": [0.04, 0.0]})
    with pytest.raises(ParameterError) as info:
        SoleParameters(front=-0.1)
    assert info.value.name == "front"
    with pytest.raises(ParameterError):
        PreviewBuilder(walk_timeline("straight"), SoleParameters(), 0.04, 0)


def _reference_window(builder: PreviewBuilder, t: float):
    """Straightforward per-interval sampling of the timeline (the definition the builder vectorises)."""
    timeline, sole = builder.timeline, builder.sole
    rows = []
    for offset in np.cumsum(builder.durations):
        ts = t + offset + 1e-9
        index = timeline.phase_index_at(ts)
        phase = timeline.phases[index]
        if phase.kind is PhaseKind.SINGLE:
            angle, lower, upper = sole.box(phase.foot(phase.swing_foot.other))
        else:
            angle, lower, upper = double_support_box(phase.left, phase.right, sole)
        rows.append((angle, lower, upper, builder.zmp_reference(index, phase, ts)))
    return (np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), np.array([r[2] for r in rows]),
            np.array([r[3] for r in rows]))


def _random_timeline(rng: np.random.Generator) -> Timeline:
    """Random walk: any step lengths, widths and turns, random timing and start time."""
    left = FootPose((rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-0.1, 0.1)), rng.uniform(-3, 3))
    right = FootPose((left.position[0] + rng.uniform(-0.1, 0.1), left.position[1] - rng.uniform(0.1, 0.3),
                      left.position[2]), left.yaw + rng.choice([0.0, rng.uniform(-0.4, 0.4)]))
    timing = GaitTiming(rng.uniform(0.05, 1.0), rng.uniform(0.05, 0.4), rng.uniform(0.05, 1.0))
    steps, foot = [], Foot(int(rng.integers(2)))
    x, y, yaw = left.position[0], left.position[1], left.yaw
    for k in range(int(rng.integers(0, 9))):
        yaw += rng.choice([0.0, rng.uniform(-0.5, 0.5)])  # straight and turning steps
        x += rng.uniform(-0.2, 0.3)
        y += rng.uniform(-0.3, 0.3)
        duration = timing.double_support_duration + rng.uniform(0.05, 1.2)
        steps.append(Step(k + 1, foot, duration, (x, y, rng.uniform(-0.05, 0.05)), yaw,
                          swing_height=rng.uniform(0.0, 0.1)))
        foot = foot.other
    return Timeline(left, right, steps, timing, t0=rng.uniform(-5.0, 5.0))


def test_vectorised_windows_are_bit_identical_to_sampling_interval_by_interval():
    rng = np.random.default_rng(11)
    for _ in range(60):
        timeline = _random_timeline(rng)
        period = rng.uniform(0.01, 0.1)
        builder = PreviewBuilder(timeline, SoleParameters(rng.uniform(0.05, 0.15), rng.uniform(0.02, 0.1),
                                                          rng.uniform(0.02, 0.08), rng.uniform(0.02, 0.08)),
                                 period, int(rng.integers(1, 60)), first_interval=rng.uniform(0.001, period))
        span = timeline.t_end - timeline.t0
        times = np.sort(rng.uniform(timeline.t0 - 1.0, timeline.t_end + 1.0, 30))  # before, during, after
        for t in [timeline.t0, *times, *(rng.uniform(timeline.t0, timeline.t0 + span, 5))]:  # and backwards
            preview = builder.build(float(t))
            expected = _reference_window(builder, float(t))
            for actual, reference in zip((preview.angles, preview.lower, preview.upper, preview.zmp_ref),
                                         expected):
                assert actual.tobytes() == reference.tobytes()
            assert preview.t_start == t and preview.durations is builder.durations


def test_phase_boundaries_use_the_phase_just_after_the_interval_end():
    timeline = walk_timeline("turning")
    builder = PreviewBuilder(timeline, SoleParameters(), 0.04, 40, first_interval=0.02)
    for phase in timeline.phases[:-1]:
        for t in (phase.t_end - 0.02, phase.t_end - 0.02 - 1e-9, phase.t_end - 0.02 - 2e-9):
            preview = builder.build(t)
            expected = _reference_window(builder, t)
            np.testing.assert_array_equal(preview.zmp_ref, expected[3])
            np.testing.assert_array_equal(preview.angles, expected[0])


def test_windows_are_read_only_and_independent_of_later_builds():
    builder = PreviewBuilder(walk_timeline("straight"), SoleParameters(), 0.04, 40)
    first = builder.build(0.5)
    copy = first.zmp_ref.copy()
    builder.build(1.7)
    np.testing.assert_array_equal(first.zmp_ref, copy)
    for array in (first.angles, first.lower, first.upper, first.zmp_ref):
        assert not array.flags.writeable
    with pytest.raises(InputError):
        builder.build(math.nan)


def test_every_phase_is_filled_when_the_builder_is_made_so_no_tick_fills_one(monkeypatch):
    """Issue 16: a tick whose window reached a new phase filled it (~4 us more than the 2 us build), the
    p99 of the tick; the builder is made once per plan and fills them all then."""
    builder = PreviewBuilder(walk_timeline("turning"), SoleParameters(), 0.04, 40, first_interval=0.02)
    fills, fill = [], builder._fill
    monkeypatch.setattr(builder, "_fill", lambda index: (fills.append(index), fill(index)))
    for t in np.arange(0.0, builder.timeline.t_end, 0.02):
        builder.build(float(t))
    assert fills == []


def test_built_windows_pass_the_preview_validation_and_share_the_owner_grid():
    builder = PreviewBuilder(walk_timeline("turning"), SoleParameters(), 0.04, 40, first_interval=0.02)
    grid = np.array(builder.durations)  # an owner (MpcPlanner) replaces the grid by its own array
    builder.durations = grid
    for t in np.arange(-0.5, builder.timeline.t_end + 0.5, 0.1):
        preview = builder.build(float(t))
        checked = Preview(preview.durations, preview.angles, preview.lower, preview.upper, preview.zmp_ref,
                          t_start=preview.t_start)  # raises if a built array were malformed
        for name in ("durations", "angles", "lower", "upper", "zmp_ref"):
            np.testing.assert_array_equal(getattr(checked, name), getattr(preview, name))
        assert preview.durations is builder.durations and not preview.durations.flags.writeable
    np.testing.assert_array_equal(builder.durations, grid)
    builder.durations = np.array([0.02, 0.04, -0.04])  # checked at the next build
    with pytest.raises(InputError):
        builder.build(0.0)


@pytest.mark.parametrize("window", ["kernel", "numpy"])
def test_trusted_windows_are_bit_identical_to_checked_previews_of_the_reference_sampling(window, monkeypatch):
    """build() hands its arrays to Preview without the checks (trusted path). Its windows, from the
    compiled loop or the numpy implementation, are the checked Preview of the interval-by-interval
    sampling, bit for bit, with the checked path's array properties (read-only, C-contiguous float64)."""
    if window == "numpy":
        monkeypatch.setattr(mpc_preview, "USE_KERNEL", False)
    rng = np.random.default_rng(5)
    for _ in range(40):
        timeline = _random_timeline(rng)
        period = rng.uniform(0.01, 0.1)
        builder = PreviewBuilder(timeline, SoleParameters(), period, int(rng.integers(1, 60)),
                                 first_interval=rng.uniform(0.001, period))
        if window == "kernel" and not builder.accelerated:
            pytest.skip("numba not installed")
        assert builder.accelerated == (window == "kernel")
        for t in rng.uniform(timeline.t0 - 1.0, timeline.t_end + 1.0, 12):
            fast = builder.build(float(t))
            checked = Preview(builder.durations, *_reference_window(builder, float(t)), t_start=float(t))
            assert fast.t_start == checked.t_start and fast.durations is builder.durations
            for name in ("durations", "angles", "lower", "upper", "zmp_ref"):
                a, b = getattr(fast, name), getattr(checked, name)
                assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
                assert not a.flags.writeable and a.flags.c_contiguous, name
            # one packed window (what the compiled solvers read), the same from both constructors
            assert fast.packed.tobytes() == checked.packed.tobytes() and not fast.packed.flags.writeable
    with pytest.raises(InputError):
        builder.build(math.inf)


def test_the_compiled_exact_solve_reads_the_packed_window_without_making_the_field_views():
    """The tick's cost: a built preview's four field arrays are made only when something reads them."""
    from walk_mpc.core.mpc.problem import Mpc, MpcParameters

    timeline = _random_timeline(np.random.default_rng(2))
    params = MpcParameters()
    mpc = Mpc(params, first_interval=0.02)
    if not mpc._backend.accelerated:
        pytest.skip("numba not installed")
    builder = PreviewBuilder(timeline, SoleParameters(), params.sampling_period, mpc.horizon,
                             first_interval=0.02)
    builder.durations = mpc.durations
    preview = builder.build(timeline.t0)
    state = np.zeros((3, 2))
    state[0] = preview.packed[-mpc.horizon]  # the CoM over the first ZMP reference
    plan = mpc.solve(state, preview)
    assert plan.status.name == "SOLVED"
    assert not {"angles", "lower", "upper", "zmp_ref"} & set(vars(preview))
    assert preview.zmp_ref.base is preview.packed  # on first read: views of the packed window
    assert {"angles", "lower", "upper", "zmp_ref"} <= set(vars(preview))


def test_an_inward_offset_moves_each_single_stance_reference_toward_the_other_foot():
    """``inward`` (PlannerParameters.zmp_inward_offset): in single support the reference is that far from the
    stance sole's centre toward the other foot along the sole's y axis (turned feet too); double support
    interpolates between those points; the windows stay bit-identical to sampling interval by interval, and
    0 is the sole centre bit for bit."""
    left, right = FootPose((0.0, 0.1, 0.0), 0.3), FootPose((0.0, -0.1, 0.0), 0.3)
    steps = [Step(1, Foot.RIGHT, 0.8, (0.1, -0.1, 0.0), 0.3), Step(2, Foot.LEFT, 0.8, (0.2, 0.1, 0.0), 0.3)]
    timeline = Timeline(left, right, steps, GaitTiming(0.6, 0.2, 0.6))
    sole = SoleParameters(front=0.1, back=0.1, left=0.05, right=0.05)
    plain = PreviewBuilder(timeline, sole, 0.02, 1)
    shifted = PreviewBuilder(timeline, sole, 0.02, 1, inward=0.03)
    inward_of = {Foot.LEFT: -1.0, Foot.RIGHT: 1.0}  # toward the other foot, along the sole's y axis
    for phase in timeline.phases:
        if phase.kind is not PhaseKind.SINGLE:
            continue
        t = 0.5 * (phase.t_start + phase.t_end)
        stance = phase.swing_foot.other
        yaw = phase.foot(stance).yaw
        offset = 0.03 * inward_of[stance] * np.array([-math.sin(yaw), math.cos(yaw)])
        expected = plain.build(t).zmp_ref[0] + offset
        np.testing.assert_allclose(shifted.build(t).zmp_ref[0], expected, atol=1e-12)
    for t in np.arange(-0.1, timeline.t_end + 0.5, 0.013):
        preview = shifted.build(float(t))
        for actual, reference in zip((preview.angles, preview.lower, preview.upper, preview.zmp_ref),
                                     _reference_window(shifted, float(t))):
            assert actual.tobytes() == reference.tobytes()
        assert preview.violation(preview.zmp_ref).max() < 1e-12
        zero = PreviewBuilder(timeline, sole, 0.02, 1, inward=0.0).build(float(t))
        assert zero.zmp_ref.tobytes() == plain.build(float(t)).zmp_ref.tobytes()
    with pytest.raises(InputError, match="inward"):
        PreviewBuilder(timeline, sole, 0.02, 1, inward=0.05)
    from walk_mpc.core.mpc.planner import PlannerParameters

    with pytest.raises(ParameterError, match="zmp_inward_offset"):
        PlannerParameters(zmp_inward_offset=0.06)
    assert PlannerParameters().zmp_inward_offset == 0.0
