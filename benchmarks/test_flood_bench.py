"""A flood on the subscribed address: frames of streams nobody subscribed to, at 100,000/s.

An attacker on the station LAN (or a misconfigured IED) sends valid-looking GOOSE frames of
10,000 other gocbRefs to the protection trip's own destination MAC and APPID, so the
kernel's multicast filter and the APPID let them all in. The subscriber rejects a frame of
no subscription before any parse (`SubscriberBank.wanted`: the gocbRef TLV cut at fixed
offsets, one set lookup), so each costs a few hundred ns instead of a header parse.

The kernel's socket filter drops them first: `goosectl run` attaches a program that lets
in only the subscriptions' own (destination, APPID, gocbRef) (`protocols.ethernet.bpf`,
`stream_filter`), so a foreign frame never enters the receive ring. The bank's lookup
stays behind it for what a filter cannot do (a socket without one, a pcap).

Measured, each against its reference in the same run:

1. **cost per rejected frame in user space** (in process, `GooseHub.frame` of the bay's
   hub, p50 in ns), against the same frames with the pre-parse filter off and against a
   bare `parse_header`; and **in the kernel**: the BPF instructions the bay's filter runs
   for a foreign frame (exact, `bpf.run`);
2. **in the kernel, measured** (root): a veth pair, 10,000 foreign frames sent with
   sendmmsg per round, the sender's time per frame (veth delivers in the sender's
   context) with the stream filter on the receiving socket, with the destination-only
   filter of before (frames queued), and with no packet socket at all; rounds
   interleaved, medians;
3. **the trip behind a flood** (in process, `lab.latency.TripBench`): each trip after the
   400 foreign frames that 4 ms of the flood put before it, as the user-space lookup
   would see them without the kernel filter; against the unflooded trip;
4. **on the wire** (root): `goosectl run` on veth with the flood at 100,000 frames/s of
   10,000 streams on the trip's address (`lab.wire_latency.WireTrip`, its loader paced per
   ms; the rate the controller's interface actually received is measured and printed), a
   peer sends the trip and times the trip-ack; against the same lab unflooded;
5. **the mutated-copy flood** (in process): ten genuine state changes with 30,000
   stNum-mutated copies/s of the genuine frames between them; genuine changes delivered,
   against the same publisher without the copies.

Checked (`percentiles.check_budget`: an XFAIL carrying the numbers, a failure where
GOOSECTL_ENFORCE_BUDGETS=1): the trip behind the flood within the 4 ms hard limit at p99,
in process and on the wire; the rejected frame at most 1/10 of the 10 us a frame may take
at 100,000 frames/s on one core; every genuine change delivered under the mutated flood.
Asserted: a rejected frame costs less than a parse.
"""

from __future__ import annotations

import json
import random
import statistics
import time

from benchmarks.percentiles import check_budget, ratio, sample_calls, summarise
from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.demo.scenario import EPOCH
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.goose.subscriber import SubscriberBank
from goosectl.controller.logic.core import BayController
from goosectl.lab.latency import TripBench
from goosectl.protocols.ethernet import bpf
from goosectl.protocols.goose import Boolean, GooseFrame, encode_frame, parse_header
from tests.support.peers import require_root

GROUP = "flood"
HARD_LIMIT_US = 4000.0
FLOOD_FPS = 100_000
FLOOD_STREAMS = 10_000
#: frames of the flood ahead of a trip in the ring: 4 ms of it
AHEAD = FLOOD_FPS * 4 // 1000
#: a frame may take 10 us at 100,000/s on one core; a rejected one should take a tenth
REJECT_BUDGET_NS = 1000.0
PROT_DST = bytes.fromhex("010ccd010001")


def flood_frames(n: int = FLOOD_STREAMS) -> list[bytes]:
    """One frame each of `n` streams nobody subscribed to, on the trip's dst and APPID."""
    return [
        encode_frame(
            GooseFrame(
                gocb_ref=f"FLOOD{i:05d}LD0/LLN0$GO$trip",
                dat_set=f"FLOOD{i:05d}LD0/LLN0$ds",
                all_data=(Boolean(False), Boolean(True)),
                st_num=1,
                sq_num=i,
                appid=0x1001,
                dst=PROT_DST,
                src=bytes.fromhex("02badbad0000"),
            )
        )
        for i in range(n)
    ]


def bay_filter(bank: SubscriberBank) -> bytes:
    """The program `goosectl run` attaches for the bay's subscriptions."""
    subs = list(bank.subs.values())
    streams = [bpf.StreamMatch(s.dst, s.appid, s.gocb_ref) for s in subs]
    return bpf.assemble(bpf.goose_program({s.dst for s in subs}, streams=streams))


def kernel_steps(bank: SubscriberBank, frames: list[bytes]) -> tuple[list[int], int]:
    """BPF instructions the bay's filter runs per flood frame (each one dropped), and for
    a frame of the protection trip's own stream (let in)."""
    code = bay_filter(bank)
    steps = []
    for f in frames:
        verdict = bpf.run(code, f)
        assert not verdict.accept, "the kernel filter let a flood frame in"
        steps.append(verdict.steps)
    sub = next(s for s in bank.subs.values() if s.dst == PROT_DST)
    own = encode_frame(
        GooseFrame(gocb_ref=sub.gocb_ref, dat_set="x", all_data=(Boolean(True),),
                   appid=sub.appid, dst=sub.dst)
    )  # fmt: skip
    genuine = bpf.run(code, own)
    assert genuine.accept, "the kernel filter dropped the subscribed stream"
    return steps, genuine.steps


def test_cost_per_rejected_frame(benchmark, samples):
    frames = flood_frames()
    bay = BayController(load_config(DEFAULT_CONFIG, ControllerConfig), EPOCH)
    bay.start(EPOCH)
    hub = bay.hub
    it = iter(range(1 << 62))

    def reject() -> None:
        hub.frame(frames[next(it) % FLOOD_STREAMS], "A", EPOCH)

    filtered = sample_calls(reject, samples, name="rejected before any parse", group=GROUP)
    unmatched_before = hub.bank.unmatched
    assert unmatched_before >= samples, "the flood was meant to be rejected as unmatched"
    assert not hub.bank.streams or all(s.sub is not None for s in hub.bank.streams.values()), (
        "a flood frame opened a stream"
    )
    wanted, hub.bank.wanted = hub.bank.wanted, None  # the path before the filter
    try:
        parsed = sample_calls(reject, samples, name="rejected after a header parse", group=GROUP)
    finally:
        hub.bank.wanted = wanted
    bare = sample_calls(
        lambda: parse_header(frames[next(it) % FLOOD_STREAMS]),
        samples,
        name="reference: parse_header alone",
        group=GROUP,
    )
    ratio(filtered, parsed)
    ratio(filtered, bare)
    steps, genuine_steps = kernel_steps(hub.bank, frames)
    p50_ns = filtered.p50 * 1000
    benchmark.extra_info.update(
        {
            "rejected_p50_ns": round(p50_ns),
            "rejected_p99_ns": round(filtered.p99 * 1000),
            "after_parse_p50_ns": round(parsed.p50 * 1000),
            "parse_header_p50_ns": round(bare.p50 * 1000),
            "x_vs_after_parse_p50": round(filtered.p50 / parsed.p50, 3),
            "kernel_bpf_steps_rejected_median": statistics.median(steps),
            "kernel_bpf_steps_rejected_max": max(steps),
            "kernel_bpf_steps_genuine": genuine_steps,
        }
    )
    benchmark.pedantic(lambda: None, rounds=1)
    numbers = (
        f"rejected frame in user space p50 {p50_ns:.0f} ns (p99 {filtered.p99 * 1000:.0f} "
        f"ns); the same frames parsed first p50 {parsed.p50 * 1000:.0f} ns; parse_header "
        f"alone p50 {bare.p50 * 1000:.0f} ns; in the kernel: {statistics.median(steps):.0f} "
        f"BPF instructions a rejected frame (max {max(steps)}), {genuine_steps} for a "
        f"subscribed one"
    )
    print(numbers)
    assert filtered.p50 < parsed.p50, numbers  # the filter must be cheaper than a parse
    check_budget(p50_ns <= REJECT_BUDGET_NS, f"p50 <= {REJECT_BUDGET_NS:.0f} ns: {numbers}")


def test_the_trip_behind_a_flood_in_process(benchmark, short, tmp_path):
    frames = flood_frames()
    n = 1000 if short else 5000
    plain = TripBench(journal=tmp_path / "plain.sqlite")
    try:
        ref = summarise("in process: trip (no flood)", GROUP, plain.sample(n).to_serial)
    finally:
        plain.close()
    bench = TripBench(journal=tmp_path / "flood.sqlite")
    k = [0]

    rejects = bench.bay.hub.bank.rejects

    def behind_flood(call) -> None:
        # the live loop's order: each frame of the ring's batch looked up, the foreign
        # ones dropped, then the trip handled
        start = k[0]
        for j in range(start, start + AHEAD):
            if not rejects(frames[j % FLOOD_STREAMS]):
                raise AssertionError("a flood frame was not rejected")
        k[0] = start + AHEAD
        call()

    try:
        flooded = bench.sample(n, around=behind_flood)
    finally:
        bench.close()
    res = ratio(
        summarise(
            f"in process: {AHEAD} foreign frames, then the trip -> TRIP bytes",
            GROUP,
            flooded.to_serial,
        ),
        ref,
    )
    benchmark.extra_info.update({"flooded": res.as_dict(), "unflooded": ref.as_dict()})
    benchmark.pedantic(lambda: None, rounds=1)
    numbers = (
        f"trip behind {AHEAD} foreign frames (4 ms of {FLOOD_FPS} frames/s): p50 {res.p50:.0f} "
        f"us, p99 {res.p99:.0f} us, max {res.max:.0f} us; unflooded trip in the same run: p50 "
        f"{ref.p50:.0f} us, p99 {ref.p99:.0f} us (n {res.n})"
    )
    print(numbers)
    check_budget(res.p99 < HARD_LIMIT_US, f"p99 < {HARD_LIMIT_US:.0f} us: {numbers}")


def test_the_trip_on_the_wire_under_a_flood(benchmark, short):
    require_root()
    from goosectl.lab.wire_latency import WireTrip, peer_fifo

    n = 1000 if short else 5000
    results = {}
    reports = {}
    rates: dict[str, int] = {}
    unanswered: dict[str, int] = {}
    for name, kw in (
        ("wire: trip -> trip-ack (no flood)", {}),
        (
            f"wire: trip -> trip-ack under {FLOOD_FPS} foreign frames/s on its address",
            {"load_fps": FLOOD_FPS, "load_streams": FLOOD_STREAMS, "load_dst": PROT_DST.hex()},
        ),
    ):
        trip = WireTrip(**kw)
        try:
            if kw:
                wait_for_load(trip)  # the loader takes seconds to start on a busy host
            before = rx_packets(trip), time.monotonic()
            with peer_fifo():
                times = [timed_trip(trip, unanswered, name) for _ in range(n)]
            after = rx_packets(trip), time.monotonic()
        finally:
            trip.close()
        results[name] = summarise(name, GROUP, times)
        reports[name] = json.loads(trip.controller_report or "{}")
        rates[name] = round((after[0] - before[0]) / (after[1] - before[1]))
    ref, res = results.values()
    ratio(res, ref)
    benchmark.extra_info.update(
        {"flooded": res.as_dict(), "unflooded": ref.as_dict(), "controller": reports,
         "rx_frames_per_s": rates, "unanswered": unanswered}
    )  # fmt: skip
    benchmark.pedantic(lambda: None, rounds=1)
    plain_rate, flood_rate = rates.values()
    numbers = (
        f"under the flood ({flood_rate} frames/s reached the controller's interface; "
        f"{plain_rate} unflooded): p50 {res.p50:.0f} us, p99 {res.p99:.0f} us, max "
        f"{res.max:.0f} us; unflooded in the same run: p50 {ref.p50:.0f} us, p99 "
        f"{ref.p99:.0f} us (n {res.n}); trips not answered within the lab's wait (each "
        f"counted at {UNANSWERED_NS // 1_000_000} ms, a lower bound): {unanswered}; "
        f"goosectl's own: {reports}"
    )
    print(numbers)
    check_budget(res.p99 < HARD_LIMIT_US, f"p99 < {HARD_LIMIT_US:.0f} us: {numbers}")


#: a trip the lab waited for in vain (its 2 s wait, or the reclose's 5 s) counts as this
UNANSWERED_NS = 2_000_000_000


def timed_trip(trip, unanswered: dict[str, int], name: str) -> int:
    """One trip's ns; one the controller did not answer in the lab's wait is counted and
    taken as UNANSWERED_NS (the percentiles keep it, as a lower bound), and the next
    sample's reclose puts the bay back."""
    try:
        return trip.sample()
    except TimeoutError:
        unanswered[name] = unanswered.get(name, 0) + 1
        if unanswered[name] > 50:
            raise
        return UNANSWERED_NS


def wait_for_load(trip, timeout_s: float = 30.0) -> None:
    """Until the flood reaches the controller's interface (over 1,000 frames in 0.5 s)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        start = rx_packets(trip)
        time.sleep(0.5)
        if rx_packets(trip) - start > 1000:
            return
    raise AssertionError("the flood never reached the controller's interface")


def rx_packets(trip) -> int:
    """Frames the controller's interface received (its namespace's counter): what the
    loader really sent, the kernel filter's drops included."""
    from goosectl.lab.wire_latency import IFACE

    ctl = trip.lab.namespaces[1]
    out = ctl.run(["cat", f"/sys/class/net/{IFACE}/statistics/rx_packets"], timeout=10)
    return int(out.stdout)


def test_the_cost_of_a_rejected_frame_in_the_kernel(benchmark, short):
    """The sender's time per foreign frame on a veth pair (the receive path runs in its
    context): no packet socket on the far end, one with the stream filter (drops them),
    one with the destination-only filter of before (queues them until its buffer is
    full, then the kernel drops them there). Rounds interleaved; medians compared."""
    require_root()
    from goosectl.lab.netns import netlab
    from goosectl.protocols.ethernet.rawsock import RawSocket
    from tests.ethernet.burst import MmsgSender

    frames = flood_frames()
    rounds = 15 if short else 60
    sub = next(
        s for s in load_config(DEFAULT_CONFIG, ControllerConfig).goose.subscriptions
        if s.dst == PROT_DST
    )  # fmt: skip
    opens = {
        "none": None,
        "stream": {"streams": [bpf.StreamMatch(sub.dst, sub.appid, sub.gocb_ref)]},
        "destination": {},
    }
    per: dict[str, list[float]] = {mode: [] for mode in opens}
    with netlab() as lab:
        left, right = lab.namespace(), lab.namespace()
        lab.veth(left, right, a="kf0", b="kf1")
        with left.entered():
            tx = RawSocket("kf0", timestamps=False)
        sender = MmsgSender(tx, frames)
        try:
            for _ in range(rounds):
                for mode, kw in opens.items():
                    rx = None
                    if kw is not None:
                        with right.entered():
                            rx = RawSocket("kf1", groups=[PROT_DST], timestamps=False, **kw)
                        assert rx.filter_level == mode
                    try:
                        per[mode].append(sender.send_all() * 1e9 / len(frames))
                    finally:
                        if rx is not None:
                            rx.close()
        finally:
            tx.close()
    med = {mode: statistics.median(v) for mode, v in per.items()}
    results = {
        mode: summarise(f"kernel: sender ns/frame, {mode}", GROUP, [x * 1000 for x in v])
        for mode, v in per.items()
    }
    ratio(results["stream"], results["none"])
    ratio(results["destination"], results["none"])
    cost = med["stream"] - med["none"]
    benchmark.extra_info.update(
        {f"{m}_ns_per_frame_median": round(v, 1) for m, v in med.items()}
        | {"filter_cost_ns_per_frame": round(cost, 1), "rounds": rounds}
    )
    benchmark.pedantic(lambda: None, rounds=1)
    print(
        f"sender ns per foreign frame (median of {rounds} rounds of {len(frames)}): no "
        f"packet socket {med['none']:.0f}, stream filter (dropped) {med['stream']:.0f}, "
        f"destination filter (queued) {med['destination']:.0f}; the stream filter's cost "
        f"{cost:.0f} ns a frame"
    )
    # no assertion on the difference: a few dozen BPF instructions (tens of ns) are far
    # below this host's round-to-round noise in the veth transmit path (microseconds);
    # the numbers are printed, the exact cost is the instruction count above


def test_the_mutated_copy_flood_delivers_every_genuine_change(benchmark):
    """Ten genuine state changes, their retransmissions 10 ms apart, and after each
    genuine frame 300 copies with one random bit of stNum flipped (30,000/s), in virtual
    time through the subscriber's hub; against the same publisher without the copies."""
    from tests.hostile.test_mutated_flood import CHANGES

    plain, _ = mutated_flood(copies=False)
    flooded, cost = mutated_flood(copies=True)
    res = summarise("mutated copy through the receive rules", GROUP, cost)
    benchmark.extra_info.update(
        {"delivered_flooded": flooded, "delivered_plain": plain, "copy": res.as_dict()}
    )
    benchmark.pedantic(lambda: None, rounds=1)
    numbers = (
        f"genuine changes delivered under 30,000 mutated copies/s: {flooded} of {CHANGES}; "
        f"without the copies in the same run: {plain} of {CHANGES}; a copy costs p50 "
        f"{res.p50:.1f} us (p99 {res.p99:.1f} us, n {res.n})"
    )
    print(numbers)
    assert plain == CHANGES, numbers
    check_budget(flooded == CHANGES, numbers)


def mutated_flood(copies: bool, seed: int = 23) -> tuple[int, list[int]]:
    """(genuine changes delivered, ns each copy took)."""
    from tests.hostile import test_mutated_flood as attack

    sub = {"name": "prot", "gocb_ref": attack.GOCB, "appid": attack.APPID,
           "dst": attack.DST, "src": attack.SRC}  # fmt: skip
    hub = GooseHub(GooseConfig.model_validate({"subscriptions": [sub]}))
    rng = random.Random(seed)
    gap_ns = int(attack.GAP_S * 1e9)
    now = 0
    delivered = 0
    took: list[int] = []
    for k in range(attack.CHANGES + 1):
        for sq in range(attack.REPEATS + 1):
            f = attack.genuine(attack.ST0 + k, sq, k)
            start = now
            out = hub.frame(encode_frame(f), "A", now)
            if sq == 0 and k > 0 and any(getattr(e, "deliver", False) for e in out):
                delivered += 1
            for c in attack.copies(f, rng) if copies else ():
                now += gap_ns // (attack.COPIES + 1)
                t0 = time.perf_counter_ns()
                hub.frame(c, "A", now)
                took.append(time.perf_counter_ns() - t0)
            now = start + gap_ns
    return delivered, took or [0]
