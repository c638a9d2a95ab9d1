"""Helpers shared by the node tests: waiting on a condition while a node process runs."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest


def wait_until(condition: Callable[[], bool], what: str | Callable[[], str], process=None,
               timeout: float = 30.0, poll: Callable[[], None] | None = None) -> None:
    """Run ``poll()`` until ``condition()`` holds; fail the test on timeout or if the node exits.

    Args:
        condition: Checked before each ``poll()``.
        what: What is awaited, for the failure message (a callable: evaluated when failing, to report
            the state reached).
        process: The node process (``start_node`` fixture); its output goes into the failure message.
        timeout: Time limit [s].
        poll: One round of work (e.g. spinning an executor once); by default a 2 ms pause while another
            thread spins.
    """
    deadline = time.monotonic() + timeout
    describe = what if callable(what) else lambda: what
    while not condition():
        if process is not None and process.proc.poll() is not None:
            pytest.fail(f"node exited ({process.proc.returncode}) while waiting for {describe()}:\n"
                        f"{process.output()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timeout waiting for {describe()}" + (f":\n{process.output()}" if process else ""))
        if poll is None:
            time.sleep(0.002)
        else:
            poll()


def matched(process, topic: str, peer: str) -> int:
    """Endpoints the node ``process`` has matched on ``topic`` (``peer``: "subscriber" for its publisher,
    "publisher" for its subscription), from its DEBUG log (``--log-level <node>:=debug``; see
    walk_mpc.nodes._common.publisher_events). 0 before the first match.

    This is the node's own view: a peer counting the node's endpoint does not mean the node counts the
    peer yet, and what a node's volatile writer publishes before it matched a reader is lost to it.
    """
    counts = re.findall(rf"'{re.escape(topic)}': (\d+) {peer}\(s\) matched", process.output())
    return int(counts[-1]) if counts else 0


def with_debug_log(node_name: str, args) -> list[str]:
    """``args`` of a node process with ``--log-level <node_name>:=debug`` among its ROS arguments (for
    :func:`matched`)."""
    args = list(args)
    if "--ros-args" not in args:
        args.append("--ros-args")
    i = args.index("--ros-args") + 1
    return args[:i] + ["--log-level", f"{node_name}:=debug"] + args[i:]
