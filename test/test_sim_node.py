"""The sim node in its own process: periodic SensorState stamps, model joint names, commands move joints."""

from __future__ import annotations

import time

import pytest
from ros_helpers import matched, with_debug_log

pytestmark = pytest.mark.ros

PERIOD_NS = 10_000_000  # default hardware period [ns]


class Probe:
    """A test-process node subscribed to the sim's outputs and publishing its inputs."""

    def __init__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool, Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory

        from walk_mpc.msg import SensorState, TickTiming

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("sim_probe", context=self.context)
        reliable = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000,
                              reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        latched = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.samples, self.falls = [], []
        self.sensor_sub = self.node.create_subscription(SensorState, "sensor_state", self.samples.append,
                                                        reliable)
        self.fall_sub = self.node.create_subscription(Bool, "sim/fall", self.falls.append, latched)
        self.latencies = []
        self.latency_sub = self.node.create_subscription(TickTiming, "sim/latency", self.latencies.append,
                                                         reliable)
        self.deadlines = []
        self.deadline_sub = self.node.create_subscription(Float64MultiArray, "sim/deadlines",
                                                          self.deadlines.append, latched)
        self.trajectory_pub = self.node.create_publisher(JointTrajectory, "joint_trajectory", reliable)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin_until(self, condition, what, process, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not condition():
            if process.proc.poll() is not None:
                pytest.fail(f"sim exited ({process.proc.returncode}) waiting for {what}:\n{process.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"timeout waiting for {what}:\n{process.output()}")
            self.executor.spin_once(timeout_sec=0.05)

    def close(self):
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def probe():
    p = Probe()
    yield p
    p.close()


def stamp_ns(msg):
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def start_sim(start_node, probe, *args):
    sim = start_node("sim", *with_debug_log("sim", ["--ros-args", *args]))
    probe.spin_until(lambda: matched(sim, "/sensor_state", "subscriber") >= 1
                     and probe.sensor_sub.get_publisher_count() >= 1
                     and probe.trajectory_pub.get_subscription_count() >= 1, "the sim's endpoints", sim)
    return sim


def test_sensor_state_stamps_are_exactly_one_period_apart_with_the_model_joints(start_node, probe):
    from walk_mpc.core.body.robot import RobotModel

    sim = start_sim(start_node, probe)
    probe.spin_until(lambda: len(probe.samples) >= 30 and probe.falls, "30 samples and the fall flag", sim)
    stamps = [stamp_ns(m) for m in probe.samples]
    assert all(b - a == PERIOD_NS for a, b in zip(stamps, stamps[1:]))
    joints = RobotModel(RobotModel.Parameters(robot="talos_reduced")).joint_names
    last = probe.samples[-1]
    assert tuple(last.joint_names) == joints and tuple(last.motor_names) == joints
    assert len(last.contact) == 8 and sum(last.contact) > 800.0  # Talos' weight on the soles
    assert last.imu_linear_acc[0].z > 9.8 and last.base_estimate_valid
    assert probe.falls[-1].data is False


def test_joint_trajectory_moves_a_joint_and_unknown_joints_are_rejected(start_node, probe):
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    sim = start_sim(start_node, probe, "-p", "real_time_factor:=2.0")
    probe.spin_until(lambda: len(probe.samples) >= 2, "a first sample", sim)
    name = "arm_left_4_joint"
    index = list(probe.samples[-1].joint_names).index(name)
    q0 = probe.samples[-1].joint_pos[index]

    def command(names, positions):
        msg = JointTrajectory(joint_names=names)
        msg.points = [JointTrajectoryPoint(positions=positions, time_from_start=Duration(nanosec=20_000_000))]
        probe.trajectory_pub.publish(msg)

    command([name, "no_such_joint"], [q0 - 0.4, 0.0])  # rejected as a whole
    command([name], [q0 - 0.4])
    probe.spin_until(lambda: abs(probe.samples[-1].joint_pos[index] - (q0 - 0.4)) < 1e-3,
                     "the joint to move", sim)
    assert sim.proc.poll() is None
    assert "no_such_joint" in sim.output()


def test_commands_stamped_far_from_the_simulated_time_are_rejected_and_a_present_one_acts(start_node, probe):
    """Issue 16: a JointTrajectory stamped 2147483647 s (or long past, whose points would all be past: a jump)
    is rejected with a log line naming the stamp; a command for the present still moves the joint."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    sim = start_sim(start_node, probe)
    probe.spin_until(lambda: len(probe.samples) >= 2, "a first sample", sim)
    name = "arm_left_4_joint"
    index = list(probe.samples[-1].joint_names).index(name)
    q0 = probe.samples[-1].joint_pos[index]

    def command(positions, stamp_ns):
        msg = JointTrajectory(joint_names=[name])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
        msg.points = [JointTrajectoryPoint(positions=positions, time_from_start=Duration(nanosec=20_000_000))]
        probe.trajectory_pub.publish(msg)

    now = stamp_ns(probe.samples[-1])
    command([q0 - 0.4], 2147483647 * 1_000_000_000)
    command([q0 - 0.4], now - 60 * 1_000_000_000)
    probe.spin_until(lambda: sim.output().count("joint_trajectory command rejected") >= 1
                     and "of the simulated time" in sim.output(), "the rejections", sim)
    count = len(probe.samples)
    probe.spin_until(lambda: len(probe.samples) >= count + 20, "20 more samples", sim)
    assert abs(probe.samples[-1].joint_pos[index] - q0) < 1e-6  # neither moved the joint
    command([q0 - 0.2], stamp_ns(probe.samples[-1]))
    probe.spin_until(lambda: abs(probe.samples[-1].joint_pos[index] - (q0 - 0.2)) < 1e-3, "the joint to move",
                     sim)


def test_a_command_stamped_with_a_sample_reports_its_round_trip_once(start_node, probe):
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    sim = start_sim(start_node, probe)
    probe.spin_until(lambda: len(probe.samples) >= 2 and matched(sim, "/sim/latency", "subscriber") >= 1
                     and probe.latency_sub.get_publisher_count() >= 1, "a sample and sim/latency", sim)
    sample = probe.samples[-1]

    def hold(stamp):
        msg = JointTrajectory(joint_names=list(sample.joint_names))
        msg.header.stamp = stamp
        msg.points = [JointTrajectoryPoint(positions=list(sample.joint_pos),
                                           time_from_start=Duration(nanosec=20_000_000))]
        probe.trajectory_pub.publish(msg)

    unknown = type(sample.header.stamp)(sec=1, nanosec=5)  # no sample has this stamp: nothing to measure
    hold(unknown)
    hold(sample.header.stamp)
    hold(sample.header.stamp)  # the second command for the same sample is not measured again
    probe.spin_until(lambda: probe.latencies, "the round trip on sim/latency", sim)
    probe.spin_until(lambda: len(probe.samples) >= 20 + probe.samples.index(sample), "20 more samples", sim)
    assert [stamp_ns(m) for m in probe.latencies] == [stamp_ns(sample)]
    latency = probe.latencies[0]
    assert latency.component == "sensor_to_command"
    assert 0.0 < latency.tick_time < 60.0  # from the sample's publication to the command's arrival [s]


def test_commands_arriving_after_the_next_sample_are_counted_as_missed_deadlines(start_node, probe):
    """Issue 21: the probe answers every other sample only once the next one arrived, which is late for
    sure (the sim published that next sample before); the sim flags those latencies
    (``TickTiming.status``) and counts them on sim/deadlines (missed, measured, share)."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from walk_mpc.nodes.sim import DEADLINE_FIELDS, STATUS_DEADLINE_MISSED

    # a sample every 0.5 s of wall time: an answer sent on receipt is on time but on a stalled machine
    sim = start_sim(start_node, probe, "-p", "real_time_factor:=0.02")
    probe.spin_until(lambda: len(probe.samples) >= 1 and probe.deadlines
                     and matched(sim, "/sim/latency", "subscriber") >= 1
                     and probe.latency_sub.get_publisher_count() >= 1,
                     "a sample, sim/latency and sim/deadlines", sim)
    assert list(probe.deadlines[-1].data)[:3] == [0.0, 0.0, 0.0]  # at start, latched

    def hold(sample):
        msg = JointTrajectory(joint_names=list(sample.joint_names))
        msg.header.stamp = sample.header.stamp
        msg.points = [JointTrajectoryPoint(positions=list(sample.joint_pos),
                                           time_from_start=Duration(nanosec=20_000_000))]
        probe.trajectory_pub.publish(msg)

    late, on_receipt = [], []
    waiting = None  # a sample answered when the next one arrives
    k = len(probe.samples)
    while True:
        probe.spin_until(lambda k=k: len(probe.samples) > k, f"sample {k}", sim)
        sample = probe.samples[k]
        k += 1
        if waiting is not None:
            hold(waiting)
            late.append(stamp_ns(waiting))
            waiting = None
            if len(late) == 4:  # the last answer is a late one
                break
        if len(late) == len(on_receipt):
            hold(sample)
            on_receipt.append(stamp_ns(sample))
        else:
            waiting = sample
    answered = len(late) + len(on_receipt)
    probe.spin_until(lambda: len(probe.latencies) >= answered and probe.deadlines[-1].data[1] >= answered,
                     "the latencies and the report of the last answer", sim)
    # the deadline bit; STATUS_SAMPLE_LATE (a late wake-up of the sim itself) may come on a loaded machine
    status = {stamp_ns(m): m.status & STATUS_DEADLINE_MISSED for m in probe.latencies}
    assert sorted(status) == sorted(late + on_receipt)  # one latency per answered sample
    assert all(status[s] == STATUS_DEADLINE_MISSED for s in late)
    assert all(status[s] in (0, STATUS_DEADLINE_MISSED) for s in on_receipt)
    # answered on receipt with 0.5 s to spare: on time (at least one of them even on a stalled machine)
    assert any(status[s] == 0 for s in on_receipt), status
    missed = sum(1 for m in probe.latencies if m.status & STATUS_DEADLINE_MISSED)
    # the last answer was late (reported at once): its report counts every answer
    assert list(probe.deadlines[-1].data)[:3] == [float(missed), float(answered), missed / answered]
    assert probe.deadlines[-1].layout.dim[0].label == DEADLINE_FIELDS


def test_wakeup_lateness_is_the_delay_after_the_last_due_time():
    from walk_mpc.nodes.sim import wakeup_lateness_ns

    assert wakeup_lateness_ns(PERIOD_NS, PERIOD_NS) == 0  # on time: the next call a whole period away
    assert wakeup_lateness_ns(PERIOD_NS - 2_500_000, PERIOD_NS) == 2_500_000
    # more than a period late: rcl skipped the periods missed, the delay is after the last one
    assert wakeup_lateness_ns(PERIOD_NS - 400, PERIOD_NS) == 400
    assert wakeup_lateness_ns(None, PERIOD_NS) == 0  # a timer that cannot tell


def test_a_stalled_sim_counts_its_late_wakeups_and_flags_the_samples_sent_late(start_node, probe):
    """A sim process stopped for 1.5 periods just after a sample (as a stalled machine would) wakes half a
    period late: the sim counts it on sim/deadlines (late_wakeups, max_wakeup_lateness) and flags the sample
    it then sent (STATUS_SAMPLE_LATE) when a command answers it."""
    import os
    import signal

    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from walk_mpc.nodes.sim import STATUS_SAMPLE_LATE

    sim = start_sim(start_node, probe, "-p", "real_time_factor:=0.05")  # a sample every 0.2 s
    probe.spin_until(lambda: len(probe.samples) >= 2 and probe.deadlines
                     and probe.latency_sub.get_publisher_count() >= 1, "samples and sim/deadlines", sim)

    def answer(sample):
        msg = JointTrajectory(joint_names=list(sample.joint_names))
        msg.header.stamp = sample.header.stamp
        msg.points = [JointTrajectoryPoint(positions=list(sample.joint_pos))]
        probe.trajectory_pub.publish(msg)

    before = int(probe.deadlines[-1].data[3])
    stopped = len(probe.samples) + 1
    probe.spin_until(lambda: len(probe.samples) >= stopped, "a new sample", sim)
    os.kill(sim.proc.pid, signal.SIGSTOP)  # just after a sample: the next one is due a period later
    try:
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:  # the stop's length, not a synchronisation
            probe.executor.spin_once(timeout_sec=0.05)
    finally:
        os.kill(sim.proc.pid, signal.SIGCONT)
    probe.spin_until(lambda: len(probe.samples) > stopped, "the sample sent after the stop", sim)
    late_sample = probe.samples[stopped]
    answer(late_sample)
    probe.spin_until(lambda: any(stamp_ns(m) == stamp_ns(late_sample) for m in probe.latencies),
                     "the latency of the late sample", sim)
    status = {stamp_ns(m): m.status for m in probe.latencies}
    assert status[stamp_ns(late_sample)] & STATUS_SAMPLE_LATE
    probe.spin_until(lambda: probe.deadlines[-1].data[3] > before, "the late wake-up's report", sim)
    assert probe.deadlines[-1].data[4] >= 0.05  # about half the 0.2 s period late [s]


def test_missing_mujoco_backend_exits_with_a_configuration_error(start_node, probe):
    import importlib.util

    if importlib.util.find_spec("walk_mpc.core.sim.mujoco") is not None:
        pytest.skip("the MuJoCo backend exists")
    sim = start_node("sim", "--ros-args", "-p", "backend:=mujoco")
    assert sim.proc.wait(timeout=30) == 2
    assert "mujoco" in sim.output()


def test_wheeled_robot_publishes_the_wheel_motors(start_node, probe):
    sim = start_sim(start_node, probe, "-p", "robot_type:=wheeled")
    probe.spin_until(lambda: len(probe.samples) >= 5, "5 samples", sim)
    last = probe.samples[-1]
    assert {"left_wheel", "right_wheel"} <= set(last.motor_names)
    assert len(last.motor_torque) == len(last.motor_names) == len(last.motor_vel)
    stamps = [stamp_ns(m) for m in probe.samples]
    assert all(b - a == 1_000_000 for a, b in zip(stamps, stamps[1:]))


def _scheduling(pid: int) -> set:
    """(policy, priority) of every thread of process ``pid``."""
    import os

    threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    return {(os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority) for tid in threads}


def test_realtime_priority_puts_every_thread_under_sched_fifo_or_warns(start_node):
    import os

    from ros_helpers import wait_until

    sim = start_node("sim", "--ros-args", "-p", "realtime_priority:=45")
    wait_until(lambda: "SCHED_FIFO priority 45" in sim.output() or "not applied" in sim.output(),
               "the scheduling report", sim)
    if "not applied" in sim.output():  # no permission here: normal scheduling, the node runs on
        assert "realtime_priority 45 not applied" in sim.output()
        assert _scheduling(sim.proc.pid) == {(os.SCHED_OTHER, 0)}
    else:
        assert _scheduling(sim.proc.pid) == {(os.SCHED_FIFO, 45)}
    assert sim.proc.poll() is None


@pytest.mark.parametrize("value", ["150", "-1", "2.5"])
def test_realtime_priority_out_of_range_is_a_configuration_error(start_node, value):
    sim = start_node("sim", "--ros-args", "-p", f"realtime_priority:={value}")
    assert sim.proc.wait(timeout=30) == 2, sim.output()
    assert "realtime_priority" in sim.output() and "0..99" in sim.output()


def test_phase_wait_reaches_the_next_instant_at_the_offset():
    from walk_mpc.nodes.sim import phase_wait_ns

    assert phase_wait_ns(1_000_000_000, PERIOD_NS, 2_500_000) == 2_500_000
    assert phase_wait_ns(1_002_500_000, PERIOD_NS, 2_500_000) == 0
    assert phase_wait_ns(1_003_000_000, PERIOD_NS, 2_500_000) == 9_500_000
    assert phase_wait_ns(1_009_999_999, PERIOD_NS, 0) == 1


@pytest.mark.parametrize("value", [-0.5, float("nan"), float("inf")])
def test_phase_offset_other_than_minus_one_or_a_time_is_rejected(value):
    from walk_mpc.core.errors import ParameterError
    from walk_mpc.nodes.sim import SimNodeParameters

    with pytest.raises(ParameterError, match="phase_offset"):
        SimNodeParameters(phase_offset=value)


def test_phase_offset_of_a_period_or_more_is_a_configuration_error(start_node):
    sim = start_node("sim", "--ros-args", "-p", "phase_offset:=0.01")
    assert sim.proc.wait(timeout=30) == 2, sim.output()
    assert "phase_offset" in sim.output() and "[0, 0.01) s" in sim.output()


def test_a_sim_with_a_phase_offset_publishes_periodic_samples(start_node, probe):
    sim = start_sim(start_node, probe, "-p", "phase_offset:=0.0025")
    probe.spin_until(lambda: len(probe.samples) >= 5, "five samples", sim)
    stamps = [stamp_ns(m) for m in probe.samples[:5]]
    assert all(b - a == PERIOD_NS for a, b in zip(stamps, stamps[1:]))


def test_a_silence_of_the_commands_is_warned_once_and_their_return_logged(start_node, probe):
    """The sim warns when the accepted commands stop for ``command_silence_report`` of simulated time (holding
    the last commanded positions, as a driver's command timeout would), once, and logs when they come again
    and after how long (``benchmarks/restart.py`` reads that line: the loop back after an ik restart)."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    sim = start_sim(start_node, probe, "-p", "command_silence_report:=0.05")
    probe.spin_until(lambda: len(probe.samples) >= 2, "a first sample", sim)
    name = "arm_left_4_joint"
    q0 = probe.samples[-1].joint_pos[list(probe.samples[-1].joint_names).index(name)]

    def command():
        msg = JointTrajectory(joint_names=[name])
        msg.points = [JointTrajectoryPoint(positions=[q0], time_from_start=Duration(nanosec=20_000_000))]
        probe.trajectory_pub.publish(msg)

    assert "no joint command" not in sim.output()  # none yet: nothing was ever commanded
    command()
    probe.spin_until(lambda: "no joint command for 0.05 s" in sim.output(), "the silence warning", sim)
    count = len(probe.samples)
    probe.spin_until(lambda: len(probe.samples) >= count + 20, "20 more samples", sim)
    assert sim.output().count("no joint command for") == 1  # once per silence
    command()
    probe.spin_until(lambda: "joint commands again at t = " in sim.output(), "the commands' return", sim)
    assert "s without" in sim.output().split("joint commands again at t = ", 1)[1].splitlines()[0]
