"""MPC preview: support region (oriented box = 4 half-planes) and ZMP reference per preview interval.

Preview interval ``i`` of a window starting at time ``t`` ends at ``t + T0 + i T`` (``T0`` the first,
possibly shorter, interval, ``T`` the sampling period). Its support region and ZMP reference apply to
the state at the END of the interval, and are sampled from the :class:`~walk_mpc.core.walk.timeline.Timeline`
at that instant (just after it, so an interval ending at a lift-off is already single support and
one ending at a touchdown is already double support).

Every support region is an oriented box ``lower <= R(angle)^T z <= upper`` (``z`` the ZMP in the
world frame, ``R`` the 2D rotation), i.e. always exactly 4 half-planes ``A z <= b`` so the QP
structure never changes; rotated feet and turning walks are handled by ``angle``.

* Single support: the stance sole rectangle (extents front/back/left/right measured from the sole
  frame origin, rotated by the foot yaw).
* Double support (SWAY, DOUBLE, CATCH, STAND): a box inside the convex hull of the two soles that
  contains the segment between the two sole centres (so the ZMP reference is always inside):

  - feet with the same yaw: the box aligned with the feet, ``bbox(segment) + kappa * sole`` with the
    largest ``kappa`` in [0, 1] keeping it inside the hull (closed form; for feet side by side
    ``kappa = 1`` and the box is the whole hull). Being aligned with the feet, straight, lateral and
    backward walks keep every angle equal, which the exact solver exploits (decoupled fast path).
  - otherwise, or when that box is less than half the area of the next one: the box along the
    segment between the centres, with the largest half-width whose cross-section at each centre
    fits in that sole, extended past each centre as far as its corners stay inside that sole.
    (Its angle is normalised modulo 90 degrees towards the mean yaw.)
* ZMP reference: stance sole centre in single support; in DOUBLE a linear interpolation from the
  previous stance sole centre to the next one (to the midpoint after the last step); SWAY from the
  midpoint to the first stance; CATCH and STAND at the midpoint of the two sole centres.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

import numpy as np

from walk_mpc.core.errors import InputError, ShapeError
from walk_mpc.core.params import check_int_range, check_positive
from walk_mpc.core.walk.step import Foot
from walk_mpc.core.walk.timeline import FootPose, Phase, PhaseKind, Timeline

_SAMPLE_EPS = 1e-9  # [s] sample just after the interval end (see module docstring)
_ANGLE_SNAP = 1e-9  # [rad] angles this close are made equal


@dataclasses.dataclass(frozen=True)
class SoleParameters:
    """Sole rectangle, measured from the sole (ankle) frame origin along the foot axes.

    Attributes:
        front: Extent towards the toes [m].
        back: Extent towards the heel [m].
        left: Extent towards the foot's left (+y of the sole frame) [m].
        right: Extent towards the foot's right (-y of the sole frame) [m].
    """

    front: float = 0.09
    back: float = 0.09
    left: float = 0.055
    right: float = 0.055

    def __post_init__(self) -> None:
        for name in ("front", "back", "left", "right"):
            check_positive(name, getattr(self, name))

    @property
    def half_length(self) -> float:
        """Half of the sole length [m]."""
        return 0.5 * (self.front + self.back)

    @property
    def half_width(self) -> float:
        """Half of the sole width [m]."""
        return 0.5 * (self.left + self.right)

    def centre(self, pose: FootPose) -> np.ndarray:
        """Sole centre in the world frame [m], shape (2,)."""
        c, s = math.cos(pose.yaw), math.sin(pose.yaw)
        ox, oy = 0.5 * (self.front - self.back), 0.5 * (self.left - self.right)
        return np.array([pose.position[0] + c * ox - s * oy, pose.position[1] + s * ox + c * oy])

    def box(self, pose: FootPose) -> Tuple[float, np.ndarray, np.ndarray]:
        """Sole rectangle as ``(angle, lower, upper)`` with ``lower <= R(angle)^T z <= upper``."""
        c, s = math.cos(pose.yaw), math.sin(pose.yaw)
        px, py = pose.position[0], pose.position[1]
        local = np.array([c * px + s * py, -s * px + c * py])
        return pose.yaw, local - (self.back, self.right), local + (self.front, self.left)


def _rot(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def double_support_box(
    pose_a: FootPose, pose_b: FootPose, sole: SoleParameters
) -> Tuple[float, np.ndarray, np.ndarray]:
    """Double-support box of two soles as ``(angle, lower, upper)`` (see the module docstring).

    The box lies inside the convex hull of both sole rectangles and contains the segment between
    their centres.
    """
    ca, cb = sole.centre(pose_a), sole.centre(pose_b)
    hl, hw = sole.half_length, sole.half_width
    d = cb - ca
    length = float(np.hypot(d[0], d[1]))
    if length < 1e-9:
        return sole.box(pose_a)
    mean_yaw = pose_a.yaw + 0.5 * _wrap(pose_b.yaw - pose_a.yaw)
    candidates = []
    if abs(_wrap(pose_b.yaw - pose_a.yaw)) < _ANGLE_SNAP:
        # Same orientation: hull = segment (+) sole, box = bbox(segment) (+) kappa * sole.
        rot = _rot(pose_a.yaw)
        la, lb = rot.T @ ca, rot.T @ cb
        dx, dy = abs(lb[0] - la[0]), abs(lb[1] - la[1])
        if dx < 1e-12 or dy < 1e-12:
            kappa = 1.0
        else:
            kappa = 1.0 - 1.0 / (hl / dx + hw / dy)
        if kappa >= 0.0:
            lo = np.minimum(la, lb) - kappa * np.array([hl, hw])
            hi = np.maximum(la, lb) + kappa * np.array([hl, hw])
            area = float(np.prod(hi - lo))
            candidates.append((area, (pose_a.yaw, lo, hi)))
    # Segment-aligned box.
    u = d / length
    n = np.array([-u[1], u[0]])
    half = np.array([hl, hw])
    width = math.inf
    for pose in (pose_a, pose_b):
        beta = np.abs(_rot(pose.yaw).T @ n)
        for k in range(2):
            if beta[k] > 1e-12:
                width = min(width, half[k] / beta[k])
    ext = []
    for pose in (pose_a, pose_b):
        rt = _rot(pose.yaw).T
        alpha, beta = np.abs(rt @ u), np.abs(rt @ n)
        e = math.inf
        for k in range(2):
            if alpha[k] > 1e-12:
                e = min(e, max(0.0, (half[k] - width * beta[k]) / alpha[k]))
        ext.append(0.0 if math.isinf(e) else e)
    angle = math.atan2(u[1], u[0])
    hu, hn = 0.5 * (length + ext[0] + ext[1]), width
    centre = ca - ext[0] * u + u * hu
    k = round((mean_yaw - angle) / (0.5 * math.pi))
    angle += k * 0.5 * math.pi
    if k % 2:
        hu, hn = hn, hu
    if abs(_wrap(angle - mean_yaw)) < _ANGLE_SNAP:
        angle = mean_yaw
    local = _rot(angle).T @ centre
    seg_box = (angle, local - (hu, hn), local + (hu, hn))
    seg_area = 4.0 * hu * hn
    if candidates and candidates[0][0] >= 0.5 * seg_area:
        return candidates[0][1]
    return seg_box


@dataclasses.dataclass(frozen=True)
class Preview:
    """Per-interval support boxes and ZMP references of one MPC window (N intervals).

    This is also the low-level constructor: any problem (e.g. the smpc_solver reference walk) can
    be posed by giving the arrays directly.

    Attributes:
        durations: Interval durations [s], shape (N,) (the first may differ from the others).
        angles: Box orientation per interval [rad], shape (N,).
        lower: Lower bounds of ``R(angle)^T z`` [m], shape (N, 2).
        upper: Upper bounds of ``R(angle)^T z`` [m], shape (N, 2).
        zmp_ref: ZMP reference in the world frame [m], shape (N, 2).
        t_start: Start time of the window [s].
    """

    durations: np.ndarray
    angles: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    zmp_ref: np.ndarray
    t_start: float = 0.0

    def __post_init__(self) -> None:
        durations = _array("durations", self.durations, 1)
        n = durations.shape[0]
        if n < 1:
            raise ShapeError("durations", durations.shape, "(N,) with N >= 1")
        if durations[durations.argmin()] <= 0.0:
            raise InputError("durations", self.durations, "durations > 0 [s]")
        setter = object.__setattr__
        setter(self, "durations", durations)
        setter(self, "angles", _array("angles", self.angles, 1, (n,)))
        for name in ("lower", "upper", "zmp_ref"):
            setter(self, name, _array(name, getattr(self, name), 2, (n, 2)))
        if not math.isfinite(self.t_start):
            raise InputError("t_start", self.t_start, "a finite time [s]")

    @classmethod
    def _trusted(cls, durations: np.ndarray, angles: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                 zmp_ref: np.ndarray, t_start: float) -> Preview:
        """Preview of arrays the caller guarantees valid (read-only, C-contiguous, finite float64 of
        the right shapes, durations > 0, finite ``t_start``), without the checks (internal hot path)."""
        preview = object.__new__(cls)
        preview.__dict__.update(durations=durations, angles=angles, lower=lower, upper=upper, zmp_ref=zmp_ref,
                                t_start=t_start)
        return preview

    @property
    def horizon(self) -> int:
        """Number of intervals N."""
        return self.durations.shape[0]

    @property
    def times(self) -> np.ndarray:
        """End time of each interval [s], shape (N,)."""
        return self.t_start + np.cumsum(self.durations)

    @property
    def is_axis_aligned(self) -> bool:
        """True when all boxes share one orientation (the exact solver then decouples x and y)."""
        return bool(np.all(self.angles == self.angles[0]))

    def halfplanes(self) -> Tuple[np.ndarray, np.ndarray]:
        """Support regions as half-planes ``A[i] @ z <= b[i]``.

        Returns:
            ``(A, b)`` of shapes (N, 4, 2) and (N, 4): rows +x', +y', -x', -y' of the box frame.
        """
        c, s = np.cos(self.angles), np.sin(self.angles)
        ex = np.stack([c, s], axis=1)  # R^T first row
        ey = np.stack([-s, c], axis=1)
        a = np.stack([ex, ey, -ex, -ey], axis=1)
        b = np.concatenate([self.upper, -self.lower], axis=1)
        return a, b

    def corners(self) -> np.ndarray:
        """Box corners in the world frame [m], shape (N, 4, 2), counter-clockwise."""
        lo, hi = self.lower, self.upper
        local = np.stack(
            [np.stack([lo[:, 0], lo[:, 1]], 1), np.stack([hi[:, 0], lo[:, 1]], 1),
             np.stack([hi[:, 0], hi[:, 1]], 1), np.stack([lo[:, 0], hi[:, 1]], 1)], axis=1)
        c, s = np.cos(self.angles)[:, None], np.sin(self.angles)[:, None]
        return np.stack([c * local[..., 0] - s * local[..., 1], s * local[..., 0] + c * local[..., 1]], -1)

    def violation(self, zmp: np.ndarray) -> np.ndarray:
        """Distance [m] by which each ZMP of shape (N, 2) leaves its box (0 when inside)."""
        zmp = np.asarray(zmp, dtype=float)
        c, s = np.cos(self.angles), np.sin(self.angles)
        local = np.stack([c * zmp[:, 0] + s * zmp[:, 1], -s * zmp[:, 0] + c * zmp[:, 1]], axis=1)
        return np.max(np.maximum(local - self.upper, self.lower - local), axis=1).clip(min=0.0)


def _array(name: str, value, ndim: int, shape: Optional[Tuple[int, ...]] = None) -> np.ndarray:
    """Read-only, C-contiguous finite float array (shared if it already is one, else copied)."""
    if (isinstance(value, np.ndarray) and value.dtype == np.float64 and not value.flags.writeable
            and value.flags.c_contiguous):
        array = value
    else:
        try:
            array = np.array(value, dtype=float)
        except (TypeError, ValueError):
            raise InputError(name, value, "an array of numbers") from None
        array.flags.writeable = False
    if array.ndim != ndim or (shape is not None and array.shape != shape):
        raise ShapeError(name, array.shape, shape if shape is not None else f"{ndim} dimension(s)")
    if not math.isfinite(np.add.reduce(array, axis=None)):  # NaN/inf make the sum non-finite
        raise InputError(name, value, "finite values")
    return array


class PreviewBuilder:
    """Samples a :class:`Timeline` into :class:`Preview` windows.

    Each phase's support box and ZMP reference end points are computed once, the first time a window
    reaches the phase, and kept in per-phase arrays; a window is then a vectorised lookup: the phase
    of every sample time (one ``searchsorted``), a gather of the boxes, and the interpolation of the
    references. The results are bit-identical to sampling :meth:`zmp_reference` and the boxes
    interval by interval.

    Args:
        timeline: The gait timeline.
        sole: Sole extents.
        sampling_period: Preview sampling period T [s].
        horizon: Number of intervals N.
        first_interval: Duration of the first interval [s] (default: ``sampling_period``).
    """

    def __init__(
        self,
        timeline: Timeline,
        sole: SoleParameters,
        sampling_period: float,
        horizon: int,
        first_interval: Optional[float] = None,
    ) -> None:
        check_positive("sampling_period", sampling_period)
        check_int_range("horizon", horizon, 1)
        first = sampling_period if first_interval is None else first_interval
        check_positive("first_interval", first)
        self.timeline = timeline
        self.sole = sole
        self.durations = np.full(horizon, float(sampling_period))
        self.durations[0] = first
        self.durations.flags.writeable = False
        self._checked_durations = self.durations
        self._offsets = np.cumsum(self.durations)
        phases = timeline.phases
        count = len(phases)
        self._starts = np.array([phase.t_start for phase in phases])
        self._lengths = np.array([phase.t_end for phase in phases]) - self._starts  # inf for STAND
        self._interpolated = np.array([phase.kind in (PhaseKind.SWAY, PhaseKind.DOUBLE) for phase in phases])
        # Per phase, filled on first use (see _fill): box angle, lower, upper; ZMP reference start, end.
        self._ready = [False] * count
        self._angles = np.empty(count)
        self._lower = np.empty((count, 2))
        self._upper = np.empty((count, 2))
        self._ref_start = np.empty((count, 2))
        self._ref_end = np.empty((count, 2))

    def _fill(self, index: int) -> None:
        """Support box and ZMP reference end points of phase ``index`` (see :meth:`zmp_reference`)."""
        phase = self.timeline.phases[index]
        sole = self.sole
        if phase.kind is PhaseKind.SINGLE:
            box = sole.box(phase.foot(phase.swing_foot.other))
        else:
            box = double_support_box(phase.left, phase.right, sole)
        self._angles[index], self._lower[index], self._upper[index] = box
        if phase.kind is PhaseKind.SINGLE:
            start = end = sole.centre(phase.foot(phase.swing_foot.other))
        else:
            mid = 0.5 * (sole.centre(phase.left) + sole.centre(phase.right))
            start = end = mid
            if phase.kind is PhaseKind.DOUBLE:
                previous = self.timeline.phases[index - 1]
                start = sole.centre(phase.foot(previous.swing_foot.other))
            if phase.kind in (PhaseKind.SWAY, PhaseKind.DOUBLE) and phase.next_stance is not None:
                end = sole.centre(phase.foot(phase.next_stance))
        self._ref_start[index] = start
        self._ref_end[index] = end
        self._ready[index] = True

    def zmp_reference(self, index: int, phase: Phase, t: float) -> np.ndarray:
        """ZMP reference [m] at time ``t`` in phase ``index`` of the timeline (see module docstring)."""
        sole = self.sole
        if phase.kind is PhaseKind.SINGLE:
            return sole.centre(phase.foot(phase.swing_foot.other))
        mid = 0.5 * (sole.centre(phase.left) + sole.centre(phase.right))
        if phase.kind is PhaseKind.SWAY:
            start = mid
            end = mid if phase.next_stance is None else sole.centre(phase.foot(phase.next_stance))
        elif phase.kind is PhaseKind.DOUBLE:
            previous = self.timeline.phases[index - 1]
            start = sole.centre(phase.foot(previous.swing_foot.other))
            end = mid if phase.next_stance is None else sole.centre(phase.foot(phase.next_stance))
        else:
            return mid
        s = phase.progress(t)
        return (1.0 - s) * start + s * end

    def build(self, t: float) -> Preview:
        """Preview window starting at time ``t`` [s]."""
        if not math.isfinite(t):
            raise InputError("t", t, "a finite time [s]")
        times = t + self._offsets  # sample just after each interval end, as (t + offset) + eps
        times += _SAMPLE_EPS
        index = self._starts.searchsorted(times, side="right")  # Timeline.phase_index_at, vectorised
        index -= 1
        first, last = int(index[0]), int(index[-1])  # times increase, so phases do too
        if first < 0:
            np.maximum(index, 0, out=index)
            first = 0
        ready = self._ready
        for phase in range(first, last + 1):
            if not ready[phase]:
                self._fill(phase)
        angles = self._angles.take(index)
        lower = self._lower.take(index, axis=0)
        upper = self._upper.take(index, axis=0)
        ref = self._ref_start.take(index, axis=0)
        interpolated = self._interpolated.take(index)
        if interpolated.any():
            # Phase.progress (clipped to [0, 1]) then (1 - s) start + s end, as zmp_reference does.
            rows = interpolated.nonzero()[0]
            phases = index[rows]
            progress = times[rows]
            progress -= self._starts[phases]
            progress /= self._lengths[phases]
            np.clip(progress, 0.0, 1.0, out=progress)
            progress = progress[:, None]
            ref[rows] = (1.0 - progress) * ref[rows] + progress * self._ref_end[phases]
        durations = self.durations
        if durations is not self._checked_durations:  # replaced by the owner (e.g. MpcPlanner): check once
            durations = Preview(durations, angles, lower, upper, ref, t_start=t).durations
            self.durations = self._checked_durations = durations
        for array in (angles, lower, upper, ref):
            array.flags.writeable = False
        # Finite by construction (finite t, finite timeline poses): no need to check the arrays again.
        return Preview._trusted(durations, angles, lower, upper, ref, t)


def stance_centre(timeline: Timeline, t: float, sole: SoleParameters) -> np.ndarray:
    """Midpoint of the two sole centres at time ``t`` [m], shape (2,)."""
    phase = timeline.phase_at(t)
    return 0.5 * (sole.centre(phase.left) + sole.centre(phase.right))


__all__ = ["Foot", "Preview", "PreviewBuilder", "SoleParameters", "double_support_box", "stance_centre"]
