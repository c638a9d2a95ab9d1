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
  midpoint to the first stance; CATCH and STAND at the midpoint of the two sole centres. With an
  ``inward`` offset (:class:`PreviewBuilder`), a single stance's reference (single support, and the ends of
  the interpolations at a single stance) is that far from its sole centre toward the other foot (along the
  sole's y axis): less lateral sway, the DCM stays on the inner side of the stance foot in single support.
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

#: Sample windows with the compiled (numba) loop :func:`_window` when numba is installed (tests switch it
#: off to exercise the numpy implementation; both give the same windows bit for bit).
USE_KERNEL = True


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
        return np.array(_centre(self, pose))

    def box(self, pose: FootPose) -> Tuple[float, np.ndarray, np.ndarray]:
        """Sole rectangle as ``(angle, lower, upper)`` with ``lower <= R(angle)^T z <= upper``."""
        angle, lower_x, lower_y, upper_x, upper_y = _box(self, pose)
        return angle, np.array([lower_x, lower_y]), np.array([upper_x, upper_y])


# The geometry below is computed on floats (no small numpy arrays: a phase's box and references cost a
# few microseconds, paid in the tick whose window first reaches the phase); the operations are those of
# the 2-vector expressions they stand for (``R^T v`` as ``(c v_x + s v_y, -s v_x + c v_y)``), so the
# results are the same bit for bit.
def _centre(sole: SoleParameters, pose: FootPose) -> Tuple[float, float]:
    """Sole centre in the world frame [m]."""
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    ox, oy = 0.5 * (sole.front - sole.back), 0.5 * (sole.left - sole.right)
    return pose.position[0] + c * ox - s * oy, pose.position[1] + s * ox + c * oy


def _stance_ref(sole: SoleParameters, pose: FootPose, foot: Foot, inward: float) -> Tuple[float, float]:
    """ZMP reference [m] of the single stance ``foot`` at ``pose``: its sole centre, moved ``inward`` toward
    the other foot along the sole's y axis (the same floats as :func:`_centre` when ``inward`` is 0)."""
    x, y = _centre(sole, pose)
    if inward == 0.0:
        return x, y
    d = inward if foot is Foot.RIGHT else -inward
    return x - math.sin(pose.yaw) * d, y + math.cos(pose.yaw) * d


def _box(sole: SoleParameters, pose: FootPose) -> Tuple[float, float, float, float, float]:
    """Sole rectangle as ``(angle, lower x, lower y, upper x, upper y)``."""
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    px, py = pose.position[0], pose.position[1]
    local_x, local_y = c * px + s * py, -s * px + c * py
    return pose.yaw, local_x - sole.back, local_y - sole.right, local_x + sole.front, local_y + sole.left


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def double_support_box(
    pose_a: FootPose, pose_b: FootPose, sole: SoleParameters
) -> Tuple[float, np.ndarray, np.ndarray]:
    """Double-support box of two soles as ``(angle, lower, upper)`` (see the module docstring).

    The box lies inside the convex hull of both sole rectangles and contains the segment between
    their centres.
    """
    angle, lower_x, lower_y, upper_x, upper_y = _double_support_box(pose_a, pose_b, sole)
    return angle, np.array([lower_x, lower_y]), np.array([upper_x, upper_y])


def _double_support_box(pose_a: FootPose, pose_b: FootPose,
                        sole: SoleParameters) -> Tuple[float, float, float, float, float]:
    """:func:`double_support_box` as ``(angle, lower x, lower y, upper x, upper y)``."""
    ca_x, ca_y = _centre(sole, pose_a)
    cb_x, cb_y = _centre(sole, pose_b)
    hl, hw = sole.half_length, sole.half_width
    d_x, d_y = cb_x - ca_x, cb_y - ca_y
    length = float(np.hypot(d_x, d_y))  # (not math.hypot: it rounds differently)
    if length < 1e-9:
        return _box(sole, pose_a)
    yaw_a, yaw_b = pose_a.yaw, pose_b.yaw
    mean_yaw = yaw_a + 0.5 * _wrap(yaw_b - yaw_a)
    candidate = None
    if abs(_wrap(yaw_b - yaw_a)) < _ANGLE_SNAP:
        # Same orientation: hull = segment (+) sole, box = bbox(segment) (+) kappa * sole.
        c, s = math.cos(yaw_a), math.sin(yaw_a)
        la_x, la_y = c * ca_x + s * ca_y, -s * ca_x + c * ca_y
        lb_x, lb_y = c * cb_x + s * cb_y, -s * cb_x + c * cb_y
        dx, dy = abs(lb_x - la_x), abs(lb_y - la_y)
        if dx < 1e-12 or dy < 1e-12:
            kappa = 1.0
        else:
            kappa = 1.0 - 1.0 / (hl / dx + hw / dy)
        if kappa >= 0.0:
            lo_x, lo_y = min(la_x, lb_x) - kappa * hl, min(la_y, lb_y) - kappa * hw
            hi_x, hi_y = max(la_x, lb_x) + kappa * hl, max(la_y, lb_y) + kappa * hw
            candidate = ((hi_x - lo_x) * (hi_y - lo_y), (yaw_a, lo_x, lo_y, hi_x, hi_y))
    # Segment-aligned box.
    u_x, u_y = d_x / length, d_y / length
    n_x, n_y = -u_y, u_x
    width = math.inf
    for yaw in (yaw_a, yaw_b):
        c, s = math.cos(yaw), math.sin(yaw)
        beta_x, beta_y = abs(c * n_x + s * n_y), abs(-s * n_x + c * n_y)
        if beta_x > 1e-12:
            width = min(width, hl / beta_x)
        if beta_y > 1e-12:
            width = min(width, hw / beta_y)
    ext = []
    for yaw in (yaw_a, yaw_b):
        c, s = math.cos(yaw), math.sin(yaw)
        alpha_x, alpha_y = abs(c * u_x + s * u_y), abs(-s * u_x + c * u_y)
        beta_x, beta_y = abs(c * n_x + s * n_y), abs(-s * n_x + c * n_y)
        e = math.inf
        if alpha_x > 1e-12:
            e = min(e, max(0.0, (hl - width * beta_x) / alpha_x))
        if alpha_y > 1e-12:
            e = min(e, max(0.0, (hw - width * beta_y) / alpha_y))
        ext.append(0.0 if math.isinf(e) else e)
    angle = math.atan2(u_y, u_x)
    hu, hn = 0.5 * (length + ext[0] + ext[1]), width
    centre_x = ca_x - ext[0] * u_x + u_x * hu
    centre_y = ca_y - ext[0] * u_y + u_y * hu
    k = round((mean_yaw - angle) / (0.5 * math.pi))
    angle += k * 0.5 * math.pi
    if k % 2:
        hu, hn = hn, hu
    if abs(_wrap(angle - mean_yaw)) < _ANGLE_SNAP:
        angle = mean_yaw
    c, s = math.cos(angle), math.sin(angle)
    local_x, local_y = c * centre_x + s * centre_y, -s * centre_x + c * centre_y
    if candidate is not None and candidate[0] >= 0.5 * (4.0 * hu * hn):
        return candidate[1]
    return angle, local_x - hu, local_y - hn, local_x + hu, local_y + hn


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
        fields = self.__dict__  # (frozen dataclass: the validated arrays replace the given values)
        fields["durations"] = durations
        fields["angles"] = _array("angles", fields["angles"], 1, (n,))
        shape = (n, 2)
        for name in ("lower", "upper", "zmp_ref"):
            fields[name] = _array(name, fields[name], 2, shape)
        if not math.isfinite(self.t_start):
            raise InputError("t_start", self.t_start, "a finite time [s]")
        # One packed copy (see :attr:`packed`), the fields made views of it (the same values).
        half = (n + 1) // 2
        packed = np.empty((half + 3 * n, 2))
        packed[:half].reshape(2 * half)[:n] = fields["angles"]
        if half + half != n:
            packed[half - 1, 1] = 0.0
        packed[half:half + n] = fields["lower"]
        packed[half + n:half + 2 * n] = fields["upper"]
        packed[half + 2 * n:] = fields["zmp_ref"]
        packed.flags.writeable = False
        fields["_packed"] = packed
        _unpack(fields, packed, n)

    @classmethod
    def _trusted(cls, durations: np.ndarray, packed: np.ndarray, t_start: float) -> Preview:
        """Preview of a :attr:`packed` window the caller guarantees valid (read-only, C-contiguous, finite
        float64 of shape ``(ceil(N / 2) + 3 N, 2)`` for ``durations``' N, durations > 0, finite
        ``t_start``), without the checks (internal hot path). The field arrays are made (as views of
        ``packed``) when first read: a backend that reads :attr:`packed` does not pay for them."""
        preview = object.__new__(cls)
        fields = preview.__dict__
        fields["durations"] = durations
        fields["_packed"] = packed
        fields["t_start"] = t_start
        return preview

    def __getattr__(self, name: str):
        # Only reached for an attribute not in __dict__: the views of a trusted preview, on first read.
        if name in _PACKED_FIELDS:
            fields = self.__dict__
            if "_packed" in fields:
                _unpack(fields, fields["_packed"], fields["durations"].shape[0])
                return fields[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @property
    def packed(self) -> np.ndarray:
        """The window in one read-only array, shape ``(ceil(N / 2) + 3 N, 2)``: the angles in the first
        ``ceil(N / 2)`` rows (row-major, a trailing 0 when N is odd), then ``lower``, ``upper`` and
        ``zmp_ref``, N rows each (what the compiled solvers read, in one argument)."""
        return self.__dict__["_packed"]

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


_FLOAT64 = np.dtype(np.float64)


_PACKED_FIELDS = ("angles", "lower", "upper", "zmp_ref")


def _unpack(fields: dict, packed: np.ndarray, n: int) -> None:
    """Set the four window fields of a Preview's ``__dict__`` to views of its packed array."""
    half = (n + 1) // 2
    angles = packed[:half].ravel()
    fields["angles"] = angles if half + half == n else angles[:n]
    fields["lower"] = packed[half:half + n]
    fields["upper"] = packed[half + n:half + 2 * n]
    fields["zmp_ref"] = packed[half + 2 * n:]


def _array(name: str, value, ndim: int, shape: Optional[Tuple[int, ...]] = None) -> np.ndarray:
    """Read-only, C-contiguous finite float array (shared if it already is one, else copied)."""
    flags = value.flags if type(value) is np.ndarray and value.dtype is _FLOAT64 else None
    if flags is not None and not flags.writeable and flags.c_contiguous:
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
    reaches the phase, and kept in a per-phase table; a window is then a lookup: the phase of every
    sample time, a gather of the boxes, and the interpolation of the references. With numba this is one
    compiled loop writing the window's arrays in a single buffer (numpy otherwise: a ``searchsorted``
    and a few vectorised gathers). The results are bit-identical to sampling :meth:`zmp_reference` and
    the boxes interval by interval, and the arrays, built here, go into the :class:`Preview` without its
    checks (trusted path); the grid ``durations`` is checked once per array.

    Args:
        timeline: The gait timeline.
        sole: Sole extents.
        sampling_period: Preview sampling period T [s].
        horizon: Number of intervals N.
        first_interval: Duration of the first interval [s] (default: ``sampling_period``).
        inward: A single stance's ZMP reference moved this far [m] from its sole centre toward the other
            foot (module docstring; 0: the centre).
        compiled: Sample the windows with the compiled loop when numba is installed (False: numpy; the same
            windows bit for bit).
    """

    def __init__(
        self,
        timeline: Timeline,
        sole: SoleParameters,
        sampling_period: float,
        horizon: int,
        first_interval: Optional[float] = None,
        inward: float = 0.0,
        compiled: bool = True,
    ) -> None:
        check_positive("sampling_period", sampling_period)
        narrowest = min(sole.left, sole.right)
        if isinstance(inward, bool) or not isinstance(inward, (int, float)) or not 0.0 <= inward < narrowest:
            raise InputError("inward", inward, f"a distance in [0, {narrowest}) m (within the sole)")
        self.inward = float(inward)
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
        self._rows = horizon, (horizon + 1) // 2  # window rows (see build)
        phases = timeline.phases
        count = len(phases)
        # Per phase: start, length, interpolated (1.0 for SWAY and DOUBLE); then, filled below (see _fill):
        # box angle, lower, upper, ZMP reference start, end, and 1.0 once filled.
        table = np.zeros((count, _COLUMNS))
        table[:, _START] = [phase.t_start for phase in phases]
        table[:, _LENGTH] = [phase.t_end - phase.t_start for phase in phases]  # inf for STAND
        table[:, _INTERPOLATED] = [phase.kind in (PhaseKind.SWAY, PhaseKind.DOUBLE) for phase in phases]
        self._table = table
        # The numpy implementation reads the same table (contiguous copies of the fixed columns).
        self._starts = table[:, _START].copy()
        self._lengths = np.array([phase.t_end for phase in phases]) - self._starts
        self._interpolated = table[:, _INTERPOLATED] != 0.0
        self._angles = table[:, _ANGLE]
        self._lower = table[:, _LOWER:_LOWER + 2]
        self._upper = table[:, _UPPER:_UPPER + 2]
        self._ref_start = table[:, _REF_START:_REF_START + 2]
        self._ref_end = table[:, _REF_END:_REF_END + 2]
        self._ready = table[:, _READY]
        self._kernel = _load_window_kernel() if USE_KERNEL and compiled else None
        # Every phase filled now, once per plan (~4 us a phase, a timeline holds a bounded number of them):
        # the ticks' builds then do the same work whatever phase the window reaches (p99 near the median).
        for index in range(count):
            self._fill(index)

    @property
    def accelerated(self) -> bool:
        """True when windows are sampled by the compiled loop."""
        return self._kernel is not None

    def _fill(self, index: int) -> None:
        """Support box and ZMP reference end points of phase ``index`` (see :meth:`zmp_reference`)."""
        phase = self.timeline.phases[index]
        sole = self.sole
        kind = phase.kind
        inward = self.inward
        if kind is PhaseKind.SINGLE:
            foot = phase.swing_foot.other
            stance = phase.foot(foot)
            box = _box(sole, stance)
            start = end = _stance_ref(sole, stance, foot, inward)
        else:
            box = _double_support_box(phase.left, phase.right, sole)
            left, right = _centre(sole, phase.left), _centre(sole, phase.right)
            start = end = (0.5 * (left[0] + right[0]), 0.5 * (left[1] + right[1]))
            if kind is PhaseKind.DOUBLE:
                foot = self.timeline.phases[index - 1].swing_foot.other
                start = _stance_ref(sole, phase.foot(foot), foot, inward)
            if kind in (PhaseKind.SWAY, PhaseKind.DOUBLE) and phase.next_stance is not None:
                end = _stance_ref(sole, phase.foot(phase.next_stance), phase.next_stance, inward)
        self._table[index, _ANGLE:] = (*box, *start, *end, 1.0)  # angle, lower, upper, refs, ready

    def zmp_reference(self, index: int, phase: Phase, t: float) -> np.ndarray:
        """ZMP reference [m] at time ``t`` in phase ``index`` of the timeline (see module docstring)."""
        sole, inward = self.sole, self.inward

        def ref(foot: Foot) -> np.ndarray:
            return np.array(_stance_ref(sole, phase.foot(foot), foot, inward))

        if phase.kind is PhaseKind.SINGLE:
            return ref(phase.swing_foot.other)
        mid = 0.5 * (sole.centre(phase.left) + sole.centre(phase.right))
        if phase.kind is PhaseKind.SWAY:
            start = mid
            end = mid if phase.next_stance is None else ref(phase.next_stance)
        elif phase.kind is PhaseKind.DOUBLE:
            previous = self.timeline.phases[index - 1]
            start = ref(previous.swing_foot.other)
            end = mid if phase.next_stance is None else ref(phase.next_stance)
        else:
            return mid
        s = phase.progress(t)
        return (1.0 - s) * start + s * end

    def build(self, t: float) -> Preview:
        """Preview window starting at time ``t`` [s]."""
        durations = self.durations
        if durations is not self._checked_durations:  # replaced by the owner (e.g. MpcPlanner): check once
            n = self._offsets.shape[0]
            durations = Preview(durations, np.zeros(n), np.zeros((n, 2)), np.zeros((n, 2)), np.zeros((n, 2)),
                                t_start=0.0).durations
            self._offsets = np.cumsum(durations)
            self.durations = self._checked_durations = durations
        kernel = self._kernel
        n, h = self._rows
        # The window's storage (Preview.packed), one allocation: rows [0, h) hold the angles (2 per row),
        # then lower, upper and zmp_ref, n rows each.
        out = np.empty((h + 3 * n, 2))
        if kernel is None:
            if not math.isfinite(t):
                raise InputError("t", t, "a finite time [s]")
            angles, lower, upper, ref = self._window_numpy(t)
            out[:h].reshape(2 * h)[:n] = angles
            out[h:h + n], out[h + n:h + 2 * n], out[h + 2 * n:] = lower, upper, ref
        else:
            time = float(t)
            phase = kernel(time, self._offsets, self._table, out)
            while phase >= 0:  # a phase this builder has not reached before (once per phase)
                self._fill(phase)
                phase = kernel(time, self._offsets, self._table, out)
            if phase == -2:
                raise InputError("t", t, "a finite time [s]")
        if h + h != n:  # (the unused half row: deterministic)
            out[h - 1, 1] = 0.0
        out.setflags(write=False)
        # Finite by construction (finite t, finite timeline poses), read-only, C-contiguous, of this grid:
        # the trusted constructor (tests check it gives what the checked one does, bit for bit).
        return Preview._trusted(durations, out, t)

    def _window_numpy(self, t: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The window's (read-only) arrays, vectorised with numpy (without numba)."""
        times = t + self._offsets  # sample just after each interval end, as (t + offset) + eps
        times += _SAMPLE_EPS
        index = self._starts.searchsorted(times, side="right")  # Timeline.phase_index_at, vectorised
        index -= 1
        first, last = int(index[0]), int(index[-1])  # times increase, so phases do too
        if first < 0:  # samples before the first phase take it (a window may end before it)
            np.maximum(index, 0, out=index)
            first, last = 0, max(last, 0)
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
        for array in (angles, lower, upper, ref):
            array.flags.writeable = False
        return angles, lower, upper, ref


# Columns of PreviewBuilder's per-phase table (constants of the compiled loop too).
_START, _LENGTH, _INTERPOLATED, _ANGLE = 0, 1, 2, 3
_LOWER, _UPPER, _REF_START, _REF_END = 4, 6, 8, 10  # two columns each (x, y)
_READY = 12
_COLUMNS = 13


def _window(t, offsets, table, out):
    """One window of :meth:`PreviewBuilder.build` into ``out`` (``(h + 3N, 2)``, ``h = ceil(N / 2)``: the
    angles in the first ``h`` rows, row-major, then lower, upper and zmp_ref, N rows each).

    The same operations as :meth:`PreviewBuilder._window_numpy`, sample by sample: the phase of
    ``(t + offset) + eps`` (``searchsorted(side="right") - 1``, at least 0: a binary search for the first
    sample, then forward since the samples increase), its box, and its reference, interpolated in SWAY and
    DOUBLE with the progress clipped to [0, 1]. Compiled by numba (run as Python without it). Returns -1,
    the index of a phase not filled yet (the caller fills it and calls again), or -2 if ``t`` is not
    finite.
    """
    if not math.isfinite(t):
        return -2
    n = offsets.shape[0]
    count = table.shape[0]
    time = (t + offsets[0]) + _SAMPLE_EPS
    low, high = 0, count
    while low < high:
        mid = (low + high) // 2
        if table[mid, _START] <= time:
            low = mid + 1
        else:
            high = mid
    phase = low - 1 if low > 0 else 0
    h = (n + 1) // 2
    for k in range(n):
        time = (t + offsets[k]) + _SAMPLE_EPS
        while phase + 1 < count and table[phase + 1, _START] <= time:
            phase += 1
        row = table[phase]
        if row[_READY] == 0.0:
            return phase
        out[k >> 1, k & 1] = row[_ANGLE]
        lower, upper, ref = out[h + k], out[h + n + k], out[h + 2 * n + k]
        lower[0], lower[1] = row[_LOWER], row[_LOWER + 1]
        upper[0], upper[1] = row[_UPPER], row[_UPPER + 1]
        if row[_INTERPOLATED] != 0.0:
            s = (time - row[_START]) / row[_LENGTH]
            s = min(max(s, 0.0), 1.0)
            ref[0] = (1.0 - s) * row[_REF_START] + s * row[_REF_END]
            ref[1] = (1.0 - s) * row[_REF_START + 1] + s * row[_REF_END + 1]
        else:
            ref[0], ref[1] = row[_REF_START], row[_REF_START + 1]
    return -1


_WINDOW_KERNEL = []  # the compiled _window, once per process (empty: not loaded yet; [None]: no numba)


def _load_window_kernel():
    """:func:`_window` compiled (or loaded from numba's cache, and warmed up), None without numba."""
    if not _WINDOW_KERNEL:
        try:
            from numba import njit
        except ImportError:  # numba not installed: numpy implementation
            _WINDOW_KERNEL.append(None)
        else:
            kernel = njit(cache=True)(_window)
            kernel(0.0, np.zeros(1), np.zeros((1, _COLUMNS)), np.empty((4, 2)))  # compile now, not at a tick
            _WINDOW_KERNEL.append(kernel)
    return _WINDOW_KERNEL[0]


def stance_centre(timeline: Timeline, t: float, sole: SoleParameters) -> np.ndarray:
    """Midpoint of the two sole centres at time ``t`` [m], shape (2,)."""
    phase = timeline.phase_at(t)
    return 0.5 * (sole.centre(phase.left) + sole.centre(phase.right))


__all__ = ["Foot", "Preview", "PreviewBuilder", "SoleParameters", "double_support_box", "stance_centre"]
