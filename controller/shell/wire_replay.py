"""A capture put back on a wire: pacing, the sockets, progress (`goosectl replay --iface`).

The pure part (what each frame becomes: source MAC, ``t``, stNum/sqNum) is
`controller.replay.wire_rewrite`, handed in by the command; this module owns the clocks
and sockets. Pacing is by the monotonic clock: frame i is due at start + (ts_i - ts_0) /
speed (``speed`` None: top speed; ``pps``: one frame every 1/pps s), slept for, never
spun (the host's cores are shared with the controller under test). A frame the kernel
refuses for a full queue is retried after a short sleep (counted); a link that goes down
is counted and the frame skipped, so a replay never stops on one send.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from goosectl.protocols.ethernet.pcap import read_capture
from goosectl.protocols.ethernet.rawsock import (
    LinkDownError,
    RawSocket,
    RawSocketError,
    TxQueueFullError,
)
from goosectl.protocols.goose import GooseError, is_goose, parse_header

#: a full transmit queue is tried again after this long
TX_RETRY_S = 0.0005
#: how often progress is reported
PROGRESS_S = 1.0
#: waits shorter than this are not slept (the sleep would overshoot more than it waits)
MIN_SLEEP_S = 0.0002


class Rewriter(Protocol):
    """What each frame becomes (`controller.replay.wire_rewrite.WireRewrite`, given by the
    command: the shell does not import the replay package)."""

    time_shift_ns: int | None

    def new_loop(self) -> None: ...

    def apply(self, data: bytes) -> bytes: ...


class Verbatim:
    """No rewrite: every frame as captured."""

    time_shift_ns: int | None = None

    def new_loop(self) -> None:
        pass

    def apply(self, data: bytes) -> bytes:
        return data


class Progress(NamedTuple):
    """Frames sent so far, of how many (None: looping forever), rate, seconds left."""

    sent: int
    total: int | None
    rate_fps: float
    left_s: float | None


@dataclass
class WireReplaySpec:
    path: Path
    ifaces: dict[str, str]
    speed: float | None = 1.0
    pps: float | None = None
    loops: int = 1
    rewrite: Rewriter = field(default_factory=Verbatim)
    #: called with the frame and the side it goes on, returns the bytes for that side
    #: (PRP puts a trailer per LAN there) or None (not sent there); None: the same bytes
    #: on every side
    per_side: Callable[[bytes, str], bytes | None] | None = None
    #: `rewrite_time_now`: every loop's first GOOSE frame carries the time it is sent
    rewrite_time_now: bool = False


@dataclass
class WireReplayStats:
    sent: int = 0
    frames: int = 0
    loops: int = 0
    tx_retries: int = 0
    link_down: int = 0
    send_errors: int = 0
    last_error: str | None = None
    per_side: dict[str, int] = field(default_factory=dict)


def first_goose_t_ns(path: Path) -> int | None:
    """``t`` of the capture's first GOOSE frame (what ``--rewrite-time now`` moves to now)."""
    for f in read_capture(path):
        if is_goose(f.data):
            try:
                return parse_header(f.data).t.to_ns()
            except GooseError:
                continue
    return None


def listen_for_streams(
    socks: dict[str, RawSocket], wait_s: float, wanted: set[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    """The last (stNum, sqNum) heard per stream (gocbRef, APPID) within ``wait_s``,
    returning early once every ``wanted`` stream was heard: what `--continue-stnum`
    continues from."""
    heard: dict[tuple[str, int], tuple[int, int]] = {}
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        got = False
        for sock in socks.values():
            for rx in sock.recv_batch(256):
                got = True
                try:
                    h = parse_header(rx.frame)
                except GooseError:
                    continue
                heard[(h.gocb_ref, h.appid)] = (h.st_num, h.sq_num)
        if wanted and wanted <= heard.keys():
            break
        if not got:
            time.sleep(0.005)
    return heard


def capture_streams(path: Path) -> set[tuple[str, int]]:
    """The streams (gocbRef, APPID) a capture holds."""
    out = set()
    for f in read_capture(path):
        if is_goose(f.data):
            with contextlib.suppress(GooseError):
                h = parse_header(f.data)
                out.add((h.gocb_ref, h.appid))
    return out


def capture_times(path: Path) -> tuple[int, int]:
    """(frames, span in ns from first to last timestamp) of a capture."""
    n, first, last = 0, None, 0
    for f in read_capture(path):
        n += 1
        first = f.ts_ns if first is None else first
        last = f.ts_ns
    return n, (last - first) if first is not None else 0


class WireReplay:
    """Sends the capture on each side's socket, paced; `run` returns the counters."""

    def __init__(
        self,
        spec: WireReplaySpec,
        socks: dict[str, RawSocket],
        on_progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.spec = spec
        self.socks = socks
        self.on_progress = on_progress
        self.stats = WireReplayStats(per_side={s: 0 for s in socks})
        self.stopped = False
        self.elapsed_s = 0.0
        self._first_t = first_goose_t_ns(spec.path) if spec.rewrite_time_now else None
        self._count, self._span_ns = capture_times(spec.path)

    def stop(self) -> None:
        self.stopped = True

    def _frames(self) -> Iterator[tuple[int, bytes]]:
        """(offset in ns from the loop's start, bytes) of one pass over the capture."""
        first = None
        for i, f in enumerate(read_capture(self.spec.path)):
            if self.spec.pps:
                yield int(i * 1e9 / self.spec.pps), f.data
                continue
            first = f.ts_ns if first is None else first
            yield max(0, f.ts_ns - first), f.data

    def _total(self) -> int | None:
        return None if self.spec.loops == 0 else self._count * self.spec.loops

    def run(self) -> WireReplayStats:
        spec, stats, rewrite = self.spec, self.stats, self.spec.rewrite
        t_start = time.monotonic()
        next_report = t_start + PROGRESS_S
        loop = 0
        while not self.stopped and (spec.loops == 0 or loop < spec.loops):
            rewrite.new_loop()
            if self._first_t is not None:
                rewrite.time_shift_ns = time.time_ns() - self._first_t
            loop_start = time.monotonic()
            for offset_ns, data in self._frames():
                if self.stopped:
                    break
                if spec.pps or spec.speed:
                    scale = 1.0 if spec.pps else 1.0 / (spec.speed or 1.0)
                    wait = loop_start + offset_ns * scale / 1e9 - time.monotonic()
                    if wait > MIN_SLEEP_S:
                        time.sleep(wait)
                out = rewrite.apply(data)
                stats.frames += 1
                for side, sock in self.socks.items():
                    frame = spec.per_side(out, side) if spec.per_side else out
                    if frame is not None and self._send(sock, frame):
                        stats.sent += 1
                        stats.per_side[side] += 1
                now = time.monotonic()
                if self.on_progress is not None and now >= next_report:
                    next_report = now + PROGRESS_S
                    self.on_progress(self.progress(now - t_start))
            loop += 1
            stats.loops = loop
        self.elapsed_s = time.monotonic() - t_start
        return stats

    def progress(self, elapsed_s: float) -> Progress:
        rate = self.stats.frames / elapsed_s if elapsed_s > 0 else 0.0
        total = self._total()
        left = None
        if total is not None and rate > 0:
            left = (total - self.stats.frames) / rate
        return Progress(self.stats.frames, total, rate, left)

    def _send(self, sock: RawSocket, frame: bytes) -> bool:
        stats = self.stats
        while True:
            try:
                sock.send(frame)
                return True
            except TxQueueFullError:
                stats.tx_retries += 1
                time.sleep(TX_RETRY_S)
            except LinkDownError as exc:
                stats.link_down += 1
                stats.last_error = str(exc)
                return False
            except (RawSocketError, OSError) as exc:
                stats.send_errors += 1
                stats.last_error = str(exc)
                return False
