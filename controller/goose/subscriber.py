"""Subscriptions: match frames to streams, run each stream's machines, merge A/B copies.

Pure: frames and times in, effects out, through the engine's `Scheduler` (which owns the
timer heap and the journal). Per frame the work is: one header parse (allData untouched),
one dict lookup for the stream, one dispatch; allData is decoded only when the frame
carries a new state with new data.

Retransmissions (the traffic: a frame repeated with only sqNum, TAL and `t` new) take a
fast path: a real, single-network stream whose last judged frame left it valid with nothing
flagged, and whose LGOS is valid on it, counts a repeat carrying the next sqNum before its
TAL ran out without a dispatch: its counters, its expected sqNum and its TAL deadline move
(the TAL timer is moved lazily, `TimerHeap.move`), and the `FrameClassified` it reports is
the one the stream machine would have. What the repeats moved reaches the machine as one
`repeated` event before its next frame is judged, or with the TAL timer when it expires.
Anything else (a gap, a duplicate, a changed byte, a stream not valid) is judged in full.

A/B: a stream received on two networks has one quality machine fed with the first copy of
each (stNum, sqNum), one liveness machine per side, and in `preferred` mode a selector
machine that decides which side delivers (failover when the active side is lost,
failback automatic or by the operator).

Receive rules (`gate.py`): a subscription has an LGOS machine (tables/lgos.yaml) that says
whether its values may act. Its simulated frames (`simulation` or the S-bit) run on a second
stream machine with its own sequence numbers, so a test set's stream never disturbs the real
one; which of the two acts is the Ed2 simulation switch. A frame from another source MAC
than a configured one is a `foreign_source` anomaly: it is counted and shown, and never
reaches a stream machine. Without a configured source the first one seen is learned with
an alarm, and a frame from a second source is judged as a sequence of its own: a conflict
(alarm, LGOS ErrSt `conflict`), never a lock-out of the first.

Floods: with subscriptions, a frame whose gocbRef TLV (read at fixed offsets, `stream_key`)
is no subscription's is counted `unmatched` before any parse.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from functools import cache
from typing import Any, NamedTuple

from goosectl.controller.config.goose import ABCfg, ReceiveCfg, SubscriptionCfg
from goosectl.controller.engine import Scheduler, Table
from goosectl.controller.engine.resources import shipped
from goosectl.controller.goose.auth import AuthGate
from goosectl.controller.goose.classify import REARMS_TAL
from goosectl.controller.goose.effects import FrameClassified, LgosView, StreamState
from goosectl.controller.goose.fastpath import Facts, Memory, stream_key
from goosectl.controller.goose.frames import FrameIn
from goosectl.controller.goose.gate import is_simulated
from goosectl.protocols.ethernet.mac import format_mac
from goosectl.protocols.goose import GooseError, Vlan, decode_all_data, parse_header

TABLES = shipped("goosectl.controller.goose", "tables")


class Judged(NamedTuple):
    """`SubscriberBank.on_frame`'s answer for one frame (its docstring says each status)."""

    #: the frame's stream, or None when it is no stream's (malformed, unmatched)
    stream: Stream | None
    #: the parsed header, the fast path's `FrameClassified`, or the auth gate's `Verdict`
    header: Any
    status: str


#: `Judged`'s constructor without its Python-level `__new__` (every frame makes one)
_judged = tuple.__new__


#: flags of a judged frame that say nothing about the bytes its repeats share with it: a
#: stream stays on the fast path after them (any other flag sends its repeats to the judge)
REPEATABLE_FLAGS = frozenset({"wrap", "unchanged_data", "tal_late"})
#: How many recent (stNum, sqNum) pairs an A/B stream remembers to spot the second copy.
AB_WINDOW = 64


@cache
def load_tables() -> dict[str, Table]:
    """The package's stream tables, loaded once per process (a `Table` is immutable)."""
    names = ("stream", "side", "ab_selector", "lgos")
    return {n: Table.load(TABLES / f"{n}.yaml") for n in names}


class Stream:
    """What the bank keeps per stream: machine ids and counters (the state is in machines).

    A subscription is one `Stream` for its real frames, with `sim` the `Stream` of its
    simulated frames once one arrived (`parent` points back); both share the LGOS machine.
    """

    __slots__ = (
        "ab",
        "appid",
        "armed",
        "counts",
        "deadline",
        "fold",
        "gocb_ref",
        "id",
        "is_sim",
        "label",
        "lgos",
        "machine",
        "memory",
        "parent",
        "recent",
        "report",
        "side_ids",
        "sim",
        "sq",
        "sub",
        "tal_limit_ns",
        "vlan_sides",
    )

    def __init__(
        self,
        sid: str,
        label: str,
        gocb_ref: str,
        appid: int,
        sub: SubscriptionCfg | None,
        parent: Stream | None = None,
    ) -> None:
        self.id = sid
        self.label = label
        self.gocb_ref = gocb_ref
        self.appid = appid
        self.sub = sub
        self.parent = parent
        self.is_sim = parent is not None
        self.sim: Stream | None = None
        self.lgos: Any = parent.lgos if parent is not None else None
        self.ab = sub.ab if sub is not None and parent is None else None
        #: the longest TAL supervised (0: the frame's own), set when the stream opens
        self.tal_limit_ns = 0
        self.counts: Counter[str] = Counter()
        self.recent: OrderedDict[tuple[int, int, bool], str] = OrderedDict()
        self.side_ids: dict[str, str] = {}
        self.vlan_sides: dict[int, str] = {}
        self.memory: Memory | None = None
        #: the stream machine (set when started); the fast path reads its state
        self.machine: Any = None
        #: the fast path may count this stream's next repeat (see `SubscriberBank.repeat`):
        #: its last judged frame left it valid, unflagged, delivering
        self.armed = False
        #: last sqNum and TAL deadline as the fast path sees them
        self.sq = self.deadline = 0
        #: the fields of the report of a repeat (`FrameClassified`), side and sqNum aside
        self.report = _repeat_report(sid, None)
        #: (sqNum, rx_ns, tal_ns) of the last fast-pathed repeat not yet folded into the
        #: machine (the `repeated` event), or None
        self.fold: tuple[int, int, int] | None = None
        if self.ab is not None:
            if self.ab.vlan_a is not None:
                self.vlan_sides[self.ab.vlan_a] = "A"
            if self.ab.vlan_b is not None:
                self.vlan_sides[self.ab.vlan_b] = "B"


class SubscriberBank:
    def __init__(
        self,
        scheduler: Scheduler,
        subscriptions: list[SubscriptionCfg] | None = None,
        tables: dict[str, Table] | None = None,
        simulation: bool = False,
        max_streams: int = 10_000,
        receive: ReceiveCfg | None = None,
        auth: AuthGate | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.receive = receive or ReceiveCfg()
        #: the A/B merge of a stream not configured for it (None: one network); set when
        #: the shell receives on two networks, so the second copy of a frame is a duplicate
        self.default_ab: ABCfg | None = None
        #: the IEC 62351-6 gate, None when no frame is to be checked (`auth.py`)
        self.auth = auth if auth is not None and auth.active else None
        self.tables = tables or load_tables()
        self.subs = {s.key: s for s in (subscriptions or [])}
        #: the controller's simulation mode (LPHD.Sim); each LGOS machine holds its copy
        self.simulation = simulation
        self.observer = not self.subs
        #: the gocbRef TLVs of the subscriptions as `stream_key` cuts them, to drop a
        #: frame of no subscription before any parse (None: observer mode, or a gocbRef
        #: long enough for a long-form BER length, which `stream_key` does not cut)
        self.wanted: frozenset[bytes] | None = None
        if self.subs and all(len(s.gocb_ref.encode()) < 0x80 for s in self.subs.values()):
            self.wanted = frozenset(
                b"\x80" + bytes((len(r),)) + r
                for r in (s.gocb_ref.encode() for s in self.subs.values())
            )
        self.streams: dict[tuple[bytes, int, str], Stream] = {}
        self.by_id: dict[str, Stream] = {}
        #: stream_key bytes -> stream, for the retransmission fast path
        self.fast: dict[bytes, Stream] = {}
        self.unmatched = 0
        self.malformed = 0
        self.last_error: str | None = None
        #: observer mode keeps at most max_streams streams: `seen` orders them by their
        #: last frame, and a new one evicts the stream idle longest (a flood of one-frame
        #: streams cannot grow memory without bound, nor push out the live ones)
        self.max_streams = max_streams
        self.seen: OrderedDict[str, tuple] = OrderedDict()
        self.fast_keys: dict[str, bytes] = {}  # stream id -> its key in `fast`
        self.evicted = 0
        #: count uneventful repeats without a dispatch (`repeat`); off, every frame is
        #: judged by its stream machine: the reference the fast path is tested against
        self.fast_path = True
        #: stream machine id -> the `ref_*` context its machine starts with (`recall`)
        self.recalled: dict[str, dict[str, Any]] = {}

    def recall(self) -> int:
        """A restarted controller: each subscription's stream (and its simulated stream)
        judges its first frame against the last state the scheduler's journal recalls of
        it, its stream machine's last checkpoint. Without this the first frame of every
        stream is accepted, so an authentic frame recorded before the restart (a trip),
        sent again before its publisher's next frame, would act (classify.py, `_old`).
        Called by the live shell before the first frame; returns how many streams had a
        state to recall (none without a journal, or on a new one)."""
        journal = self.scheduler.journal
        if journal is None:
            return 0
        for sub in self.subs.values():
            sid = stream_id(sub.label, sub.appid, sub.dst)
            for mid in (sid, sim_id(sid)):
                refs = _recalled(journal.checkpoint(mid), self.tables["stream"].name)
                if refs is not None:
                    self.recalled[mid] = refs
        return len(self.recalled)

    def merge_sides(self, on: bool = True) -> None:
        """Frames arrive on two networks (`listen --iface-b`, `run` with interface B): every
        stream not configured for A/B is merged as `ab: {mode: merge}`, so the second copy
        of each frame is a duplicate whatever order the two sockets' batches come in. On
        one stream machine alone, A's n and n+1 before B's n made B's n `out_of_order`,
        the machine followed it, and B's n+1 was a second `retransmission`. Off (`on`
        false) where the networks are merged below GOOSE already (native PRP's duplicate
        discard passes one copy: a GOOSE-level merge would call the other side lost)."""
        self.default_ab = ABCfg() if on else None

    # -- frames -------------------------------------------------------------------------

    def rejects(self, buf: bytes) -> bool:
        """A frame of no subscription, by its gocbRef TLV at fixed offsets (no parse):
        counted `unmatched`, and the shell drops it before anything else is done for it
        (no report, no dispatch), so a flood of other streams on the subscribed address
        costs this lookup a frame. False in observer mode and for a frame cut short (the
        full path says what is wrong with it)."""
        wanted = self.wanted
        if wanted is None:
            return False
        key = stream_key(buf)
        if key in wanted or not _whole_tlv(key):
            return False
        self.unmatched += 1
        return True

    def on_frame(self, buf: bytes, side: str, now_ns: int, vlan: Vlan | None = None) -> Judged:
        """Judge one frame from network `side` ("A" or "B").

        Returns (stream or None, header or report or None, status): status is "judged" (the
        stream machine's verdict arrives through the scheduler's effect sink), "repeat" (a
        retransmission counted on the fast path; the second item is its `FrameClassified`),
        "malformed", "unmatched", "foreign_source" (another source MAC than the stream's),
        or "duplicate" (the second copy of an A/B frame, or a copy from the standby side in
        preferred mode: supervised, not delivered), or "auth_refused" (the subscription's
        authentication policy refused it before anything of its stream moved; the second
        item is the gate's `Verdict`).

        The retransmission's fast path is written out here, in one function: it is the
        path of nearly every frame. A frame it does not take is parsed (`_parse_and_judge`)
        or, a new sqNum of the stream's last frame, judged from the memory (`_judge`)."""
        key = stream_key(buf)
        if self.wanted is not None and key not in self.wanted:
            return self._not_wanted(key)
        auth = self.auth
        if auth is not None:  # before anything of a stream moves (the gocbRef is unchanged)
            checked = auth.check(buf, now_ns)
            if checked is None:
                skey = auth.last_policy.key
                its = self.streams.get(skey) if skey else None
                return _judged(Judged, (its, auth.last, "auth_refused"))
            buf = checked
        stream = self.fast.get(key) if key is not None else None
        rep = None
        if stream is not None:
            mem = stream.memory
            rep = mem.repeat(buf) if mem is not None else None
            if rep is None and stream.sim is not None and stream.sim.memory is not None:
                mem = stream.sim.memory
                rep = mem.repeat(buf)
                if rep is not None:
                    stream = stream.sim
            if rep is not None and mem is not None:  # (a repeat has a memory: for mypy)
                if not (vlan is mem.tag or vlan == mem.tag):
                    rep = None  # the same bytes on another (kernel-stripped) VLAN: parse
                elif stream.armed and rep[0] == stream.sq + 1 and now_ns < stream.deadline:
                    # the next sqNum before TAL ran out (not a gap, duplicate, wrap or late)
                    report = self.repeat(stream, rep[0], rep[1], side, now_ns)
                    if report is not None:
                        return _judged(Judged, (stream, report, "repeat"))
        if rep is None:
            return self._parse_and_judge(buf, side, now_ns, vlan, key)
        # the stream's last frame with a new sqNum (TAL, t): nothing to parse or re-check
        assert stream is not None and mem is not None  # a repeat is of a known stream
        hdr = Facts(mem.hdr, rep[0], rep[1], mem.t_of(buf))
        return self._judge(stream, hdr, side, vlan or mem.vlan, False, now_ns)

    def _not_wanted(self, key: Any) -> Judged:
        """A frame of no subscription's stream (or cut short before its gocbRef ends)."""
        if not _whole_tlv(key):
            self.malformed += 1
            self.last_error = "truncated before the end of gocbRef"
            return _judged(Judged, (None, None, "malformed"))
        self.unmatched += 1  # a flood of other streams costs this, never a parse
        return _judged(Judged, (None, None, "unmatched"))

    def _parse_and_judge(
        self, buf: bytes, side: str, now_ns: int, vlan: Vlan | None, key: Any
    ) -> Judged:
        """A frame the fast path does not know: parsed, its stream found (or opened), its
        source checked, remembered for the fast path, then judged."""
        tag = vlan
        try:
            full = parse_header(buf, vlan=vlan)
        except GooseError as exc:
            self.malformed += 1
            self.last_error = str(exc)
            return _judged(Judged, (None, None, "malformed"))
        skey = (full.dst, full.appid, full.gocb_ref)
        stream = self.streams.get(skey)
        if stream is None:
            stream = self._open(skey, full, now_ns)
            if stream is None:
                self.unmatched += 1
                return _judged(Judged, (None, full, "unmatched"))
        elif stream.sub is not None and not _filters_match(stream.sub, full):
            self.unmatched += 1
            return _judged(Judged, (None, full, "unmatched"))
        if is_simulated(full):
            stream = stream.sim or self._open_sim(stream, now_ns)
        foreign = False
        expected = stream.lgos.ctx["sim_src" if stream.is_sim else "src"]
        if expected is None:
            # a subscription learns it with an alarm (observer mode acts on nothing)
            learned = (stream.is_sim, full.src, stream.sub is not None)
            self.scheduler.feed(stream.lgos.id, "source", now_ns, learned)
        elif full.src != expected:
            if (stream.sub is not None and stream.sub.src is not None) or stream.is_sim:
                stream.counts["foreign_source"] += 1
                return _judged(Judged, (stream, full, "foreign_source"))
            # learned, not configured: the second source is judged as a sequence of
            # its own (a conflict); its frames never become the fast path's memory
            stream.counts["second_source"] += 1
            foreign = True
        if key is not None and not foreign:
            stream.memory = Memory(buf, full, tag)
            root = stream.parent or stream
            self.fast[key] = root
            self.fast_keys[root.id] = key
        return self._judge(stream, Facts(full), side, full.vlan, foreign, now_ns)

    def _judge(
        self, stream: Stream, hdr: Any, side: str, vlan: Vlan | None, foreign: bool, now_ns: int
    ) -> Judged:
        """The stream machine judges the frame (`hdr`: its facts); the A/B copies, a folded
        run of repeats and the LGOS follow its verdict; the fast path re-armed."""
        if self.observer:
            self.seen.move_to_end((stream.parent or stream).id)
        if stream.vlan_sides and vlan is not None:
            side = stream.vlan_sides.get(vlan.id, side)
        lgos = stream.lgos
        lctx = lgos.ctx
        frame = FrameIn(hdr, side, (lctx["sim_mode"], lctx["sim"]), foreign)
        scheduler = self.scheduler
        pair = None
        if stream.side_ids:
            # a second source's frames are a sequence of their own: never the genuine's copy
            pair = (hdr.st_num, hdr.sq_num, foreign)
            if self._ab_copy(stream, pair, side, frame, now_ns):
                return _judged(Judged, (stream, hdr, "duplicate"))
        if stream.fold is not None:
            self._unfold(stream, now_ns)
        report = None
        for e in scheduler.feed(stream.id, "frame", now_ns, frame).effects:
            if type(e) is FrameClassified:
                stream.counts[e.cls] += 1
                report = e
        if pair is not None and report is not None and report.cls in REARMS_TAL:
            # only a frame its stream took marks its copy on the other network a duplicate
            # and keeps its side alive: a replayed or stale one must do neither
            _remember(stream, pair, side)
            scheduler.feed(stream.side_ids[side], "frame", now_ns, frame)
        refused = frame.refused
        if refused is not None:
            stream.counts[f"refused_{refused}"] += 1
        # the receive rules' answer moves the LGOS only when it changes anything
        if stream.is_sim:
            if refused is None and not lctx["sim"] and lctx["sim_mode"]:
                scheduler.feed(lgos.id, "switch", now_ns)
                lctx = lgos.ctx
            active = lctx["sim"]
        else:
            active = not lctx["sim"]
        if active:
            sctx = stream.machine.ctx
            if refused is not None:
                if lgos.state != "invalid" or lctx["err"] != refused:
                    scheduler.feed(lgos.id, refused, now_ns)
            elif sctx["conflict"]:
                if lctx["err"] != "conflict":
                    scheduler.feed(lgos.id, "conflict", now_ns)
            elif lgos.state != "valid" and sctx["gate_ok"]:
                scheduler.feed(lgos.id, "ok", now_ns)
        if not stream.is_sim and not stream.side_ids:
            self._arm(stream, report)
        return _judged(Judged, (stream, hdr, "judged"))

    def _ab_copy(
        self, stream: Stream, pair: tuple[int, int, bool], side: str, frame: FrameIn, now: int
    ) -> bool:
        """A/B (two sides): True if the frame is the second copy of one already taken, or a
        copy from the standby side in preferred mode; its side's supervision is fed."""
        scheduler = self.scheduler
        if pair in stream.recent:
            scheduler.feed(stream.side_ids[side], "frame", now, frame)
            stream.counts[f"ab_duplicate_{side}"] += 1
            return True
        sel = stream.side_ids.get("selector")
        if sel is not None and _active_side(scheduler, sel) != side:
            scheduler.feed(stream.side_ids[side], "frame", now, frame)
            _remember(stream, pair, side)
            stream.counts[f"standby_{side}"] += 1
            return True
        return False

    def _unfold(self, stream: Stream, now_ns: int) -> None:
        """Repeats the fast path counted without the machine (a fold): told to it before
        the next judged frame, after any TAL that ran out in the meantime."""
        fold, stream.fold = stream.fold, None
        scheduler = self.scheduler
        if scheduler.timers.any_due(now_ns):
            scheduler.advance(now_ns)  # a TAL that ran out expires first, and folds it
        if stream.machine.state == "valid":
            scheduler.feed(stream.id, "repeated", now_ns, fold)
            scheduler.timers.move(stream.id, "tal", stream.deadline)  # folded: no payload

    # -- the fast path ----------------------------------------------------------------------

    def _arm(self, stream: Stream, report: FrameClassified | None) -> None:
        """After a judged frame: may the stream's next repeats skip the judge?

        Only if judging one would change nothing but sqNum and the TAL deadline: the stream
        is valid and delivering (`gate_ok`) and the judged frame was unrefused and carried
        no flag its repeats would share (confRev, ndsCom, simulation, S-bit, non-canonical
        integers). What can change without a frame of this stream (the machine's state by
        its TAL, the LGOS's by simulation mode or the simulated stream) `repeat` checks on
        every repeat."""
        m = stream.machine
        c = m.ctx
        rx = c["rx_ns"]
        stream.armed = (
            self.fast_path
            and report is not None
            and rx is not None
            and m.state == "valid"
            and c["gate_ok"]
            and report.refused is None
            and REPEATABLE_FLAGS.issuperset(report.flags)
        )
        if stream.armed:
            stream.sq = c["sq"]
            stream.deadline = rx + c["tal_ns"]
            if stream.report["st_num"] != c["st"]:
                stream.report = _repeat_report(stream.id, c["st"])

    def repeat(
        self, stream: Stream, sq: int, tal_ms: int, side: str, now_ns: int
    ) -> FrameClassified | None:
        """Count the next sqNum of an armed stream's last frame, before its TAL deadline,
        without a dispatch (`on_frame` checked those), or return None for the full judge:
        the stream machine and the LGOS must still be valid, on the real stream."""
        scheduler = self.scheduler
        timers = scheduler.timers
        if timers.any_due(now_ns):  # timers due first, as before any input (TAL: lazily)
            scheduler.advance(now_ns)
        lgos = stream.lgos
        if stream.machine.state != "valid" or lgos.state != "valid" or lgos.ctx["sim"]:
            return None
        tal_ns = tal_ms * 1_000_000
        if stream.tal_limit_ns and tal_ns > stream.tal_limit_ns:
            return None  # a TAL beyond the bound: the judge bounds it and flags it
        deadline = now_ns + tal_ns
        fold = (sq, now_ns, tal_ns)
        if not timers.move(stream.id, "tal", deadline, fold):
            return None  # no TAL armed (cannot be while valid): let the machine say
        stream.fold = fold
        stream.sq = sq
        stream.deadline = deadline
        stream.counts["retransmission"] += 1
        if self.observer:
            self.seen.move_to_end(stream.id)
        fields = stream.report.copy()
        fields["side"] = side
        fields["sq_num"] = sq
        return FrameClassified.from_fields(fields)

    def _open(self, key, hdr, now_ns: int) -> Stream | None:
        sub = self.subs.get(key)
        if sub is None and not self.observer:
            return None
        if sub is not None and not _filters_match(sub, hdr):
            return None
        if sub is None and len(self.streams) >= self.max_streams:
            self._evict_idlest()
        label = sub.label if sub is not None else hdr.gocb_ref
        sid = stream_id(label, hdr.appid, hdr.dst)
        stream = Stream(sid, label, hdr.gocb_ref, hdr.appid, sub)
        if stream.ab is None and self.default_ab is not None:
            stream.ab = self.default_ab
        stream.tal_limit_ns = self._tal_limit_ns(sub)
        lgos = self.tables["lgos"].new(
            f"lgos:{sid}",
            stream=sid,
            sim_mode=self.simulation,
            src=sub.src if sub is not None else None,
        )
        self.scheduler.start(lgos, now_ns)
        stream.lgos = lgos
        ctx: dict[str, Any] = {
            "stream": sid,
            "tal_limit_ns": stream.tal_limit_ns,
            "skew_ns": int(self.receive.t_skew_ms * 1_000_000),
        }
        if sub is not None:
            ctx["expect_conf_rev"] = sub.conf_rev
            ctx["expect_shape"] = sub.members
            ctx.update(self.recalled.get(sid, {}))
        stream.machine = self.tables["stream"].new(sid, **ctx)
        self.scheduler.start(stream.machine, now_ns)
        if stream.ab is not None:
            for side in ("A", "B"):
                mid = f"{sid}#{side}"
                stream.side_ids[side] = mid
                m = self.tables["side"].new(
                    mid, stream=sid, side=side, tal_limit_ns=stream.tal_limit_ns
                )
                self.scheduler.start(m, now_ns)
            if stream.ab.mode == "preferred":
                mid = f"{sid}#selector"
                stream.side_ids["selector"] = mid
                m = self.tables["ab_selector"].new(
                    mid, stream=sid, failback_auto=stream.ab.failback == "auto"
                )
                self.scheduler.start(m, now_ns)
        self.streams[key] = stream
        self.by_id[sid] = stream
        if self.observer:
            self.seen[sid] = key
        return stream

    def _tal_limit_ns(self, sub: SubscriptionCfg | None) -> int:
        """The longest TAL a stream of `sub` is supervised with: the configured factor x its
        MaxTime (configured or from the SCL), never beyond the absolute cap."""
        rx = self.receive
        limit = rx.tal_cap_ms * 1_000_000
        if sub is not None and sub.max_time_ms is not None:
            limit = min(limit, int(rx.tal_factor * sub.max_time_ms * 1_000_000))
        return limit

    def _evict_idlest(self) -> None:
        sid, key = self.seen.popitem(last=False)
        stream = self.streams.pop(key)
        fkey = self.fast_keys.pop(sid, None)
        if fkey is not None and self.fast.get(fkey) is stream:
            del self.fast[fkey]
        self.evicted += 1
        for s in (stream, stream.sim):
            if s is None:
                continue
            self.by_id.pop(s.id, None)
            for mid in (s.id, *s.side_ids.values()):
                self.scheduler.forget(mid)
        self.scheduler.forget(stream.lgos.id)

    def _open_sim(self, parent: Stream, now_ns: int) -> Stream:
        """The machine of a subscription's simulated stream, at its first simulated frame.

        It expects the subscription's confRev (configured, else the real stream's first
        seen) and shape; its source is learned on its own (a test set has its own MAC)."""
        real = self.scheduler.machines[parent.id].ctx
        sid = sim_id(parent.id)
        sim = Stream(sid, parent.label, parent.gocb_ref, parent.appid, parent.sub, parent)
        rev = real["expect_conf_rev"] if real["expect_conf_rev"] is not None else real["conf_rev"]
        m = self.tables["stream"].new(
            sid,
            stream=sid,
            side="sim",
            simulated=True,
            expect_conf_rev=rev,
            expect_shape=real["expect_shape"],
            tal_limit_ns=real["tal_limit_ns"],
            skew_ns=real["skew_ns"],
            **self.recalled.get(sid, {}),
        )
        sim.tal_limit_ns = parent.tal_limit_ns
        sim.machine = m
        self.scheduler.start(m, now_ns)
        parent.sim = sim
        self.by_id[sid] = sim
        return sim

    # -- simulation mode and stream loss --------------------------------------------------

    def set_simulation(self, on: bool, now_ns: int) -> None:
        """The controller's simulation mode: every subscription's LGOS learns it; switching
        it off sends switched subscriptions back to their real streams."""
        self.simulation = on
        for stream in self.streams.values():
            self.scheduler.feed(stream.lgos.id, "sim_on" if on else "sim_off", now_ns)

    def on_stream_lost(self, report: StreamState, now_ns: int) -> None:
        """TAL expired on a stream machine: the subscription is invalid if it was the one
        whose values act (the real stream, or the simulated one once switched)."""
        stream = self.by_id.get(report.stream)
        if stream is None:
            return
        lgos = stream.lgos
        if stream.is_sim != lgos.ctx["sim"]:
            return
        if lgos.state != "invalid" or lgos.ctx["err"] != "lost":
            self.scheduler.feed(lgos.id, "lost", now_ns)

    # -- the LGOS view --------------------------------------------------------------------

    def active(self, stream: Stream) -> Stream:
        """The stream whose values act: the simulated one while switched to it."""
        parent = stream.parent or stream
        if parent.lgos.ctx["sim"] and parent.sim is not None:
            return parent.sim
        return parent

    def view(self, stream_id: str) -> LgosView:
        stream = self.by_id[stream_id]
        parent = stream.parent or stream
        lgos = parent.lgos
        lc = lgos.ctx
        twin = self.active(parent)
        tc = self.scheduler.machines[twin.id].ctx
        rev = tc["expect_conf_rev"] if tc["expect_conf_rev"] is not None else tc["conf_rev"]
        src = lc["sim_src"] if twin.is_sim else lc["src"]
        refused: dict[str, int] = {}
        for s in (parent, parent.sim):
            if s is None:
                continue
            for k, n in s.counts.items():
                if k.startswith("refused_"):
                    k = k[8:]
                elif k != "foreign_source":
                    continue
                refused[k] = refused.get(k, 0) + n
        if self.auth is not None:
            refused.update(self.auth.refused(parent.label))
        return LgosView(
            parent.id,
            parent.label,
            parent.gocb_ref,
            parent.appid,
            lgos.state == "valid",
            bool(lc["sim"]),
            tc["st"],
            rev,
            tc["rx_conf_rev"],
            lc["err"],
            bool(tc["nds_com"]),
            format_mac(src) if src is not None else None,
            tuple(sorted(refused.items())),
        )

    def views(self) -> list[LgosView]:
        """Every subscription's LGOS view: a configured one never received is listed too
        (St false, `never_received`), the line that matters most when commissioning."""
        out = [self.view(s.id) for s in self.streams.values()]
        for key, sub in self.subs.items():
            if key not in self.streams:
                out.append(_never_received(sub))
        return out

    def rows(self, now_ns: int | None = None) -> list[dict[str, Any]]:
        """One row per stream (real and simulated) as a tracker shows it: quality state,
        active side, stNum, sqNum (the fast path's when newer), confRev, the announced TAL
        and, given `now_ns`, the time it has left; counts by classification. For
        `goosectl status --json` and the web page; never on the frame path."""
        out = []
        for s in self.streams.values():
            for x in (s, s.sim):
                if x is None:
                    continue
                m = self.scheduler.machines[x.id]
                c = m.ctx
                sq = c["sq"] if c["sq"] is not None and c["sq"] >= x.sq else x.sq
                deadline = max(x.deadline, (c["rx_ns"] or 0) + c["tal_ns"]) if c["rx_ns"] else 0
                out.append(
                    {
                        "stream": x.label,
                        "id": x.id,
                        "gocbRef": x.gocb_ref,
                        "appid": x.appid,
                        "simulated": x.is_sim,
                        "state": m.state,
                        "side": c["side"],
                        "sides": {
                            k: self.scheduler.machines[v].state for k, v in x.side_ids.items()
                        },
                        "stNum": c["st"],
                        "sqNum": sq,
                        "confRev": c["conf_rev"],
                        "tal_ms": c["tal_ns"] // 1_000_000 if c["rx_ns"] else None,
                        "tal_left_ms": (
                            max(0, (deadline - now_ns) // 1_000_000)
                            if now_ns is not None and deadline
                            else None
                        ),
                        "counts": dict(sorted(x.counts.items())),
                    }
                )
        return out

    def current_values(self, stream_id: str) -> tuple[str, tuple] | None:
        """(stream id, values) of the state that acts now, or None while the subscription
        is not valid: what an application re-reads when its own mode changes."""
        stream = self.by_id.get(stream_id)
        if stream is None:
            return None
        parent = stream.parent or stream
        if parent.lgos.state != "valid":
            return None
        twin = self.active(parent)
        data = self.scheduler.machines[twin.id].ctx["data"]
        if data is None:
            return None
        try:
            return twin.id, decode_all_data(data)
        except GooseError:
            return None

    # -- side events --------------------------------------------------------------------

    def on_side_state(self, report: StreamState, now_ns: int) -> None:
        """Tell a preferred-mode selector that a side was lost or came back."""
        stream = self.by_id.get(report.stream)
        if stream is None or "selector" not in stream.side_ids:
            return
        if report.state in ("lost", "valid") and report.side in ("A", "B"):
            ev = f"{report.side.lower()}_{'lost' if report.state == 'lost' else 'up'}"
            self.scheduler.feed(stream.side_ids["selector"], ev, now_ns)

    def failback(self, stream_id: str, now_ns: int) -> None:
        """The operator's failback to side A of a preferred-mode stream."""
        stream = self.by_id.get(stream_id)
        if stream is None or "selector" not in stream.side_ids:
            raise KeyError(f"no preferred-mode A/B stream {stream_id!r}")
        self.scheduler.feed(stream.side_ids["selector"], "failback", now_ns)

    # -- reporting ----------------------------------------------------------------------

    def counters(self) -> dict[str, Any]:
        return {
            "streams": {
                s.id: {
                    "gocbRef": s.gocb_ref,
                    "appid": s.appid,
                    "state": self.scheduler.machines[s.id].state,
                    "sides": {k: self.scheduler.machines[v].state for k, v in s.side_ids.items()},
                    "counts": dict(sorted(s.counts.items())),
                    "lgos": self.view(s.id).as_json(),
                }
                | (
                    {
                        "simulated": {
                            "state": self.scheduler.machines[s.sim.id].state,
                            "counts": dict(sorted(s.sim.counts.items())),
                        }
                    }
                    if s.sim is not None
                    else {}
                )
                for s in self.streams.values()
            },
            "unmatched": self.unmatched,
            "malformed": self.malformed,
            "evicted": self.evicted,
        }


def _repeat_report(stream_id: str, st_num: int | None) -> dict[str, Any]:
    """What the stream machine reports for an unflagged retransmission, as fields."""
    return {
        "stream": stream_id,
        "side": "-",
        "cls": "retransmission",
        "flags": (),
        "quality": "valid",
        "deliver": False,
        "st_num": st_num,
        "sq_num": 0,
        "values": None,
        "previous": None,
        "refused": None,
    }


def _whole_tlv(key: bytes | None) -> bool:
    """`stream_key` found a whole short-form TLV (not a frame cut short inside it)."""
    return key is not None and len(key) >= 2 and len(key) == 2 + key[1]


def _remember(stream: Stream, pair: tuple[int, int, bool], side: str) -> None:
    """An A/B stream's (stNum, sqNum) taken from `side`: its other copy is a duplicate."""
    recent = stream.recent
    recent[pair] = side
    if len(recent) > AB_WINDOW:
        recent.popitem(last=False)


def stream_id(label: str, appid: int, dst: bytes) -> str:
    """A stream machine's id: the same for a subscription in every run of a controller,
    so its journal's checkpoint is found again (`SubscriberBank.recall`)."""
    return f"{label}@{appid:04x}/{format_mac(dst)}"


def sim_id(stream: str) -> str:
    """The id of the machine of a stream's simulated frames."""
    return stream.replace("@", "~sim@", 1)


#: what a stream machine's checkpoint says of the stream's last state: (context key of a
#: machine that had a frame, of one that had none yet and still held what was recalled)
RECALLED = (("st", "ref_st"), ("sq", "ref_sq"), ("t_ns", "ref_t_ns"), ("data", "ref_data"))


def _recalled(cp: dict[str, Any] | None, table: str) -> dict[str, Any] | None:
    """The `ref_*` context of a stream machine from its checkpoint: its last accepted
    state, or (a run that heard no frame of it) what that run had recalled. None when the
    checkpoint has no state, or is of another table (a journal of other software)."""
    if cp is None or cp["snapshot"].get("table") != table:
        return None
    ctx = cp["snapshot"].get("context", {})
    heard = ctx.get("st") is not None
    refs = {ref: ctx.get(key if heard else ref) for key, ref in RECALLED}
    if not all(isinstance(refs[k], int) for k in ("ref_st", "ref_sq", "ref_t_ns")):
        return None
    data = refs["ref_data"]
    refs["ref_data"] = bytes.fromhex(data) if isinstance(data, str) else None
    return refs


def _never_received(sub: SubscriptionCfg) -> LgosView:
    """The LGOS view of a configured subscription no frame has opened yet."""
    return LgosView(
        stream_id(sub.label, sub.appid, sub.dst),
        sub.label,
        sub.gocb_ref,
        sub.appid,
        False,
        False,
        None,
        sub.conf_rev,
        None,
        "never_received",
        False,
        format_mac(sub.src) if sub.src is not None else None,
    )


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


def _active_side(scheduler: Scheduler, selector_id: str) -> str:
    return "A" if scheduler.machines[selector_id].state == "a_active" else "B"
