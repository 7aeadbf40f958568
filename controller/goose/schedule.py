"""Retransmission schedules: when the next copy of a GOOSE state goes out.

`doubling` (IEC 61850-8-1's usual picture): MinTime, MinTime, 2xMinTime, 4xMinTime ... up
to MaxTime, the heartbeat. `fixed-burst` (libiec61850's server): `burst_count` repeats at
MinTime, then MaxTime. Interval k is the gap after the k-th frame of a state (k = 0 is
the gap after the state change itself). A frame announces TAL = factor x its gap.
"""

from __future__ import annotations

import math


def interval_ms(schedule: str, k: int, min_ms: float, max_ms: float, burst: int) -> float:
    if schedule == "doubling":
        if k <= 1:
            return min(min_ms, max_ms)
        return min(max_ms, min_ms * (1 << min(k - 1, 40)))
    if schedule == "fixed-burst":
        return min_ms if k < burst else max_ms
    raise ValueError(f"unknown schedule {schedule!r}")


def tal_ms(gap_ms: float, factor: float) -> int:
    return max(1, math.ceil(gap_ms * factor))
