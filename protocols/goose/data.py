"""The typed MMS Data model carried in allData, plus IEC 61850 helpers (Quality, Dbpos).

One small slots dataclass per Data choice. They are hashable and meant to be treated as
immutable, but not frozen: a frozen dataclass costs twice as much to construct, and the
decoder builds one per element on the subscriber's path. Each class has a ``type_name`` equal to the
choice name used in JSON and by Wireshark (``"bit-string"``, ``"utc-time"`` ...), so a
value knows how it is printed and encoded without a side table. Values keep exactly what
is needed to re-encode the bytes they came from (a boolean's octet, a bit-string's padding
bits, a float's IEEE bytes); equality ignores only the boolean octet, because every IED
means the same thing by 0x01 and 0xFF.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import cast

from goosectl.protocols.goose.errors import BadValue, TypeMismatch
from goosectl.protocols.goose.utctime import UtcTime

__all__ = [
    "Array",
    "Bcd",
    "BinaryTime",
    "BitString",
    "Boolean",
    "BooleanArray",
    "Data",
    "Dbpos",
    "FloatingPoint",
    "Integer",
    "MmsString",
    "ObjId",
    "OctetString",
    "Quality",
    "Real",
    "Structure",
    "Unsigned",
    "UtcTime",
    "VisibleString",
    "data_shape",
]


@dataclass(slots=True, unsafe_hash=True)
class Array:
    """MMS array (tag 0xa1): elements of one type, in order."""

    items: tuple[Data, ...]
    type_name = "array"


@dataclass(slots=True, unsafe_hash=True)
class Structure:
    """MMS structure (tag 0xa2): the members of a constructed data attribute, in order."""

    items: tuple[Data, ...]
    type_name = "structure"


@dataclass(slots=True, unsafe_hash=True)
class Boolean:
    """BOOLEAN (0x83). ``octet`` is the wire octet (IEDs send 0x01 or 0xFF for true);
    None means canonical (0x01/0x00). It does not take part in equality."""

    value: bool
    octet: int | None = field(default=None, compare=False)
    type_name = "boolean"


@dataclass(slots=True, unsafe_hash=True)
class BitString:
    """BIT STRING (0x84): content octets plus the count of unused bits in the last one.

    The padding bits are kept as received (BER lets them be anything), so re-encoding is
    exact; ``from_bits`` builds the canonical form with zero padding.
    """

    data: bytes
    unused: int = 0
    type_name = "bit-string"

    @classmethod
    def from_bits(cls, bits: str) -> BitString:
        """Build from a string of '0'/'1', first character = bit 0 (the MSB of octet 0)."""
        if bits.strip("01"):
            raise TypeMismatch(f"bit string must contain only 0 and 1, got {bits!r}")
        n = len(bits)
        if n == 0:
            return cls(b"", 0)
        size = (n + 7) // 8
        pad = size * 8 - n
        return cls((int(bits, 2) << pad).to_bytes(size, "big"), pad)

    @property
    def bits(self) -> str:
        """The significant bits as a '0'/'1' string (padding excluded)."""
        n = len(self.data) * 8 - self.unused
        if n <= 0:
            return ""
        return format(int.from_bytes(self.data, "big"), f"0{len(self.data) * 8}b")[:n]

    def __len__(self) -> int:
        return max(0, len(self.data) * 8 - self.unused)

    def bit(self, index: int) -> bool:
        """Bit ``index`` (0 = first transmitted)."""
        if not 0 <= index < len(self):
            raise IndexError(f"bit {index} outside 0..{len(self) - 1}")
        return bool(self.data[index >> 3] & (0x80 >> (index & 7)))


@dataclass(slots=True, unsafe_hash=True)
class BooleanArray(BitString):
    """booleanArray (0x8e): a BIT STRING whose bits are booleans."""

    type_name = "booleanArray"


@dataclass(slots=True, unsafe_hash=True)
class Integer:
    """INTEGER (0x85), 1..8 octets, two's complement.

    ``width`` is the octet count of a zero/sign-padded encoding as some IEDs send it
    (None = minimal); it only affects encoding, not equality."""

    value: int
    width: int | None = field(default=None, compare=False)
    type_name = "integer"


@dataclass(slots=True, unsafe_hash=True)
class Unsigned:
    """Unsigned (0x86): a non-negative INTEGER of 1..8 octets (so at most 2**63-1).

    ``width`` is the octet count of a zero/sign-padded encoding as some IEDs send it
    (None = minimal); it only affects encoding, not equality."""

    value: int
    width: int | None = field(default=None, compare=False)
    type_name = "unsigned"


@dataclass(slots=True, unsafe_hash=True)
class FloatingPoint:
    """FloatingPoint (0x87): IEEE 754 big-endian bytes (4 or 8) behind the exponent octet.

    Stored as the raw bytes so NaN payloads and float32 rounding survive a round trip;
    ``value`` converts. Build with ``FloatingPoint.f32(x)`` / ``.f64(x)``.
    """

    raw: bytes
    type_name = "floating-point"

    @classmethod
    def f32(cls, value: float) -> FloatingPoint:
        try:
            return cls(struct.pack(">f", value))
        except (OverflowError, struct.error) as exc:
            raise BadValue(f"{value!r} does not fit a float32: {exc}") from None

    @classmethod
    def f64(cls, value: float) -> FloatingPoint:
        return cls(struct.pack(">d", value))

    @property
    def bits(self) -> int:
        return len(self.raw) * 8

    @property
    def value(self) -> float:
        value: float = struct.unpack(">f" if len(self.raw) == 4 else ">d", self.raw)[0]
        return value

    def __repr__(self) -> str:
        return f"FloatingPoint({self.value!r}, bits={self.bits})"


@dataclass(slots=True, eq=False)
class Real:
    """ASN.1 REAL (0x88), held as a Python float; NaN equals NaN, -0.0 differs from 0.0."""

    value: float
    type_name = "real"

    def _key(self) -> bytes:
        return b"nan" if math.isnan(self.value) else struct.pack(">d", self.value)

    def __eq__(self, other: object) -> bool:
        return type(other) is Real and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(slots=True, unsafe_hash=True)
class OctetString:
    """OCTET STRING (0x89)."""

    value: bytes
    type_name = "octet-string"


@dataclass(slots=True, unsafe_hash=True)
class VisibleString:
    """VisibleString (0x8a): printable ASCII 0x20..0x7e only."""

    value: str
    type_name = "visible-string"


@dataclass(slots=True, unsafe_hash=True)
class BinaryTime:
    """TimeOfDay (0x8c): milliseconds since midnight, plus days since 1984-01-01 when the
    6-octet form is used (``days`` None selects the 4-octet form)."""

    ms: int
    days: int | None = None
    type_name = "binary-time"


@dataclass(slots=True, unsafe_hash=True)
class Bcd:
    """bcd (0x8d): a non-negative INTEGER (MMS carries the value, not BCD nibbles).

    ``width`` is the octet count of a zero/sign-padded encoding as some IEDs send it
    (None = minimal); it only affects encoding, not equality."""

    value: int
    width: int | None = field(default=None, compare=False)
    type_name = "bcd"


@dataclass(slots=True, unsafe_hash=True)
class ObjId:
    """OBJECT IDENTIFIER (0x8f), as its arcs."""

    arcs: tuple[int, ...]
    type_name = "objId"

    def dotted(self) -> str:
        return ".".join(map(str, self.arcs))


@dataclass(slots=True, unsafe_hash=True)
class MmsString:
    """MMSString (0x90): UTF-8 text."""

    value: str
    type_name = "mMSString"


Data = (
    Array
    | Structure
    | Boolean
    | BitString
    | BooleanArray
    | Integer
    | Unsigned
    | FloatingPoint
    | Real
    | OctetString
    | VisibleString
    | BinaryTime
    | Bcd
    | ObjId
    | MmsString
    | UtcTime
)


# --- data-set shape -------------------------------------------------------------------


def _shape(value: object) -> object:
    kind = type(value)
    # exact types, not isinstance: a subclass is not the same shape
    if kind is Structure or kind is Array:
        seq = cast("Structure | Array", value)
        return (seq.type_name, tuple(map(_shape, seq.items)))
    if kind is BitString or kind is BooleanArray:
        bits = cast("BitString | BooleanArray", value)
        return f"{bits.type_name}/{len(bits)}"
    if kind is FloatingPoint:
        return f"floating-point/{cast(FloatingPoint, value).bits}"
    name = getattr(kind, "type_name", None)
    if name is None:
        raise TypeMismatch(f"{kind.__name__} is not a Data value")
    return name


def data_shape(all_data: tuple[Data, ...] | list[Data]) -> tuple[object, ...]:
    """The member type signature of a data set, hashable, for "same shape as before" checks.

    Leaves are type names; bit-strings and floats include their size (``bit-string/13``,
    ``floating-point/32``) because that is part of the type; structures and arrays are
    ``(name, (member shapes...))``. String lengths and integer widths are values, not shape.
    """
    return tuple(map(_shape, all_data))  # map: no generator frame per data set


# --- IEC 61850-7-3 helpers ------------------------------------------------------------


class Dbpos(IntEnum):
    """Double point position (CODED ENUM as a 2-bit string): 0 intermediate .. 3 bad."""

    INTERMEDIATE = 0
    OFF = 1
    ON = 2
    BAD = 3

    def to_bitstring(self) -> BitString:
        return BitString(bytes((self.value << 6,)), 6)

    @classmethod
    def from_bitstring(cls, bs: BitString) -> Dbpos:
        if len(bs) != 2:
            raise TypeMismatch(f"Dbpos needs a 2-bit string, got {len(bs)} bits")
        return cls(bs.data[0] >> 6)


_VALIDITY = ("good", "invalid", "reserved", "questionable")
#: Quality detail bits 2..9 in transmission order (IEC 61850-7-3 DetailQual).
QUALITY_DETAILS = (
    "overflow",
    "outOfRange",
    "badReference",
    "oscillatory",
    "failure",
    "oldData",
    "inconsistent",
    "inaccurate",
)


@dataclass(slots=True, unsafe_hash=True)
class Quality:
    """IEC 61850 Quality, 13 bits: validity (2), 8 detail bits, source, test, operatorBlocked."""

    validity: str = "good"
    details: frozenset[str] = frozenset()
    substituted: bool = False
    test: bool = False
    operator_blocked: bool = False

    def to_bits(self) -> str:
        if self.validity not in _VALIDITY:
            raise BadValue(f"validity must be one of {_VALIDITY}, got {self.validity!r}")
        unknown = set(self.details) - set(QUALITY_DETAILS)
        if unknown:
            raise BadValue(f"unknown quality detail bits {sorted(unknown)}")
        v = _VALIDITY.index(self.validity)
        bits = [str(v >> 1), str(v & 1)]
        bits += ["1" if d in self.details else "0" for d in QUALITY_DETAILS]
        bits += [str(int(self.substituted)), str(int(self.test)), str(int(self.operator_blocked))]
        return "".join(bits)

    def to_bitstring(self) -> BitString:
        return BitString.from_bits(self.to_bits())

    @classmethod
    def from_bitstring(cls, bs: BitString) -> Quality:
        """Decode the first 13 bits; longer strings are tolerated (some IEDs pad to 16)."""
        bits = bs.bits
        if len(bits) < 13:
            raise TypeMismatch(f"Quality needs at least 13 bits, got {len(bits)}")
        return cls(
            validity=_VALIDITY[int(bits[0:2], 2)],
            details=frozenset(
                d for d, b in zip(QUALITY_DETAILS, bits[2:10], strict=True) if b == "1"
            ),
            substituted=bits[10] == "1",
            test=bits[11] == "1",
            operator_blocked=bits[12] == "1",
        )
