"""The imperative shell around `Firmware`: a UART transport, a clock and the faults.

`poll(now_ns)` is one non-blocking round (read, faults, firmware, faults, write) and can
be driven by any clock: `run()` uses the monotonic clock and a selectors loop; tests and
`goosectl demo` call `poll` with virtual time. Line faults are a `FaultyChannel` on each
direction; the board-level faults are counted in valid frames the board received:
`stall_after` (stop answering), `disconnect_after` (pull the cable once),
`reset_after` (watchdog reboot once). `stuck` jams the mechanism from the start.
"""

from __future__ import annotations

import selectors
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from goosectl.firmware_sim.core import Firmware
from goosectl.firmware_sim.faults import FaultConfig, FaultyChannel
from goosectl.protocols.serial import messages as m


@dataclass(frozen=True)
class ShellFaults:
    line: FaultConfig = field(default_factory=FaultConfig)
    seed: int = 0
    stuck: bool = False
    stall_after: int | None = None
    disconnect_after: int | None = None
    reset_after: int | None = None


class DeviceShell:
    def __init__(
        self,
        transport,
        firmware: Firmware | None = None,
        faults: ShellFaults | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.transport = transport
        self.clock = clock
        self.faults = faults or ShellFaults()
        # the firmware's clock must be this shell's clock: timers are absolute times
        self.fw = firmware or Firmware(now_ns=clock())
        f = self.faults
        self.rx = FaultyChannel(f.line, seed=f.seed)
        self.tx = FaultyChannel(f.line, seed=f.seed + 1)
        self.bytes_in = 0
        self.bytes_out = 0
        self.stalled = False
        self.disconnects = 0
        self.resets = 0
        self.log: list[str] = []
        if f.stuck:
            self.fw.inject("stuck", True, clock())

    def fileno(self) -> int:
        return self.transport.fileno()

    def next_deadline(self) -> int | None:
        times = [
            t
            for t in (self.fw.next_deadline(), self.rx.next_due(), self.tx.next_due())
            if t is not None
        ]
        return min(times) if times else None

    def poll(self, now_ns: int | None = None) -> int:
        """One round; returns the number of bytes read from the transport."""
        now = self.clock() if now_ns is None else now_ns
        data = self.transport.read()
        if data:
            self.bytes_in += len(data)
            self.rx.put(data, now)
        for chunk in self.rx.take_chunks(now):
            if not self.stalled:
                self.fw.receive(chunk, now)
                self._board_faults(now)
        self.fw.advance(now)
        out = self.fw.take_output()
        if out and not self.stalled:
            self.tx.put(out, now)
        for chunk in self.tx.take_chunks(now):
            self.transport.write(chunk)
            self.bytes_out += len(chunk)
        return len(data)

    def _board_faults(self, now: int) -> None:
        f, n = self.faults, self.fw.decoder.messages
        if f.stall_after is not None and n >= f.stall_after and not self.stalled:
            self.stalled = True
            self.log.append(f"stalled after {n} frames")
        if f.reset_after is not None and n >= f.reset_after and not self.resets:
            self.resets += 1
            self.fw.boot(now, m.ResetCause.WATCHDOG)
            self.log.append(f"watchdog reset after {n} frames")
        if f.disconnect_after is not None and n >= f.disconnect_after and not self.disconnects:
            self.disconnects += 1
            self.rx.clear()
            self.tx.clear()
            self.fw.take_output()
            self.transport.disconnect()
            self.log.append(f"disconnected after {n} frames")

    def run(self, stop: threading.Event | None = None, until_ns: int | None = None) -> None:
        """Serve in real time until `stop` is set or the clock passes `until_ns`."""
        stop = stop or threading.Event()
        sel = selectors.DefaultSelector()
        fd = self.fileno()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while not stop.is_set():
                now = self.clock()
                if until_ns is not None and now >= until_ns:
                    return
                self.poll(now)
                if self.fileno() != fd:  # a disconnect replaced the descriptor
                    sel.unregister(fd)
                    fd = self.fileno()
                    sel.register(fd, selectors.EVENT_READ)
                deadline = self.next_deadline()
                wait = 0.05
                if deadline is not None:
                    wait = min(wait, max(0.0, (deadline - self.clock()) / 1e9))
                sel.select(wait)
        finally:
            sel.close()
