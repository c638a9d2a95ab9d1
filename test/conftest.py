"""Test session setup: an isolated DDS domain, ROS availability, and helpers to run node processes."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from walk_mpc.tools.launch_graph import die_with_parent

REPO = Path(__file__).resolve().parents[1]

# A fresh DDS domain per test session, and DDS traffic kept on this machine. This runs before any test
# module imports rclpy, and child processes inherit it.
if "WALK_MPC_TEST_DOMAIN_ID" in os.environ:
    os.environ["ROS_DOMAIN_ID"] = os.environ["WALK_MPC_TEST_DOMAIN_ID"]
else:
    os.environ["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 101))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.pop("ROS_LOCALHOST_ONLY", None)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("PYTHONUNBUFFERED", "1")


def _ros_available() -> tuple[bool, str]:
    try:
        import rclpy  # noqa: F401

        import walk_mpc.msg  # noqa: F401  (generated: only in the colcon-installed package)
    except ImportError as exc:
        return False, f"ROS 2 or the built walk_mpc interfaces are not importable ({exc}); run `make test`"
    return True, ""


ROS_AVAILABLE, ROS_MISSING_REASON = _ros_available()


def pytest_collection_modifyitems(config, items):
    """Skip tests marked `ros` when ROS is missing, unless WALK_MPC_REQUIRE_ROS=1 (then they fail)."""
    if ROS_AVAILABLE or os.environ.get("WALK_MPC_REQUIRE_ROS") == "1":
        return
    skip = pytest.mark.skip(reason=ROS_MISSING_REASON)
    for item in items:
        if "ros" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return (f"walk_mpc: ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} "
            f"ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ros_available={ROS_AVAILABLE}")


class NodeProcess:
    """A node (or any walk_mpc module) running in its own process, its output captured to a file."""

    def __init__(self, args: list[str], log_path: Path, env: dict | None = None) -> None:
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
            cwd=str(log_path.parent), preexec_fn=die_with_parent,
        )

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def stop(self, timeout: float = 10.0) -> int:
        """SIGINT, then wait; SIGKILL if it does not exit. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def context():
    """A fresh rclpy context for an in-process test, shut down at its end."""
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    ctx.try_shutdown()


@pytest.fixture
def start_node(tmp_path):
    """Start ``python -m walk_mpc.nodes.<name> [args]`` processes; all stopped at teardown."""
    started: list[NodeProcess] = []

    def start(module: str, *args: str, env: dict | None = None, name: str | None = None) -> NodeProcess:
        if "." not in module:
            module = f"walk_mpc.nodes.{module}"
        log = tmp_path / f"{name or module.rsplit('.', 1)[-1]}-{len(started)}.log"
        proc = NodeProcess([sys.executable, "-P", "-m", module, *args], log, env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


# ------------------------------------------------------------------ robot models shared by the core tests
# Module-scoped: each test module builds its own models (a test may not leak model state to another
# module). A module may define its own fixture of the same name, which takes precedence.
@pytest.fixture(scope="module")
def talos():
    """The reduced TALOS humanoid (example-robot-data)."""
    from walk_mpc.core.body.robot import RobotModel

    return RobotModel(RobotModel.Parameters(robot="talos_reduced"))


@pytest.fixture(scope="module")
def solo():
    """The Solo-12 quadruped (example-robot-data)."""
    from walk_mpc.core.body.robot import RobotModel

    return RobotModel(RobotModel.Parameters(robot="solo12"))


# ------------------------------------------- benchmarks/robustness.py, for the balance tests
@pytest.fixture(scope="module")
def robustness():
    """benchmarks/robustness.py as a module (its walks, pushes and terrain); skipped without MuJoCo."""
    pytest.importorskip("mujoco")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import robustness as module

    return module


@pytest.fixture()
def estimated(robustness, monkeypatch):
    """benchmarks/robustness.py with the state estimated (every controller on the IMU and the legs)."""
    monkeypatch.setattr(robustness, "ESTIMATED", True)
    return robustness
