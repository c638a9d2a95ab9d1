"""walk_mpc.core is a plain Python library: it imports without any ROS module and pip-installs alone."""

import ast
import hashlib
import os
import pkgutil
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "walk_mpc" / "core"
ROS_MODULES = ("rclpy", "rosidl", "launch", "ament_index_python", "builtin_interfaces", "std_msgs",
               "geometry_msgs", "sensor_msgs", "walk_mpc.msg", "walk_mpc.srv", "walk_mpc.action",
               "walk_mpc.nodes")


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_module_source_imports_no_ros(path):
    bad = {m for m in _imported_modules(path) if m.startswith(ROS_MODULES)}
    assert not bad, f"{path.name} imports ROS modules {sorted(bad)}; walk_mpc.core must stay ROS-free"


def test_every_core_module_imports_with_ros_blocked():
    modules = [f"walk_mpc.core.{m.name}" for m in pkgutil.iter_modules([str(CORE)])]
    code = (
        "import sys, importlib\n"
        f"for name in {ROS_MODULES!r}:\n"
        "    sys.modules[name] = None  # any import of it now raises ImportError\n"
        f"for module in {modules!r}:\n"
        "    importlib.import_module(module)\n"
        "leaked = [m for m in sys.modules\n"
        "          if m.startswith(('rclpy', 'rosidl')) and sys.modules[m] is not None]\n"
        "assert not leaked, leaked\n"
        "print('ok', len(" + repr(modules) + "))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


def _core_venv() -> Path:
    """A virtual environment that only ever receives ``pip install <repo>``: no ROS wheels.

    It is created empty on first use and kept per content of setup.cfg (which declares the core's
    dependencies) under ~/.cache/walk_mpc, so later runs only reinstall walk_mpc (seconds instead of the
    20 s it takes to unpack numpy, scipy and pinocchio). Set WALK_MPC_FRESH_CORE_VENV=1 for a new one.
    """
    digest = hashlib.sha256((REPO / "setup.cfg").read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "walk_mpc"
    target = cache / f"core-venv-py{sys.version_info[0]}{sys.version_info[1]}-{digest}"
    if os.environ.get("WALK_MPC_FRESH_CORE_VENV") == "1" or not (target / "bin" / "python").exists():
        shutil.rmtree(target, ignore_errors=True)
        venv.create(target, with_pip=True)
    return target


@pytest.mark.slow
def test_core_installs_with_pip_into_a_venv_without_ros():
    target = _core_venv()
    python = target / "bin" / "python"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
                        "_ROS_WHEELS_BOOTSTRAP_COMPLETE", "CMAKE_PREFIX_PATH")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", str(REPO)], capture_output=True,
                             text=True, env=env, cwd=target)  # a local directory is always reinstalled
    assert install.returncode == 0, install.stderr[-3000:]
    listing = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True,
                             text=True, env=env, cwd=target).stdout.lower()
    assert "ros-" not in listing and "rclpy" not in listing
    check = subprocess.run(
        [str(python), "-c",
         "import sys, walk_mpc.core, walk_mpc.core.walk.timeline;"
         "from walk_mpc.core import Step, Foot; Step(1, Foot.LEFT, 1.0, (0, 0.1, 0));"
         "from walk_mpc.core.mpc.planner import MpcPlanner;"
         "import importlib.util as u; assert u.find_spec('rclpy') is None;"
         "assert u.find_spec('walk_mpc.nodes') is None; print(walk_mpc.core.__file__)"],
        capture_output=True, text=True, env=env, cwd=target)
    assert check.returncode == 0, check.stderr
    assert str(target) in check.stdout


@pytest.mark.parametrize("node, unused", [
    ("walk_behavior", ("scipy", "numba", "mujoco", "osqp", "daqp")),
    ("wheel_contact", ("pinocchio", "scipy", "numba", "mujoco", "osqp", "daqp")),
    ("mpc_planner", ("mujoco",)),
    ("ik", ("mujoco", "osqp", "daqp")),
])
def test_a_node_imports_no_heavy_module_it_does_not_use(node, unused):
    """A restarted node is back in the loop sooner when its process loads only what it runs (issue 17: the
    loop again within 1 s of the start): e.g. scipy.linalg 0.15-0.2 s, numba 0.14 s, pinocchio 0.06-0.14 s."""
    pytest.importorskip("rclpy")
    code = (f"import sys, walk_mpc.nodes.{node}; "
            f"print(' '.join(m for m in {unused!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [], f"walk_mpc.nodes.{node} imports {out.stdout.split()}"
