"""A time base that one bad stamp cannot poison: sensor stamps checked against the steady clock.

Every controller of the loop takes its time from the stamps of the samples it receives (seed 001: the
hardware cycle drives the control loop). Anything on the DDS domain can publish samples, so a stamp is
accepted only when it is plausible:

* it follows the last accepted stamp (strictly later);
* with a steady clock reading: it does not run ahead of ``max_rate`` times the steady clock's progress since
  the last accepted sample by more than ``max_lead`` (a sample stamped 2147483647 s, or a jump of an hour,
  is rejected; the samples of a robot, or of a simulator slower or up to ``max_rate`` times faster than
  real time, are not, even when a stalled subscriber drops the samples of its stall).

A rejected stamp leaves the time base as it was, so the next plausible samples go on being accepted.
Rejected samples that are consistent among themselves (``resync_samples`` in a row, each later than the
one before and no faster than the steady clock) while no sample is accepted are a new time base (a
restarted simulator whose clock began again, or a clock that really jumped): the guard re-anchors on them
and says so (:attr:`StampVerdict.REANCHORED`), and the controller restarts from that sample as after an
outage.

Without steady clock readings (in-process simulation), only the order of the stamps is checked.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Optional

from walk_mpc.core.errors import InputError, ParameterError
from walk_mpc.core.params import check_int_range, check_positive

_NS = 1_000_000_000


class StampVerdict(enum.Enum):
    """What :meth:`StampGuard.check` decided about a stamp."""

    ACCEPTED = "accepted"
    REANCHORED = "reanchored"  # accepted as the first stamp of a new time base (restart from it)
    NOT_LATER = "not later"  # rejected: not after the last accepted stamp
    AHEAD_OF_CLOCK = "ahead of the steady clock"  # rejected: runs ahead of the steady clock's progress

    @property
    def accepted(self) -> bool:
        """Whether the sample may be used."""
        return self in (StampVerdict.ACCEPTED, StampVerdict.REANCHORED)


@dataclasses.dataclass(frozen=True)
class StampGuardParameters:
    """Parameters of :class:`StampGuard`.

    Attributes:
        max_lead: How far [s] a stamp may run ahead of ``max_rate`` times the steady clock's progress
            since the last accepted sample (delivery jitter and bursts; a stamp further ahead is rejected).
        max_rate: Fastest progress of the stamps relative to the steady clock [-]: a simulator's largest
            real-time factor. 1 accepts only real-time streams: one faster than that (a simulator at 3x)
            whose subscriber stalls and drops samples then sees a gap of stamps larger than the stall.
        resync_samples: Consecutive rejected samples, consistent among themselves, after which the guard
            re-anchors on them (a new time base).
    """

    max_lead: float = 0.5
    max_rate: float = 4.0
    resync_samples: int = 5

    def __post_init__(self) -> None:
        check_positive("max_lead", self.max_lead)
        if not (isinstance(self.max_rate, (int, float)) and 1.0 <= self.max_rate <= 1000.0):
            raise ParameterError("max_rate", self.max_rate, "a real-time factor in [1, 1000]")
        check_int_range("resync_samples", self.resync_samples, 1)


class StampGuard:
    """Accept or reject sample stamps [ns] (see the module docstring)."""

    Parameters = StampGuardParameters

    def __init__(self, params: Optional[StampGuardParameters] = None) -> None:
        self.params = params if params is not None else StampGuardParameters()
        self._lead_ns = int(round(self.params.max_lead * _NS))
        self.reset()

    def reset(self) -> None:
        """Forget the time base: the next stamp is accepted as the first one."""
        self._last: Optional[tuple[int, Optional[int]]] = None  # (stamp, steady) of the last accepted sample
        self._candidates: list[tuple[int, Optional[int]]] = []  # consistent rejected samples, in order
        self.rejected = 0

    @property
    def last_stamp_ns(self) -> Optional[int]:
        """The last accepted stamp [ns], or None."""
        return None if self._last is None else self._last[0]

    def _plausible(self, before: tuple[int, Optional[int]], stamp_ns: int, steady_ns: Optional[int]) -> bool:
        if stamp_ns <= before[0]:
            return False
        if steady_ns is None or before[1] is None:
            return True
        return stamp_ns - before[0] <= self.params.max_rate * (steady_ns - before[1]) + self._lead_ns

    def check(self, stamp_ns: int, steady_ns: Optional[int] = None) -> StampVerdict:
        """Accept ``stamp_ns`` (the time base advances) or reject it (the time base stays).

        Args:
            stamp_ns: The sample's stamp [ns].
            steady_ns: The steady (monotonic) clock when the sample arrived [ns], or None.

        Raises:
            InputError: A stamp or clock reading that is not an integer.
        """
        if not isinstance(stamp_ns, int) or isinstance(stamp_ns, bool):
            raise InputError("stamp_ns", stamp_ns, "integer nanoseconds")
        if steady_ns is not None and (not isinstance(steady_ns, int) or isinstance(steady_ns, bool)):
            raise InputError("steady_ns", steady_ns, "integer nanoseconds or None")
        sample = (stamp_ns, steady_ns)
        if self._last is None:
            self._last = sample
            return StampVerdict.ACCEPTED
        if self._plausible(self._last, stamp_ns, steady_ns):
            self._last = sample
            self._candidates.clear()
            return StampVerdict.ACCEPTED
        verdict = StampVerdict.NOT_LATER if stamp_ns <= self._last[0] else StampVerdict.AHEAD_OF_CLOCK
        self.rejected += 1
        if self._candidates and not self._plausible(self._candidates[-1], stamp_ns, steady_ns):
            self._candidates.clear()
        self._candidates.append(sample)
        if len(self._candidates) >= self.params.resync_samples:
            self._last = sample
            self._candidates.clear()
            return StampVerdict.REANCHORED
        return verdict


#: How far [s] a plan's t = 0 may lie ahead of the latest accepted sample (the walk behavior stamps its plans
#: at the present or in the past: a plan stamped further ahead is a rogue one).
MAX_PLAN_LEAD = 5.0


def plan_stamp_problem(plan_stamp_ns: int, guard: StampGuard) -> Optional[str]:
    """Why a plan stamped ``plan_stamp_ns`` is implausible on ``guard``'s time base, else None (no time base
    yet: any stamp is accepted)."""
    last = guard.last_stamp_ns
    if last is not None and plan_stamp_ns - last > MAX_PLAN_LEAD * _NS:
        return (f"its stamp {plan_stamp_ns / _NS:.3f} s is {(plan_stamp_ns - last) / _NS:.3f} s ahead of the "
                f"latest sample (at most {MAX_PLAN_LEAD} s: plans start at the present or in the past)")
    return None


__all__ = ["MAX_PLAN_LEAD", "StampGuard", "StampGuardParameters", "StampVerdict", "plan_stamp_problem"]
