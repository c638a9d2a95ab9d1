"""Issue 17 on the kinematic plant: a stage of the loop dies mid-walk, the robot is stopped safely, restarted
stages walk again.

The graph's composition (:class:`ClosedLoopWalk`: the planner stage and the whole-body stage on the plant's
samples) driven sample by sample, where a stage can fall silent (a SIGKILLed node: nothing in, nothing out)
and be replaced by a fresh one fed the latched plan (a restarted node). Measured on the graph before:
killing the mpc_planner froze the robot mid-swing (the ik held its last command) and a walk after the
planner's restart fell; killing the ik left the planner integrating a CoM that diverged to 1e32 m, and the
restarted ik failed on every tick.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from walk_mpc.core.body.robot import RobotModel, yaw_of
from walk_mpc.core.control.closed_loop import ORIGIN_NS, ClosedLoopWalk
from walk_mpc.core.control.planner_stage import PlannerStage, PlannerTick
from walk_mpc.core.control.types import NS_PER_S, JointCommand, PlannerStatus, WalkPlan, WholeBodyStatus
from walk_mpc.core.control.whole_body_stage import WholeBodyStage, WholeBodyStageParameters
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.sim.backend import GRAVITY, JointTrajectoryCommand
from walk_mpc.core.sim.kinematic import CORNERS, FEET, KinematicSim
from walk_mpc.core.walk import footsteps
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

TIMING = GaitTiming(sway_duration=0.6, double_support_duration=0.3, catch_duration=0.6)
STEP_DURATION = 1.1  # [s] 0.8 s single support + 0.3 s double support
LANDING_TOLERANCE = 0.01  # [m]
OK, SAFE_STOP = WholeBodyStatus.OK, WholeBodyStatus.SAFE_STOP


def feet_of(robot: RobotModel, q) -> dict[Foot, FootPose]:
    """Sole poses of configuration ``q``."""
    poses = robot.foot_poses(q)
    return {foot: FootPose(tuple(float(v) for v in poses[frame][0]), yaw_of(poses[frame][1]))
            for foot, frame in ((Foot.LEFT, robot.left_foot_frame), (Foot.RIGHT, robot.right_foot_frame))}


def six_steps(robot: RobotModel) -> Timeline:
    """Issue 17's walk: 1 m forward in steps of 0.2 m from the plant's feet at rest (6 steps)."""
    feet = feet_of(robot, KinematicSim(KinematicSim.Parameters(), robot=robot).state.q)
    left, right = feet[Foot.LEFT], feet[Foot.RIGHT]
    width = left.position[1] - right.position[1]
    steps = footsteps.walk_forward(left, right, 1.0, step_length=0.2, width=width, duration=STEP_DURATION)
    assert len(steps) == 6
    return Timeline(left, right, steps, TIMING)


class Loop:
    """:class:`ClosedLoopWalk`'s composition, one hardware period per :meth:`step` (same stamps and order),
    with stages that can fall silent and be restarted."""

    def __init__(self, robot: RobotModel, timeline: Timeline) -> None:
        self.robot = robot
        self.sim = KinematicSim(KinematicSim.Parameters(), robot=robot)
        self.walk = ClosedLoopWalk(robot, self.sim, timeline)  # the loop's stages, parameters and plan 1
        self.planner: PlannerStage = self.walk.planner_stage
        self.whole_body: WholeBodyStage = self.walk.whole_body
        self.planner_alive = self.whole_body_alive = True
        self.commands: list[tuple[float, JointCommand]] = []  # (time [s], command) applied
        self.ticks: list[tuple[float, PlannerTick]] = []  # (time [s], planner tick)
        self.contacts: list[tuple[float, tuple]] = []  # (time [s], in_contact) of every sample
        self.plan_id = 1

    @property
    def time(self) -> float:
        return self.sim.time

    @property
    def stamp_ns(self) -> int:
        return self.walk.stamp_ns(self.sim.state.step_count)

    def step(self) -> None:
        state = self.sim.step()
        stamp = self.walk.stamp_ns(state.step_count)
        sample = self.sim.sensor_sample()
        self.contacts.append((self.time, tuple(state.in_contact)))
        if self.whole_body_alive:
            self._apply(self.whole_body.observe(stamp, sample))
        if not self.planner_alive:
            return
        tick = self.planner.observe(stamp, sample)
        if tick.ticked:
            self.ticks.append((self.time, tick))
        if self.whole_body_alive:
            if tick.reference is not None:
                self._apply(self.whole_body.on_reference(tick.reference))
            if tick.ahead is not None:
                self.whole_body.on_reference_ahead(tick.ahead)

    def run_until(self, t: float) -> None:
        while self.time < t - 1e-9:
            self.step()

    def send_plan(self, timeline: Timeline, walking: bool) -> WalkPlan:
        """A new plan stamped now (as the walk behavior stamps its plans) to the stages that run."""
        self.plan_id += 1
        plan = WalkPlan(self.plan_id, walking, self.stamp_ns, timeline)
        for alive, stage in ((self.planner_alive, self.planner), (self.whole_body_alive, self.whole_body)):
            if alive:
                stage.set_plan(plan)
        return plan

    def restart(self, plan: WalkPlan, planner: bool = False, whole_body: bool = False) -> None:
        """Fresh stages (same parameters) fed the latched ``plan``, running from the next sample on."""
        if planner:
            self.planner = PlannerStage(self.robot, self.planner.params)
            self.planner.set_plan(plan)
            self.planner_alive = True
        if whole_body:
            self.whole_body = WholeBodyStage(self.robot, self.whole_body.params)
            self.whole_body.set_plan(plan)
            self.whole_body_alive = True

    def feet(self) -> dict[Foot, FootPose]:
        return feet_of(self.robot, np.asarray(self.sim.state.q))

    def forces(self) -> tuple[float, float]:
        """Total normal force [N] of each sole's contact sensors in the latest sample."""
        sample = self.sim.sensor_sample()
        return tuple(float(sum(f for name, f in zip(sample.contact_names, sample.contact)
                               if name.startswith(prefix))) for prefix in FEET)

    def com_inside_support(self) -> float:
        """Distance [m] of the CoM inside the convex hull of the soles in contact (< 0: outside)."""
        corners = self.sim.corner_positions()
        points = np.array([corners[f"{FEET[i]}_{c}"][:2] for i in (0, 1) if self.sim.state.in_contact[i]
                           for c in CORNERS])
        com = np.asarray(self.sim.state.com)[:2]
        return -max(float(eq[:2] @ com + eq[2]) for eq in ConvexHull(points).equations)

    def touchdowns(self, foot: Foot, after: float) -> list[float]:
        """Times [s] at which ``foot`` touched the ground after ``after``."""
        return [t for (t, now), (_, before) in zip(self.contacts[1:], self.contacts) if t > after
                and now[int(foot)] and not before[int(foot)]]

    def _apply(self, command) -> None:
        if command is None:
            return
        self.commands.append((self.time, command))
        self.sim.set_trajectory(JointTrajectoryCommand(
            self.whole_body.joint_names, command.times, command.positions,
            stamp=(command.stamp_ns - ORIGIN_NS) / NS_PER_S, velocities=command.velocities))


def assert_standing_safely(loop: Loop) -> None:
    """Both feet loaded, the CoM inside their support polygon, near the middle of the soles."""
    assert loop.sim.state.in_contact == (True, True)
    weight = loop.robot.mass * GRAVITY
    assert min(loop.forces()) > 0.3 * weight  # both soles carry the robot
    assert loop.com_inside_support() > 0.04
    feet = loop.feet()
    middle = 0.5 * (np.asarray(feet[Foot.LEFT].position) + np.asarray(feet[Foot.RIGHT].position))
    assert np.linalg.norm(np.asarray(loop.sim.state.com)[:2] - middle[:2]) < 0.01


@pytest.fixture(scope="module")
def walk(talos):
    return six_steps(talos)


def phase_of_step_2(timeline: Timeline, kind: PhaseKind):
    return next(p for p in timeline.phases if p.step_index == 2 and p.kind is kind)


# ---------------------------------------------------------------------------------------------- safe stop
CUTS = {  # when the planner dies, in step 2 (the right foot swings over [1.7, 2.5) s)
    "at lift-off": (PhaseKind.SINGLE, 0.02),  # the last command has the foot < 5 mm up: put back down
    "just after lift-off": (PhaseKind.SINGLE, 0.15),
    "mid single support": (PhaseKind.SINGLE, 0.4),
    "just before touchdown": (PhaseKind.SINGLE, 0.72),
    "in double support": (PhaseKind.DOUBLE, 0.1),
}


@pytest.mark.parametrize("cut", list(CUTS))
def test_a_planner_dying_mid_walk_lets_the_swing_foot_land_on_its_step_and_the_robot_stand(talos, walk, cut):
    kind, after = CUTS[cut]
    phase = phase_of_step_2(walk, kind)
    step = next(s for s in walk.steps if s.step_index == 2)
    loop = Loop(talos, walk)
    loop.run_until(phase.t_start + after)
    before = loop.feet()
    loop.planner_alive = False  # SIGKILL: no reference from now on
    stopped_at = len(loop.commands)
    loop.run_until(phase.t_start + after + 2.5)
    statuses = [c.status for _, c in loop.commands[stopped_at:]]
    assert set(statuses) == {OK, SAFE_STOP}  # no hold, no IK failure
    assert SAFE_STOP in statuses and statuses[-1] == OK
    stops = statuses.count(SAFE_STOP)
    assert statuses[statuses.index(SAFE_STOP):][:stops] == [SAFE_STOP] * stops  # one stop, then standing
    wb = loop.whole_body
    assert wb.safe_stop is None and wb.stopped_plan_id == 1 and not wb.walking and wb.safe_stops == 1
    feet = loop.feet()
    if kind is PhaseKind.SINGLE and cut != "at lift-off":  # the swing foot landed on its step, about on time,
        # the stance foot stayed
        assert np.linalg.norm(np.subtract(feet[Foot.RIGHT].position, step.position)) < LANDING_TOLERANCE
        assert abs(math.remainder(feet[Foot.RIGHT].yaw - step.yaw, 2 * math.pi)) < 0.01
        assert [abs(t - phase.t_end) < 0.1 for t in loop.touchdowns(Foot.RIGHT, phase.t_start)] == [True]
        assert np.linalg.norm(np.subtract(feet[Foot.LEFT].position, before[Foot.LEFT].position)) < 1e-3
    else:  # no step in progress (or its foot not yet off the ground): the feet stayed
        for foot in Foot:
            assert np.linalg.norm(np.subtract(feet[foot].position, before[foot].position)) < 1e-3
    assert_standing_safely(loop)
    assert all(len(loop.touchdowns(foot, phase.t_end + 0.05)) == 0 for foot in Foot)  # no further step


# ---------------------------------------------------------------------------------------------- recovery
def two_steps_from(feet: dict[Foot, FootPose]) -> Timeline:
    """A 2-step walk from ``feet``: the rear foot 0.2 m ahead of the front one, the other beside it."""
    rear = min(Foot, key=lambda foot: feet[foot].position[0])
    front = feet[rear.other].position
    x = front[0] + 0.2
    steps = [Step(1, rear, STEP_DURATION, (x, feet[rear].position[1], 0.0), swing_height=0.05),
             Step(2, rear.other, STEP_DURATION, (x, front[1], 0.0), swing_height=0.05)]
    return Timeline(feet[Foot.LEFT], feet[Foot.RIGHT], steps, TIMING)


def stand_plan(loop: Loop, timeline: Timeline) -> Timeline:
    """What the walk behavior plans when it stops a walk at once now (WalkSupervisor._stop_stance): Stand at
    the measured soles, a sole in the air put down below itself at its planned height."""
    phase = timeline.phase_at(loop.time)
    feet = loop.feet()
    for foot in Foot:
        if not loop.sim.state.in_contact[int(foot)]:
            x, y, _ = feet[foot].position
            feet[foot] = FootPose((x, y, phase.foot(foot).position[2]), feet[foot].yaw)
    return Timeline(feet[Foot.LEFT], feet[Foot.RIGHT], (), TIMING)


def walks_again(loop: Loop, restart_time: float) -> None:
    """Within 1 s of samples the restarted loop runs (reference-driven ticks, OK), then a 2-step walk from
    the feet where the robot stands succeeds."""
    loop.run_until(restart_time + 1.0)
    recovered = [(t, c) for t, c in loop.commands if t > restart_time]
    assert all(c.status == OK for _, c in recovered)
    ticking = [t for t, c in recovered if c.source == "reference"]
    assert ticking and ticking[0] - restart_time < 1.0 and recovered[-1][1].source == "reference"
    assert_standing_safely(loop)
    start = loop.time
    feet = loop.feet()
    timeline = two_steps_from(feet)
    loop.send_plan(Timeline(feet[Foot.LEFT], feet[Foot.RIGHT], timeline.steps, TIMING), walking=True)
    loop.run_until(start + timeline.t_end + 1.0)
    walked = [c for t, c in loop.commands if t > start]
    assert all(c.status == OK for c in walked) and loop.whole_body.plan_id == loop.plan_id
    assert all(t.status is PlannerStatus.OK for time, t in loop.ticks if time > start)
    landed = loop.feet()
    for step in timeline.steps:
        assert np.linalg.norm(np.subtract(landed[step.foot].position, step.position)) < LANDING_TOLERANCE
        assert len(loop.touchdowns(step.foot, start)) == 1  # one lift-off and one touchdown per step
    assert not loop.sim.state.fallen
    assert_standing_safely(loop)


def test_the_safe_stop_starts_safe_stop_timeout_after_the_last_reference_not_reference_timeout(talos, walk):
    """The graph's ik waits reference_timeout (0.5 s) for references before ticking on the samples; during a
    walk the robot executes the last command, frozen, until the safe stop: on MuJoCo, 0.5 s of it tipped
    Talos over in 5 of 9 kills of the planner mid-walk. The safe stop starts after safe_stop_timeout."""
    loop = Loop(talos, walk)
    params = dataclasses.replace(loop.whole_body.params, reference_timeout=0.5, safe_stop_timeout=0.1)
    loop.whole_body = loop.walk.whole_body = WholeBodyStage(talos, params)
    loop.whole_body.set_plan(loop.walk.plan)
    phase = phase_of_step_2(walk, PhaseKind.SINGLE)
    loop.run_until(phase.t_start + 0.15)
    last_reference = max(t for t, c in loop.commands if c.source == "reference")
    loop.planner_alive = False
    loop.run_until(loop.time + 1.0)
    stops = [t for t, c in loop.commands if c.status == SAFE_STOP]
    assert stops and 0.1 - 1e-6 <= stops[0] - last_reference <= 0.1 + 0.02 + 1e-6, stops[0] - last_reference
    assert "no CoM reference for 0.1 s" in next(c for _, c in loop.commands if c.status == SAFE_STOP).reason
    assert all(c.status in (OK, SAFE_STOP) for _, c in loop.commands)  # no hold before it


def test_safe_stop_timeout_is_at_most_reference_timeout():
    with pytest.raises(ParameterError, match="safe_stop_timeout.*reference_timeout"):
        WholeBodyStageParameters(reference_timeout=0.2, safe_stop_timeout=0.3)


@pytest.mark.parametrize("restarted", ["planner", "both stages"])
@pytest.mark.parametrize("cut", [0.15, 0.4])
def test_after_a_safe_stop_restarted_stages_run_within_a_second_and_a_new_walk_succeeds(talos, walk, cut,
                                                                                        restarted):
    """The planner dies ``cut`` after the lift-off of step 2; the walk behavior stops the walk link_timeout
    (0.3 s) later, the foot still in the air; the ik lands it (safe stop). Restarted stages fed that Stand
    plan stand where the robot is and walk again."""
    single = phase_of_step_2(walk, PhaseKind.SINGLE)
    loop = Loop(talos, walk)
    cut = single.t_start + cut
    loop.run_until(cut)
    loop.planner_alive = False
    loop.run_until(cut + 0.3)
    assert not loop.sim.state.in_contact[int(Foot.RIGHT)]
    stand = loop.send_plan(stand_plan(loop, walk), walking=False)  # the walk behavior's stop
    loop.run_until(cut + 2.5)  # the robot stands after its safe stop: the right foot ahead
    assert loop.whole_body.safe_stop is None and loop.whole_body.plan_id == stand.plan_id
    assert loop.feet()[Foot.RIGHT].position[0] - loop.feet()[Foot.LEFT].position[0] > 0.15
    loop.restart(stand, planner=True, whole_body=restarted == "both stages")
    walks_again(loop, loop.time)


def test_an_ik_dying_leaves_the_planner_bounded_and_a_restarted_ik_walks_again(talos, walk):
    double = phase_of_step_2(walk, PhaseKind.DOUBLE)
    loop = Loop(talos, walk)
    cut = double.t_start + 0.1
    loop.run_until(cut)
    loop.whole_body_alive = False  # SIGKILL: the robot holds the end of the last trajectory, one foot ahead
    loop.run_until(cut + 0.3)
    stand = loop.send_plan(stand_plan(loop, walk), walking=False)  # the walk behavior's stop
    loop.run_until(cut + 5.0)
    frozen = np.asarray(loop.sim.state.com)[:2]
    references = [t.reference for time, t in loop.ticks if time > cut]
    assert references and all(t.status is PlannerStatus.OK for time, t in loop.ticks if time > cut)
    assert max(np.max(np.linalg.norm(r.com_position[:, :2] - frozen, axis=1)) for r in references) < 0.3
    loop.restart(stand, whole_body=True)
    walks_again(loop, loop.time)


# ---------------------------------------------------------------------------------------------- late plans
def stale_walk(loop: Loop, t_stand: float, missed: float = 2.1, gap: float = 0.06) -> tuple[dict, Timeline]:
    """The graph's desync (a walk_behavior restarted mid-walk, the ik hearing it late under load): at
    ``t_stand`` into the walk a Stand plan at the feet measured then (a foot possibly in the air) reaches the
    planner at once and the whole-body stage ``missed`` s later (it safe-stops meanwhile); ``gap`` s after
    it, a 2-step walk planned from those feet reaches both stages. The feet of the Stand plan and the walk."""
    loop.run_until(t_stand)
    feet = loop.feet()
    loop.plan_id += 1
    stand = WalkPlan(loop.plan_id, False, loop.stamp_ns,
                     Timeline(feet[Foot.LEFT], feet[Foot.RIGHT], [], TIMING))
    loop.planner.set_plan(stand)  # the whole-body stage does not hear it
    loop.run_until(loop.time + missed)
    loop.whole_body.set_plan(stand)
    loop.run_until(loop.time + gap)
    left, right = feet[Foot.LEFT], feet[Foot.RIGHT]
    width = left.position[1] - right.position[1]
    steps = footsteps.walk_forward(left, right, 0.2, step_length=0.2, width=width, duration=STEP_DURATION)
    walk = Timeline(left, right, steps, TIMING)
    loop.send_plan(walk, walking=True)
    return feet, walk


@pytest.mark.parametrize("t_stand", [4.0, 5.0, 6.5])  # early swing of step 4, lift-off of 5, mid-swing of 6
def test_a_walk_planned_on_feet_the_robot_left_neither_fails_the_ik_nor_loses_a_step(talos, walk, t_stand):
    """Measured on the graph: the ik heard a restarted walk_behavior's Stand plan 2 s late (it safe-stopped
    meanwhile, landing the step in progress) and a walk planned from that Stand's feet 60 ms later: the IK
    failed and a step never touched down (LANDING_NOT_MEASURED). Now the stage refuses a walk whose soles are
    not where the robot stands (PLAN_REFUSED, the robot keeps standing) and walks one that is."""
    loop = Loop(talos, walk)
    stale, late = stale_walk(loop, t_stand)
    start, before = loop.time, loop.feet()
    loop.run_until(start + late.t_end + 1.0)
    statuses = {c.status for _, c in loop.commands}
    assert statuses <= {OK, SAFE_STOP, WholeBodyStatus.PLAN_REFUSED}  # never an IK failure, nor a hold
    feet = loop.feet()
    moved = max(np.linalg.norm(np.subtract(before[f].position, stale[f].position)) for f in Foot)
    if moved > 0.05:  # the safe stop landed a step since the Stand was measured: refused
        refused = [c for t, c in loop.commands if c.status == WholeBodyStatus.PLAN_REFUSED]
        assert refused and loop.whole_body.refused_plans == 1 and loop.whole_body.plan_id != loop.plan_id
        assert f"walk plan {loop.plan_id} refused" in refused[0].reason
        assert all(not loop.touchdowns(foot, start) for foot in Foot)  # no step started
        # standing where it was when the plan came (the CoM possibly still on its way to the middle)
        assert loop.sim.state.in_contact == (True, True) and loop.com_inside_support() > 0.04
        # the walk_behavior ends the walk (the ik's status) and stands where the feet are; a walk from there
        stand = Timeline(feet[Foot.LEFT], feet[Foot.RIGHT], (), TIMING)
        loop.send_plan(stand, walking=False)
        walks_again(loop, loop.time)
    else:  # the robot stands where the Stand was measured: the walk is walked, each step lands
        assert statuses <= {OK, SAFE_STOP} and loop.whole_body.plan_id == loop.plan_id
        for step in late.steps:
            assert np.linalg.norm(np.subtract(feet[step.foot].position, step.position)) < LANDING_TOLERANCE
            assert len(loop.touchdowns(step.foot, start)) == 1
        assert_standing_safely(loop)


def test_a_walk_planned_a_few_centimetres_off_is_walked_on_its_own_feet(talos, walk):
    """A walk whose start soles are 2-3 cm from the robot's (on physics: slid feet, measured by the walk
    behavior) is not refused: no IK failure, each step lands once, within the plan's offset of its step (on
    the kinematic plant the stance soles commanded onto the plan's feet move the body instead: the model's
    world is off by up to that much until the steps)."""
    loop = Loop(talos, walk)
    loop.run_until(walk.t_end + 0.5)
    feet = loop.feet()
    rear = min(Foot, key=lambda foot: feet[foot].position[0])
    off = dict(feet)
    for foot, dx in ((rear, -0.03), (rear.other, 0.02)):
        x, y, z = feet[foot].position
        off[foot] = FootPose((x + dx, y + 0.01, z), feet[foot].yaw + 0.02)
    timeline = two_steps_from(off)
    start = loop.time
    loop.send_plan(Timeline(off[Foot.LEFT], off[Foot.RIGHT], timeline.steps, TIMING), walking=True)
    loop.run_until(start + timeline.t_end + 1.0)
    assert all(c.status == OK for t, c in loop.commands if t > start)
    assert loop.whole_body.refused_plans == 0 and loop.whole_body.plan_id == loop.plan_id
    landed = loop.feet()
    for step in timeline.steps:
        assert np.linalg.norm(np.subtract(landed[step.foot].position, step.position)) < 0.035
        assert len(loop.touchdowns(step.foot, start)) == 1
    assert_standing_safely(loop)
