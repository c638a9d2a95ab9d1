"""How late this machine wakes a SCHED_FIFO thread: the floor under the deadline figures (issue 21).

One process per CPU (pinned to it, SCHED_FIFO at ``--priority``, above every walk_mpc node: the sims run at
60) sleeps to absolute instants ``--period`` apart (``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)``, as
``time.sleep`` to a deadline) and records how late it wakes. A wake-up later than a few milliseconds for the
highest-priority thread on an otherwise idle CPU is the machine's (the hypervisor taking the virtual CPU away,
the kernel's own work), not the software's: the robots' graphs on that CPU are held as long, and a graph that
needs a 10 ms deadline met on every sample cannot beat that floor. Also printed: the CPU time the hypervisor
stole (``steal`` of /proc/stat) over the run.

Printed per CPU: wake-ups, latency median / p99 / p99.99 / max [ms], the count over 1, 2, 5 and 10 ms. Run
it alone (idle), and beside ``multi_robot.py`` to see the floor under load:

    bash -c 'source tools/env.sh && python -P benchmarks/machine_jitter.py --duration 60'

Without permission for SCHED_FIFO it runs with normal scheduling and says so (the figures are then the
scheduler's, not the machine's).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from typing import List, Tuple

import numpy as np


def steal_ticks() -> int:
    """The machine's stolen CPU time so far [clock ticks] (/proc/stat's ``steal``; 0 where unknown)."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return int(fields[8]) if len(fields) > 8 else 0
    except OSError:
        return 0


def measure(cpu: int, priority: int, period: float, duration: float, out) -> None:
    """Wake every ``period`` s for ``duration`` s on ``cpu``; put (cpu, FIFO applied, latencies [ms])."""
    os.sched_setaffinity(0, {cpu})
    fifo = True
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError):
        fifo = False
    count = int(duration / period)
    late = np.empty(count)
    start = time.monotonic_ns() + 100_000_000
    step = int(period * 1e9)
    for k in range(count):
        target = start + k * step
        now = time.monotonic_ns()
        if target > now:
            time.sleep((target - now) / 1e9)
        late[k] = (time.monotonic_ns() - target) / 1e6
    out.put((cpu, fifo, late))


def run(cpus: List[int], priority: int, period: float, duration: float) -> Tuple[list, float]:
    """Measure on ``cpus`` at once; returns [(cpu, fifo, latencies [ms])] and the stolen CPU seconds."""
    queue: multiprocessing.Queue = multiprocessing.Queue()
    steal = steal_ticks()
    workers = [multiprocessing.Process(target=measure, args=(cpu, priority, period, duration, queue))
               for cpu in cpus]
    for worker in workers:
        worker.start()
    results = sorted((queue.get() for _ in workers), key=lambda r: r[0])
    for worker in workers:
        worker.join()
    return results, (steal_ticks() - steal) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds")
    parser.add_argument("--period", type=float, default=0.001, help="seconds between wake-ups")
    parser.add_argument("--priority", type=int, default=80, help="SCHED_FIFO priority (the sims run at 60)")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    results, stolen = run(cpus, args.priority, args.period, args.duration)
    print(f"{len(cpus)} CPUs, a wake-up every {args.period * 1e3:g} ms for {args.duration:g} s, load "
          f"{os.getloadavg()[0]:.1f}; stolen by the hypervisor: {stolen:.2f} CPU s")
    print("| cpu | scheduling | wake-ups | late median / p99 / p99.99 / max [ms] | over 1 / 2 / 5 / 10 ms |")
    print("|---|---|---|---|---|")
    for cpu, fifo, late in results:
        q = np.percentile(late, [50, 99, 99.99])
        over = " / ".join(str(int(np.count_nonzero(late > limit))) for limit in (1, 2, 5, 10))
        print(f"| {cpu} | {'SCHED_FIFO ' + str(args.priority) if fifo else 'normal (no permission)'} | "
              f"{late.size} | {q[0]:.3f} / {q[1]:.3f} / {q[2]:.3f} / {late.max():.3f} | {over} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
