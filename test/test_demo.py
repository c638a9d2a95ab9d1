"""The demo (`make demo`) end to end: a short walk through the whole graph, its recording and its plot."""

from __future__ import annotations

import collections
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros

#: Topics the recording must hold, with the least messages expected in a 4-step walk (about 6 s).
EXPECTED_TOPICS = {"/walk/plan": 2, "/sensor_state": 500, "/mpc/com_reference": 250, "/joint_trajectory": 250,
                   "/sim/deadlines": 1}


def test_demo_walks_four_steps_and_writes_a_decodable_recording_and_a_plot(tmp_path):
    from walk_mpc.tools.recorder import decoded_messages

    out = tmp_path / "out"
    # The timeout only guards against a hang (the demo takes about 15 s).
    run = subprocess.run([sys.executable, "-P", "-m", "walk_mpc.demo", "--steps", "4", "--out-dir", str(out)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "Goal finished with status: SUCCEEDED" in run.stdout, output
    # the latency through the graph with its missed deadlines (sim/latency status), and the sim's count
    latency = next(line for line in run.stdout.splitlines() if "sensor -> joint command" in line)
    assert re.search(r"missed deadlines \d+ \(\d+\.\d %\)", latency), output
    assert re.search(r"missed deadlines \(sim\) +\d+ of \d+ samples", run.stdout), output
    assert re.search(r"sim woke late +\d+ times \(largest \d+\.\d ms\)", run.stdout), output
    assert "demo: spin thread" not in output  # the demo's spin thread lived to the end (issue 21)
    assert (out / "walk.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    counts = collections.Counter()
    plans = []
    for message in decoded_messages(out / "walk.mcap"):  # decodes every message with its schema
        counts[message.topic] += 1
        if message.topic == "/walk/plan":
            plans.append(message.msg)
    for topic, least in EXPECTED_TOPICS.items():
        assert counts[topic] >= least, (topic, counts)
    assert any(p.walking and len(p.steps) == 4 for p in plans), plans
