"""The product's bound: transition latency, frame in -> effects out, side by side with floors.

1. in process: trip frame bytes in -> TRIP command bytes for the serial port, and -> the
   trip-acknowledged GOOSE frame bytes built (lab.latency.TripBench), with
   the bay journal and its writer thread on and the garbage collector on, as `run` has them;
   back to back, and after 5 ms asleep before each trip (the caches a real trip finds);
2. on the wire (root): a peer in another namespace sends the trip on veth; `goosectl run`
   sends TRIP to the simulator over a pty; the trip-acknowledged frame comes back on the
   wire; timestamps at the peer (lab.wire_latency.WireTrip, the journal on
   and the publication rate limit raised for a breaker cycled 30 times a second; the peer
   SCHED_FIFO 40, as another device
   would be, so its own scheduling is not in the trip), also with `run --spin` and with
   50 other streams arriving at 5,000 frames/s in total;
3. the references, measured in the same test as each wire case, between two fresh
   namespaces on veth: the raw AF_PACKET echo (a Python echo peer, the kernel's floor) and
   libiec61850's own GOOSE ping-pong in C (lab.iec61850_pingpong: its
   publisher in one namespace, its subscriber answering by publishing in the other), each
   back to back and after the same quiet as every trip (lab.wire_latency.QUIET_S asleep
   before each round trip); and the pty round trip.

Why both: each trip follows a quiet (the re-close, then QUIET_S), so it wakes a CPU that
halted and a path other work pushed out of the caches (README, performance: the sleep
sweep). Back to back, an echo never halts and never leaves the caches. In CI on 1 Dec 2026
(eight cases) the quiet moved the raw echo's p50 from 27-97 us to 62-238 us and its p99
from 54-204 us to 190-476 us; libiec61850's p50 from 13-64 us to 40-80 us.
The ratio is judged against the echo measured as the trip is; the back-to-back ratios are
reported beside it.

Asserted everywhere: the 4 ms hard limit. Checked (ARCHITECTURE.md, performance budget,
`percentiles.check_budget`): in process p99 <= 200 us (IN_PROCESS_BUDGET_P99_US, 1,000
trips in --short); on the wire p50 <= 3x the raw echo's p50 after the same quiet
(WIRE_BUDGET_X_RAW_ECHO_P50) and p99 <= 500 us (WIRE_BUDGET_P99_US), 1,000 trips, each its
own check. An unmet budget is an XFAIL whose reason carries the numbers and every ratio
(the wire p99 is not met on this host), and a failure with
GOOSECTL_ENFORCE_BUDGETS=1 (a host fit to judge it).
"""

from __future__ import annotations

import contextlib
import json

import pytest

from benchmarks.percentiles import check_budget, host_jitter, jitter_note, ratio, summarise
from goosectl.controller.shell.realtime import CpuLatency
from goosectl.lab import iec61850_pingpong, sched_stats
from goosectl.lab.floors import pty_round_trips
from goosectl.lab.latency import TripBench
from goosectl.lab.wire_floor import WireFloor
from tests.support.peers import require_binary, require_iec61850, require_root

HARD_LIMIT_US = 4000.0
#: ARCHITECTURE.md: frame in -> serial command out (in process), p99.
IN_PROCESS_BUDGET_P99_US = 200.0
#: ARCHITECTURE.md: frame on wire in -> frame on wire out (veth), p99.
WIRE_BUDGET_P99_US = 500.0
#: ARCHITECTURE.md: ... and at most this many raw AF_PACKET echoes at p50.
WIRE_BUDGET_X_RAW_ECHO_P50 = 3.0
GROUP = "transition-latency"
PINGPONG = "reference: libiec61850 C ping-pong (publish -> subscriber publishes back)"
RAW_ECHO = "floor: raw-socket echo round trip"


@pytest.fixture(scope="module")
def floors(short):
    n = 2000 if short else 20000
    pty = summarise("floor: pty round trip (21 B)", GROUP, pty_round_trips(21, n))
    return {"pty": pty}


@pytest.mark.parametrize("idle_s", [0.0, 0.005], ids=["back-to-back", "after-5ms-idle"])
def test_in_process_trip(benchmark, short, floors, tmp_path, idle_s):
    """Back to back, each trip finds the path in the CPU's caches; after 5 ms asleep (the
    wire benchmark's quiet between trips, and any real trip's situation) it may not, on a
    host whose caches others share: the second case is the one the wire sees."""
    bench = TripBench(journal=tmp_path / "bay.sqlite", idle_s=idle_s)
    after = f" (after {idle_s * 1000:g} ms idle)" if idle_s else ""
    try:
        s = bench.sample(1000 if short else 5000)  # a p99 rests on >= 1,000 trips
    finally:
        bench.close()
    assert bench.journal_rows > 0, "the journal was meant to be on and committed nothing"
    serial = ratio(
        summarise(f"in process: trip frame -> TRIP bytes{after}", GROUP, s.to_serial), floors["pty"]
    )
    ack = ratio(
        summarise(f"in process: trip frame -> trip-ack frame built{after}", GROUP, s.to_ack_frame),
        floors["pty"],
    )
    host = host_jitter(serial, serial.n, keep_gc=True)
    benchmark.extra_info.update(
        {
            "to_serial": serial.as_dict(),
            "to_ack": ack.as_dict(),
            "journal_rows": bench.journal_rows,
            "host_same_length": host.as_dict(),
        }
    )
    benchmark.pedantic(lambda: None, rounds=1)
    assert ack.p99 < HARD_LIMIT_US, f"trip-ack built: p99 {ack.p99:.0f} us"
    numbers = (
        f"in process trip frame -> TRIP bytes{after}: p99 {serial.p99:.0f} us, budget "
        f"{IN_PROCESS_BUDGET_P99_US:.0f} us (p50 {serial.p50:.0f} us, n {serial.n}, "
        f"journal and GC on); {jitter_note(serial, host)}"
    )
    assert serial.p99 < HARD_LIMIT_US, numbers
    check_budget(serial.p99 <= IN_PROCESS_BUDGET_P99_US, numbers)


@pytest.mark.parametrize(
    ("load_fps", "spin", "idle_poll"),
    [(0, False, False), (0, True, False), (5000, False, False), (0, False, True)],
    ids=["default", "spin", "5000fps", "cpu-latency-0"],
)
def test_on_the_wire_trip(benchmark, short, floors, load_fps, spin, idle_poll):
    """``idle_poll``: the host tuned as the README's host tuning says, CPU wake-up latency
    held at 0 (idle CPUs poll instead of halting) for the whole case, references included,
    and `run --cpu-latency-us 0` holding it too."""
    if idle_poll and short:  # a VM that ignores PM QoS measures the default case twice
        pytest.skip("full mode only (python -m pytest benchmarks): the host-tuning case")
    require_root()
    require_iec61850()
    require_binary("gcc", "gcc")  # builds the libiec61850 reference against the wheel
    n = 1000 if short else 5000  # a p99 needs >= 1,000 samples (one in a hundred is the tail)
    with contextlib.ExitStack() as host:
        if idle_poll:
            host.callback(CpuLatency(0).release)
        from goosectl.lab.wire_latency import QUIET_S, WireTrip, peer_fifo

        m = 2000 if short else 20000
        quiet = 1000 if short else 5000  # >= 1,000 for a p99; QUIET_S each
        after_quiet = f" (after {QUIET_S * 1e3:g} ms quiet, as each trip)"
        with WireFloor() as wf:
            echo = summarise(RAW_ECHO, GROUP, wf.sample(m))
            echo_quiet = summarise(RAW_ECHO + after_quiet, GROUP, wf.sample(quiet, quiet_s=QUIET_S))
        lib = summarise(PINGPONG, GROUP, iec61850_pingpong.sample(m))
        lib_quiet = summarise(
            PINGPONG + after_quiet, GROUP, iec61850_pingpong.sample(quiet, quiet_s=QUIET_S)
        )

        trip = WireTrip(load_fps=load_fps, spin=spin, cpu_latency_us=0 if idle_poll else None)
        try:
            pids = {"run": trip.procs[1].pid, "sim": trip.procs[0].pid}
            before = {k: sched_stats.snapshot(pid) for k, pid in pids.items()}
            with peer_fifo():  # the peer is another device: its send is not held up here
                times = [trip.sample() for _ in range(n)]
            waited = {
                k: sched_stats.between(before[k], sched_stats.snapshot(pid))
                for k, pid in pids.items()
            }
        finally:
            trip.close()
        # whose the tail is: each thread's CPU and wait for a CPU, the host's stolen share
        benchmark.extra_info["scheduling"] = waited
    # the controller's own view (socket read -> effects out, every frame it handled): tells
    # a slow trip inside goosectl from one lost to scheduling outside it
    report = json.loads(trip.controller_report or "{}")
    inside = report.get("frame_latency_us", {})
    benchmark.extra_info["controller_frame_latency_us"] = inside
    # frame read -> the command's bytes taken by the device's port (TRIPs and the lab's
    # CLOSEs), written from inside the frame's handling (`BayController.urgent`)
    device = report.get("frame_to_device_us", {})
    benchmark.extra_info["controller_frame_to_device_us"] = device
    assert device.get("n", 0) >= n, f"every trip writes TRIP to the device: {report}"
    name = (
        "wire: trip sent -> trip-ack received"
        + (f" (+50 streams, {load_fps} frames/s)" if load_fps else "")
        + (" (run --spin)" if spin else "")
        + (" (CPU wake-up latency 0)" if idle_poll else "")
    )
    res = summarise(name, GROUP, times)
    for ref in (echo, echo_quiet, lib, lib_quiet, floors["pty"]):
        ratio(res, ref)
    benchmark.extra_info.update(res.as_dict())
    benchmark.extra_info["raw_echo"] = echo.as_dict()
    benchmark.extra_info["raw_echo_after_quiet"] = echo_quiet.as_dict()
    benchmark.extra_info["libiec61850_pingpong"] = lib.as_dict()
    benchmark.extra_info["libiec61850_pingpong_after_quiet"] = lib_quiet.as_dict()
    benchmark.pedantic(lambda: None, rounds=1)

    def versus(ref) -> str:
        return f"p50 {ref.p50:.0f} us ({res.p50 / ref.p50:.1f}x), p99 {ref.p99:.0f} us"

    numbers = (
        f"{name}: p50 {res.p50:.0f} us, p99 {res.p99:.0f} us, max {res.max:.0f} us (n {res.n}); "
        f"raw echo after the same {QUIET_S * 1e3:g} ms quiet {versus(echo_quiet)}, back to "
        f"back {versus(echo)}; libiec61850 ping-pong after the quiet {versus(lib_quiet)}, back "
        f"to back {versus(lib)}; goosectl's own: {inside}; frame read -> device command "
        f"written: {device}; while the trips ran, each thread's CPU and wait for a CPU (the "
        f"loop's tid is its process's) and the host's stolen share: {waited}"
    )
    assert res.p99 < HARD_LIMIT_US, numbers
    # the ratio against the echo measured as the trip is: after the same quiet (back to
    # back, the echo's CPUs never halt and its few lines never leave the caches, which no
    # trip that follows a quiet finds; that ratio is reported beside it)
    check_budget(
        res.p50 <= WIRE_BUDGET_X_RAW_ECHO_P50 * echo_quiet.p50,
        f"p50 <= {WIRE_BUDGET_X_RAW_ECHO_P50:.0f}x the raw echo after the same quiet: {numbers}",
    )
    check_budget(res.p99 <= WIRE_BUDGET_P99_US, f"p99 <= {WIRE_BUDGET_P99_US:.0f} us: {numbers}")
