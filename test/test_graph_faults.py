"""A control node dies mid-walk (issue 17): the graph as processes (Talos, kinematic sim), one node SIGKILLed
in the second step of a 4-step walk, then restarted.

* ik or mpc_planner killed: the walk ends within 2 s, ABORTED (never SUCCEEDED) with a result naming the
  silent node; no CoM reference leaves 1.5 m of the feet; after the restart a 2-step walk succeeds.
* walk_behavior killed: the client is told within 2 s (no feedback for 0.9 s: ActionServerLost) instead of
  waiting for a result that cannot come; after the restart a 2-step walk succeeds.
"""

from __future__ import annotations

import math
import signal
import time

import pytest
from graph_fixtures import STARTUP_TIMEOUT, WALK_TIMEOUT, GraphClient, ProcessControl, running_graph

from walk_mpc.core.walk.behavior import WalkErrorCode
from walk_mpc.tools.send_walk import SERVER_SILENCE

pytestmark = pytest.mark.ros

#: How fast the end of a walk must follow a node's death [s] (acceptance of issue 17).
END_WITHIN = 2.0
#: Largest distance of a CoM reference to the feet [m] (acceptance of issue 17).
REFERENCE_REACH = 1.5


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    from walk_mpc.tools.launch_graph import GraphProcesses

    processes = GraphProcesses("talos", "kinematic", log_dir=tmp_path_factory.mktemp("fault_logs"))
    with running_graph(processes, name="graph_fault_client") as running:
        yield running


def kill_in_step_two(client: GraphClient, control: ProcessControl, node: str):
    """Start a 4-step walk, SIGKILL ``node`` once step 1 has touched down; returns (outcome or the exception,
    seconds from the kill to the end, the index of the first CoM reference after the kill)."""
    with client.walking(4, server_silence=SERVER_SILENCE) as walk:  # the client's default: told within 1 s
        first_reference = len(client.reference_coms)
        killed = time.monotonic()
        assert control.stop(node, signal.SIGKILL) == -signal.SIGKILL
        try:
            outcome = walk.result(timeout=WALK_TIMEOUT)[0]
        except Exception as exc:  # noqa: BLE001 (the walk_behavior case: the client's error is the outcome)
            outcome = exc
        return outcome, time.monotonic() - killed, first_reference


def restart_and_walk(client: GraphClient, control: ProcessControl, node: str) -> None:
    plans = len(client.plans)
    control.start(node)
    if node == "walk_behavior":
        # The restarted walk_behavior publishes a Stand plan; until the ik hears it (each participant
        # discovers the new process on its own) it skips the references of that plan and stands.
        client.wait_until(lambda: len(client.plans) > plans, "the restarted walk_behavior's plan",
                          STARTUP_TIMEOUT)
    ticks = client.ik_reference_ticks
    client.wait_until(lambda: client.ik_reference_ticks >= ticks + 25, f"the loop after the {node} restart",
                      STARTUP_TIMEOUT)
    outcome = client.walk_after_restart(2)
    assert outcome.succeeded, f"{outcome}\n{control.diagnose()}"
    assert outcome.last_completed_step_index == 2, outcome
    assert not control.exited(), control.diagnose()


def check_references_within_reach(client: GraphClient, since: int) -> None:
    left, right = client.feet()
    for x, y in client.reference_coms[since:]:
        distance = min(math.hypot(x - f.position[0], y - f.position[1]) for f in (left, right))
        assert distance < REFERENCE_REACH, (x, y, left, right)


@pytest.mark.parametrize("node, code", [("ik", WalkErrorCode.IK_FAILURE),
                                        ("mpc_planner", WalkErrorCode.PLANNER_FAILURE)])
def test_a_killed_control_node_ends_the_walk_naming_it_and_the_graph_walks_after_its_restart(graph, node,
                                                                                           code):
    from action_msgs.msg import GoalStatus

    client, control = graph
    outcome, elapsed, since = kill_in_step_two(client, control, node)
    assert not isinstance(outcome, Exception), outcome
    assert outcome.status == GoalStatus.STATUS_ABORTED and outcome.error_code == code, outcome
    assert f"is the {node} running?" in outcome.error_msg, outcome
    assert elapsed < END_WITHIN, (elapsed, outcome)
    check_references_within_reach(client, since)
    restart_and_walk(client, control, node)


def test_a_killed_walk_behavior_is_noticed_by_the_client_and_the_graph_walks_after_its_restart(graph):
    from walk_mpc.tools.send_walk import ActionServerLost

    client, control = graph
    outcome, elapsed, _ = kill_in_step_two(client, control, "walk_behavior")
    assert isinstance(outcome, ActionServerLost), outcome
    assert "is walk_behavior running?" in str(outcome)
    assert elapsed < END_WITHIN, elapsed
    restart_and_walk(client, control, "walk_behavior")
