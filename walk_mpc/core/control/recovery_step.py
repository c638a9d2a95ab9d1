"""Standing recovery steps: capture steps toward the measured DCM when the feet's support cannot hold it.

:class:`RecoveryStepper` observes the sensor samples while the robot stands (the walk behavior in Stand, or
the in-process loop's plan not walking) and decides whether a push has put the DCM (capture point) where the
ZMP inside the support polygon can no longer bring it back (Pratt 2006; LIPM, ``omega = sqrt(g / h)``):

1. **Measured DCM.** From what a robot measures (encoders, joint velocities, IMU; the base placed by the leg
   kinematics of both planned soles, :func:`~walk_mpc.core.control.step_adjustment.measure_dcm`), low-pass
   filtered over ``filter_time``.
2. **Outside the support polygon.** The convex hull of both soles (the planner's support region of the robot
   per sole). A DCM inside it is left to the stabilizer; out of it, it diverges whatever the ZMP does: a step
   is the only way to stop. A step is taken when the DCM is out by more than ``trigger_distance`` in front or
   behind (default 0), or by more than ``lateral_trigger_distance`` sideways (default 5 cm: a sideways step
   needs the weight on the other foot, which speeds the DCM away, and crossing is not allowed; on MuJoCo a
   step at the lateral edge did worse than the stabilizer alone).
3. **The capture step.** The foot on the DCM's side of the stance (lateral sign in the frame of the middle of
   the feet; the left foot when on the line) steps, the other one supports it. With the ZMP at the point of
   the stance sole nearest the DCM through the recovery's sway and single support (``T``), the DCM lands at
   ``z + (xi - z) exp(omega T)``; the swinging sole is put there (never narrower than the stance it leaves:
   no crossing), within the walk's :class:`~walk_mpc.core.walk.saturation.StepLimits` from the stance sole.
4. **Second step** (``steps`` 2): the other foot comes beside the first one (the stance width it had), or,
   when the DCM is predicted outside the first sole at the second touchdown (the first step saturated),
   toward where it will be then, within the step limits; further steps (``steps`` 3, 4) the same, the feet
   in turn. ``max_backward`` lengthens the backward steps of a recovery (its own limits).

5. **Crossover step** (``crossover``, off by default). Sideways the foot on the DCM's side cannot step: the
   weight would have to go to the other foot, which speeds the DCM away. With ``crossover`` the other foot,
   unloaded, steps across the stance foot instead, ``crossover_forward_offset`` in front of it (the soles must
   not collide; the leg passes in front of the stance leg), to where the DCM will be at its touchdown, across
   within [``min_crossover_width``, ``max_crossover_width``] (the walk's step limits with these crossover
   widths, :meth:`RecoveryStepper.walk_limits`), a one-step recovery walk; the sideways trigger is then
   ``trigger_distance``, or ``crossover_trigger_distance`` when larger (a DCM just beyond the sole's edge is
   left to the soles: crossing at least ``min_crossover_width`` overshoots it). The robot stands with its
   legs crossed afterwards.

6. **Following the DCM.** The decision comes while the push may still act (the DCM crosses the polygon's
   edge): during the recovery walk, a step that has not landed moves (again) to where the DCM measured since
   needs it, by the same prediction from the time left to its touchdown, when that is more than
   ``update_distance`` from where it lands now and more than ``min_time_to_touchdown`` ahead; the
   whole-body stage re-plans its swing from where the foot is
   (:func:`~walk_mpc.core.body.swing.retarget_swing`, a plan of the same stamp).

The recovery walk has its own gait timing (:meth:`RecoveryStepper.timing`: a short sway, quick steps: the
DCM diverges while the weight shifts), its steps numbered from 1; the robot stands again after it (catch,
Stand), and may step again if the DCM is still out. No decision before ``min_stand_time`` of standing (the
estimate settles after a walk, and after the recovery walk itself).

The walk behavior (:class:`~walk_mpc.core.control.walk_supervisor.WalkSupervisor`) starts the recovery walk
from Stand (goal id a :class:`~walk_mpc.core.control.walk_supervisor.RecoveryStepId`, published as a plan like
any walk); the in-process loop (:class:`~walk_mpc.core.control.closed_loop.ClosedLoopWalk`) gives its stages a
new plan of the same steps: the same decision either way. Disabled, it is never called.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np

from walk_mpc.core.body.robot import RobotModel
from walk_mpc.core.control.stabilizer import clamp_to_polygon, convex_hull
from walk_mpc.core.control.step_adjustment import measure_dcm
from walk_mpc.core.errors import ParameterError
from walk_mpc.core.params import check_less, check_nonnegative, check_positive
from walk_mpc.core.sensors import SensorSample
from walk_mpc.core.walk.saturation import StepLimits, relative_offset, saturate_step
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming, PhaseKind, Timeline


@dataclasses.dataclass(frozen=True)
class RecoveryStepParameters:
    """Parameters of :class:`RecoveryStepper`.

    Attributes:
        enabled: Take recovery steps when standing (False: the stepper is never called, nothing changes).
        trigger_distance: A step is taken when the measured DCM is farther than this [m] outside the
            support polygon of both soles, in front of it or behind it.
        lateral_trigger_distance: The same, for a DCM outside the polygon sideways (beyond the outer edge
            of a sole: a step there needs the weight on the other foot, which speeds the DCM away, and
            crossing is not allowed; measured on MuJoCo, lateral steps at the polygon's edge did worse than
            the stabilizer alone).
        steps: Capture steps of a recovery walk: 1 (the foot on the DCM's side), 2 (then the other one), up
            to 4 (the feet in turn; each where the DCM will be at its touchdown, beside its stance foot
            once the DCM is back on that sole). 3 with ``max_backward`` 0.25 m and the IK's
            ``pelvis_level_gain`` 1: 62.5 N s backward instead of 53.1 (MuJoCo Talos, state estimated,
            stabilizer off, the quicker steps below; README, Balance).
        sway_duration: Double support before the first lift-off [s] (the weight shifts to the stance foot).
        single_support_duration: Swing time of each recovery step [s]. Measured on MuJoCo Talos (state
            estimated, stabilizer off / on, bisection): single / double support 0.3 / 0.1 s caught 50.0 /
            46.9 N s forward and 40.6 / 40.6 backward, 0.35 / 0.15 s 34.4 / 40.6 and 40.6 / 40.6 (the first
            step lands about 0.1 s sooner: by the LIPM the DCM runs 0.1 + 0.106 exp(omega T) from the
            stance sole after 60 N s, T the push to the touchdown). A 0.05 s sway with a 0.25 s swing (the
            step limits' ``min_duration`` 0.35 s) caught 65.6 N s forward and 53.1 backward with the
            stabilizer off (62.5 / 50.0 on, with its ``dcm_com_release_distance``; without it 40.6 / 46.9):
            not the default (README, Balance).
        double_support_duration: Double support after each recovery touchdown [s] (a step lasts single +
            double support, at least the step limits' ``min_duration``: the single support is lengthened).
        catch_duration: Double support after the last step, before Stand [s].
        swing_height: Swing apex of the recovery steps [m].
        filter_time: Time constant [s] of the low-pass filter of the measured DCM (0: none).
        min_stand_time: No decision before the robot has stood this long [s] (the estimate settles after a
            walk or a recovery).
        update_distance: During the recovery walk, a step that has not landed moves to where the DCM
            measured since needs it (the push may still act at the decision) when that is farther than this
            [m] from where it lands now (the swing is re-planned from where the foot is); 0: never moved.
        min_time_to_touchdown: No move later than this [s] before the step's touchdown.
        crossover: Sideways (the DCM beyond a sole's outer edge, by more than ``trigger_distance``) the
            other foot steps across the stance foot (module docstring, 5). Measured on MuJoCo Talos (state
            estimated, 0.1 s pushes on the pelvis, stabilizer off): lateral pushes of 40-62.5 N s stand,
            43.8 N s without it.
        crossover_forward_offset: The crossover step lands this far [m] in front of where the DCM needs it
            (0.05: the soles clear each other; 0.1 and 0.15 fell more often on MuJoCo Talos).
        min_crossover_width: Smallest lateral distance [m] across the stance sole (sole width and a margin:
            the soles must not overlap; on MuJoCo Talos a crossing sole landed on the other one at 0.12).
        max_crossover_width: Largest lateral distance [m] across the stance sole.
        crossover_min_time_to_touchdown: ``min_time_to_touchdown`` of a crossover step [s] (0.1: the late
            moves left the crossing foot 5-6 cm short of its target on MuJoCo Talos).
        max_backward: Largest backward step [m] of a recovery walk, over the step limits' ``max_backward``
            (committed with the recovery's own limits, :meth:`RecoveryStepper.walk_limits`); 0: the step
            limits' (the default).
        crossover_trigger_distance: With ``crossover``, the sideways trigger [m] (the DCM beyond a sole's
            outer edge by more than this, or ``trigger_distance`` when larger); 0: ``trigger_distance``
            (the default). A crossover for a DCM just out (5 mm) lands its ``min_crossover_width`` 8 cm
            beyond the DCM, which swings back over the inner sole's edge: on MuJoCo Talos (state estimated,
            stabilizer off, the quick steps, three steps, ``pelvis_level_gain`` 1) 38-41 N s sideways fell
            after a second recovery, where they stand without a step; 0.02 m: every push of 2.5-63 N s
            left and 2.5-65 N s right stood (README, Balance).
    """

    enabled: bool = False
    trigger_distance: float = 0.0
    lateral_trigger_distance: float = 0.05
    steps: int = 2
    sway_duration: float = 0.1
    single_support_duration: float = 0.3
    double_support_duration: float = 0.1
    catch_duration: float = 0.6
    swing_height: float = 0.05
    filter_time: float = 0.02
    min_stand_time: float = 0.3
    update_distance: float = 0.02
    min_time_to_touchdown: float = 0.1
    crossover: bool = False
    crossover_forward_offset: float = 0.05
    min_crossover_width: float = 0.15
    max_crossover_width: float = 0.3
    crossover_min_time_to_touchdown: float = 0.2
    max_backward: float = 0.0
    crossover_trigger_distance: float = 0.0

    def __post_init__(self) -> None:
        for name in ("enabled", "crossover"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, getattr(self, name), "true or false")
        if isinstance(self.steps, bool) or self.steps not in (1, 2, 3, 4):
            raise ParameterError("steps", self.steps, "1 to 4 steps")
        for name in ("trigger_distance", "lateral_trigger_distance", "filter_time", "min_stand_time",
                     "swing_height", "update_distance", "min_time_to_touchdown", "crossover_forward_offset",
                     "crossover_min_time_to_touchdown", "max_backward", "crossover_trigger_distance"):
            check_nonnegative(name, getattr(self, name))
        for name in ("sway_duration", "single_support_duration", "double_support_duration", "catch_duration"):
            check_positive(name, getattr(self, name))
        check_positive("min_crossover_width", self.min_crossover_width)
        check_less("min_crossover_width", self.min_crossover_width, "max_crossover_width",
                   self.max_crossover_width)


def check_crossing(robot: RobotModel, width: float, name: str) -> None:
    """Refuse crossing steps ``width`` [m] across that the legs of ``robot`` do not clear: its description's
    ``steps.max_crossover_width`` (0: no crossing step; ``benchmarks/crossover_clearance.py`` measures it).

    Raises:
        ParameterError: ``name`` (the option asking for the crossing steps), with the robot's width.
    """
    allowed = float(robot.step_limits().max_crossover_width)
    if width > allowed + 1e-12:
        raise ParameterError(name, f"crossing steps {width} m across",
                             f"none wider than {allowed} m on '{robot.name}': its description's "
                             "steps.max_crossover_width (0: its legs do not clear each other in a crossing "
                             "step; benchmarks/crossover_clearance.py measures it)")


def support_hull(feet: Sequence[FootPose], sole) -> np.ndarray:
    """Corners (x, y) [m] of the convex hull of the soles ``feet`` (each the rectangle ``sole``: front, back,
    left, right of its center), counter-clockwise."""
    points = []
    for foot in feet:
        c, s = math.cos(foot.yaw), math.sin(foot.yaw)
        for x, y in ((sole.front, sole.left), (sole.front, -sole.right), (-sole.back, -sole.right),
                     (-sole.back, sole.left)):
            points.append((foot.position[0] + c * x - s * y, foot.position[1] + s * x + c * y))
    return convex_hull(np.asarray(points, dtype=float)).astype(float)


def outside_offset(point: Sequence[float], hull: np.ndarray) -> np.ndarray:
    """Offset (x, y) [m] of ``point`` from the nearest point of the convex polygon ``hull``
    (counter-clockwise), zero inside it."""
    p = np.asarray(point, dtype=float)
    return p - clamp_to_polygon(p, hull)


def distance_outside(point: Sequence[float], hull: np.ndarray) -> float:
    """Distance [m] of ``point`` (x, y) outside the convex polygon ``hull`` (counter-clockwise), 0 inside."""
    return float(np.linalg.norm(outside_offset(point, hull)))


def _heading(left: FootPose, right: FootPose) -> float:
    """Mean yaw [rad] of two soles."""
    return math.atan2(math.sin(left.yaw) + math.sin(right.yaw), math.cos(left.yaw) + math.cos(right.yaw))


def _clamp_to_sole(point: np.ndarray, foot: FootPose, sole) -> np.ndarray:
    """The point of the sole ``foot`` nearest ``point`` (x, y)."""
    x, y, _ = relative_offset(foot, (float(point[0]), float(point[1]), foot.position[2]))
    x, y = min(sole.front, max(-sole.back, x)), min(sole.left, max(-sole.right, y))
    c, s = math.cos(foot.yaw), math.sin(foot.yaw)
    return np.array([foot.position[0] + c * x - s * y, foot.position[1] + s * x + c * y])


class RecoveryStepper:
    """Standing recovery steps from the measured DCM (see the module docstring).

    Args:
        robot: Robot model (a biped; its planner sole is each sole's support region).
        params: Parameters.
        limits: The walk's step limits.
    """

    Parameters = RecoveryStepParameters

    def __init__(self, robot: RobotModel, params: Optional[RecoveryStepParameters] = None,
                 limits: Optional[StepLimits] = None) -> None:
        self.params = params if params is not None else RecoveryStepParameters()
        if not isinstance(self.params, RecoveryStepParameters):
            raise ParameterError("params", self.params, "a RecoveryStepParameters")
        self.robot = robot
        if self.params.crossover:
            check_crossing(robot, self.params.max_crossover_width, "crossover")
        self.limits = limits if limits is not None else StepLimits()
        # The recovery walk's step limits (walk_limits), without and with the crossover widths.
        recovery = (dataclasses.replace(self.limits, max_backward=self.params.max_backward)
                    if self.params.max_backward > 0.0 else self.limits)
        self._walk_limits = {False: recovery, True: dataclasses.replace(
            recovery, min_crossover_width=self.params.min_crossover_width,
            max_crossover_width=self.params.max_crossover_width)}
        self.sole = robot.planner_sole()
        self.reset()

    def reset(self) -> None:
        """Forget the filter and the standing time."""
        self._dcm: Optional[np.ndarray] = None
        self._dcm_t: Optional[float] = None
        self._stand_since: Optional[float] = None
        self._recovering = False  # the walk in progress is a recovery this stepper started
        self._width = 0.0  # the stance width [m] of the recovery in progress
        self._crossover = False  # the recovery in progress is a crossover step
        self.recoveries = 0
        self.last: dict = {}  # the last decision's values (tracing)

    @property
    def recovering(self) -> bool:
        """Whether the walk observed last is a recovery walk this stepper started."""
        return self._recovering

    def timing(self) -> GaitTiming:
        """The recovery walk's gait timing."""
        p = self.params
        return GaitTiming(sway_duration=p.sway_duration, double_support_duration=p.double_support_duration,
                          catch_duration=p.catch_duration)

    @property
    def step_duration(self) -> float:
        """Duration [s] of a recovery step: single + double support, at least the limits' ``min_duration``."""
        p = self.params
        return max(p.single_support_duration + p.double_support_duration, self.limits.min_duration)

    def walk_limits(self) -> StepLimits:
        """The step limits of the recovery walk in progress (or decided last): the walk's (``max_backward``
        the recovery's when set), with the crossover widths when it is a crossover step
        (:meth:`WalkBehavior.submit_goal` ``limits``)."""
        return self._walk_limits[self._crossover]

    def observe(self, t: float, timeline: Timeline, sample: SensorSample) -> Optional[tuple]:
        """One sample at plan time ``t`` [s] of ``timeline``. While it stands: the recovery steps (1 to 4
        :class:`Step`, numbered from 1, from the standing feet of ``t``) when the DCM has left the support
        polygon; during the recovery walk it started: its steps, those not landed moved, when the DCM needs
        them elsewhere; else None (another walk: None, and the standing time restarts)."""
        walking = timeline.walking_at(t)
        if walking and not self._recovering:
            self.other_walk()
            return None
        if walking:
            return self._update(t, timeline, sample)
        self._recovering = False
        if self._stand_since is None:
            self._stand_since = t
        phase = timeline.phase_at(t)
        measured = self._measure(t, phase, sample)
        if measured is None or t - self._stand_since < self.params.min_stand_time:
            return None
        xi, omega = measured
        left, right = phase.left, phase.right
        offset = outside_offset(xi, support_hull((left, right), self.sole))
        outside = float(np.linalg.norm(offset))
        heading = _heading(left, right)
        sideways = abs(-math.sin(heading) * offset[0] + math.cos(heading) * offset[1])
        forward = abs(math.cos(heading) * offset[0] + math.sin(heading) * offset[1])
        p = self.params
        crossover = p.crossover and sideways > forward
        if crossover:
            trigger = max(p.trigger_distance, p.crossover_trigger_distance)
        elif sideways > forward:
            trigger = p.lateral_trigger_distance
        else:
            trigger = p.trigger_distance
        if outside <= trigger:
            return None
        steps = self.capture_steps(xi, omega, left, right, crossover=crossover)
        self.last = {"t": t, "dcm": xi.tolist(), "outside": outside,
                     "steps": [(s.foot.name, s.position[0], s.position[1]) for s in steps]}
        self.recoveries += 1
        self._stand_since = None  # one decision per Stand
        self._recovering = True
        return steps

    def other_walk(self) -> None:
        """A walk that is not a recovery walk is in progress: no decision; the standing time restarts."""
        self._stand_since = None
        self._dcm = None
        self._recovering = False

    def _measure(self, t: float, phase, sample: SensorSample) -> Optional[tuple]:
        """(filtered DCM (x, y) [m], omega [1/s]) of the sample, or None."""
        raw = measure_dcm(self.robot, phase, sample)
        if raw is None:
            return None
        xi, omega = raw
        tau = self.params.filter_time
        if self._dcm is None or tau <= 0.0 or self._dcm_t is None:
            self._dcm = xi
        else:
            self._dcm = self._dcm + (xi - self._dcm) * min(1.0, max(0.0, t - self._dcm_t) / tau)
        self._dcm_t = t
        return self._dcm.copy(), omega

    def _update(self, t: float, timeline: Timeline, sample: SensorSample) -> Optional[tuple]:
        """During the recovery walk: its steps with those not landed moved (module docstring), or None."""
        p = self.params
        phase = timeline.phase_at(t)
        measured = self._measure(t, phase, sample)
        if measured is None or p.update_distance <= 0.0:
            return None
        xi, omega = measured
        steps = list(timeline.steps)
        if phase.kind is PhaseKind.SINGLE:
            k = next(n for n, st in enumerate(steps) if st.step_index == phase.step_index)
            remaining = phase.t_end - t
        elif phase.kind in (PhaseKind.SWAY, PhaseKind.DOUBLE):
            later = [n for n, st in enumerate(steps) if st.step_index > phase.step_index]
            if not later:
                return None
            k = later[0]
            remaining = phase.t_end - t + steps[k].duration - timeline.timing.double_support_duration
        else:
            return None
        if remaining < (p.crossover_min_time_to_touchdown if self._crossover else p.min_time_to_touchdown):
            return None
        stance = phase.foot(steps[k].foot.other)
        moved = self._plan(xi, omega, remaining, stance, steps[k:], timeline.timing.double_support_duration)
        shift = max(math.dist(a.position[:2], b.position[:2]) for a, b in zip(moved, steps[k:]))
        if shift <= p.update_distance:
            return None
        self.last = {"t": t, "dcm": xi.tolist(), "moved": shift,
                     "steps": [(s.foot.name, s.position[0], s.position[1]) for s in moved]}
        return tuple(steps[:k]) + moved

    def capture_steps(self, xi: np.ndarray, omega: float, left: FootPose, right: FootPose,
                      crossover: bool = False) -> tuple:
        """The recovery steps for the DCM ``xi`` (x, y) [m] standing on ``left`` and ``right`` (module
        docstring, 3 and 4); ``crossover``: one step of the foot away from the DCM across the other."""
        p = self.params
        middle = 0.5 * (np.asarray(left.position[:2]) + np.asarray(right.position[:2]))
        frame = FootPose((float(middle[0]), float(middle[1]), 0.0), _heading(left, right))
        lateral = relative_offset(frame, (float(xi[0]), float(xi[1]), 0.0))[1]
        swing = Foot.LEFT if lateral >= 0.0 else Foot.RIGHT
        self._crossover = crossover
        if crossover:
            swing = swing.other
        feet = {Foot.LEFT: left, Foot.RIGHT: right}
        stance = feet[swing.other]
        self._width = abs(relative_offset(stance, feet[swing].position)[1])
        duration = self.step_duration
        template = [Step(1, swing, duration, feet[swing].position, feet[swing].yaw,
                         swing_height=p.swing_height)]
        for index in range(2, 1 + (1 if crossover else p.steps)):  # the feet in turn (placed by _plan)
            template.append(Step(index, swing.other if index % 2 == 0 else swing, duration, stance.position,
                                 stance.yaw, swing_height=p.swing_height))
        single = duration - p.double_support_duration
        return self._plan(xi, omega, p.sway_duration + single, stance, template, p.double_support_duration)

    def _plan(self, xi: np.ndarray, omega: float, remaining: float, stance: FootPose, steps: Sequence[Step],
              double_support: float) -> tuple:
        """``steps`` placed in turn, the first from the sole ``stance`` landing in ``remaining`` [s], each
        where the DCM will be at its touchdown with the ZMP on its stance sole's point nearest the DCM (never
        narrower than the recovery's stance width), within the step limits."""
        placed = []
        time = remaining
        limits = self.walk_limits()
        for step in steps:
            z = _clamp_to_sole(xi, stance, self.sole)
            outside = float(np.linalg.norm(xi - z)) > 1e-9
            xi = z + (xi - z) * math.exp(omega * time) if outside else xi
            x, y, _ = relative_offset(stance, (float(xi[0]), float(xi[1]), stance.position[2]))
            side = 1.0 if step.foot is Foot.LEFT else -1.0
            c, s = math.cos(stance.yaw), math.sin(stance.yaw)
            if self._crossover:  # across the stance sole, in front of it
                x += self.params.crossover_forward_offset
                y = -side * max(-side * y, self.params.min_crossover_width)
            else:
                y = side * max(side * y, self._width)
                if not outside:
                    x = 0.0  # the DCM is held by the stance sole: the foot comes beside it
            position = (stance.position[0] + c * x - s * y, stance.position[1] + s * x + c * y,
                        step.position[2])
            landed = saturate_step(step.replace(position=position, yaw=stance.yaw), stance, limits)[0]
            placed.append(landed)
            stance = FootPose.of_step(landed)
            time = step.duration - double_support
        return tuple(placed)


__all__ = ["RecoveryStepParameters", "RecoveryStepper", "check_crossing", "distance_outside",
           "outside_offset", "support_hull"]
