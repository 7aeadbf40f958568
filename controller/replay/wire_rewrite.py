"""GOOSE-aware rewrites for putting a capture back on a wire (`goosectl replay --iface`).

A capture replayed verbatim is what tcpreplay sends, and a relay under test rejects much
of it: ``t`` is years old, stNum and sqNum roll back each time the capture is looped or
when a live stream of the same control block came first (IEC 61850-8-1 receivers and
IEC 62351-6 rules treat both as a replay), and the source MAC is some other IED's. These
rewrites fix that per frame, deterministically (the current time is an argument: this
module reads no clock):

- ``src``: every Ethernet frame's source MAC (no decode needed: bytes 6..11).
- ``time_shift_ns``: each GOOSE frame's ``t`` moved by the same amount, its time-quality
  octet kept, so the intervals between events stay as captured.
- ``renumber``: per stream (gocbRef, APPID) stNum and sqNum continue from where they
  were (a live stream heard before the replay, or the previous loop): every change of
  the captured stNum is one new state (stNum + 1, sqNum 0), every other frame one more
  retransmission (sqNum + 1). Both wrap as a publisher's do (to 1; stNum 0 is never
  sent).

A GOOSE frame that cannot be decoded when ``t`` or the numbers must change is sent as
captured and counted (``not_rewritten``): a replay never stops on one bad frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from goosectl.protocols.goose import GooseError, decode_frame, encode_frame, is_goose
from goosectl.protocols.goose.utctime import UtcTime

_U32_MAX = 0xFFFFFFFF
_MAX_T_NS = (1 << 32) * 1_000_000_000
StreamKey = tuple[str, int]


def next_count(n: int) -> int:
    """stNum/sqNum after ``n``: +1, from 2**32-1 back to 1 (0 is what a restart sends)."""
    return 1 if n >= _U32_MAX else n + 1


@dataclass
class Numbers:
    """Where one stream's numbers stand: what was sent last, and the captured stNum the
    sent state stands for (None before the first replayed frame of a loop)."""

    st: int
    sq: int
    captured_st: int | None = None


@dataclass
class WireRewrite:
    """The rewrites of one replay; `apply` one frame at a time, in order."""

    src: bytes | None = None
    time_shift_ns: int | None = None
    renumber: bool = False
    #: per stream, the numbers to continue from (filled by `continue_from` and by `apply`)
    streams: dict[StreamKey, Numbers] = field(default_factory=dict)
    rewritten: int = 0
    not_rewritten: int = 0
    last_error: str | None = None

    @property
    def decodes(self) -> bool:
        """True when frames must be decoded (``t`` or the numbers change)."""
        return self.time_shift_ns is not None or self.renumber

    def continue_from(self, gocb_ref: str, appid: int, st_num: int, sq_num: int) -> None:
        """A live stream's last numbers: the replay's first state of that stream follows."""
        self.streams[(gocb_ref, appid)] = Numbers(st_num, sq_num)

    def new_loop(self) -> None:
        """A new pass over the capture: its first frame of each stream is a new state."""
        for n in self.streams.values():
            n.captured_st = None

    def apply(self, data: bytes) -> bytes:
        """The frame to send for captured frame ``data``."""
        if self.src is not None and len(data) >= 12:
            data = data[:6] + self.src + data[12:]
        if not self.decodes or not is_goose(data):
            return data
        try:
            frame = decode_frame(data)
            changes: dict[str, object] = {}
            if self.time_shift_ns is not None:
                ns = frame.t.to_ns() + self.time_shift_ns
                if not 0 <= ns < _MAX_T_NS:
                    raise ValueError(f"t shifted to {ns} ns does not fit a UtcTime")
                changes["t"] = UtcTime.from_ns(ns, frame.t.quality)
            if self.renumber:
                changes["st_num"], changes["sq_num"] = self._numbers(
                    (frame.gocb_ref, frame.appid), frame.st_num
                )
            out = encode_frame(replace(frame, **changes))  # type: ignore[arg-type]
        except (GooseError, ValueError) as exc:
            self.not_rewritten += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return data
        self.rewritten += 1
        return out

    def _numbers(self, key: StreamKey, captured_st: int) -> tuple[int, int]:
        n = self.streams.get(key)
        if n is None:
            # nothing heard of this stream: its first state keeps the captured stNum
            n = self.streams[key] = Numbers(captured_st, 0, captured_st)
            return n.st, n.sq
        if n.captured_st != captured_st:
            n.st, n.sq, n.captured_st = next_count(n.st), 0, captured_st
        else:
            n.sq = next_count(n.sq)
        return n.st, n.sq
