"""Entities created and destroyed while another thread spins their executor (issue 21).

Under load, the demo's client lost its Walk goal: the thread spinning its node died with
``InvalidHandle: cannot use Destroyable because destruction was requested`` (``current_feet`` destroyed its
subscription from the main thread while the executor was building its wait set), and ``send_walk`` then
waited 60 s for an answer that could not come. Here a client node is spun in a thread (by a
:class:`~walk_mpc.tools.spin_thread.SpinThread`, and by a plain SingleThreadedExecutor in a thread as the
node tests do) while a goal runs on a tiny Walk action server (this file run as a script, in its own
process), and the main thread creates and destroys entities through the project's API in a loop:
``current_feet`` (a subscription), ``send_walk`` without a client (an action client per goal), a
:class:`~walk_mpc.tools.recorder.RecorderNode` (a node and its subscriptions). The thread switch interval is
lowered so that the threads interleave inside the executor's wait-set construction, where the race lies.
"""

from __future__ import annotations

import sys
import threading

import pytest

pytestmark = pytest.mark.ros

#: Period of the server's feedback [s] (walk_behavior's control tick).
FEEDBACK_PERIOD = 0.02
#: Iterations of the create/destroy loop (each: current_feet, a short goal with its own client, a recorder).
ITERATIONS = 60
#: Thread switch interval during the loop [s] (CPython's default: 5 ms).
SWITCH_INTERVAL = 1e-4
#: Subscriptions of the client node that only widen the executor's wait set (and so the race window).
EXTRA_SUBSCRIPTIONS = 20
#: Stance of the server's latched walk/plan.
LEFT, RIGHT = (0.1, 0.085, 0.0), (0.1, -0.085, 0.0)


# ----------------------------------------------------------------------------------- the action server
def serve() -> None:
    """A Walk action server: accepts every goal, publishes feedback every FEEDBACK_PERIOD while it runs,
    succeeds after ``steps[0].duration`` [s] of feedback ticks, cancels on request; publishes a latched
    ``walk/plan`` standing at LEFT, RIGHT. Runs until SIGINT."""
    import rclpy
    from rclpy.action import ActionServer, CancelResponse
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.task import Future

    from walk_mpc.action import Walk
    from walk_mpc.core.walk.timeline import FootPose, Timeline
    from walk_mpc.msg import FootstepPlan
    from walk_mpc.nodes._common import LATCHED_QOS
    from walk_mpc.nodes.conversions import plan_to_msg

    rclpy.init()
    node = rclpy.create_node("race_walk_server")
    running = []  # [goal handle, feedback ticks left, future of the result]

    async def execute(handle):
        done = Future()
        running.append([handle, max(1, round(handle.request.steps[0].duration / FEEDBACK_PERIOD)), done])
        return await done

    def tick() -> None:
        for entry in list(running):
            handle, left, done = entry
            result = Walk.Result(last_completed_step_index=len(handle.request.steps))
            if handle.is_cancel_requested:
                handle.canceled()
            elif left <= 0:
                handle.succeed()
            else:
                feedback = Walk.Feedback()
                feedback.walk.behavior = 1
                handle.publish_feedback(feedback)
                entry[1] -= 1
                continue
            running.remove(entry)
            done.set_result(result)

    server = ActionServer(node, Walk, "walk", execute_callback=execute,
                          cancel_callback=lambda handle: CancelResponse.ACCEPT)
    node.create_timer(FEEDBACK_PERIOD, tick)
    plans = node.create_publisher(FootstepPlan, "walk/plan", LATCHED_QOS)
    plans.publish(plan_to_msg(Timeline(FootPose(LEFT), FootPose(RIGHT), []), 1, False,
                              node.get_clock().now().to_msg()))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print("race_walk_server ready", flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:  # SIGINT inside a call into rcl comes out as SystemError: a shutdown all the same
        if rclpy.ok():
            raise
    finally:
        server.destroy()
        node.destroy_node()
        rclpy.try_shutdown()


@pytest.fixture(scope="module")
def walk_server(tmp_path_factory):
    from conftest import NodeProcess
    from ros_helpers import wait_until

    log = tmp_path_factory.mktemp("race_server") / "race_walk_server.log"
    process = NodeProcess([sys.executable, "-P", __file__, "serve"], log)
    wait_until(lambda: "race_walk_server ready" in process.output(), "the server to start", process)
    yield process
    assert process.stop() == 0, process.output()


# ----------------------------------------------------------------------------------- the client side
class SpunClient:
    """A context and a client node spun in a thread: by a SpinThread (``kind="spin_thread"``) or by a plain
    SingleThreadedExecutor in a thread of the test (``"plain_thread"``, whose error is kept here)."""

    def __init__(self, kind: str, busy: bool = True) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import Int32

        from walk_mpc.tools.send_walk import walk_action_client
        from walk_mpc.tools.spin_thread import SpinThread

        self.kind = kind
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("race_client", context=self.context)
        if busy:  # a wide wait set, rebuilt every 2 ms: the executor spends its time where the race lies
            for k in range(EXTRA_SUBSCRIPTIONS):
                self.node.create_subscription(Int32, f"race/unused_{k}", lambda msg: None, 1)
            self.node.create_timer(0.002, lambda: None)
        self.walk_client = walk_action_client(self.node)  # the long goal's, created before spinning
        self.executor = SingleThreadedExecutor(context=self.context)
        self.errors = []
        self.spin = None
        if kind == "spin_thread":
            self.spin = SpinThread(self.executor, name="race-client-spin")
            self.spin.add_node(self.node)
            self.spin.start()
        else:
            self.executor.add_node(self.node)
            self._thread = threading.Thread(target=self._spin, daemon=True)
            self._thread.start()

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except BaseException as exc:  # noqa: BLE001  (reported by the test)
            self.errors.append(exc)

    def error(self):
        """What ended the spinning thread, if it died."""
        if self.spin is not None:
            return self.spin.error
        return self.errors[0] if self.errors else None

    def add_node(self, node) -> None:
        self.executor.add_node(node)

    def destroy_node(self, node) -> None:
        """Remove ``node`` from the spinning executor and destroy it, on the spinning thread."""
        from walk_mpc.tools.spin_thread import on_executor_thread

        def destroy() -> None:
            self.executor.remove_node(node)
            node.destroy_node()

        if self.spin is not None:
            self.spin.destroy_node(node)
        else:
            on_executor_thread(node, destroy)

    def close(self) -> None:
        if self.spin is not None:
            assert self.spin.stop(), "the spin thread did not stop"
        else:
            self.executor.create_task(self.executor.shutdown)  # shut down from the spinning thread
            self._thread.join(10.0)
            assert not self._thread.is_alive(), "the executor did not stop"
        self.walk_client.destroy()
        self.node.destroy_node()
        self.context.try_shutdown()


@pytest.fixture
def switch_interval():
    """Lower the thread switch interval (restored at the end): the threads interleave every 0.1 ms."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    yield
    sys.setswitchinterval(previous)


def step(duration: float):
    from walk_mpc.core.walk.step import Foot, Step

    return Step(1, Foot.LEFT, duration, (0.3, 0.085, 0.0))


class LongGoal:
    """A goal running (in a thread, through send_walk with the client's long-lived action client) until
    :meth:`finish` cancels it."""

    def __init__(self, client: SpunClient) -> None:
        from ros_helpers import wait_until

        self.cancel = threading.Event()
        self.feedback = []
        self.outcome = None
        self.error = None
        self._thread = threading.Thread(target=self._run, args=(client,), daemon=True)
        self._thread.start()
        wait_until(lambda: self.feedback or self.error is not None, "the long goal's first feedback")

    def _run(self, client: SpunClient) -> None:
        from walk_mpc.tools.send_walk import send_walk

        try:
            self.outcome = send_walk(client.node, [step(3600.0)], on_feedback=self.feedback.append,
                                     server_timeout=30.0, cancel=self.cancel, client=client.walk_client,
                                     server_silence=10.0)
        except Exception as exc:  # noqa: BLE001  (reported by the test)
            self.error = exc

    def running(self) -> bool:
        return self._thread.is_alive()

    def finish(self):
        self.cancel.set()
        self._thread.join(60.0)
        assert not self._thread.is_alive(), "the long goal did not end after its cancel"
        if self.error is not None:
            raise self.error
        return self.outcome


@pytest.mark.parametrize("kind", ["spin_thread", "plain_thread"])
def test_entities_created_and_destroyed_from_the_main_thread_while_a_goal_runs(kind, walk_server, tmp_path,
                                                                                switch_interval):
    from action_msgs.msg import GoalStatus

    from walk_mpc.msg import FootstepPlan, WalkFeedback
    from walk_mpc.nodes._common import LATCHED_QOS
    from walk_mpc.tools.recorder import RecorderNode
    from walk_mpc.tools.send_walk import current_feet, send_walk

    client = SpunClient(kind)
    try:
        long_goal = LongGoal(client)
        for i in range(ITERATIONS):
            try:
                feet = current_feet(client.node, timeout=30.0)  # a subscription, created and destroyed
                assert feet is not None, "no walk/plan"
                assert (tuple(feet[0].position), tuple(feet[1].position)) == (LEFT, RIGHT)
                outcome = send_walk(client.node, [step(0.06)], server_timeout=30.0,  # an action client
                                    result_timeout=30.0, server_silence=10.0)
                assert outcome.succeeded, outcome
                recorder = RecorderNode(tmp_path / f"{i}.mcap", [("walk/plan", FootstepPlan, LATCHED_QOS),
                                                                  ("walk/status", WalkFeedback, 10)],
                                        context=client.context)  # a node with subscriptions
                client.add_node(recorder)
                client.destroy_node(recorder)
            except Exception as exc:
                raise AssertionError(f"iteration {i}: {exc!r}; spin thread: {client.error()!r}") from exc
            assert client.error() is None, f"iteration {i}: the spin thread died: {client.error()!r}"
            assert long_goal.running(), f"iteration {i}: the long goal ended: {long_goal.error!r}"
        outcome = long_goal.finish()
        assert outcome.status == GoalStatus.STATUS_CANCELED, outcome
        assert len(long_goal.feedback) > ITERATIONS  # it ran all along
    finally:
        client.close()


def test_a_dead_spin_thread_fails_the_waiting_client_at_once_with_its_cause(walk_server):
    """The thread spinning the node dies while a goal runs (a feedback callback raises): send_walk raises
    SpinThreadDied from that error, without waiting for the result (server_silence off, result_timeout
    far away: before, it waited for it, a TimeoutError); current_feet and send_walk on that node then fail
    the same way."""
    from walk_mpc.tools.send_walk import current_feet, send_walk
    from walk_mpc.tools.spin_thread import SpinThreadDied

    class Poison(Exception):
        pass

    client = SpunClient("spin_thread", busy=False)
    try:
        def on_feedback(feedback) -> None:
            raise Poison("a callback failed in the spin thread")

        with pytest.raises(SpinThreadDied) as died:
            send_walk(client.node, [step(30.0)], on_feedback=on_feedback, client=client.walk_client,
                      server_timeout=30.0, result_timeout=120.0, server_silence=None)
        assert isinstance(died.value.__cause__, Poison)
        assert "race-client-spin" in str(died.value) and "Poison" in str(died.value)
        with pytest.raises(SpinThreadDied) as again:
            current_feet(client.node, timeout=120.0)
        assert isinstance(again.value.__cause__, Poison)
        with pytest.raises(SpinThreadDied):
            send_walk(client.node, [step(0.06)], server_timeout=120.0, result_timeout=120.0)
    finally:
        client.close()


@pytest.mark.parametrize("kind", ["own_executor", "spin_thread"])
def test_a_client_starved_of_the_cpu_takes_the_queued_feedback_before_blaming_the_server(kind, walk_server):
    """The client's thread stalls 1.5 s (as a process starved of the CPU under load; here a feedback callback
    that blocks) while the server goes on publishing its feedback: the default server_silence (0.9 s) has
    passed when the client runs again, but the feedback of the stall is queued. send_walk takes it first
    and the walk runs to its end; before, it raised ActionServerLost ("no feedback ... for 1.5 s: is
    walk_behavior running?") at the first check after the stall."""
    import time

    import rclpy

    from walk_mpc.tools.send_walk import SERVER_SILENCE, send_walk

    stall = SERVER_SILENCE + 0.6  # [s]
    stalled = []

    def on_feedback(feedback) -> None:
        if not stalled:
            stalled.append(True)
            time.sleep(stall)  # the client stalls (not a synchronisation: the server runs on meanwhile)

    if kind == "spin_thread":
        client = SpunClient("spin_thread", busy=False)
        node, walk_client, close = client.node, client.walk_client, client.close
    else:  # a node in no executor: send_walk spins it itself, in this thread
        context = rclpy.Context()
        rclpy.init(context=context)
        node = rclpy.create_node("starved_client", context=context)
        walk_client = None

        def close() -> None:
            node.destroy_node()
            context.try_shutdown()
    try:
        outcome = send_walk(node, [step(3.0)], on_feedback=on_feedback, client=walk_client,
                            server_timeout=30.0, result_timeout=60.0)
        assert stalled and outcome.succeeded, outcome
    finally:
        close()


def test_spin_thread_runs_calls_on_its_thread_and_reports_its_end(context):
    import rclpy
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
    from std_msgs.msg import Int32

    from walk_mpc.tools.spin_thread import SpinThread, SpinThreadDied, on_executor_thread, spin_thread_of

    with pytest.raises(TypeError):
        SpinThread(MultiThreadedExecutor(context=context))
    node = rclpy.create_node("spin_thread_test", context=context)
    spin = SpinThread(SingleThreadedExecutor(context=context), name="unit-spin")
    spin.add_node(node)
    with pytest.raises(SpinThreadDied, match="not started"):
        spin.check()
    assert spin.call(threading.current_thread) is threading.current_thread()  # not spinning: here
    spin.start()
    assert spin_thread_of(node) is spin
    assert spin.call(threading.current_thread).name == "unit-spin"
    assert on_executor_thread(node, threading.current_thread).name == "unit-spin"
    subscription = spin.call(node.create_subscription, Int32, "unit", lambda msg: None, 1)
    assert spin.call(node.destroy_subscription, subscription)
    with pytest.raises(ZeroDivisionError):  # an error of the call is the caller's, the thread spins on
        spin.call(lambda: 1 / 0)
    spin.check()
    assert spin.stop()
    with pytest.raises(SpinThreadDied, match="stopped"):
        spin.check()
    assert spin.error is None
    assert spin.call(threading.current_thread) is threading.current_thread()  # stopped: here again
    node.destroy_node()


if __name__ == "__main__" and sys.argv[1:] == ["serve"]:
    serve()
