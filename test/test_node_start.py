"""The start of a node process (issue 17: a restarted node runs its loop again within 1 s): ``run`` schedules
the process under its ``realtime_priority`` as soon as the node declares it, before the rest of its
construction, and the node's first log line still ends its construction."""

from __future__ import annotations

import gc
import os

import pytest

pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402

from walk_mpc.nodes import _common  # noqa: E402


class _Recorder:
    """A node's logger that records its messages in ``events``."""

    def __init__(self, events: list) -> None:
        self.events = events

    def get_effective_level(self):
        return _common.LoggingSeverity.INFO

    def info(self, msg: str) -> None:
        self.events.append(("info", msg))

    def warning(self, msg: str) -> None:
        self.events.append(("warning", msg))


def _run_node(monkeypatch, priority: int, fail: bool = False) -> list:
    """``run`` a GraphNode whose construction records its steps, with SCHED_FIFO recorded (``fail``: refused
    as without permission) instead of applied to the test process, and an executor that stops at once."""
    events: list = []

    def setscheduler(tid, policy, param):
        if fail and policy == os.SCHED_FIFO:
            raise PermissionError(1, "Operation not permitted")
        events.append(("scheduler", policy, param.sched_priority))

    class Stop:
        def add_node(self, node) -> None:
            pass

        def spin(self) -> None:
            events.append(("spin",))
            raise KeyboardInterrupt

    class Node(_common.GraphNode):
        def __init__(self) -> None:
            super().__init__("node_start_test",
                             parameter_overrides=[Parameter(_common.REALTIME_PRIORITY, value=priority)])
            events.append(("model and kernels",))
            self.get_logger().info("constructed")

        def get_logger(self):
            return _Recorder(events)

    monkeypatch.setattr(_common.os, "sched_setscheduler", setscheduler)
    monkeypatch.setattr(_common, "make_executor", lambda node, multithreaded=False: Stop())
    monkeypatch.setattr(gc, "freeze", lambda: None)  # the test process' objects stay collectable
    assert _common.run(Node, args=[]) == 0
    assert not _common._EARLY_PRIORITY
    return events


def test_run_schedules_the_process_before_the_node_loads_its_model_and_logs_it_after(monkeypatch):
    events = _run_node(monkeypatch, 42)
    steps = [e[0] for e in events]
    first_fifo = steps.index("scheduler")
    assert first_fifo < steps.index("model and kernels")
    assert all(e == ("scheduler", os.SCHED_FIFO, 42) for e in events if e[0] == "scheduler")
    assert events[steps.index("model and kernels") + 1] == ("info", "constructed")  # the first log line
    report = [e for e in events if e[0] == "info" and "SCHED_FIFO priority 42" in e[1]]
    assert len(report) == 1
    assert steps.index("info", first_fifo) < events.index(report[0]) < steps.index("spin")


def test_without_permission_the_warning_comes_after_the_construction_and_the_node_runs(monkeypatch):
    events = _run_node(monkeypatch, 42, fail=True)
    steps = [e[0] for e in events]
    warnings = [e for e in events if e[0] == "warning"]
    assert len(warnings) == 1 and "realtime_priority 42 not applied" in warnings[0][1]
    assert steps.index("model and kernels") < events.index(warnings[0]) < steps.index("spin")
    assert all(e[1] == os.SCHED_OTHER for e in events if e[0] == "scheduler")  # all or nothing


def test_priority_zero_leaves_the_scheduling_alone(monkeypatch):
    events = _run_node(monkeypatch, 0)
    assert [e[0] for e in events] == ["model and kernels", "info", "spin"]


def test_launch_graph_starts_each_process_at_its_nodes_realtime_priority(tmp_path):
    from walk_mpc.core.params import load_yaml
    from walk_mpc.graph import load_graph
    from walk_mpc.tools.launch_graph import GraphProcesses

    document = load_yaml(load_graph().config_path("talos"))
    configured = {name: section["ros__parameters"].get("realtime_priority", 0)
                  for name, section in document.items()}
    graph = GraphProcesses("talos", "kinematic", log_dir=tmp_path)
    assert graph.priorities == {name: configured.get(name, 0) for name in graph.groups}
    assert graph.priorities["sim"] > 0 and graph.priorities["ik"] > 0
    control = GraphProcesses("talos", "kinematic", control_process=True, log_dir=tmp_path)
    assert control.priorities["control"] == max(configured.get(n, 0) for n in control.groups["control"])
    changed = GraphProcesses("talos", "kinematic", log_dir=tmp_path, extra_args={
        "ik": ["-p", "realtime_priority:=7"], "sim": ["-p", "realtime_priority:=0"]})
    assert (changed.priorities["ik"], changed.priorities["sim"]) == (7, 0)
    wrong = GraphProcesses("talos", "kinematic", log_dir=tmp_path,
                           extra_args={"ik": ["-p", "realtime_priority:=150"]})
    assert wrong.priorities["ik"] == 0  # the node itself reports the wrong value


def test_a_process_started_scheduled_runs_under_sched_fifo_from_its_exec_or_normally_without_permission():
    import subprocess
    import sys

    from walk_mpc.tools.launch_graph import start_scheduled

    probe = "import os; print(os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)"
    out = subprocess.run([sys.executable, "-c", probe], preexec_fn=start_scheduled(3), capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    assert [int(v) for v in out] == ([os.SCHED_FIFO, 3] if _can_set_fifo() else [os.SCHED_OTHER, 0])
    plain = subprocess.run([sys.executable, "-c", probe], preexec_fn=start_scheduled(0), capture_output=True,
                           text=True, timeout=60, check=True).stdout.split()
    assert [int(v) for v in plain] == [os.SCHED_OTHER, 0]


def _can_set_fifo() -> bool:
    """Whether this process may use SCHED_FIFO (tried on a short-lived thread, never on the test process)."""
    import threading

    result = []

    def attempt() -> None:
        try:
            os.sched_setscheduler(threading.get_native_id(), os.SCHED_FIFO, os.sched_param(1))
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join()
    return result[0]


def test_fast_dds_takes_the_profile_without_an_error(tmp_path):
    """The shipped profile (config/fastdds_localhost.xml: the peers range, the announcements, the
    shared-memory healthy check) parses: Fast DDS logs XMLPARSER errors and falls back to its defaults
    otherwise."""
    import subprocess
    import sys

    from walk_mpc.graph import FASTDDS_PROFILE, default_config_directory

    profile = default_config_directory() / FASTDDS_PROFILE
    assert "<healthy_check_timeout_ms>" in profile.read_text()
    env = {**os.environ, "FASTDDS_DEFAULT_PROFILES_FILE": str(profile),
           "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp", "ROS_DOMAIN_ID": str(100 + os.getpid() % 100),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    script = ("import rclpy; from std_msgs.msg import Empty; rclpy.init(); "
              "node = rclpy.create_node('profile_check'); node.create_publisher(Empty, 'profile_check', 1); "
              "print('created')")
    done = subprocess.run([sys.executable, "-P", "-c", script], env=env, capture_output=True, text=True,
                          timeout=60)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "created" in output, output
    assert "XMLPARSER" not in output and "Error" not in output, output


def test_a_node_started_participant_first_is_built_in_that_context_and_the_hidden_node_goes(monkeypatch):
    """``walk_mpc.nodes.start``'s order: the participant (a hidden ``_<name>_startup`` node) before the node's
    modules load; ``run`` then builds the node in that context without a second init, and removes the hidden
    node once the node exists (its participant stays: the context's)."""
    import rclpy

    monkeypatch.setattr(_common, "clean_dead_participants_files", lambda: None)  # not this test's business
    _common.start_participant("node_start_test", args=[])
    context = rclpy.get_default_context()
    startup = _common._STARTUP[context]
    assert startup.get_name() == "_node_start_test_startup"
    seen, destroyed = [], []
    destroy = startup.destroy_node
    monkeypatch.setattr(startup, "destroy_node", lambda: (destroyed.append(True), destroy())[1])

    class Node(_common.GraphNode):
        def __init__(self) -> None:
            super().__init__("node_start_test")
            seen.append((self.context is context, not destroyed))

    monkeypatch.setattr(rclpy, "init", lambda *a, **k: pytest.fail("a second rclpy.init"))
    monkeypatch.setattr(_common, "make_executor", lambda node, multithreaded=False: _Stop())
    monkeypatch.setattr(gc, "freeze", lambda: None)
    assert _common.run(Node, args=[]) == 0
    assert seen == [(True, True)]
    assert not _common._STARTUP and destroyed == [True]


class _Stop:
    """An executor that stops at once."""

    def add_node(self, node) -> None:
        pass

    def spin(self) -> None:
        raise KeyboardInterrupt


@pytest.mark.ros
@pytest.mark.parametrize(("node", "args", "expected"), [
    ("ik", ("-p", "control_period:=-1.0"), "control_period"),
    ("mpc_planner", ("-p", "planner.mpc.horizon:=0"), "planner.mpc.horizon"),
])
def test_a_node_started_participant_first_still_exits_with_code_2_naming_a_bad_parameter(start_node, node,
                                                                                          args, expected):
    process = start_node("walk_mpc.nodes.start", node, "--ros-args", *args, name=node)
    assert process.proc.wait(timeout=30) == 2
    assert "configuration error" in process.output() and expected in process.output()


def test_start_refuses_an_unknown_node_with_code_2():
    from walk_mpc.nodes import start

    assert start.main(argv=["start", "nope"]) == 2
    assert start.main("nope", argv=["start"]) == 2
