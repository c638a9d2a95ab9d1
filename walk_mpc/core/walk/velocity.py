"""Velocity walking: a planar twist (vx, vy, wz) turned into footsteps for the walk behavior's step queue.

The gait moves a *center frame* (midpoint of the soles, their yaw) by the commanded twist over each
step: step ``k`` puts its foot half the stance ``width`` to the side of the center ``c_k``, where
``c_k`` is ``c_{k-1}`` moved by ``(vx, vy, wz) * step_duration`` in its own frame (heading at mid-turn).
So the center's mean speed is the command, and a zero command gives the *closing step*: the foot
lands beside the other one at the nominal width with the same yaw (the stance is closed, the walk can
end). The center of a step is recovered from the step alone (its sole moved half a width inwards),
so the next step follows any previous one: a velocity walk's own, or a Walk goal's it takes over.

Contract with :class:`~walk_mpc.core.walk.behavior.WalkBehavior` (driven by
:class:`~walk_mpc.core.control.walk_supervisor.WalkSupervisor`):

* From Stand, a fresh nonzero command starts an open walk with ``lookahead`` steps from the measured
  feet (:meth:`VelocityWalk.start_steps`; the walk runs with that look-ahead, see the behavior's
  contract). The first foot is the one on the side of the motion (left for straight walks).
* While walking, exactly one uncommitted step is kept in the queue, index ``next_step_index_needed``
  (:meth:`VelocityWalk.next_steps`): it follows the latest command and is replaced until the
  behavior commits it at the next touchdown. Committed steps never change; a new command therefore
  shows in the step committed at the next touchdown: at most ``lookahead`` steps (2 by default) land
  on the old command after a change.
* A command older than ``timeout`` (sensor time) or below the dead band is zero: the queued step
  becomes the closing step with ``plan_complete``, and the walk ends normally after it (result NONE,
  back in Stand). A closing step already committed ends the plan as it is.
* Commands are clamped to the speed limits, each component and then together (the twist is scaled
  into the ellipsoid whose semi-axes are the three maxima: full speed on one axis, 71 % of each on two;
  on MuJoCo Talos fell at the clamped corner (-0.1, -0.05, -0.4) without it), and
  :meth:`VelocityWalk.command` reports it; then every
  generated step is checked against the behavior's :class:`~walk_mpc.core.walk.saturation.StepLimits`
  relative to its predecessor: the twist is scaled down (bisection) until no limit saturates, so the
  behavior never modifies a velocity step (``scale`` < 1 reports it). A non-finite command raises
  :class:`~walk_mpc.core.errors.InputError` naming the component and changes nothing.

Pure Python: no ROS import.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.params import check_int_range, check_nonnegative, check_positive
from walk_mpc.core.walk.behavior import NUM_REQUIRED_WALK_STEPS
from walk_mpc.core.walk.footsteps import stance_center
from walk_mpc.core.walk.saturation import SaturationFlags, StepLimits, relative_offset, saturate_step
from walk_mpc.core.walk.step import Foot, Step
from walk_mpc.core.walk.timeline import FootPose, GaitTiming

#: Bisection iterations when the twist must be scaled into the step limits (scale resolution 2^-20).
SCALE_ITERATIONS = 20

Twist = Tuple[float, float, float]  # vx [m/s], vy [m/s], wz [rad/s] in the robot's (center) frame


@dataclasses.dataclass(frozen=True)
class VelocityWalkParameters:
    """Parameters of :class:`VelocityWalk`.

    Attributes:
        max_forward_speed: Largest forward speed of the stance center [m/s].
        max_backward_speed: Largest backward speed [m/s] (positive number).
        max_lateral_speed: Largest sideways speed [m/s].
        max_yaw_rate: Largest turning rate [rad/s].
        step_duration: Duration of each step, swing plus double support [s].
        swing_height: Swing apex [m].
        width: Lateral distance between the soles [m]; 0: the stance width measured when the velocity walk
            starts (kept within the step limits).
        timeout: Sensor time [s] after the last command at which it counts as zero (the walk stops).
        lookahead: Steps the velocity walk commits ahead (1..4; Atlas goals commit 4): a new command shows
            at the latest in the step after ``lookahead`` committed ones.
        deadband_speed: Speeds below this [m/s] (each of vx, vy) count as zero.
        deadband_yaw_rate: Turning rates below this [rad/s] count as zero.
    """

    max_forward_speed: float = 0.25
    max_backward_speed: float = 0.1
    max_lateral_speed: float = 0.05
    max_yaw_rate: float = 0.4
    step_duration: float = 0.8
    swing_height: float = 0.05
    width: float = 0.0
    timeout: float = 0.5
    lookahead: int = 2
    deadband_speed: float = 0.005
    deadband_yaw_rate: float = 0.01

    def __post_init__(self) -> None:
        check_positive("max_forward_speed", self.max_forward_speed)
        check_nonnegative("max_backward_speed", self.max_backward_speed)
        check_nonnegative("max_lateral_speed", self.max_lateral_speed)
        check_nonnegative("max_yaw_rate", self.max_yaw_rate)
        check_positive("step_duration", self.step_duration)
        check_nonnegative("swing_height", self.swing_height)
        check_nonnegative("width", self.width)
        check_positive("timeout", self.timeout)
        check_int_range("lookahead", self.lookahead, 1, NUM_REQUIRED_WALK_STEPS)
        check_nonnegative("deadband_speed", self.deadband_speed)
        check_nonnegative("deadband_yaw_rate", self.deadband_yaw_rate)

    def check_against(self, limits: StepLimits, timing: GaitTiming) -> None:
        """Raise :class:`ParameterError` if the gait breaks the behavior's step limits or timing."""
        if not limits.min_duration <= self.step_duration <= limits.max_duration:
            raise ParameterError("step_duration", self.step_duration,
                                 f"a duration in [{limits.min_duration}, {limits.max_duration}] s")
        if self.step_duration <= timing.double_support_duration:
            raise ParameterError("step_duration", self.step_duration,
                                 f"more than the double support {timing.double_support_duration} s")
        if self.swing_height > limits.max_swing_height:
            raise ParameterError("swing_height", self.swing_height,
                                 f"at most the step limits' max_swing_height {limits.max_swing_height} m")
        if self.width and not limits.min_width <= self.width <= limits.max_width:
            raise ParameterError("width", self.width,
                                 f"0 (measured) or a width in [{limits.min_width}, {limits.max_width}] m")


@dataclasses.dataclass(frozen=True)
class VelocityCommand:
    """A command as taken by :meth:`VelocityWalk.command`.

    Attributes:
        requested: The twist as received (vx [m/s], vy [m/s], wz [rad/s]).
        twist: The twist applied, within the speed limits.
        t: Time of the command [s] (sensor time).
        clamped: Names of the components that were clamped (empty: none).
    """

    requested: Twist
    twist: Twist
    t: float
    clamped: Tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """What was clamped, for the log ('' when nothing was)."""
        if not self.clamped:
            return ""
        fmt = ", ".join(f"{v:.4g}" for v in self.requested)
        got = ", ".join(f"{v:.4g}" for v in self.twist)
        return f"cmd_vel ({fmt}) clamped to ({got}) [m/s, m/s, rad/s] by {', '.join(self.clamped)}"


def _center_of(step: Step, width: float) -> Tuple[float, float, float, float]:
    """Center frame of a step: its sole moved half a width inwards (x, y, z [m], yaw [rad])."""
    inward = -0.5 * width if step.foot is Foot.LEFT else 0.5 * width
    c, s = math.cos(step.yaw), math.sin(step.yaw)
    x, y, z = step.position
    return x - s * inward, y + c * inward, z, step.yaw


class VelocityWalk:
    """Streams footsteps that follow a velocity command (see the module docstring for the contract).

    Args:
        params: Speed limits, gait and timeout.
        limits: The walk behavior's step limits (every generated step stays within them).
        timing: The walk behavior's gait timing.

    Raises:
        ParameterError: A gait the behavior's limits or timing do not allow.
    """

    Parameters = VelocityWalkParameters

    def __init__(self, params: Optional[VelocityWalkParameters] = None, limits: StepLimits = StepLimits(),
                 timing: GaitTiming = GaitTiming()) -> None:
        self.params = params if params is not None else VelocityWalkParameters()
        if not isinstance(self.params, VelocityWalkParameters):
            raise ParameterError("params", self.params, "a VelocityWalkParameters")
        self.params.check_against(limits, timing)
        self.limits = limits
        self.reset()

    def reset(self) -> None:
        """No command, no walk."""
        self._command: Optional[VelocityCommand] = None
        self._width: Optional[float] = None
        self._closing: dict = {}  # index -> closing step generated in this walk
        self.scale = 1.0  # share of the commanded twist the last generated step(s) could follow

    # ------------------------------------------------------------------ commands
    @property
    def last_command(self) -> Optional[VelocityCommand]:
        """The last command taken (None before the first one or after :meth:`clear`)."""
        return self._command

    def command(self, vx: float, vy: float, wz: float, t: float) -> VelocityCommand:
        """Take a command at time ``t`` [s] (sensor time), clamped to the speed limits.

        Args:
            vx: Forward speed [m/s].
            vy: Leftward speed [m/s].
            wz: Turning rate [rad/s], positive to the left.
            t: Time of the command [s].

        Raises:
            InputError: A component that is not a finite number (nothing changed).
        """
        for name, value in (("vx", vx), ("vy", vy), ("wz", wz), ("t", t)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                unit = "rad/s" if name == "wz" else "s" if name == "t" else "m/s"
                raise InputError(f"cmd_vel {name}", value, f"a finite number [{unit}]")
        p = self.params
        bounds = ((-p.max_backward_speed, p.max_forward_speed,
                   "max_backward_speed" if vx < 0 else "max_forward_speed"),
                  (-p.max_lateral_speed, p.max_lateral_speed, "max_lateral_speed"),
                  (-p.max_yaw_rate, p.max_yaw_rate, "max_yaw_rate"))
        twist, clamped, share = [], [], 0.0
        for value, (low, high, limit) in zip((vx, vy, wz), bounds):
            value = float(value)
            within = min(high, max(low, value))
            if within != value:
                clamped.append(f"{limit} {high if value > high else -low:g}")
            twist.append(within)
            bound = high if within > 0.0 else -low
            share += (within / bound) ** 2 if bound > 0.0 else 0.0
        if share > 1.0 + 1e-12:  # combined motions: within the ellipsoid of the three maxima
            twist = [v / math.sqrt(share) for v in twist]
            clamped.append(f"the combined limit ({100 / math.sqrt(share):.0f} % of each)")
        self._command = VelocityCommand((float(vx), float(vy), float(wz)), tuple(twist), float(t),
                                        tuple(clamped))
        return self._command

    def clear(self) -> None:
        """Forget the command (a Walk goal took over): the velocity walk closes its stance and stops."""
        self._command = None

    def twist_at(self, t: float) -> Twist:
        """The twist to follow at time ``t`` [s]: the command, zero once older than ``timeout`` or in the dead
        band."""
        command = self._command
        if command is None or t - command.t > self.params.timeout:
            return (0.0, 0.0, 0.0)
        vx, vy, wz = command.twist
        p = self.params
        if abs(vx) < p.deadband_speed and abs(vy) < p.deadband_speed and abs(wz) < p.deadband_yaw_rate:
            return (0.0, 0.0, 0.0)
        return command.twist

    def active(self, t: float) -> bool:
        """Whether the command at ``t`` [s] asks to move (fresh and outside the dead band)."""
        return self.twist_at(t) != (0.0, 0.0, 0.0)

    def timed_out(self, t: float) -> bool:
        """Whether a command was given and is older than ``timeout`` at ``t`` [s]."""
        return self._command is not None and t - self._command.t > self.params.timeout

    # ------------------------------------------------------------------ steps
    @property
    def width(self) -> Optional[float]:
        """Stance width of the current velocity walk [m] (None before one started)."""
        return self._width

    def start_steps(self, t: float, left: FootPose, right: FootPose) -> Tuple[Step, ...]:
        """The first ``lookahead`` steps of a walk from the standing soles (empty if the command is zero).

        Args:
            t: Time [s] (sensor time).
            left: Measured left sole pose.
            right: Measured right sole pose.
        """
        self._begin(left, right)
        twist = self.twist_at(t)
        if twist == (0.0, 0.0, 0.0):
            return ()
        vx, vy, wz = twist
        if abs(vy) > 1e-9:
            first = Foot.LEFT if vy > 0.0 else Foot.RIGHT
        else:
            first = Foot.RIGHT if wz < -1e-9 else Foot.LEFT
        center = stance_center(left, right)
        feet = {Foot.LEFT: left, Foot.RIGHT: right}
        return self._scaled(twist, lambda s: self._chain(center, first, feet[first.other], 1, s))

    def takeover_step(self, t: float, previous: Step, left: FootPose, right: FootPose) -> Tuple[Step, ...]:
        """The step that follows ``previous`` (the last committed step of a walk the velocity walk takes
        over), its width taken from the soles after it; empty if the command is zero."""
        self._begin(left, right)
        if not self.active(t):
            return ()
        return self.next_steps(t, previous)[0]

    def next_steps(self, t: float, previous: Step) -> Tuple[Tuple[Step, ...], bool]:
        """What to queue after the last committed step ``previous`` at time ``t`` [s].

        Returns:
            ``(steps, plan_complete)``: the step after ``previous`` following the command (plan open); with
            a zero command the closing step (plan complete), or ``previous`` itself when it is already a
            closing step of this walk (the plan ends with it).
        """
        if self._width is None:
            raise InputError("previous", previous, "a step of a velocity walk begun by start_steps or "
                             "takeover_step")
        twist = self.twist_at(t)
        stopping = twist == (0.0, 0.0, 0.0)
        if stopping and self._closing.get(previous.step_index) == previous:
            return (previous,), True
        center = _center_of(previous, self._width)
        steps = self._scaled(twist, lambda s: self._chain(
            center, previous.foot.other, FootPose.of_step(previous), previous.step_index + 1, s, count=1))
        if stopping:
            self._closing[steps[0].step_index] = steps[0]
        return steps, stopping

    # ------------------------------------------------------------------ geometry
    def stance_width(self, left: FootPose, right: FootPose) -> float:
        """The stance width [m]: ``width``, or (0) the lateral distance of the soles, within the limits."""
        width = self.params.width
        if not width:
            x, y, z, yaw = stance_center(left, right)
            width = abs(relative_offset(FootPose((x, y, z), yaw), left.position)[1]
                        - relative_offset(FootPose((x, y, z), yaw), right.position)[1])
            width = min(self.limits.max_width, max(self.limits.min_width, width))
        return width

    def _begin(self, left: FootPose, right: FootPose) -> None:
        """A new velocity walk: its width (:meth:`stance_width`), no closing step yet."""
        self._closing = {}
        self._width = self.stance_width(left, right)

    def _chain(self, center: Tuple[float, float, float, float], foot: Foot, previous: FootPose, index: int,
               twist: Twist, count: Optional[int] = None) -> Tuple[Tuple[Step, ...], bool]:
        """``count`` (default ``lookahead``) steps from ``center``, and whether all are within the limits."""
        p = self.params
        vx, vy, wz = twist
        x, y, z, yaw = center
        steps, valid = [], True
        for k in range(p.lookahead if count is None else count):
            heading = yaw + 0.5 * wz * p.step_duration
            c, s = math.cos(heading), math.sin(heading)
            x += (c * vx - s * vy) * p.step_duration
            y += (s * vx + c * vy) * p.step_duration
            yaw += wz * p.step_duration
            side = 0.5 * self._width if foot is Foot.LEFT else -0.5 * self._width
            position = (x - math.sin(yaw) * side, y + math.cos(yaw) * side, z)
            step = Step(index + k, foot, p.step_duration, position, yaw, swing_height=p.swing_height)
            valid = valid and saturate_step(step, previous, self.limits)[1] == SaturationFlags.NONE
            steps.append(step)
            previous, foot = FootPose.of_step(step), foot.other
        return tuple(steps), valid

    def _scaled(self, twist: Twist, chain) -> Tuple[Step, ...]:
        """The steps of the largest share of ``twist`` (1, else by bisection) whose steps are all within the
        limits (``scale`` records it; the zero twist's steps when even those saturate)."""
        steps, valid = chain(twist)
        if valid:
            self.scale = 1.0
            return steps
        low, high = 0.0, 1.0
        best = chain((0.0, 0.0, 0.0))[0]
        for _ in range(SCALE_ITERATIONS):
            mid = 0.5 * (low + high)
            candidate, ok = chain(tuple(mid * v for v in twist))
            if ok:
                low, best = mid, candidate
            else:
                high = mid
        self.scale = low
        return best


__all__ = ["VelocityCommand", "VelocityWalk", "VelocityWalkParameters"]
