"""StampGuard (issue 16): rogue stamps are rejected, plausible streams are not, whatever drops samples."""

import pytest

from walk_mpc.core.control.stamps import StampGuard, StampGuardParameters, StampVerdict
from walk_mpc.core.errors import ParameterError

MS = 1_000_000


def test_a_stream_three_times_faster_than_real_time_survives_a_stall_that_drops_its_samples():
    """A simulator at 3x real time, 10 ms stamps every 3.3 ms; the subscriber stalls 0.3 s and keeps only the
    last 10 samples of the stall (a best-effort queue): the first sample after it leads the steady clock by
    ~0.6 s, which a real-time-only guard rejects and re-anchors on (a walk would end)."""
    guard = StampGuard()
    stamp, steady = 1000_000 * MS, 5_000 * MS
    for _ in range(50):
        assert guard.check(stamp, steady) is StampVerdict.ACCEPTED
        stamp, steady = stamp + 10 * MS, steady + 10 * MS // 3
    dropped = 90 - 10  # 0.3 s of stall at 3.3 ms per sample, the queue keeps the last 10
    stamp += dropped * 10 * MS
    steady += 300 * MS
    for _ in range(10):
        assert guard.check(stamp, steady) is StampVerdict.ACCEPTED
        stamp += 10 * MS
    real_time_only = StampGuard(StampGuardParameters(max_rate=1.0))
    real_time_only.check(1000_000 * MS, 5_000 * MS)
    verdict = real_time_only.check(1000_000 * MS + 900 * MS, 5_000 * MS + 300 * MS)
    assert verdict is StampVerdict.AHEAD_OF_CLOCK


def test_rogue_stamps_are_rejected_and_the_time_base_is_kept():
    guard = StampGuard()
    assert guard.check(1000 * 1000 * MS, 0) is StampVerdict.ACCEPTED
    assert guard.check(2147483647 * 1000 * MS, 10 * MS) is StampVerdict.AHEAD_OF_CLOCK
    assert guard.check((1000 + 3600) * 1000 * MS, 20 * MS) is StampVerdict.AHEAD_OF_CLOCK  # an hour ahead
    assert guard.check(1000 * 1000 * MS + 10 * MS, 30 * MS) is StampVerdict.ACCEPTED
    assert guard.check(1000 * 1000 * MS, 40 * MS) is StampVerdict.NOT_LATER
    # five times faster than the steady clock for 1 s: beyond max_rate (4) plus max_lead (0.5 s)
    assert guard.check(1000 * 1000 * MS + 5010 * MS, 1030 * MS) is StampVerdict.AHEAD_OF_CLOCK
    assert guard.rejected == 4 and guard.last_stamp_ns == 1000 * 1000 * MS + 10 * MS


@pytest.mark.parametrize("rate", [0.5, float("nan"), "2", 1e6])
def test_max_rate_must_be_a_real_time_factor(rate):
    with pytest.raises(ParameterError, match="max_rate"):
        StampGuardParameters(max_rate=rate)
