"""The code follows the project's lint rules (ruff, configured in pyproject.toml)."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (requirements/dev.txt)")
    out = subprocess.run([ruff, "check", "walk_mpc", "test", "benchmarks", "launch"], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:]
