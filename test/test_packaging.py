"""pip packaging (setup.cfg): a wheel of the project installs the whole ROS-free core, every subpackage.

The wheel is built from a copy of the sources (setuptools writes build/ and *.egg-info next to setup.py, and
build/ is colcon's), installed into a fresh venv, and imported there from outside the checkout with
PYTHONPATH and AMENT_PREFIX_PATH cleared, so neither the checkout nor the colcon install can stand in for it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# One module of each core subpackage (the closed loop imports most of the rest).
MODULES = (
    "walk_mpc.core.control.closed_loop",
    "walk_mpc.core.sim.kinematic",
    "walk_mpc.core.mpc.planner",
    "walk_mpc.core.body.ik",
    "walk_mpc.core.walk.behavior",
    "walk_mpc.core.wheel.contact",
)

CHECK = """
import importlib, json, sys
import walk_mpc
files = {"walk_mpc": walk_mpc.__file__}
for name in sys.argv[1:]:
    files[name] = importlib.import_module(name).__file__
from walk_mpc.core.body.robot import robot_directories, robot_names
print(json.dumps({"prefix": sys.prefix, "files": files, "robots": list(robot_names()),
                  "robot_dirs": [str(d) for d in robot_directories()]}))
"""


def _clean_env() -> dict:
    env = dict(os.environ)
    for key in ("PYTHONPATH", "AMENT_PREFIX_PATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH"):
        env.pop(key, None)
    return env


def _run(cmd, cwd: Path, env: dict, timeout: float = 600.0) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _can_build_offline() -> bool:
    """Whether this interpreter's setuptools builds wheels itself (>= 70.1, or with the `wheel` package)."""
    if importlib.util.find_spec("wheel") is not None:
        return True
    version = importlib.metadata.version("setuptools").split(".")
    try:
        return (int(version[0]), int(version[1])) >= (70, 1)
    except (IndexError, ValueError):
        return False


def _copy_sources(dest: Path) -> Path:
    src = dest / "src"
    src.mkdir()
    for name in ("setup.py", "setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "walk_mpc", src / "walk_mpc",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(REPO / "config" / "robots", src / "config" / "robots")
    return src


def _build_wheel(src: Path, dist: Path, env: dict) -> Path:
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, src]
    if _can_build_offline():
        cmd.insert(4, "--no-build-isolation")
    # Otherwise pip gets pyproject.toml's build requirements (setuptools, wheel) from the configured index.
    proc = _run(cmd, cwd=dist.parent, env=env)
    if proc.returncode != 0 and "--no-build-isolation" not in cmd and (
            "No matching distribution found for setuptools" in proc.stdout + proc.stderr
            or "No matching distribution found for wheel" in proc.stdout + proc.stderr):
        pytest.skip("this venv's setuptools cannot build wheels without the `wheel` package, and the package "
                    "index does not serve the build requirements")
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}"
    wheels = list(dist.glob("walk_mpc-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _make_venv(root: Path, env: dict) -> Path:
    """A fresh venv that also sees this venv's packages (numpy, pinocchio...), after its own.

    `--system-site-packages` of a venv made from inside a venv gives the base interpreter's packages, not this
    venv's, so a .pth file adds this venv's site directories (with their own .pth files: cmeel's pinocchio
    needs them) behind the new venv's site-packages.
    """
    proc = _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", root],
                cwd=root.parent, env=env)
    assert proc.returncode == 0, proc.stderr
    python = root / "bin" / "python"
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   cwd=root.parent, env=env).stdout.strip()
    outer = [p for p in site.getsitepackages() if Path(p).is_dir()]
    Path(purelib, "zz_outer_venv.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in outer) + "\n")
    return python


@pytest.mark.slow
def test_wheel_installs_every_core_subpackage(tmp_path):
    env = _clean_env()
    src = _copy_sources(tmp_path)
    dist = tmp_path / "dist"
    dist.mkdir()
    wheel = _build_wheel(src, dist, env)

    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    # The ROS adapters and tools stay out of the pip package (setup.py's docstring).
    assert not {p for p in packages if p.startswith(("walk_mpc/nodes", "walk_mpc/tools"))}, packages
    for name in MODULES:
        assert name.replace(".", "/") + ".py" in names, name
    # The robot descriptions go to <prefix>/share/walk_mpc/config/robots (setup.cfg data_files).
    assert any(n.endswith(".data/data/share/walk_mpc/config/robots/g1.yaml") for n in names), names

    venv = tmp_path / "venv"
    python = _make_venv(venv, env)
    # This interpreter's pip installs into the new venv (--python): no pip bootstrap, nothing fetched.
    proc = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
                 wheel], cwd=tmp_path, env=env)
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    proc = _run([python, "-P", "-c", CHECK, *MODULES], cwd=outside, env=env)
    assert proc.returncode == 0, f"import from the installed wheel failed:\n{proc.stderr}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(result["prefix"]).resolve() == venv.resolve()
    for name, file in result["files"].items():
        assert Path(file).resolve().is_relative_to(venv.resolve()), (name, file)
    assert {"talos", "g1", "romeo", "solo12"} <= set(result["robots"])
    robots = (venv / "share" / "walk_mpc" / "config" / "robots").resolve()
    assert [Path(d).resolve() for d in result["robot_dirs"]] == [robots]
