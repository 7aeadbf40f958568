"""BER codec for MMS Data (the elements of allData), as two tables applied by small loops.

``DECODERS`` maps a tag octet to a function ``(buf, start, stop, depth) -> Data``;
``ENCODERS`` maps a Data class to a function ``(value) -> TLV bytes``. Adding a Data
choice is one row in each table. Errors carry absolute offsets into ``buf`` and a field
path built while unwinding (``allData[3].structure[1]``).

Caps (so arbitrary bytes cannot recurse deeply or allocate without bound):
``MAX_DEPTH`` nested arrays/structures, ``MAX_ELEMENTS`` elements per allData, array or
structure. The total is further bounded by the frame: every element takes at least two
octets, and frames are capped at ``header.MAX_FRAME``.
"""

from __future__ import annotations

from collections.abc import Callable

from goosectl.protocols.goose.ber import (
    decode_signed,
    decode_unsigned,
    encode_signed,
    nonminimal_width,
    read_length,
    tlv,
)
from goosectl.protocols.goose.data import (
    Array,
    Bcd,
    BinaryTime,
    BitString,
    Boolean,
    BooleanArray,
    Data,
    FloatingPoint,
    Integer,
    MmsString,
    ObjId,
    OctetString,
    Real,
    Structure,
    Unsigned,
    VisibleString,
)
from goosectl.protocols.goose.errors import (
    BadLength,
    BadTag,
    BadValue,
    GooseError,
    Truncated,
    TypeMismatch,
)
from goosectl.protocols.goose.real import decode_real, encode_real
from goosectl.protocols.goose.utctime import _SECONDS_REST, UtcTime

#: Deepest nesting of arrays/structures accepted (allData itself is depth 0).
MAX_DEPTH = 16
#: Most elements in one container (allData, one array, one structure).
MAX_ELEMENTS = 4096

#: Bytes that may appear in a VisibleString (ISO 646 printable, 0x20..0x7e).
_VISIBLE = bytes(range(0x20, 0x7F))


# --- decoders: (buf, start, stop, depth) -> Data ------------------------------


def _dec_boolean(buf: bytes, start: int, stop: int, depth: int) -> Boolean:
    if stop - start != 1:
        raise BadLength(f"boolean needs 1 octet, got {stop - start}", offset=start)
    octet = buf[start]
    return Boolean(octet != 0, octet)


def _bits(buf: bytes, start: int, stop: int, cls: type[BitString], name: str) -> BitString:
    if stop == start:
        raise BadLength(f"{name} without its unused-bits octet", offset=start)
    unused = buf[start]
    if unused > 7:
        raise BadValue(f"{name} unused-bits octet {unused} > 7", offset=start)
    if unused and stop - start == 1:
        raise BadValue(f"empty {name} must have 0 unused bits, got {unused}", offset=start)
    return cls(buf[start + 1 : stop], unused)


def _dec_bit_string(buf: bytes, start: int, stop: int, depth: int) -> BitString:
    return _bits(buf, start, stop, BitString, "bit-string")


def _dec_boolean_array(buf: bytes, start: int, stop: int, depth: int) -> BitString:
    return _bits(buf, start, stop, BooleanArray, "booleanArray")


def _dec_integer(buf: bytes, start: int, stop: int, depth: int) -> Integer:
    value = decode_signed(buf[start:stop], start, 8)
    return Integer(value, nonminimal_width(buf, start, stop))


def _dec_unsigned(buf: bytes, start: int, stop: int, depth: int) -> Unsigned:
    value = decode_unsigned(buf[start:stop], start, 8, 63)
    return Unsigned(value, nonminimal_width(buf, start, stop))


def _dec_bcd(buf: bytes, start: int, stop: int, depth: int) -> Bcd:
    value = decode_unsigned(buf[start:stop], start, 8, 63)
    return Bcd(value, nonminimal_width(buf, start, stop))


def _dec_float(buf: bytes, start: int, stop: int, depth: int) -> FloatingPoint:
    n = stop - start
    if n == 5:
        if buf[start] != 8:
            raise BadValue(f"float32 exponent octet 0x{buf[start]:02x} (want 0x08)", offset=start)
    elif n == 9:
        if buf[start] != 11:
            raise BadValue(f"float64 exponent octet 0x{buf[start]:02x} (want 0x0b)", offset=start)
    else:
        raise BadLength(f"floating-point of {n} octets (want 5 or 9)", offset=start)
    return FloatingPoint(buf[start + 1 : stop])


def _dec_real(buf: bytes, start: int, stop: int, depth: int) -> Real:
    return Real(decode_real(buf[start:stop], start))


def _dec_octets(buf: bytes, start: int, stop: int, depth: int) -> OctetString:
    return OctetString(buf[start:stop])


def _dec_visible(buf: bytes, start: int, stop: int, depth: int) -> VisibleString:
    return VisibleString(visible_text(buf, start, stop))


def visible_text(buf: bytes, start: int, stop: int) -> str:
    """Decode a VisibleString, rejecting anything outside 0x20..0x7e (named by offset)."""
    raw = buf[start:stop]
    if raw.translate(None, _VISIBLE):
        bad = next(i for i, b in enumerate(raw) if b < 0x20 or b > 0x7E)
        raise BadValue(
            f"octet 0x{raw[bad]:02x} is not a VisibleString character", offset=start + bad
        )
    return raw.decode("ascii")


def _dec_mms_string(buf: bytes, start: int, stop: int, depth: int) -> MmsString:
    try:
        return MmsString(buf[start:stop].decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadValue(f"mMSString is not UTF-8: {exc.reason}", offset=start + exc.start) from None


def _dec_binary_time(buf: bytes, start: int, stop: int, depth: int) -> BinaryTime:
    n = stop - start
    if n == 4:
        return BinaryTime(int.from_bytes(buf[start:stop], "big"))
    if n == 6:
        return BinaryTime(
            int.from_bytes(buf[start : start + 4], "big"),
            int.from_bytes(buf[start + 4 : stop], "big"),
        )
    raise BadLength(f"binary-time of {n} octets (want 4 or 6)", offset=start)


def _dec_utc_time(buf: bytes, start: int, stop: int, depth: int) -> UtcTime:
    if stop - start != 8:
        raise BadLength(f"utc-time of {stop - start} octets (want 8)", offset=start)
    seconds, rest = _SECONDS_REST(buf, start)
    return UtcTime(seconds, rest >> 8, rest & 0xFF)


def _dec_obj_id(buf: bytes, start: int, stop: int, depth: int) -> ObjId:
    if stop == start:
        raise BadLength("empty objId", offset=start)
    if stop - start > 128:
        raise BadLength(f"objId of {stop - start} octets (max 128)", offset=start)
    subids: list[int] = []
    acc = 0
    fresh = True
    for i in range(start, stop):
        b = buf[i]
        if fresh and b == 0x80:
            raise BadValue("objId sub-identifier has a leading 0x80 (not minimal)", offset=i)
        acc = (acc << 7) | (b & 0x7F)
        fresh = not b & 0x80
        if fresh:
            subids.append(acc)
            acc = 0
    if not fresh:
        raise Truncated("objId ends inside a sub-identifier", offset=stop - 1)
    first = subids[0]
    head = (first // 40, first % 40) if first < 80 else (2, first - 80)
    return ObjId(head + tuple(subids[1:]))


def _dec_array(buf: bytes, start: int, stop: int, depth: int) -> Array:
    if depth >= MAX_DEPTH:
        raise BadValue(f"nesting deeper than {MAX_DEPTH} levels", offset=start)
    return Array(decode_sequence(buf, start, stop, depth + 1, "array"))


def _dec_structure(buf: bytes, start: int, stop: int, depth: int) -> Structure:
    if depth >= MAX_DEPTH:
        raise BadValue(f"nesting deeper than {MAX_DEPTH} levels", offset=start)
    return Structure(decode_sequence(buf, start, stop, depth + 1, "structure"))


#: tag octet -> (Data choice name, decoder). The whole Data CHOICE as used by GOOSE.
DATA_TAGS: dict[int, tuple[str, Callable[..., Data]]] = {
    0xA1: ("array", _dec_array),
    0xA2: ("structure", _dec_structure),
    0x83: ("boolean", _dec_boolean),
    0x84: ("bit-string", _dec_bit_string),
    0x85: ("integer", _dec_integer),
    0x86: ("unsigned", _dec_unsigned),
    0x87: ("floating-point", _dec_float),
    0x88: ("real", _dec_real),
    0x89: ("octet-string", _dec_octets),
    0x8A: ("visible-string", _dec_visible),
    0x8C: ("binary-time", _dec_binary_time),
    0x8D: ("bcd", _dec_bcd),
    0x8E: ("booleanArray", _dec_boolean_array),
    0x8F: ("objId", _dec_obj_id),
    0x90: ("mMSString", _dec_mms_string),
    0x91: ("utc-time", _dec_utc_time),
}
DECODERS = {tag: dec for tag, (_, dec) in DATA_TAGS.items()}


def decode_sequence(buf: bytes, pos: int, end: int, depth: int, name: str) -> tuple[Data, ...]:
    """Decode the Data TLVs between ``pos`` and ``end``; errors get ``name[index]`` prefixed."""
    items: list[Data] = []
    append = items.append
    decoders = DECODERS
    idx = 0
    try:
        while pos < end:
            tag = buf[pos]
            if pos + 1 >= end:
                raise Truncated(f"element 0x{tag:02x} has no length octet", offset=pos)
            ln = buf[pos + 1]
            if ln < 0x80:
                start = pos + 2
                stop = start + ln
                if stop > end:
                    raise Truncated(
                        f"length {ln} runs past the end of its container ({end - start} left)",
                        offset=pos + 1,
                    )
            else:
                ln, start = read_length(buf, pos + 1, end)
                stop = start + ln
            dec = decoders.get(tag)
            if dec is None:
                raise BadTag(f"0x{tag:02x} is not a Data choice", offset=pos)
            if idx >= MAX_ELEMENTS:
                raise BadLength(f"more than {MAX_ELEMENTS} elements in one container", offset=pos)
            append(dec(buf, start, stop, depth))
            pos = stop
            idx += 1
    except GooseError as exc:
        raise exc.prefix_path(f"{name}[{idx}]") from None
    return tuple(items)


def decode_all_data(buf: bytes, start: int = 0, end: int | None = None) -> tuple[Data, ...]:
    """Decode allData content (the concatenated Data TLVs) found in ``buf[start:end]``."""
    if not isinstance(buf, bytes):
        buf = bytes(buf)
    stop = len(buf) if end is None else end
    return decode_sequence(buf, start, stop, 0, "allData")


def decode_data(raw: bytes) -> Data:
    """Decode exactly one Data TLV (handy for tests and for JSON tooling)."""
    items = decode_all_data(raw)
    if len(items) != 1:
        raise BadLength(f"expected one Data element, found {len(items)}", offset=0)
    return items[0]


# --- encoders: Data -> TLV bytes -------------------------------------------------------


def _check_int(value: object, lo: int, hi: int, name: str) -> int:
    if type(value) is not int:
        raise TypeMismatch(f"{name} value must be int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise BadValue(f"{name} {value} outside {lo}..{hi}")
    return value


def _enc_boolean(v: Boolean) -> bytes:
    value = v.value
    octet = v.octet
    if octet is None or (octet != 0) != bool(value) or not 0 <= octet <= 255:
        octet = 1 if value else 0
    return bytes((0x83, 1, octet))


def _enc_bits(tag: int, v: BitString) -> bytes:
    if type(v.data) is not bytes:
        raise TypeMismatch(f"{v.type_name} data must be bytes")
    if not 0 <= v.unused <= 7 or (v.unused and not v.data):
        raise BadValue(f"{v.type_name} unused bits {v.unused} invalid for {len(v.data)} octets")
    return tlv(tag, bytes((v.unused,)) + v.data)


def _enc_integer(v: Integer) -> bytes:
    value = _check_int(v.value, -(1 << 63), (1 << 63) - 1, "integer")
    return tlv(0x85, encode_signed(value, v.width))


def _enc_unsigned(v: Unsigned) -> bytes:
    return tlv(0x86, encode_signed(_check_int(v.value, 0, (1 << 63) - 1, "unsigned"), v.width))


def _enc_bcd(v: Bcd) -> bytes:
    return tlv(0x8D, encode_signed(_check_int(v.value, 0, (1 << 63) - 1, "bcd"), v.width))


def _enc_float(v: FloatingPoint) -> bytes:
    raw = v.raw
    if type(raw) is not bytes or len(raw) not in (4, 8):
        raise BadValue("floating-point raw must be 4 or 8 bytes (use FloatingPoint.f32/f64)")
    return (b"\x87\x05\x08" if len(raw) == 4 else b"\x87\x09\x0b") + raw


def _enc_real(v: Real) -> bytes:
    if not isinstance(v.value, (int, float)) or isinstance(v.value, bool):
        raise TypeMismatch(f"real value must be a float, got {type(v.value).__name__}")
    return tlv(0x88, encode_real(float(v.value)))


def _enc_octets(v: OctetString) -> bytes:
    if not isinstance(v.value, bytes):
        raise TypeMismatch(f"octet-string value must be bytes, got {type(v.value).__name__}")
    return tlv(0x89, v.value)


def encode_visible(value: object, tag: int) -> bytes:
    """VisibleString TLV; non-printable or non-ASCII characters are BadValue."""
    if not isinstance(value, str):
        raise TypeMismatch(f"visible-string value must be str, got {type(value).__name__}")
    raw = value.encode("ascii", "replace")
    if raw.translate(None, _VISIBLE) or not value.isascii():
        raise BadValue(f"{value!r} has characters outside printable ASCII")
    return tlv(tag, raw)


def _enc_visible(v: VisibleString) -> bytes:
    return encode_visible(v.value, 0x8A)


def _enc_mms_string(v: MmsString) -> bytes:
    if not isinstance(v.value, str):
        raise TypeMismatch(f"mMSString value must be str, got {type(v.value).__name__}")
    try:
        return tlv(0x90, v.value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise BadValue(f"mMSString cannot be UTF-8 encoded: {exc.reason}") from None


def _enc_binary_time(v: BinaryTime) -> bytes:
    ms = _check_int(v.ms, 0, 0xFFFFFFFF, "binary-time ms")
    if v.days is None:
        return b"\x8c\x04" + ms.to_bytes(4, "big")
    days = _check_int(v.days, 0, 0xFFFF, "binary-time days")
    return b"\x8c\x06" + ms.to_bytes(4, "big") + days.to_bytes(2, "big")


def _enc_utc_time(v: UtcTime) -> bytes:
    return b"\x91\x08" + v.to_bytes()


def _enc_obj_id(v: ObjId) -> bytes:
    arcs = v.arcs
    if len(arcs) < 2 or any(type(a) is not int or a < 0 for a in arcs):
        raise BadValue(f"objId needs at least two non-negative int arcs, got {arcs!r}")
    if arcs[0] > 2 or (arcs[0] < 2 and arcs[1] >= 40):
        raise BadValue(f"objId first arcs {arcs[0]}.{arcs[1]} are not valid")
    out = bytearray()
    for sub in (arcs[0] * 40 + arcs[1], *arcs[2:]):
        chunk = [sub & 0x7F]
        sub >>= 7
        while sub:
            chunk.append(0x80 | (sub & 0x7F))
            sub >>= 7
        out += bytes(reversed(chunk))
    return tlv(0x8F, bytes(out))


def _enc_items(tag: int, name: str, items: object) -> bytes:
    if not isinstance(items, (tuple, list)):
        raise TypeMismatch(f"{name} items must be a tuple of Data")
    parts = []
    for i, item in enumerate(items):
        try:
            parts.append(encode_data(item))
        except GooseError as exc:
            raise exc.prefix_path(f"{name}[{i}]") from None
    return tlv(tag, b"".join(parts))


#: Data class -> encoder. The other half of the table in DATA_TAGS.
ENCODERS: dict[type, Callable[..., bytes]] = {
    Array: lambda v: _enc_items(0xA1, "array", v.items),
    Structure: lambda v: _enc_items(0xA2, "structure", v.items),
    Boolean: _enc_boolean,
    BitString: lambda v: _enc_bits(0x84, v),
    BooleanArray: lambda v: _enc_bits(0x8E, v),
    Integer: _enc_integer,
    Unsigned: _enc_unsigned,
    FloatingPoint: _enc_float,
    Real: _enc_real,
    OctetString: _enc_octets,
    VisibleString: _enc_visible,
    BinaryTime: _enc_binary_time,
    Bcd: _enc_bcd,
    ObjId: _enc_obj_id,
    MmsString: _enc_mms_string,
    UtcTime: _enc_utc_time,
}


def encode_data(value: Data) -> bytes:
    """One Data value -> its TLV."""
    enc = ENCODERS.get(type(value))
    if enc is None:
        raise TypeMismatch(f"{type(value).__name__} is not a Data value")
    return enc(value)


def encode_all_data(values: tuple[Data, ...] | list[Data]) -> bytes:
    """allData content: the concatenated TLVs (what FrameTemplate.build takes)."""
    parts = []
    enc_get = ENCODERS.get
    for i, value in enumerate(values):
        enc = enc_get(type(value))
        try:
            if enc is None:
                raise TypeMismatch(f"{type(value).__name__} is not a Data value")
            parts.append(enc(value))
        except GooseError as exc:
            raise exc.prefix_path(f"allData[{i}]") from None
    return b"".join(parts)
