"""Replay frames through the bay controller, with the device simulator on the same clock.

The controller and the firmware are two sans-IO endpoints on one virtual clock
(`controller.replay.virtual_wire`): connected in memory (`VirtualWire`) or through a real pty
(`VirtualPortPair`); either way a 5 s spring charge costs no wall time and the run is
reproducible. Frames enter at their capture time; timers of both sides fire in order
between them; every frame the controller emits is written to the output pcap at the
virtual time it was sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from goosectl.controller.logic.core import BayController
from goosectl.controller.logic.effects import DeviceCommand
from goosectl.controller.replay.virtual_wire import Endpoint, VirtualWire
from goosectl.protocols.ethernet.pcap import PcapWriter

Report = Callable[[int, Any], None]
Action = Callable[[int], object]  # called with the virtual time; what it returns is ignored


class Device(Endpoint, Protocol):
    """The device a bay replay drives (the simulator's firmware, in the demo): an endpoint
    of the virtual wire that also takes faults. Named here, not imported, so replay never
    depends on `firmware_sim`."""

    def inject(self, what: str, value: Any, now_ns: int) -> None: ...


class BayReplay:
    def __init__(
        self,
        bay: BayController,
        firmware: Device,
        out_pcap=None,
        on_report: Report | None = None,
        wire=None,
        endpoint: Any = None,
    ) -> None:
        """`endpoint` is what the serial side talks to: the bay, or the bay with the agent
        (`AgentBay`); a given `wire` must connect that endpoint to the firmware."""
        self.bay = bay
        self.endpoint = endpoint or bay
        self.fw = firmware
        self.writer = PcapWriter(out_pcap) if out_pcap else None
        self.on_report = on_report
        self.sent = 0
        self.frames_in = 0
        #: wall time of each `bay.frame` call, and of those that sent a device command
        self.frame_ns: list[int] = []
        self.actuating_ns: list[int] = []
        #: CPU time of this thread in each `bay.frame` call: the work itself, without the
        #: time the process waited for a CPU (which a busy machine adds to `frame_ns`)
        self.frame_cpu_ns: list[int] = []
        #: called after every exchange on the wire (the demo's operator answers here)
        self.after_step: Callable[[int], None] | None = None
        #: called with the time of the next frame or action before it is played: returns
        #: when that time has come (`demo --web` plays at the wall clock's pace)
        self.pace: Callable[[int], None] | None = None
        self.wire = wire or VirtualWire(self.endpoint, firmware, start_ns=0, on_step=self._drain)
        if wire is not None:
            wire.on_step = self._drain

    def _drain(self, now_ns: int) -> None:
        for f in self.bay.take_frames():
            self.sent += 1
            if self.writer is not None:
                self.writer.write(f.data, now_ns)
        if self.on_report is not None:
            for r in self.bay.take_reports():
                self.on_report(now_ns, r)
        if self.after_step is not None:
            self.after_step(now_ns)

    def inject(self, faults: Iterable[tuple[int, str, Any]]) -> list[tuple[int, Action]]:
        """Device faults (time, what, value) as actions for `run`."""

        def fault(what: str, value: Any) -> Action:
            return lambda now: self.fw.inject(what, value, now)

        return [(t, fault(what, value)) for t, what, value in faults]

    def run(
        self,
        frames: Iterable[tuple[int, bytes]],
        actions: Iterable[tuple[int, Action]] = (),
        end_ns: int | None = None,
    ) -> None:
        """Frames at their times; `actions` (time, fn(now)) at theirs: device faults,
        operator requests to the agent, anything the scenario does besides frames."""
        pending = sorted(actions, key=lambda a: a[0])
        started = False
        wire = self.wire
        for ts, data in frames:
            if not started:
                wire.now_ns = ts
                self.bay.start(ts)
                self.endpoint.opened(ts)
                started = True
            while pending and pending[0][0] <= ts:
                t, act = pending.pop(0)
                if self.pace is not None:
                    self.pace(t)
                wire.run_until(t)
                act(t)
            if self.pace is not None:
                self.pace(ts)
            wire.run_until(ts)
            before = len(self.bay.reports)
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            self.bay.frame(data, "A", ts)
            dt = time.perf_counter_ns() - t0
            self.frame_cpu_ns.append(time.thread_time_ns() - c0)
            self.frame_ns.append(dt)
            if any(type(r) is DeviceCommand for r in self.bay.reports[before:]):
                self.actuating_ns.append(dt)
            self.frames_in += 1
            wire.run_until(ts)  # bytes the frame caused cross now, at the same instant
        for t, act in pending:
            if self.pace is not None:
                self.pace(t)
            wire.run_until(t)
            act(t)
        if end_ns is not None:
            if self.pace is not None:
                self.pace(end_ns)
            wire.run_until(end_ns)
        self._drain(wire.now_ns)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        journal = self.bay.scheduler.journal
        if journal is not None:
            journal.flush()
