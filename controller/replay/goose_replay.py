"""Replay a capture through the GOOSE hub on the virtual clock.

The capture's timestamps are the clock: before each frame every timer due by then fires
at its own deadline, so TAL expiries and retransmissions land between frames exactly as
they would have live. A jump of the capture's clock (back, or forward past a gap limit)
is reported and not replayed (`capture_clock`), so no timer catches up on it. Frames
the publishers emit go to an output pcap with their virtual timestamps. Same capture +
same config = same journal and same output pcap, byte for byte. `speed` paces the replay
against the wall clock (1.0 = as captured); None = top speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.goose.rgoose import RgooseReceiver, feed, spdu_datagram
from goosectl.controller.replay.capture_clock import CaptureClock
from goosectl.protocols.ethernet.pcap import PcapWriter, read_capture
from goosectl.protocols.goose import is_goose

LINKTYPE_ETHERNET = 1
#: Replay time between two loops over one capture.
LOOP_GAP_NS = 1_000_000_000


def capture_frames(
    path: str | Path, loops: int = 1, clock: CaptureClock | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """(number, replay ts_ns, bytes) of the GOOSE frames, streamed from the file (never
    all in memory); loop k starts one second after loop k-1 ends (the file is read again).

    Every Ethernet frame's capture time goes through `clock` (a default one if None), so a
    jump of the capture's clock is reported there and never replayed (`CaptureClock`);
    it raises `CaptureTimeError` if replay time would pass 2106."""
    clock = clock or CaptureClock()
    for k in range(loops):
        if k:
            clock.pause(LOOP_GAP_NS)
        for f in read_capture(path):
            if f.linktype != LINKTYPE_ETHERNET:
                continue
            ts = clock.place(f.number, f.ts_ns)
            if is_goose(f.data) or spdu_datagram(f.data) is not None:  # R-GOOSE: UDP 102
                yield f.number, ts, f.data


class Replay:
    def __init__(
        self,
        hub: GooseHub,
        out_pcap: str | Path | None = None,
        speed: float | None = None,
        on_frame: Callable[[int, int, bytes, list[Any]], None] | None = None,
        on_effects: Callable[[list[Any]], None] | None = None,
        rgoose: RgooseReceiver | None = None,
    ) -> None:
        self.hub = hub
        #: the SPDUs of R-GOOSE frames go through it to the hub (`controller/goose/rgoose.py`)
        self.rgoose = rgoose or RgooseReceiver(None)
        self.writer = PcapWriter(out_pcap) if out_pcap else None
        self.speed = speed
        self.on_frame = on_frame
        self.on_effects = on_effects
        self.frames = 0
        self.sent = 0
        #: the virtual time of what the callbacks are told about (a frame's, a timer's)
        self.now_ns = 0

    def _emit(self, effects: list[Any], ts_ns: int) -> None:
        for e in effects:
            if type(e) is SendFrame:
                self.sent += 1
                if self.writer is not None:
                    self.writer.write(e.data, ts_ns)

    def _advance(self, now_ns: int) -> None:
        """Fire timers one deadline at a time so each emitted frame gets its own time."""
        hub = self.hub
        while True:
            d = hub.next_deadline()
            if d is None or d > now_ns:
                return
            out = hub.advance(d)
            self.now_ns = d
            self._emit(out, d)
            if self.on_effects is not None:
                self.on_effects(out)

    def run(self, frames: Iterator[tuple[int, int, bytes]], until_ns: int | None = None) -> None:
        wall0: int | None = None
        virt0 = 0
        started = False
        last = 0
        for number, ts, data in frames:
            if not started:
                out = self.hub.start(ts, ts)
                self._emit(out, ts)
                started = True
            if self.speed is not None:
                if wall0 is None:
                    wall0, virt0 = time.monotonic_ns(), ts
                due = wall0 + (ts - virt0) / self.speed
                delay = due - time.monotonic_ns()
                if delay > 0:
                    time.sleep(delay / 1e9)
            self._advance(ts)
            self.now_ns = ts
            if is_goose(data):
                judged = [(data, self.hub.frame(data, "A", ts))]
            else:  # R-GOOSE: each goosePdu of the SPDU, as the frame a subscriber reads
                d = spdu_datagram(data)
                assert d is not None
                got = feed(self.hub, self.rgoose, d.payload, d.src, ts, ts)
                judged = [(r.frame, out) for r, out in got]
            for frame, out in judged:
                self.frames += 1
                self._emit(out, ts)
                if self.on_frame is not None:
                    self.on_frame(number, ts, frame, out)
            last = ts
            journal = self.hub.scheduler.journal
            if journal is not None:
                journal.maybe_flush(ts)
        if until_ns is not None and until_ns > last:
            self._advance(until_ns)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        journal = self.hub.scheduler.journal
        if journal is not None:
            journal.flush()
