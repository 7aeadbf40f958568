"""Fast, strict parse of a GOOSE frame up to (not into) allData: the subscriber's hot path.

The subscriber classifies nearly every frame from the header alone and compares the raw
allData bytes with the previous frame's; it decodes allData only on a state change. So
`parse_header` validates every length and every header field but returns allData as a
bytes slice plus its absolute offset; `GooseHeader.decode_all_data()` does the rest.

The goosePdu is walked with one table (`PDU_FIELDS`): tag, name, how to read it, whether
it is mandatory. Known fields must come in ASN.1 order; unknown tags are skipped and
reported in ``unknown``; bytes after the goosePdu inside Length are the IEC 62351-6
security extension; bytes after Length (Ethernet padding) are ``trailer``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from goosectl.protocols.goose.ber import decode_unsigned, read_length
from goosectl.protocols.goose.data import Data
from goosectl.protocols.goose.datacodec import decode_sequence, visible_text
from goosectl.protocols.goose.errors import BadLength, BadTag, BadValue, GooseError, Truncated
from goosectl.protocols.goose.utctime import _SECONDS_REST, UtcTime

ETHERTYPE_GOOSE = 0x88B8
TPID_8021Q = 0x8100
#: Reserved1 bit 15: the simulation (S) bit of IEC 61850-8-1 Ed2.
S_BIT = 0x8000
#: Largest frame accepted: the 16-bit Length field plus Ethernet + one 802.1Q header, plus
#: room for a trailer. Anything bigger is not a frame the codec will look at.
MAX_FRAME = 0xFFFF + 18 + 64


@dataclass(slots=True, frozen=True)
class Vlan:
    """An 802.1Q tag: VLAN id (12 bits), priority (PCP, 3 bits), drop-eligible bit."""

    id: int
    priority: int = 4
    dei: int = 0

    def tci(self) -> int:
        if not (0 <= self.id <= 0xFFF and 0 <= self.priority <= 7 and self.dei in (0, 1)):
            raise BadValue(f"VLAN id/priority/dei out of range: {self}", path="vlan")
        return self.priority << 13 | self.dei << 12 | self.id


@dataclass(slots=True, frozen=True)
class UnknownField:
    """A goosePdu element whose tag this codec does not know; skipped, kept, reported."""

    tag: int
    value: bytes
    offset: int | None = None

    def __eq__(self, other: object) -> bool:  # offset is where it was, not what it is
        return type(other) is UnknownField and (self.tag, self.value) == (other.tag, other.value)

    def __hash__(self) -> int:
        return hash((self.tag, self.value))


@dataclass(slots=True)
class GooseHeader:
    """Everything the subscriber needs from a frame, with allData still undecoded."""

    dst: bytes
    src: bytes
    vlan: Vlan | None
    appid: int
    length: int
    reserved1: int
    reserved2: int
    gocb_ref: str
    time_allowed_to_live: int
    dat_set: str
    go_id: str | None
    t: UtcTime
    st_num: int
    sq_num: int
    simulation: bool
    conf_rev: int
    nds_com: bool
    num_dat_set_entries: int
    all_data: bytes
    all_data_offset: int
    unknown: tuple[UnknownField, ...]
    security: bytes
    trailer: bytes
    buffer: bytes
    #: content octets of each PDU_FIELDS entry as received (0 = absent); lets decode_frame
    #: remember padded integer widths without slowing the parse down
    sizes: list[int]
    #: unsigned header fields that arrived as negative BER INTEGERs (top bit set, e.g.
    #: sqNum ``86 02 ff ff`` as attack tools write it), read as unsigned like libiec61850
    #: and tshark do; empty for a canonical frame
    non_canonical: tuple[str, ...] = ()

    @property
    def simulated(self) -> bool:
        """The S-bit (Reserved1 bit 15)."""
        return bool(self.reserved1 & S_BIT)

    def decode_all_data(self) -> tuple[Data, ...]:
        """Decode allData now; error offsets are absolute in the original frame."""
        start = self.all_data_offset
        return decode_sequence(self.buffer, start, start + len(self.all_data), 0, "allData")


# --- goosePdu field readers: (buf, start, stop) -> value ----------------------------


class _TopBit(Exception):
    """An unsigned field of 1-4 octets with its top bit set: the value as unsigned.

    Raised rather than returned so the canonical case costs nothing: the parse loop
    catches it, keeps the value and names the field in ``non_canonical``."""

    def __init__(self, value: int) -> None:
        self.value = value


def _u32(buf: bytes, start: int, stop: int) -> int:
    n = stop - start
    if 0 < n < 5:
        first = buf[start]
        if first < 0x80 and (n == 1 or first or buf[start + 1] & 0x80):
            return int.from_bytes(buf[start:stop], "big")
        if first >= 0x80:
            # BER says negative; stNum, sqNum, confRev, TAL and numDatSetEntries cannot be,
            # and both peers (libiec61850, tshark for stNum/sqNum) read the octets unsigned
            raise _TopBit(int.from_bytes(buf[start:stop], "big"))
    return decode_unsigned(buf[start:stop], start, 8, 32)


def _bool(buf: bytes, start: int, stop: int) -> bool:
    if stop - start != 1:
        raise BadLength(f"BOOLEAN needs 1 octet, got {stop - start}", offset=start)
    return buf[start] != 0


def _utc(buf: bytes, start: int, stop: int) -> UtcTime:
    if stop - start != 8:
        raise BadLength(f"UtcTime needs 8 octets, got {stop - start}", offset=start)
    seconds, rest = _SECONDS_REST(buf, start)
    return UtcTime(seconds, rest >> 8, rest & 0xFF)


def _span(buf: bytes, start: int, stop: int) -> tuple[int, int]:
    return start, stop


#: The goosePdu SEQUENCE (IEC 61850-8-1): tag, field name, reader, mandatory, default.
#: simulation and ndsCom are BOOLEAN DEFAULT FALSE, so they may be absent on the wire.
PDU_FIELDS: tuple[tuple[int, str, Callable[[bytes, int, int], object], bool, object], ...] = (
    (0x80, "gocbRef", visible_text, True, None),
    (0x81, "timeAllowedtoLive", _u32, True, None),
    (0x82, "datSet", visible_text, True, None),
    (0x83, "goID", visible_text, False, None),
    (0x84, "t", _utc, True, None),
    (0x85, "stNum", _u32, True, None),
    (0x86, "sqNum", _u32, True, None),
    (0x87, "simulation", _bool, False, False),
    (0x88, "confRev", _u32, True, None),
    (0x89, "ndsCom", _bool, False, False),
    (0x8A, "numDatSetEntries", _u32, True, None),
    (0xAB, "allData", _span, True, None),
)
_BY_TAG = {row[0]: (i, row[1], row[2]) for i, row in enumerate(PDU_FIELDS)}
_NAMES = tuple(row[1] for row in PDU_FIELDS)
_MANDATORY = tuple(row[3] for row in PDU_FIELDS)
_DEFAULTS = tuple(row[4] for row in PDU_FIELDS)
_NFIELDS = len(PDU_FIELDS)
#: the index of the last mandatory goosePdu field
_LAST_MANDATORY = max(i for i, m in enumerate(_MANDATORY) if m)
_HEADER = struct.Struct(">HHHH").unpack_from


def is_goose(buf: bytes) -> bool:
    """Cheap pre-filter: EtherType 0x88B8, untagged or behind one 802.1Q tag."""
    if len(buf) < 14:
        return False
    if buf[12] == 0x81 and buf[13] == 0x00:
        return len(buf) >= 18 and buf[16] == 0x88 and buf[17] == 0xB8
    return buf[12] == 0x88 and buf[13] == 0xB8


def parse_header(buf: bytes, *, vlan: Vlan | None = None) -> GooseHeader:
    """Parse and validate a whole GOOSE frame except the content of allData.

    ``vlan`` is the tag the kernel stripped (from PACKET_AUXDATA), if any; a tag still in
    the buffer takes precedence.
    """
    return GooseHeader(*parse_fields(buf, vlan))


def parse_fields(buf: bytes, vlan: Vlan | None) -> list[Any]:
    """GooseHeader's fields in order, as a list (`decode_frame` builds its own model)."""
    if type(buf) is not bytes:
        buf = bytes(buf)
    if (n := len(buf)) > MAX_FRAME or n < 14:
        raise _bad_size(n)
    etype, off = buf[12] << 8 | buf[13], 14
    if etype == TPID_8021Q:
        vlan, etype, off = _inline_tag(buf, n)
    if etype != ETHERTYPE_GOOSE or n < off + 8:
        raise _bad_ethertype(etype, off, n)
    appid, length, reserved1, reserved2 = _HEADER(buf, off)
    if length < 8 or (apdu_end := off + length) > n:
        raise _bad_apdu_length(length, off, n)
    if (pos := off + 8) >= apdu_end or buf[pos] != 0x61:
        raise _bad_pdu_tag(buf, pos, apdu_end)
    vals: list[Any] = list(_DEFAULTS)  # one slot per goosePdu field, each its own type
    sizes = [0] * _NFIELDS
    unknown: list[UnknownField] = []
    non_canonical: tuple[str, ...] = ()
    expect, by_tag, name = 0, _BY_TAG, "goosePdu"
    try:
        pdu_len, pos = read_length(buf, pos + 1, apdu_end)
        pdu_end = pos + pdu_len
        while pos < pdu_end:
            tag = buf[pos]
            if pos + 1 >= pdu_end:
                raise Truncated(f"element 0x{tag:02x} has no length octet", offset=pos)
            ln = buf[pos + 1]
            if ln < 0x80:
                start = pos + 2
            else:  # long form: read_length checks that it fits
                ln, start = read_length(buf, pos + 1, pdu_end)
            stop = start + ln
            if stop > pdu_end:
                raise _bad_element_length(ln, pos, pdu_end - start)
            entry = by_tag.get(tag)
            if entry is None:
                unknown.append(UnknownField(tag, buf[start:stop], pos))
                pos = stop
                continue
            i, name, reader = entry
            if i != expect and (j := _first_missing(i, expect, name, tag, pos)) is not None:
                name = _NAMES[j]  # the error is the missing field's
                raise BadTag(f"{name} is missing (found 0x{tag:02x} instead)", offset=pos)
            try:
                vals[i] = reader(buf, start, stop)
            except _TopBit as top:
                vals[i], non_canonical = top.value, (*non_canonical, name)
            sizes[i], expect, pos = stop - start, i + 1, stop
    except GooseError as exc:
        raise exc.prefix_path(name) from None
    if expect <= _LAST_MANDATORY:
        raise _ends_early(expect, pdu_end)
    ad_start, ad_stop = vals[11]
    vals[11] = buf[ad_start:ad_stop]
    return [buf[0:6], buf[6:12], vlan, appid, length, reserved1, reserved2, *vals, ad_start,
            tuple(unknown), buf[pdu_end:apdu_end], buf[apdu_end:], buf, sizes,
            non_canonical]  # fmt: skip


def _inline_tag(buf: bytes, n: int) -> tuple[Vlan, int, int]:
    """An 802.1Q tag still in the buffer (the kernel strips it on most NICs): the tag, the
    EtherType behind it, the offset after it."""
    if n < 18:
        raise Truncated("802.1Q tag cut short", offset=n, path="vlan")
    tci = buf[14] << 8 | buf[15]
    return Vlan(tci & 0xFFF, tci >> 13, (tci >> 12) & 1), buf[16] << 8 | buf[17], 18


def _ends_early(expect: int, pdu_end: int) -> GooseError:
    """goosePdu ended with a mandatory field from `expect` on still missing."""
    name = next(_NAMES[j] for j in range(expect, _NFIELDS) if _MANDATORY[j])
    return Truncated(f"goosePdu ends before {name}", offset=pdu_end, path=name)


def _bad_size(n: int) -> GooseError:
    """A frame over the cap, or shorter than an Ethernet header. (The `_bad_*` helpers
    build `parse_fields`' errors, so its common path stays one straight function: it runs
    for every new state.)"""
    if n > MAX_FRAME:
        return BadLength(f"frame of {n} octets exceeds the {MAX_FRAME}-octet cap", offset=0)
    return Truncated(f"Ethernet header needs 14 octets, got {n}", offset=n, path="ethernet")


def _bad_ethertype(etype: int, off: int, n: int) -> GooseError:
    """Not GOOSE, or a GOOSE header (APPID, Length, Reserved) cut short."""
    if etype != ETHERTYPE_GOOSE:
        return BadValue(
            f"EtherType 0x{etype:04x} is not GOOSE (0x88b8)", offset=off - 2, path="ethertype"
        )
    return Truncated("GOOSE header (APPID, Length, Reserved) cut short", offset=n, path="appid")


def _bad_apdu_length(length: int, off: int, n: int) -> GooseError:
    """A Length below the header's own 8 octets, or beyond the frame's end."""
    if length < 8:
        return BadLength(f"Length {length} < 8 (the header alone)", offset=off + 2, path="length")
    return Truncated(
        f"Length {length} announces {off + length - n} octets more than the frame has",
        offset=off + 2,
        path="length",
    )


def _bad_pdu_tag(buf: bytes, pos: int, apdu_end: int) -> GooseError:
    """No goosePdu after the header, or another tag where it should start."""
    if pos >= apdu_end:
        return Truncated("no goosePdu after the header", offset=pos, path="goosePdu")
    return BadTag(f"goosePdu tag 0x{buf[pos]:02x} (want 0x61)", offset=pos, path="goosePdu")


def _bad_element_length(ln: int, pos: int, left: int) -> GooseError:
    """An element whose short-form length runs past the end of goosePdu."""
    return Truncated(f"length {ln} runs past the end of goosePdu ({left} left)", offset=pos + 1)


def _first_missing(i: int, expect: int, name: str, tag: int, pos: int) -> int | None:
    """Field `i` (`name`) found where field `expect` was due: None if only optional fields
    were skipped, else the first mandatory field skipped; a repeated or out-of-order field
    raises here."""
    if i < expect:
        raise BadTag(f"{name} (0x{tag:02x}) is repeated or out of order", offset=pos)
    return next((j for j in range(expect, i) if _MANDATORY[j]), None)
