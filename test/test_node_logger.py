"""GraphNode.get_logger(): rclpy's logger without its caller inspection (walk_mpc.nodes.node_logger)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros


@pytest.fixture()
def node():
    import rclpy

    from walk_mpc.nodes._common import GraphNode

    context = rclpy.Context()
    rclpy.init(context=context)
    graph_node = GraphNode("node_logger_test", context=context)
    try:
        yield graph_node
    finally:
        graph_node.destroy_node()
        rclpy.shutdown(context=context)


def test_a_call_without_filter_goes_to_rcutils_without_inspecting_the_caller(node, monkeypatch):
    from rclpy.impl import rcutils_logger

    from walk_mpc.nodes import node_logger

    def no_inspection(*args, **kwargs):
        raise AssertionError("rclpy's caller inspection was used")

    monkeypatch.setattr(rcutils_logger, "CallerId", no_inspection)
    calls = []
    real = node_logger._rcutils_log
    monkeypatch.setattr(node_logger, "_rcutils_log", lambda *args: calls.append(args) or real(*args))
    logger = node.get_logger()
    assert isinstance(logger, node_logger.NodeLogger)
    assert logger.info("an info line") is True
    assert logger.warn("a warning") is True
    assert logger.debug("below the level") is False  # INFO by default: not logged, not sent
    assert [(int(severity), name, message) for severity, name, message, *_ in calls] == [
        (20, "node_logger_test", "an info line"), (30, "node_logger_test", "a warning")]
    function, path, line = calls[0][3:]
    assert function == "test_a_call_without_filter_goes_to_rcutils_without_inspecting_the_caller"
    assert path == __file__ and line > 0
    assert logger.name == "node_logger_test" and logger.get_effective_level() == 20  # rclpy's attributes


def test_filters_stay_per_call_site(node):
    logger = node.get_logger()

    def site_a():
        return logger.warning("site a", throttle_duration_sec=60.0)

    def site_b():
        return logger.warning("site b", throttle_duration_sec=60.0)

    assert [site_a(), site_b(), site_a(), site_b()] == [True, True, False, False]
    assert [logger.error("once", once=True) for _ in range(3)] == [True, False, False]
    assert [logger.info("skipped first", skip_first=True) for _ in range(2)] == [False, True]
