"""N-step capturability of the linear inverted pendulum with rectangular soles and box step limits.

The question answered (Koolen, Pratt et al., "Capturability-based analysis and control of legged locomotion",
IJRR 2012, their N-step recursion, here with finite soles, a double support and alternating feet): can a
LIPM (``omega = sqrt(g / h)`` [1/s]) whose zero-moment point (ZMP) may be anywhere inside its support come to
rest within ``N`` steps, each step's foot placed within box step limits relative to the stance sole?

Model (the LIPM, exact for it):

* The divergent component of motion (DCM) ``xi = c + c_dot / omega`` obeys ``xi_dot = omega (xi - p)``: over a
  time ``T`` with the ZMP ``p`` anywhere in an interval ``[a, b]`` (any path), the DCM ends anywhere in
  ``[b + (xi - b) e, a + (xi - a) e]``, ``e = exp(omega T)``; so the DCMs that can reach a target interval
  ``[L, U]`` are ``[a + (L - a) / e, b + (U - b) / e]`` (:func:`zmp_preimage`).
* A step: the swinging foot lands (instantaneously, at a chosen place) at the current single support's end
  (``time_to_touchdown`` from now); then a double support of ``double_support_duration`` with the ZMP anywhere
  in the bounding box of both soles, then a single support of ``single_support_duration`` on the landed sole
  while the other foot swings (the shortest step the limits allow: touchdown to touchdown
  ``double + single``). The feet alternate: a left step lands ``[min_width, max_width]`` to the left of the
  right sole (or, with a crossover, ``[min_crossover_width, max_crossover_width]`` to its right), a right step
  mirrored.
* Captured: with 0 steps the DCM is inside the stance sole (the ZMP holds it there); after the ``j``-th step
  (``j >= 1``) the DCM is inside the double support's box at that touchdown (the robot stands on both feet).

**Per axis, exact for boxes.** When the soles are rectangles aligned with the stance sole's frame (no yaw
between the steps) and the step limits are boxes in that frame, the x and y motions decouple: the ZMP box is
a product of intervals, so is every foot choice, and with the touchdown times fixed the set of DCMs capturable
with exactly ``j`` steps is a product ``X_j x Y_j`` of unions of intervals (:class:`CaptureRegion`). A state
is ``N``-step capturable when it lies in ``X_j x Y_j`` for some ``j <= N`` (the same ``j`` on both axes). The
union over the step's place of a continuum of intervals is an interval because its ends move monotonically
with the place: no sampling. Two choices make it an over-approximation (optimistic) rather than exact: the
double support's ZMP box is the bounding box of the two soles (their convex hull is smaller when they are
offset in both x and y), and the capture after a step is the DCM in that box. Varying touchdown times couple
the axes: :func:`largest_capturable_impulse` tries each of a given list.

**An upper bound.** The model is optimistic about what a robot under the same limits can do: contacts are
rigid and the ZMP reaches the sole's edges and corners at once (no rolling over an edge, no CoP tracking
lag), the swinging leg has no mass and lands anywhere within the limits at the given times, the swing foot is
assumed to carry weight the instant it lands, friction is unlimited. Left out the other way: angular
momentum (a hip or arm strategy) and CoM height changes, which a real robot can use a little.

**Pushes.** A horizontal force ``F`` over ``duration`` ``D`` (impulse ``J = F D``) adds to the DCM at the
push's end ``J / (m omega) (exp(omega D) - 1) / (omega D)``, whatever the ZMP does meanwhile (the LIPM is
linear): the same as an instantaneous impulse at the push's middle scaled by ``sinh(omega D / 2) /
(omega D / 2)`` (1.005 for 0.1 s on Talos). :func:`push_dcm_shift` applies that (``duration`` 0: the
instantaneous impulse).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Sequence, Tuple

import numpy as np

from walk_mpc.core._validate import finite_number, finite_vector
from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.params import check_finite, check_int_range, check_less, check_nonnegative, check_positive

#: The largest number of steps a region is computed for.
MAX_STEPS = 10

Interval = Tuple[float, float]
Intervals = Tuple[Interval, ...]


@dataclasses.dataclass(frozen=True)
class CapturabilityParameters:
    """The LIPM, the soles and the step limits of a capturability analysis.

    Attributes:
        omega: LIPM natural frequency ``sqrt(g / h)`` [1/s] (h the CoM height above the soles [m]).
        mass: Robot mass [kg] (impulses to velocities).
        sole_front: Sole extent ahead of the sole frame [m] (where the ZMP can be: the real sole, no margin).
        sole_back: Sole extent behind the sole frame [m].
        sole_left: Sole extent to the sole frame's left [m].
        sole_right: Sole extent to its right [m].
        max_forward: Largest forward offset [m] of a step's sole frame from the stance sole's.
        max_backward: Largest backward offset [m] (a positive number).
        min_width: Smallest lateral offset [m] of a step from the stance sole toward the stepping foot's side
            (a left step lands at least this far to the left of the right sole); may be 0 or negative only
            with ``max_crossover_width`` 0 (a negative ``min_width`` is a crossing of its own).
        max_width: Largest lateral offset [m] toward the stepping foot's side.
        min_crossover_width: Smallest lateral offset [m] of a crossover step, to the other side of the stance
            sole (with ``max_crossover_width``).
        max_crossover_width: Largest lateral offset [m] of a crossover step; 0: no crossing.
        single_support_duration: Single support (swing) time [s] of every step after the first (the shortest
            the limits allow: the best for capture whenever the reach beats the sole).
        double_support_duration: Double support time [s] after every touchdown (the ZMP in both soles' box).
    """

    omega: float
    mass: float
    sole_front: float = 0.1
    sole_back: float = 0.1
    sole_left: float = 0.065
    sole_right: float = 0.065
    max_forward: float = 0.3
    max_backward: float = 0.2
    min_width: float = 0.12
    max_width: float = 0.4
    min_crossover_width: float = 0.0
    max_crossover_width: float = 0.0
    single_support_duration: float = 0.1
    double_support_duration: float = 0.3

    def __post_init__(self) -> None:
        check_positive("omega", self.omega)
        check_positive("mass", self.mass)
        for name in ("sole_front", "sole_back", "sole_left", "sole_right", "max_backward",
                     "min_crossover_width", "max_crossover_width", "single_support_duration",
                     "double_support_duration"):
            check_nonnegative(name, getattr(self, name))
        for name in ("max_forward", "min_width", "max_width"):
            check_finite(name, getattr(self, name))
        check_positive("sole_front + sole_back", self.sole_front + self.sole_back)
        check_positive("sole_left + sole_right", self.sole_left + self.sole_right)
        if self.max_forward < -self.max_backward:
            raise ParameterError("max_forward", self.max_forward,
                                 f"at least -max_backward = {-self.max_backward!r} m")
        if self.min_width > self.max_width:
            raise ParameterError("min_width", self.min_width, f"at most max_width = {self.max_width!r} m")
        if self.max_crossover_width > 0.0:
            check_less("min_crossover_width", self.min_crossover_width, "max_crossover_width",
                       self.max_crossover_width)
            if self.min_width < 0.0:
                raise ParameterError("min_width", self.min_width,
                                     ">= 0 m with a crossover (max_crossover_width > 0)")

    def sole_x(self) -> Interval:
        """The sole's x extent [m] in its frame."""
        return (-self.sole_back, self.sole_front)

    def sole_y(self) -> Interval:
        """The sole's y extent [m] in its frame."""
        return (-self.sole_right, self.sole_left)

    def reach_x(self) -> Intervals:
        """A step's x offsets [m] from the stance sole."""
        return ((-self.max_backward, self.max_forward),)

    def reach_y(self, side: int) -> Intervals:
        """A step's y offsets [m] from the stance sole; ``side`` +1: a left step, -1: a right step."""
        if side == 1:
            out = [(self.min_width, self.max_width)]
            if self.max_crossover_width > 0.0:
                out.append((-self.max_crossover_width, -self.min_crossover_width))
        else:
            out = [(-self.max_width, -self.min_width)]
            if self.max_crossover_width > 0.0:
                out.append((self.min_crossover_width, self.max_crossover_width))
        return merge(out)


@dataclasses.dataclass(frozen=True)
class CaptureRegion:
    """The DCMs [m] (x, y, in the stance sole's frame) capturable with exactly ``j`` steps, ``j = 0 ..
    len(x) - 1``: ``x[j]`` and ``y[j]`` unions of closed intervals (sorted, disjoint)."""

    x: Tuple[Intervals, ...]
    y: Tuple[Intervals, ...]

    @property
    def steps(self) -> int:
        """The largest number of steps of the region."""
        return len(self.x) - 1

    def capturable_steps(self, dcm_in_stance) -> int:
        """The fewest steps (0 .. :attr:`steps`) that capture the DCM ``dcm_in_stance`` (x, y) [m] in the
        stance sole's frame; -1 when none does.

        Raises:
            InputError, ShapeError: On a malformed DCM.
        """
        xi = finite_vector("dcm_in_stance", dcm_in_stance, 2)
        for j in range(len(self.x)):
            if contains(self.x[j], float(xi[0])) and contains(self.y[j], float(xi[1])):
                return j
        return -1

    def contains(self, dcm_in_stance) -> bool:
        """Whether the DCM (x, y) [m] in the stance sole's frame is capturable with at most :attr:`steps`."""
        return self.capturable_steps(dcm_in_stance) >= 0


def merge(intervals: Iterable[Interval], tolerance: float = 1e-12) -> Intervals:
    """Sorted disjoint union of closed intervals (``lo <= hi``; empty ones dropped)."""
    ordered = sorted((float(lo), float(hi)) for lo, hi in intervals if lo <= hi)
    out: list = []
    for lo, hi in ordered:
        if out and lo <= out[-1][1] + tolerance:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def contains(intervals: Intervals, value: float, tolerance: float = 1e-12) -> bool:
    """Whether ``value`` lies in the union of closed ``intervals``."""
    return any(lo - tolerance <= value <= hi + tolerance for lo, hi in intervals)


def zmp_preimage(target: Intervals, zmp: Interval, duration: float, omega: float) -> Intervals:
    """The DCMs [m] (one axis) from which a ZMP anywhere in ``zmp`` = (a, b) [m] for ``duration`` [s] can
    bring the DCM into ``target``: each (L, U) to ``(a + (L - a) / e, b + (U - b) / e)``,
    ``e = exp(omega duration)`` (never empty: the ZMP's range of end points is as wide as the sole at least).
    """
    a, b = zmp
    shrink = math.exp(-omega * duration)
    return merge((a + (lo - a) * shrink, b + (hi - b) * shrink) for lo, hi in target)


def _landed_stop(reach: Intervals, sole: Interval) -> Intervals:
    """DCMs (stance frame, at a touchdown) inside the double support's box for some step of ``reach``: the box
    of the soles at 0 and ``d`` is ``[a + min(0, d), b + max(0, d)]``, monotone in ``d``."""
    a, b = sole
    return merge((a + min(0.0, d0), b + max(0.0, d1)) for d0, d1 in reach)


def _landed_continue(reach: Intervals, sole: Interval, after: Intervals, double: float,
                     omega: float) -> Intervals:
    """DCMs (stance frame, at a touchdown) from which some step ``d`` of ``reach`` and the double support that
    follows (the ZMP in the box ``[a + min(0, d), b + max(0, d)]`` for ``double`` [s]) bring the DCM into
    ``d + after`` (``after``: the next single support's region in the landed sole's frame). Both ends of the
    preimage grow continuously with ``d``, so the union over ``[d0, d1]`` is one interval per pair."""
    a, b = sole
    shrink = math.exp(-omega * double)

    def low(d: float, lo: float) -> float:
        base = a + min(0.0, d)
        return base + (d + lo - base) * shrink

    def high(d: float, hi: float) -> float:
        base = b + max(0.0, d)
        return base + (d + hi - base) * shrink

    return merge((low(d0, lo), high(d1, hi)) for d0, d1 in reach for lo, hi in after)


def _check_steps(steps: int) -> None:
    check_int_range("steps", steps, 0, MAX_STEPS)


def _check_side(swing_side: int) -> None:
    if swing_side not in (1, -1) or isinstance(swing_side, bool):
        raise InputError("swing_side", swing_side, "+1 (the left foot swings) or -1 (the right foot swings)")


def _landed_regions(params: CapturabilityParameters, swing_side: int, steps: int) -> tuple:
    """Per axis, for ``j = 1 .. steps``: the DCMs (stance frame) at the swinging foot's touchdown capturable
    with exactly ``j`` steps (this touchdown the first)."""
    omega, single, double = params.omega, params.single_support_duration, params.double_support_duration
    out_x: list = [()] * (steps + 1)
    out_y: list = [()] * (steps + 1)
    # landed[(axis, side)][j]: at the touchdown of a ``side`` step, exactly j steps left (this one included)
    landed = {}
    for side in (1, -1):
        landed[("x", side)] = [(), _landed_stop(params.reach_x(), params.sole_x())]
        landed[("y", side)] = [(), _landed_stop(params.reach_y(side), params.sole_y())]
    for j in range(2, steps + 1):
        for side in (1, -1):
            for axis, reach, sole in (("x", params.reach_x(), params.sole_x()),
                                      ("y", params.reach_y(side), params.sole_y())):
                # after this touchdown the landed foot stands while the other one (the -side step) swings
                after = zmp_preimage(landed[(axis, -side)][j - 1], sole, single, omega)
                landed[(axis, side)].append(_landed_continue(reach, sole, after, double, omega))
    for j in range(1, steps + 1):
        out_x[j] = landed[("x", swing_side)][j]
        out_y[j] = landed[("y", swing_side)][j]
    return out_x, out_y


def capture_region(params: CapturabilityParameters, swing_side: int, time_to_touchdown: float,
                   steps: int) -> CaptureRegion:
    """The DCMs capturable now in single support (stance sole frame) with 0 .. ``steps`` steps.

    Args:
        params: The LIPM, soles and step limits.
        swing_side: +1 when the left foot swings (it lands to the stance sole's left), -1 the right.
        time_to_touchdown: Time [s] until the swinging foot lands (the ZMP in the stance sole until then).
        steps: The most steps taken (0 .. :data:`MAX_STEPS`).

    Raises:
        ParameterError: On ``steps`` out of range; InputError: on a bad side or time.
    """
    _check_steps(steps)
    _check_side(swing_side)
    tau = finite_number("time_to_touchdown", time_to_touchdown)
    if tau < 0.0:
        raise InputError("time_to_touchdown", time_to_touchdown, "a time >= 0 s")
    landed_x, landed_y = _landed_regions(params, swing_side, steps)
    xs = [merge([params.sole_x()])]
    ys = [merge([params.sole_y()])]
    for j in range(1, steps + 1):
        xs.append(zmp_preimage(landed_x[j], params.sole_x(), tau, params.omega))
        ys.append(zmp_preimage(landed_y[j], params.sole_y(), tau, params.omega))
    return CaptureRegion(tuple(xs), tuple(ys))


def standing_capture_region(params: CapturabilityParameters, swing_side: int, other_sole_offset,
                            sway_duration: float, swing_duration: float, steps: int) -> CaptureRegion:
    """The DCMs capturable now in double support (stance sole frame: the sole that stays) with 0 .. ``steps``
    steps, the first by the other foot: a weight shift of ``sway_duration`` [s] with the ZMP in both soles'
    box, then its swing of ``swing_duration`` [s] on the stance sole alone.

    Args:
        params: The LIPM, soles and step limits.
        swing_side: +1 when the left foot steps first, -1 the right.
        other_sole_offset: The stepping foot's sole (x, y) [m] in the stance sole's frame (no yaw between).
        sway_duration: Double support before the lift-off [s].
        swing_duration: Swing time of the first step [s].
        steps: The most steps taken (0 .. :data:`MAX_STEPS`).

    Raises:
        ParameterError, InputError: On values out of their domain.
    """
    _check_steps(steps)
    _check_side(swing_side)
    offset = finite_vector("other_sole_offset", other_sole_offset, 2)
    sway = finite_number("sway_duration", sway_duration)
    swing = finite_number("swing_duration", swing_duration)
    if sway < 0.0 or swing < 0.0:
        raise InputError("sway_duration, swing_duration", (sway_duration, swing_duration), "times >= 0 s")
    single = capture_region(params, swing_side, swing, steps)
    box_x = (min(params.sole_x()[0], params.sole_x()[0] + offset[0]),
             max(params.sole_x()[1], params.sole_x()[1] + offset[0]))
    box_y = (min(params.sole_y()[0], params.sole_y()[0] + offset[1]),
             max(params.sole_y()[1], params.sole_y()[1] + offset[1]))
    xs = [merge([box_x])]
    ys = [merge([box_y])]
    for j in range(1, steps + 1):
        xs.append(zmp_preimage(single.x[j], box_x, sway, params.omega))
        ys.append(zmp_preimage(single.y[j], box_y, sway, params.omega))
    return CaptureRegion(tuple(xs), tuple(ys))


def is_capturable(params: CapturabilityParameters, dcm_in_stance, swing_side: int, time_to_touchdown: float,
                  steps: int) -> bool:
    """Whether the DCM ``dcm_in_stance`` (x, y) [m] in the stance sole's frame, in single support with the
    ``swing_side`` foot (+1 left, -1 right) landing in ``time_to_touchdown`` [s], is capturable with at most
    ``steps`` steps (:func:`capture_region`)."""
    return capture_region(params, swing_side, time_to_touchdown, steps).contains(dcm_in_stance)


def dcm_of(com_position, com_velocity, omega: float) -> np.ndarray:
    """The DCM ``c + c_dot / omega`` (x, y) [m] of a CoM position (x, y) [m] and velocity (x, y) [m/s]."""
    if not (isinstance(omega, (int, float)) and math.isfinite(omega) and omega > 0.0):
        raise InputError("omega", omega, "a finite number > 0 [1/s]")
    return (finite_vector("com_position", com_position, 2)
            + finite_vector("com_velocity", com_velocity, 2) / float(omega))


def push_dcm_shift(impulse: float, mass: float, omega: float, duration: float) -> float:
    """The DCM shift [m] of a push of ``impulse`` [N s] over ``duration`` [s] (constant force), as an
    instantaneous impulse at the push's middle: ``impulse / (mass omega) sinh(omega D / 2) / (omega D / 2)``
    (exact for the LIPM's DCM; ``duration`` 0: the instantaneous impulse, ``impulse / (mass omega)``)."""
    if finite_number("duration", duration) < 0.0:
        raise InputError("duration", duration, "a time >= 0 s")
    half = 0.5 * omega * duration
    scale = math.sinh(half) / half if half > 1e-9 else 1.0
    return finite_number("impulse", impulse) / (mass * omega) * scale


def largest_capturable_impulse(params: CapturabilityParameters, dcm_in_stance, direction,
                               swing_side: int, touchdown_times: Sequence[float], steps: int,
                               push_duration: float = 0.1, max_impulse: float = 200.0,
                               resolution: float = 0.01) -> float:
    """The largest push [N s] in ``direction`` every smaller one of which leaves the state capturable.

    The state is the nominal DCM at the push's middle (``dcm_in_stance``, x, y [m], stance sole frame); a push
    ``J`` moves it by :func:`push_dcm_shift` along ``direction`` (x, y; normalised). It is capturable when it
    is so for one of ``touchdown_times`` (the times [s] from the push's middle at which the swinging foot may
    land: one, the planned touchdown; several, step timing). Impulses are scanned 0.5 N s apart from 0 up to
    the first that is not capturable, then bisected to ``resolution`` [N s] (a capture region can be a union
    of intervals: the first loss counts).

    Returns:
        The impulse [N s]; 0 when the nominal state itself is not capturable, ``max_impulse`` when nothing
        up to it was lost.

    Raises:
        InputError: On a zero direction, no touchdown times, or a malformed state.
    """
    xi = finite_vector("dcm_in_stance", dcm_in_stance, 2)
    unit = finite_vector("direction", direction, 2)
    norm = float(np.linalg.norm(unit))
    if norm < 1e-9:
        raise InputError("direction", direction, "a non-zero horizontal direction")
    unit = unit / norm
    times = [finite_number("touchdown_times", t) for t in touchdown_times]
    if not times or min(times) < 0.0:
        raise InputError("touchdown_times", touchdown_times, "at least one time >= 0 s")
    regions = [capture_region(params, swing_side, t, steps) for t in times]
    per_impulse = push_dcm_shift(1.0, params.mass, params.omega, push_duration)

    def capturable(impulse: float) -> bool:
        point = xi + impulse * per_impulse * unit
        return any(region.contains(point) for region in regions)

    if not capturable(0.0):
        return 0.0
    low, high = 0.0, None
    probe = 0.5
    while probe <= max_impulse + 1e-9:
        if not capturable(probe):
            high = probe
            break
        low = probe
        probe += 0.5
    if high is None:
        return float(max_impulse)
    while high - low > resolution:
        middle = 0.5 * (low + high)
        if capturable(middle):
            low = middle
        else:
            high = middle
    return low


__all__ = ["CapturabilityParameters", "CaptureRegion", "MAX_STEPS", "capture_region", "contains", "dcm_of",
           "is_capturable", "largest_capturable_impulse", "merge", "push_dcm_shift",
           "standing_capture_region", "zmp_preimage"]
