"""The controller's serial driver: `LinkCore` on a pyserial port (tty, pty, socket://,
loop:// in unit tests), fed with bytes and time, executing the core's effects.

    link = SerialLink("/dev/ttyUSB0", LinkConfig(), on_event=handle)
    link.open()
    seq = link.send_command("trip")
    link.run_until(lambda: done, timeout_s=2)        # real time, selectors
    # or, in virtual time (replay, tests): link.poll(now_ns) whenever you like

The shell owns the port and nothing else: reconnecting is decided by the link table
(`down` asks for a reopen every reconnect_ms), read errors and EOF become `closed`.
`fileno()` lets a bigger selectors loop (the bay controller's) wait on this port too.
"""

from __future__ import annotations

import contextlib
import selectors
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import serial

from controller.link import LinkConfig, LinkCore, LinkEvent
from protocols.serial.port import PortError, open_serial

PORT_ERRORS = (serial.SerialException, OSError)


class SerialLink:
    def __init__(
        self,
        url: str,
        config: LinkConfig | None = None,
        *,
        clock: Callable[[], int] = time.monotonic_ns,
        on_event: Callable[[LinkEvent], None] | None = None,
        baudrate: int = 115_200,
        now_ns: int | None = None,
        core: Any = None,
    ) -> None:
        """`core` is the sans-IO endpoint the port feeds: a `LinkCore` by default, or
        anything with its shape (the bay controller, which wraps one)."""
        self.url = url
        self.clock = clock
        self.baudrate = baudrate
        self.on_event = on_event
        self.events: deque[LinkEvent] = deque()  # filled when there is no on_event
        self.core = core or LinkCore(config, clock() if now_ns is None else now_ns)
        self.port: serial.SerialBase | None = None
        self.bytes_in = 0
        self.bytes_out = 0
        self.open_errors: list[str] = []

    # ------------------------------------------------------------------ port

    def open(self, now_ns: int | None = None) -> bool:
        """Try to open the port; on failure the link stays down and retries by itself."""
        now = self._now(now_ns)
        self._close_port()
        try:
            self.port = open_serial(self.url, baudrate=self.baudrate, timeout=0)
        except PortError as exc:
            self.open_errors.append(str(exc))
            self.core.reopen_wanted = False
            return False
        self.core.opened(now)
        self._flush(now)
        return True

    def close(self) -> None:
        self._close_port()

    def _close_port(self) -> None:
        if self.port is not None:
            with contextlib.suppress(PORT_ERRORS):
                self.port.close()
            self.port = None

    def fileno(self) -> int | None:
        if self.port is None:
            return None
        try:
            return self.port.fileno()
        except (AttributeError, *PORT_ERRORS):
            return None

    def _lost(self, now: int) -> None:
        self._close_port()
        self.core.closed(now)

    # ------------------------------------------------------------------ the round

    def poll(self, now_ns: int | None = None) -> int:
        """Read what arrived, run due timers, write what the core produced, deliver
        outcomes. Non-blocking. Returns the number of bytes read."""
        now = self._now(now_ns)
        n = 0
        if self.port is not None:
            try:
                data = self.port.read(4096)
            except PORT_ERRORS:
                self._lost(now)
                data = b""
            if data:
                n = len(data)
                self.bytes_in += n
                self.core.receive(data, now)
        self.core.advance(now)
        if self.core.reopen_wanted:
            self.open(now)
        self._flush(now)
        return n

    def write_pending(self, now_ns: int | None = None) -> None:
        """Write what the core has for the port now, before anything else (a TRIP)."""
        self._flush(self._now(now_ns))

    def _flush(self, now: int) -> None:
        out = self.core.take_output()
        if out and self.port is not None:
            try:
                self.port.write(out)
                self.bytes_out += len(out)
            except PORT_ERRORS:
                self._lost(now)
        for ev in self.core.take_events():
            if self.on_event is not None:
                self.on_event(ev)
            else:
                self.events.append(ev)

    # ------------------------------------------------------------------ API for the logic

    def send_command(self, command: str, now_ns: int | None = None, **fields: Any) -> int:
        now = self._now(now_ns)
        seq = self.core.send_command(command, now, **fields)
        self._flush(now)
        return seq

    def configure(self, param: int, value: int, now_ns: int | None = None) -> int:
        now = self._now(now_ns)
        seq = self.core.configure(param, value, now)
        self._flush(now)
        return seq

    @property
    def state(self) -> str:
        return self.core.state

    @property
    def view(self) -> dict[str, Any]:
        return self.core.view

    def next_deadline(self) -> int | None:
        return self.core.next_deadline()

    def _now(self, now_ns: int | None) -> int:
        return self.clock() if now_ns is None else now_ns

    # ------------------------------------------------------------------ real-time loop

    def run_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Serve in real time until `predicate()` holds (True) or `timeout_s` passes."""
        end = self.clock() + int(timeout_s * 1e9)
        sel = selectors.DefaultSelector()
        try:
            while True:
                self.poll()
                if predicate():
                    return True
                now = self.clock()
                if now >= end:
                    return False
                wait = (end - now) / 1e9
                deadline = self.next_deadline()
                if deadline is not None:
                    wait = min(wait, max(0.0, (deadline - now) / 1e9))
                fd = self.fileno()
                if fd is None:
                    time.sleep(min(wait, 0.01))
                    continue
                sel.register(fd, selectors.EVENT_READ)
                try:
                    sel.select(min(wait, 0.05))
                finally:
                    sel.unregister(fd)
        finally:
            sel.close()
