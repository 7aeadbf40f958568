"""A flood on the subscribed address: frames of streams nobody subscribed to, at 100,000/s.

An attacker on the station LAN (or a misconfigured IED) sends valid-looking GOOSE frames of
10,000 other gocbRefs to the protection trip's own destination MAC and APPID, so the
kernel's multicast filter and the APPID let them all in. The subscriber rejects a frame of
no subscription before any parse (`SubscriberBank.wanted`: the gocbRef TLV cut at fixed
offsets, one set lookup), so each costs a few hundred ns instead of a header parse.

Measured, each against its reference in the same run:

1. **cost per rejected frame** (in process, `GooseHub.frame` of the bay's hub, p50 in ns),
   against the same frames with the pre-parse filter off (what each cost before: a header
   parse, then `unmatched`) and against a bare `parse_header` of them;
2. **the trip behind a flood** (in process, `lab.latency.TripBench`: trip frame bytes in ->
   TRIP bytes for the serial port, journal and GC on): each trip arrives after the 400
   foreign frames that 4 ms of a 100,000 frames/s flood put before it in the receive ring,
   and the time counts from the first of them; against the unflooded trip;
3. **on the wire** (root): `goosectl run` on veth with the flood at 100,000 frames/s of
   10,000 streams on the trip's address (`lab.wire_latency.WireTrip`, its loader paced per
   ms), a peer sends the trip and times the trip-ack; against the same lab unflooded.

Checked (`percentiles.check_budget`: an XFAIL carrying the numbers, a failure where
GOOSECTL_ENFORCE_BUDGETS=1): the trip behind the flood within the 4 ms hard limit at p99,
in process and on the wire; the rejected frame at most 1/10 of the 10 us a frame may take
at 100,000 frames/s on one core. Asserted: a rejected frame costs less than a parse. Not
asserted as a hard limit, because it is not met yet: on the wire every frame still costs
the receive loop's own per-frame work in Python (the ring's frame objects, the lookup), so
at 100,000 frames/s on a shared 2-core host the controller falls behind, the kernel drops
frames and the trip waits. Dropping foreign gocbRefs in the kernel's socket filter is the
step that would meet it.
"""

from __future__ import annotations

import json

from benchmarks.percentiles import check_budget, ratio, sample_calls, summarise
from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.demo.scenario import EPOCH
from goosectl.controller.logic.core import BayController
from goosectl.lab.latency import TripBench
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
    p50_ns = filtered.p50 * 1000
    benchmark.extra_info.update(
        {
            "rejected_p50_ns": round(p50_ns),
            "rejected_p99_ns": round(filtered.p99 * 1000),
            "after_parse_p50_ns": round(parsed.p50 * 1000),
            "parse_header_p50_ns": round(bare.p50 * 1000),
            "x_vs_after_parse_p50": round(filtered.p50 / parsed.p50, 3),
        }
    )
    benchmark.pedantic(lambda: None, rounds=1)
    numbers = (
        f"rejected frame p50 {p50_ns:.0f} ns (p99 {filtered.p99 * 1000:.0f} ns); the same "
        f"frames parsed first p50 {parsed.p50 * 1000:.0f} ns; parse_header alone p50 "
        f"{bare.p50 * 1000:.0f} ns"
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
    for name, kw in (
        ("wire: trip -> trip-ack (no flood)", {}),
        (
            f"wire: trip -> trip-ack under {FLOOD_FPS} foreign frames/s on its address",
            {"load_fps": FLOOD_FPS, "load_streams": FLOOD_STREAMS, "load_dst": PROT_DST.hex()},
        ),
    ):
        trip = WireTrip(**kw)
        try:
            with peer_fifo():
                times = [trip.sample() for _ in range(n)]
        finally:
            trip.close()
        results[name] = summarise(name, GROUP, times)
        reports[name] = json.loads(trip.controller_report or "{}")
    ref, res = results.values()
    ratio(res, ref)
    benchmark.extra_info.update(
        {"flooded": res.as_dict(), "unflooded": ref.as_dict(), "controller": reports}
    )
    benchmark.pedantic(lambda: None, rounds=1)
    numbers = (
        f"under the flood: p50 {res.p50:.0f} us, p99 {res.p99:.0f} us, max {res.max:.0f} us; "
        f"unflooded in the same run: p50 {ref.p50:.0f} us, p99 {ref.p99:.0f} us (n {res.n}); "
        f"goosectl's own: {reports}"
    )
    print(numbers)
    check_budget(res.p99 < HARD_LIMIT_US, f"p99 < {HARD_LIMIT_US:.0f} us: {numbers}")
