"""What PRP (`--prp native`) costs on the two paths that matter, side by side in one run.

1. The retransmission fast path (ARCHITECTURE.md: a retransmission that changes nothing,
   p50 <= 3 us): `GooseHub.frame` alone, against the same frames arriving with a trailer
   through the LRE's receive (both as the live loop gets them: the kernel took the VLAN
   tag out of the bytes) (`PrpLive.receive`, the LRE's hot path `Lre.deliver`: trailer
   checked and stripped, the duplicate table looked up and filled) and then
   `GooseHub.frame`. Both with the bay journal and its writer thread and the garbage
   collector on, in interleaved blocks so both meet the same host. Budget: PRP adds at
   most 1 us at p50 (the difference of the two p50s, best blocks and pooled reported).
   The second copy of each frame (LAN B's, dropped by the table) is timed too: the
   common case of a healthy PRP network, and cheaper than the first; so is the aging of
   the table the loop's round does after the frames (`Lre.age`, here once a frame, the
   worst case), which is not on the frame's path but is the LRE's work all the same.
2. The trip path `goosectl run` ships (the reflex on; in process, trip frame in -> TRIP
   bytes ready for the serial port): ONE rig (`lab.prp_work.PrpTripBench`), its trips in
   turn plain, trailed and judged by the reflex before the LRE (`Arming.match_trailed`:
   the trailer's octets, the candidate, the LRE's read-only verdict `Lre.first_copy`;
   `Lre.deliver`'s bookkeeping after the TRIP bytes, as `run` does it), and trailed
   through `Lre.deliver` first (the order before, measured beside it), trip by trip,
   journal and garbage collector on. PRP's send side (the trailers on the
   trip-acknowledged frame) comes after the TRIP bytes are written, in the shell's send,
   so it cannot be on this path. Budget: the p50s differ by at most 1 us.
3. The same differences counted, not timed (`lab.prp_work`, callgrind: exact where the
   host's clock is not): the LRE's hot path on LAN A's and LAN B's copy, held to a
   recorded ceiling, and the instructions PRP adds to the reflex trip call in either
   order, the shipped one held to its record and judged against a few hundred.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from benchmarks.percentiles import (
    _timer_overhead_ns,
    check_budget,
    ratio,
    summarise,
)
from benchmarks.test_goose_bench import HARD_LIMIT_US, RepeatRig, repeats
from goosectl.controller.prp import Lre
from goosectl.controller.prp.lre import Port
from goosectl.lab.prp_work import CASES, KINDS, PrpTripBench, calls_of, measure
from goosectl.protocols.ethernet.vlan import strip_tag
from goosectl.protocols.prp import LAN_A, LAN_B, add_rct
from tests.support.peers import require_binary

#: the issue's bound: what PRP may add to a path's p50
PRP_ADDS_AT_MOST_US = 1.0
GROUP = "prp"


#: the LRE ages its duplicate table in the loop's round (`PrpLive.round`), not per frame
AGES_IN_ROUND = True


def prp_receiver() -> tuple[Callable[[bytes, Port, int], bytes | None], Lre]:
    """What the live loop calls per frame with native PRP (`PrpLive.receive`: the LRE's
    hot path, `Lre.deliver`), on a bare LRE (no sockets)."""
    lre = Lre()
    return lre.deliver, lre


class PrpRig(RepeatRig):
    """`RepeatRig` (one hub, one journal) whose retransmissions come alternately as they
    are (no PRP) and with a trailer through the LRE first (LAN A's copy, a new SeqNr each,
    then LAN B's copy, dropped as a duplicate), frame by frame: both sides meet the same
    stream, heap and host moment, so the difference is the LRE's."""

    def __init__(self, path, frames: list[bytes]) -> None:
        super().__init__(path, frames, True)
        self.receive, self.lre = prp_receiver()
        self.a = [add_rct(f, i % 65_536, LAN_A) for i, f in enumerate(frames)]
        self.b = [add_rct(f, i % 65_536, LAN_B) for i, f in enumerate(frames)]
        self.second: list[float] = []
        self.aging: list[float] = []

    def pairs(self, n: int) -> tuple[list[float], list[float]]:
        """`n` plain and `n` PRP retransmissions, alternating: their times, each side."""
        a, b, plain, frame, flush = (
            self.a,
            self.b,
            self.frames,
            self.hub.frame,
            self.journal.maybe_flush,
        )
        receive, age = self.receive, self.lre.age
        clock = time.perf_counter_ns
        overhead = _timer_overhead_ns()
        ref: list[float] = []
        out: list[float] = []
        for i in range(self.i + 1, self.i + 2 * n + 1):
            now = i * 1_000_000
            if i % 2:
                t0 = clock()
                frame(plain[i], "A", now)
                flush(now)
                ref.append(max(0.0, clock() - t0 - overhead))
                continue
            t0 = clock()
            buf = receive(a[i], "A", now)
            frame(buf, "A", now)
            flush(now)
            t1 = clock()
            dup = receive(b[i], "B", now + 1000)
            t2 = clock()
            age(now + 1000)  # the loop's round after the frame (here: one a frame)
            t3 = clock()
            assert dup is None
            out.append(max(0.0, t1 - t0 - overhead))
            self.second.append(max(0.0, t2 - t1 - overhead))
            self.aging.append(max(0.0, t3 - t2 - overhead))
        self.i += 2 * n
        return ref, out


def test_prp_on_the_retransmission_fast_path(benchmark, samples, tmp_path):
    blocks = 10
    per = samples // blocks
    # as the live loop gets them: the kernel has taken the VLAN tag out of the bytes
    frames = [strip_tag(f) for f in repeats(2 * samples + 1, False)]
    rig = PrpRig(tmp_path / "prp.sqlite", frames)
    ours: list[float] = []
    ref: list[float] = []
    best_ours, best_ref = [], []
    try:
        for _ in range(blocks):
            r, o = rig.pairs(per)
            ref += r
            ours += o
            best_ref.append(sorted(r)[per // 2] / 1000)
            best_ours.append(sorted(o)[per // 2] / 1000)
    finally:
        rig.close()
    assert rig.stream.counts["retransmission"] == 2 * per * blocks  # measured what we meant
    assert rig.lre.counts["lreCntRxA"] == per * blocks
    base = summarise("hub.frame (fast path), no PRP", "prp/retransmission", ref)
    res = ratio(summarise("LRE receive + hub.frame, LAN A copy", "prp/retransmission", ours), base)
    dup = summarise("LRE receive, LAN B copy (dropped)", "prp/retransmission", rig.second)
    aging = summarise(
        "LRE aging in the loop's round (one a frame)", "prp/retransmission", rig.aging
    )
    added = res.p50 - base.p50
    # the same blocks, paired: what the host did to one it did to the other
    added_blocks = [round(o - r, 3) for o, r in zip(best_ours, best_ref, strict=True)]
    benchmark.extra_info.update(
        {"prp": res.as_dict(), "no_prp": base.as_dict(), "second_copy": dup.as_dict(),
         "aging_per_round": aging.as_dict(), "added_p50_us": round(added, 3),
         "added_per_block_us": added_blocks}
    )  # fmt: skip
    benchmark.pedantic(lambda: None, rounds=1)
    why = (
        f"PRP adds {added:.2f} us at p50 (with PRP {res.p50:.2f} us, without {base.p50:.2f} us, "
        f"pooled over {res.n}; per block {added_blocks}); the dropped second copy "
        f"{dup.p50:.2f} us; the round's aging {aging.p50:.2f} us (p99 {aging.p99:.2f}), off "
        f"the frame's path; p99 {res.p99:.2f} against {base.p99:.2f} us"
    )
    assert res.p99 < HARD_LIMIT_US, why
    check_budget(added <= PRP_ADDS_AT_MOST_US, f"<= {PRP_ADDS_AT_MOST_US} us: {why}")


def test_prp_on_the_trip_path(benchmark, short, tmp_path):
    """One reflex trip rig (`lab.prp_work.PrpTripBench`: the reflex on, as `run` ships),
    its trips in turn plain, trailed and judged before the LRE (what `run` ships: the
    LRE's bookkeeping after the TRIP bytes), and trailed through the LRE first (the order
    before, for the comparison), trip by trip: the same process, bay, heap and host moment
    for all three, so the differences are PRP's and its order's."""
    per = 1000  # a kind: a p99 needs them, --short or not
    bench = PrpTripBench(journal=tmp_path / "trip.sqlite")
    bench.cycle = KINDS
    try:
        got = bench.sample(len(KINDS) * per, warmup=21)
        rows = bench.journal_rows
    finally:
        bench.close()
    kinds = bench.kinds[-len(KINDS) * per :]
    by = {k: [t for t, x in zip(got.to_serial, kinds, strict=True) if x == k] for k in KINDS}
    assert all(len(v) == per for v in by.values())
    # every trailed trip passed the LRE, and the LRE counted each as a first copy
    assert bench.lre.counts["lreCntRxA"] == sum(k != "plain" for k in bench.kinds)
    assert rows > 0  # the journal was on
    base = summarise("reflex trip frame -> TRIP bytes, no PRP", "prp/trip", by["plain"])
    res = ratio(
        summarise("the same, trailed, judged before the LRE (shipped)", "prp/trip", by["prp"]),
        base,
    )
    old = ratio(
        summarise("the same, trailed, through the LRE first (before)", "prp/trip", by["lre_first"]),
        base,
    )
    added, added_old = res.p50 - base.p50, old.p50 - base.p50
    # paired: each trailed trip against the plain trip just before it
    pairs = sorted(o - r for o, r in zip(by["prp"], by["plain"], strict=True))
    paired = pairs[per // 2] / 1000
    benchmark.extra_info.update(
        {"prp": res.as_dict(), "no_prp": base.as_dict(), "lre_first": old.as_dict(),
         "added_p50_us": round(added, 3), "added_lre_first_p50_us": round(added_old, 3),
         "added_paired_median_us": round(paired, 3), "journal_rows": rows}
    )  # fmt: skip
    benchmark.pedantic(lambda: None, rounds=1)
    why = (
        f"PRP adds {added:.2f} us at p50 to the reflex trip judged before the LRE (with "
        f"{res.p50:.2f} us, without {base.p50:.2f} us, n {res.n} each, interleaved trip by "
        f"trip; median of the paired differences {paired:.2f} us; p99 {res.p99:.1f} against "
        f"{base.p99:.1f} us); through the LRE first it adds {added_old:.2f} us "
        f"(p50 {old.p50:.2f} us)"
    )
    print(why)
    assert res.p99 < HARD_LIMIT_US, why
    check_budget(added <= PRP_ADDS_AT_MOST_US, f"<= {PRP_ADDS_AT_MOST_US} us: {why}")


#: CPython version -> instructions of `Lre.deliver` per frame (`lab.prp_work`), as recorded:
#: a ratchet like benchmarks/test_trip_work.py (a change that makes it lighter lowers it)
RECORDED_LRE = {
    # LAN A's copy 7,350 and LAN B's 7,151 before the tail table keyed by the trailer's
    # last octets, the Rx counters in cells and the table's own order for aging
    "3.11.7": {"lan_a": 6_259, "lan_b": 6_772},
}
CEILING = 1.05


@pytest.fixture(scope="module")
def prp_counting() -> Iterator[dict[str, Future[int]]]:
    """The six counts, two callgrind runs at a time (a count does not depend on load)."""
    require_binary("valgrind", "valgrind")
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {case: pool.submit(measure, case, calls_of(case)) for case in CASES}


def test_lre_hot_path_instructions(benchmark, prp_counting):
    got = {case: prp_counting[case].result() for case in ("lan_a", "lan_b")}
    benchmark.extra_info.update(got)
    benchmark.pedantic(lambda: None, rounds=1)
    recorded = RECORDED_LRE.get(platform.python_version())
    numbers = (
        f"Lre.deliver: LAN A's copy {got['lan_a']:,}, LAN B's (dropped) {got['lan_b']:,} "
        f"instructions; recorded {recorded}"
    )
    print(numbers)
    if recorded is not None:  # deterministic: a plain assert, not a budget
        for case, n in got.items():
            assert n <= recorded[case] * CEILING, f"{numbers}: {case} over x{CEILING}"


#: the issue's "nothing to the trip path", in instructions: a few hundred, the noise of a
#: count of the plain trip between sessions (heap and dict layouts move it about 1 %)
TRIP_ADDS_AT_MOST = 500
#: CPython version -> instructions PRP adds to the reflex trip judged before the LRE, as
#: recorded (a ratchet: a change that makes it lighter lowers it; docs/prp.md has the runs)
RECORDED_TRIP_ADDED = {"3.11.7": 4_715}
#: what a difference of two ~40k counts may move between sessions (1 % of each)
TRIP_DRIFT = 0.02


def test_prp_trip_instructions(benchmark, prp_counting):
    """What PRP adds to the reflex trip call, in instructions (the timing's exact twin):
    judged before the LRE (shipped) and through the LRE first (the order before), counted
    in the same session."""
    plain, prp = prp_counting["trip_plain"].result(), prp_counting["trip_prp"].result()
    old = prp_counting["trip_lre_first"].result()
    floor = prp_counting["first_copy"].result()
    added, added_old = prp - plain, old - plain
    benchmark.extra_info.update(
        {
            "plain": plain,
            "prp": prp,
            "lre_first": old,
            "added": added,
            "added_lre_first": added_old,
            "first_copy": floor,
        }
    )
    benchmark.pedantic(lambda: None, rounds=1)
    recorded = RECORDED_TRIP_ADDED.get(platform.python_version())
    numbers = (
        f"reflex trip call: {plain:,} instructions; trailed and judged before the LRE {prp:,} "
        f"(PRP adds {added:,}, {added / plain:.0%}); through the LRE first {old:,} (adds "
        f"{added_old:,}); recorded addition {recorded}; of it the LRE's read-only verdict, "
        f"which a reflex ahead of the LRE cannot leave out (a copy the LRE drops must not "
        f"fire), {floor:,} alone"
    )
    print(numbers)
    assert prp > plain, numbers  # the trailer's check was on the path counted
    assert added < added_old, numbers  # the order is what makes it lighter
    if recorded is not None:  # deterministic but for the layouts: the ratchet
        assert added <= recorded + TRIP_DRIFT * plain, numbers
    check_budget(added <= TRIP_ADDS_AT_MOST, f"<= {TRIP_ADDS_AT_MOST} instructions: {numbers}")
