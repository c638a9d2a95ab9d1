"""Benchmark: the per-sample cost of the sensor path of every node (SensorState -> SensorSample -> checked).

Every node converts each SensorState message (100 Hz and more, three nodes) with
``walk_mpc.nodes.conversions.sensor_sample_from_msg`` and the core checks the sample with
``walk_mpc.core.sensors.check_sample`` before it touches any state. The message is a Talos SensorState
of ``walk_mpc.core.sim.kinematic.KinematicSim`` (32 joints, base estimate, one IMU, eight contact
sensors) built by ``walk_mpc.nodes.sim.sensor_state_msg``, as the sim node publishes it.

Timed in one run, each call alone (``time.perf_counter_ns``), the parts interleaved call by call so that
machine load hits them alike:

* ``baseline``: the plain ``np.asarray`` of the message's six float64[] arrays (no sample, no check), the
  floor of any conversion;
* ``conversion``: ``sensor_sample_from_msg(msg)``;
* ``check``: ``check_sample(sample)`` of the converted sample;
* ``SensorSample(...)``: the constructor on the simulator's own (writable) arrays, as the simulators call it;
* ``conversion + check``: what a node's callback pays per sample.

Printed: median and p99 of each [us]. For reference, on a loaded 2-core machine, the former implementation
timed in the same process (medians): conversion 51 -> 28 us, check 56 -> 11 us, conversion + check
106 -> 44 us, constructor on the simulator's arrays 31 -> 26 us; baseline 4 us.

    OPENBLAS_NUM_THREADS=1 python -P benchmarks/sensor_conversion.py [--calls 5000]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import time

import numpy as np

from walk_mpc.core.sensors import SensorSample, check_sample
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.nodes.conversions import sensor_sample_from_msg
from walk_mpc.nodes.sim import sensor_state_msg


def baseline(msg) -> tuple:
    """The plain np.asarray of the message arrays."""
    return (np.asarray(msg.joint_pos), np.asarray(msg.joint_vel), np.asarray(msg.motor_pos),
            np.asarray(msg.motor_vel), np.asarray(msg.motor_torque), np.asarray(msg.contact))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000, help="timed calls of each part")
    args = parser.parse_args()
    sim = KinematicSim()
    for _ in range(10):
        sim.step()
    sample = sim.sensor_sample()
    msg = sensor_state_msg(sample, 1_234_567_890_123)
    # The simulator's arrays as it passes them (writable, as computed), for the constructor alone.
    fields = {f.name: getattr(sample, f.name) for f in dataclasses.fields(SensorSample)}
    fields = {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in fields.items()}
    converted = sensor_sample_from_msg(msg)
    check_sample(converted)
    parts = {
        "baseline (np.asarray of the message arrays)": lambda: baseline(msg),
        "conversion (sensor_sample_from_msg)": lambda: sensor_sample_from_msg(msg),
        "check (check_sample)": lambda: check_sample(converted),
        "SensorSample(...) of the simulator's arrays": lambda: SensorSample(**fields),
        "conversion + check": lambda: check_sample(sensor_sample_from_msg(msg)),
    }
    times = {name: [] for name in parts}
    clock = time.perf_counter_ns
    for _ in range(200):  # warm-up
        for call in parts.values():
            call()
    gc.collect()
    for _ in range(args.calls):
        for name, call in parts.items():
            t0 = clock()
            call()
            times[name].append(clock() - t0)
    print(f"Talos SensorState ({len(msg.joint_names)} joints, {len(msg.contact_names)} contacts, "
          f"{len(msg.imu_names)} IMU), {args.calls} calls each [us]:")
    width = max(len(name) for name in parts)
    for name, values in times.items():
        us = np.array(values) / 1e3
        print(f"  {name:<{width}}  median {np.median(us):7.2f}  p99 {np.percentile(us, 99):7.2f}")


if __name__ == "__main__":
    main()
