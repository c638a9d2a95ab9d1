"""Specification tests of the whole-body IK."""

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

from walk_mpc.core.body.ik import IKSolver, IKTargets, targets_from_configuration
from walk_mpc.core.body.robot import rotation_z
from walk_mpc.core.errors import FrameNotFound, InputError, ParameterError
from walk_mpc.core.params import from_mapping, to_mapping
from walk_mpc.core.walk.step import Foot


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def step_implementation(request, monkeypatch):
    """Every test runs with the compiled (numba) steps, when available, and with the numpy ones."""
    from walk_mpc.core.body import ik

    if request.param == "numpy":
        monkeypatch.setattr(ik, "USE_KERNEL", False)
    return request.param


def perturbed(robot, rng, scale):
    """A configuration near the reference: random joint offsets (inside limits) and base motion."""
    q = robot.reference_configuration()
    dv = np.zeros(robot.nv)
    dv[:3] = rng.uniform(-0.03, 0.03, 3)
    dv[3:6] = rng.uniform(-0.05, 0.05, 3)
    dv[6:] = rng.uniform(-scale, scale, robot.nv - 6)
    return robot.clamp_to_limits(pin.integrate(robot.model, q, dv))


def assert_targets_met(robot, targets, q, position_tol=1e-4, rotation_tol=1e-3):
    """Independent check (RobotModel forward kinematics, not the solver's)."""
    assert np.linalg.norm(robot.com(q) - targets.com_position) < position_tol
    for frame, position in targets.foot_positions.items():
        actual, rotation = robot.frame_pose(q, frame)
        assert np.linalg.norm(actual - position) < position_tol
        if frame in targets.foot_rotations:
            assert np.linalg.norm(pin.log3(targets.foot_rotations[frame] @ rotation.T)) < rotation_tol


def test_reachable_targets_converge_below_a_tenth_of_a_millimetre(talos):
    rng = np.random.default_rng(0)
    solver = IKSolver(talos)
    for _ in range(10):
        targets = targets_from_configuration(talos, perturbed(talos, rng, 0.1))
        result = solver.solve(targets, talos.reference_configuration())
        assert result.success, result.message
        assert result.position_residual < 1e-4
        assert result.orientation_residual <= solver.params.orientation_tolerance
        assert_targets_met(talos, targets, result.q)
        assert set(result.residuals) == {
            "com", "left_sole_link.position", "right_sole_link.position",
            "left_sole_link.orientation", "right_sole_link.orientation", "torso_2_link.orientation",
        }


def test_task_jacobians_match_finite_differences(talos, solo):
    rng = np.random.default_rng(42)
    eps = 1e-6
    for robot in (talos, solo):
        solver = IKSolver(robot)
        for _ in range(5):
            q = perturbed(robot, rng, 0.3)
            targets = targets_from_configuration(robot, q)  # errors vanish at q
            problem = solver.build_ik(targets, q)
            assert np.abs(problem.error).max() < 1e-9
            direction = rng.normal(size=robot.nv)
            plus = solver.build_ik(targets, pin.integrate(robot.model, q, eps * direction)).error
            minus = solver.build_ik(targets, pin.integrate(robot.model, q, -eps * direction)).error
            # error = target - task(q), so d(error) = -J dq
            np.testing.assert_allclose(-(plus - minus) / (2 * eps), problem.jacobian @ direction, atol=1e-6)


def test_build_ik_exposes_the_linear_system(talos):
    solver = IKSolver(talos)
    q = talos.reference_configuration()
    targets = targets_from_configuration(talos, q)
    problem = solver.build_ik(targets, q)
    assert problem.jacobian.shape == (18, 38)
    assert problem.block_names[0] == "com"
    assert problem.row_damping.shape == (18,) and np.all(problem.row_damping > 0)
    np.testing.assert_allclose(problem.preferred_step[:6], 0.0)
    assert np.all(problem.dq_lower <= 0.0) and np.all(problem.dq_upper >= 0.0)
    moved = IKTargets(com_position=targets.com_position + [0.01, 0.0, 0.0],
                      foot_positions=targets.foot_positions, foot_rotations=targets.foot_rotations)
    problem = solver.build_ik(moved, q)
    dq = solver.solve_ik(problem)
    np.testing.assert_allclose(problem.jacobian @ dq, problem.error, atol=1e-6)  # a Gauss-Newton step


def test_joint_limits_hold_when_targets_ask_beyond_them(talos):
    solver = IKSolver(talos)
    q0 = talos.reference_configuration()
    base = targets_from_configuration(talos, q0)
    lifted = dict(base.foot_positions)
    lifted["left_sole_link"] = lifted["left_sole_link"] + [0.6, 0.2, 0.7]  # far out of reach
    targets = IKTargets(com_position=base.com_position, foot_positions=lifted,
                        foot_rotations=base.foot_rotations, torso_orientation=base.torso_orientation)
    result = solver.solve(targets, q0)
    assert not result.success
    assert np.all(np.isfinite(result.q))
    assert np.all(result.q[7:] >= talos.lower_limits() - 1e-12)
    assert np.all(result.q[7:] <= talos.upper_limits() + 1e-12)
    assert result.residuals["left_sole_link.position"] > 0.01
    assert result.limited_joints  # the active set held some joint at a limit


def test_initial_configuration_outside_limits_is_clipped_first(talos):
    solver = IKSolver(talos)
    q0 = talos.reference_configuration()
    q_bad = q0.copy()
    q_bad[7 + talos.joint_names.index("leg_left_4_joint")] = 3.5  # knee beyond 2.618
    result = solver.solve(targets_from_configuration(talos, q0), q_bad)
    assert np.all(result.q[7:] <= talos.upper_limits() + 1e-12)


def test_non_converged_solve_reports_failure_with_its_best_configuration(talos):
    solver = IKSolver(talos, IKSolver.Parameters(max_iterations=1, acceptance_factor=1.0))
    q0 = talos.reference_configuration()
    base = targets_from_configuration(talos, q0)
    targets = IKTargets(com_position=base.com_position + [0.05, 0.03, -0.05],
                        foot_positions=base.foot_positions, foot_rotations=base.foot_rotations)
    result = solver.solve(targets, q0)
    assert not result.success
    assert result.iterations == 1
    assert result.message == "max_iterations reached"
    assert 0.0 < result.residuals["com"] < 0.07  # the step made progress
    assert np.all(np.isfinite(result.q)) and not result.q.flags.writeable


def test_nan_inputs_raise_input_errors_naming_the_value(talos):
    solver = IKSolver(talos)
    q0 = talos.reference_configuration()
    with pytest.raises(InputError, match="targets.com_position"):
        IKTargets(com_position=[0.0, np.nan, 0.8])
    with pytest.raises(InputError, match="left_sole_link"):
        IKTargets(foot_positions={"left_sole_link": [np.inf, 0, 0]})
    with pytest.raises(InputError, match="torso_orientation"):
        IKTargets(torso_orientation=np.full((3, 3), np.nan))
    with pytest.raises(InputError, match="rotation matrix"):
        IKTargets(torso_orientation=2 * np.eye(3))
    q_nan = q0.copy()
    q_nan[12] = np.nan
    with pytest.raises(InputError, match="q_init"):
        solver.solve(targets_from_configuration(talos, q0), q_nan)


def test_unknown_target_frame_lists_valid_frames(talos, solo):
    solver = IKSolver(talos)
    with pytest.raises(FrameNotFound) as info:
        solver.solve(IKTargets(foot_positions={"left_foot": [0, 0, 0]}), talos.reference_configuration())
    assert "left_sole_link" in info.value.frames
    with pytest.raises(FrameNotFound):  # Foot keys only name biped soles
        IKSolver(solo).solve(IKTargets(foot_positions={Foot.LEFT: [0, 0, 0]}), solo.reference_configuration())


def test_foot_enum_keys_address_the_soles(talos):
    solver = IKSolver(talos)
    q0 = talos.reference_configuration()
    feet = talos.foot_poses(q0)
    targets = IKTargets(
        com_position=talos.com(q0) + [0.0, 0.02, 0.0],
        foot_positions={Foot.LEFT: feet["left_sole_link"][0], Foot.RIGHT: feet["right_sole_link"][0]},
        foot_rotations={Foot.LEFT: np.eye(3), Foot.RIGHT: np.eye(3)},
        torso_orientation=rotation_z(0.0),
    )
    result = solver.solve(targets, q0)
    assert result.success
    assert "left_sole_link.position" in result.residuals


def test_quadruped_solves_four_point_feet_com_and_base_orientation(solo):
    solver = IKSolver(solo)
    q0 = solo.reference_configuration()
    base = targets_from_configuration(solo, q0)
    assert base.foot_rotations == {}
    targets = IKTargets(com_position=base.com_position + [0.01, -0.01, -0.02],
                        foot_positions=base.foot_positions, torso_orientation=rotation_z(0.05))
    result = solver.solve(targets, q0)
    assert result.success, result
    assert len(result.residuals) == 6
    assert_targets_met(solo, targets, result.q)


def test_solve_two_chains_the_second_solution_from_the_first(talos):
    solver = IKSolver(talos)
    q0 = talos.reference_configuration()
    base = targets_from_configuration(talos, q0)

    def shifted(dx):
        return IKTargets(com_position=base.com_position + [dx, 0.0, 0.0], foot_positions=base.foot_positions,
                         foot_rotations=base.foot_rotations, torso_orientation=base.torso_orientation)

    first, second = solver.solve_two(shifted(0.01), shifted(0.02), q0)
    assert first.success and second.success
    assert talos.com(first.q)[0] == pytest.approx(base.com_position[0] + 0.01, abs=1e-5)
    assert talos.com(second.q)[0] == pytest.approx(base.com_position[0] + 0.02, abs=1e-5)
    np.testing.assert_array_equal(second.q, solver.solve(shifted(0.02), first.q).q)


def test_posture_preference_acts_in_the_task_null_space(talos):
    solver = IKSolver(talos, IKSolver.Parameters(posture_gain=0.5, max_iterations=30, tolerance=1e-7))
    q0 = talos.reference_configuration()
    targets = IKTargets(foot_positions={"left_sole_link": talos.frame_pose(q0, "left_sole_link")[0]})
    arm = 7 + talos.joint_names.index("arm_left_4_joint")
    q_start = q0.copy()
    q_start[arm] -= 0.3
    result = solver.solve(targets, q_start)
    assert result.success
    assert result.q[arm] == pytest.approx(q_start[arm])  # converged at once: no step taken
    moved = IKTargets(foot_positions={"left_sole_link": talos.frame_pose(q0, "left_sole_link")[0] + 0.01})
    result = solver.solve(moved, q_start)
    assert abs(result.q[arm] - q0[arm]) < 0.3  # pulled toward the reference while stepping


def test_standing_talos_moving_its_com_needs_no_constrained_re_solve(talos, monkeypatch):
    """Talos' grippers rest at their upper limit in the reference posture; the IK's posture keeps them
    inside, so CoM moves that push them outwards (back, sideways, up) take no active-set re-solve."""
    limited_calls = []
    limited = IKSolver._limited
    monkeypatch.setattr(IKSolver, "_limited",
                        lambda self, free: (limited_calls.append(1), limited(self, free))[1])
    q0 = talos.reference_configuration()
    grippers = [7 + talos.joint_names.index(n) for n in ("gripper_left_joint", "gripper_right_joint")]
    assert np.all(q0[grippers] == talos.model.upperPositionLimit[grippers])
    base = targets_from_configuration(talos, q0)
    solver = IKSolver(talos)
    for direction in np.vstack([np.eye(3), -np.eye(3)]):
        q = q0
        for k in range(1, 11):  # 1 cm, then 1 mm per tick
            com = base.com_position + (0.009 + 0.001 * k) * direction
            targets = dataclasses.replace(base, com_position=com)
            result = solver.solve(targets, q)
            assert result.success and result.limited_joints == ()
            assert_targets_met(talos, targets, result.q, position_tol=solver.params.tolerance)
            q = result.q
        assert np.all(q[grippers] <= talos.model.upperPositionLimit[grippers])
    assert limited_calls == []


def test_an_explicit_posture_at_a_limit_is_pulled_inside_it(talos):
    solver = IKSolver(talos)
    upper = talos.model.upperPositionLimit
    lower = talos.model.lowerPositionLimit
    posture = talos.reference_configuration()
    posture[7:] = upper[7:]
    pulled = solver._posture(IKTargets(posture=posture))
    margin = 0.01 * (upper[7:] - lower[7:])
    np.testing.assert_allclose(pulled[7:], upper[7:] - margin, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(pulled[:7], posture[:7])


def test_parameters_are_validated_and_round_trip():
    with pytest.raises(ParameterError, match="tolerance"):
        IKSolver.Parameters(tolerance=-1.0)
    with pytest.raises(ParameterError, match="posture_gain"):
        IKSolver.Parameters(posture_gain=2.0)
    with pytest.raises(ParameterError, match="max_iterations"):
        IKSolver.Parameters(max_iterations=0)
    params = IKSolver.Parameters(foot_weight=3.0, reuse_jacobian=False)
    assert from_mapping(IKSolver.Parameters, to_mapping(params)) == params


def test_without_jacobian_reuse_the_solution_is_as_accurate(talos):
    rng = np.random.default_rng(3)
    plain = IKSolver(talos, IKSolver.Parameters(reuse_jacobian=False))
    targets = targets_from_configuration(talos, perturbed(talos, rng, 0.05))
    result = plain.solve(targets, talos.reference_configuration())
    assert result.success and result.position_residual < 1e-5


def test_no_targets_means_nothing_to_do(talos):
    q0 = talos.reference_configuration()
    result = IKSolver(talos).solve(IKTargets(), q0)
    assert result.success and result.iterations == 0 and dict(result.residuals) == {}
    np.testing.assert_allclose(result.q, q0)


def test_rotation_targets_are_accepted_exactly_when_orthonormal_within_1e_6_with_determinant_plus_one():
    rng = np.random.default_rng(8)
    for _ in range(400):
        rotation = pin.rpy.rpyToMatrix(*rng.uniform(-3, 3, 3))
        candidate = rotation + rng.choice([0.0, 1e-7, 1e-6, 1e-5]) * rng.normal(size=(3, 3))
        if rng.uniform() < 0.2:
            candidate = -candidate  # determinant -1
        orthonormal = np.allclose(candidate @ candidate.T, np.eye(3), atol=1e-6)
        expected = orthonormal and np.linalg.det(candidate) >= 0
        try:
            IKTargets(torso_orientation=candidate)
            accepted = True
        except InputError as error:
            assert "rotation matrix" in str(error)
            accepted = False
        assert accepted == expected


def test_private_trusted_targets_match_the_validated_ones(talos):
    q0 = talos.reference_configuration()
    public = targets_from_configuration(talos, q0)
    trusted = IKTargets._trusted(
        public.com_position.copy(), {k: v.copy() for k, v in public.foot_positions.items()},
        {k: v.copy() for k, v in public.foot_rotations.items()}, public.torso_orientation.copy())
    assert trusted.posture is None and not trusted.com_position.flags.writeable
    solver = IKSolver(talos)
    np.testing.assert_array_equal(solver.solve(trusted, q0).q, solver.solve(public, q0).q)


def test_chord_steps_save_jacobians_without_losing_accuracy_along_a_sway(talos, monkeypatch):
    q0 = talos.reference_configuration()
    base = targets_from_configuration(talos, q0)
    counts = []
    jacobians = IKSolver._jacobians
    monkeypatch.setattr(IKSolver, "_jacobians",
                        lambda self, layout: (counts.append(1), jacobians(self, layout)))
    totals = {}
    for reuse in (True, False):
        solver, q = IKSolver(talos, IKSolver.Parameters(reuse_jacobian=reuse)), q0
        counts.clear()
        for k in range(1, 60):  # CoM swaying up to ~9 mm per 20 ms tick, feet still
            sway = [0.02 * np.sin(0.4 * k), 0.03 * np.sin(0.3 * k), 0.0]
            targets = IKTargets(com_position=base.com_position + sway,
                                foot_positions=base.foot_positions, foot_rotations=base.foot_rotations,
                                torso_orientation=base.torso_orientation)
            result = solver.solve(targets, q)
            assert result.success and result.position_residual < solver.params.tolerance
            assert_targets_met(talos, targets, result.q, position_tol=solver.params.tolerance)
            q = result.q
        totals[reuse] = len(counts)
    assert totals[True] < totals[False]


def test_compiled_step_equals_the_numpy_step_with_and_without_binding_limits(talos):
    ik_kernel = pytest.importorskip("walk_mpc.core.body.ik_kernel")
    rng = np.random.default_rng(12)
    solver = IKSolver(talos)
    params = solver.params
    statuses = set()
    for _ in range(60):
        q = perturbed(talos, rng, 0.3)
        goal = targets_from_configuration(talos, perturbed(talos, rng, rng.choice([0.01, 0.3])))
        problem = solver.build_ik(goal, q)
        layout = solver._layout
        dq, factor, free = np.zeros(talos.nv), np.zeros((18, 18)), np.zeros(talos.nv)
        status = ik_kernel.full_step(problem.jacobian, problem.error, params.damping, params.error_damping,
                                     layout.row_inverse_weight, problem.preferred_step, problem.dq_lower,
                                     problem.dq_upper, params.max_step, dq, factor, free)
        expected, limited, lapack_factor = solver._solve_step(
            problem.jacobian, problem.error, problem.row_damping, problem.preferred_step, problem.dq_lower,
            problem.dq_upper)
        statuses.add(status)
        np.testing.assert_allclose(dq, expected, rtol=0, atol=1e-12)
        assert solver._limited(free) == limited
        if status == ik_kernel.STEP_OK:
            assert lapack_factor is not None and limited == ()
            lower = np.tril(factor)
            gram = problem.jacobian @ problem.jacobian.T + np.diag(problem.row_damping)
            np.testing.assert_allclose(lower @ lower.T, gram, atol=1e-12)
            chord = np.zeros(talos.nv)
            assert ik_kernel.chord_step(factor, problem.jacobian, problem.error, np.full(talos.nv, -np.inf),
                                        np.full(talos.nv, np.inf), np.inf, chord)
            np.testing.assert_allclose(chord, problem.jacobian.T @ np.linalg.solve(gram, problem.error),
                                       atol=1e-10)
        else:
            assert status == ik_kernel.STEP_LIMITED and lapack_factor is None and limited
    assert statuses == {ik_kernel.STEP_OK, ik_kernel.STEP_LIMITED}


def test_numpy_and_compiled_solves_agree(talos, monkeypatch):
    from walk_mpc.core.body import ik

    rng = np.random.default_rng(13)
    goals = [targets_from_configuration(talos, perturbed(talos, rng, 0.05)) for _ in range(5)]
    far = dict(goals[0].foot_positions)
    far["left_sole_link"] = far["left_sole_link"] + [0.6, 0.2, 0.7]  # joint limits bind
    goals.append(IKTargets(com_position=goals[0].com_position, foot_positions=far,
                           foot_rotations=goals[0].foot_rotations))
    compiled = IKSolver(talos)
    monkeypatch.setattr(ik, "USE_KERNEL", False)
    plain = IKSolver(talos)
    assert plain._kernel is None
    for goal in goals:
        q0 = talos.reference_configuration()
        a, b = compiled.solve(goal, q0), plain.solve(goal, q0)
        assert (a.success, a.iterations, a.message, a.limited_joints) == (
            b.success, b.iterations, b.message, b.limited_joints)
        np.testing.assert_allclose(a.q, b.q, atol=1e-9)


def test_compiled_steps_off_takes_the_numpy_steps_and_must_be_a_bool(talos):
    """``compiled_steps`` False (the graph's ik: a quicker start) builds no kernel; a non-bool is refused."""
    assert IKSolver(talos, IKSolver.Parameters(compiled_steps=False))._kernel is None
    with pytest.raises(ParameterError, match="compiled_steps"):
        IKSolver.Parameters(compiled_steps="no")


def test_targets_are_the_same_only_when_every_target_is_bit_for_bit_equal():
    rotation = np.eye(3)
    a = IKTargets(com_position=[0.0, 0.0, 0.86], foot_positions={Foot.LEFT: [0.0, 0.1, 0.0]},
                  foot_rotations={Foot.LEFT: rotation}, torso_orientation=rotation)
    assert a.same_as(a) and a.same_as(dataclasses.replace(a))
    assert a.same_as(IKTargets(com_position=[0.0, 0.0, 0.86], foot_positions={Foot.LEFT: [0.0, 0.1, 0.0]},
                               foot_rotations={Foot.LEFT: rotation.copy()}, torso_orientation=rotation))
    assert not a.same_as(dataclasses.replace(a, com_position=[0.0, 0.0, 0.86 + 1e-15]))
    assert not a.same_as(dataclasses.replace(a, com_position=None))
    other_foot = dataclasses.replace(a, foot_positions={Foot.RIGHT: [0.0, 0.1, 0.0]}, foot_rotations={})
    assert not a.same_as(other_foot)
    assert not a.same_as(dataclasses.replace(a, posture=np.zeros(39)))
    assert not a.same_as(None)


def test_a_solve_near_its_tolerance_at_max_iterations_is_accepted_and_says_so(talos):
    """Issue 17: a restarted ik failed on residuals of 1.6e-5 m (tolerance 1e-5) and held the last command,
    freezing the robot while the plan went on. Within acceptance_factor x the tolerances it succeeds."""
    q0 = talos.reference_configuration()
    base = targets_from_configuration(talos, q0)
    targets = IKTargets(com_position=base.com_position + [0.02, 0.01, -0.01],
                        foot_positions=base.foot_positions, foot_rotations=base.foot_rotations)
    strict = IKSolver(talos, IKSolver.Parameters(max_iterations=2, acceptance_factor=1.0)).solve(targets, q0)
    accepted = IKSolver(talos, IKSolver.Parameters(max_iterations=2)).solve(targets, q0)
    assert not strict.success and 1e-5 < strict.position_residual < 1e-3
    assert accepted.success and "accepted" in accepted.message
    assert np.array_equal(accepted.q, strict.q)
    with pytest.raises(ParameterError, match="acceptance_factor"):
        IKSolver.Parameters(acceptance_factor=0.5)



def test_the_pelvis_is_kept_upright_while_a_leg_reaches_a_sole_a_tread_below_and_left_alone_on_level_ground(
        talos):
    """Stairs: the CoM over the upper sole, the other 10 cm lower and 0.25 m behind (a step up's lift-off):
    the pelvis preference (pelvis_gain) pitches the pelvis less than without it, every target still met; on
    level targets (the CoM at its reference height) the solutions are identical bit for bit."""
    q0 = talos.reference_configuration()
    level = targets_from_configuration(talos, q0)
    feet = {Foot.LEFT: talos.left_foot_frame, Foot.RIGHT: talos.right_foot_frame}
    positions = {foot: np.array(level.foot_positions[frame]) for foot, frame in feet.items()}
    rotations = {foot: np.array(level.foot_rotations[frame]) for foot, frame in feet.items()}
    positions[Foot.LEFT] += (0.25, 0.0, 0.1)  # the upper tread, ahead
    com = np.array(level.com_position) + (0.22, 0.0, 0.05)  # over it, at the mean height of the soles
    stairs = IKTargets(com_position=com, foot_positions=positions, foot_rotations=rotations,
                       torso_orientation=level.torso_orientation)
    pitches = {}
    for gain in (0.0, 1.0):
        solver = IKSolver(talos, IKSolver.Parameters(pelvis_gain=gain, max_iterations=100))
        result = solver.solve(stairs, q0)
        assert result.success
        for _ in range(20):  # the preference acts in the null space: a few ticks from the last solution
            result = solver.solve(stairs, result.q)
        rotation = pin.Quaternion(result.q[3:7]).toRotationMatrix()
        pitches[gain] = np.degrees(np.arccos(min(1.0, rotation[2, 2])))
    assert pitches[1.0] < pitches[0.0] - 2.0, pitches
    soles = {foot: np.array(level.foot_positions[frame]) for foot, frame in feet.items()}
    soles[Foot.LEFT] += (0.2, 0.0, 0.02)  # a stabilizer's height offsets
    flat = IKTargets(com_position=np.array(level.com_position) + (0.1, 0.0, 0.0), foot_positions=soles,
                     foot_rotations=rotations, torso_orientation=level.torso_orientation)
    with_gain = IKSolver(talos).solve(flat, q0).q
    without = IKSolver(talos, IKSolver.Parameters(pelvis_gain=0.0)).solve(flat, q0).q
    assert with_gain.tobytes() == without.tobytes()


def test_the_pelvis_level_preference_keeps_the_pelvis_upright_on_level_ground_and_is_off_by_default(talos):
    """A recovery stride on level ground (the rear sole 0.25 m behind, the CoM over the middle, at its
    reference height: the reach gate of ``pelvis_gain`` is closed), linearised at a configuration whose
    pelvis is pitched back 8 degrees (a pushed robot): with ``pelvis_level_gain`` g the preferred (null
    space) step turns the pelvis by g times its tilt toward upright, without it not at all; solved, every
    target is met, and 0 (the default) gives the same solution bit for bit."""
    q0 = talos.reference_configuration()
    level = targets_from_configuration(talos, q0)
    feet = {Foot.LEFT: talos.left_foot_frame, Foot.RIGHT: talos.right_foot_frame}
    positions = {foot: np.array(level.foot_positions[frame]) for foot, frame in feet.items()}
    rotations = {foot: np.array(level.foot_rotations[frame]) for foot, frame in feet.items()}
    positions[Foot.LEFT] += (-0.25, 0.0, 0.0)
    stride = IKTargets(com_position=np.array(level.com_position) + (-0.125, 0.0, 0.0),
                       foot_positions=positions, foot_rotations=rotations,
                       torso_orientation=level.torso_orientation)
    assert IKSolver.Parameters().pelvis_level_gain == 0.0
    pitched = q0.copy()
    pitched[3:7] = pin.Quaternion(pin.utils.rpyToMatrix(0.0, np.radians(-8.0), 0.0)).coeffs()
    for gain in (0.0, 0.5, 1.0):
        solver = IKSolver(talos, IKSolver.Parameters(pelvis_level_gain=gain))
        turn = solver.build_ik(stride, pitched).preferred_step[3:6]
        np.testing.assert_allclose(turn, (0.0, gain * np.radians(8.0), 0.0), atol=1e-9)
        assert solver.solve(stride, pitched).success
    default = IKSolver(talos).solve(stride, pitched).q
    off = IKSolver(talos, IKSolver.Parameters(pelvis_level_gain=0.0)).solve(stride, pitched).q
    assert default.tobytes() == off.tobytes()
    with pytest.raises(ParameterError, match="pelvis_level_gain"):
        IKSolver.Parameters(pelvis_level_gain=1.5)
