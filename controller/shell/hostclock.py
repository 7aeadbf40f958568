"""What the host clock is worth, as the TimeQuality octet of the `t` goosectl publishes.

The shell asks the kernel (`adjtimex(2)` with no mode bits: a read, no privilege needed)
and hands the octet to the pure core (`GooseHub.set_time_quality`); nothing under
controller/goose reads a clock. The mapping (IEC 61850-8-1 TimeQuality, 7-2 accuracy):

- the kernel says the clock is not synchronised (state TIME_ERROR or status STA_UNSYNC):
  ClockNotSynchronized, accuracy unspecified;
- synchronised: LeapSecondsKnown (an NTP- or PTP-disciplined kernel is told about leap
  seconds), accuracy = the bits of second fraction the kernel's estimated error allows
  (esterror 1 ms -> 9 bits, 2**-9 s = 1.95 ms >= 1 ms);
- the call fails: ClockFailure.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from functools import cache

from goosectl.protocols.goose import time_quality

TIME_ERROR = 5
STA_UNSYNC = 0x0040
#: the finest accuracy a `t` fraction of 24 bits can state
MAX_ACCURACY_BITS = 24


class Timex(ctypes.Structure):
    """`struct timex` of <sys/timex.h> (Linux); ctypes aligns the longs as the C ABI does."""

    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time_sec", ctypes.c_long),
        ("time_usec", ctypes.c_long),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_reserved", ctypes.c_int * 11),
    ]


@cache
def _libc() -> ctypes.CDLL:
    lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    lib.adjtimex.argtypes = [ctypes.POINTER(Timex)]
    lib.adjtimex.restype = ctypes.c_int
    return lib


def read_clock() -> tuple[int, int, int]:
    """(clock state, status bits, estimated error in us) from the kernel; OSError if the
    call fails."""
    tx = Timex()  # modes 0: read only
    state = _libc().adjtimex(ctypes.byref(tx))
    if state < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"adjtimex: {err}")
    return state, tx.status, tx.esterror


def quality_of(state: int, status: int, esterror_us: int) -> int:
    """The TimeQuality octet for a kernel clock in this condition (see the module doc)."""
    if state == TIME_ERROR or status & STA_UNSYNC:
        return time_quality(clock_not_synchronized=True)
    if esterror_us <= 0:
        bits = MAX_ACCURACY_BITS
    else:
        bits = max(0, min(MAX_ACCURACY_BITS, math.floor(math.log2(1e6 / esterror_us))))
    return time_quality(leap_seconds_known=True, accuracy=bits)


def host_time_quality() -> int:
    """The octet for this host's clock now."""
    try:
        return quality_of(*read_clock())
    except (OSError, AttributeError):
        return time_quality(clock_failure=True)
