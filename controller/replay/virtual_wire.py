"""Virtual time for two sans-IO endpoints: the controller's link and a device firmware.

`VirtualWire` connects two endpoints (anything with receive/advance/take_output/
next_deadline, e.g. `controller.link.LinkCore` and `firmware_sim.core.Firmware`) through
two in-memory channels on one virtual clock. Time jumps straight to the next deadline, so
a 5 s spring charge or a 200 ms event retry costs no wall time, and a run is reproducible:
the same inputs at the same times give the same bytes.

A channel may delay, drop or corrupt bytes (`firmware_sim.faults.FaultyChannel`); the
default `Pipe` delivers after a fixed latency. Nothing here imports the simulator: the
controller side must not depend on it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

from goosectl.controller.engine.scheduler import Guard


class Endpoint(Protocol):
    def receive(self, data: bytes, now_ns: int) -> None: ...
    def advance(self, now_ns: int) -> None: ...
    def take_output(self) -> bytes: ...
    def next_deadline(self) -> int | None: ...


class Channel(Protocol):
    def put(self, data: bytes, now_ns: int) -> None: ...
    def take_due(self, now_ns: int) -> bytes: ...
    def next_due(self) -> int | None: ...


class Pipe:
    """A lossless channel with a fixed latency (default 0: delivered at once)."""

    def __init__(self, latency_ns: int = 0) -> None:
        self.latency_ns = latency_ns
        self._q: deque[tuple[int, bytes]] = deque()

    def put(self, data: bytes, now_ns: int) -> None:
        if data:
            self._q.append((now_ns + self.latency_ns, data))

    def take_due(self, now_ns: int) -> bytes:
        out = bytearray()
        while self._q and self._q[0][0] <= now_ns:
            out += self._q.popleft()[1]
        return bytes(out)

    def next_due(self) -> int | None:
        return self._q[0][0] if self._q else None


class _VirtualTime:
    """What both ways of joining two endpoints on one virtual clock share."""

    now_ns: int

    def run_until(self, t_ns: int) -> None:
        raise NotImplementedError

    def run_for(self, ns: int) -> None:
        self.run_until(self.now_ns + ns)

    def run_until_true(self, predicate: Callable[[], bool], limit_ns: int, step_ns: int) -> bool:
        """Step `step_ns` at a time until `predicate()` holds or `limit_ns` has passed."""
        end = self.now_ns + limit_ns
        while not predicate():
            if self.now_ns >= end:
                return False
            self.run_until(min(end, self.now_ns + step_ns))
        return True


class VirtualWire(_VirtualTime):
    """Endpoint `a` (controller) and `b` (device) on one virtual clock."""

    def __init__(
        self,
        a: Endpoint,
        b: Endpoint,
        a_to_b: Channel | None = None,
        b_to_a: Channel | None = None,
        *,
        start_ns: int = 0,
        on_step: Callable[[int], None] | None = None,
    ) -> None:
        self.a, self.b = a, b
        self.ab = a_to_b or Pipe()
        self.ba = b_to_a or Pipe()
        self.now_ns = start_ns
        self.on_step = on_step  # e.g. reopen the controller's port when it asks
        self.names = _names(a, b)
        #: every delivery is a step of the receiving endpoint; endpoints that keep
        #: answering each other without time passing end in `RunawayError`
        self.guard = Guard()

    def _move(self) -> bool:
        """Carry bytes both ways at the current time; True if anything moved. Every
        output and every delivery is a step of its endpoint (for the guard)."""
        moved = False
        now = self.now_ns
        step = self.guard.step
        a, b = self.names
        for src, ch, name in ((self.a, self.ab, a), (self.b, self.ba, b)):
            out = src.take_output()
            if out:
                step(name, "output")
                ch.put(out, now)
                moved = True
        for ch, dst, name in ((self.ab, self.b, b), (self.ba, self.a, a)):
            data = ch.take_due(now)
            if data:
                step(name, "receive")
                dst.receive(data, now)
                moved = True
        if self.on_step is not None:
            self.on_step(now)
        return moved

    def _settle(self) -> None:
        self.guard.enter()
        try:
            while self._move():
                pass
        finally:
            self.guard.exit()

    def next_time(self) -> int | None:
        times = [
            t
            for t in (
                self.a.next_deadline(),
                self.b.next_deadline(),
                self.ab.next_due(),
                self.ba.next_due(),
            )
            if t is not None
        ]
        return min(times) if times else None

    def run_until(self, t_ns: int) -> None:
        """Advance virtual time to `t_ns`, handling every deadline on the way in order."""
        self._settle()
        while True:
            nxt = self.next_time()
            if nxt is None or nxt > t_ns:
                break
            self.now_ns = max(self.now_ns, nxt)
            self.a.advance(self.now_ns)
            self.b.advance(self.now_ns)
            self._settle()
        self.now_ns = max(self.now_ns, t_ns)
        self.a.advance(self.now_ns)
        self.b.advance(self.now_ns)
        self._settle()


class Shell(Protocol):
    """A shell around a real port that can be polled at a given (virtual) time."""

    bytes_in: int
    bytes_out: int

    def poll(self, now_ns: int | None = None) -> int: ...
    def next_deadline(self) -> int | None: ...
    def fileno(self) -> int | None: ...


class VirtualPortPair(_VirtualTime):
    """Two shells connected by a real byte pipe (a pty, a socket) on one virtual clock.

    Virtual time only moves when no byte is in flight: bytes written by one shell and
    not yet read by the other are waited for in real time (the kernel moves them), so
    the run is the same as `VirtualWire`'s, through real file descriptors.
    """

    def __init__(
        self,
        a: Shell,
        b: Shell,
        *,
        start_ns: int = 0,
        guard_s: float = 5.0,
        on_step: Callable[[int], None] | None = None,
    ) -> None:
        self.a, self.b = a, b
        self.now_ns = start_ns
        self.guard_s = guard_s
        self.on_step = on_step  # as VirtualWire's: called after every exchange
        self.names = _names(a, b)
        self.guard = Guard()  # as VirtualWire's: shells that keep answering each other

    def in_flight(self) -> int:
        return (self.a.bytes_out - self.b.bytes_in) + (self.b.bytes_out - self.a.bytes_in)

    def _settle(self) -> None:
        self.guard.enter()
        try:
            self._exchange()
        finally:
            self.guard.exit()

    def _exchange(self) -> None:
        import select

        step = self.guard.step
        while True:
            got_a = self.a.poll(self.now_ns)
            got_b = self.b.poll(self.now_ns)
            if self.on_step is not None:
                self.on_step(self.now_ns)
            if got_a or got_b:
                if got_a:
                    step(self.names[0], "poll")
                if got_b:
                    step(self.names[1], "poll")
                continue
            if self.in_flight() <= 0:
                return
            fds = [fd for fd in (self.a.fileno(), self.b.fileno()) if fd is not None]
            ready, _, _ = select.select(fds, [], [], self.guard_s)
            if not ready:
                raise RuntimeError(
                    f"{self.in_flight()} bytes in flight for {self.guard_s} s: the pipe lost them"
                )

    def run_until(self, t_ns: int) -> None:
        self._settle()
        while True:
            times = [t for t in (self.a.next_deadline(), self.b.next_deadline()) if t is not None]
            nxt = min(times) if times else None
            if nxt is None or nxt > t_ns:
                break
            self.now_ns = max(self.now_ns, nxt)
            self._settle()
        self.now_ns = max(self.now_ns, t_ns)
        self._settle()


def _names(a: object, b: object) -> tuple[str, str]:
    """What a `RunawayError` calls the two sides: their classes, told apart if the same."""
    na, nb = type(a).__name__, type(b).__name__
    return (f"{na} a", f"{nb} b") if na == nb else (na, nb)
