"""pcap and pcapng reading, classic-pcap writing: the replay engine's file I/O.

`read_capture` detects the format by magic number (never by file name): classic pcap in
either byte order with micro- or nanosecond timestamps, and pcapng (SHB, IDB with
if_tsresol / if_tsoffset, EPB, SPB, the obsolete PB; other blocks skipped; several
sections). Timestamps come out as integer nanoseconds, so replay never rounds through
floats. A file it cannot read raises `CaptureError` naming the path, offset and reason,
after yielding every frame before the defect. Records are streamed from the file (one in
memory at a time), so a capture's size costs no memory.

`PcapWriter` writes classic little-endian pcap with nanosecond timestamps (magic
0xa1b23c4d): byte-for-byte deterministic for the same frames and times.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, NamedTuple

from goosectl.protocols.files import open_new

LINKTYPE_ETHERNET = 1
#: Largest captured length accepted per packet (libpcap's own maximum).
MAX_SNAPLEN = 262_144
#: Largest pcapng block accepted (a packet plus generous options).
MAX_BLOCK = MAX_SNAPLEN + 65_536
#: Read buffer: records are read one by one from it, never the whole file.
_BUFFER = 1 << 16

_PCAP_MAGIC = {
    b"\xd4\xc3\xb2\xa1": ("<", 1_000),  # little-endian, microseconds
    b"\xa1\xb2\xc3\xd4": (">", 1_000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),  # nanoseconds
    b"\xa1\xb2\x3c\x4d": (">", 1),
}
_SHB = 0x0A0D0D0A
_IDB, _PB, _SPB, _EPB = 1, 2, 3, 6
_BOM = 0x1A2B3C4D


class CaptureError(Exception):
    """A capture file that cannot be read: where and why."""

    def __init__(self, path: str | Path, offset: int, reason: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.reason = reason
        super().__init__(f"{path}: offset {offset}: {reason}")


class CapturedFrame(NamedTuple):
    number: int  # 1-based, counting every packet in the file
    ts_ns: int  # nanoseconds since the Unix epoch
    data: bytes
    linktype: int


def read_capture(path: str | Path) -> Iterator[CapturedFrame]:
    """Iterate the packets of a pcap or pcapng file, streaming: one record in memory at a
    time, so a capture of any size (or a FIFO still being written) replays in constant
    memory. The file is opened and its magic number checked now; a defect further on is
    raised when iteration reaches it."""
    try:
        fh = open(path, "rb", buffering=_BUFFER)  # noqa: SIM115 - the reader closes it
    except OSError as exc:
        raise CaptureError(path, 0, f"cannot open: {exc.strerror or exc}") from None
    try:
        magic = fh.read(4)
    except OSError as exc:
        fh.close()
        raise CaptureError(path, 0, f"cannot read: {exc.strerror or exc}") from None
    if len(magic) < 4:
        fh.close()
        raise CaptureError(path, 0, f"file of {len(magic)} bytes has no magic number")
    if magic in _PCAP_MAGIC:
        return _closing(fh, _read_pcap(path, fh, magic))
    if int.from_bytes(magic, "little") == _SHB:
        return _closing(fh, _read_pcapng(path, fh, magic))
    fh.close()
    raise CaptureError(path, 0, f"magic {magic.hex()} is neither pcap nor pcapng")


def _closing(fh: BinaryIO, records: Iterator[CapturedFrame]) -> Iterator[CapturedFrame]:
    """The records, closing the file when they end, fail, or the caller stops early."""
    try:
        yield from records
    finally:
        fh.close()


def _read_pcap(path: str | Path, fh: BinaryIO, magic: bytes) -> Iterator[CapturedFrame]:
    endian, scale = _PCAP_MAGIC[magic]
    rest = fh.read(20)
    if len(rest) < 20:
        raise CaptureError(path, 0, "pcap global header needs 24 bytes")
    (network,) = struct.unpack_from(endian + "I", rest, 16)
    linktype = network & 0x0FFFFFFF  # upper bits carry FCS information
    record = struct.Struct(endian + "IIII").unpack
    limit = 1_000_000 if scale != 1 else 1_000_000_000
    unit = "microsecond" if scale != 1 else "nanosecond"
    read = fh.read
    off = 24
    number = 0
    while True:
        head = read(16)
        if not head:
            return
        if len(head) < 16:
            raise CaptureError(path, off, f"record header cut short ({len(head)} of 16 bytes)")
        sec, frac, incl, _orig = record(head)
        if incl > MAX_SNAPLEN:
            raise CaptureError(path, off, f"captured length {incl} exceeds {MAX_SNAPLEN}")
        if frac >= limit:
            raise CaptureError(path, off, f"{unit} field {frac} >= {limit}")
        data = read(incl)
        if len(data) < incl:
            raise CaptureError(path, off, f"packet data cut short ({len(data)} of {incl} bytes)")
        number += 1
        yield CapturedFrame(number, sec * 1_000_000_000 + frac * scale, data, linktype)
        off += 16 + incl


class _Iface(NamedTuple):
    linktype: int
    snaplen: int
    units_per_s: int  # timestamp units per second
    offset_s: int


def _idb(path: str | Path, body: bytes, at: int, e: str) -> _Iface:
    if len(body) < 8:
        raise CaptureError(path, at, "interface description block too short")
    linktype, _res, snaplen = struct.unpack_from(e + "HHI", body, 0)
    units, offset_s = 1_000_000, 0
    for code, value in _options(path, body, 8, at, e):
        if code == 9:
            if len(value) != 1:
                raise CaptureError(path, at, "if_tsresol must be one byte")
            r = value[0]
            exp = r & 0x7F
            if exp > (63 if r & 0x80 else 18):
                raise CaptureError(path, at, f"if_tsresol 0x{r:02x} is out of range")
            units = (2**exp) if r & 0x80 else 10**exp
        elif code == 14:
            if len(value) != 8:
                raise CaptureError(path, at, "if_tsoffset must be eight bytes")
            (offset_s,) = struct.unpack(e + "q", value)
    return _Iface(linktype, snaplen, units, offset_s)


def _options(
    path: str | Path, body: bytes, off: int, at: int, e: str
) -> Iterator[tuple[int, bytes]]:
    n = len(body)
    while off + 4 <= n:
        code, length = struct.unpack_from(e + "HH", body, off)
        if code == 0:
            return
        end = off + 4 + length
        if end > n:
            raise CaptureError(path, at, f"option {code} runs past its block")
        yield code, body[off + 4 : end]
        off = end + (-length % 4)


def _read_pcapng(path: str | Path, fh: BinaryIO, magic: bytes) -> Iterator[CapturedFrame]:
    """Every packet of a pcapng file, block by block (section headers reset the byte
    order and the interfaces); a block that is cut short or inconsistent raises
    `CaptureError` with its offset."""
    read = fh.read
    off = 0
    e = "<"
    ifaces: list[_Iface] = []
    number = 0
    head = magic + read(8)
    while head:
        btype, e = _block_type(path, head, off, e)
        if btype == _SHB:
            ifaces = []
        body, blen = _block_body(path, head, read, off, e)
        if btype == _IDB:
            ifaces.append(_idb(path, body, off, e))
        elif btype in (_EPB, _PB):
            number += 1
            yield _packet_block(path, body, off, e, btype == _EPB, ifaces, number)
        elif btype == _SPB:
            number += 1
            yield _simple_packet_block(path, body, off, e, ifaces, number)
        off += blen
        head = read(12)


def _block_type(path: str | Path, head: bytes, off: int, e: str) -> tuple[int, str]:
    """The block's type, and the byte order from here on (a section header sets it)."""
    if len(head) < 12:
        raise CaptureError(path, off, f"block header cut short ({len(head)} bytes left)")
    if int.from_bytes(head[0:4], "little") != _SHB:
        return struct.unpack_from(e + "I", head, 0)[0], e
    bom = head[8:12]
    if bom == b"\x4d\x3c\x2b\x1a":
        return _SHB, "<"
    if bom == b"\x1a\x2b\x3c\x4d":
        return _SHB, ">"
    raise CaptureError(path, off, f"bad byte-order magic {bom.hex()}")


def _block_body(
    path: str | Path, head: bytes, read: Callable[[int], bytes], off: int, e: str
) -> tuple[bytes, int]:
    """The rest of the block read, its length checked against its trailer: (the body
    between the length and the trailer, the block's length)."""
    (blen,) = struct.unpack_from(e + "I", head, 4)
    if blen < 12 or blen % 4 or blen > MAX_BLOCK:
        raise CaptureError(path, off, f"block length {blen} is invalid")
    rest = read(blen - 12)
    if len(rest) < blen - 12:
        left = 12 + len(rest)
        raise CaptureError(path, off, f"block of {blen} bytes cut short ({left} left)")
    block = head + rest
    (trailer,) = struct.unpack_from(e + "I", block, blen - 4)
    if trailer != blen:
        raise CaptureError(path, off, f"block length {blen} != trailing length {trailer}")
    return block[8 : blen - 4], blen


def _packet_block(
    path: str | Path, body: bytes, off: int, e: str, enhanced: bool, ifaces: list[_Iface],
    number: int,
) -> CapturedFrame:  # fmt: skip
    """An enhanced (or obsolete) packet block: its interface's time units and link type."""
    if len(body) < 20:
        raise CaptureError(path, off, "packet block too short")
    if enhanced:
        iface_id, hi, lo, caplen, _orig = struct.unpack_from(e + "IIIII", body, 0)
    else:
        iface_id, _drops, hi, lo, caplen, _orig = struct.unpack_from(e + "HHIIII", body, 0)
    if iface_id >= len(ifaces):
        raise CaptureError(path, off, f"packet names interface {iface_id}, not described")
    if 20 + caplen > len(body):
        raise CaptureError(path, off, f"captured length {caplen} runs past its block")
    iface = ifaces[iface_id]
    ts = (hi << 32) | lo
    ts_ns = ts * 1_000_000_000 // iface.units_per_s + iface.offset_s * 1_000_000_000
    return CapturedFrame(number, ts_ns, body[20 : 20 + caplen], iface.linktype)


def _simple_packet_block(
    path: str | Path, body: bytes, off: int, e: str, ifaces: list[_Iface], number: int
) -> CapturedFrame:
    """A simple packet block: the first interface's, no timestamp."""
    if not ifaces:
        raise CaptureError(path, off, "simple packet block before any interface")
    if len(body) < 4:
        raise CaptureError(path, off, "simple packet block too short")
    (orig,) = struct.unpack_from(e + "I", body, 0)
    iface = ifaces[0]
    caplen = min(orig, iface.snaplen or orig, len(body) - 4)
    return CapturedFrame(number, 0, body[4 : 4 + caplen], iface.linktype)


class PcapWriter:
    """Classic pcap, little-endian, nanosecond timestamps; deterministic output. The file
    is created new (`protocols.files.open_new`): an existing file or a planted link at the
    path is refused, never overwritten."""

    def __init__(
        self, path: str | Path, *, linktype: int = LINKTYPE_ETHERNET, snaplen: int = MAX_SNAPLEN
    ) -> None:
        self.path = Path(path)
        self.snaplen = snaplen
        # a new file only, never through a link (FileExistsError names the path)
        self._fh: BinaryIO | None = open_new(self.path)
        self._fh.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, snaplen, linktype))
        self.count = 0

    def write(self, data: bytes, ts_ns: int) -> None:
        """Append one packet captured at ``ts_ns`` (nanoseconds since the epoch)."""
        if self._fh is None:
            raise ValueError(f"{self.path}: writer is closed")
        if ts_ns < 0 or ts_ns >= 1 << 32 + 30:
            raise ValueError(f"timestamp {ts_ns} ns does not fit a pcap record")
        if len(data) > self.snaplen:
            raise ValueError(f"packet of {len(data)} bytes exceeds snaplen {self.snaplen}")
        sec, ns = divmod(ts_ns, 1_000_000_000)
        self._fh.write(struct.pack("<IIII", sec, ns, len(data), len(data)))
        self._fh.write(data)
        self.count += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
