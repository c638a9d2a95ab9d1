"""The README's library example runs as written (without ROS)."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README should show a Python example"
    for block in blocks:
        out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
