"""A goosectl subscriber as a wire peer: classify each frame, then answer with a probe.

Run inside a namespace (`python -m benchmarks.goose_wire classify --iface X`): it runs the
real live shell (`LiveGoose`, observer mode) and, after each frame's classification, sends a
`probe_frame` carrying the frame's sqNum. The benchmark on the other end of the veth times
frame sent -> answer received, the same shape as `benchmarks.wire`'s echo floor, so the
difference between the two is what classification costs on the wire.

Side loads for the wire trip benchmark (`lab.wire_latency.WireTrip`): `interleave` runs
the same trips in A/B blocks, without and with a side load started and stopped by the
caller (five Chromium pages on `goosectl web`, an uplink publishing), so whatever else
the shared host does falls on both; `ProcCpu` reads the CPU time and the run-queue wait
of the processes involved from /proc, so a result says what the side load itself cost.
`python -m benchmarks.goose_wire pages --url URL` is the pages' own process (Chromium
driven by Playwright): the peer keeps serving its heartbeats while they open, instead of
waiting inside Playwright's calls.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from goosectl.controller.goose.effects import FrameClassified
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.shell.goose_live import LiveGoose
from goosectl.lab import sched_stats
from goosectl.lab.wire_floor import probe_frame


def classify(iface: str) -> int:
    hub = GooseHub()
    live = LiveGoose(hub, iface, promiscuous=True)
    sock = live.socks["A"]

    def on_frame(number, ts, frame, vlan, out) -> None:
        for e in out:
            if type(e) is FrameClassified:
                sock.send(probe_frame(e.sq_num))

    print("ready", flush=True)
    live.run(on_frame=on_frame)
    return 0


# -- side loads ---------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")
#: the peer serves its heartbeats this long after a side load started or stopped, before
#: the block's trips: every stream the controller subscribes is live and settled again
SETTLE_S = 2.0


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of `pid` (None: gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = raw.rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / _TICK  # utime, stime (fields 14, 15)


def _wait_s(pid: int) -> float:
    """Seconds `pid`'s threads (those alive now) waited on a run queue, runnable but not
    running (`lab/sched_stats.py`)."""
    return sum(t.wait_ns for t in sched_stats.threads(pid).values()) / 1e9


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def descendants(root: int) -> list[int]:
    """`root` and every process below it, now."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


@dataclass
class Use:
    """What a group of processes took over the blocks measured: CPU seconds, seconds its
    threads waited for a CPU (runnable, not running), and the wall time."""

    cpu_s: float = 0.0
    wait_s: float = 0.0
    wall_s: float = 0.0

    @property
    def cores(self) -> float:
        """CPU taken, in cores (1.0: one core busy the whole time)."""
        return self.cpu_s / self.wall_s if self.wall_s else 0.0

    def add(self, other: Use) -> None:
        self.cpu_s += other.cpu_s
        self.wait_s += other.wait_s
        self.wall_s += other.wall_s

    def text(self) -> str:
        return f"{self.cores:.2f} cores ({self.cpu_s:.1f} s CPU, {self.wait_s:.1f} s waiting)"


class ProcCpu:
    """CPU time and run-queue wait of named groups of processes over a block (`start`,
    `stop`): a process alive at both ends counts its difference, one that appeared counts
    what it took since it started (one that exited within the block is not seen)."""

    def __init__(self, groups: dict[str, Callable[[], Iterable[int]]]) -> None:
        self.groups = groups
        self._at: dict[str, dict[int, tuple[float, float]]] = {}
        self._t = 0.0

    @staticmethod
    def _read(pids: Iterable[int]) -> dict[int, tuple[float, float]]:
        out = {}
        for pid in pids:
            cpu = _cpu_s(pid)
            if cpu is not None:
                out[pid] = (cpu, _wait_s(pid))
        return out

    def start(self) -> None:
        self._at = {name: self._read(pids()) for name, pids in self.groups.items()}
        self._t = time.monotonic()

    def stop(self) -> dict[str, Use]:
        wall = time.monotonic() - self._t
        block = {}
        for name, pids in self.groups.items():
            before = self._at.get(name, {})
            use = Use(wall_s=wall)
            for pid, (cpu, wait) in self._read(pids()).items():
                c0, w0 = before.get(pid, (0.0, 0.0))
                use.cpu_s += max(0.0, cpu - c0)
                use.wait_s += max(0.0, wait - w0)
            block[name] = use
        return block


def device_fifo(trip: Any) -> None:
    """The lab's breaker simulator SCHED_FIFO at the peer's priority: it stands for the
    breaker's own controller on its own hardware, as the peer stands for the protection
    IED (`lab.wire_latency.peer_fifo`). Left SCHED_OTHER beside five Chromiums on two
    cores, it answered the device link late enough (4 x 50 ms) that the controller
    declared the link down and, rightly, refused the lab's next close."""
    from goosectl.lab.wire_latency import PEER_FIFO_PRIORITY

    os.sched_setscheduler(trip.procs[0].pid, os.SCHED_FIFO, os.sched_param(PEER_FIFO_PRIORITY))


class SideLoad(Protocol):
    """What runs beside the controller in the B blocks. `start(serve)` calls `serve(s)`
    (the peer's heartbeats) whenever it waits; `stop()` returns what went wrong (empty:
    nothing)."""

    def start(self, serve: Callable[[float], None]) -> None: ...

    def stop(self) -> list[str]: ...


class LineProc:
    """A process whose stdout lines are read by a thread, so the peer can serve its
    heartbeats while waiting for one."""

    def __init__(self, argv: list[str], **kw: Any) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, **kw,
        )  # fmt: skip
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.err: list[str] = []
        out, err = self.proc.stdout, self.proc.stderr
        threading.Thread(target=self._pump, args=(out, self.lines), daemon=True).start()
        threading.Thread(target=self._keep, args=(err,), daemon=True).start()

    @staticmethod
    def _pump(stream: Any, into: queue.SimpleQueue[str | None]) -> None:
        for line in stream:
            into.put(line.rstrip("\n"))
        into.put(None)

    def _keep(self, stream: Any) -> None:
        for line in stream:
            self.err.append(line.rstrip("\n"))

    def wait_line(
        self, want: Callable[[str], bool], serve: Callable[[float], None], timeout_s: float
    ) -> str:
        """The first line `want` takes, serving heartbeats meanwhile; RuntimeError with
        the process's stderr if it ends or times out first."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                serve(0.05)
                continue
            if line is None:
                break
            if want(line):
                return line
        self.kill()
        why = " | ".join(self.err[-5:])
        raise RuntimeError(f"no awaited line from {self.proc.args[-6:]}: {why}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


@dataclass
class Interleaved:
    """Trips (ns) without and with the side load, each block's CPU use per group, why a
    block stopped early (empty: none did), and what the side load said went wrong
    (`SideLoad.stop`: reported, the trips go on)."""

    without: list[int] = field(default_factory=list)
    with_load: list[int] = field(default_factory=list)
    blocks: list[tuple[str, int, dict[str, Use]]] = field(default_factory=list)
    stalled: str = ""
    notes: list[str] = field(default_factory=list)

    def usage(self, side: str) -> str:
        """Each group's CPU over the blocks of one side ("A" or "B"), as words."""
        total: dict[str, Use] = {}
        for name, _, use in self.blocks:
            if name.startswith(side):
                for group, u in use.items():
                    total.setdefault(group, Use()).add(u)
        return "; ".join(f"{g} {u.text()}" for g, u in total.items())


def interleave(
    trip: Any,
    n: int,
    blocks: int,
    side: SideLoad,
    meter: ProcCpu,
    meter_load: ProcCpu,
    diagnose: Callable[[], str] = lambda: "",
) -> Interleaved:
    """`n` trips each way in `blocks` A/B pairs (A: without the side load, B: with it),
    so the host's noise falls on both. `meter` measures each block, `meter_load` only the
    B blocks. A trip the controller did not answer ends the run with `diagnose()`'s words
    (what the controller says about itself) in `stalled`."""
    from goosectl.lab.wire_latency import peer_fifo

    out = Interleaved()
    per = -(-n // blocks)
    for i in range(blocks):
        for label in ("A", "B"):
            if label == "B":
                side.start(trip.serve)
            trip.serve(SETTLE_S)
            got = out.without if label == "A" else out.with_load
            meter.start()
            if label == "B":
                meter_load.start()
            taken = 0
            try:
                with peer_fifo():
                    for _ in range(per):
                        got.append(trip.sample())
                        taken += 1
            except TimeoutError as exc:
                out.stalled = (
                    f"{exc} in block {label}{i + 1} after {taken} of its {per} trips "
                    f"({len(out.without)} without, {len(out.with_load)} with): {diagnose()}"
                )
            use = meter.stop()
            if label == "B":
                use.update(meter_load.stop())
                out.notes += [f"B{i + 1}: {p}" for p in side.stop()]
            out.blocks.append((f"{label}{i + 1}", taken, use))
            if out.stalled:
                return out
    return out


def judge_side_load(
    benchmark: Any,
    run: Interleaved,
    *,
    kind: str,
    load: str,
    key: str,
    group: str,
    blocks: int,
    within: float,
    cpu_of: str,
    more: str = "",
) -> None:
    """The verdict of one interleaved side-load run: both sides' percentiles recorded, the
    ratio of the side-loaded B blocks to the A blocks asserted within `within` (an XFAIL
    with the numbers when not, or when the controller stalled). `load` names the side load
    ("5 pages open"), `cpu_of` what the notes measured ("the pages"), `more` extra facts."""
    from benchmarks.percentiles import check_budget, summarise

    cpu = f"CPU, without: {run.usage('A')}; with: {run.usage('B')}"
    if run.notes:
        cpu += f"; {cpu_of}: {'; '.join(run.notes)}"
    facts = "; ".join(f for f in (more, cpu) if f)
    benchmark.extra_info.update({"blocks": [(b, k) for b, k, _ in run.blocks], "cpu": cpu})
    benchmark.pedantic(lambda: None, rounds=1)
    if run.stalled:
        a = summarise(f"wire trip, {kind}, none", group, run.without or [0])
        check_budget(
            False,
            f"{kind}, {load}: {run.stalled}; without: p50 {a.p50:.0f} us, p99 {a.p99:.0f} us "
            f"(n {a.n}); {facts}",
        )
    a = summarise(f"wire trip, {kind}, none", group, run.without)
    b = summarise(f"wire trip, {kind}, {load}", group, run.with_load)
    b.baseline, b.ratios = a.name, {"p50": b.p50 / a.p50, "p99": b.p99 / a.p99}
    benchmark.extra_info.update({"without": a.as_dict(), key: b.as_dict()})
    numbers = (
        f"{kind}, {load}: p50 {b.p50:.0f} us, p99 {b.p99:.0f} us; none: p50 {a.p50:.0f} us, "
        f"p99 {a.p99:.0f} us (n {a.n} / {b.n}, {blocks} A/B pairs); ratios p50 "
        f"{b.p50 / a.p50:.2f}, p99 {b.p99 / a.p99:.2f}; {facts}"
    )
    print(numbers)
    check_budget(
        b.p50 <= a.p50 * (1 + within) and b.p99 <= a.p99 * (1 + within),
        f"within {within:.0%} of the run without it: {numbers}",
    )


def controller_words(trip: Any) -> str:
    """What a controller that did not answer says about itself: its device link, breaker,
    inputs and the last refusals (its journal's `bay` checkpoint), for the report."""
    from goosectl.controller.shell.control import request

    words = []
    try:
        st = request(trip.tmp / "control.sock", {"op": "controller"}, 3.0)
        words.append(
            f"link {st.get('link')}, breaker {st.get('breaker')}, position "
            f"{st.get('position')}, interlocks {st.get('interlocks')}"
        )
    except Exception as exc:  # the report of a failure: whatever it is, say it
        words.append(f"status: {exc}")
    with contextlib.suppress(Exception):
        import sqlite3

        db = sqlite3.connect(f"file:{trip.tmp / 'state' / 'bay.sqlite'}?mode=ro", uri=True)
        row = db.execute("SELECT snapshot FROM checkpoint WHERE machine = 'bay'").fetchone()
        db.close()
        if row:
            refused = json.loads(row[0])["context"].get("refused", [])[-3:]
            words.append(f"last close refusals: {refused}")
    return "; ".join(words)


# -- five pages, in their own process -----------------------------------------------------


def pages(url: str, count: int) -> int:
    """`count` Chromium pages on `url` (separate contexts, as separate browsers); prints
    `ready` once every page says connected, then waits for stdin to close and prints each
    page's connection word (JSON) before it exits."""
    from playwright.sync_api import sync_playwright

    from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            opened = [browser.new_context().new_page() for _ in range(count)]
            for page in opened:
                page.goto(url)
                page.wait_for_selector("#conn:text('connected')", timeout=60_000)
            print("ready", flush=True)
            sys.stdin.read()
            words = [page.locator("#conn").text_content() for page in opened]
            print(json.dumps({"connected": words}), flush=True)
        finally:
            browser.close()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.goose_wire")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("classify")
    c.add_argument("--iface", required=True)
    pg = sub.add_parser("pages")
    pg.add_argument("--url", required=True)
    pg.add_argument("--count", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        if args.command == "pages":
            return pages(args.url, args.count)
        return classify(args.iface)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
