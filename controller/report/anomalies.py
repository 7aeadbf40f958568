"""The anomalies of a `replay` or `listen` run, per stream: what, when (UTC), which frames.

A per-stream summary that says `valid` at the end hides what happened on the way: frames
replayed, a forged state injected, a publisher silent past its TAL. Each such finding is
collected here, grouped by (stream, kind), and printed as one section after the frames,
so an attack trace cannot pass for a clean one; the command exits 1 when there is any
(docs/cli.md, exit codes).

Kinds: the class of a frame that is not a plain first frame, new state or retransmission
(`missed_states`, `duplicate`, `out_of_order`, `replay`, `restart`, `foreign_source`), a
flag that says the frame is suspect (confRev, ndsCom, simulation, S-bit, shape, stale
`t`, non-canonical integers), a refusal by the receive rules no class or flag explains,
a stream `lost` (its TAL ran out), and, outside any stream, `malformed` frames. A jump of
a capture's clock is a fact of the file, not of the network: it is reported where it
happens and counted (`time_jumps`), not here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from goosectl.controller.goose.effects import FrameClassified

#: classes of an ordinary stream (bay_report's timeline skips the same ones)
NORMAL_CLASSES = frozenset({"first", "new_state", "retransmission"})
#: flags that describe an ordinary stream: a wrap of stNum/sqNum, a new state whose data
#: did not change, a frame after TAL (already reported as the stream lost, then restart)
ORDINARY_FLAGS = frozenset({"wrap", "unchanged_data", "tal_late"})
#: kinds a timer finds (a TAL that ran out), listed with the last frame read before them
TIMER_KINDS = frozenset({"lost"})
#: frame numbers listed per (stream, kind); beyond, only counted
MAX_FRAMES = 100
#: the key of findings that belong to no stream (malformed frames)
NO_STREAM = "-"


def utc_text(ns: int) -> str:
    """``2012-03-23T16:13:27.018285Z``: the one way event lines write a time (microseconds,
    UTC, as a capture's timestamps are)."""
    stamp = dt.datetime.fromtimestamp(ns // 1000 / 1e6, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: frames of no subscription (a listener with a config sees the whole bus): counted as
#: `unmatched`, not a finding
UNMATCHED = "unmatched"


def frame_kinds(v: FrameClassified) -> list[str]:
    """What is anomalous about one classified frame (empty: nothing)."""
    if v.cls == UNMATCHED:
        return []
    kinds = [] if v.cls in NORMAL_CLASSES else [v.cls]
    kinds += [f for f in v.flags if f not in ORDINARY_FLAGS]
    if v.refused is not None and not kinds:
        kinds.append(f"refused_{v.refused}")
    return kinds


@dataclass(slots=True)
class Finding:
    """One kind of anomaly on one stream: how often, and the first and last occurrence."""

    kind: str
    count: int = 0
    frames: list[int] = field(default_factory=list)
    first: tuple[int | None, int] | None = None
    last: tuple[int | None, int] | None = None

    def add(self, frame: int | None, ns: int) -> None:
        self.count += 1
        if frame is not None and len(self.frames) < MAX_FRAMES:
            self.frames.append(frame)
        if self.first is None:
            self.first = (frame, ns)
        self.last = (frame, ns)

    def as_json(self) -> dict[str, Any]:
        def at(p: tuple[int | None, int] | None) -> dict[str, Any] | None:
            return None if p is None else {"frame": p[0], "utc": utc_text(p[1])}

        return {
            "kind": self.kind,
            "count": self.count,
            "frames": self.frames,
            "first": at(self.first),
            "last": at(self.last),
        }

    def text(self) -> str:
        listed = ",".join(map(str, self.frames))
        more = (
            f",... ({self.count - len(self.frames)} more)" if self.count > len(self.frames) else ""
        )
        # a stream lost is no frame's doing: it names the frame read last before it
        of = "after frame(s)" if self.kind in TIMER_KINDS else "frame(s)"
        where = f" {of} {listed}{more}" if listed else ""
        assert self.first is not None and self.last is not None  # added before printed
        when = utc_text(self.first[1])
        if self.count > 1:
            when += f" .. {utc_text(self.last[1])}"
        return f"{self.kind}: {self.count}{where} ({when})"


class Anomalies:
    """Findings by stream id (in the order first met), then by kind."""

    def __init__(self) -> None:
        self.streams: dict[str, dict[str, Finding]] = {}

    def add(self, stream: str, kind: str, frame: int | None, ns: int) -> None:
        kinds = self.streams.setdefault(stream, {})
        finding = kinds.get(kind)
        if finding is None:
            finding = kinds[kind] = Finding(kind)
        finding.add(frame, ns)

    def frame(self, v: FrameClassified, frame: int, ns: int) -> None:
        for kind in frame_kinds(v):
            self.add(v.stream, kind, frame, ns)

    @property
    def count(self) -> int:
        return sum(f.count for kinds in self.streams.values() for f in kinds.values())

    def as_json(self) -> dict[str, Any]:
        """``{"event": "anomalies", "count", "streams": {id: [finding, ...]}}``."""
        return {
            "event": "anomalies",
            "count": self.count,
            "streams": {
                sid: [f.as_json() for f in kinds.values()] for sid, kinds in self.streams.items()
            },
        }

    def lines(self) -> list[str]:
        """The text section: ``anomalies: none``, or a header and a block per stream."""
        if not self.streams:
            return ["anomalies: none"]
        out = ["anomalies:"]
        for sid, kinds in self.streams.items():
            out.append(f"  {'(no stream)' if sid == NO_STREAM else sid}:")
            out += [f"    {f.text()}" for f in kinds.values()]
        return out
