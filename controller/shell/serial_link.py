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
import io
import os
import selectors
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import serial

from goosectl.controller.config.link import LinkConfig
from goosectl.controller.link import LinkCore, LinkEvent
from goosectl.controller.ports import Clock, SerialEndpoint
from goosectl.protocols.serial.port import PortError, open_serial

PORT_ERRORS = (serial.SerialException, OSError)
#: one read's size; a read that fills it is followed by another in the same input
READ_CHUNK = 4096
#: at most this much waiting input is taken as one (a device that floods the port is
#: read on in the next round, after that round's timers)
READ_MAX = 65_536


def write_now(port: serial.SerialBase, data: bytes) -> int:
    """Write what the port takes without waiting; the number of bytes taken.

    Not `port.write` with write_timeout=0: pyserial 3.5 retries EAGAIN in a busy loop
    there, which is the very hang this avoids. A tty or pty fd is non-blocking as pyserial
    opens it; a socket:// port's socket is asked not to wait; loop:// never blocks."""
    sock = getattr(port, "_socket", None)
    try:
        if sock is not None:
            return sock.send(data, socket.MSG_DONTWAIT)
        fd = port.fileno()
    except BlockingIOError:
        return 0
    except (AttributeError, io.UnsupportedOperation):
        n = port.write(data)
        return len(data) if n is None else n
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0


class SerialLink:
    def __init__(
        self,
        url: str,
        config: LinkConfig | None = None,
        *,
        clock: Clock = time.monotonic_ns,
        on_event: Callable[[LinkEvent], None] | None = None,
        baudrate: int = 115_200,
        now_ns: int | None = None,
        core: SerialEndpoint | None = None,
        write_deadline_s: float = 1.0,
        max_unsent: int = 65_536,
        exclusive: bool = True,
    ) -> None:
        """`core` is the sans-IO endpoint the port feeds: a `LinkCore` by default, or
        anything of its shape (`controller.ports.SerialEndpoint`: the bay controller, which
        wraps one). `send_command` and `configure` are a bare `LinkCore`'s own."""
        self.url = url
        self.clock = clock
        self.baudrate = baudrate
        self.on_event = on_event
        self.events: deque[LinkEvent] = deque()  # filled when there is no on_event
        self.core: SerialEndpoint = core or LinkCore(config, clock() if now_ns is None else now_ns)
        self.port: serial.SerialBase | None = None
        self.bytes_in = 0
        self.bytes_out = 0
        self.open_errors: list[str] = []
        #: bytes the port has not taken yet (writes never block the loop)
        self.unsent = bytearray()
        self._stuck_since: int | None = None
        #: a port that takes no byte for this long, or holds more than `max_unsent`, is a
        #: fault: closed, alarmed, reopened by the link table's backoff
        self.write_deadline_ns = int(write_deadline_s * 1e9)
        self.max_unsent = max_unsent
        self.exclusive = exclusive
        #: the time `take_waiting` read the port at, until the round's `poll`
        self._taken_at: int | None = None

    # ------------------------------------------------------------------ port

    def open(self, now_ns: int | None = None) -> bool:
        """Try to open the port; on failure the link stays down and retries by itself."""
        now = self._now(now_ns)
        self._close_port()
        try:
            self.port = open_serial(
                self.url,
                baudrate=self.baudrate,
                timeout=0,
                write_timeout=0,
                exclusive=self.exclusive,
            )
        except PortError as exc:
            self.open_errors.append(exc.strerror or str(exc))
            del self.open_errors[:-10]
            self.core.reopen_wanted = False
            self.core.closed(now, f"port_unavailable: {exc}")
            self._flush(now)
            return False
        self.core.opened(now)
        self._flush(now)
        return True

    def close(self) -> None:
        self._close_port()

    def _close_port(self) -> None:
        self.unsent.clear()
        self._stuck_since = None
        if self.port is not None:
            with contextlib.suppress(*PORT_ERRORS):
                self.port.close()
            self.port = None

    def fileno(self) -> int | None:
        if self.port is None:
            return None
        try:
            return self.port.fileno()
        except (AttributeError, *PORT_ERRORS):
            return None

    def _lost(self, now: int, reason: str | None = None) -> None:
        self._close_port()
        self.core.closed(now, reason)

    # ------------------------------------------------------------------ the round

    def poll(self, now_ns: int | None = None) -> int:
        """Read what arrived, run due timers, write what the core produced, deliver
        outcomes. Non-blocking. Returns the number of bytes read."""
        now = self._now(now_ns)
        # read once a round: bytes that came after `take_waiting`'s read at this time came
        # after this time's timers too, and the next round takes them before its own
        n = 0 if self._taken_at == now else self._read(now)
        self._taken_at = None
        self.core.advance(now)
        if self.core.reopen_wanted:
            self.open(now)
        self._flush(now)
        return n

    def take_waiting(self, now_ns: int | None = None) -> int:
        """Hand the core what waits in the port now, before the loop fires the timers due
        by `now_ns`: a bigger loop calls this as it wakes, ahead of its own `advance`,
        because bytes found waiting may have arrived before a timer that came due while
        the process was not running (docs/decisions/serial-input-before-timers.md).
        Writes what the core answered; returns the number of bytes read."""
        now = self._now(now_ns)
        n = self._read(now)
        self._taken_at = now
        if n:
            self._flush(now)
        return n

    def _read(self, now: int) -> int:
        """Everything waiting in the port (up to `READ_MAX` bytes) as one input: bytes left
        for a later read would be judged after the timers that read fires."""
        if self.port is None:
            return 0
        chunks: list[bytes] = []
        total = 0
        failed = False
        while total < READ_MAX:
            try:
                chunk = self.port.read(READ_CHUNK)
            except PORT_ERRORS:
                failed = True
                break
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if len(chunk) < READ_CHUNK:
                break
        if total:  # what came before the port failed, before its loss
            self.bytes_in += total
            self.core.receive(b"".join(chunks), now)
        if failed:
            self._lost(now)
        return total

    def write_pending(self, now_ns: int | None = None) -> None:
        """Write what the core has for the port now, before anything else (a TRIP)."""
        self._flush(self._now(now_ns))

    def write_early(self) -> int:
        """Write what the core has for the port now, from inside an input (`BayController.
        urgent`: a TRIP while the frame that caused it is still being handled). Bytes only:
        a port that fails or takes nothing keeps them for `write_pending` after the input,
        which handles the error, the stall and the events as always (nothing re-enters the
        core from here). Returns the bytes written. Without a port the bytes stay with the
        core, for `write_pending` to treat as it always has."""
        if self.port is None:
            return 0
        out = self.core.take_output()
        if out:
            self.unsent += out
        return (self._write_some() or 0) if self.unsent else 0

    def _write_some(self) -> int | None:
        """Hand the open port what it takes now: the bytes taken, None if it failed."""
        assert self.port is not None
        try:
            n = write_now(self.port, bytes(self.unsent))
        except PORT_ERRORS:
            return None
        del self.unsent[:n]
        self.bytes_out += n
        return n

    def _flush(self, now: int) -> None:
        out = self.core.take_output()
        if self.port is not None and (out or self.unsent):
            self.unsent += out
            self._write(now)
        for ev in self.core.take_events():
            if self.on_event is not None:
                self.on_event(ev)
            else:
                self.events.append(ev)

    def _write(self, now: int) -> None:
        """Hand the port what it takes now; a port that stops taking bytes (a device that
        no longer reads, a TCP peer that stalls) is a fault within the deadline, never a
        loop blocked in write()."""
        n = self._write_some()  # _flush writes only to an open port
        if n is None:
            self._lost(now)
            return
        if not self.unsent:
            self._stuck_since = None
            return
        if n or self._stuck_since is None:
            self._stuck_since = now
        stalled = now - self._stuck_since >= self.write_deadline_ns
        if stalled or len(self.unsent) > self.max_unsent:
            why = (
                f"took no byte for {self.write_deadline_ns / 1e9:g} s"
                if stalled
                else f"holds {len(self.unsent)} unsent bytes (limit {self.max_unsent})"
            )
            self._lost(now, f"port_stalled: {self.url} {why}")

    @property
    def wants_write(self) -> bool:
        """Bytes wait for the port: the loop should wake when it is writable."""
        return bool(self.unsent)

    # ------------------------------------------------------------------ API for the logic

    def send_command(self, command: str, now_ns: int | None = None, **fields: Any) -> int:
        now = self._now(now_ns)
        seq = self._link_core().send_command(command, now, **fields)
        self._flush(now)
        return seq

    def configure(self, param: int, value: int, now_ns: int | None = None) -> int:
        now = self._now(now_ns)
        seq = self._link_core().configure(param, value, now)
        self._flush(now)
        return seq

    def _link_core(self) -> LinkCore:
        core = self.core
        if not isinstance(core, LinkCore):  # a bay sends its own commands through its link
            raise TypeError(
                f"SerialLink commands need a LinkCore endpoint, this one feeds a "
                f"{type(core).__name__}"
            )
        return core

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
