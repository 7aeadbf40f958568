"""R-GOOSE on a live UDP socket (port 102, unicast and IPv4 multicast), served by the
GOOSE shell's own selectors loop (`LiveGoose.add_reader`).

Receiving: each datagram's SPDU goes through `controller/goose/rgoose.py` into the same
hub (or the bay's endpoint) as a Layer-2 frame, via `LiveGoose.inject`, so the machines,
the auth gate and the logic do not know which transport a frame came by.

Publishing: the publisher machines still build Layer-2 frames; `RgoosePublisher` takes
each `SendFrame` the loop executes (`LiveGoose.transports`) and sends its goosePdu as an
SPDU instead, with one SPDU number per publication that advances with every SPDU, signed
with an HMAC key or encrypted with an AES-128-GCM key of the key file (a fresh IV per
SPDU: six random octets per process, then a counter).
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from goosectl.controller.config.goose import SubscriptionCfg
from goosectl.controller.config.keys import Key, KeyFile
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.goose.rgoose import RgooseReceiver, feed, receiver_for
from goosectl.protocols.rgoose import PORT, BadSpdu, apdu_of_frame, encode

#: ioctl: an interface's IPv4 address (linux/sockios.h)
SIOCGIFADDR = 0x8915
#: datagrams read per wake-up before the loop serves its other inputs again
BATCH = 64


def parse_target(text: str) -> tuple[str, int]:
    """'239.192.0.1' or '10.0.0.2:102' -> (address, port); a `ValueError` that says what
    is wrong with anything else (an IPv6 address, a port that is no number)."""
    if text.count(":") > 1 or text.startswith("["):
        raise ValueError("an IPv6 address; R-GOOSE runs over IPv4 only here")
    host, _, port = text.partition(":")
    try:
        socket.inet_aton(host)
    except OSError:
        raise ValueError(f"{host!r} is not an IPv4 address") from None
    if not port:
        return host, PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"port {port!r} is not a number 1..65535")
    return host, int(port)


def interface(iface: str) -> tuple[bytes, int]:
    """The `iface` of a multicast socket -> (IPv4 address, interface index) for
    `struct ip_mreqn`: an IPv4 address of the interface, or the interface's name ("eth1",
    which is what a user names first); "" is the kernel's choice."""
    if not iface:
        return bytes(4), 0
    try:
        return socket.inet_aton(iface), 0
    except OSError:
        pass
    try:
        index = socket.if_nametoindex(iface)
    except OSError:
        raise ValueError(
            f"R-GOOSE interface {iface!r}: neither an IPv4 address nor an interface here"
        ) from None
    return _ipv4_of(iface), index


def _ipv4_of(name: str) -> bytes:
    """The interface's IPv4 address (SIOCGIFADDR), so datagrams sent on it carry it as
    their source (the subscriber tells senders apart by it); 0.0.0.0 if it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            req = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return bytes(4)
    return req[20:24]


def is_multicast(addr: str) -> bool:
    return 224 <= int(addr.split(".")[0]) <= 239


def listen(
    live: Any,
    receiver: RgooseReceiver,
    spec: str,
    iface: str = "",
) -> RgooseListener:
    """A listener on `spec` ('ADDR[:PORT]'; a multicast ADDR is joined on the interface
    whose IPv4 address is `iface`, a unicast one is bound)."""
    addr, port = parse_target(spec)
    if is_multicast(addr):
        sock = open_socket("0.0.0.0", port, (addr,), iface)
    else:
        sock = open_socket(addr, port, (), iface)
    return RgooseListener(live, sock, receiver)


def open_socket(
    bind: str = "0.0.0.0", port: int = PORT, groups: tuple[str, ...] = (), iface: str = ""
) -> socket.socket:
    """A non-blocking UDP socket on `bind:port` that has joined `groups` on the interface
    whose IPv4 address is `iface` ("" = the kernel's choice); multicast TTL 1 (R-GOOSE
    within the station, as libiec61850 defaults) and loopback on, so a subscriber on the
    same host hears it."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((bind, port))
        local, index = interface(iface)
        mreqn = local + struct.pack("@i", index)  # struct ip_mreqn without its group
        for g in groups:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(g) + mreqn)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        if iface:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, bytes(4) + mreqn)
        s.setblocking(False)
    except BaseException:
        s.close()
        raise
    return s


class RgooseListener:
    """Reads SPDUs from `sock` and hands their frames to `live` (a `LiveGoose`)."""

    def __init__(self, live: Any, sock: socket.socket, receiver: RgooseReceiver) -> None:
        self.live = live
        self.sock = sock
        self.receiver = receiver
        self.datagrams = 0
        live.add_reader(sock.fileno(), self.on_readable, "goose", "r-goose")

    def on_readable(self) -> None:
        live = self.live
        for _ in range(BATCH):
            try:
                data, (sender, _port) = self.sock.recvfrom(65535)
            except BlockingIOError:
                return
            except OSError as exc:  # ICMP errors and the like: counted, never fatal
                self.receiver.counts[f"recv_{errno.errorcode.get(exc.errno or 0, 'error')}"] += 1
                return
            self.datagrams += 1
            t_in = time.monotonic_ns()
            # `feed` runs the hub; each frame's effects are executed as the loop would
            endpoint = _Injector(live)
            feed(endpoint, self.receiver, data, sender, t_in, time.time_ns())

    def close(self) -> None:
        """After the loop has ended (the selector goes with it)."""
        self.sock.close()


class _Injector:
    """The hub as `feed` sees it, each frame going through `LiveGoose.inject` (hooks,
    sends, latency, the caller's per-frame callback) instead of the bare hub."""

    def __init__(self, live: Any) -> None:
        self.live = live
        self.bank = live.hub.bank

    def frame(self, buf: bytes, side: str, now_ns: int) -> list[Any]:
        out: list[Any] = self.live.inject(buf, side, now_ns)
        return out


@dataclass
class _Stream:
    number: int = 0
    sent: int = 0


@dataclass
class RgoosePublisher:
    """Sends each `SendFrame` of the loop as an R-GOOSE SPDU to `target`; `key` (from the
    key file) signs (HMAC) or encrypts (AES-128-GCM) every SPDU, None sends unsecured."""

    sock: socket.socket
    target: tuple[str, int]
    key: Key | None = None
    streams: dict[int, _Stream] = field(default_factory=dict)
    iv_prefix: bytes = field(default_factory=lambda: os.urandom(6))
    iv_counter: int = 0
    sent: int = 0
    errors: int = 0
    #: the last SPDU sent (what a capture or a test peer would replay)
    last: bytes = b""

    def __call__(self, e: SendFrame, now_ns: int) -> None:
        try:
            apdu = apdu_of_frame(e.data)
        except BadSpdu:
            self.errors += 1
            return
        st = self.streams.setdefault(apdu.appid, _Stream())
        st.number = (st.number + 1) & 0xFFFFFFFF
        k = self.key.key if self.key is not None else None
        iv = None
        if k is not None and k.algorithm.encrypts:
            iv = self.iv_prefix + self.iv_counter.to_bytes(6, "big")
            self.iv_counter += 1
        tock = max(0, self.key.not_before_ns // 1_000_000_000) if self.key is not None else 0
        spdu = encode([apdu], st.number, key=k, iv=iv, time_of_current_key=tock)
        try:
            self.sock.sendto(spdu, self.target)
        except OSError:
            self.errors += 1
            return
        st.sent += 1
        self.sent += 1
        self.last = spdu

    def counters(self) -> dict[str, Any]:
        return {
            "target": f"{self.target[0]}:{self.target[1]}",
            "sent": self.sent,
            "errors": self.errors,
            "spdu_number": {f"0x{a:04x}": s.number for a, s in self.streams.items()},
        }


def attach_subscriptions(
    live: Any, subscriptions: list[SubscriptionCfg], keys: KeyFile | None
) -> list[RgooseListener]:
    """One listener per distinct `rgoose:` address of `subscriptions` (`run`), all feeding
    `live`'s hub through one receiver (one replay memory per sender and stream)."""
    wanted = sorted(
        {(s.rgoose.address, s.rgoose.port, s.rgoose.iface) for s in subscriptions if s.rgoose}
    )
    if not wanted:
        return []
    receiver = receiver_for(live.hub, subscriptions, keys)
    out: list[RgooseListener] = []
    try:
        for addr, port, iface in wanted:
            out.append(listen(live, receiver, f"{addr}:{port}", iface))
    except BaseException:
        for lst in out:
            lst.close()
        raise
    return out
