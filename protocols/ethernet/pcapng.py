"""pcapng writing: what `goosectl capture` records, one file section per output file.

Why pcapng and not the classic pcap `PcapWriter` writes: a capture of a redundant pair
holds two interfaces (LAN A and LAN B), and only pcapng can say which one each frame came
in on (an Interface Description Block per side; tshark shows it as
``frame.interface_id`` / ``frame.interface_name``), carry the kernel's drop counts
(Interface Statistics Blocks) and a comment naming the program that wrote it. Reading
stays in `protocols.ethernet.pcap.read_capture`, which reads both formats.

Layout written (pcapng, draft-ietf-opsawg-pcapng): a Section Header Block (byte-order
magic, version 1.0, section length -1, options ``shb_userappl`` and ``opt_comment``),
one Interface Description Block per interface (LINKTYPE_ETHERNET, snaplen, ``if_name``,
``if_description``, ``if_tsresol`` 9: nanoseconds), Enhanced Packet Blocks (interface,
64-bit timestamp, lengths, data padded to 32 bits, ``epb_flags`` inbound), and at the
end one Interface Statistics Block per interface (``isb_starttime``, ``isb_endtime``,
``isb_ifrecv``, ``isb_ifdrop``). Everything little-endian. Same frames, times and
counters give the same bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, NamedTuple

LINKTYPE_ETHERNET = 1
MAX_SNAPLEN = 262_144

SHB = 0x0A0D0D0A
IDB = 0x00000001
ISB = 0x00000005
EPB = 0x00000006
BYTE_ORDER_MAGIC = 0x1A2B3C4D

OPT_END = 0
OPT_COMMENT = 1
SHB_HARDWARE = 2
SHB_OS = 3
SHB_USERAPPL = 4
IF_NAME = 2
IF_DESCRIPTION = 3
IF_TSRESOL = 9
IF_FILTER = 11
EPB_FLAGS = 2
ISB_STARTTIME = 2
ISB_ENDTIME = 3
ISB_IFRECV = 4
ISB_IFDROP = 5

#: epb_flags bits 0-1: the direction; 1 is inbound
EPB_INBOUND = 0b01

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class InterfaceInfo(NamedTuple):
    """What an Interface Description Block says about one capturing interface."""

    name: str
    description: str = ""
    filter: str = ""
    linktype: int = LINKTYPE_ETHERNET
    snaplen: int = MAX_SNAPLEN


class InterfaceStats(NamedTuple):
    """An Interface Statistics Block's counters: ``received`` is what the kernel let
    through the filter (delivered or dropped), ``dropped`` what it found no room for."""

    received: int
    dropped: int
    start_ns: int
    end_ns: int


def option(code: int, value: bytes) -> bytes:
    """One option: code, length, value padded to 32 bits."""
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def _options(opts: list[bytes]) -> bytes:
    return b"".join(opts) + (struct.pack("<HH", OPT_END, 0) if opts else b"")


def block(btype: int, body: bytes) -> bytes:
    """A block: type, total length, body (padded to 32 bits), total length again."""
    body += b"\0" * (-len(body) % 4)
    total = 12 + len(body)
    return struct.pack("<II", btype, total) + body + _U32.pack(total)


def _ts(ts_ns: int) -> bytes:
    """A 64-bit timestamp in nanoseconds (if_tsresol 9) as the high and low words."""
    if not 0 <= ts_ns < 1 << 64:
        raise ValueError(f"timestamp {ts_ns} ns does not fit 64 bits")
    return struct.pack("<II", ts_ns >> 32, ts_ns & 0xFFFFFFFF)


def section_header(userappl: str, comment: str = "", os_name: str = "") -> bytes:
    opts = [option(SHB_USERAPPL, userappl.encode())]
    if os_name:
        opts.append(option(SHB_OS, os_name.encode()))
    if comment:
        opts.append(option(OPT_COMMENT, comment.encode()))
    body = struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1) + _options(opts)
    return block(SHB, body)


def interface_description(iface: InterfaceInfo) -> bytes:
    opts = [option(IF_NAME, iface.name.encode())]
    if iface.description:
        opts.append(option(IF_DESCRIPTION, iface.description.encode()))
    if iface.filter:
        # first octet 0: a libpcap filter string (what dumpcap writes for -f)
        opts.append(option(IF_FILTER, b"\0" + iface.filter.encode()))
    opts.append(option(IF_TSRESOL, bytes([9])))
    body = struct.pack("<HHI", iface.linktype, 0, iface.snaplen) + _options(opts)
    return block(IDB, body)


def enhanced_packet(iface_id: int, ts_ns: int, data: bytes, flags: int = EPB_INBOUND) -> bytes:
    head = _U32.pack(iface_id) + _ts(ts_ns) + struct.pack("<II", len(data), len(data))
    pad = b"\0" * (-len(data) % 4)
    return block(EPB, head + data + pad + _options([option(EPB_FLAGS, _U32.pack(flags))]))


def interface_statistics(iface_id: int, ts_ns: int, stats: InterfaceStats) -> bytes:
    opts = [
        option(ISB_STARTTIME, _ts(stats.start_ns)),
        option(ISB_ENDTIME, _ts(stats.end_ns)),
        option(ISB_IFRECV, _U64.pack(stats.received)),
        option(ISB_IFDROP, _U64.pack(stats.dropped)),
    ]
    return block(ISB, _U32.pack(iface_id) + _ts(ts_ns) + _options(opts))


class PcapngWriter:
    """One pcapng section in one file: header and interfaces when opened, packets as they
    come, statistics when closed (`close(stats)`). ``size`` is the bytes written so far,
    for rotation by size."""

    def __init__(
        self,
        path: str | Path,
        interfaces: list[InterfaceInfo],
        *,
        userappl: str,
        comment: str = "",
        os_name: str = "",
    ) -> None:
        if not interfaces:
            raise ValueError("a pcapng section needs at least one interface")
        self.path = Path(path)
        self.interfaces = list(interfaces)
        self._fh: BinaryIO | None = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        head = section_header(userappl, comment, os_name)
        head += b"".join(interface_description(i) for i in self.interfaces)
        self._fh.write(head)
        self.size = len(head)
        self.count = 0

    def write(self, iface_id: int, ts_ns: int, data: bytes) -> None:
        """Append one frame received on interface ``iface_id`` at ``ts_ns``."""
        if self._fh is None:
            raise ValueError(f"{self.path}: writer is closed")
        if not 0 <= iface_id < len(self.interfaces):
            raise ValueError(f"interface {iface_id} was not described")
        if len(data) > self.interfaces[iface_id].snaplen:
            raise ValueError(f"packet of {len(data)} bytes exceeds the snaplen")
        rec = enhanced_packet(iface_id, ts_ns, data)
        self._fh.write(rec)
        self.size += len(rec)
        self.count += 1

    def close(self, stats: list[InterfaceStats] | None = None, ts_ns: int = 0) -> None:
        """Write one statistics block per interface (when given) and close the file."""
        if self._fh is None:
            return
        try:
            for i, st in enumerate(stats or []):
                self._fh.write(interface_statistics(i, ts_ns, st))
        finally:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> PcapngWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
