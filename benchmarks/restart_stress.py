"""Restart nodes many times and count the restarts whose link never comes back (issue 17).

The graph runs as processes (:class:`walk_mpc.tools.launch_graph.GraphProcesses`, Talos on the kinematic sim),
standing, with the drill's probe of ``benchmarks/restart.py``. ``--restarts`` times, a node of ``--nodes`` (in
turn) is SIGKILLed, started again ``--delay`` seconds later, and the drill waits up to ``--timeout`` seconds
for the loop to run again (restart.py's ``loop``: the ik ticking on the planner's references; walk_behavior:
its status and the ik ticking; wheel_contact: its output). A restart that times out is "dead": the drill
prints each process' view of the restarted node's Fast DDS shared-memory ports (the segment's inode, unlinked
or not, its flags and listeners: :class:`walk_mpc.fastdds_shm.PortView`), and goes on.

``--kill-while planted-between`` kills the node as a death between two messages leaves it (its listener slots
neither waiting nor processing: Fast DDS's port checks never mark such a port dead), at once, every time;
``WALK_MPC_SHM_CLEAN=0`` turns walk_mpc's cleaning of dead participants' files off (the nodes' and the
launcher's: :func:`walk_mpc.fastdds_shm.clean_zombies`).

Printed: one line per restart, then the number of dead links of ``--restarts``.

    bash -c 'source tools/env.sh && source install/setup.bash && \
        ROS_DOMAIN_ID=61 python -P benchmarks/restart_stress.py --nodes mpc_planner --restarts 50'
    ... --nodes mpc_planner --restarts 8 --kill-while planted-between   (with, without WALK_MPC_SHM_CLEAN=0)
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent))

from restart import LEGGED, LOOP, Probe, robot_view, wait_started  # noqa: E402

from walk_mpc.fastdds_shm import listening_ports, mapped_ports, plant_listener_state  # noqa: E402
from walk_mpc.graph import dds_environment  # noqa: E402
from walk_mpc.tools.launch_graph import GraphProcesses  # noqa: E402


def diagnose(processes: GraphProcesses, node: str) -> None:
    """Print, for the ports the restarted ``node`` listens on, each process' mapping of them
    (:class:`walk_mpc.fastdds_shm.PortView`: the segment's inode, unlinked or not, ok, free cells,
    listeners)."""
    pid = processes.processes[node].pid
    mine = listening_ports(pid)
    print(f"  {node} (pid {pid}) listens on shared-memory ports {mine}")
    for name, proc in [*processes.processes.items(), ("probe", None)]:
        if proc is not None and proc.poll() is not None:
            continue
        other = proc.pid if proc else os.getpid()
        try:
            rows = [f"{v.port}: inode {v.inode}{' (unlinked)' if v.unlinked else ''} ok {int(v.ok)} "
                    f"free {v.free_cells} listeners {v.listeners!r}"
                    for v in mapped_ports(other) if v.port in mine]
        except OSError as exc:
            rows = [str(exc)]
        print(f"    {name:13s} {'; '.join(rows)}", flush=True)
        try:
            stale = [f"{v.port} (inode {v.inode}, listeners {v.listeners!r}, free {v.free_cells})"
                     for v in mapped_ports(other) if v.unlinked and v.ok and v.listeners]
        except OSError:
            stale = []
        if stale:
            print(f"    {'':13s} maps unlinked ports still ok: {', '.join(stale)}", flush=True)


def kill_planted(proc, state: str) -> str:
    """SIGKILL ``proc`` as if it died with its shared-memory listeners in ``state``: SIGSTOP it, mark its
    listeners (the slots in use of the ports it listens on) processing ("P") or between messages ("-":
    neither waiting nor processing) as such a death leaves them
    (:func:`walk_mpc.fastdds_shm.plant_listener_state`), then SIGKILL. Returns the ports marked."""
    proc.send_signal(signal.SIGSTOP)
    ports = listening_ports(proc.pid)
    for port in ports:
        plant_listener_state(port, state)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return f"planted {state!r} on ports {ports}"


def kill_while(proc, state: str, attempts: int = 20000) -> str:
    """SIGKILL ``proc`` at a moment when one of its shared-memory listeners is in ``state``
    ("P" processing a message, "-" between messages): SIGSTOP, read the states, SIGCONT and retry a few ms
    later. Returns the states it was killed in ("" if no such moment within ``attempts``: killed anyway)."""
    for _ in range(attempts):
        proc.send_signal(signal.SIGSTOP)
        try:
            mine = listening_ports(proc.pid)
            states = {v.port: v.listeners for v in mapped_ports(proc.pid)
                      if v.port in mine and not v.unlinked}
        except OSError:
            states = {}
        if any(state in s for s in states.values()):
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return str(states)
        proc.send_signal(signal.SIGCONT)
        time.sleep(random.uniform(0.0005, 0.005))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return ""


#: ``python -c`` of a node with Fast DDS's warnings on (``-m module args`` -> ``-c this module args``).
_WITH_DDS_WARNINGS = ("import ctypes, runpy, sys; "
                      "ctypes.CDLL('librmw_fastrtps_cpp.so').rmw_set_log_severity(20); "
                      "module = sys.argv.pop(1); "
                      "runpy.run_module(module, run_name='__main__', alter_sys=True)")


#: [s] How long after the loop runs again the probe may take to count the restarted node's own message.
HEARD_GRACE = 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", nargs="+", default=["mpc_planner"], choices=[*LEGGED, "wheel_contact"],
                        help="the node(s) to restart, in turn (wheel_contact: upkie's graph, alone)")
    parser.add_argument("--restarts", type=int, default=50)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds from the kill to the restart")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds without the loop: a dead link")
    parser.add_argument("--settle", type=float, default=0.5,
                        help="seconds from the loop running again to the next kill (restart.py: about 1.5)")
    parser.add_argument("--kill-while", default="any",
                        choices=["any", "processing", "between", "planted-processing", "planted-between"],
                        help="kill the node at any moment, or only while a shared-memory listener of it is "
                             "processing a message, or between messages, or mark its listeners so (planted) "
                             "before the kill")
    parser.add_argument("--hold", type=float, default=0.0,
                        help="on the first dead link, keep the graph running so many seconds (to inspect it)")
    parser.add_argument("--dds-warnings", action="store_true",
                        help="the nodes log Fast DDS's warnings (rmw_set_log_severity) in their log files")
    parser.add_argument("--log-dir", default="", help="keep the node logs there (default: a temporary dir)")
    args = parser.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update(dds_environment())
    robot = "upkie" if "wheel_contact" in args.nodes else "talos"
    if robot == "upkie" and len(args.nodes) > 1:
        parser.error("wheel_contact runs in upkie's graph: restart it alone")
    dead = []
    rows: List[tuple] = []  # (node, loop heard by the probe [s], loop as the robot sees it [s] or NaN)
    with tempfile.TemporaryDirectory() as temporary:
        processes = GraphProcesses(robot, "kinematic", log_dir=Path(args.log_dir or temporary) / robot)
        if args.dds_warnings:
            command = processes.command
            processes.command = lambda name: [*command(name)[:2], "-c", _WITH_DDS_WARNINGS,
                                              *command(name)[3:]]
        processes.start()
        probe = Probe()
        try:
            wait_started(processes, probe, robot)
            print(f"ROS_DOMAIN_ID {os.environ.get('ROS_DOMAIN_ID', '0')}, load {os.getloadavg()[0]:.1f}",
                  flush=True)
            diagnose(processes, args.nodes[0])
            for i in range(args.restarts):
                node = args.nodes[i % len(args.nodes)]
                killed_in = ""
                if args.kill_while.startswith("planted"):
                    state = "P" if args.kill_while.endswith("processing") else "-"
                    killed_in = kill_planted(processes.processes[node], state)
                elif args.kill_while != "any":
                    state = "P" if args.kill_while == "processing" else "-"
                    killed_in = kill_while(processes.processes[node], state)
                processes.stop_node(node, signal.SIGKILL)
                time.sleep(args.delay)
                before = probe.snapshot()
                wall = time.time()
                proc = processes.start_node(node)
                loop = probe.wait_more(before, LOOP.get(node, ("ticks",)), args.timeout)
                # The loop may be seen (the ik's ticks) a moment before the probe counts the node's own
                # message: it gets HEARD_GRACE more before "heard nothing" is said.
                heard = probe.snapshot()[node] > before[node]
                if not heard and not math.isnan(loop):
                    heard = not math.isnan(probe.wait_more(before, (node,), HEARD_GRACE))
                print(f"{i + 1:3d} {node} pid {proc.pid}: loop "
                      f"{'DEAD' if math.isnan(loop) else f'{loop:.2f} s'}"
                      f"{'' if heard else ' (probe heard nothing of it)'}  load {os.getloadavg()[0]:.1f}"
                      f"{'  killed in ' + killed_in if killed_in else ''}", flush=True)
                if math.isnan(loop):
                    dead.append(i + 1)
                    diagnose(processes, node)
                    if args.hold > 0 and len(dead) == 1:
                        print(f"  holding {args.hold:.0f} s: pids "
                              f"{[(n, p.pid) for n, p in processes.processes.items()]}", flush=True)
                        time.sleep(args.hold)
                        later = probe.wait_more(before, LOOP.get(node, ("ticks",)), 0.1)
                        print(f"  after holding: loop {'back' if not math.isnan(later) else 'still dead'}",
                              flush=True)
                else:
                    time.sleep(args.settle)
                    robot = robot_view(processes, node, wall)
                    rows.append((node, loop, robot))
                    if not math.isnan(robot):
                        print(f"    as the robot sees it: {robot:.2f} s", flush=True)
        finally:
            probe.close()
            processes.stop()
    loops = sorted(r[1] for r in rows)  # the live restarts' loops, heard by the probe
    median = loops[len(loops) // 2] if loops else float("nan")
    print(f"\n{' '.join(args.nodes)}: {len(dead)} dead links of {args.restarts} restarts {dead}; "
          f"loop back median {median:.2f} s, max {max(loops, default=float('nan')):.2f} s; "
          f"load {os.getloadavg()[0]:.1f}")
    for node in args.nodes:
        mine = [r for r in rows if r[0] == node]
        heard = sum(r[1] <= 1.0 for r in mine)
        line = f"{node}: loop heard within 1 s in {heard} of {len(mine)} live restarts"
        seen = [r[2] for r in mine if not math.isnan(r[2])]
        if seen:
            line += (f"; as the robot sees it within 1 s in {sum(v <= 1.0 for v in seen)} of {len(seen)} "
                     f"(median {statistics.median(seen):.2f} s, max {max(seen):.2f} s)")
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
