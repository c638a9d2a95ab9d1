"""How the nodes and tools tell a shutdown from an error (``_common.is_shutdown``).

rclpy 9 can raise a RuntimeError from publish/take while SIGINT shuts the context down, and its signal
handler shuts the context down in another thread: the error may come before the context is down.
"""

import threading

import pytest

pytestmark = pytest.mark.ros


def test_interrupt_and_external_shutdown_are_shutdowns(context):
    from rclpy.executors import ExternalShutdownException

    from walk_mpc.nodes._common import is_shutdown

    assert is_shutdown(KeyboardInterrupt(), context, grace=0.0)
    assert is_shutdown(ExternalShutdownException(), context, grace=0.0)


def test_runtime_error_on_a_live_context_is_an_error(context):
    from walk_mpc.nodes._common import is_shutdown

    assert not is_shutdown(RuntimeError("take failed"), context, grace=0.0)
    assert not is_shutdown(ValueError("bad value"), context, grace=0.0)


def test_runtime_error_after_the_context_went_down_is_a_shutdown(context):
    from walk_mpc.nodes._common import is_shutdown

    context.try_shutdown()
    assert is_shutdown(RuntimeError("Unable to convert call argument '0' to Python object"), context)


def test_runtime_error_before_the_signal_thread_shuts_down_is_a_shutdown(context):
    from walk_mpc.nodes._common import is_shutdown

    waiting = threading.Event()
    # The "signal handler" shuts the context down once is_shutdown has started waiting for it: ok() is
    # polled with the context still up at least once.
    original_ok = context.ok

    def ok() -> bool:
        waiting.set()
        return original_ok()

    context.ok = ok
    worker = threading.Thread(target=lambda: waiting.wait(10.0) and context.try_shutdown())
    worker.start()
    try:
        assert is_shutdown(RuntimeError("RCLError: publisher's context is invalid"), context, grace=10.0)
    finally:
        worker.join(10.0)
