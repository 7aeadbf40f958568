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
    `broker`, for one B block; `acked` lists the rows acknowledged in each block."""

    def __init__(self, trip, broker: str, log: Path) -> None:
        self.trip = trip
        self.broker = broker
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.acked: list[int] = []
        self._from = 0

    def _acked_seq(self) -> int:
        return load_checkpoint(self.trip.tmp / "state" / CHECKPOINT).acked_seq

    def start(self, serve) -> None:
        tmp = self.trip.tmp
        out = open(self.log, "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen(
            goosectl_argv(
                "uplink", "--state", str(tmp / "state"), "--control", str(tmp / "control.sock"),
                "--broker", self.broker, "--site", "lab", "--bay", "wire",
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


@pytest.mark.parametrize("realtime", [False, True], ids=["default", "realtime"])
def test_wire_trip_with_uplink_publishing(benchmark, short, realtime: bool) -> None:
    require_root()
    require_iec61850()
    from goosectl.lab.wire_latency import WireTrip
    from tests.fleet.brokers import Mosquitto

    n = 1000 if short else 5000
    root = Path(tempfile.mkdtemp(prefix="goosectl-uplink-bench-"))
    broker = Mosquitto(root)
    trip = None
    side = None
    try:
        trip = WireTrip(realtime=realtime)
        device_fifo(trip)
        side = Publishing(trip, f"mqtt://127.0.0.1:{broker.port}", root / "uplink.log")
        every = ProcCpu(
            {
                "controller": lambda: [trip.procs[1].pid],
                "simulator": lambda: [trip.procs[0].pid],
                "mosquitto": lambda: [broker.proc.pid],
            }
        )
        load = ProcCpu({"uplink": side.pids})
        run = interleave(trip, n, BLOCKS, side, every, load, lambda: controller_words(trip))
    finally:
        if side is not None:
            side.stop()
        if trip is not None:
            trip.close()
        with contextlib.suppress(Exception):
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    rows = sum(side.acked)
    seconds = sum(u["uplink"].wall_s for name, _, u in run.blocks if name.startswith("B"))
    published = f"{rows} journal rows acknowledged by mosquitto in the B blocks"
    if seconds:
        published += f" ({rows / seconds:.0f}/s)"
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
        more=published,
    )
