"""Robustness of the walk on MuJoCo (Talos), stabilizer off vs on in the same run (issue 18).

Each row runs the in-process loop (:class:`~walk_mpc.core.control.closed_loop.ClosedLoopWalk`, the graph's
controllers) on MuJoCo physics twice, with the whole-body stage's stabilizer disabled and enabled
(everything else default), and scores on the simulator's truth (a fall: base tilt above 10 degrees or base
below 90 % of its height, :class:`~walk_mpc.core.control.closed_loop.ClosedLoopParameters`):

* **pushes**: the largest 0.1 s push on the pelvis survived, by bisection on the impulse [N s], in four
  directions: walking (a 6-step 0.2 m walk, the push at the middle of step 3's single support: forward,
  backward, outward over the stance foot, inward toward the swing side), and standing (forward, backward,
  left, right; beside each its LIPM capture limit of the feet, :func:`capture_limit`: what no ankle or CoM
  strategy can exceed without a step), each watched for 2 s after the end of the walk;
* **unseen terrain** (:mod:`walk_mpc.core.sim.terrain`, the plan knows nothing): a plank of 1, 2, 3 cm
  under step 3 of a 10-step walk, and a ramp of +-1, 2, 3 degrees 0.8 m long from x = 0.3 m;
* **known stairs** (``stairs`` row of the terrain section): 10 cm steps, the plan's steps carrying their
  heights (StepData z): on a walk of 0.25 m steps, two steps up, three on the landing, two down, three on
  the floor, again while the walk lasts (:func:`stairs_terrain`; each edge midway between two footsteps);
  the largest base tilt of the stairs walks is printed beside it (the pelvis pitch);
* **known ramps** (terrain section): +-5 and +-10 degrees, 1.2 m long from midway between the third and
  fourth footsteps (:func:`known_ramp_terrain`: 6 steps on the slope, each kink midway between two
  footsteps), the plan's steps carrying the ground's height and normal (StepData z and normal: the soles land
  flat on the slope); up or down, then on the plateau (or the floor below);
* **leg gains**: the lowest leg kp (kd = kp / 100) in a list at which the 10-step walk stands;
* **speed**: the fastest gait (step length, single / double support) of a list that walks 10 steps.

``--steps N``: the walks of the terrain, gains and speed rows take N steps (default 10; the pushes keep
their 6-step walk).

``--step-adjustment``: every row with the stabilizer on, step adjustment from the measured DCM
(:mod:`walk_mpc.core.control.step_adjustment`, its default parameters) off vs on.

``--adapt-timing``: with ``--step-adjustment``, step adjustment with step timing adaptation
(``StepAdjustmentParameters.adapt_timing``: the swinging step's touchdown earlier or later, the next step
outward; the other step adjustment parameters as ``--adjust``); ``--adjust NAME=VALUE,...``: further step
adjustment parameters (e.g. ``max_widening_shift=0.1``).

``--recovery-step``: the standing push rows again with standing recovery steps from the measured DCM
(:mod:`walk_mpc.core.control.recovery_step`, its default parameters or ``--recovery NAME=VALUE,...``) in
both columns ("..., recovery step"): standing without and with the recovery step in one table.
``--directions`` selects push directions (e.g. ``forward,left``: one row at a time).

``--zmp-inward-offset D``: every run's planner with ``PlannerParameters.zmp_inward_offset`` D [m] (a single
stance's ZMP reference moved toward the other foot: less lateral sway).

``--limits NAME=VALUE,...``: the :class:`~walk_mpc.core.walk.saturation.StepLimits` of step adjustment and the
recovery steps (e.g. ``min_duration=0.4``: recovery steps shorter than the walk behavior's 0.5 s).

``--ik NAME=VALUE,...``: every run's :class:`~walk_mpc.core.body.ik.IKSolver.Parameters` with these (e.g.
``pelvis_level_gain=1``: the pelvis kept upright on every solve).

``--stabilizer NAME=VALUE,...``: the runs with the stabilizer on with these
:class:`~walk_mpc.core.control.stabilizer.StabilizerParameters` (e.g. ``com_offset_limit=0.08``).

``--stage NAME=VALUE,...``: every run's whole-body stage parameters
(:class:`~walk_mpc.core.control.whole_body_stage.WholeBodyStageParameters`) with these (booleans and numbers,
e.g. ``landing_tail=false``).

``--grid STEP`` (``--grid-top``, 50 N s): the push rows on a grid of impulses STEP apart instead of the
bisection (survival is not always monotone in the impulse): the impulses that stood, as ranges.

``--on-only``: the push rows of the second column only (the first '-'); ``--why``: each push cell with the
smallest impulse that fell in the bisection and why (the fall detector's time and criteria, IK failures).

Every run's MuJoCo plant collides Talos' left leg with its right leg (``MujocoSim.Parameters.leg_collisions``,
on by default since the ninth session: the URDF's leg collision meshes); ``--no-leg-collisions``: the legs
pass through each other, as in the runs of the sessions before (a crossing step then looks feasible that is
not). ``--leg-collisions``: also print a line per run with its push, outcome and left-right leg contacts
(:class:`~walk_mpc.core.sim.mujoco.LegContacts`: when, largest force, which links; simulator truth, the
controllers do not see it). ``--leg-clearance``: every run's plant measures the smallest left-right leg
distance (``MujocoSim.Parameters.leg_clearance``; with ``--no-leg-collisions`` the physics is that of the
legs passing through each other, by how much is printed).

``--balance``: the robot's balance setting (config/graph.yaml ``balance``: config/balance_talos.yaml, the file
``balance:=true`` lays over the nodes' parameters), read from that file and applied as the options above would
(:func:`balance_options`: ``ik`` ``stabilizer.*`` as ``--stabilizer``, ``walk_behavior`` ``step_adjustment``
as ``--step-adjustment`` / ``--adjust``, ``recovery_step`` as ``--recovery-step`` / ``--recovery``,
``behavior.limits`` as ``--limits``, ``mpc_planner`` ``planner.*`` as ``--zmp-inward-offset``, ``ik``
``solver.*`` as ``--ik``; anything else is refused): the table the README gives for it.

``--estimated``: the samples carry no base pose (``base_estimate_valid`` false): the controllers estimate
the state from the IMU and the legs (the simulator's truth only scores). ``--sections`` selects rows.
Prints a table; ``test/test_robustness.py`` checks a few-second subset.

    bash -c 'source tools/env.sh && source install/setup.bash && OPENBLAS_NUM_THREADS=1 \
        python -P benchmarks/robustness.py'
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from typing import Optional

import numpy as np

from walk_mpc.core.body.ik import IKSolver
from walk_mpc.core.body.robot import RobotModel, yaw_of
from walk_mpc.core.control.closed_loop import (
    ClosedLoopParameters,
    ClosedLoopWalk,
    WalkOutcome,
    default_planner_parameters,
)
from walk_mpc.core.control.recovery_step import RecoveryStepParameters
from walk_mpc.core.control.stabilizer import StabilizerParameters, convex_hull
from walk_mpc.core.control.step_adjustment import StepAdjustmentParameters
from walk_mpc.core.sim.kinematic import KinematicSim
from walk_mpc.core.sim.mujoco import MujocoSim
from walk_mpc.core.sim.terrain import Terrain, TerrainMujocoSim
from walk_mpc.core.walk.footsteps import walk_forward
from walk_mpc.core.walk.saturation import StepLimits
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline

PUSH_DURATION = 0.1  # [s]
PUSH_SETTLE = 2.0  # [s] watched after the end of the walk
LEG_KP = 8000.0  # [N m/rad] default leg gain (kd = kp / 100)


@dataclasses.dataclass(frozen=True)
class Gait:
    """A straight walk: ``steps`` steps of ``length`` [m], single / double support [s]."""

    steps: int = 10
    length: float = 0.2
    single: float = 0.8
    double: float = 0.3

    @property
    def speed(self) -> float:
        """Average speed [m/s]."""
        return self.length / (self.single + self.double)


def timeline_of(robot: RobotModel, gait: Gait, known: Optional[Terrain] = None) -> Timeline:
    """The straight walk ``gait`` from the robot's reference posture (0 steps: standing); with ``known``
    terrain each step at the terrain's height under it (StepData z)."""
    q0 = robot.reference_configuration()
    poses = {name: FootPose(tuple(p), yaw_of(r)) for name, (p, r) in robot.foot_poses(q0).items()}
    left, right = poses[robot.left_foot_frame], poses[robot.right_foot_frame]
    width = abs(left.position[1] - right.position[1])
    steps = walk_forward(left, right, gait.length * (gait.steps - 1), step_length=gait.length, width=width,
                         duration=gait.single + gait.double) if gait.steps else []
    if known is not None:
        steps = [s.replace(position=(*s.position[:2], known.height(*s.position[:2])),
                           normal=known.normal(*s.position[:2])) for s in steps]
    return Timeline(left, right, steps, GaitTiming(sway_duration=0.6, double_support_duration=gait.double,
                                                   catch_duration=0.6))


ESTIMATED = False  # the samples without base pose (--estimated)
ADJUST: dict = {}  # step adjustment parameters of the runs with it (besides enabled)
RECOVERY: dict = {}  # recovery step parameters of the runs with it (besides enabled)
PLANNER: dict = {}  # planner parameters of every run, over the loop's defaults (--zmp-inward-offset)
STABILIZER: dict = {}  # stabilizer parameters of the runs with it on (besides enabled; --stabilizer)
LIMITS: dict = {}  # step limits of step adjustment and recovery steps (--limits; default: the behavior's)
IK: dict = {}  # IK solver parameters of every run, over the defaults (--ik)
STAGE: dict = {}  # whole-body stage parameters of every run, besides the stabilizer (--stage)
LEG_COLLISIONS = True  # every run's plant collides the legs with each other (--no-leg-collisions: not)
LEG_REPORT = False  # every run prints its leg contacts (--leg-collisions)
LEG_CLEARANCE = False  # every run's plant measures the smallest left-right leg distance, and prints it
LEG_CONTACTS: list = []  # (push [N s] (x, y), walked, LegContacts) of every run with either


def run_walk(robot: RobotModel, stabilizer: bool, gait: Gait = Gait(), terrain: Optional[Terrain] = None,
             push: Optional[tuple] = None, kp: float = LEG_KP, settle: float = 0.5,
             duration: Optional[float] = None, adjust: bool = False, known: bool = False,
             trace: Optional[list] = None, recover: bool = False, noslip: int = 0,
             why: Optional[list] = None) -> WalkOutcome:
    """One closed-loop walk on MuJoCo; ``push`` = (start time [s], force [N] (3,)) for PUSH_DURATION; with
    :data:`ESTIMATED` the samples have no base pose; ``known``: the plan takes the terrain's heights (known
    terrain, StepData z; else unseen); ``adjust``: step adjustment from the measured DCM
    (``trace``: a list the adjuster's decisions are appended to); ``recover``: standing recovery steps;
    ``noslip``: the terrain sim's ``noslip_iterations`` (:class:`~walk_mpc.core.sim.terrain.TerrainMujocoSim`:
    no creep of the soles down a slope); ``why``: a list :func:`failure` of the walk is appended to."""
    physics = MujocoSim.Parameters(gain_patterns=("leg_",), gain_kp=(kp,), gain_kd=(kp / 100.0,),
                                   leg_collisions=LEG_COLLISIONS, leg_clearance=LEG_CLEARANCE)
    params = KinematicSim.Parameters()
    sim = (TerrainMujocoSim(terrain, params, physics, robot=robot, noslip_iterations=noslip)
           if terrain is not None
           else MujocoSim(params, physics, robot=robot))
    if ESTIMATED:
        truth = sim.sensor_sample
        sim.sensor_sample = lambda: dataclasses.replace(truth(), base_estimate_valid=False)
    timeline = timeline_of(robot, gait, terrain if known else None)
    options = {"whole_body": {"stabilizer": StabilizerParameters(enabled=True, **STABILIZER) if stabilizer
                              else StabilizerParameters(enabled=False), **STAGE}}
    adjustment = StepAdjustmentParameters(enabled=True, **ADJUST) if adjust else None
    recovery = RecoveryStepParameters(enabled=True, **RECOVERY) if recover else None
    if recovery is not None and recovery.crossover:
        allow_crossing(robot, recovery.max_crossover_width)
    planner = None
    if PLANNER:  # the loop's default planner parameters, changed
        q = np.array(sim.state.q)
        planner = dataclasses.replace(
            default_planner_parameters(robot, q, ClosedLoopParameters().control_period), **PLANNER)
    loop = ClosedLoopWalk(robot, sim, timeline, planner_params=planner,
                          params=ClosedLoopParameters(settle_time=settle), stage_options=options,
                          step_adjustment=adjustment, recovery_step=recovery,
                          step_limits=StepLimits(**LIMITS) if LIMITS else None,
                          ik_params=IKSolver.Parameters(**IK) if IK else None)
    until = duration if duration is not None else timeline.t_end + settle
    start = time.perf_counter()
    pushing = False
    while sim.time < until - 1e-9 and not loop.fallen:
        if push is not None:
            t0, force = push
            active = t0 - 1e-9 <= sim.time < t0 + PUSH_DURATION - 1e-9
            if active != pushing:
                sim.set_base_force(np.asarray(force, dtype=float) if active else np.zeros(3))
                pushing = active
        loop.step()
        if trace is not None and loop.adjuster is not None and loop.adjuster.last:
            trace.append(dict(loop.adjuster.last, plan=loop.plan.plan_id))
        if trace is not None and loop.recovery is not None and loop.recovery.last:
            trace.append(dict(loop.recovery.last, plan=loop.plan.plan_id))
    deadline = sim.time + loop.params.settle_wait  # a late fall: watched until the robot has settled
    while not loop.fallen and not loop.settled() and sim.time < deadline - 1e-9:
        loop.step()
    outcome = loop.outcome(time.perf_counter() - start)
    if why is not None:
        why.append(failure(outcome, loop.fall_reason))
    if LEG_REPORT or LEG_CLEARANCE:
        impulse = (0.0, 0.0) if push is None else tuple(PUSH_DURATION * float(f) for f in push[1][:2])
        LEG_CONTACTS.append((impulse, walked(outcome), sim.leg_contacts))
        result = "stands" if walked(outcome) else "falls: " + failure(outcome, loop.fall_reason)
        print(f"  run: push ({impulse[0]:.1f}, {impulse[1]:.1f}) N s, stabilizer "
              f"{'on' if stabilizer else 'off'}, {result}; leg contacts: {sim.leg_contacts.summary()}"
              + (f"; leg clearance: {sim.leg_clearance.summary()}" if LEG_CLEARANCE else ""), flush=True)
    return outcome


def allow_crossing(robot: RobotModel, width: float) -> RobotModel:
    """``robot`` whose description allows crossing steps ``width`` [m] across (``steps.max_crossover_width``),
    to measure the recovery's crossover step on a robot whose legs do not clear it (Talos: 0): whether they
    clear is then the simulator's (``leg_collisions``; ``--no-leg-collisions``: they pass through each other).
    The runs' robot only (an instance override): the controllers refuse the crossover on Talos."""
    limits = dataclasses.replace(RobotModel.step_limits(robot), max_crossover_width=width)
    robot.step_limits = lambda: limits
    return robot


def failure(outcome: WalkOutcome, reason: str) -> str:
    """Why a walk did not stand to the end: the fall detector's reason (its time and criteria) and the IK
    failures ("" when it walked)."""
    parts = [reason] if outcome.fallen else []
    if outcome.ik_failures:
        parts.append(f"{outcome.ik_failures} IK failures")
    return "; ".join(parts)


def walked(outcome: WalkOutcome) -> bool:
    """Whether the walk stood to the end (no fall, no IK failure)."""
    return not outcome.fallen and outcome.ik_failures == 0


def push_directions(robot: RobotModel, gait: Gait, walking: bool) -> dict:
    """Direction name -> (push start [s], unit vector) of the push trials."""
    if not walking:
        t0 = 1.0
        return {"forward": (t0, (1, 0)), "backward": (t0, (-1, 0)), "left": (t0, (0, 1)),
                "right": (t0, (0, -1))}
    timeline = timeline_of(robot, gait)
    phase = next(ph for ph in timeline.phases if ph.kind is PhaseKind.SINGLE and ph.step_index == 3)
    t0 = 0.5 * (phase.t_start + phase.t_end) - PUSH_DURATION / 2
    stance = phase.swing_foot.other
    outward = 1.0 if np.asarray(phase.foot(stance).position)[1] > np.asarray(
        phase.foot(phase.swing_foot).position)[1] else -1.0
    return {"forward": (t0, (1, 0)), "backward": (t0, (-1, 0)), "outward": (t0, (0, outward)),
            "inward": (t0, (0, -outward))}


def largest_push(robot: RobotModel, stabilizer: bool, walking: bool, direction: tuple,
                 high: float = 100.0, iterations: int = 5, adjust: bool = False,
                 recover: bool = False, why: Optional[list] = None) -> float:
    """Largest impulse [N s] survived (bisection between 0 and ``high``, ``iterations`` halvings;
    ``recover``: with standing recovery steps); ``why``: (impulse [N s], :func:`failure`) of the smallest
    impulse that fell is appended to it (none: nothing fell)."""
    gait = Gait(steps=6) if walking else Gait(steps=0)
    t0, unit = direction
    low = 0.0
    fell = None
    for _ in range(iterations):
        middle = 0.5 * (low + high)
        force = middle / PUSH_DURATION * np.array([unit[0], unit[1], 0.0])
        duration = (timeline_of(robot, gait).t_end + PUSH_SETTLE) if walking else t0 + 3.0
        reasons: list = []
        if walked(run_walk(robot, stabilizer, gait, push=(t0, force), duration=duration, adjust=adjust,
                           recover=recover, why=reasons)):
            low = middle
        else:
            high = middle
            fell = (middle, reasons[0])
    if why is not None and fell is not None:
        why.append(fell)
    return low


def capture_limit(robot: RobotModel, unit: tuple) -> float:
    """The largest impulse [N s] along ``unit`` (x, y) that the standing reference posture's feet can absorb
    without a step, by the LIPM: a push J moves the DCM by J / (m omega) (m the robot's mass, omega from the
    CoM height above the soles); the limit is where the DCM reaches the edge of the soles' convex hull
    (:attr:`RobotModel.sole_size`) along ``unit`` from the CoM (no ankle, CoM shift or gain can do more)."""
    q0 = robot.reference_configuration()
    com = np.asarray(robot.com(q0))
    size = robot.sole_size
    corners = []
    for frame in (robot.left_foot_frame, robot.right_foot_frame):
        position, rotation = robot.frame_pose(q0, frame)
        for x, y in ((size.front, size.left), (size.front, -size.right), (-size.back, size.left),
                     (-size.back, -size.right)):
            corners.append(np.asarray(position)[:2] + np.asarray(rotation)[:2, :2] @ np.array([x, y]))
    height = float(com[2]) - float(np.mean([robot.frame_pose(q0, f)[0][2]
                                             for f in (robot.left_foot_frame, robot.right_foot_frame)]))
    omega = math.sqrt(9.81 / height)
    direction = np.asarray(unit, dtype=float) / float(np.linalg.norm(unit))
    hull = convex_hull(np.array(corners))
    # distance from the CoM along the direction to the hull's boundary (the CoM is inside it)
    reach = math.inf
    for k in range(len(hull)):
        a, b = hull[k], hull[(k + 1) % len(hull)]
        edge = b - a
        normal = np.array([edge[1], -edge[0]])  # outward for a counter-clockwise hull
        along = float(direction @ normal)
        if along > 1e-12:
            reach = min(reach, float((a - com[:2]) @ normal) / along)
    return reach * robot.mass * omega


def push_grid(robot: RobotModel, stabilizer: bool, walking: bool, direction: tuple, impulses: list,
              adjust: bool = False, recover: bool = False) -> list:
    """Whether the walk stands each impulse [N s] of ``impulses`` (the bisection's fragility: survival is not
    always monotone in the impulse)."""
    gait = Gait(steps=6) if walking else Gait(steps=0)
    t0, unit = direction
    duration = (timeline_of(robot, gait).t_end + PUSH_SETTLE) if walking else t0 + 3.0
    unit3 = np.array([unit[0], unit[1], 0.0])
    return [walked(run_walk(robot, stabilizer, gait, push=(t0, impulse / PUSH_DURATION * unit3),
                            duration=duration, adjust=adjust, recover=recover)) for impulse in impulses]


def ranges(impulses: list, stands: list) -> str:
    """The impulses that stood as ranges of consecutive grid points ("12.5-18.8, 25.0" ; "none")."""
    out, start, previous = [], None, None
    for impulse, ok in zip(list(impulses) + [None], list(stands) + [False]):
        if ok and start is None:
            start = impulse
        if not ok and start is not None:
            out.append(f"{start:.1f}" if start == previous else f"{start:.1f}-{previous:.1f}")
            start = None
        previous = impulse
    return ", ".join(out) if out else "none"


def plank_terrain(robot: RobotModel, height: float, step_index: int = 3) -> Terrain:
    """A plank of ``height`` [m] under step ``step_index`` of the default walk (0.3 x 0.2 m)."""
    step = next(s for s in timeline_of(robot, Gait()).steps if s.step_index == step_index)
    x, y = step.position[0], step.position[1]
    return Terrain(planks=((x, y, 0.3, 0.2, height),))


def ramp_terrain(degrees: float) -> Terrain:
    """A ramp of ``degrees`` from x = 0.3 m over 0.8 m."""
    return Terrain(ramp_angle=math.radians(degrees), ramp_start=0.3, ramp_length=0.8)


def known_ramp_terrain(robot: RobotModel, degrees: float, length: float = 1.2) -> Terrain:
    """A ramp of ``degrees`` over ``length`` [m] along the default walk, from midway between its third and
    fourth footsteps (every kink midway between two footsteps: the soles lie on the slope or beside it)."""
    xs = [s.position[0] for s in timeline_of(robot, Gait(steps=4)).steps]
    return Terrain(ramp_angle=math.radians(degrees), ramp_start=0.5 * (xs[1] + xs[2]), ramp_length=length)


KNOWN_RAMPS = (5.0, -5.0, 10.0, -10.0)  # [deg]
#: MuJoCo noslip iterations of the known ramp walks: its soft contacts let a loaded sole creep about 1 cm
#: down a 10 degree slope every stance (friction 1 notwithstanding), which the leg odometry cannot see.
RAMP_NOSLIP = 10


STAIRS_GAIT = Gait(length=0.25)  # 0.25 m steps (the sole is 0.2 m long): 2.5 cm from each edge
STAIRS_PATTERN = (0, 0, 0, 1, 2, 2, 2, 1)  # risers under steps 1-8, 9-16, ... (the last steps on the floor)


def stairs_terrain(robot: RobotModel, gait: Gait, rise: float = 0.1) -> Terrain:
    """Stairs of ``rise`` [m] under the steps of ``gait``: :data:`STAIRS_PATTERN` risers under each step,
    repeated while at least two steps on the floor follow (the last one beside the one before: 10 steps,
    one flight; 20, two), an edge midway between two footsteps at different heights."""
    steps = timeline_of(robot, gait).steps
    pattern = len(STAIRS_PATTERN)
    flights = pattern * ((len(steps) - 2) // pattern)
    levels = [STAIRS_PATTERN[k % pattern] if k < flights else 0 for k in range(len(steps))]
    edges, level = [], 0
    for k, step in enumerate(steps):
        if levels[k] != level:
            edges.append((0.5 * (steps[k - 1].position[0] + step.position[0]), rise * levels[k]))
            level = levels[k]
    return Terrain.stairs(edges)


GAITS = (Gait(10, 0.2, 0.8, 0.3), Gait(10, 0.25, 0.6, 0.2), Gait(10, 0.3, 0.6, 0.2), Gait(10, 0.3, 0.5, 0.1),
         Gait(10, 0.3, 0.4, 0.1))
GAINS = (3000.0, 2400.0, 2000.0, 1500.0, 1200.0, 1000.0)


def table(rows: list) -> str:
    """Rows of (what, off, on) as a Markdown table."""
    lines = ["| what | stabilizer off | stabilizer on |", "|---|---|---|"]
    lines += [f"| {what} | {off} | {on} |" for what, off, on in rows]
    return "\n".join(lines)


def _overrides(text: str, integers: tuple = ()) -> dict:
    """``NAME=VALUE,...`` as a dict: ``true``/``false`` as bools, the names in ``integers`` as ints, the
    rest as floats."""
    values = {}
    for item in filter(None, text.split(",")):
        name, value = (part.strip() for part in item.split("="))
        if value.lower() in ("true", "false"):
            values[name] = value.lower() == "true"
        else:
            values[name] = int(value) if name in integers else float(value)
    return values


#: (node, parameter prefix) of a balance setting -> the option of this script it is applied as.
BALANCE_PREFIXES = {("ik", "stabilizer."): "stabilizer", ("ik", "solver."): "ik",
                    ("walk_behavior", "step_adjustment."): "adjust",
                    ("walk_behavior", "recovery_step."): "recovery",
                    ("walk_behavior", "behavior.limits."): "limits", ("mpc_planner", "planner."): "planner"}


def balance_options(path) -> dict:
    """The options of this script that a balance setting (a parameters file of some nodes, e.g.
    config/balance_talos.yaml) amounts to: ``stabilizer``, ``adjust``, ``recovery``, ``limits``, ``planner``,
    ``ik`` (name -> value, without ``enabled``), and ``step_adjustment`` / ``recovery_step`` (whether they are
    enabled). The stabilizer must be enabled (the table's second column is the setting).

    Raises:
        ConfigError: A parameter this script cannot apply, or the stabilizer not enabled.
    """
    from walk_mpc.core.errors import ConfigError
    from walk_mpc.core.params import flatten, load_yaml

    options: dict = {name: {} for name in set(BALANCE_PREFIXES.values())}
    for node, section in load_yaml(path).items():
        for name, value in flatten((section or {}).get("ros__parameters") or {}).items():
            match = next(((p, o) for (n, p), o in BALANCE_PREFIXES.items()
                          if n == node and name.startswith(p)), None)
            if match is None:
                raise ConfigError("robustness.py --balance cannot apply it; it applies "
                                  f"{sorted(f'{n}.{p}*' for n, p in BALANCE_PREFIXES)}", f"{node}.{name}",
                                  str(path))
            options[match[1]][name[len(match[0]):]] = value
    if options["stabilizer"].pop("enabled", False) is not True:
        raise ConfigError("the balance setting's stabilizer must be enabled (the table's second column)",
                          "ik.stabilizer.enabled", str(path))
    options["step_adjustment"] = options["adjust"].pop("enabled", False) is True
    options["recovery_step"] = options["recovery"].pop("enabled", False) is True
    return options


def _fmt(ok: bool) -> str:
    return "walks" if ok else "falls"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", default="pushes,terrain,gains,speed",
                        help="comma-separated: pushes, terrain, gains, speed")
    parser.add_argument("--iterations", type=int, default=5, help="bisection halvings of each push")
    parser.add_argument("--steps", type=int, default=10, help="steps of the terrain, gains and speed walks")
    parser.add_argument("--leg-collisions", action="store_true",
                        help="print each run's left-right leg contacts (MuJoCo leg_collisions, the default)")
    parser.add_argument("--no-leg-collisions", action="store_true",
                        help="the legs pass through each other (the runs before the ninth session)")
    parser.add_argument("--leg-clearance", action="store_true",
                        help="measure the smallest left-right leg distance (MuJoCo leg_clearance); print it")
    parser.add_argument("--estimated", action="store_true", help="samples without base pose (IMU + legs)")
    parser.add_argument("--balance", action="store_true",
                        help="Talos' balance setting (config/graph.yaml 'balance'), as the options it "
                             "amounts to")
    parser.add_argument("--step-adjustment", action="store_true",
                        help="the stabilizer on, step adjustment off vs on")
    parser.add_argument("--adapt-timing", action="store_true",
                        help="with --step-adjustment: step timing adaptation on")
    parser.add_argument("--adjust", default="",
                        help="step adjustment parameters NAME=VALUE,... (with --step-adjustment)")
    parser.add_argument("--recovery-step", action="store_true",
                        help="the standing push rows again with standing recovery steps")
    parser.add_argument("--directions", default="",
                        help="comma-separated push directions (forward, backward, outward, ...)")
    parser.add_argument("--standing-only", action="store_true", help="only the standing push rows")
    parser.add_argument("--walking-only", action="store_true", help="only the walking push rows")
    parser.add_argument("--zmp-inward-offset", type=float, default=0.0,
                        help="PlannerParameters.zmp_inward_offset [m] of every run")
    parser.add_argument("--on-only", action="store_true",
                        help="only the second column (stabilizer on; the first '-')")
    parser.add_argument("--why", action="store_true",
                        help="each push row with the smallest impulse that fell and why (fall detector, IK)")
    parser.add_argument("--grid", type=float, default=0.0,
                        help="push rows on a grid of this step [N s] instead of the bisection")
    parser.add_argument("--grid-top", type=float, default=50.0, help="the grid's largest impulse [N s]")
    parser.add_argument("--recovery", default="",
                        help="recovery step parameters NAME=VALUE,... (with --recovery-step)")
    parser.add_argument("--stabilizer", default="",
                        help="stabilizer parameters NAME=VALUE,... of the runs with it on")
    parser.add_argument("--limits", default="",
                        help="step limits NAME=VALUE,... of step adjustment and recovery steps")
    parser.add_argument("--ik", default="", help="IK solver parameters NAME=VALUE,... of every run")
    parser.add_argument("--stage", default="",
                        help="whole-body stage parameters NAME=VALUE,... of every run (not the stabilizer)")
    args = parser.parse_args(argv)
    global ESTIMATED, LEG_COLLISIONS, LEG_REPORT, LEG_CLEARANCE
    ESTIMATED = args.estimated
    if args.leg_collisions and args.no_leg_collisions:
        parser.error("--leg-collisions and --no-leg-collisions exclude each other")
    LEG_COLLISIONS = not args.no_leg_collisions
    LEG_REPORT = args.leg_collisions
    LEG_CLEARANCE = args.leg_clearance
    if args.balance:  # the setting's file first, the options given after it on top
        from walk_mpc.graph import load_graph

        balance = balance_options(load_graph().balance_path("talos"))
        print(f"balance setting: {balance}", flush=True)
        args.step_adjustment = args.step_adjustment or balance["step_adjustment"]
        args.recovery_step = args.recovery_step or balance["recovery_step"]
        for target, name in ((ADJUST, "adjust"), (RECOVERY, "recovery"), (STABILIZER, "stabilizer"),
                             (LIMITS, "limits"), (IK, "ik"), (PLANNER, "planner")):
            target.update(balance[name])
    if args.zmp_inward_offset:
        PLANNER["zmp_inward_offset"] = args.zmp_inward_offset
    if args.adapt_timing:
        ADJUST["adapt_timing"] = True
    ADJUST.update(_overrides(args.adjust))
    RECOVERY.update(_overrides(args.recovery, integers=("steps",)))
    STABILIZER.update(_overrides(args.stabilizer))
    LIMITS.update(_overrides(args.limits))
    IK.update(_overrides(args.ik))
    STAGE.update(_overrides(args.stage))
    robot = RobotModel()
    sections = args.sections.split(",")
    rows = []
    started = time.perf_counter()

    def row(what, off, on):
        rows.append((what, off, on))
        print(f"{what}: off {off}, on {on}  ({time.perf_counter() - started:.0f} s)", flush=True)

    # (stabilizer, step adjustment) of the two columns
    columns = ((True, False), (True, True)) if args.step_adjustment else ((False, False), (True, False))
    if "pushes" in sections:
        wanted = set(args.directions.split(",")) if args.directions else None
        for walking in ((False,) if args.standing_only else (True,) if args.walking_only else (True, False)):
            gait = Gait(steps=6) if walking else Gait(steps=0)
            for recover in (False, True) if args.recovery_step and not walking else (False,):
                for name, direction in push_directions(robot, gait, walking).items():
                    if wanted is not None and name not in wanted:
                        continue
                    cells = []
                    for k, (on, adjust) in enumerate(columns):
                        if args.on_only and k == 0:
                            cells.append("-")
                            continue
                        if args.grid:
                            grid = [args.grid * (i + 1) for i in range(int(args.grid_top / args.grid + 1e-9))]
                            stands = push_grid(robot, on, walking, direction, grid, adjust=adjust,
                                               recover=recover)
                            cells.append("stands " + ranges(grid, stands))
                            continue
                        why: list = []
                        value = largest_push(robot, on, walking, direction, iterations=args.iterations,
                                             adjust=adjust, recover=recover, why=why)
                        cells.append(f"{value:.1f}" + (f" ({why[0][0]:.1f} fell: {why[0][1]})"
                                                       if args.why and why else ""))
                    what = f"push {'walking' if walking else 'standing'} {name}"
                    if not walking and not recover:  # the baseline beside it
                        what += f" (capture limit of the feet {capture_limit(robot, direction[1]):.1f})"
                    row(f"{what}{', recovery step' if recover else ''} [N s]", *cells)
    walk = Gait(steps=args.steps)
    if "terrain" in sections:
        for height in (0.01, 0.02, 0.03):
            terrain = plank_terrain(robot, height)
            results = [walked(run_walk(robot, on, walk, terrain=terrain, adjust=adjust))
                       for on, adjust in columns]
            row(f"unseen plank {100 * height:.0f} cm", _fmt(results[0]), _fmt(results[1]))
        for degrees in (1.0, -1.0, 2.0, -2.0, 3.0, -3.0):
            results = [walked(run_walk(robot, on, walk, terrain=ramp_terrain(degrees), adjust=adjust))
                       for on, adjust in columns]
            row(f"unseen ramp {degrees:+.0f} deg", _fmt(results[0]), _fmt(results[1]))
        stairs = dataclasses.replace(STAIRS_GAIT, steps=args.steps)
        terrain = stairs_terrain(robot, stairs)
        outcomes = [run_walk(robot, on, stairs, terrain=terrain, known=True, adjust=adjust)
                    for on, adjust in columns]
        row("known stairs 10 cm up/down (largest base tilt)",
            *(f"{_fmt(walked(o))} ({math.degrees(o.max_tilt):.1f} deg)" for o in outcomes))
        for degrees in KNOWN_RAMPS:
            terrain = known_ramp_terrain(robot, degrees)
            outcomes = [run_walk(robot, on, walk, terrain=terrain, known=True, adjust=adjust,
                                 noslip=RAMP_NOSLIP) for on, adjust in columns]
            row(f"known ramp {degrees:+.0f} deg (largest base tilt)",
                *(f"{_fmt(walked(o))} ({math.degrees(o.max_tilt):.1f} deg)" for o in outcomes))
    if "gains" in sections:
        lowest = []
        for on, adjust in columns:
            ok = [kp for kp in GAINS if walked(run_walk(robot, on, walk, kp=kp, adjust=adjust))]
            lowest.append(f"{min(ok):.0f} (walks at {', '.join(f'{k:.0f}' for k in ok)})" if ok else "none")
        row(f"lowest leg kp that walks, of {', '.join(f'{k:.0f}' for k in GAINS)}", *lowest)
    if "speed" in sections:
        fastest = []
        for on, adjust in columns:
            gaits = [dataclasses.replace(g, steps=args.steps) for g in GAITS]
            ok = [g for g in gaits if walked(run_walk(robot, on, gait=g, adjust=adjust))]
            best = max(ok, key=lambda g: g.speed) if ok else None
            fastest.append("none" if best is None else
                           f"{best.speed:.2f} m/s ({best.length} m, {best.single}/{best.double} s)")
        row(f"fastest gait that walks {args.steps} steps", *fastest)
    print()
    header = ("without step adjustment | balance setting" if args.balance
              else "step adjustment off | step adjustment on" if args.step_adjustment else None)
    print(table(rows).replace("stabilizer off | stabilizer on", header) if header else table(rows))


if __name__ == "__main__":
    main()
