"""The closed-loop node graph over DDS (issue 7): walk_behavior, mpc_planner, ik and the kinematic sim as
separate processes with config/walk_mpc.yaml, driven and measured from this process.

One graph serves the whole module (started by GraphProcesses, logs in a temporary directory); the
scenarios run in the order of this file and each starts from the robot standing wherever the previous one
left it. The reference walk (10 steps of 0.2 m, 1.1 s) is recorded once and checked three ways; the other
scenarios use 2-4 steps of 0.8 s. The scenarios that stop processes come last: the IK restart, then the
sensor timeout (which stops the sim and restarts it). Real time (real_time_factor 1), the kinematic sim.

The ik starts its safe stop after 0.3 s without references here, not the default 0.1 s: these scenarios test
walking over DDS, not a planner's death (test_graph_faults.py does, with the default), and a CI runner's
scheduling once delayed the planner's references by 0.1 s at the start of the reference walk (the same
failure is provoked by SIGSTOPping the planner for 0.2 s). A walk that fails anyway says why: the test
client's view of the references' timing and the ends of the nodes' logs (``GraphClient.diagnose``).
"""

from __future__ import annotations

import pytest
from graph_fixtures import (
    SoleMeter,
    check_landings,
    check_walk_succeeded,
    check_zmp_in_support,
    running_graph,
    scenario_cancel,
    scenario_ik_restart,
    scenario_insufficient_steps,
    scenario_preemption,
    scenario_sensor_timeout,
    ten_step_walk,
)

pytestmark = pytest.mark.ros

#: [s] The ik's safe_stop_timeout in these scenarios (see the module's docstring).
SAFE_STOP_TIMEOUT = 0.3


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """The walking graph (Talos, kinematic sim) as processes, and the test's client of it."""
    from walk_mpc.tools.launch_graph import GraphProcesses

    processes = GraphProcesses("talos", "kinematic", log_dir=tmp_path_factory.mktemp("graph_logs"),
                               extra_args={"ik": ["-p", f"safe_stop_timeout:={SAFE_STOP_TIMEOUT}"]})
    with running_graph(processes) as running:  # stopped after the last test, which checks the exit codes
        yield running


@pytest.fixture(scope="module")
def meter():
    return SoleMeter()


@pytest.fixture(scope="module")
def reference_walk(graph):
    client, _ = graph
    return ten_step_walk(client)


def test_ten_step_walk_succeeds_with_every_step_completed(reference_walk):
    check_walk_succeeded(reference_walk)


def test_every_foot_lands_within_1mm_of_its_saturated_step(reference_walk, meter):
    check_landings(reference_walk, meter, tolerance=1e-3)


def test_zmp_of_the_contact_forces_stays_in_the_support_polygon(reference_walk, meter):
    check_zmp_in_support(reference_walk, meter)


def test_cancel_mid_walk_ends_standing_on_both_feet(graph, meter):
    scenario_cancel(graph[0], meter)


def test_open_goal_running_out_catches_then_stands_with_insufficient_step_data(graph):
    scenario_insufficient_steps(graph[0])


def test_second_goal_preempts_the_first_and_the_walk_continues_to_its_end(graph):
    scenario_preemption(graph[0])


def test_killed_ik_restarted_while_standing_resumes_commands_and_walks(graph):
    scenario_ik_restart(*graph)


def test_sensor_stream_stopping_mid_walk_ends_it_with_sensor_timeout(graph):
    scenario_sensor_timeout(*graph)


def test_every_node_exits_cleanly_on_sigint(graph):
    _, control = graph
    codes = control.stop_all()
    expected = {"walk_behavior": 0, "mpc_planner": 0, "ik": 0, "sim": 0, "robot_state": 0}
    assert codes == expected, control.diagnose()
