"""Memory-mapped receive rings for packet sockets (PACKET_RX_RING, TPACKET_V3 and V2).

Why a ring: a plain packet socket queues frames in its receive buffer (rmem, ~200 KiB by
default, charged with the skb's whole truesize, so a few hundred frames) and hands them
out one `recvmsg` at a time. A GOOSE burst at line rate fills that in about a millisecond
and the kernel drops the rest, counted only in PACKET_STATISTICS, which nobody read: the
"177 of 451 frames, no drop reported". A ring is memory shared with the kernel,
sized by us (default: a burst of 10,000 frames of 1,518 bytes), read with no system call
per frame.

Two layouts, because they trade differently (numbers measured on veth, kernel 6.18):

- TPACKET_V3 (``version=3``): frames packed back to back in blocks, a 300-byte GOOSE frame
  takes ~400 bytes of ring, not a fixed slot, and the reader is woken once per block. The
  kernel hands a block to user space only when it is full or its retire timer
  (``retire_ms``) fires, so a lone frame waits up to that long (p50 0.9 ms, p90 1.8 ms with
  a 1 ms timer, against 41 us for V2). Right for `listen` and anything that must hold a
  burst; wrong for a controller's trip path.
- TPACKET_V2 (``version=2``): one fixed slot per frame, the reader woken per frame like a
  plain socket. Right for `run`, where a frame's latency is the product.

Layouts (linux/if_packet.h; the kernel's packet_mmap.rst describes their use):

- ``tpacket_req3``: block_size, block_nr, frame_size, frame_nr, retire_blk_tov,
  sizeof_priv, feature_req_word (7 x u32); ``tpacket_req`` is the first four.
- ``tpacket_block_desc``: version, offset_to_priv, then ``tpacket_hdr_v1``: block_status,
  num_pkts, offset_to_first_pkt, blk_len, seq_num (u64), two timestamps; 48 bytes.
- ``tpacket3_hdr``: tp_next_offset, tp_sec, tp_nsec, tp_snaplen, tp_len, tp_status, tp_mac,
  tp_net, then ``tpacket_hdr_variant1``: tp_rxhash, tp_vlan_tci (u32), tp_vlan_tpid.
- ``tpacket2_hdr``: tp_status, tp_len, tp_snaplen, tp_mac, tp_net, tp_sec, tp_nsec,
  tp_vlan_tci (u16), tp_vlan_tpid.
- ``tpacket_stats_v3``: tp_packets, tp_drops, tp_freeze_q_cnt; V2 and plain sockets get
  ``tpacket_stats`` (the first two). Reading them resets them in the kernel, and the
  kernel adds the drops into tp_packets before reporting.

Ownership is a status word: TP_STATUS_USER means the kernel filled it and user space may
read it; writing TP_STATUS_KERNEL (0) gives it back. Blocks (V3) and slots (V2) are used in
ring order, so the reader keeps one cursor. The kernel sets TP_STATUS_LOSING on what it
hands over while it has drops not yet read with PACKET_STATISTICS: the reader sees a drop
in band, at no cost, and the socket then asks for the counters.

Memory order: the kernel publishes data before the status word (smp_wmb); on x86 loads are
not reordered with loads, so reading the status then the frame is enough. Weakly ordered
CPUs (ARM) would need a read barrier Python cannot issue; the ring is used there at the
user's risk and `version=0` (plain socket) is the safe choice.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from goosectl.protocols.ethernet.vlan import TPID_CTAG, VlanTag, inline_tag

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
#: PACKET_VERSION values for the layouts this module reads (TPACKET_V1 is 0)
TPACKET_VERSION = {2: 1, 3: 2}

TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1 << 0
TP_STATUS_LOSING = 1 << 2
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6

TPACKET_ALIGNMENT = 16
_SOCKADDR_LL = 20
_V2_HDR = 32
_V3_HDR = 48
_BLOCK_DESC = 48
_ETH_HLEN = 14

_REQ = struct.Struct("=4I")
_REQ3 = struct.Struct("=7I")
_BLOCK = struct.Struct("=III")  # at +8: block_status num_pkts offset_to_first_pkt
_STATUS = struct.Struct("=I")
_HDR3 = struct.Struct("=IIIIIIHHIIH")  # next sec nsec snaplen len status mac net rxhash tci tpid
_HDR2 = struct.Struct("=IIIHHIIHH")  # status len snaplen mac net sec nsec tci tpid
_STATS3 = struct.Struct("=III")
_STATS = struct.Struct("=II")

#: frames no one sends as GOOSE; a ring for less than a minimal frame is a config mistake
MIN_FRAME = 60
MAX_FRAME = 65_535


def tpacket_align(n: int) -> int:
    return (n + TPACKET_ALIGNMENT - 1) & ~(TPACKET_ALIGNMENT - 1)


def mac_offset(version: int) -> int:
    """Where the kernel puts an Ethernet frame's first byte, from the start of its header
    (tpacket_rcv: the header, a sockaddr_ll, the MAC header rounded up, aligned)."""
    hdr = _V3_HDR if version == 3 else _V2_HDR
    return tpacket_align(tpacket_align(hdr) + _SOCKADDR_LL + 16) - _ETH_HLEN


class RingSpecError(ValueError):
    """A ring that cannot be built as asked (says which field and why)."""


class RingError(OSError):
    """The kernel refused the ring (old kernel, no memory); the socket falls back."""


class RxFrame(NamedTuple):
    """One received frame: bytes as the kernel delivered them, the outer VLAN tag, kernel time.

    ``frame`` usually lacks the tag (the kernel stripped it); ``vlan`` reports it either
    way, from the ring header or auxdata, or from the bytes if it was left inline.
    ``ts_ns`` is CLOCK_REALTIME nanoseconds, or None when timestamps are off.
    """

    frame: bytes
    vlan: VlanTag | None
    ts_ns: int | None


class KernelStats(NamedTuple):
    """The kernel's receive counters for one socket, summed since it was opened.

    ``packets`` passed the filter (delivered or dropped), ``drops`` found no room (ring
    full or receive buffer full), ``freeze`` counts the times a V3 ring was full and the
    kernel stopped filling it until user space gave a block back."""

    packets: int = 0
    drops: int = 0
    freeze: int = 0

    def __add__(self, other: object) -> KernelStats:
        if not isinstance(other, KernelStats):
            return NotImplemented
        return KernelStats(*(a + b for a, b in zip(self, other, strict=True)))


def read_kernel_stats(sock: socket.socket) -> KernelStats:
    """PACKET_STATISTICS since the last call (the kernel resets them when read).

    A V3 ring gets ``tpacket_stats_v3``; V2 and plain sockets the shorter ``tpacket_stats``
    (no freeze count). The kernel's tp_packets already includes the drops."""
    raw = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _STATS3.size)
    if len(raw) >= _STATS3.size:
        return KernelStats(*_STATS3.unpack_from(raw))
    packets, drops = _STATS.unpack_from(raw)
    return KernelStats(packets, drops, 0)


class RingLayout(NamedTuple):
    """What is asked of the kernel (tpacket_req / tpacket_req3)."""

    block_size: int
    block_nr: int
    frame_size: int
    frame_nr: int

    @property
    def size(self) -> int:
        return self.block_size * self.block_nr


@dataclass(frozen=True)
class RingSpec:
    """How big a receive ring is and which layout it uses.

    ``frames`` frames of ``frame_bytes`` bytes (the wire size without FCS; 1,518 covers a
    full-size tagged frame) fit in it with no reader at all: that is the burst a stalled
    reader survives. ``block_bytes`` is the unit the kernel allocates (a power of two, at
    least a page). ``retire_ms`` is V3's block timer: the longest a lone frame waits.
    ``version`` 3 or 2 picks the layout (see the module docstring)."""

    version: int = 3
    frames: int = 10_000
    frame_bytes: int = 1518
    block_bytes: int = 8 * 1024
    retire_ms: int = 1

    def __post_init__(self) -> None:
        if self.version not in TPACKET_VERSION:
            raise RingSpecError(f"version: {self.version!r} is not 2 or 3 (TPACKET_V2/V3)")
        if not 1 <= self.frames <= 10_000_000:
            raise RingSpecError(f"frames: {self.frames} is not between 1 and 10,000,000")
        if not MIN_FRAME <= self.frame_bytes <= MAX_FRAME:
            raise RingSpecError(
                f"frame_bytes: {self.frame_bytes} is not between {MIN_FRAME} and {MAX_FRAME}"
            )
        page = mmap.PAGESIZE
        b = self.block_bytes
        if b < page or b & (b - 1):
            raise RingSpecError(
                f"block_bytes: {b} is not a power of two of at least the page size ({page})"
            )
        if self.slot > b - (_BLOCK_DESC if self.version == 3 else 0):
            raise RingSpecError(
                f"block_bytes: {b} cannot hold one {self.frame_bytes}-byte frame "
                f"({self.slot} bytes with its header)"
            )
        if not 1 <= self.retire_ms <= 60_000:
            raise RingSpecError(f"retire_ms: {self.retire_ms} is not between 1 and 60,000")

    @property
    def slot(self) -> int:
        """Ring bytes one frame of ``frame_bytes`` takes, header and alignment included."""
        return tpacket_align(mac_offset(self.version) + self.frame_bytes)

    def layout(self) -> RingLayout:
        """Blocks enough for ``frames`` full-size frames.

        V3 gets two margins. First a quarter more blocks (at least two): the retire timer
        hands a block over part full whenever it fires mid-burst (since Linux 6.18 it
        fires every ``retire_ms`` and retires any block with a frame in it), and the
        rest of that block is lost to the burst. With small blocks (8 KiB: five
        full-size frames, twenty 300-byte ones) that spare absorbs hundreds of them.

        Then a third more on top, so the burst never fills more than three quarters of
        the ring. tpacket_rcv's flood check (``__packet_rcv_has_room``) reads, without
        the ring's lock, whether the block a quarter of the ring ahead is free, and
        failing that whether the open block is. Past three quarters only the second
        test can pass, and it races with the retire timer closing the open block on
        another CPU: the frame is dropped (counted in PACKET_STATISTICS, no freeze)
        with most of the ring still free. Measured on veth, 10,000 full-size frames
        into a ring sized to exactly hold them plus the first margin: one frame
        dropped in 3 to 6 runs of 100, always past three quarters; with this margin,
        none (see tests/ethernet/test_ring.py)."""
        b = self.block_bytes
        if self.version == 3:
            per_block = (b - _BLOCK_DESC) // self.slot
            need = -(-self.frames // per_block)
            usable = need + max(2, -(-need // 4))
            blocks = -(-usable * 4 // 3)
        else:
            per_block = b // self.slot
            blocks = -(-self.frames // per_block)
        return RingLayout(b, blocks, self.slot, per_block * blocks)


VlanOf = Callable[[int, int], VlanTag]


class RxRing:
    """A receive ring set up on a packet socket that is not bound yet, mapped, read in order.

    `read` copies out up to ``limit`` frames and gives each block (V3) or slot (V2) back to
    the kernel as soon as its last frame is copied. ``losing`` turns true when the kernel
    flagged a drop in band; the owner reads the counters and clears it."""

    def __init__(self, sock: socket.socket, spec: RingSpec) -> None:
        self.spec = spec
        self.version = spec.version
        self.layout = lay = spec.layout()
        self._sock = sock
        try:
            sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_VERSION[spec.version])
            v3 = spec.version == 3
            req = _REQ3.pack(*lay, spec.retire_ms, 0, 0) if v3 else _REQ.pack(*lay)
            sock.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
        except OSError as exc:
            raise RingError(
                exc.errno,
                f"the kernel refused a TPACKET_V{spec.version} receive ring of "
                f"{lay.block_nr} x {lay.block_size} bytes: {exc.strerror}",
            ) from None
        try:
            self.map = mmap.mmap(
                sock.fileno(), lay.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
            )
        except OSError as exc:
            self._unset()
            raise RingError(
                exc.errno or errno.ENOMEM,
                f"cannot map a {lay.size}-byte receive ring: {exc.strerror or exc}",
            ) from None
        self.losing = False
        self.truncated = 0
        # V3 cursor: block index, packets left in the open block, offset of the next one
        self._block = 0
        self._left = 0
        self._off = 0
        # V2 cursor: slot index and each slot's offset (slots never straddle blocks)
        self._slot = 0
        per_block = lay.block_size // lay.frame_size
        self._slots = [
            (i // per_block) * lay.block_size + (i % per_block) * lay.frame_size
            for i in range(lay.frame_nr)
        ] if spec.version == 2 else []  # fmt: skip
        self.read = self._read_v3 if spec.version == 3 else self._read_v2

    def _unset(self) -> None:
        with contextlib.suppress(OSError):
            req = _REQ3.pack(0, 0, 0, 0, 0, 0, 0) if self.version == 3 else _REQ.pack(0, 0, 0, 0)
            self._sock.setsockopt(SOL_PACKET, PACKET_RX_RING, req)

    def describe(self) -> str:
        lay = self.layout
        return f"tpacket_v{self.version} {lay.block_nr}x{lay.block_size // 1024}KiB"

    def _read_v3(self, limit: int, out: list[RxFrame], vlan_of: VlanOf, timestamps: bool) -> int:
        """Append up to ``limit`` frames to ``out``; returns how many were appended."""
        m = self.map
        bsize = self.layout.block_size
        nblocks = self.layout.block_nr
        unpack_hdr = _HDR3.unpack_from
        n = 0
        vlan: VlanTag | None
        while n < limit:
            if self._left == 0:
                base = self._block * bsize
                status, count, first = _BLOCK.unpack_from(m, base + 8)
                if not status & TP_STATUS_USER:
                    break
                if status & TP_STATUS_LOSING:
                    self.losing = True
                if count == 0:  # nothing in it (not expected): hand it straight back
                    _STATUS.pack_into(m, base + 8, TP_STATUS_KERNEL)
                    self._block = (self._block + 1) % nblocks
                    continue
                self._left = count
                self._off = base + first
            off = self._off
            nxt, sec, nsec, snap, length, st, mac, _, _, tci, tpid = unpack_hdr(m, off)
            start = off + mac
            data = m[start : start + snap]
            self._off = off + nxt
            self._left -= 1
            if self._left == 0:
                _STATUS.pack_into(m, self._block * bsize + 8, TP_STATUS_KERNEL)
                self._block = (self._block + 1) % nblocks
            if snap < length:
                self.truncated += 1
                continue
            if st & TP_STATUS_VLAN_VALID:
                vlan = vlan_of(tci & 0xFFFF, tpid if st & TP_STATUS_VLAN_TPID_VALID else TPID_CTAG)
            else:
                vlan = inline_tag(data)
            out.append(RxFrame(data, vlan, sec * 1_000_000_000 + nsec if timestamps else None))
            n += 1
        return n

    def _read_v2(self, limit: int, out: list[RxFrame], vlan_of: VlanOf, timestamps: bool) -> int:
        m = self.map
        slots = self._slots
        nslots = len(slots)
        unpack_hdr = _HDR2.unpack_from
        slot = self._slot
        n = 0
        vlan: VlanTag | None
        while n < limit:
            base = slots[slot]
            st, length, snap, mac, _, sec, nsec, tci, tpid = unpack_hdr(m, base)
            if not st & TP_STATUS_USER:
                break
            start = base + mac
            data = m[start : start + snap]
            _STATUS.pack_into(m, base, TP_STATUS_KERNEL)
            slot = slot + 1 if slot + 1 < nslots else 0
            if st & TP_STATUS_LOSING:
                self.losing = True
            if snap < length:
                self.truncated += 1
                continue
            if st & TP_STATUS_VLAN_VALID:
                vlan = vlan_of(tci, tpid if st & TP_STATUS_VLAN_TPID_VALID else TPID_CTAG)
            else:
                vlan = inline_tag(data)
            out.append(RxFrame(data, vlan, sec * 1_000_000_000 + nsec if timestamps else None))
            n += 1
        self._slot = slot
        return n

    def close(self) -> None:
        """Unmap (the kernel frees the ring when the socket closes)."""
        with contextlib.suppress(BufferError, ValueError):
            self.map.close()
