"""The hot path is untouched by the fleet: the wire trip (trip sent -> trip-ack received,
`goosectl run` on veth) with `goosectl uplink` running and publishing the controller's
journal and state to a real broker (Debian's mosquitto, QoS 1), against the same trips
without the uplink, within 10 % at p50 and p99.

The two are interleaved in one run, A/B/A/B blocks (B: the uplink started before the block
and stopped after it; the broker runs throughout, idle without its client), so whatever
else the shared host does falls on both. Two pairs of 500 trips a block (`--short`: 1,000
trips each way, so each side's p99 rests on 1,000): every block costs a settle and every B
block an uplink start, and four pairs of the same trips took ~20 s more of CI for no more
samples. That the uplink published is read from its
checkpoint (the last journal seq the broker acknowledged): it must move in every B block.
What the side processes took is measured from /proc (CPU seconds and run-queue wait of the
uplink and the broker; of the controller and the simulator in every block) and is part
of the result; a budget not met is an XFAIL with those numbers (`check_budget`).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from benchmarks.goose_wire import (
    ProcCpu,
    controller_words,
    device_fifo,
    interleave,
    judge_side_load,
)
from goosectl.controller.fleet.source import CHECKPOINT, load_checkpoint
from tests.support.peers import REPO, require_iec61850, require_root
from tests.support.procs import goosectl_argv

GROUP = "uplink"
#: within this share of the run without the uplink
WITHIN = 0.10
#: A/B pairs the trips are split into (each side keeps all `n` trips whatever the count)
BLOCKS = 2
#: the uplink must have had rows acknowledged within this after it started
FIRST_ACK_S = 30.0


class Publishing:
    """`goosectl uplink` on the lab controller's journal and control socket, publishing to
    `broker`, for one B block; `acked` lists the rows acknowledged in each block. The B
    blocks take `priorities` in turn (`--priority`; `used` lists each block's)."""

    def __init__(self, trip, broker: str, log: Path, priorities: tuple[str, ...] = ("idle",)):
        self.trip = trip
        self.broker = broker
        self.log = log
        self.priorities = priorities
        self.used: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.acked: list[int] = []
        self._from = 0

    def _acked_seq(self) -> int:
        return load_checkpoint(self.trip.tmp / "state" / CHECKPOINT).acked_seq

    def start(self, serve) -> None:
        tmp = self.trip.tmp
        out = open(self.log, "ab")  # noqa: SIM115 - the process keeps it
        priority = self.priorities[len(self.used) % len(self.priorities)]
        self.used.append(priority)
        self.proc = subprocess.Popen(
            goosectl_argv(
                "uplink", "--state", str(tmp / "state"), "--control", str(tmp / "control.sock"),
                "--broker", self.broker, "--site", "lab", "--bay", "wire",
                "--priority", priority,
            ),
            cwd=REPO, stdout=out, stderr=out,
        )  # fmt: skip
        before = self._acked_seq()
        end = time.monotonic() + FIRST_ACK_S
        while self._acked_seq() <= before:  # connected, and the broker acknowledges
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"the uplink did not publish: {self.log.read_text()[-500:]}")
            serve(0.1)
        self._from = self._acked_seq()

    def pids(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None and self.proc.poll() is None else []

    def stop(self) -> list[str]:
        if self.proc is None:
            return []
        problems = []
        acked = self._acked_seq() - self._from
        self.acked.append(acked)
        if acked <= 0:
            problems.append("the uplink had no journal row acknowledged during the block")
        if self.proc.poll() is not None:
            problems.append(f"the uplink exited ({self.proc.returncode}) during the block")
        else:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        return problems


def _publishing_run(realtime: bool, n: int, blocks: int, priorities: tuple[str, ...]):
    """The interleaved run (A: no uplink; B: the uplink at `priorities` in turn) and the
    side load that ran in its B blocks."""
    from goosectl.lab.wire_latency import WireTrip
    from tests.fleet.brokers import Mosquitto

    root = Path(tempfile.mkdtemp(prefix="goosectl-uplink-bench-"))
    broker = Mosquitto(root)
    trip = None
    side = None
    try:
        trip = WireTrip(realtime=realtime)
        device_fifo(trip)
        side = Publishing(trip, f"mqtt://127.0.0.1:{broker.port}", root / "uplink.log", priorities)
        every = ProcCpu(
            {
                "controller": lambda: [trip.procs[1].pid],
                "simulator": lambda: [trip.procs[0].pid],
                "mosquitto": lambda: [broker.proc.pid],
            }
        )
        load = ProcCpu({"uplink": side.pids})
        run = interleave(trip, n, blocks, side, every, load, lambda: controller_words(trip))
    finally:
        if side is not None:
            side.stop()
        if trip is not None:
            trip.close()
        with contextlib.suppress(Exception):
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return run, side


def _published(run, side: Publishing) -> str:
    rows = sum(side.acked)
    seconds = sum(u["uplink"].wall_s for name, _, u in run.blocks if name.startswith("B"))
    published = f"{rows} journal rows acknowledged by mosquitto in the B blocks"
    if seconds:
        published += f" ({rows / seconds:.0f}/s)"
    return published


@pytest.mark.parametrize("realtime", [False, True], ids=["default", "realtime"])
def test_wire_trip_with_uplink_publishing(benchmark, short, realtime: bool) -> None:
    """The acceptance: the uplink as it ships (`--priority idle`) against no uplink."""
    require_root()
    require_iec61850()
    run, side = _publishing_run(realtime, 1000 if short else 5000, BLOCKS, ("idle",))
    judge_side_load(
        benchmark,
        run,
        kind="run --realtime" if realtime else "run",
        load="uplink publishing",
        key="with_uplink",
        group=GROUP,
        blocks=BLOCKS,
        within=WITHIN,
        cpu_of="the uplink",
        more=_published(run, side),
    )


def by_priority(run, used: list[str]) -> dict[str, list[int]]:
    """The B blocks' trips split by the priority each block's side process ran at (the
    trips are appended block after block, `run.blocks` says how many each took)."""
    out: dict[str, list[int]] = {p: [] for p in used}
    at = 0
    b_blocks = [taken for name, taken, _ in run.blocks if name.startswith("B")]
    for priority, taken in zip(used, b_blocks, strict=False):
        out[priority] += run.with_load[at : at + taken]
        at += taken
    return out


def judge_priority(
    benchmark, run, used: list[str], kind: str, load: str, more: str, group: str = GROUP
) -> None:
    """What the sidecar's priority alone buys: the trips beside it at `normal` and at
    `idle`, each against the A blocks of the same run; the budget (within 10 % of none at
    p50 and p99) asserted on `idle`, the default."""
    from benchmarks.percentiles import check_budget, ratio, summarise

    a = summarise(f"wire trip, {kind}, none", group, run.without or [0])
    parts, got = [], {}
    for priority, trips in by_priority(run, used).items():
        r = summarise(f"wire trip, {kind}, {load}, --priority {priority}", group, trips or [0])
        ratio(r, a)
        got[priority] = r
        parts.append(
            f"--priority {priority}: p50 {r.p50:.0f} us ({r.p50 / a.p50:.2f}x), p99 "
            f"{r.p99:.0f} us ({r.p99 / a.p99:.2f}x), n {r.n}"
        )
    cpu = f"CPU, without: {run.usage('A')}; with: {run.usage('B')}"
    numbers = (
        f"{kind}, {load}: none p50 {a.p50:.0f} us, p99 {a.p99:.0f} us (n {a.n}); "
        f"{'; '.join(parts)}; {more}; {cpu}"
        + (f"; stalled: {run.stalled}" if run.stalled else "")
        + (f"; notes: {'; '.join(run.notes)}" if run.notes else "")
    )
    print(numbers)
    benchmark.extra_info.update({"numbers": numbers})
    benchmark.pedantic(lambda: None, rounds=1)
    idle = got.get("idle")
    check_budget(
        not run.stalled
        and idle is not None
        and idle.p50 <= a.p50 * (1 + WITHIN)
        and idle.p99 <= a.p99 * (1 + WITHIN),
        f"idle within {WITHIN:.0%} of the run without it: {numbers}",
    )


@pytest.mark.parametrize("realtime", [False, True], ids=["default", "realtime"])
def test_wire_trip_uplink_priority_alone(benchmark, short, realtime: bool) -> None:
    """The same uplink at `--priority normal` and `idle` in alternate B blocks of one run
    (A B-normal A B-idle, twice): 5,000 trips each for the p99s; full mode only."""
    if short:  # 8,000 trips, about 5 minutes a case: CI keeps the side-load acceptance runs
        pytest.skip("full mode only (python -m pytest benchmarks): the priority's own A/B")
    require_root()
    require_iec61850()
    n = 5000
    run, side = _publishing_run(realtime, n, 4, ("normal", "idle"))
    kind = "run --realtime" if realtime else "run"
    judge_priority(benchmark, run, side.used, kind, "uplink publishing", _published(run, side))
