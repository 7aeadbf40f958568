"""The live shell for GOOSE: raw sockets, the GOOSE source and timers of the one loop
(`controller/shell/loop.py`), the monotonic clock.

Hot path per frame: `recv_batch` (a memory-mapped ring: no syscall per frame, see
`protocols.ethernet.ring`), `hub.frame` (header parse and one dispatch, or for an
uneventful retransmission a byte compare and no dispatch), sends for any frame it emits. No
scapy, no decoding of allData unless the state changed. After start-up the loop freezes the
garbage collector's view of everything allocated so far (`gc.freeze`) so a collection never
walks the tables, the machines or the codec's caches; the per-frame garbage is short-lived
and reference-counted away.

The shell tells the pure hub what only it can know: the source MAC its publishers send
from (the interface's own, read from the open socket, unless a publisher configures one)
and the time quality of `t` (the kernel's view of the host clock, `hostclock.py`, read at
start and again with every link poll).
"""

from __future__ import annotations

import gc
import socket
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from goosectl.controller.engine.effects import Notify
from goosectl.controller.goose.effects import RxDrops, SendFrame
from goosectl.controller.ports import GooseEndpoint
from goosectl.controller.shell.hostclock import host_time_quality
from goosectl.controller.shell.loop import Loop, Source
from goosectl.protocols.ethernet.rawsock import (
    KernelStats,
    LinkDownError,
    RawSocket,
    RawSocketError,
    RingSpec,
    StreamMatch,
    TxQueueFullError,
)
from goosectl.protocols.goose import Vlan

#: How often a link marked down is checked for carrier again.
LINK_POLL_NS = 200_000_000

FrameSink = Callable[[int, int, bytes, Vlan | None, list[Any]], None]
EffectSink = Callable[[list[Any]], None]

#: The receive ring of a live controller: TPACKET_V2, woken per frame (a V3 block timer
#: would hold a lone trip frame up to a millisecond), 10,000 full-size frames deep.
#: `listen` takes V3 (bursts, no per-frame wake-up); a config's `goose.rx_ring` overrides.
CONTROLLER_RING = RingSpec(version=2)
#: While the kernel refuses sends (ENOBUFS/EAGAIN) the loop retries about this often
#: (epoll's millisecond; never by spinning: a queue that stays full must not eat a core).
TX_RETRY_S = 0.001
#: what a send on a side whose link has failed raises
SEND_ERRORS = (LinkDownError, RawSocketError, OSError)


def rx_counters(socks: dict[str, RawSocket]) -> dict[str, Any]:
    """Per side and summed: frames read, the kernel's counters, and what the kernel
    delivered that was not read (still in the ring when we stopped)."""
    sides: dict[str, Any] = {}
    for side, sock in socks.items():
        k = sock.kernel
        got = sock.stats.received
        sides[side] = {
            "iface": sock.iface,
            "rx": sock.rx_mode,
            "received": got,
            "drops": k.drops,
            "freeze": k.freeze,
            "kernel_packets": k.packets,
            "unread": max(0, k.packets - k.drops - got - sock.stats.truncated),
        }
        if sock.ring_error:
            sides[side]["ring_error"] = sock.ring_error
    total = {
        key: sum(v[key] for v in sides.values())
        for key in ("received", "drops", "freeze", "kernel_packets", "unread")
    }
    return {**total, "sides": sides}


def interface_mac(sock: RawSocket) -> bytes | None:
    """The hardware address of the socket's interface, as the kernel reports it for the
    bound packet socket (right in any network namespace, unlike /sys of the caller)."""
    try:
        dup = socket.fromfd(sock.fileno(), socket.AF_PACKET, socket.SOCK_RAW)
    except OSError:
        return None
    try:
        addr = dup.getsockname()[4]
    except (OSError, IndexError):
        return None
    finally:
        dup.close()
    return bytes(addr[:6]) if len(addr) >= 6 and any(addr[:6]) else None


def link_up(iface: str) -> bool:
    try:
        state = Path(f"/sys/class/net/{iface}/operstate").read_text().strip()
    except OSError:
        return False
    return state in ("up", "unknown")


class LiveGoose:
    """Owns the sockets of sides A (and B), the GOOSE source and timers of the one loop
    (`controller/shell/loop.py`), and runs the hub against them."""

    def __init__(
        self,
        hub: GooseEndpoint,
        iface_a: str | None,
        iface_b: str | None = None,
        promiscuous: bool | None = None,
        ring: RingSpec | None = CONTROLLER_RING,
    ) -> None:
        """`hub` is a `GooseHub`, or anything of its shape (`controller.ports.GooseEndpoint`:
        the bay controller's adapter). `ring` is the receive ring of each side (None: the
        socket's receive buffer); if the kernel refuses it the side falls back to recvmsg
        and `rx_modes` says so."""
        self.hub = hub
        # no interface: the loop still serves timers, the serial port and the control socket
        self.ifaces = {k: v for k, v in (("A", iface_a), ("B", iface_b)) if v}
        if len(self.ifaces) == 2:
            hub.bank.merge_sides()  # each frame's second copy is a duplicate, always
        self.socks: dict[str, RawSocket] = {}
        self._open_sockets(promiscuous, ring)
        #: the sockets as opened, kept after `close` for their final counters
        self.opened = dict(self.socks)
        self.loop = Loop(wait_cap=self._wait_cap)
        for side, sock in self.socks.items():
            self.loop.add(Source(f"goose {side}", "goose", sock.fileno(), self._reader(side)))
        self.loop.timers.append(_FrameTimers(self))
        self.loop.idle.append(self._flush_journal)
        self._tell_hub_the_host()
        self._init_counters()
        self._init_hooks()

    def _open_sockets(self, promiscuous: bool | None, ring: RingSpec | None) -> None:
        """One raw socket a side, the kernel filtering to the subscribed streams' groups
        (a flood of other streams never queues); all closed if one fails."""
        subs = self.hub.bank.subs.values()
        groups = sorted({s.dst for s in subs})
        streams = [StreamMatch(s.dst, s.appid, s.gocb_ref) for s in subs]
        promisc = self.hub.bank.observer if promiscuous is None else promiscuous
        try:
            for side, iface in self.ifaces.items():
                self.socks[side] = RawSocket(
                    iface, groups=groups, promiscuous=promisc, ring=ring, streams=streams
                )
        except BaseException:
            self.close()
            raise

    def _tell_hub_the_host(self) -> None:
        """What only the shell knows: the MAC the publishers send from (network A's
        interface, B's without A; PRP sends one MAC on both networks, and so does
        goosectl) and the host clock's quality."""
        self.src_mac = next(
            (m for m in (interface_mac(s) for s in self.socks.values()) if m is not None), None
        )
        if self.src_mac is not None:
            self.hub.set_source_mac(self.src_mac)
        self.time_quality = host_time_quality()
        self.hub.set_time_quality(self.time_quality)

    def _init_counters(self) -> None:
        """The counters and latencies the status view and the stop report read."""
        self.down: set[str] = set()
        self.frames = 0
        self.sent = 0
        self.send_errors = 0
        #: sends the kernel refused (ENOBUFS/EAGAIN), each retried; `tx_superseded` were
        #: replaced by a newer frame of the same publisher before they got out
        self.tx_refused = 0
        self.tx_superseded = 0
        self._held: dict[str, deque[SendFrame]] = {}
        #: kernel drops of all sides (the sum of the last RxDrops reports)
        self.drops = 0
        self._drops_seen: dict[str, int] = {}
        self.errors = 0
        self.last_error: str | None = None
        self.last_latency_ns: int | None = None
        #: when the frame being handled was read (monotonic ns); None between frames
        self.t_in: int | None = None
        #: every frame's handling time (ns), the last 100,000 (status view, reports)
        self.latencies: deque[int] = deque(maxlen=100_000)
        #: for each frame that made the controller send something: from the kernel's
        #: receive stamp to its last send returning (ns), the last 100,000. Unlike
        #: `latencies` it includes the wake-up (and any earlier frame of the same batch),
        #: so a slow trip is told apart from a controller scheduled late
        self.stamp_latencies: deque[int] = deque(maxlen=100_000)
        #: frames read from the sockets in this `run` (the per-frame callback's number)
        self._number = 0
        self._injected = 0
        self.next_poll = 0

    def _init_hooks(self) -> None:
        """What other parts of the shell plug in: hooks, the PRP LRE, other transports."""
        #: called right after a frame is handled, before its frames are sent: the serial
        #: port's shell writes a TRIP here, ahead of the GOOSE frames the same frame caused
        self.on_output: list[Callable[[int], None]] = []
        #: called once a round, after its frames and timers (the serial port's reads and
        #: timers, status, the control socket's deadlines): never per frame, so a batch's
        #: second frame (a trip behind a retransmission) does not wait for a serial poll
        self.on_round: list[Callable[[int], None]] = []
        #: the native PRP LRE (`controller.shell.prp_live`): trailers off before the hub,
        #: duplicates dropped, trailers on per side when sending; None without PRP
        self.prp: Any = None
        #: with the native LRE: called with each frame as it came (trailer on) before the
        #: LRE sees it (the trip reflex's `LiveReflex.before_trailed`); None: nothing
        self.before_lre: Callable[[bytes, str, int, Vlan | None], object] | None = None
        #: other transports every executed frame also goes out on (R-GOOSE over UDP,
        #: `controller/shell/rgoose_live.py`), each called once per frame
        self.transports: list[Callable[[SendFrame, int], None]] = []
        #: `run`'s per-frame callback, for frames that other inputs `inject`, and its
        #: effects callback
        self._on_frame: FrameSink | None = None
        self._on_effects: EffectSink | None = None
        # the codec's Vlan for each tag seen (frozen: shared), not one object per frame
        self._vlans: dict[Any, Vlan] = {}

    @property
    def stopped(self) -> bool:
        return self.loop.stopped

    def add_reader(
        self, fd: int, callback: Callable[[], None], kind: str = "control", name: str = ""
    ) -> None:
        """Another source of the same loop: `kind` places it in the round (`loop.SOURCE_KINDS`:
        an R-GOOSE or PRP supervision socket is `goose`, the serial port `serial`, the
        control socket and its clients `control`, stdin `input`)."""
        self.loop.add(Source(name or f"{kind} fd {fd}", kind, fd, callback))

    def remove_reader(self, fd: int) -> None:
        self.loop.remove(fd)

    @property
    def rx_modes(self) -> dict[str, str]:
        """How each side receives: tpacket_v3, tpacket_v2 or recvmsg (ring refused)."""
        return {side: sock.rx_mode for side, sock in self.opened.items()}

    def rx_stats(self) -> dict[str, Any]:
        """Frames read and the kernel's counters, per side and summed (`rx_counters`)."""
        return rx_counters(self.opened)

    def poll_drops(self) -> list[RxDrops]:
        """Read the kernel's counters of every side; one RxDrops per side whose drops grew."""
        out: list[RxDrops] = []
        for side, sock in self.socks.items():
            try:
                k: KernelStats = sock.kernel_stats()
            except RawSocketError:
                continue  # a link that went away: the receive path reports it
            seen = self._drops_seen.get(side, 0)
            if k.drops > seen:
                self._drops_seen[side] = k.drops
                self.drops += k.drops - seen
                out.append(
                    RxDrops(side, sock.iface, k.drops - seen, k.drops, k.packets, k.freeze,
                            sock.stats.received)
                )  # fmt: skip
        return out

    def _send(self, sock: RawSocket, e: SendFrame) -> bool:
        """One frame on one side; False when the kernel refused it for now (held)."""
        try:
            sock.send(e.data if self.prp is None else self.prp.outgoing(e, sock))
        except TxQueueFullError:
            self.tx_refused += 1
            return False
        self.sent += 1
        return True

    @property
    def tx_held(self) -> int:
        """Frames the kernel refused that wait for `retry_held` (all sides)."""
        return sum(len(q) for q in self._held.values())

    def _hold(self, side: str, e: SendFrame) -> None:
        """Queue a refused frame for the retry, in order; a newer frame of the same
        publisher replaces the held one (it carries the same or a newer state)."""
        q = self._held.setdefault(side, deque())
        for i, old in enumerate(q):
            if old.gocb_ref == e.gocb_ref:
                del q[i]
                self.tx_superseded += 1
                break
        q.append(e)

    def retry_held(self, now_ns: int) -> list[Any]:
        """Send what the kernel refused before, oldest first, until it refuses again."""
        more: list[Any] = []
        for side in list(self._held):
            q = self._held[side]
            if not self._sendable(side):
                q.clear()
            while q:
                try:
                    if not self._send(self.socks[side], q[0]):
                        break
                except SEND_ERRORS:
                    q.clear()
                    more.extend(self._link_failed(side, now_ns))
                    break
                q.popleft()
            if not q:
                del self._held[side]
        if more:
            more.extend(self.execute(more, now_ns))
        return more

    def _sendable(self, side: str) -> bool:
        """The side has a socket and its link is not marked down."""
        return side in self.socks and side not in self.down

    def _link_failed(self, side: str, now_ns: int) -> list[Any]:
        """A send on `side` raised: counted, the side marked down, the hub told (failover)."""
        self.send_errors += 1
        self.down.add(side)
        return self.hub.link(side, False, now_ns)

    def _put(self, side: str, e: SendFrame) -> None:
        """One frame on one side: sent, or held behind what the kernel refused before (or
        refuses now); a failed link raises for the caller to handle."""
        if side in self._held or not self._send(self.socks[side], e):
            self._hold(side, e)

    def send_early(self, frames: list[SendFrame]) -> list[SendFrame]:
        """Send `frames` now, from inside the input that made them (a trip's acknowledgement,
        before the input's bookkeeping); returns them with the sides still to send, for the
        `execute` after the input. A side whose link fails here is left, with every later
        frame on it, to that `execute`, which does the failover (never from inside an
        input)."""
        failed: set[str] = set()
        out: list[SendFrame] = []
        for e in frames:
            left: list[str] = []
            for side in e.sides:
                if side in failed:
                    left.append(side)
                elif self._sendable(side):
                    try:
                        self._put(side, e)
                    except SEND_ERRORS:
                        failed.add(side)
                        left.append(side)
            out.append(e if len(left) == len(e.sides) else replace(e, sides=tuple(left)))
        return out

    def execute(self, effects: list[Any], now_ns: int) -> list[Any]:
        """Send what must be sent; a failed side is reported to the hub (failover). A send
        the kernel refuses (ENOBUFS, EAGAIN: its queue is full, the link is not down) is
        counted and held for `retry_held`; frames behind it on that side wait their turn.
        A frame `send_early` sent comes here with the sides it has left."""
        more: list[Any] = []
        for e in effects:
            if type(e) is not SendFrame:
                continue
            for transport in self.transports:
                transport(e, now_ns)
            for side in e.sides:
                if not self._sendable(side):
                    continue
                try:
                    self._put(side, e)
                except SEND_ERRORS:
                    more.extend(self._link_failed(side, now_ns))
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
        """Serve the loop until `stop` or `until_ns`: the hub started (unless `start` is
        False), then rounds of `controller/shell/loop.py`, then the last drop counters."""
        self._on_frame = on_frame
        self._on_effects = on_effects
        self._number = 0
        # collect and freeze first: the first state's burst must not wait for a collection
        gc.collect()
        gc.freeze()
        gc_was_on = gc.isenabled()
        if self.loop.idle_gc:  # --realtime: no collection ever starts on the frame path
            gc.disable()
        if start:
            self._start_hub()
        self.next_poll = time.monotonic_ns() + LINK_POLL_NS
        self.loop.run(until_ns)
        self._report(self.poll_drops())  # the last word on drops before the caller's report
        gc.unfreeze()
        if gc_was_on:
            gc.enable()

    def _start_hub(self) -> None:
        """The hub's first effects (its publishers' first frames), sent."""
        clock = time.monotonic_ns
        out = self.hub.start(clock(), time.time_ns())
        out += self.execute(out, clock())
        if self._on_effects:
            self._on_effects(out)

    def _report(self, effects: list[Any]) -> None:
        """Effects for the caller's `on_effects`, if there are any and a caller wants them."""
        if effects and self._on_effects:
            self._on_effects(effects)

    def _reader(self, side: str) -> Callable[[], None]:
        """The GOOSE source of one side: what the loop calls when its socket is readable."""
        return lambda: self._read_side(side)

    def _read_side(self, side: str) -> None:
        """One batch of a side's ring: every frame to the hub in order, each frame's
        outputs (hooks, then sends) before the next frame is handled."""
        sock = self.socks[side]
        try:
            batch = sock.recv_batch()
        except LinkDownError:
            self._side_went_down(side)
            return
        clock = time.monotonic_ns
        # kernel stamps are CLOCK_REALTIME: one offset a batch, not a clock a frame
        offset = time.time_ns() - clock()
        hub, prp, vlans, rejects = self.hub, self.prp, self._vlans, self.hub.bank.rejects
        before_lre = self.before_lre
        on_frame, number = self._on_frame, self._number
        for rx in batch:
            if rejects(rx.frame):  # no subscription's: a flood costs a lookup each
                self.frames += 1
                number += 1
                continue
            t_in = clock()
            tag = rx.vlan
            vlan = None if tag is None else (vlans.get(tag) or self._vlan(tag))
            sent_before = self.sent
            self.t_in = t_in
            if prp is None:
                buf = rx.frame
            else:  # PRP ages copies by the kernel's receive stamp, not by when
                # a slow or backlogged loop got to them (monotonic, as t_in)
                ts = rx.ts_ns
                if before_lre is not None:  # the trip reflex: judged before the LRE
                    before_lre(rx.frame, side, t_in, vlan)
                buf = prp.receive(rx.frame, side, ts - offset if ts else t_in)
                if buf is None:
                    self.t_in = None
                    continue  # a PRP duplicate, counted by the LRE
            try:
                out = hub.frame(buf, side, t_in, vlan)
            except Exception as exc:
                out = self._failed(exc, number + 1)
            self.t_in = None
            for hook in self.on_output:
                hook(t_in)
            if out:
                out += self.execute(out, t_in)
            t_out = clock()
            self.last_latency_ns = t_out - t_in
            self.latencies.append(self.last_latency_ns)
            if rx.ts_ns and out and self.sent != sent_before:
                self.stamp_latencies.append(t_out + offset - rx.ts_ns)
            self.frames += 1
            number += 1
            if on_frame:
                on_frame(number, rx.ts_ns or time.time_ns(), buf, vlan, out)
        self._number = number
        if sock.drops_pending:  # the ring flagged a drop: report it now
            self._report(self.poll_drops())

    def _vlan(self, tag: Any) -> Vlan:
        """The codec's Vlan of a tag first seen, kept (up to 4096 tags) for the next."""
        v = Vlan(tag.vid, tag.pcp, tag.dei)
        if len(self._vlans) < 4096:
            self._vlans[tag] = v
        return v

    def _side_went_down(self, side: str) -> None:
        """A side's socket reports its link down: marked, the hub told (failover)."""
        if side not in self.down:
            self.down.add(side)
            self._report(self.hub.link(side, False, time.monotonic_ns()))

    def _wait_cap(self) -> float | None:
        """While the kernel refuses sends the loop wakes about every TX_RETRY_S to retry."""
        return TX_RETRY_S if self._held else None

    def fire_frame_timers(self, now: int) -> None:
        """The round's timers: refused frames retried, the hub's due timers advanced, the
        round hooks, then what the timers emitted sent; the link poll when it is due."""
        if self._held:
            self._report(self.retry_held(now))
        out = self.hub.advance(now)
        for hook in self.on_round:
            hook(now)
        if out:
            out += self.execute(out, now)
            self._report(out)
        if now >= self.next_poll:
            self.poll_links(now)

    def poll_links(self, now: int) -> None:
        """Every LINK_POLL_NS: the kernel's drop counters, the host clock's quality, and
        whether a side marked down has its carrier back."""
        self.next_poll = now + LINK_POLL_NS
        self._report(self.poll_drops())
        quality = host_time_quality()
        if quality != self.time_quality:
            self.time_quality = quality
            self.hub.set_time_quality(quality)
        for side in sorted(self.down):
            if link_up(self.ifaces[side]):
                self.down.discard(side)
                self._report(self.hub.link(side, True, now))

    def _flush_journal(self, now: int) -> None:
        """The idle work of every round: the journal's group commit, when due."""
        journal = self.hub.scheduler.journal
        if journal is not None:
            journal.maybe_flush(now)

    def inject(self, buf: bytes, side: str, t_in: int) -> list[Any]:
        """A frame another input of the loop received (an R-GOOSE SPDU's goosePdu), handled
        as a frame of the sockets is: the hub, the output hooks, the sends, the latency
        and `run`'s per-frame callback. Returns the hub's effects."""
        self.t_in = t_in
        try:
            out = self.hub.frame(buf, side, t_in)
        except Exception as exc:
            out = self._failed(exc, self.frames + 1)
        self.t_in = None
        for hook in self.on_output:
            hook(t_in)
        if out:
            out += self.execute(out, t_in)
        self.last_latency_ns = time.monotonic_ns() - t_in
        self.latencies.append(self.last_latency_ns)
        self.frames += 1
        self._injected += 1
        if self._on_frame is not None:
            self._on_frame(self._injected, time.time_ns(), buf, None, out)
        return out

    def _failed(self, exc: Exception, number: int) -> list[Any]:
        """A frame the machines could not handle (a table or config defect, not a bad
        frame: those are classified `malformed`): counted and reported, the loop goes on."""
        self.errors += 1
        self.last_error = f"frame {number}: {type(exc).__name__}: {exc}"
        return [Notify("error", self.last_error)]

    def stop(self) -> None:
        self.loop.stop()

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()
        self.socks.clear()


class _FrameTimers:
    """The GOOSE timers as a loop `Timer`: the hub's deadlines (retransmissions, TAL) and
    the link poll (`LiveGoose.poll_links`), one timer so a round pays one call for both."""

    name = "goose timers"

    def __init__(self, live: LiveGoose) -> None:
        self.live = live
        self.hub_deadline = live.hub.next_deadline
        self.fire = live.fire_frame_timers

    def deadline(self) -> int:
        due = self.hub_deadline()
        poll: int = self.live.next_poll
        return poll if due is None or poll < due else due


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
