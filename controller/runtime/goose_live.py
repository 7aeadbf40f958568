"""The live shell for GOOSE: raw sockets, one selectors loop, the monotonic clock, timers.

Hot path per frame: `recv_batch` (one syscall a frame), `hub.frame` (header parse, one
dispatch), sends for any frame it emits. No scapy, no decoding of allData unless the state
changed. After start-up the loop freezes the garbage collector's view of everything
allocated so far (`gc.freeze`) so a collection never walks the tables, the machines or the
codec's caches; the per-frame garbage is short-lived and reference-counted away.
"""

from __future__ import annotations

import gc
import selectors
import socket
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.engine.effects import Notify
from controller.goose.effects import SendFrame
from controller.goose.hub import GooseHub
from protocols.ethernet.rawsock import LinkDownError, RawSocket, RawSocketError
from protocols.goose import Vlan

#: Closer than this to a deadline the loop polls instead of sleeping (see `run`).
SPIN_NS = 1_200_000
#: How often a link marked down is checked for carrier again.
LINK_POLL_NS = 200_000_000

FrameSink = Callable[[int, int, bytes, Vlan | None, list[Any]], None]
EffectSink = Callable[[list[Any]], None]


def link_up(iface: str) -> bool:
    try:
        state = Path(f"/sys/class/net/{iface}/operstate").read_text().strip()
    except OSError:
        return False
    return state in ("up", "unknown")


class LiveGoose:
    """Owns the sockets of sides A (and B) and runs the hub against them."""

    def __init__(
        self,
        hub: GooseHub,
        iface_a: str | None,
        iface_b: str | None = None,
        promiscuous: bool | None = None,
    ) -> None:
        """`hub` is a `GooseHub`, or anything with its inputs (start, frame, advance, link,
        next_deadline) and its `bank` and `runner` (the bay controller's adapter)."""
        self.hub = hub
        groups = sorted({s.dst for s in hub.bank.subs.values()})
        promisc = hub.bank.observer if promiscuous is None else promiscuous
        # no interface: the loop still serves timers, the serial port and the control socket
        self.ifaces = {k: v for k, v in (("A", iface_a), ("B", iface_b)) if v}
        self.socks: dict[str, RawSocket] = {}
        try:
            for side, iface in self.ifaces.items():
                self.socks[side] = RawSocket(iface, groups=groups, promiscuous=promisc)
        except BaseException:
            self.close()
            raise
        self.sel = selectors.DefaultSelector()
        for side, sock in self.socks.items():
            self.sel.register(sock.fileno(), selectors.EVENT_READ, side)
        self.down: set[str] = set()
        self.frames = 0
        self.sent = 0
        self.send_errors = 0
        self.errors = 0
        self.last_error: str | None = None
        self.extra: dict[int, Callable[[], None]] = {}
        self.stopped = False
        #: poll without ever sleeping: a core of its own, caches kept warm (`run --spin`)
        self.spin = False
        self.last_latency_ns: int | None = None
        #: every frame's handling time (ns), the last 100,000 (status view, reports)
        self.latencies: deque[int] = deque(maxlen=100_000)
        #: called right after a frame is handled, before its frames are sent: the serial
        #: port's shell writes a TRIP here, ahead of the GOOSE frames the same frame caused
        self.on_output: list[Callable[[int], None]] = []
        #: called after every input and timer round (the serial port's reads and timers)
        self.on_round: list[Callable[[int], None]] = []

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        """Another input (stdin for `publish`, a control socket) served by the same loop."""
        self.extra[fd] = callback
        self.sel.register(fd, selectors.EVENT_READ, None)

    def remove_reader(self, fd: int) -> None:
        self.extra.pop(fd, None)
        self.sel.unregister(fd)

    def execute(self, effects: list[Any], now_ns: int) -> list[Any]:
        """Send what must be sent; a failed side is reported to the hub (failover)."""
        more: list[Any] = []
        for e in effects:
            if type(e) is not SendFrame:
                continue
            for side in e.sides:
                sock = self.socks.get(side)
                if sock is None or side in self.down:
                    continue
                try:
                    sock.send(e.data)
                    self.sent += 1
                except (LinkDownError, RawSocketError, OSError):
                    self.send_errors += 1
                    self.down.add(side)
                    more.extend(self.hub.link(side, False, now_ns))
        if more:
            more.extend(self.execute(more, now_ns))
        return more

    def run(
        self,
        on_frame: FrameSink | None = None,
        on_effects: EffectSink | None = None,
        until_ns: int | None = None,
        start: bool = True,
    ) -> None:
        hub = self.hub
        clock = time.monotonic_ns
        # collect and freeze first: the first state's burst must not wait for a collection
        gc.collect()
        gc.freeze()
        if start:
            out = hub.start(clock(), time.time_ns())
            out += self.execute(out, clock())
            if on_effects:
                on_effects(out)
        next_poll = clock() + LINK_POLL_NS
        number = 0
        while not self.stopped:
            now = clock()
            if until_ns is not None and now >= until_ns:
                break
            deadline = hub.next_deadline()
            wake = min(x for x in (deadline, next_poll, until_ns) if x is not None)
            # epoll rounds timeouts up to whole milliseconds: sleep to 1 ms before the
            # deadline, then poll without blocking, so a 4 ms MinTime is kept to tens of us
            slack = wake - now
            timeout = 0.0 if (self.spin or slack < SPIN_NS) else (slack - 1_000_000) / 1e9
            for key, _ in self.sel.select(timeout):
                side = key.data
                if side is None:
                    self.extra[key.fd]()
                    continue
                try:
                    batch = self.socks[side].recv_batch()
                except LinkDownError:
                    if side not in self.down:
                        self.down.add(side)
                        out = hub.link(side, False, clock())
                        if on_effects:
                            on_effects(out)
                    continue
                for rx in batch:
                    t_in = clock()
                    vlan = Vlan(rx.vlan.vid, rx.vlan.pcp, rx.vlan.dei) if rx.vlan else None
                    try:
                        out = hub.frame(rx.frame, side, t_in, vlan)
                    except Exception as exc:
                        out = self._failed(exc, number + 1)
                    for hook in self.on_output:
                        hook(t_in)
                    if out:
                        out += self.execute(out, t_in)
                    self.last_latency_ns = clock() - t_in
                    for hook in self.on_round:
                        hook(t_in)
                    self.latencies.append(self.last_latency_ns)
                    self.frames += 1
                    number += 1
                    if on_frame:
                        on_frame(number, rx.ts_ns or time.time_ns(), rx.frame, vlan, out)
            now = clock()
            out = hub.advance(now)
            for hook in self.on_round:
                hook(now)
            if out:
                out += self.execute(out, now)
                if on_effects:
                    on_effects(out)
            if now >= next_poll:
                next_poll = now + LINK_POLL_NS
                for side in sorted(self.down):
                    if link_up(self.ifaces[side]):
                        self.down.discard(side)
                        out = hub.link(side, True, now)
                        if on_effects:
                            on_effects(out)
            journal = hub.runner.journal
            if journal is not None:
                journal.maybe_flush(now)
        gc.unfreeze()

    def _failed(self, exc: Exception, number: int) -> list[Any]:
        """A frame the machines could not handle (a table or config defect, not a bad
        frame: those are classified `malformed`): counted and reported, the loop goes on."""
        self.errors += 1
        self.last_error = f"frame {number}: {type(exc).__name__}: {exc}"
        return [Notify("error", self.last_error)]

    def stop(self) -> None:
        self.stopped = True

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()
        self.socks.clear()


def require_raw_sockets() -> str | None:
    """None if raw sockets can be opened here, else the reason (for a clear exit 2).

    Asks the kernel (opens and closes a packet socket) rather than checking for root, so a
    binary given CAP_NET_RAW with setcap works too."""
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close()
    except PermissionError:
        return (
            "raw Ethernet needs root or CAP_NET_RAW (run with sudo, or give the "
            "interpreter the capability: setcap cap_net_raw+ep)"
        )
    return None
