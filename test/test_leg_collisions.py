"""MuJoCo ``leg_collisions`` (on by default for a robot naming its legs): off, the model and a short run bit
for bit as before; on, crossed legs touch and the standing posture does not."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from walk_mpc.core.body.robot import LegLinks, RobotModel  # noqa: E402
from walk_mpc.core.errors import ModelError, ParameterError, ShapeError  # noqa: E402
from walk_mpc.core.sim.kinematic import KinematicSim  # noqa: E402
from walk_mpc.core.sim.mujoco import LEFT_LEG_BITS, RIGHT_LEG_BITS, MujocoSim  # noqa: E402

#: sha256 (16 hex digits) of the compiled default Talos model (``mj_saveModel``) and of a 0.5 s run with a
#: sideways push (configurations and contact sensors), recorded before ``leg_collisions`` existed.
MODEL_HASH = "88a77c575c069aa5"
RUN_HASH = "31ec0628b8778033"


def make_sim(talos, **mujoco_params):
    return MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(**mujoco_params), robot=talos)


def model_hash(model) -> str:
    buffer = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buffer)
    return hashlib.sha256(buffer.tobytes()).hexdigest()[:16]


def run_hash(sim) -> str:
    digest = hashlib.sha256()
    sim.set_base_force(np.array([0.0, 150.0, 0.0]))
    for k in range(50):
        state = sim.step()
        if k == 10:
            sim.set_base_force(np.zeros(3))
        digest.update(np.ascontiguousarray(state.q).tobytes())
        digest.update(sim.sensor_sample().contact.tobytes())
    return digest.hexdigest()[:16]


def crossed(talos, roll: float = 0.2) -> np.ndarray:
    """The reference posture with both hips rolled ``roll`` [rad] toward the other leg."""
    q = talos.reference_configuration().copy()
    q[talos.joint_index_q("leg_left_2_joint")] -= roll
    q[talos.joint_index_q("leg_right_2_joint")] += roll
    return q


def test_off_the_model_and_a_short_run_are_bit_for_bit_as_before(talos):
    sim = make_sim(talos, leg_collisions=False)
    assert model_hash(sim.model) == MODEL_HASH
    assert run_hash(sim) == RUN_HASH
    assert not sim.leg_contacts.touched


def test_off_crossed_legs_pass_through_each_other_unrecorded(talos):
    sim = make_sim(talos, leg_collisions=False)
    sim.reset(crossed(talos))
    sim.step()
    assert not sim.leg_contacts.touched


def test_on_the_leg_geoms_are_massless_and_collide_only_with_the_other_leg(talos):
    off, on = make_sim(talos, leg_collisions=False), make_sim(talos)  # on by default: Talos names its legs
    np.testing.assert_array_equal(on.model.body_mass, off.model.body_mass)
    np.testing.assert_array_equal(on.model.body_inertia, off.model.body_inertia)
    m = on.model
    bits = {(int(m.geom_contype[g]), int(m.geom_conaffinity[g])) for g in range(m.ngeom)}
    assert bits == {(1, 1), LEFT_LEG_BITS, RIGHT_LEG_BITS}  # floor and soles, left leg, right leg
    left = [m.body(m.geom_bodyid[g]).name for g in range(m.ngeom)
            if (m.geom_contype[g], m.geom_conaffinity[g]) == LEFT_LEG_BITS]
    assert left == [f"leg_left_{k}_link" for k in range(1, 7)]
    assert all(m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH for g in range(m.ngeom)
               if m.geom_contype[g] in (2, 4))


def test_on_the_standing_posture_has_no_leg_contact_in_two_seconds(talos):
    sim = make_sim(talos, leg_collisions=True)
    for _ in range(200):
        sim.step()
    assert not sim.leg_contacts.touched
    assert not sim.state.fallen


def test_on_crossed_legs_touch_and_the_record_says_when_and_how_hard(talos):
    sim = make_sim(talos, leg_collisions=True)
    sim.reset(crossed(talos))
    sim.step()
    contacts = sim.leg_contacts
    assert contacts.touched and contacts.steps == sim.substeps
    assert contacts.first_time == 0.0 and 0.0 <= contacts.max_force_time <= contacts.last_time < 0.01
    assert contacts.max_force > 0.0 and contacts.max_penetration > 0.0
    assert all(a.startswith("leg_left_") and b.startswith("leg_right_") for a, b in contacts.pairs)
    assert "N at" in contacts.summary()
    sim.reset()
    assert not sim.leg_contacts.touched and math.isnan(sim.leg_contacts.first_time)


def test_leg_links_need_both_legs_and_regular_expressions():
    assert not LegLinks().given
    with pytest.raises(ParameterError):
        LegLinks(left=("leg_left_.*",))
    with pytest.raises(ParameterError):
        LegLinks(left=("leg_left_(",), right=("leg_right_.*",))


def test_on_by_default_the_pushed_run_without_a_leg_contact_is_the_one_without_leg_geoms(talos):
    sim = make_sim(talos)
    assert sim.mujoco_params.leg_collisions and sim._collide_legs  # Talos' description names its legs
    assert run_hash(sim) == RUN_HASH and not sim.leg_contacts.touched


def test_on_by_default_a_robot_naming_no_legs_has_only_its_soles_colliding():
    robot = RobotModel(RobotModel.Parameters(robot="g1"))
    assert not robot.description.leg_links.given
    sim = MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(), robot=robot)
    m = sim.model
    assert not sim._collide_legs
    assert {(int(m.geom_contype[g]), int(m.geom_conaffinity[g])) for g in range(m.ngeom)} <= {(1, 1), (0, 0)}
    with pytest.raises(ModelError, match="leg_links"):
        MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(leg_clearance=True), robot=robot)


def test_leg_collisions_must_be_a_boolean():
    with pytest.raises(ParameterError):
        MujocoSim.Parameters(leg_collisions=1)


def test_clearance_alone_leaves_the_physics_bit_for_bit_and_measures_the_standing_gap(talos):
    sim = make_sim(talos, leg_clearance=True, leg_collisions=False)
    assert run_hash(sim) == RUN_HASH
    assert not sim.leg_contacts.touched
    clearance = sim.leg_clearance
    assert 0.005 < clearance.min_distance < 0.02 and clearance.overlap_steps == 0  # thighs ~1.2 cm apart
    assert clearance.min_pair == ("leg_left_3_link", "leg_right_3_link")


def test_clearance_of_crossed_legs_is_negative_with_or_without_collisions(talos):
    for collisions in (False, True):
        sim = make_sim(talos, leg_clearance=True, leg_collisions=collisions)
        sim.reset(crossed(talos))
        sim.step()
        clearance = sim.leg_clearance
        assert clearance.min_distance < -0.05 and clearance.overlap_steps == 1
        assert clearance.first_overlap == clearance.last_overlap == sim.time
        assert sim.leg_contacts.touched == collisions
        sim.reset()
        assert sim.leg_clearance.overlap_steps == 0 and math.isnan(sim.leg_clearance.min_time)


def test_leg_distance_of_a_posture_leaves_the_simulation_untouched(talos):
    """``MujocoSim.leg_distance``: the standing thighs about 1.2 cm apart, hips rolled toward each other
    interpenetrating, the simulation's state and records unchanged; without leg geoms a clear error."""
    sim = make_sim(talos, leg_clearance=True, leg_collisions=False)
    sim.step()
    q, time, clearance = sim.configuration(), sim.time, sim.leg_clearance
    standing, pair = sim.leg_distance(talos.reference_configuration())
    assert 0.005 < standing < 0.02 and pair == ("leg_left_3_link", "leg_right_3_link")
    distance, _ = sim.leg_distance(crossed(talos))
    assert distance < -0.05
    assert np.array_equal(sim.configuration(), q) and sim.time == time and sim.leg_clearance == clearance
    assert make_sim(talos, leg_collisions=True).leg_distance(crossed(talos))[0] == distance
    robot = RobotModel(RobotModel.Parameters(robot="g1"))
    with pytest.raises(ModelError, match="leg_distance"):
        MujocoSim(KinematicSim.Parameters(), MujocoSim.Parameters(), robot=robot).leg_distance(
            robot.reference_configuration())
    with pytest.raises(ShapeError, match="expected shape"):
        sim.leg_distance(np.zeros(3))


def test_talos_legs_do_not_clear_a_crossing_landing_in_front_only_far_behind(robustness):
    """``benchmarks/crossover_clearance.py``: the right sole landing 0.15 m across the standing left sole
    (the recovery's ``min_crossover_width``) 0.05 m (the crossover's offset) or 0.3 m in front of it, at
    every toe-out angle, interpenetrates the legs by centimetres; 0.4 m behind it clears."""
    import crossover_clearance  # benchmarks/ is on the path (the robustness fixture)

    scan = crossover_clearance.Scan(RobotModel())
    for forward in (0.05, 0.3):
        for toe in crossover_clearance.TOE_OUT:
            distance, pair, reached = scan.clearance(forward, 0.15, 0.0, toe)
            assert reached and distance < -0.02, (forward, toe, distance, pair)
    distance, _, toe, reached = scan.best(-0.4, 0.15, 0.0)
    assert reached and distance > 0.0
