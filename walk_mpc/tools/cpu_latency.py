"""Keep the CPUs out of their deep idle states while a graph runs: a PM QoS CPU latency request (issue 21).

Linux keeps a CPU's idle states to those that wake within the smallest latency any process asks for by
writing a 32-bit microsecond value to ``/dev/cpu_dma_latency`` and keeping the file open (the request ends
when it is closed, also when the process dies). A real-time robot computer usually asks for 0 for as long
as its control loop runs (cyclictest does the same, as does tuned's realtime profile): an idle CPU then
wakes at once for the next sensor sample instead of leaving a halt first (on this VM: the hypervisor's
halt-polling idle driver, ``haltpoll``). It costs power: idle CPUs spin.

    with cpu_latency_request(0) as held:  # held: False without permission (root or CAP_SYS_ADMIN-like access
        ...                               # to /dev/cpu_dma_latency), with a warning printed

Measured here (``benchmarks/multi_robot.py --robots 4 --mode control --pin --cpu-latency 0``, README).
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from typing import Iterator

#: The PM QoS device of the CPU latency request.
DEVICE = "/dev/cpu_dma_latency"


@contextlib.contextmanager
def cpu_latency_request(max_latency_us: int, device: str = DEVICE) -> Iterator[bool]:
    """Ask that no CPU takes longer than ``max_latency_us`` microseconds to wake while the block runs.

    Yields:
        Whether the request is held (False, with a warning on stderr, when the device cannot be opened:
        no permission, not Linux).

    Raises:
        ValueError: ``max_latency_us`` is not an integer in [0, 2**31).
    """
    value = max_latency_us
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise ValueError(f"max_latency_us: expected an integer number of microseconds in [0, 2**31), got "
                         f"{max_latency_us!r}")
    try:
        fd = os.open(device, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as exc:
        print(f"[walk_mpc] CPU latency request of {max_latency_us} us not held: {device}: {exc.strerror} "
              "(needs root or write access to it)", file=sys.stderr, flush=True)
        yield False
        return
    try:
        os.write(fd, struct.pack("=i", max_latency_us))
        yield True
    finally:
        os.close(fd)
