"""Sequence-number rules of the device link: 16-bit counters, wrap, and at-most-once.

The controller owns the command counter, the device owns the event counter; both are
u16 and wrap from 0xFFFF to 0x0000. "Newer" uses serial-number arithmetic (RFC 1982
style on 16 bits): b is newer than a when (b - a) mod 2^16 is in 1..0x7FFF. That is what
lets the device tell a retry (same seq) from a late duplicate of an old command (older
seq, must not run) from a new command, with a handful of bytes of state.

`DedupWindow` is that state, as a value a device implementation (firmware_sim) keeps:
the last DEDUP_WINDOW (seq -> encoded response) pairs plus the newest executed seq. It
does no I/O and reads no clock; it only classifies.
"""

from __future__ import annotations

from collections import OrderedDict
from enum import Enum

SEQ_BITS = 16
SEQ_MODULO = 1 << SEQ_BITS
SEQ_MASK = SEQ_MODULO - 1
HALF = SEQ_MODULO // 2
DEDUP_WINDOW = 4  # responses a device keeps; stop-and-wait needs 1, 4 absorbs late copies

# Recommended timing (SPEC.md "Timeouts"), at 115200 baud a 21-byte frame takes ~1.8 ms.
RESPONSE_TIMEOUT_MS = 50  # controller: no ACK/NACK within this -> resend, same seq
COMMAND_RETRIES = 3  # resends after the first try, then report the device unreachable
EVENT_RETRY_MS = 200  # device: resend the oldest unacknowledged event
EVENT_QUEUE = 8  # device: unacknowledged events kept before setting EVENT_OVERFLOW


def seq_next(seq: int) -> int:
    """The sequence number after ``seq`` (wraps 0xFFFF -> 0)."""
    return (seq + 1) & SEQ_MASK


def seq_distance(a: int, b: int) -> int:
    """Signed distance from a to b in -0x8000..0x7FFF (positive: b is newer)."""
    d = (b - a) & SEQ_MASK
    return d - SEQ_MODULO if d >= HALF else d


def seq_newer(a: int, b: int) -> bool:
    """True when ``b`` was issued after ``a`` (within half the number space)."""
    return seq_distance(a, b) > 0


class Verdict(Enum):
    """What a device does with an arriving command seq."""

    NEW = "new"  # execute, then remember the response
    REPEAT = "repeat"  # answer with the stored response, do not execute
    STALE = "stale"  # older than the newest executed and not stored: NACK STALE_SEQUENCE


class DedupWindow:
    """The device's memory for at-most-once execution (see SPEC "Commands")."""

    __slots__ = ("_responses", "newest", "size")

    def __init__(self, size: int = DEDUP_WINDOW, baseline: int | None = None) -> None:
        if size < 1:
            raise ValueError(f"dedup window must hold at least 1 response, got {size}")
        self.size = size
        self._responses: OrderedDict[int, bytes] = OrderedDict()
        # seq of the newest executed command; None right after boot (nothing is stale yet)
        self.newest: int | None = None if baseline is None else (baseline - 1) & SEQ_MASK

    def classify(self, seq: int) -> tuple[Verdict, bytes | None]:
        """NEW, REPEAT with the stored response frame, or STALE."""
        stored = self._responses.get(seq)
        if stored is not None:
            return Verdict.REPEAT, stored
        if self.newest is None or seq_newer(self.newest, seq):
            return Verdict.NEW, None
        return Verdict.STALE, None

    def remember(self, seq: int, response: bytes) -> None:
        """Store the response sent for ``seq`` (call for every NEW command, ACK or NACK)."""
        self._responses[seq] = response
        self._responses.move_to_end(seq)
        while len(self._responses) > self.size:
            self._responses.popitem(last=False)
        if self.newest is None or seq_newer(self.newest, seq):
            self.newest = seq

    def rebase(self, next_command_seq: int) -> None:
        """Adopt the controller's next seq (from EVENT_ACK of POWER_UP): older ones are stale."""
        self._responses.clear()
        self.newest = (next_command_seq - 1) & SEQ_MASK

    def __len__(self) -> int:
        return len(self._responses)
