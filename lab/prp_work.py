"""What native PRP costs on the trip path `run` ships, and the LRE's hot path on its own:
one rig for the wall-clock benchmark (benchmarks/test_prp_bench.py) and, because wall time
on a shared host cannot see a microsecond, callgrind instruction counts of the same calls.

`PrpTripBench` is `lab.latency.TripBench` with the reflex on (as `goosectl run` ships it)
and every frame handed to the bay as the live loop hands it over: the VLAN tag out of the
bytes (the kernel took it) and given beside them. Each timed trip is one of `KINDS`: plain
(the reflex's match on the frame), PRP as `run` ships it (the trailed frame judged by
`Arming.match_trailed` before the LRE, `Lre.deliver`'s bookkeeping after the TRIP bytes),
or the trailed frame through `Lre.deliver` first and the match on what it hands up (the
order before, the reference), chosen per trip: one process, one bay, one heap, so the
differences are PRP's and nothing else.

Counts (`measure`): the calls are bracketed as `lab.trip_work` brackets them (libc's
`qsort_r`, a bracketed no-op subtracted, PYTHONHASHSEED fixed). `lan_a`: LAN A's copy
of a frame through `Lre.deliver` (a new SeqNr: the entry made, the trailer stripped);
`lan_b`: LAN B's copy right after (dropped); `trip_plain`, `trip_prp`, `trip_lre_first`:
the reflex's trip call (frame in -> TRIP bytes ready) of each kind; `first_copy`: the
LRE's read-only verdict the reflex asks on a trailed trip (`Lre.first_copy`, a frame
whose SeqNr the table does not hold, the table at its steady state), the one lookup a
reflex judging before the LRE cannot leave out (a copy the LRE drops must not fire):
the floor of what PRP can add to the trip.

`python -m goosectl.lab.prp_work` prints all six (valgrind must be installed).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from goosectl.controller.prp import Lre
from goosectl.controller.prp.lre import Port
from goosectl.lab.latency import TripBench
from goosectl.lab.trip_work import TripWorkError, bracketed, callgrind_count
from goosectl.protocols.ethernet.vlan import inline_tag, strip_tag
from goosectl.protocols.goose import Vlan
from goosectl.protocols.prp import LAN_A, LAN_B, add_rct

#: what `measure` counts, each in a callgrind run of its own
CASES = ("lan_a", "lan_b", "first_copy", "trip_plain", "trip_prp", "trip_lre_first")
#: frames apart in the LRE cases: the table in its steady state (400 ms of 4 ms frames)
FRAME_GAP_NS = 4_000_000


def live_shape(frame: bytes) -> tuple[bytes, Vlan | None]:
    """`frame` as the live loop gets it: untagged bytes and the tag the kernel took."""
    tag = inline_tag(frame)
    return strip_tag(frame), None if tag is None else Vlan(tag.vid, tag.pcp, tag.dei)


def shape_frames(bay: Any) -> None:
    """Hand `bay` every frame as the live loop does: a frame given with its tag inline
    arrives untagged with the tag beside it (`live_shape`)."""
    frame = bay.frame

    def shaped(buf: bytes, side: str, now: int, vlan: Vlan | None = None) -> None:
        if vlan is None:
            buf, vlan = live_shape(buf)
        frame(buf, side, now, vlan)

    bay.frame = shaped


#: how a trip frame reaches the reflex in `PrpTripBench`: without PRP; with a trailer,
#: judged before the LRE, whose bookkeeping follows the TRIP (what `run` ships); with a
#: trailer through the LRE first (the order before, kept as the reference it is
#: measured against)
KINDS = ("plain", "prp", "lre_first")


class PrpTripBench(TripBench):
    """`TripBench(reflex=True)`, frames live-shaped; `kind` (one of `KINDS`) says, per
    trip, how the trip frame comes: plain, or with a trailer judged by the reflex before
    the LRE (`lre`) counts it, or with a trailer through the LRE first."""

    def __init__(self, **kw: object) -> None:
        self.lre = Lre()
        self.kind = "plain"
        #: cycle through these kinds, one a trip (warm-up ones too): interleaved
        self.cycle: tuple[str, ...] = ()
        #: the kind of every trip made, in order (the last ``n`` of them are a sample's)
        self.kinds: list[str] = []
        self.seq = 0
        super().__init__(reflex=True, **kw)  # type: ignore[arg-type]
        shape_frames(self.bay)

    def _reflex_call(self, frame: bytes, now: int) -> Callable[[], None]:
        """The reflex's call on the live-shaped trip frame, as `kind` says (`KINDS`)."""
        from goosectl.controller.logic.reflex import arm, trip_rules

        arming = arm(self.bay, trip_rules(self.bay)[0])
        if arming is None:
            raise RuntimeError("the reflex did not arm for the trip")
        if self.cycle:
            self.kind = self.cycle[len(self.kinds) % len(self.cycle)]
        self.kinds.append(self.kind)
        buf, vlan = live_shape(frame)
        clock = time.perf_counter_ns
        marks, match, utc = self.marks, arming.match, now + self.bay.utc_offset_ns

        def ack() -> None:
            arming.outputs(utc)
            marks["ack"] = clock()

        self._after_call = ack
        if self.kind == "plain":

            def plain() -> None:
                if not match(buf, "A", now, vlan):
                    raise RuntimeError("the reflex did not fire on the trip frame")
                marks["serial"] = clock()

            return plain
        self.seq = (self.seq + 1) & 0xFFFF
        trailed, deliver = add_rct(buf, self.seq, LAN_A), self.lre.deliver
        if self.kind == "lre_first":

            def lre_first() -> None:
                got = deliver(trailed, "A", now)
                if got is None or not match(got, "A", now, vlan):
                    raise RuntimeError("the reflex did not fire on the frame after the LRE")
                marks["serial"] = clock()

            return lre_first
        matched, first = arming.match_trailed, self.lre.first_copy

        def prp() -> None:
            if not matched(trailed, "A", now, vlan, first):
                raise RuntimeError("the reflex did not fire on the trailed trip frame")
            marks["serial"] = clock()

        def prp_ack() -> None:
            ack()
            # the LRE's bookkeeping after the TRIP bytes, as the live loop does it: the
            # frame counted and entered in the duplicate table, handed up stripped
            if deliver(trailed, "A", now) != buf:
                raise RuntimeError("the LRE did not hand the fired frame up as a first copy")

        self._after_call = prp_ack
        return prp


def lre_frames(n: int) -> tuple[list[bytes], list[bytes]]:
    """LAN A's and LAN B's copies of `n` trip frames, live-shaped, SeqNr 0, 1, ..."""
    bench = TripBench()
    try:
        frame, _ = live_shape(bench._trip_frame(True, bench.wire.now_ns))
    finally:
        bench.close()
    a = [add_rct(frame, i & 0xFFFF, LAN_A) for i in range(n)]
    b = [add_rct(frame, i & 0xFFFF, LAN_B) for i in range(n)]
    return a, b


#: frame pairs through the LRE before a count: the duplicate table at its steady state
WARM_PAIRS = 150


def _steady_lre(a: list[bytes], b: list[bytes]) -> Lre:
    """An LRE after the first `WARM_PAIRS` of the pairs `a`, `b`, the loop's aging after
    each pair."""
    lre = Lre()
    for i in range(WARM_PAIRS):
        now = (i + 1) * FRAME_GAP_NS
        lre.deliver(a[i], "A", now)
        lre.deliver(b[i], "B", now + 1000)
        lre.age(now + 1000)
    return lre


def _child_lre(case: str, calls: int, noop: bool) -> None:
    """`calls` frame pairs through one LRE at its steady state (`_steady_lre`), the loop's
    aging after each pair; one of the pair bracketed."""
    call = bracketed(ctypes.CDLL(ctypes.util.find_library("c")))
    warm = WARM_PAIRS
    a, b = lre_frames(warm + calls)
    lre = _steady_lre(a, b)
    deliver, age = lre.deliver, lre.age
    for i in range(warm, warm + calls):
        now = (i + 1) * FRAME_GAP_NS
        pair: tuple[tuple[bytes, Port, int, str], ...] = (
            (a[i], "A", now, "lan_a"),
            (b[i], "B", now + 1000, "lan_b"),
        )
        for frame, port, t, mine in pair:
            if case == mine:
                call((lambda: None) if noop else partial(deliver, frame, port, t))
                if noop:
                    deliver(frame, port, t)
            else:
                deliver(frame, port, t)
        age(now + 1000)
    if lre.counts["lreCntDuplicateA"] < calls:
        raise RuntimeError(f"LAN B's copies were not dropped: {lre.counts}")


def _child_first_copy(calls: int, noop: bool) -> None:
    """`calls` verdicts of `Lre.first_copy` on new LAN A copies, the LRE at its steady
    state (`_steady_lre`)."""
    call = bracketed(ctypes.CDLL(ctypes.util.find_library("c")))
    a, b = lre_frames(WARM_PAIRS + calls)
    first = _steady_lre(a, b).first_copy
    now = (WARM_PAIRS + 1) * FRAME_GAP_NS
    for frame in a[WARM_PAIRS:]:
        call((lambda: None) if noop else partial(first, frame, now))
        if not first(frame, now):
            raise RuntimeError("first_copy refused a new SeqNr's copy")


def _child_trip(case: str, calls: int, noop: bool) -> None:
    call = bracketed(ctypes.CDLL(ctypes.util.find_library("c")))

    def beside(trip: Callable[[], object]) -> None:
        call(lambda: None)
        trip()

    bench = PrpTripBench()
    bench.kind = {"trip_prp": "prp", "trip_lre_first": "lre_first"}.get(case, "plain")
    try:
        bench.sample(calls, warmup=3, around=beside if noop else call)
    finally:
        bench.close()


def child(case: str, calls: int, noop: bool) -> None:
    """The process valgrind runs for one case."""
    if case.startswith("trip"):
        _child_trip(case, calls, noop)
    elif case == "first_copy":
        _child_first_copy(calls, noop)
    else:
        _child_lre(case, calls, noop)


def _collected(case: str, calls: int, noop: bool, python: str) -> int:
    args = ["--child", case, str(calls), *(["--noop"] if noop else [])]
    return callgrind_count("goosectl.lab.prp_work", args, python)


def calls_of(case: str, lre_calls: int = 100) -> int:
    """Calls counted of `case`: 10 reflex trips (each a re-close and a trip of the
    bench), `lre_calls` of the LRE's own calls."""
    return 10 if case.startswith("trip") else lre_calls


def measure(case: str, calls: int, python: str = sys.executable) -> int:
    """Instructions of one call of `case` (two callgrind runs: the calls, the no-op)."""
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}: one of {', '.join(CASES)}")
    full = _collected(case, calls, False, python)
    empty = _collected(case, calls, True, python)
    if full <= empty:
        raise TripWorkError(f"{case}: callgrind counted {full:,} for the calls, {empty:,} empty")
    return (full - empty) // calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m goosectl.lab.prp_work", description=__doc__)
    p.add_argument("--child", nargs=2, metavar=("CASE", "CALLS"), help=argparse.SUPPRESS)
    p.add_argument("--noop", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--only", choices=CASES, help="count one case (all by default)")
    p.add_argument("--calls", type=int, default=100, help="calls counted per LRE case")
    args = p.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.noop)
        return 0
    try:
        for case in [args.only] if args.only else CASES:
            n = calls_of(case, args.calls)
            print(f"{case}: {measure(case, n):,} instructions per call ({n} calls)")
    except TripWorkError as exc:
        print(f"prp_work: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
