"""Specification of the constant-height LIPM (exact jerk discretisation)."""

import numpy as np
import pytest
from scipy.linalg import expm

from walk_mpc.core.errors import InputError, ParameterError, ShapeError
from walk_mpc.core.mpc.lipm import LipmModel, check_state


def test_discretisation_equals_matrix_exponential_of_the_triple_integrator():
    rng = np.random.default_rng(0)
    for dt in rng.uniform(0.001, 0.2, size=10):
        a, b = LipmModel.discretize(float(dt))
        cont = np.zeros((4, 4))
        cont[0, 1] = cont[1, 2] = cont[2, 3] = 1.0
        exact = expm(cont * dt)
        np.testing.assert_allclose(a, exact[:3, :3], atol=1e-14)
        np.testing.assert_allclose(b, exact[:3, 3], atol=1e-14)


def test_zmp_coordinates_match_the_smpc_input_vector():
    model = LipmModel(com_height=0.252007, gravity=9.81)
    dt = 0.04
    _, b = model.discretize(dt)
    assert model.zmp_row @ b == pytest.approx(dt**3 / 6.0 - model.zeta * dt)


def test_integration_over_two_intervals_equals_one_interval_of_the_same_jerk():
    model = LipmModel()
    rng = np.random.default_rng(1)
    state = rng.normal(size=(3, 2))
    jerk = rng.normal(size=2)
    twice = model.integrate(model.integrate(state, jerk, 0.013), jerk, 0.027)
    np.testing.assert_allclose(twice, model.integrate(state, jerk, 0.04), atol=1e-14)


def test_zmp_is_com_minus_height_over_gravity_times_acceleration():
    model = LipmModel(com_height=0.8, gravity=10.0)
    assert model.zmp(np.array([1.0, 5.0, 2.0])) == pytest.approx(1.0 - 0.08 * 2.0)
    assert model.omega == pytest.approx(np.sqrt(12.5))


@pytest.mark.parametrize("name, kwargs", [("com_height", {"com_height": 0.0}),
                                          ("gravity", {"gravity": -9.81}),
                                          ("com_height", {"com_height": float("nan")})])
def test_bad_parameters_are_rejected_with_their_name(name, kwargs):
    with pytest.raises(ParameterError) as info:
        LipmModel(**kwargs)
    assert info.value.name == name


def test_bad_durations_and_states_are_rejected():
    with pytest.raises(InputError):
        LipmModel.discretize(0.0)
    with pytest.raises(ShapeError):
        check_state(np.zeros((2, 3)))
    with pytest.raises(InputError):
        check_state([[np.nan, 0.0], [0.0, 0.0], [0.0, 0.0]])
