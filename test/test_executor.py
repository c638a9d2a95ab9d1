"""FastDispatchExecutor (walk_mpc.nodes._executor): same behaviour as rclpy's SingleThreadedExecutor for
subscriptions, timers, services, guard conditions, callback errors and action servers (with an execute
coroutine that polls, as walk_behavior's); the node
parameter ``fast_dispatch`` that selects it."""

from __future__ import annotations

import threading

import pytest
from ros_helpers import wait_until

pytestmark = pytest.mark.ros


@pytest.fixture
def spinning(context):
    """Start ``executor.spin()`` in a thread; stop and join it at the end; errors of spin are kept."""
    started = []

    def start(executor):
        errors = []

        def body():
            try:
                executor.spin()
            except Exception as exc:  # noqa: BLE001  (reported by the test)
                errors.append(exc)

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        started.append((executor, thread))
        return errors

    yield start
    for executor, thread in started:
        executor.shutdown(timeout_sec=2.0)
        thread.join(5.0)
        assert not thread.is_alive(), "the executor did not stop"


def _node(context, name):
    import rclpy

    return rclpy.create_node(name, context=context)


def test_supported_by_this_rclpy():
    from walk_mpc.nodes._executor import fast_dispatch_supported

    assert fast_dispatch_supported()


def test_every_message_reaches_its_callback_in_order(context, spinning):
    from std_msgs.msg import Int32

    from walk_mpc.nodes._executor import FastDispatchExecutor

    node, peer = _node(context, "fast_sub"), _node(context, "fast_pub")
    received = []
    node.create_subscription(Int32, "numbers", lambda msg: received.append(msg.data), 500)
    publisher = peer.create_publisher(Int32, "numbers", 500)
    executor = FastDispatchExecutor(context=context)
    executor.add_node(node)
    errors = spinning(executor)
    wait_until(lambda: publisher.get_subscription_count() == 1, "the subscription to match")
    for i in range(200):
        publisher.publish(Int32(data=i))
    wait_until(lambda: len(received) == 200, lambda: f"200 messages (got {len(received)})")
    assert received == list(range(200))
    assert not errors
    assert not executor._fallback


def test_timers_services_and_message_info_callbacks_run(context, spinning):
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Int32

    from walk_mpc.nodes._executor import FastDispatchExecutor
    from walk_mpc.srv import ResetWheelContact as Trigger

    node, peer = _node(context, "fast_node"), _node(context, "fast_peer")
    ticks, infos = [], []
    node.create_timer(0.01, lambda: ticks.append(1))
    node.create_subscription(Int32, "with_info", lambda msg, info: infos.append((msg.data, info)), 10)

    def answer(request, response):
        response.success, response.message = True, f"after {len(ticks)} ticks"
        return response

    node.create_service(Trigger, "ping", answer)
    executor = FastDispatchExecutor(context=context)
    executor.add_node(node)
    spinning(executor)
    client_executor = SingleThreadedExecutor(context=context)
    client_executor.add_node(peer)
    spinning(client_executor)
    wait_until(lambda: len(ticks) >= 5, "5 timer callbacks")
    client = peer.create_client(Trigger, "ping")
    assert client.wait_for_service(timeout_sec=10.0)
    future = client.call_async(Trigger.Request())
    wait_until(future.done, "the service answer")
    assert future.result().success and future.result().message.startswith("after ")
    publisher = peer.create_publisher(Int32, "with_info", 10)
    wait_until(lambda: publisher.get_subscription_count() == 1, "the subscription to match")
    publisher.publish(Int32(data=7))
    wait_until(lambda: infos, "the message with its info")
    assert infos[0][0] == 7 and infos[0][1] is not None


def test_a_callback_error_ends_spin_like_the_base_executor(context, spinning):
    from std_msgs.msg import Int32

    from walk_mpc.nodes._executor import FastDispatchExecutor

    node, peer = _node(context, "fast_failing"), _node(context, "fast_sender")

    def fail(msg):
        raise ValueError(f"bad {msg.data}")

    node.create_subscription(Int32, "bad", fail, 10)
    publisher = peer.create_publisher(Int32, "bad", 10)
    executor = FastDispatchExecutor(context=context)
    executor.add_node(node)
    errors = spinning(executor)
    wait_until(lambda: publisher.get_subscription_count() == 1, "the subscription to match")
    publisher.publish(Int32(data=3))
    wait_until(lambda: errors, "spin to raise")
    assert isinstance(errors[0], ValueError) and "bad 3" in str(errors[0])


def test_an_action_server_with_a_polling_execute_coroutine_serves_goals_and_cancels(context, spinning):
    """As walk_behavior's: the execute coroutine yields until a subscription callback (dispatched directly)
    ends the goal and triggers a guard condition; a cancel request is seen by the coroutine."""
    from rclpy.action import ActionClient, ActionServer, CancelResponse
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Int32

    from walk_mpc.action import Walk
    from walk_mpc.nodes._executor import FastDispatchExecutor

    node, peer = _node(context, "fast_action"), _node(context, "fast_action_client")
    finished: dict = {}
    wake_up = node.create_guard_condition(lambda: None)

    class NextWakeUp:
        def __await__(self):
            yield

    async def execute(handle):
        key = bytes(handle.goal_id.uuid)
        while key not in finished:
            if handle.is_cancel_requested:
                handle.canceled()
                return Walk.Result(error_msg="canceled")
            handle.publish_feedback(Walk.Feedback())
            await NextWakeUp()
        handle.succeed()
        return Walk.Result(error_msg=f"done {finished[key]}")

    def end_goals(msg):
        for key in list(goals):
            finished[key] = msg.data
        wake_up.trigger()

    goals: list = []
    ActionServer(node, Walk, "walk_test", execute_callback=execute,
                 handle_accepted_callback=lambda h: (goals.append(bytes(h.goal_id.uuid)), h.execute()),
                 cancel_callback=lambda handle: CancelResponse.ACCEPT)
    node.create_subscription(Int32, "end_goals", end_goals, 10)
    executor = FastDispatchExecutor(context=context)
    executor.add_node(node)
    errors = spinning(executor)
    client_executor = SingleThreadedExecutor(context=context)
    client_executor.add_node(peer)
    spinning(client_executor)
    client = ActionClient(peer, Walk, "walk_test")
    assert client.wait_for_server(timeout_sec=10.0)
    feedback = []
    sent = client.send_goal_async(Walk.Goal(), feedback_callback=feedback.append)
    wait_until(sent.done, "the goal to be answered")
    assert sent.result().accepted
    wait_until(lambda: feedback, "feedback of the goal")
    publisher = peer.create_publisher(Int32, "end_goals", 10)
    wait_until(lambda: publisher.get_subscription_count() == 1, "the subscription to match")
    publisher.publish(Int32(data=5))
    result = sent.result().get_result_async()
    wait_until(result.done, "the result")
    assert result.result().result.error_msg == "done 5"
    goals.clear()
    sent = client.send_goal_async(Walk.Goal())
    wait_until(sent.done, "the second goal to be answered")
    canceled = sent.result().cancel_goal_async()
    wait_until(canceled.done, "the cancel answer")
    result = sent.result().get_result_async()
    wait_until(result.done, "the canceled result")
    assert result.result().result.error_msg == "canceled"
    assert not errors and not executor._fallback
    client.destroy()


def test_timer_callbacks_with_timer_info_and_coroutine_timers_run_on_the_base_machinery(context, spinning):
    from rclpy.timer import TimerInfo

    from walk_mpc.nodes._executor import FastDispatchExecutor

    node = _node(context, "fast_timers")
    plain, infos, coroutines = [], [], []

    def with_info(info) -> None:
        infos.append(info)

    with_info.__annotations__["info"] = TimerInfo  # a class, not the string this module's annotations are

    async def coroutine() -> None:
        coroutines.append(1)

    node.create_timer(0.01, lambda: plain.append(1))
    node.create_timer(0.01, with_info)
    node.create_timer(0.01, coroutine)
    executor = FastDispatchExecutor(context=context)
    executor.add_node(node)
    errors = spinning(executor)
    wait_until(lambda: len(plain) >= 5 and len(infos) >= 5 and len(coroutines) >= 5,
               lambda: f"5 calls of each timer ({len(plain)}, {len(infos)}, {len(coroutines)}; {errors})")
    assert isinstance(infos[0], TimerInfo)
    assert not errors


def test_node_parameter_selects_the_executor(context):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from walk_mpc.core.errors import ParameterError
    from walk_mpc.nodes._common import FAST_DISPATCH, GraphNode, make_executor
    from walk_mpc.nodes._executor import FastDispatchExecutor

    default = GraphNode("fast_default", context=context)
    assert type(make_executor(default)) is FastDispatchExecutor
    off = GraphNode("fast_off", context=context, parameter_overrides=[Parameter(FAST_DISPATCH, value=False)])
    assert type(make_executor(off)) is SingleThreadedExecutor
    bad = GraphNode("fast_bad", context=context, parameter_overrides=[Parameter(FAST_DISPATCH, value="yes")])
    with pytest.raises(ParameterError, match="fast_dispatch.*true .*or false"):
        make_executor(bad)


def test_a_subscription_created_while_spinning_is_served(context, spinning):
    from std_msgs.msg import Int32

    from walk_mpc.nodes._executor import FastDispatchExecutor

    node, peer = _node(context, "fast_late"), _node(context, "fast_late_pub")
    executor = FastDispatchExecutor(context=context)
    executor.add_node(node)
    spinning(executor)
    received = []
    node.create_subscription(Int32, "late", lambda msg: received.append(msg.data), 10)  # wakes the executor
    publisher = peer.create_publisher(Int32, "late", 10)
    wait_until(lambda: publisher.get_subscription_count() == 1, "the subscription to match")
    publisher.publish(Int32(data=5))
    wait_until(lambda: received == [5], lambda: f"the message on the new subscription (got {received})")


def test_parameter_services_left_out_of_the_wait_set_are_still_answered(context, spinning):
    from rcl_interfaces.srv import GetParameters
    from rclpy.executors import SingleThreadedExecutor

    from walk_mpc.nodes._executor import FastDispatchExecutor

    node, peer = _node(context, "fast_params"), _node(context, "fast_params_client")
    node.declare_parameter("answer", 42)
    executor = FastDispatchExecutor(context=context)
    executor.add_node(node)
    errors = spinning(executor)
    client_executor = SingleThreadedExecutor(context=context)
    client_executor.add_node(peer)
    spinning(client_executor)
    client = peer.create_client(GetParameters, "fast_params/get_parameters")
    assert client.wait_for_service(timeout_sec=10.0)
    future = client.call_async(GetParameters.Request(names=["answer"]))
    wait_until(future.done, "the parameter service's answer")
    assert future.result().values[0].integer_value == 42
    assert not errors and len(list(node.services)) == 7 and executor._services == []  # served by the drains


def test_qos_events_polled_apart_still_reach_their_callbacks(context, spinning):
    from rclpy.event_handler import SubscriptionEventCallbacks
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Int32

    from walk_mpc.nodes._executor import FastDispatchExecutor

    node, peer = _node(context, "fast_events"), _node(context, "fast_events_peer")
    incompatible = []
    node.create_subscription(
        Int32, "qos_mismatch", lambda msg: None, QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE),
        event_callbacks=SubscriptionEventCallbacks(incompatible_qos=incompatible.append))
    executor = FastDispatchExecutor(context=context)
    executor.add_node(node)
    errors = spinning(executor)
    best_effort = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    peer.create_publisher(Int32, "qos_mismatch", best_effort)
    wait_until(lambda: incompatible, "the incompatible QoS event")
    assert not errors
