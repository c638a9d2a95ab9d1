"""The walk_behavior node over real DDS: Walk action outcomes, feedback, queue_steps, aborts from the graph.

One node process (feet not measured) serves the scenarios in order; the test process streams SensorState
(stamps 10 ms apart, faster than real time: the node's time is the stamps) and is the action client.
A second process, in its own namespace, measures the feet of Talos by forward kinematics.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time

import pytest
from ros_helpers import matched, wait_until

from walk_mpc.core.walk.behavior import SUBSTATE_FLAGS, WalkErrorCode, WalkFlags
from walk_mpc.core.walk.step import Foot, Step

pytestmark = pytest.mark.ros

NS = 1_000_000_000
SAMPLE_PERIOD_NS = 10_000_000  # stamps advance 10 ms per sample
PACE = 0.003  # [s] wall time between samples: about 3x faster than real time
SENSOR_TIMEOUT = 1.0  # [s] steady clock; above any scheduling hiccup of a loaded machine (0.5 s stalls seen)
# The behavior alone on synthetic samples (no robot moves, no contact forces): landings not checked.
NODE_ARGS = ("--ros-args", "--log-level", "walk_behavior:=debug", "-p", "measure_feet:=false",
             "-p", f"sensor_timeout:={SENSOR_TIMEOUT}", "-p", "landings.enabled:=false")

SWAYING = WalkFlags.WALK_SUBSTATE_SWAYING
STEPPING = WalkFlags.WALK_SUBSTATE_STEPPING
CATCHING = WalkFlags.WALK_SUBSTATE_CATCHING


def step_k(k: int, length: float = 0.1, duration: float = 0.8, half_width: float = 0.085) -> Step:
    """Step k of a straight walk from the default stance: odd indices left, even right."""
    left = k % 2 == 1
    return Step(k, Foot.LEFT if left else Foot.RIGHT, duration,
                (k * length, half_width if left else -half_width, 0.0))


def straight(first: int, last: int, **kwargs) -> list[Step]:
    return [step_k(k, **kwargs) for k in range(first, last + 1)]


def substates(feedback) -> list[WalkFlags]:
    """Substate of each feedback, consecutive repeats merged."""
    out = []
    for fb in feedback:
        substate = WalkFlags(fb.walk.status_flags) & SUBSTATE_FLAGS
        if not out or out[-1] != substate:
            out.append(substate)
    return out


# ---------------------------------------------------------------------------------------------------
# Test-process ROS side: a client node spun in a background thread, and a SensorState stream
# ---------------------------------------------------------------------------------------------------


class SensorStream:
    """Publishes SensorState samples (stamps 10 ms apart, ``PACE`` s of wall time apart) from a thread."""

    def __init__(self, publisher, sample=None, t0_ns: int = 1000 * NS) -> None:
        from walk_mpc.msg import SensorState

        self.publisher = publisher
        self.sample = sample if sample is not None else SensorState()
        self.t0_ns = t0_ns
        self.count = 0
        self.every_sample = None  # called with the sample count after each sample (e.g. a teleop's Twists)
        self._running = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            if not self._running.wait(0.05):
                continue
            stamp = self.t0_ns + self.count * SAMPLE_PERIOD_NS
            self.sample.header.stamp.sec, self.sample.header.stamp.nanosec = divmod(stamp, NS)
            self.publisher.publish(self.sample)
            self.count += 1
            if self.every_sample is not None:
                self.every_sample(self.count)
            time.sleep(PACE)  # pacing the stream (the stamps, not this, are the node's time)

    def start(self) -> None:
        self._running.set()

    def pause(self) -> None:
        self._running.clear()

    @contextlib.contextmanager
    def held(self):
        """No sample published inside the block (a few ms: far below the sensor timeout)."""
        self.pause()
        try:
            yield
        finally:
            self.start()

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5.0)


class Client:
    """Action client, service client, topic endpoints, spun by a SingleThreadedExecutor in a thread."""

    def __init__(self, namespace: str = "") -> None:
        import rclpy
        from geometry_msgs.msg import PoseStamped, Twist
        from rclpy.action import ActionClient
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool, Float64MultiArray

        from walk_mpc.action import Walk
        from walk_mpc.msg import FootstepPlan, SensorState, TickTiming, WalkFeedback
        from walk_mpc.srv import QueueSteps

        self.Walk, self.QueueSteps, self.TickTiming, self.Bool = Walk, QueueSteps, TickTiming, Bool
        self.Float64MultiArray, self.Twist, self.PoseStamped = Float64MultiArray, Twist, PoseStamped
        ns = namespace.rstrip("/")
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("walk_behavior_test", context=self.context)
        reliable = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                              reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        latched = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.action_name = f"{ns}/walk"
        self.action = ActionClient(self.node, Walk, self.action_name, feedback_sub_qos_profile=reliable)
        self.queue = self.node.create_client(QueueSteps, f"{ns}/walk/queue_steps")
        self.plans = []
        self.statuses = []
        sub = self.node.create_subscription
        self.plan_sub = sub(FootstepPlan, f"{ns}/walk/plan", self.plans.append, latched)
        self.status_sub = sub(WalkFeedback, f"{ns}/walk/status", self.statuses.append, reliable)
        self.sensor_pub = self.node.create_publisher(SensorState, f"{ns}/sensor_state", reliable)
        self.mpc_pub = self.node.create_publisher(TickTiming, f"{ns}/mpc/timing", reliable)
        self.ik_pub = self.node.create_publisher(TickTiming, f"{ns}/ik/timing", reliable)
        self.fall_pub = self.node.create_publisher(Bool, f"{ns}/sim/fall", latched)
        self.cmd_vel_pub = self.node.create_publisher(Twist, f"{ns}/cmd_vel", reliable)
        self.goal_pose_pub = self.node.create_publisher(PoseStamped, f"{ns}/walk/goal_pose", reliable)
        # transient local as the sim's, but deep enough that a burst of reports all arrive
        deep_latched = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                                  reliability=ReliabilityPolicy.RELIABLE,
                                  durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.deadline_pub = self.node.create_publisher(Float64MultiArray, f"{ns}/sim/deadlines", deep_latched)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        with contextlib.suppress(Exception):
            self.executor.spin()

    def wait_ready(self, process) -> None:
        # the node's own match of walk/status, when its DEBUG log shows it (the module's node)
        debug = "walk_behavior:=debug" in process.args
        wait_until(lambda: (not debug or matched(process, "/walk/status", "subscriber") >= 1)
                   and self.action.server_is_ready() and self.queue.service_is_ready()
                   and self.sensor_pub.get_subscription_count() >= 1
                   and self.fall_pub.get_subscription_count() >= 1
                   and self.deadline_pub.get_subscription_count() >= 1
                   and self.mpc_pub.get_subscription_count() >= 1
                   and self.cmd_vel_pub.get_subscription_count() >= 1
                   and self.ik_pub.get_subscription_count() >= 1, "the node's endpoints", process)

    def wait_status(self, process) -> None:
        """Wait for the next walk/status (the node processed a fresh sample)."""
        count = len(self.statuses)
        wait_until(lambda: len(self.statuses) > count, "a walk/status", process)

    def send(self, steps, plan_complete: bool = True, process=None) -> Goal:
        """Send a goal (Step objects or StepData messages) and wait until the server accepted it."""
        from walk_mpc.msg import StepData
        from walk_mpc.nodes.conversions import step_to_msg

        goal = Goal()
        msg = self.Walk.Goal(steps=[s if isinstance(s, StepData) else step_to_msg(s) for s in steps],
                             plan_complete=plan_complete)
        future = self.action.send_goal_async(
            msg, feedback_callback=lambda m: goal.feedback.append(m.feedback))
        wait_until(future.done, "the goal response", process)
        goal.handle = future.result()
        assert goal.handle.accepted  # the node accepts every goal and reports refusals as results
        goal.result_future = goal.handle.get_result_async()
        return goal

    def queue_steps(self, steps, plan_complete: bool, process=None):
        from walk_mpc.nodes.conversions import step_to_msg

        request = self.QueueSteps.Request(steps=[step_to_msg(s) for s in steps], plan_complete=plan_complete)
        future = self.queue.call_async(request)
        wait_until(future.done, "the queue_steps response", process)
        return future.result()

    def close(self) -> None:
        import rclpy

        # Nothing is destroyed while the spin thread runs (issue 21): stop it, join it, then destroy.
        self.executor.shutdown(timeout_sec=2.0)
        self._thread.join(timeout=5.0)
        if not self._thread.is_alive():
            self.action.destroy()
            self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


class Goal:
    """A sent goal: its handle, its feedback as received, its result future."""

    def __init__(self) -> None:
        self.handle = None
        self.result_future = None
        self.feedback = []

    def wait_feedback(self, condition, what, process=None):
        wait_until(lambda: any(condition(fb) for fb in list(self.feedback)), what, process)

    def outcome(self, process=None, timeout: float = 30.0):
        """(GoalStatus, Walk.Result) once the goal ended."""
        wait_until(self.result_future.done, "the goal result", process, timeout)
        response = self.result_future.result()
        return response.status, response.result


@pytest.fixture(scope="module")
def walk_node(tmp_path_factory):
    from conftest import NodeProcess

    log = tmp_path_factory.mktemp("walk_behavior") / "walk_behavior.log"
    process = NodeProcess([sys.executable, "-P", "-m", "walk_mpc.nodes.walk_behavior", *NODE_ARGS], log)
    yield process
    assert process.stop() == 0, process.output()


@pytest.fixture(scope="module")
def client(walk_node):
    ros = Client()
    ros.wait_ready(walk_node)
    yield ros
    ros.close()


@pytest.fixture(scope="module")
def stream(client, walk_node):
    sensor = SensorStream(client.sensor_pub)
    sensor.start()
    wait_until(lambda: client.plans and client.statuses, "the first plan and status", walk_node)
    yield sensor
    sensor.close()


@pytest.fixture
def standing(client, stream, walk_node):
    """The node in Stand with the stream running, at the start of a scenario."""
    stream.start()
    count = len(client.statuses)
    wait_until(lambda: len(client.statuses) > count and client.statuses[-1].behavior == 0, "Stand", walk_node)
    return client


@pytest.fixture
def goal_status():
    from action_msgs.msg import GoalStatus

    return GoalStatus


# ---------------------------------------------------------------------------------------------------
# Scenarios (one node process, in this order)
# ---------------------------------------------------------------------------------------------------


def test_goal_before_any_sensor_state_aborts_with_sensor_timeout(client, walk_node, goal_status):
    goal = client.send(straight(1, 4), process=walk_node)
    status, result = goal.outcome(walk_node)
    assert status == goal_status.STATUS_ABORTED
    assert result.error_code == WalkErrorCode.SENSOR_TIMEOUT
    assert "no SensorState received" in result.error_msg and "/sensor_state" in result.error_msg
    assert not client.plans  # no time base yet: no plan published


def test_four_step_walk_succeeds_with_ordered_feedback_and_plans(standing, walk_node, stream, goal_status):
    from walk_mpc.tools.send_walk import send_walk

    client = standing
    plans_before = len(client.plans)
    feedback = []
    steps = straight(1, 4)
    outcome = send_walk(client.node, steps, True, feedback.append, result_timeout=30.0)

    assert outcome.succeeded, outcome
    assert (outcome.status, outcome.error_code, outcome.last_completed_step_index) == (
        goal_status.STATUS_SUCCEEDED, WalkErrorCode.NONE, 4)
    assert outcome.offending_step_indices == ()
    # feedback: indices never decrease and reach 4; one substate at a time: SWAYING, STEPPING, CATCHING
    indices = [fb.walk.current_step_index for fb in feedback]
    assert indices == sorted(indices) and indices[0] == 0 and indices[-1] == 4
    assert set(indices) == {0, 1, 2, 3, 4}
    assert substates(feedback) == [SWAYING, STEPPING, CATCHING]
    assert all(fb.walk.next_step_index_needed == 5 for fb in feedback)
    assert all(fb.walk.behavior == 1 for fb in feedback)
    assert all(len(fb.walk.step_queue_saturated) == len(fb.walk.step_saturation) <= 4 for fb in feedback)
    # the support foot is reported in single support with its planned pose: the stance foot of the step
    singles = [fb for fb in feedback if fb.support_foot_index >= 0]
    assert singles
    for fb in singles:
        swinging = fb.walk.current_step_index + 1
        assert fb.support_foot_index == int(step_k(swinging).foot.other)
    # plans: a walking plan with the 4 steps, then Stand; ids increase; stamp on the sensor time grid
    plans = client.plans[plans_before:]
    assert [p.walking for p in plans][-1] is False
    walking = [p for p in plans if p.walking]
    assert walking and [s.step_index for s in walking[0].steps] == [1, 2, 3, 4]
    assert [round(s.position.x, 9) for s in walking[0].steps] == [0.1, 0.2, 0.3, 0.4]
    ids = [p.plan_id for p in client.plans]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    stamp_ns = walking[0].header.stamp.sec * NS + walking[0].header.stamp.nanosec
    offset = (stamp_ns - stream.t0_ns) % SAMPLE_PERIOD_NS
    assert min(offset, SAMPLE_PERIOD_NS - offset) <= 1000  # the instant of a sample, to the microsecond
    final = plans[-1]
    assert (round(final.left_start_position.x, 9), round(final.right_start_position.x, 9)) == (0.3, 0.4)


def test_invalid_foot_index_aborts_with_invalid_step_naming_it(standing, walk_node, goal_status):
    from walk_mpc.nodes.conversions import step_to_msg

    steps = [step_to_msg(s) for s in straight(1, 4)]
    steps[1].foot_index = 7
    goal = standing.send(steps, process=walk_node)
    status, result = goal.outcome(walk_node)
    assert status == goal_status.STATUS_ABORTED
    assert result.error_code == WalkErrorCode.INVALID_STEP
    assert "step 2" in result.error_msg and "foot_index 7" in result.error_msg
    assert list(result.offending_step_indices) == [2]
    assert result.last_completed_step_index == 0
    wait_until(lambda: "refused: INVALID_STEP" in walk_node.output(), "the refusal in the log", walk_node)


def test_same_foot_twice_ends_inconsistent_steps_with_offending_indices(standing, walk_node, goal_status):
    steps = [step_k(1), Step(2, Foot.LEFT, 0.8, (0.2, 0.085, 0.0)), step_k(3), step_k(4)]
    goal = standing.send(steps, process=walk_node)
    status, result = goal.outcome(walk_node)
    assert status == goal_status.STATUS_ABORTED
    assert result.error_code == WalkErrorCode.INCONSISTENT_STEPS
    assert list(result.offending_step_indices) == [1, 2]
    assert "foot 0" in result.error_msg
    assert result.last_completed_step_index == 0  # the walk stops before lifting a foot
    assert any(fb.walk.status_flags & WalkFlags.WALK_ERROR_INCONSISTENT_STEPS for fb in goal.feedback)


def test_cancel_mid_walk_finishes_the_swing_and_ends_canceled(standing, walk_node, goal_status):
    goal = standing.send(straight(1, 10), process=walk_node)
    goal.wait_feedback(lambda fb: fb.walk.current_step_index >= 1, "the first touchdown", walk_node)
    cancel = goal.handle.cancel_goal_async()
    wait_until(cancel.done, "the cancel response", walk_node)
    assert len(cancel.result().goals_canceling) == 1
    status, result = goal.outcome(walk_node)
    assert status == goal_status.STATUS_CANCELED
    assert result.error_code == WalkErrorCode.CANCELED
    assert 1 <= result.last_completed_step_index <= 3  # at most the swinging step after the request
    assert substates(goal.feedback)[-1] == CATCHING
    assert standing.plans[-1].walking is False


def test_new_goal_preempts_the_running_goal_which_ends_preempted(standing, walk_node, goal_status):
    first = standing.send(straight(1, 8), process=walk_node)
    first.wait_feedback(lambda fb: fb.walk.current_step_index >= 1, "the first touchdown", walk_node)
    second = standing.send(straight(1, 10), process=walk_node)  # same committed steps, two more at the end
    status, result = first.outcome(walk_node)
    assert status == goal_status.STATUS_ABORTED
    assert result.error_code == WalkErrorCode.PREEMPTED
    assert result.error_msg == f"preempted by goal {bytes(second.handle.goal_id.uuid).hex()[:8]}"
    assert result.last_completed_step_index >= 1
    status, result = second.outcome(walk_node)
    assert status == goal_status.STATUS_SUCCEEDED, result.error_msg
    assert (result.error_code, result.last_completed_step_index) == (WalkErrorCode.NONE, 10)
    # the walk never stopped in between: the second goal's feedback starts stepping, not swaying
    assert substates(second.feedback) == [STEPPING, CATCHING]


def test_queue_steps_streams_an_open_goal_in_windows_of_four(standing, walk_node, stream, goal_status):
    response = standing.queue_steps(straight(1, 4), False, walk_node)
    assert not response.accepted and "not walking" in response.message

    total = 10
    plan = straight(1, total)
    goal = standing.send(plan[:4], plan_complete=False, process=walk_node)
    sent_for, responses = 4, []
    while not goal.result_future.done():
        needed = goal.feedback[-1].walk.next_step_index_needed if goal.feedback else 0
        if sent_for < needed <= total:
            with stream.held():  # the walk waits for the answer: no race with the next touchdown
                window = plan[max(0, needed - 4):needed]
                responses.append(standing.queue_steps(window, needed == total, walk_node))
            sent_for = needed
        def decided(needed=needed):
            return goal.result_future.done() or (
                goal.feedback and goal.feedback[-1].walk.next_step_index_needed != needed)

        wait_until(decided, "the next decision", walk_node)
    status, result = goal.outcome(walk_node)
    assert status == goal_status.STATUS_SUCCEEDED, result.error_msg
    assert (result.error_code, result.last_completed_step_index) == (WalkErrorCode.NONE, total)
    assert len(responses) == total - 4
    assert all(r.accepted for r in responses), [r.message for r in responses]
    assert [r.next_step_index_needed for r in responses] == list(range(5, total + 1))
    assert "plan ends at step 10" in responses[-1].message
    insufficient = WalkFlags.WALK_WARNING_INSUFFICIENT_STEP_DATA
    assert not any(fb.walk.status_flags & insufficient for fb in goal.feedback)


@pytest.mark.parametrize("source, code", [
    ("mpc", WalkErrorCode.PLANNER_FAILURE),
    ("ik", WalkErrorCode.IK_FAILURE),
    ("fall", WalkErrorCode.FALL_DETECTED),
    ("deadlines", WalkErrorCode.DEADLINES_MISSED),
])
def test_failure_reported_by_the_graph_aborts_the_walk(standing, walk_node, goal_status, source, code):
    goal = standing.send(straight(1, 10), process=walk_node)
    goal.wait_feedback(lambda fb: fb.walk.status_flags & STEPPING, "stepping", walk_node)
    if source == "fall":
        standing.fall_pub.publish(standing.Bool(data=True))
    elif source == "deadlines":  # the sim's totals [missed, measured, share]; a malformed one is logged
        for data in ([1.0], [0.0, 1000.0, 0.0], [0.5, 1050.0, 0.0], [40.0, 1100.0, 0.036]):
            standing.deadline_pub.publish(standing.Float64MultiArray(data=data))
    else:
        timing = standing.TickTiming(component=source, status=3, reason="what failed, in its words")
        (standing.mpc_pub if source == "mpc" else standing.ik_pub).publish(timing)
    status, result = goal.outcome(walk_node)
    assert status == goal_status.STATUS_ABORTED
    assert result.error_code == code
    assert result.last_completed_step_index <= 2
    if source == "fall":
        assert "fall detected" in result.error_msg
        # while fallen, goals are refused at once; a fall cleared allows walking again
        status, result = standing.send(straight(1, 4), process=walk_node).outcome(walk_node)
        assert (status, result.error_code) == (goal_status.STATUS_ABORTED, WalkErrorCode.FALL_DETECTED)
        standing.fall_pub.publish(standing.Bool(data=False))
        for _ in range(100):  # until the node has the cleared fall (no other observable)
            status, result = standing.send(straight(1, 2, length=0.0), process=walk_node).outcome(walk_node)
            if result.error_code != WalkErrorCode.FALL_DETECTED:
                break
        assert (status, result.error_code) == (goal_status.STATUS_SUCCEEDED, WalkErrorCode.NONE)
    elif source == "deadlines":
        assert "40 of the last 100 sensor samples missed their control deadline" in result.error_msg
    else:
        name = "mpc_planner reported PLANNER_ERROR" if source == "mpc" else "ik reported TARGETS_ERROR"
        assert name in result.error_msg, result.error_msg  # the component and the cause, not a bare number
        assert "what failed, in its words" in result.error_msg  # TickTiming.reason


def test_sensor_stream_stopping_aborts_with_sensor_timeout(standing, walk_node, stream, goal_status):
    goal = standing.send(straight(1, 10), process=walk_node)
    goal.wait_feedback(lambda fb: fb.walk.status_flags & STEPPING, "stepping", walk_node)
    stream.pause()
    try:
        status, result = goal.outcome(walk_node)
        assert status == goal_status.STATUS_ABORTED
        assert result.error_code == WalkErrorCode.SENSOR_TIMEOUT
        assert "sensor_timeout" in result.error_msg and "/sensor_state" in result.error_msg
        wait_until(lambda: standing.plans[-1].walking is False, "the Stand plan", walk_node)
        # stale stream: a new goal is refused at once
        status, result = standing.send(straight(1, 4), process=walk_node).outcome(walk_node)
        assert result.error_code == WalkErrorCode.SENSOR_TIMEOUT
    finally:
        stream.start()
    # the stream is back: walking works again
    standing.wait_status(walk_node)
    status, result = standing.send(
        straight(1, 2, length=0.0), process=walk_node).outcome(walk_node)
    assert status == goal_status.STATUS_SUCCEEDED, result.error_msg


def test_sample_with_a_stamp_going_backwards_is_ignored_and_logged(standing, walk_node, goal_status):
    from walk_mpc.msg import SensorState

    old = SensorState()
    old.header.stamp.sec = 1
    standing.sensor_pub.publish(old)
    wait_until(lambda: "rejected: not later" in walk_node.output(), "the warning", walk_node)
    status, result = standing.send(straight(1, 2, length=0.0), process=walk_node).outcome(walk_node)
    assert status == goal_status.STATUS_SUCCEEDED, result.error_msg


def test_rogue_samples_stamped_far_ahead_do_not_wedge_the_time_base(standing, walk_node, goal_status):
    """Issue 16: 50 samples stamped 2147483647 s (joint arrays of the wrong length too) from a rogue publisher
    are rejected; the real stream goes on being the time base and a walk succeeds."""
    from walk_mpc.msg import SensorState

    for k in range(50):
        rogue = SensorState()
        rogue.header.stamp.sec = 2147483647
        if k % 2:
            rogue.joint_names = ["a", "b"]
            rogue.joint_pos = [0.0]
        standing.sensor_pub.publish(rogue)
    # One warning per run of rejected samples: the first one processed names its cause (the stamp, or the
    # joint arrays: a best-effort queue may have dropped the samples before it).
    causes = ("ahead of the steady clock", "SensorState rejected")
    wait_until(lambda: any(cause in walk_node.output() for cause in causes), "the warning", walk_node)
    status, result = standing.send(straight(1, 2, length=0.0), process=walk_node).outcome(walk_node)
    assert status == goal_status.STATUS_SUCCEEDED, result.error_msg


def test_send_walk_cli_prints_feedback_and_the_result(standing, walk_node, start_node):
    cli = start_node("walk_mpc.tools.send_walk", "--forward", "0.2", "--feedback-every", "5")
    assert cli.proc.wait(timeout=60) == 0, cli.output()
    output = cli.output()
    assert "Sending goal: 2 steps" in output  # one step forward, then the feet together
    assert "feedback: WALK SWAYING current 0" in output and "feedback: WALK CATCHING current 2" in output
    assert "last_completed_step_index: 2" in output and "Goal finished with status: SUCCEEDED" in output
    assert "no plan on" not in output  # the feet came from the latched walk/plan


class Teleop:
    """Publishes a Twist every 10 samples of the stream (0.1 s of sensor time, a 10 Hz teleop), in the
    stream's thread: the commands keep pace with the node's time however loaded the machine."""

    def __init__(self, client, stream) -> None:
        self.client, self.stream, self.twist = client, stream, None
        stream.every_sample = self._on_sample

    def _on_sample(self, count: int) -> None:
        twist = self.twist
        if twist is not None and count % 10 == 0:
            msg = self.client.Twist()
            msg.linear.x, msg.linear.y, msg.angular.z = twist
            self.client.cmd_vel_pub.publish(msg)

    def close(self) -> None:
        self.twist = None
        self.stream.every_sample = None


def stand_x(plan) -> float:
    return 0.5 * (plan.left_start_position.x + plan.right_start_position.x)


def test_cmd_vel_walks_from_stand_and_stops_standing_after_the_timeout(standing, walk_node, stream):
    client = standing
    teleop = Teleop(client, stream)
    try:
        before = len(client.plans)
        x0 = stand_x(client.plans[-1])
        start = stream.count
        teleop.twist = (0.2, 0.0, 0.0)
        wait_until(lambda: stream.count > start + 300, "3 s of sensor time", walk_node)
        teleop.twist = None  # the teleop stops: the node stops after velocity.timeout (0.5 s)
        wait_until(lambda: client.plans[-1].walking is False and len(client.plans) > before + 1, "Stand",
                   walk_node, 30.0)
        plans = client.plans[before:]
        assert [p.walking for p in plans][0] and not plans[-1].walking
        walked = stand_x(plans[-1]) - x0
        assert 0.6 <= walked <= 0.6 + 2 * 0.16 + 0.2, walked  # 3 s at 0.2 m/s, 2 committed steps, timeout
        steps = [p for p in plans if p.walking][-1].steps
        assert [s.step_index for s in steps] == list(range(1, len(steps) + 1))
        assert steps[-1].position.x == pytest.approx(steps[-2].position.x, abs=1e-9)  # closing step
        wait_until(lambda: "cmd_vel walk 1 ended NONE" in walk_node.output(), "the log line", walk_node)
    finally:
        teleop.close()


def test_cmd_vel_preempts_a_goal_and_a_goal_preempts_cmd_vel(standing, walk_node, stream, goal_status):
    client = standing
    teleop = Teleop(client, stream)
    try:
        goal = client.send(straight(1, 10), process=walk_node)
        goal.wait_feedback(lambda fb: fb.walk.current_step_index >= 1, "the first touchdown", walk_node)
        teleop.twist = (0.1, 0.0, 0.2)
        status, result = goal.outcome(walk_node)
        assert status == goal_status.STATUS_ABORTED
        assert (result.error_code, result.error_msg) == (WalkErrorCode.PREEMPTED, "preempted by cmd_vel")
        count = len(client.statuses)
        wait_until(lambda: len(client.statuses) > count + 100, "2 s of walking", walk_node)
        assert all(s.behavior == 1 for s in client.statuses[count:])  # no stop between the two walks
        # a goal while the velocity walk runs (the teleop stops for it): it walks after the closing step
        teleop.twist = None
        second = client.send(straight(1, 2, length=0.0), process=walk_node)
        status, result = second.outcome(walk_node, timeout=60.0)
        assert status == goal_status.STATUS_SUCCEEDED, result.error_msg
        wait_until(lambda: "cmd_vel walk 2 ended PREEMPTED after step" in walk_node.output(), "the log line",
                   walk_node)
        assert "preempted by goal" in walk_node.output()
    finally:
        teleop.close()


def test_a_bad_twist_is_rejected_or_clamped_with_a_log_line(standing, walk_node):
    import math

    for twist in ((math.nan, 0.0, 0.0), (1e9, 0.0, 0.0)):
        msg = standing.Twist()
        msg.linear.x, msg.linear.y, msg.angular.z = twist
        standing.cmd_vel_pub.publish(msg)
    wait_until(lambda: "cmd_vel rejected: input 'cmd_vel vx' = nan" in walk_node.output()
               and "clamped to (0.25, 0, 0)" in walk_node.output(), "the log lines", walk_node)
    standing.cmd_vel_pub.publish(standing.Twist())  # zero: the clamped command's walk stops at once
    wait_until(lambda: standing.plans[-1].walking is False and standing.statuses[-1].behavior == 0, "Stand",
               walk_node, 30.0)


def test_a_goal_pose_walks_there_and_stands(standing, walk_node):
    import math

    client = standing
    wait_until(lambda: client.goal_pose_pub.get_subscription_count() >= 1, "the subscription", walk_node)
    start = client.plans[-1]
    x0 = stand_x(start)
    y0 = 0.5 * (start.left_start_position.y + start.right_start_position.y)
    wrong = client.PoseStamped()
    wrong.header.frame_id = "map"
    client.goal_pose_pub.publish(wrong)
    wait_until(lambda: "goal pose rejected: input 'goal pose header.frame_id' = 'map'" in walk_node.output(),
               "the log line", walk_node)
    before = len(client.plans)
    goal = client.PoseStamped()
    goal.header.frame_id = "world"
    goal.pose.position.x, goal.pose.position.y = x0 + 0.3, y0 + 0.1
    goal.pose.orientation.z, goal.pose.orientation.w = math.sin(0.15), math.cos(0.15)  # yaw 0.3 rad
    client.goal_pose_pub.publish(goal)
    wait_until(lambda: len(client.plans) > before + 1 and not client.plans[-1].walking, "Stand at the pose",
               walk_node, 30.0)
    final = client.plans[-1]
    assert stand_x(final) == pytest.approx(x0 + 0.3, abs=1e-6)
    y = 0.5 * (final.left_start_position.y + final.right_start_position.y)
    assert y == pytest.approx(y0 + 0.1, abs=1e-6)
    wait_until(lambda: "goal pose 1 ended NONE" in walk_node.output(), "the log line", walk_node)


def test_node_survived_every_scenario(walk_node):
    assert walk_node.proc.poll() is None, walk_node.output()
    assert "Traceback" not in walk_node.output()


# ---------------------------------------------------------------------------------------------------
# Measured feet (Talos forward kinematics), in a namespace of its own
# ---------------------------------------------------------------------------------------------------


def test_measured_support_foot_is_forward_kinematics_of_the_sensor_state(start_node, goal_status):
    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.msg import SensorState
    from walk_mpc.tools.send_walk import send_walk

    robot = RobotModel()
    q = robot.reference_configuration()
    q[0] += 0.5  # the robot stands half a meter ahead of the configured initial feet
    joints = robot.joint_positions(q)
    sample = SensorState(joint_names=list(joints) + ["unknown_joint"],
                         joint_pos=list(joints.values()) + [0.0], base_estimate_valid=True)
    sample.base_pose.position.x, sample.base_pose.position.y, sample.base_pose.position.z = q[0:3]
    o = sample.base_pose.orientation
    o.x, o.y, o.z, o.w = q[3:7]
    node = start_node("walk_behavior", "--ros-args", "-r", "__ns:=/talos",
                      "-p", f"sensor_timeout:={SENSOR_TIMEOUT}", "-p", "landings.enabled:=false")
    ros = Client("/talos")
    sensor = None
    try:
        ros.wait_ready(node)
        sensor = SensorStream(ros.sensor_pub, sample)
        sensor.start()
        wait_until(lambda: ros.plans, "the first plan", node)
        # the first measurement replaced the configured feet (x = 0) in the Stand plan
        assert ros.plans[-1].left_start_position.x == pytest.approx(0.5, abs=1e-6)
        assert ros.plans[-1].right_start_position.y == pytest.approx(-0.085, abs=1e-4)
        feedback = []
        steps = [Step(1, Foot.LEFT, 0.8, (0.5, 0.085, 0.0)), Step(2, Foot.RIGHT, 0.8, (0.5, -0.085, 0.0))]
        outcome = send_walk(ros.node, steps, True, feedback.append, action_name="/talos/walk",
                            result_timeout=30)
        assert outcome.succeeded, outcome
        singles = [fb for fb in feedback if fb.support_foot_index >= 0]
        assert {fb.support_foot_index for fb in singles} == {0, 1}
        for fb in singles:  # stepping in place: the measured stance foot is where the plan has it
            d, m = fb.support_foot_desired, fb.support_foot_measured
            assert math.dist((d.position.x, d.position.y, d.position.z),
                             (m.position.x, m.position.y, m.position.z)) < 1e-4
            assert abs(m.orientation.w) == pytest.approx(1.0, abs=1e-6)
        assert node.proc.poll() is None and "Traceback" not in node.output()
    finally:
        if sensor is not None:
            sensor.close()
        ros.close()


@pytest.mark.parametrize("override, name", [
    ("control_period:=0.0", "control_period"),
    ("stamps.max_rate:=0.5", "stamps.max_rate"),
    ("stand_follow_distance:=-1.0", "stand_follow_distance"),
    ("behavior.timing.sway_duration:=-1.0", "sway_duration"),
    ("behavior.limits.max_stride:=0.3", "behavior.limits.max_stride"),  # unknown parameter
])
def test_bad_parameter_exits_with_code_2_naming_it(start_node, override, name):
    node = start_node("walk_behavior", "--ros-args", "-p", "measure_feet:=false", "-p", override)
    assert node.proc.wait(timeout=20) == 2, node.output()
    assert "configuration error" in node.output() and name in node.output(), node.output()


def test_node_class_takes_bringup_overrides_and_destroys_cleanly():
    import rclpy
    from rclpy.parameter import Parameter

    from walk_mpc.nodes.walk_behavior import NODE_CLASS, WalkBehaviorNodeParameters

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        overrides = [Parameter("measure_feet", value=False), Parameter("control_period", value=0.01),
                     Parameter("behavior.timing.sway_duration", value=0.4)]
        node = NODE_CLASS(parameter_overrides=overrides, context=context)
        try:
            assert node.get_name() == "walk_behavior"
            assert isinstance(node.params, WalkBehaviorNodeParameters)
            assert node.params.control_period == 0.01
            assert node.params.behavior.timing.sway_duration == 0.4
            assert node.params.robot.leg_frames == ()  # empty-list defaults are readable
        finally:
            node.destroy()
    finally:
        rclpy.try_shutdown(context=context)


def test_in_process_samples_resuming_after_an_outage_reanchor_stand_at_the_measured_feet():
    """Stamps more than sensor_timeout apart: an outage (a restarted simulator put the robot 0.7 m behind).
    Standing, the sample after it re-anchors Stand at the measured feet (a new plan); a walk the steady-clock
    timer has not stopped yet (no executor spins here) ends with SENSOR_TIMEOUT first. A shorter gap
    (dropped samples) changes nothing."""
    import numpy as np
    import rclpy
    from rclpy.parameter import Parameter

    from walk_mpc.core.body.robot import RobotModel
    from walk_mpc.core.walk.behavior import Behavior
    from walk_mpc.msg import SensorState
    from walk_mpc.nodes.walk_behavior import NODE_CLASS

    robot = RobotModel()
    q = robot.reference_configuration()
    joints = robot.joint_positions(q)
    soles = robot.foot_poses(q)
    left_x = soles[robot.left_foot_frame][0][0]

    def sample(ns, offset):
        msg = SensorState(joint_names=list(joints), joint_pos=list(joints.values()), base_estimate_valid=True)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(ns, NS)
        p, o = msg.base_pose.position, msg.base_pose.orientation
        p.x, p.y, p.z = map(float, np.asarray(q[0:3]) + offset)
        o.x, o.y, o.z, o.w = map(float, q[3:7])
        return msg

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = NODE_CLASS(parameter_overrides=[Parameter("sensor_timeout", value=0.25)], context=context)
        plans = []
        node._plan_pub.publish = plans.append
        try:
            ns, here, moved = 1000 * NS, np.zeros(3), np.array([-0.7, 0.1, 0.0])
            node._steady_ns = lambda: ns  # the steady clock runs with the stamps (a real outage takes time)
            for _ in range(10):
                node._on_sensor_state(sample(ns, here))
                ns += SAMPLE_PERIOD_NS
            assert len(plans) == 1 and plans[0].left_start_position.x == pytest.approx(left_x, abs=1e-9)
            ns += 15 * SAMPLE_PERIOD_NS  # 0.15 s of dropped samples: nothing happens
            node._on_sensor_state(sample(ns, here))
            assert len(plans) == 1
            ns += 80 * SAMPLE_PERIOD_NS  # 0.8 s outage
            node._on_sensor_state(sample(ns, moved))
            assert len(plans) == 2 and plans[-1].walking is False
            assert plans[-1].plan_id == plans[0].plan_id + 1
            assert plans[-1].left_start_position.x == pytest.approx(left_x - 0.7, abs=1e-9)
            assert plans[-1].right_start_position.y == pytest.approx(
                soles[robot.right_foot_frame][0][1] + 0.1, abs=1e-9)
            # Walking when the next outage ends: the walk stops (SENSOR_TIMEOUT), then Stand is re-anchored.
            with node._lock:
                start = left_x - 0.7
                steps = [Step(1, Foot.LEFT, 0.8, (start + 0.1, 0.185, 0.0)),
                         Step(2, Foot.RIGHT, 0.8, (start + 0.1, -0.085 + 0.1, 0.0))]
                answer, output = node.supervisor.submit_goal(b"g", steps, True)
                assert answer.accepted
                node._apply(output)
            for _ in range(30):
                ns += SAMPLE_PERIOD_NS
                node._on_sensor_state(sample(ns, moved))
            assert node.behavior.behavior is Behavior.WALK and plans[-1].walking is True
            count = len(plans)
            ns += 50 * SAMPLE_PERIOD_NS
            node._on_sensor_state(sample(ns, here))
            assert node.behavior.behavior is Behavior.STAND
            # stopped and re-anchored on the same sample: one Stand plan, at the measured feet
            assert [p.walking for p in plans[count:]] == [False]
            assert plans[-1].left_start_position.x == pytest.approx(left_x, abs=1e-9)
        finally:
            node.destroy()
    finally:
        rclpy.try_shutdown(context=context)
