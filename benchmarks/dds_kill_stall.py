"""How long a publisher's ``publish()`` blocks when a subscriber process is SIGKILLed (issue 17; README,
"When a node dies": "A killed peer stalls the survivors' publishers").

No walk_mpc code runs here: rclpy and the middleware alone. A publisher (this process, at SCHED_FIFO
``--priority`` when permitted) sends a ``std_msgs/Float64MultiArray`` of 300 doubles every 10 ms, as the sim
sends SensorState; ``--subscribers`` processes subscribe; every ``--kill-every`` seconds one of them, at
random, is killed with ``--signal`` and (unless ``--no-restart``) started again. Printed: the number of
kills, the largest ``publish()`` call and tick gap, the calls longer than 5 ms (time into the run,
duration), and the same figures as a baseline for the ticks before the first kill.

    bash -c 'source tools/env.sh && source install/setup.bash && \\
        ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST python -P benchmarks/dds_kill_stall.py --duration 40'

With walk_mpc's Fast DDS profile (what the graph's nodes run with): prefix the command with
``FASTDDS_DEFAULT_PROFILES_FILE=config/fastdds_localhost.xml``.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time

PERIOD = 0.01  # [s] the publisher's period (the sim's hardware period)
SLOW = 0.005  # [s] a publish() call longer than this is listed


def subscriber() -> None:
    """A subscriber process: spins until killed."""
    import rclpy
    from std_msgs.msg import Float64MultiArray

    rclpy.init()
    node = rclpy.create_node(f"stall_subscriber_{os.getpid()}")
    node.create_subscription(Float64MultiArray, "stall_stream", lambda _msg: None, qos())
    rclpy.spin(node)


def qos():
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    reliability = os.environ.get("DDS_KILL_STALL_RELIABILITY", "RELIABLE")
    return QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                      reliability=getattr(ReliabilityPolicy, reliability))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=40.0, help="seconds of publishing")
    parser.add_argument("--subscribers", type=int, default=3)
    parser.add_argument("--kill-every", type=float, default=1.5, help="seconds between kills")
    parser.add_argument("--first-kill", type=float, default=3.0, help="seconds before the first kill")
    parser.add_argument("--signal", default="SIGKILL", choices=["SIGKILL", "SIGINT", "SIGTERM"])
    parser.add_argument("--no-restart", action="store_true", help="do not start a killed subscriber again")
    parser.add_argument("--reliability", default="RELIABLE", choices=["RELIABLE", "BEST_EFFORT"])
    parser.add_argument("--priority", type=int, default=60, help="SCHED_FIFO of the publisher (0: none)")
    parser.add_argument("--subscriber", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ["DDS_KILL_STALL_RELIABILITY"] = args.reliability
    if args.subscriber:
        subscriber()
        return 0

    import rclpy
    from std_msgs.msg import Float64MultiArray

    rclpy.init()
    node = rclpy.create_node("stall_publisher")
    publisher = node.create_publisher(Float64MultiArray, "stall_stream", qos())
    if args.priority > 0:
        try:
            for tid in os.listdir("/proc/self/task"):  # rclpy's and the middleware's threads too
                os.sched_setscheduler(int(tid), os.SCHED_FIFO, os.sched_param(args.priority))
        except (OSError, AttributeError) as exc:
            print(f"SCHED_FIFO {args.priority} not applied ({exc}): normal scheduling")
    msg = Float64MultiArray()
    msg.data = [0.1] * 300
    command = [sys.executable, "-P", os.path.abspath(__file__), "--subscriber"]
    subs = [subprocess.Popen(command) for _ in range(args.subscribers)]
    start = time.monotonic()
    next_kill, kills, k, last = start + args.first_kill, 0, 0, start
    before = {"publish": 0.0, "gap": 0.0}
    after = {"publish": 0.0, "gap": 0.0}
    slow = []
    try:
        while time.monotonic() - start < args.duration:
            k += 1
            delay = start + k * PERIOD - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            now = time.monotonic()
            gap, last = now - last, now
            publisher.publish(msg)
            took = time.monotonic() - now
            figures = after if kills else before
            figures["publish"], figures["gap"] = max(figures["publish"], took), max(figures["gap"], gap)
            if took > SLOW:
                slow.append((round(now - start, 2), round(took * 1e3, 1)))
            if now >= next_kill and subs:
                i = random.randrange(len(subs))
                subs[i].send_signal(getattr(signal, args.signal))
                subs[i].wait()
                if args.no_restart:
                    subs.pop(i)
                else:
                    subs[i] = subprocess.Popen(command)
                kills += 1
                next_kill = now + args.kill_every
    finally:
        for process in subs:
            process.kill()
            process.wait()
        node.destroy_node()
        rclpy.shutdown()
    print(f"{kills} subscribers killed ({args.signal}{', not restarted' if args.no_restart else ''}), "
          f"{args.reliability}, RMW {os.environ.get('RMW_IMPLEMENTATION', 'default')}, discovery range "
          f"{os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE', 'default')}")
    print(f"before the first kill: largest publish() {before['publish'] * 1e3:.2f} ms, "
          f"largest tick gap {before['gap'] * 1e3:.2f} ms")
    print(f"from the first kill:   largest publish() {after['publish'] * 1e3:.2f} ms, "
          f"largest tick gap {after['gap'] * 1e3:.2f} ms (the kill's own wait() included)")
    print(f"publish() calls over {SLOW * 1e3:.0f} ms: {len(slow)} [(s into the run, ms)]: {slow}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
