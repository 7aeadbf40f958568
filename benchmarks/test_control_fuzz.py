"""Issue 12's acceptance for the control protocol: a hostile crowd on the control socket
(`benchmarks/control_fuzz.py`: random and malformed JSON lines, deep and huge lines,
clients that never read, crowds past the client cap, pipelined floods) while protection
trips arrive on the wire: every trip is still answered (none missed), at p99 within the
4 ms bound (the slowest is reported; see the assertion for why it is not asserted).

The live trip is the veth lab of the wire benchmark (`WireTrip`: the peer in one network
namespace sends the trip and timestamps the trip acknowledgement coming back from
`goosectl run` in the other, the breaker simulator on a pty). The same controller is
first measured without the crowd: that is the baseline of the ratio. This asserts a wall
clock bound, which unit tests never do: it is the issue's explicit acceptance, kept here
with the benchmarks, and it runs in about a minute (`--short`: about 35 s).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.percentiles import ratio, summarise
from tests.support.peers import require_root

GROUP = "control fuzz"
HARD_LIMIT_US = 4000.0
ROOT = Path(__file__).resolve().parents[1]


def test_control_fuzz_alongside_live_trips(benchmark, short):
    require_root()
    from controller.runtime.wire_latency import WireTrip

    seconds = 15 if short else 30
    trip = WireTrip()
    sock = trip.tmp / "control.sock"  # the lab's `goosectl run --control`
    missed: list[str] = []
    try:
        quiet = [trip.sample() for _ in range(40 if short else 80)]  # ~0.35 s a sample
        fuzz = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.control_fuzz",
                "--control",
                str(sock),
                "--seconds",
                str(seconds),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert fuzz.stdout.readline().strip() == "fuzzing"
        loud: list[int] = []
        while fuzz.poll() is None:
            try:
                loud.append(trip.sample())
            except TimeoutError as exc:  # a trip not answered at all (WireTrip waits 2 s)
                missed.append(str(exc))
        counts = json.loads(fuzz.stdout.read().strip().splitlines()[-1])
        alive = trip.procs[1].poll() is None
    finally:
        trip.close()
    report = json.loads(trip.controller_report or "{}")
    control = report.get("control", {})
    base = summarise("wire trip, control socket idle", GROUP, quiet)
    res = ratio(summarise("wire trip, control socket under fuzz", GROUP, loud), base)
    benchmark.extra_info.update(
        {
            **res.as_dict(),
            "trips": len(loud),
            "missed": len(missed),
            "fuzz": counts,
            "controller_control": control,
            "controller_frame_latency_us": report.get("frame_latency_us"),
        }
    )
    benchmark.pedantic(lambda: None, rounds=1)
    print(
        f"\n{len(loud)} trips under fuzz, {len(missed)} missed; max {res.max:.0f} us "
        f"(p50 {res.p50:.0f}, p99 {res.p99:.0f}); idle: max {base.max:.0f} us\n"
        f"fuzz: {counts}\ncontroller: {control}"
    )
    assert alive, "the controller died under the fuzz"
    assert not missed, missed
    # the crowd reached the controller, and every kind of limit was crossed
    assert counts.get("lines_sent", 0) > 1000 and control.get("requests.refused", 0) > 100
    for limit in ("control.clients", "control.depth", "control.line", "control.slow"):
        assert control.get(limit, 0) > 0, (limit, control)
    # The bound is asserted on the p99 of the trips under fuzz, and the slowest is reported:
    # on this shared 2-vCPU machine the quiet wire benchmark's own slowest of 1,000 trips
    # reaches 4-5 ms (a woken controller waiting for a CPU), with or without the crowd, so
    # a max bound here fails on scheduling outside goosectl. `--realtime` (SCHED_FIFO) is
    # what bounds the max; its loaded benchmark is issue 14's.
    assert res.p99 < HARD_LIMIT_US, f"trips under fuzz: p99 {res.p99:.0f} us, max {res.max:.0f}"
