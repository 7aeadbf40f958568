"""Subscriptions: match frames to streams, run each stream's machines, merge A/B copies.

Pure: frames and times in, effects out, through the engine's `Runner` (which owns the
timer heap and the journal). Per frame the work is: one header parse (allData untouched),
one dict lookup for the stream, one dispatch; allData is decoded only when the frame
carries a new state with new data.

A/B: a stream received on two networks has one quality machine fed with the first copy of
each (stNum, sqNum), one liveness machine per side, and in `preferred` mode a selector
machine that decides which side delivers (failover when the active side is lost,
failback automatic or by the operator).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

from controller.engine import Runner, Table
from controller.goose.config import SubscriptionCfg
from controller.goose.effects import FrameClassified, StreamState
from controller.goose.fastpath import Facts, Memory, stream_key
from controller.goose.frames import FrameIn
from protocols.ethernet.mac import format_mac
from protocols.goose import GooseError, Vlan, parse_header

TABLES = Path(__file__).parent / "tables"
#: How many recent (stNum, sqNum) pairs an A/B stream remembers to spot the second copy.
AB_WINDOW = 64


def load_tables() -> dict[str, Table]:
    return {n: Table.load(TABLES / f"{n}.yaml") for n in ("stream", "side", "ab_selector")}


class Stream:
    """What the bank keeps per stream: machine ids and counters (the state is in machines)."""

    __slots__ = (
        "ab",
        "appid",
        "counts",
        "gocb_ref",
        "id",
        "label",
        "memory",
        "recent",
        "side_ids",
        "sub",
        "vlan_sides",
    )

    def __init__(
        self, sid: str, label: str, gocb_ref: str, appid: int, sub: SubscriptionCfg | None
    ) -> None:
        self.id = sid
        self.label = label
        self.gocb_ref = gocb_ref
        self.appid = appid
        self.sub = sub
        self.ab = sub.ab if sub is not None else None
        self.counts: Counter[str] = Counter()
        self.recent: OrderedDict[tuple[int, int], str] = OrderedDict()
        self.side_ids: dict[str, str] = {}
        self.vlan_sides: dict[int, str] = {}
        self.memory: Memory | None = None
        if self.ab is not None:
            if self.ab.vlan_a is not None:
                self.vlan_sides[self.ab.vlan_a] = "A"
            if self.ab.vlan_b is not None:
                self.vlan_sides[self.ab.vlan_b] = "B"


class SubscriberBank:
    def __init__(
        self,
        runner: Runner,
        subscriptions: list[SubscriptionCfg] | None = None,
        tables: dict[str, Table] | None = None,
    ) -> None:
        self.runner = runner
        self.tables = tables or load_tables()
        self.subs = {s.key: s for s in (subscriptions or [])}
        self.observer = not self.subs
        self.streams: dict[tuple[bytes, int, str], Stream] = {}
        self.by_id: dict[str, Stream] = {}
        #: stream_key bytes -> stream, for the retransmission fast path
        self.fast: dict[bytes, Stream] = {}
        self.unmatched = 0
        self.malformed = 0
        self.last_error: str | None = None

    # -- frames -------------------------------------------------------------------------

    def on_frame(self, buf: bytes, side: str, now_ns: int, vlan: Vlan | None = None):
        """Judge one frame from network `side` ("A" or "B").

        Returns (stream or None, header or None, status): status is "judged" (the stream
        machine's verdict arrives through the runner's effect sink), "malformed",
        "unmatched", or "duplicate" (the second copy of an A/B frame, or a copy from the
        standby side in preferred mode: supervised, not delivered)."""
        key = stream_key(buf)
        stream = self.fast.get(key) if key is not None else None
        sq = stream.memory.repeat_sq(buf) if stream is not None else None
        if sq is not None:
            # the stream's last frame with a new sqNum: nothing to parse or re-check
            hdr = Facts(stream.memory.hdr, sq)
            vlan = vlan or stream.memory.hdr.vlan
        else:
            try:
                full = parse_header(buf, vlan=vlan)
            except GooseError as exc:
                self.malformed += 1
                self.last_error = str(exc)
                return None, None, "malformed"
            vlan = full.vlan
            skey = (full.dst, full.appid, full.gocb_ref)
            stream = self.streams.get(skey)
            if stream is None:
                stream = self._open(skey, full, now_ns)
                if stream is None:
                    self.unmatched += 1
                    return None, full, "unmatched"
            elif stream.sub is not None and not _filters_match(stream.sub, full):
                self.unmatched += 1
                return None, full, "unmatched"
            if key is not None:
                stream.memory = Memory(buf, full)
                self.fast[key] = stream
            hdr = Facts(full)
        if stream.vlan_sides and vlan is not None:
            side = stream.vlan_sides.get(vlan.id, side)
        frame = FrameIn(hdr, side)
        runner = self.runner
        if stream.side_ids:
            runner.feed(stream.side_ids[side], "frame", now_ns, frame)
            pair = (hdr.st_num, hdr.sq_num)
            recent = stream.recent
            if pair in recent:
                stream.counts[f"ab_duplicate_{side}"] += 1
                return stream, hdr, "duplicate"
            recent[pair] = side
            if len(recent) > AB_WINDOW:
                recent.popitem(last=False)
            sel = stream.side_ids.get("selector")
            if sel is not None and _active_side(runner, sel) != side:
                stream.counts[f"standby_{side}"] += 1
                return stream, hdr, "duplicate"
        for e in runner.feed(stream.id, "frame", now_ns, frame).effects:
            if type(e) is FrameClassified:
                stream.counts[e.cls] += 1
        return stream, hdr, "judged"

    def _open(self, key, hdr, now_ns: int) -> Stream | None:
        sub = self.subs.get(key)
        if sub is None and not self.observer:
            return None
        if sub is not None and not _filters_match(sub, hdr):
            return None
        label = sub.label if sub is not None else hdr.gocb_ref
        sid = f"{label}@{hdr.appid:04x}/{format_mac(hdr.dst)}"
        stream = Stream(sid, label, hdr.gocb_ref, hdr.appid, sub)
        ctx: dict[str, Any] = {"stream": sid}
        if sub is not None:
            ctx["expect_conf_rev"] = sub.conf_rev
            ctx["expect_shape"] = sub.members
        self.runner.start(self.tables["stream"].new(sid, **ctx), now_ns)
        if stream.ab is not None:
            for side in ("A", "B"):
                mid = f"{sid}#{side}"
                stream.side_ids[side] = mid
                self.runner.start(self.tables["side"].new(mid, stream=sid, side=side), now_ns)
            if stream.ab.mode == "preferred":
                mid = f"{sid}#selector"
                stream.side_ids["selector"] = mid
                m = self.tables["ab_selector"].new(
                    mid, stream=sid, failback_auto=stream.ab.failback == "auto"
                )
                self.runner.start(m, now_ns)
        self.streams[key] = stream
        self.by_id[sid] = stream
        return stream

    # -- side events --------------------------------------------------------------------

    def on_side_state(self, report: StreamState, now_ns: int) -> None:
        """Tell a preferred-mode selector that a side was lost or came back."""
        stream = self.by_id.get(report.stream)
        if stream is None or "selector" not in stream.side_ids:
            return
        if report.state in ("lost", "valid") and report.side in ("A", "B"):
            ev = f"{report.side.lower()}_{'lost' if report.state == 'lost' else 'up'}"
            self.runner.feed(stream.side_ids["selector"], ev, now_ns)

    def failback(self, stream_id: str, now_ns: int) -> None:
        """The operator's failback to side A of a preferred-mode stream."""
        stream = self.by_id.get(stream_id)
        if stream is None or "selector" not in stream.side_ids:
            raise KeyError(f"no preferred-mode A/B stream {stream_id!r}")
        self.runner.feed(stream.side_ids["selector"], "failback", now_ns)

    # -- reporting ----------------------------------------------------------------------

    def counters(self) -> dict[str, Any]:
        return {
            "streams": {
                s.id: {
                    "gocbRef": s.gocb_ref,
                    "appid": s.appid,
                    "state": self.runner.machines[s.id].state,
                    "sides": {k: self.runner.machines[v].state for k, v in s.side_ids.items()},
                    "counts": dict(sorted(s.counts.items())),
                }
                for s in self.streams.values()
            },
            "unmatched": self.unmatched,
            "malformed": self.malformed,
        }


def _filters_match(sub: SubscriptionCfg, hdr) -> bool:
    if sub.go_id is not None and hdr.go_id != sub.go_id:
        return False
    if sub.dat_set is not None and hdr.dat_set != sub.dat_set:
        return False
    if sub.vlan is not None and (hdr.vlan is None or hdr.vlan.id != sub.vlan):
        return (
            sub.ab is not None
            and hdr.vlan is not None
            and hdr.vlan.id in (sub.ab.vlan_a, sub.ab.vlan_b)
        )
    return True


def _active_side(runner: Runner, selector_id: str) -> str:
    return "A" if runner.machines[selector_id].state == "a_active" else "B"
