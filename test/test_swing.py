"""Specification tests of the swing-foot trajectory."""

import itertools
import math

import numpy as np
import pytest

from walk_mpc.core.body.swing import apex_bump, blend, swing_pose, swing_position_yaw, wrap_angle
from walk_mpc.core.errors import InputError, ShapeError

RNG = np.random.default_rng(5)


def random_swing():
    start = RNG.uniform(-1.0, 1.0, 3) * [1.0, 1.0, 0.1]
    end = start + RNG.uniform(-0.3, 0.3, 3) * [1.0, 1.0, 0.3]
    return start, RNG.uniform(-3, 3), end, RNG.uniform(-3, 3), RNG.uniform(0.0, 0.15)


def test_starts_at_lift_off_and_ends_at_touchdown_with_zero_velocity_and_acceleration():
    for _ in range(20):
        start, yaw0, end, yaw1, height = random_swing()
        first = swing_pose(start, yaw0, end, yaw1, height, 0.0)
        last = swing_pose(start, yaw0, end, yaw1, height, 1.0)
        np.testing.assert_allclose(first.position, start, atol=1e-12)
        np.testing.assert_allclose(last.position, end, atol=1e-12)
        assert first.yaw == pytest.approx(yaw0)
        assert wrap_angle(last.yaw - yaw1) == pytest.approx(0.0, abs=1e-12)
        for sample in (first, last):
            np.testing.assert_allclose(sample.velocity, 0.0, atol=1e-12)
            np.testing.assert_allclose(sample.acceleration, 0.0, atol=1e-12)
            assert sample.yaw_velocity == pytest.approx(0.0, abs=1e-12)
            assert sample.yaw_acceleration == pytest.approx(0.0, abs=1e-12)


def test_mid_swing_is_swing_height_above_the_midpoint_of_level_soles_and_above_the_higher_one():
    for _ in range(20):
        start, yaw0, end, yaw1, height = random_swing()
        mid = swing_pose(start, yaw0, end, yaw1, height, 0.5)
        top = max(start[2], end[2])  # the higher sole (a height change: module docstring)
        assert mid.position[2] == pytest.approx(top + height, abs=1e-12)
        level = np.array([*end[:2], start[2]])
        mid = swing_pose(start, yaw0, level, yaw1, height, 0.5)
        np.testing.assert_allclose(mid.position, 0.5 * (start + level) + [0.0, 0.0, height], atol=1e-12)


@pytest.mark.parametrize("rise", [0.1, -0.1])
def test_a_step_up_rises_first_and_a_step_down_descends_last_clearing_a_tread_edge(rise):
    """Talos' 0.25 m steps onto 10 cm stairs (the sole 0.1 m to either side of its origin): going up, the toe
    crosses an edge between the stance sole's toe and the landing sole's heel above the upper tread; going
    down, the heel crosses an edge 1 cm past the stance sole's toe above it (swing_height 5 cm)."""
    from walk_mpc.core.body.swing import HEIGHT_CHANGE_SPAN

    start, end = np.array([0.0, 0.0, 0.0 if rise > 0 else -rise]), np.array([0.5, 0.0, max(rise, 0.0)])
    grid = np.linspace(0.0, 1.0, 2001)
    samples = [swing_pose(start, 0.0, end, 0.0, 0.05, s) for s in grid]
    z = np.array([sample.position[2] for sample in samples])
    x = np.array([sample.position[0] for sample in samples])
    top = abs(rise)
    if rise > 0:  # at its top (plus the bump) by a third of the swing, the toe crosses after that
        assert np.all(z[grid >= HEIGHT_CHANGE_SPAN] >= top)
        edges, side = np.linspace(0.35, 0.40, 6), +0.1  # stance toe 0.35, landing heel 0.40
    else:  # on its lift-off height (plus the bump) until the last third
        assert np.all(z[grid <= 1.0 - HEIGHT_CHANGE_SPAN] >= top)
        edges, side = np.linspace(0.35, 0.395, 10), -0.1
    for edge in edges:  # where the toe (up) or the heel (down) crosses the edge
        crossing = np.argmax(x + side >= edge)
        assert z[crossing] >= top + 0.02, (edge, grid[crossing], z[crossing])
    for level in (0.0, 1e-4):  # continuous in the height change (bit for bit the level swing at 0)
        end_level = np.array([0.5, 0.0, start[2] + level])
        path = np.array([swing_pose(start, 0.0, end_level, 0.0, 0.05, s).position for s in grid])
        flat = np.array([[*(start[:2] + (end_level - start)[:2] * blend(s)[0]),
                          start[2] + 0.05 * apex_bump(s)[0]] for s in grid])
        np.testing.assert_allclose(path, flat, atol=0 if level == 0.0 else 3e-3)


def test_on_flat_ground_the_apex_is_exactly_swing_height():
    grid = np.linspace(0, 1, 1001)
    heights = [swing_pose((0, 0.1, 0), 0, (0.3, 0.1, 0), 0, 0.07, s).position[2] for s in grid]
    assert max(heights) == pytest.approx(0.07, abs=1e-12)
    assert min(heights) >= 0.0


def test_derivatives_match_finite_differences():
    eps = 1e-6
    for _ in range(10):
        args = random_swing()
        for s in RNG.uniform(0.01, 0.99, 5):
            here, before, after = (swing_pose(*args, s + d) for d in (0.0, -eps, eps))
            velocity = (after.position - before.position) / (2 * eps)
            np.testing.assert_allclose(here.velocity, velocity, atol=1e-6)
            np.testing.assert_allclose(
                here.acceleration, (after.velocity - before.velocity) / (2 * eps), atol=1e-5
            )
            assert here.yaw_velocity == pytest.approx((after.yaw - before.yaw) / (2 * eps), abs=1e-6)
            assert here.yaw_acceleration == pytest.approx(
                (after.yaw_velocity - before.yaw_velocity) / (2 * eps), abs=1e-5
            )


def test_yaw_turns_the_short_way_across_pi():
    path = [swing_pose((0, 0, 0), 3.0, (0, 0, 0), -3.0, 0.0, s).yaw for s in np.linspace(0, 1, 11)]
    assert all(b >= a for a, b in itertools.pairwise(path))
    assert path[-1] - path[0] == pytest.approx(2 * math.pi - 6.0)


def test_horizontal_path_stays_on_the_segment_and_is_monotonic():
    start, end = np.array([0.0, 0.1, 0.0]), np.array([0.25, 0.15, 0.0])
    progress = []
    for s in np.linspace(0, 1, 101):
        xy = swing_pose(start, 0.0, end, 0.0, 0.05, s).position[:2]
        offset = xy - start[:2]
        direction = (end - start)[:2]
        cross = offset[0] * direction[1] - offset[1] * direction[0]
        assert cross == pytest.approx(0.0, abs=1e-12)
        progress.append(offset @ direction)
    assert all(b >= a - 1e-15 for a, b in itertools.pairwise(progress))


def test_s_outside_the_unit_interval_is_clamped():
    assert swing_pose((0, 0, 0), 0, (1, 0, 0), 0, 0.1, -0.5).s == 0.0
    np.testing.assert_allclose(swing_pose((0, 0, 0), 0, (1, 0, 0), 0, 0.1, 1.5).position, (1, 0, 0))


def test_non_finite_or_malformed_inputs_raise_input_errors_naming_the_value():
    with pytest.raises(InputError, match="start_position"):
        swing_pose((0, float("nan"), 0), 0, (1, 0, 0), 0, 0.1, 0.5)
    with pytest.raises(InputError, match="'s'"):
        swing_pose((0, 0, 0), 0, (1, 0, 0), 0, 0.1, float("nan"))
    with pytest.raises(InputError, match="swing_height"):
        swing_pose((0, 0, 0), 0, (1, 0, 0), 0, -0.1, 0.5)
    with pytest.raises(ShapeError):
        swing_pose((0, 0), 0, (1, 0, 0), 0, 0.1, 0.5)


def test_trusted_position_and_yaw_are_bit_identical_to_swing_pose():
    for _ in range(200):
        start, yaw0, end, yaw1, height = random_swing()
        s = float(RNG.choice([0.0, 0.5, 1.0, RNG.uniform()]))
        sample = swing_pose(start, yaw0, end, yaw1, height, s)
        position, yaw = swing_position_yaw(tuple(start.tolist()), yaw0, tuple(end.tolist()), yaw1, height, s)
        assert np.array(position).tobytes() == sample.position.tobytes()
        assert yaw == sample.yaw



# ------------------------------------------------------------------------------ re-planned mid-swing
def _walk(step_y: float = 0.085):
    from walk_mpc.core.walk.footsteps import walk_forward
    from walk_mpc.core.walk.timeline import FootPose, GaitTiming, Timeline

    left, right = FootPose((0.0, 0.085, 0.0)), FootPose((0.0, -0.085, 0.0))
    steps = list(walk_forward(left, right, 0.8, step_length=0.2, width=0.17, duration=1.1))
    x = steps[2].position[0] - 0.05
    steps[2] = steps[2].replace(position=(x, step_y, 0.0), yaw=0.1 * (step_y - 0.085))
    return Timeline(left, right, steps, GaitTiming(0.6, 0.3, 0.6))


def _swing_phase(timeline):
    return next(p for p in timeline.phases if p.kind.name == "SINGLE" and p.step_index == 3)


def test_a_step_moved_mid_swing_leaves_the_old_swing_without_a_jump_and_lands_on_the_new_touchdown():
    from walk_mpc.core.body.swing import RetargetedPhase, retarget_swing
    from walk_mpc.core.body.targets import foot_targets_at

    old = _walk()
    new = _walk(step_y=0.14)  # step 3 5.5 cm out and turned
    phase = _swing_phase(old)
    foot = phase.swing_foot
    t_r = phase.t_start + 0.55 * phase.duration
    replanned = retarget_swing(new, old, t_r)
    assert isinstance(replanned.phase_at(t_r), RetargetedPhase)
    assert replanned.steps == new.steps
    assert replanned.phases[:5] == new.phases[:5]

    def pose(timeline, t):
        target = foot_targets_at(timeline, t)[foot]
        return np.array([*target.position, target.yaw])

    dt = 1e-4
    for t in (t_r - 0.2, t_r):  # the old swing until the re-plan
        np.testing.assert_array_equal(pose(replanned, t), pose(old, t))
    # Position, velocity and acceleration continuous at the re-plan; the bare new timeline jumps.
    before = [pose(old, t_r + k * dt) for k in (-1, 0, 1)]
    after = [pose(replanned, t_r + k * dt) for k in (-1, 0, 1)]
    np.testing.assert_allclose(after[2] - after[1], before[2] - before[1], atol=1e-8)
    np.testing.assert_allclose(after[2] - 2 * after[1] + after[0], before[2] - 2 * before[1] + before[0],
                               atol=1e-9)
    assert np.linalg.norm(pose(new, t_r)[:2] - pose(old, t_r)[:2]) > 0.02
    # Lands on the new touchdown, at rest, the apex kept.
    touchdown = new.phase_at(t_r).foot(foot)
    np.testing.assert_allclose(pose(replanned, phase.t_end)[:3], touchdown.position, atol=1e-12)
    assert pose(replanned, phase.t_end)[3] == pytest.approx(touchdown.yaw)
    end = phase.t_end
    np.testing.assert_allclose(pose(replanned, end) - pose(replanned, end - dt), 0.0, atol=1e-9)
    heights = [pose(replanned, t)[2] for t in np.linspace(phase.t_start, phase.t_end, 41)]
    assert max(heights) == pytest.approx(max(pose(old, t)[2] for t in np.linspace(phase.t_start, phase.t_end,
                                                                                  41)))
    # After the swing, the new timeline's feet.
    t = phase.t_end + 0.1
    np.testing.assert_array_equal(pose(replanned, t), pose(new, t))


def test_a_re_plan_is_kept_by_corrections_and_made_only_for_the_step_in_the_air():
    from walk_mpc.core.body.swing import RetargetedPhase, retarget_swing

    old, new = _walk(), _walk(step_y=0.14)
    phase = _swing_phase(old)
    t_r = phase.t_start + 0.4 * phase.duration
    replanned = retarget_swing(new, old, t_r)
    # A correction (same touchdown) keeps the re-plan; replan=False never makes one.
    assert retarget_swing(new, replanned, t_r + 0.1, replan=False).phase_at(t_r).retarget \
        == replanned.phase_at(t_r).retarget
    assert retarget_swing(new, new, t_r) is new
    assert retarget_swing(new, old, t_r, replan=False) is new
    assert not isinstance(retarget_swing(_walk(), old, t_r).phase_at(t_r), RetargetedPhase)  # nothing moved
    # Not in the air: in double support, before lift-off, without a previous timeline.
    assert retarget_swing(new, old, phase.t_end + 0.1) is new
    assert retarget_swing(new, old, phase.t_start - 0.35) is new
    assert retarget_swing(new, None, t_r) is new
    # Twice: the second re-plan starts from the first's trajectory.
    again = retarget_swing(_walk(step_y=0.2), replanned, t_r + 0.1)
    assert again.phase_at(t_r).retarget.base is replanned.phase_at(t_r)
