"""Raw Ethernet transport for live GOOSE: one non-blocking AF_PACKET socket per interface.

Why a plain AF_PACKET socket and not scapy's `L2Socket` (scapy stays the tool for pcaps
and interactive dissection): on the hot path `L2Socket` gets in the way.

- Its BPF filter is a tcpdump expression compiled by libpcap or the tcpdump binary at
  run time (neither is guaranteed on a controller; tcpdump is absent on this machine),
  and that language cannot drop the socket's own outgoing frames in the kernel. We
  assemble a small classic BPF program ourselves (`protocols.ethernet.bpf`).
- It copies every tagged frame to re-insert the VLAN tag and reports the kernel time as
  float seconds. We report the tag as a value beside the untouched bytes and keep the
  timestamp in integer nanoseconds (a float loses sub-microsecond digits).
- It has no multicast-membership API (only promiscuous on/off) and filters outgoing
  frames in Python after copying them.

What the socket does, and why:

- Bound to all protocols (ETH_P_ALL) because the kernel strips the outer VLAN tag before
  protocol demultiplexing: a socket bound to 0x88B8 would miss nothing on an untagged
  LAN but sees tagged GOOSE only by accident of driver offloads. The BPF filter then
  accepts EtherType 0x88B8 untagged or behind one inline tag, and drops PACKET_OUTGOING
  (also PACKET_IGNORE_OUTGOING where the kernel has it), so a frame we send is never
  read back on the same interface.
- PACKET_AUXDATA recovers the stripped tag (tpacket_auxdata: tp_vlan_tci, tp_vlan_tpid,
  TP_STATUS_VLAN_VALID, which distinguishes VID 0 priority tags from untagged frames).
- Multicast groups are joined per subscribed MAC (PACKET_ADD_MEMBERSHIP,
  PACKET_MR_MULTICAST) so a real NIC's hardware filter lets them in without promiscuous
  mode; because veth and many NICs deliver every group anyway, the BPF filter also
  compares the destination with the joined groups. ``promiscuous=True`` (observer mode)
  sets PACKET_MR_PROMISC and accepts any destination.
- Non-blocking with `fileno()` for selectors/epoll; SO_TIMESTAMPNS gives the kernel's
  receive time (CLOCK_REALTIME, comparable with `time.time_ns()`) for wire latency.
- The socket is created with protocol 0 (receives nothing), the filter is attached, and
  only then is it bound to ETH_P_ALL, so no unfiltered frame is ever queued.
- With ``ring=RingSpec(...)`` frames arrive in a memory-mapped ring (`protocols.ethernet.ring`:
  TPACKET_V3 for bursts, V2 for per-frame wake-ups) instead of the receive buffer: a burst
  of ``ring.frames`` full-size frames fits with nobody reading, and a batch costs no system
  call per frame. The ring header carries the stripped VLAN tag and the kernel time, so
  auxdata is not needed. If the kernel refuses the ring the socket says so (`ring_error`)
  and receives with `recvmsg` as before; `rx_mode` tells which is in use.
- The kernel's counters (PACKET_STATISTICS: frames that passed the filter, drops, V3 ring
  freezes) are read by `kernel_stats()` and summed, since reading resets them. A ring
  flags drops in band (TP_STATUS_LOSING), so `drops_pending` costs nothing to ask.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from goosectl.protocols.ethernet import bpf
from goosectl.protocols.ethernet.mac import format_mac, parse_mac
from goosectl.protocols.ethernet.ring import (
    KernelStats,
    RingError,
    RingSpec,
    RxFrame,
    RxRing,
    read_kernel_stats,
)
from goosectl.protocols.ethernet.vlan import TPID_CTAG, VlanTag, inline_tag

__all__ = [
    "FrameSizeError",
    "KernelStats",
    "LinkDownError",
    "RawSocket",
    "RawSocketError",
    "RawSocketPermissionError",
    "RingSpec",
    "RxFrame",
    "RxTxStats",
    "TxQueueFullError",
    "UnknownInterfaceError",
    "interface_index",
]

# linux/if_ether.h, linux/if_packet.h, asm-generic/socket.h
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_DROP_MEMBERSHIP = 2
PACKET_AUXDATA = 8
PACKET_IGNORE_OUTGOING = 23
PACKET_MR_MULTICAST = 0
PACKET_MR_PROMISC = 1
SO_TIMESTAMPNS = 35
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6

ETH_HLEN = 14
IFNAMSIZ = 16

_AUXDATA = struct.Struct("=IIIHHHH")  # tp_status tp_len tp_snaplen tp_mac tp_net tci tpid
_TIMESPEC = struct.Struct("=qq")
_MREQ = struct.Struct("iHH8s")  # mr_ifindex mr_type mr_alen mr_address[8]
_ANC_BUFSIZE = socket.CMSG_SPACE(_AUXDATA.size) + socket.CMSG_SPACE(_TIMESPEC.size)
_LINK_GONE = frozenset({errno.ENETDOWN, errno.ENXIO, errno.ENODEV})
_VLAN_CACHE_MAX = 4096


class RawSocketError(OSError):
    """Base class: something about the raw socket or its interface, with the interface named."""


class RawSocketPermissionError(RawSocketError, PermissionError):
    """The process may not open packet sockets (needs root or CAP_NET_RAW)."""


class UnknownInterfaceError(RawSocketError, LookupError):
    """No network interface of that name exists in this network namespace."""


class LinkDownError(RawSocketError):
    """The interface is down or was removed; the runtime turns this into a LinkDown event."""


class FrameSizeError(RawSocketError, ValueError):
    """A frame to send is shorter than an Ethernet header or longer than the link allows."""


class TxQueueFullError(RawSocketError, BlockingIOError):
    """The kernel's transmit queue is full; the frame was not sent (non-blocking socket)."""


@dataclass
class RxTxStats:
    """Counters the runtime can export; kept as plain ints so updating costs nothing."""

    received: int = 0
    truncated: int = 0
    sent: int = 0


def interface_index(iface: str) -> int:
    """The ifindex of ``iface`` in this namespace, or UnknownInterfaceError naming it."""
    if not isinstance(iface, str) or not iface or len(iface) >= IFNAMSIZ or "/" in iface:
        raise UnknownInterfaceError(
            errno.ENODEV, f"invalid interface name {iface!r} (1..15 characters, no '/')"
        )
    try:
        return socket.if_nametoindex(iface)
    except OSError:
        known = ", ".join(name for _, name in socket.if_nameindex())
        raise UnknownInterfaceError(
            errno.ENODEV, f"no network interface named {iface!r} here (have: {known})"
        ) from None


class RawSocket:
    """A non-blocking packet socket on one interface, filtered to one EtherType (GOOSE)."""

    def __init__(
        self,
        iface: str,
        *,
        groups: Iterable[bytes | str] = (),
        promiscuous: bool = False,
        ethertype: int = bpf.ETH_P_GOOSE,
        timestamps: bool = True,
        rcvbuf: int | None = None,
        max_frame: int = 9216,
        ring: RingSpec | None = None,
        sndbuf: int | None = None,
    ) -> None:
        """``ring`` receives through a memory-mapped ring of that size and layout (None: the
        socket's receive buffer, `rcvbuf` bytes if given); ``sndbuf`` sets SO_SNDBUF."""
        self.iface = iface
        self.ifindex = interface_index(iface)
        self.promiscuous = promiscuous
        self.ethertype = ethertype
        self.stats = RxTxStats()
        self._max_frame = max_frame
        self._timestamps = timestamps
        self.ring: RxRing | None = None
        #: why the ring asked for could not be set up (the socket then uses recvmsg)
        self.ring_error: str | None = None
        #: the kernel's counters summed over every `kernel_stats()` call
        self.kernel = KernelStats()
        self._groups: dict[bytes, None] = {}
        self._vlans: dict[tuple[int, int], VlanTag] = {}
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except PermissionError as exc:
            raise RawSocketPermissionError(
                errno.EPERM,
                f"opening a raw AF_PACKET socket on {iface!r} needs root or CAP_NET_RAW "
                f"(run as root, or grant it: setcap cap_net_raw+ep <python>): {exc.strerror}",
            ) from None
        self._sock = sock
        try:
            self._setup(groups, timestamps, rcvbuf, sndbuf, ring)
        except BaseException:
            if self.ring is not None:
                self.ring.close()
            sock.close()
            raise

    def _setup(
        self,
        groups: Iterable[bytes | str],
        timestamps: bool,
        rcvbuf: int | None,
        sndbuf: int | None,
        ring: RingSpec | None,
    ) -> None:
        sock = self._sock
        for mac in groups:
            self._groups[parse_mac(mac)] = None
        self._refilter()
        sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        if timestamps:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if sndbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        # Kernel < 4.20 lacks the option; the BPF filter's PKTTYPE check still drops them.
        with contextlib.suppress(OSError):
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        for mac in self._groups:
            self._membership(PACKET_ADD_MEMBERSHIP, PACKET_MR_MULTICAST, mac)
        if self.promiscuous:
            self._membership(PACKET_ADD_MEMBERSHIP, PACKET_MR_PROMISC, b"")
        sock.setblocking(False)
        if ring is not None:
            # before bind: the first frame the filter accepts already lands in the ring
            try:
                self.ring = RxRing(sock, ring)
            except RingError as exc:
                self.ring_error = str(exc)
        try:
            sock.bind((self.iface, ETH_P_ALL))
        except OSError as exc:
            raise self._mapped(exc, "bind to") from None

    # -- configuration -------------------------------------------------------------------

    @property
    def groups(self) -> tuple[bytes, ...]:
        """Joined multicast destinations, in join order."""
        return tuple(self._groups)

    def join(self, mac: bytes | str) -> None:
        """Receive frames sent to multicast group ``mac`` (idempotent)."""
        group = parse_mac(mac)
        if group in self._groups:
            return
        self._membership(PACKET_ADD_MEMBERSHIP, PACKET_MR_MULTICAST, group)
        self._groups[group] = None
        self._refilter()

    def leave(self, mac: bytes | str) -> None:
        """Stop receiving group ``mac`` (idempotent)."""
        group = parse_mac(mac)
        if group not in self._groups:
            return
        del self._groups[group]
        self._refilter()
        self._membership(PACKET_DROP_MEMBERSHIP, PACKET_MR_MULTICAST, group)

    def _refilter(self) -> None:
        program = bpf.goose_program(
            self._groups, promiscuous=self.promiscuous, ethertype=self.ethertype
        )
        bpf.attach(self._sock, program)

    def _membership(self, op: int, kind: int, mac: bytes) -> None:
        mreq = _MREQ.pack(self.ifindex, kind, len(mac), mac)
        try:
            self._sock.setsockopt(SOL_PACKET, op, mreq)
        except OSError as exc:
            what = "promiscuous mode" if kind == PACKET_MR_PROMISC else format_mac(mac)
            verb = "join" if op == PACKET_ADD_MEMBERSHIP else "leave"
            raise RawSocketError(
                exc.errno, f"cannot {verb} {what} on {self.iface!r}: {exc.strerror}"
            ) from None

    # -- I/O -----------------------------------------------------------------------------

    def fileno(self) -> int:
        """For selectors/epoll: readable means at least one wanted frame is queued."""
        return self._sock.fileno()

    @property
    def rx_mode(self) -> str:
        """How frames are received: "tpacket_v3", "tpacket_v2" or "recvmsg"."""
        return f"tpacket_v{self.ring.version}" if self.ring is not None else "recvmsg"

    def recv_frame(self) -> RxFrame | None:
        """Next queued frame, or None if none is waiting. Never blocks."""
        if self.ring is not None:
            got = self.recv_batch(1)
            return got[0] if got else None
        try:
            data, anc, flags, _addr = self._sock.recvmsg(self._max_frame, _ANC_BUFSIZE)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise self._mapped(exc, "receive on") from None
        if flags & socket.MSG_TRUNC:
            self.stats.truncated += 1
            return None
        self.stats.received += 1
        vlan = None
        ts_ns = None
        for level, kind, payload in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA:
                status, _, _, _, _, tci, tpid = _AUXDATA.unpack_from(payload)
                if status & TP_STATUS_VLAN_VALID:
                    if not status & TP_STATUS_VLAN_TPID_VALID:
                        tpid = TPID_CTAG
                    vlan = self._vlan(tci, tpid)
            elif kind == SO_TIMESTAMPNS and level == socket.SOL_SOCKET:
                sec, nsec = _TIMESPEC.unpack_from(payload)
                ts_ns = sec * 1_000_000_000 + nsec
        if vlan is None:
            vlan = inline_tag(data)
        return RxFrame(data, vlan, ts_ns)

    def recv_batch(self, limit: int = 64) -> list[RxFrame]:
        """Drain up to ``limit`` frames (one readiness event, many frames)."""
        out: list[RxFrame] = []
        stats = self.stats
        ring = self.ring
        if ring is not None:
            n = ring.read(limit, out, self._vlan, self._timestamps)
            stats.received += n
            stats.truncated = ring.truncated
            if n == 0:
                # woken with nothing to read: a pending socket error (the link went down)
                err = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise self._mapped(OSError(err, os.strerror(err)), "receive on")
            return out
        while len(out) < limit:
            truncated = stats.truncated
            rx = self.recv_frame()
            if rx is not None:
                out.append(rx)
            elif stats.truncated == truncated:
                break  # queue empty; a truncated frame was skipped otherwise, keep going
        return out

    @property
    def drops_pending(self) -> bool:
        """True when the ring flagged drops the counters have not been read for yet."""
        return self.ring is not None and self.ring.losing

    def kernel_stats(self) -> KernelStats:
        """The kernel's counters since the socket opened (packets, drops, freeze); one
        getsockopt. A closed socket keeps its last totals."""
        if self.closed:
            return self.kernel
        try:
            self.kernel += read_kernel_stats(self._sock)
        except OSError as exc:
            raise self._mapped(exc, "read the counters of") from None
        if self.ring is not None:
            self.ring.losing = False
        return self.kernel

    def _vlan(self, tci: int, tpid: int) -> VlanTag:
        key = (tci, tpid)
        tag = self._vlans.get(key)
        if tag is None:
            tag = VlanTag.from_tci(tci, tpid)
            if len(self._vlans) < _VLAN_CACHE_MAX:
                self._vlans[key] = tag
        return tag

    def send(self, frame: bytes | bytearray | memoryview) -> None:
        """Transmit one complete frame as given (a frame with an inline tag goes out tagged)."""
        size = len(frame)
        if size < ETH_HLEN:
            raise FrameSizeError(
                errno.EINVAL,
                f"cannot send a {size}-byte frame on {self.iface!r}: "
                f"shorter than the {ETH_HLEN}-byte Ethernet header",
            )
        try:
            self._sock.send(frame)
        except BlockingIOError:
            raise TxQueueFullError(
                errno.EAGAIN, f"transmit queue of {self.iface!r} is full; frame not sent"
            ) from None
        except OSError as exc:
            if exc.errno == errno.EMSGSIZE:
                raise FrameSizeError(
                    exc.errno,
                    f"cannot send a {size}-byte frame on {self.iface!r}: larger than its MTU",
                ) from None
            if exc.errno == errno.ENOBUFS:
                raise TxQueueFullError(
                    exc.errno, f"no buffer space on {self.iface!r}; frame not sent"
                ) from None
            if exc.errno in _LINK_GONE:
                # The kernel also queued ENETDOWN as a pending socket error when the link
                # went down; this report covers it, so clear it instead of failing the
                # first send after the link is back up.
                self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            raise self._mapped(exc, "send on") from None
        self.stats.sent += 1

    def _mapped(self, exc: OSError, action: str) -> RawSocketError:
        if exc.errno in _LINK_GONE:
            state = "down" if exc.errno == errno.ENETDOWN else "gone"
            return LinkDownError(
                exc.errno, f"cannot {action} {self.iface!r}: interface is {state} ({exc.strerror})"
            )
        return RawSocketError(exc.errno, f"cannot {action} {self.iface!r}: {exc.strerror}")

    # -- lifetime ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._sock.fileno() < 0

    def close(self) -> None:
        """Close the socket; the kernel drops its memberships and promiscuous count with it.
        The kernel's counters are read one last time first (`kernel` keeps them)."""
        if not self.closed:
            with contextlib.suppress(OSError):
                self.kernel_stats()
        if self.ring is not None:
            self.ring.close()
        self._sock.close()

    def __enter__(self) -> RawSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "promiscuous" if self.promiscuous else f"{len(self._groups)} groups"
        return f"<RawSocket {self.iface!r} ethertype={self.ethertype:#06x} {mode} {self.rx_mode}>"
