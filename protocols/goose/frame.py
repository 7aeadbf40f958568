"""The full GOOSE frame model and its two entry points, `decode_frame` / `encode_frame`.

`decode_frame` is `parse_header` plus a full decode of allData and the check that
numDatSetEntries matches it. `encode_frame` always writes the canonical form: minimal
BER lengths and integers, every optional-with-default field present (as libiec61850 and
every captured IED do), goID only when set, unknown PDU elements after allData.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from goosectl.protocols.goose.ber import encode_signed, tlv
from goosectl.protocols.goose.data import Data
from goosectl.protocols.goose.datacodec import decode_sequence, encode_all_data, encode_visible
from goosectl.protocols.goose.errors import BadLength, BadValue, GooseError, TypeMismatch
from goosectl.protocols.goose.header import S_BIT, UnknownField, Vlan, parse_fields
from goosectl.protocols.goose.utctime import UtcTime

DEFAULT_DST = bytes.fromhex("010ccd010000")
_EPOCH = UtcTime(0)


@dataclass(slots=True, unsafe_hash=True)
class GooseFrame:
    """One GOOSE frame: Ethernet/802.1Q/GOOSE header fields plus the goosePdu.

    MAC addresses are 6-byte ``bytes`` (see `mac()`); ``reserved1`` holds the S-bit in
    bit 15 (`simulated`). ``num_dat_set_entries`` None means "len(all_data)". Build it with
    keywords; treat it as immutable (not frozen only because that triples decode cost).
    """

    gocb_ref: str
    dat_set: str
    all_data: tuple[Data, ...] = ()
    time_allowed_to_live: int = 2000
    go_id: str | None = None
    t: UtcTime = _EPOCH
    st_num: int = 1
    sq_num: int = 0
    simulation: bool = False
    conf_rev: int = 1
    nds_com: bool = False
    num_dat_set_entries: int | None = None
    dst: bytes = DEFAULT_DST
    src: bytes = bytes(6)
    vlan: Vlan | None = None
    appid: int = 0
    reserved1: int = 0
    reserved2: int = 0
    unknown: tuple[UnknownField, ...] = ()
    security: bytes = b""
    trailer: bytes = b""
    #: Octet widths of padded header INTEGERs as received, in the order timeAllowedtoLive,
    #: stNum, sqNum, confRev, numDatSetEntries (None = minimal). Real IEDs pad (the ITI
    #: demo frame sends 5-octet integers); keeping the width makes re-encoding exact.
    int_widths: tuple[int | None, ...] | None = field(default=None, compare=False)
    #: Header fields that arrived as negative INTEGERs and were read as unsigned (see
    #: `GooseHeader.non_canonical`); `encode_frame` writes them canonically.
    non_canonical: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.num_dat_set_entries is None:
            self.num_dat_set_entries = len(self.all_data)

    @property
    def simulated(self) -> bool:
        """The S-bit (Reserved1 bit 15)."""
        return bool(self.reserved1 & S_BIT)


def mac(text: str) -> bytes:
    """'01:0c:cd:01:00:01' (or '-' separated) -> 6 bytes."""
    parts = text.replace("-", ":").split(":")
    try:
        raw = bytes(int(p, 16) for p in parts)
    except ValueError:
        raise TypeMismatch(f"{text!r} is not a MAC address") from None
    if len(raw) != 6 or any(len(p) not in (1, 2) for p in parts):
        raise TypeMismatch(f"{text!r} is not a MAC address")
    return raw


def mac_str(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def decode_frame(buf: bytes, *, vlan: Vlan | None = None) -> GooseFrame:
    """Bytes of one Ethernet frame -> GooseFrame; any defect raises a GooseError."""
    (
        dst, src, vlan, appid, _length, reserved1, reserved2,
        gocb_ref, tal, dat_set, go_id, t, st_num, sq_num, simulation, conf_rev, nds_com, nde,
        all_data_raw, ad_start, unknown, security, trailer, buf, sizes, non_canonical,
    ) = parse_fields(buf, vlan)  # fmt: skip
    all_data = decode_sequence(buf, ad_start, ad_start + len(all_data_raw), 0, "allData")
    if nde != len(all_data):
        raise BadValue(
            f"numDatSetEntries {nde} but allData has {len(all_data)} entries",
            offset=ad_start,
            path="numDatSetEntries",
        )
    widths = None
    if (
        sizes[1] > _min_size(tal)
        or sizes[5] > _min_size(st_num)
        or sizes[6] > _min_size(sq_num)
        or sizes[8] > _min_size(conf_rev)
        or sizes[10] > _min_size(nde)
    ):
        widths = tuple(
            sizes[j] if sizes[j] > _min_size(v) else None
            for j, v in ((1, tal), (5, st_num), (6, sq_num), (8, conf_rev), (10, nde))
        )
    return GooseFrame(
        gocb_ref, dat_set, all_data, tal, go_id, t, st_num, sq_num, simulation, conf_rev,
        nds_com, nde, dst, src, vlan, appid, reserved1, reserved2, unknown, security, trailer,
        widths, non_canonical,
    )  # fmt: skip


def _min_size(value: int) -> int:
    """Octets of the minimal encoding of a non-negative INTEGER."""
    return (value.bit_length() >> 3) + 1


def _u32(value: object, name: str, width: int | None = None) -> bytes:
    if type(value) is not int:
        raise TypeMismatch(f"must be int, got {type(value).__name__}", path=name)
    if not 0 <= value <= 0xFFFFFFFF:
        raise BadValue(f"{value} outside 0..2**32-1", path=name)
    return encode_signed(value, width)


def _width(frame: GooseFrame, index: int) -> int | None:
    widths = frame.int_widths
    if widths is None or len(widths) != 5:
        return None
    return widths[index]


def _u16(value: object, name: str) -> bytes:
    if type(value) is not int or not 0 <= value <= 0xFFFF:
        raise BadValue(f"{value!r} is not an integer in 0..65535", path=name)
    return value.to_bytes(2, "big")


def _mac(value: object, name: str) -> bytes:
    if type(value) is not bytes or len(value) != 6:
        raise TypeMismatch(f"MAC must be 6 bytes (use mac('..')), got {value!r}", path=name)
    return value


def _vstr(value: object, tag: int, name: str) -> bytes:
    try:
        return encode_visible(value, tag)
    except GooseError as exc:
        raise exc.prefix_path(name) from None


def encode_pdu_fields(
    frame: GooseFrame,
) -> tuple[bytes, bytes, bytes, bytes]:
    """The goosePdu pieces that do not change per retransmission, for `FrameTemplate`:
    (gocbRef TLV, datSet+goID TLVs, simulation TLV, confRev+ndsCom+numDatSetEntries TLVs)."""
    return (
        _vstr(frame.gocb_ref, 0x80, "gocbRef"),
        _vstr(frame.dat_set, 0x82, "datSet")
        + (b"" if frame.go_id is None else _vstr(frame.go_id, 0x83, "goID")),
        b"\x87\x01\x01" if frame.simulation else b"\x87\x01\x00",
        tlv(0x88, _u32(frame.conf_rev, "confRev", _width(frame, 3)))
        + (b"\x89\x01\x01" if frame.nds_com else b"\x89\x01\x00")
        + tlv(0x8A, _u32(frame.num_dat_set_entries, "numDatSetEntries", _width(frame, 4))),
    )


def ethernet_header(frame: GooseFrame) -> bytes:
    """dst, src, optional 802.1Q tag, EtherType 0x88B8, APPID (Length follows)."""
    head = _mac(frame.dst, "dst") + _mac(frame.src, "src")
    if frame.vlan is not None:
        head += b"\x81\x00" + frame.vlan.tci().to_bytes(2, "big")
    return head + b"\x88\xb8" + _u16(frame.appid, "appid")


def encode_time(t: object) -> bytes:
    if type(t) is not UtcTime:
        raise TypeMismatch(f"t must be a UtcTime, got {type(t).__name__}", path="t")
    try:
        return b"\x84\x08" + t.to_bytes()
    except GooseError as exc:
        raise exc.prefix_path("t") from None


def encode_frame(frame: GooseFrame) -> bytes:
    """GooseFrame -> canonical frame bytes (no Ethernet padding is added)."""
    gocb, datset_goid, simulation, tail = encode_pdu_fields(frame)
    extra = b"".join(tlv(u.tag, u.value) for u in frame.unknown)
    pdu = b"".join(
        (
            gocb,
            tlv(0x81, _u32(frame.time_allowed_to_live, "timeAllowedtoLive", _width(frame, 0))),
            datset_goid,
            encode_time(frame.t),
            tlv(0x85, _u32(frame.st_num, "stNum", _width(frame, 1))),
            tlv(0x86, _u32(frame.sq_num, "sqNum", _width(frame, 2))),
            simulation,
            tail,
            tlv(0xAB, encode_all_data(frame.all_data)),
            extra,
        )
    )
    apdu = tlv(0x61, pdu) + frame.security
    length = 8 + len(apdu)
    if length > 0xFFFF:
        raise BadLength(f"frame needs Length {length} > 65535", path="length")
    return b"".join(
        (
            ethernet_header(frame),
            length.to_bytes(2, "big"),
            _u16(frame.reserved1, "reserved1"),
            _u16(frame.reserved2, "reserved2"),
            apdu,
            frame.trailer,
        )
    )
