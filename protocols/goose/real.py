"""ASN.1 REAL (X.690 8.5) for the MMS ``real`` Data choice.

Decoding accepts every BER form (binary base 2/8/16 with scale factor, decimal NR1-NR3,
the special values); encoding always produces the canonical binary form (base 2, scale 0,
odd mantissa, minimal exponent) so decode(encode(x)) == x for every float, NaN included.
"""

from __future__ import annotations

import math
import re

from goosectl.protocols.goose.errors import BadLength, BadValue

_SPECIAL = {0x40: math.inf, 0x41: -math.inf, 0x42: math.nan, 0x43: -0.0}
_SPECIAL_ENC = {math.inf: b"\x40", -math.inf: b"\x41"}
_BASE_BITS = {0: 1, 1: 3, 2: 4}  # base 2, 8, 16 as powers of two
_NR = re.compile(rb"^ *[+-]?(\d+([.,]\d*)?|[.,]\d+)([eE][+-]?\d+)?$")
#: A mantissa this long cannot come from a double; refusing it bounds the work.
_MAX_MANTISSA_OCTETS = 16


def decode_real(content: bytes, offset: int) -> float:
    """Content octets of a REAL -> float; anything X.690 forbids is BadValue/BadLength."""
    n = len(content)
    if n == 0:
        return 0.0
    first = content[0]
    if first & 0x80:
        return _decode_binary(content, offset)
    if first & 0x40:
        if n != 1 or first not in _SPECIAL:
            raise BadValue(f"unknown special REAL value 0x{first:02x}", offset=offset)
        return _SPECIAL[first]
    form = first & 0x3F
    if form not in (1, 2, 3):
        raise BadValue(f"decimal REAL with unknown NR form {form}", offset=offset)
    text = content[1:]
    if len(text) > 64 or not _NR.match(text):
        raise BadValue(f"decimal REAL {text[:64]!r} is not ISO 6093 NR{form}", offset=offset)
    try:
        return float(text.replace(b",", b".").decode("ascii"))
    except (ValueError, OverflowError) as exc:
        raise BadValue(f"decimal REAL {text!r}: {exc}", offset=offset) from None


def _decode_binary(content: bytes, offset: int) -> float:
    first = content[0]
    base = (first >> 4) & 0x03
    if base == 3:
        raise BadValue("REAL base bits 11 are reserved", offset=offset)
    scale = (first >> 2) & 0x03
    fmt = first & 0x03
    pos = 1
    if fmt == 3:
        if len(content) < 2:
            raise BadLength("REAL exponent length octet missing", offset=offset)
        exp_len = content[1]
        pos = 2
        if exp_len == 0:
            raise BadValue("REAL exponent length 0", offset=offset)
    else:
        exp_len = fmt + 1
    if len(content) < pos + exp_len + 1:
        raise BadLength("REAL too short for its exponent and mantissa", offset=offset)
    if exp_len > 4:
        raise BadValue(f"REAL exponent of {exp_len} octets is out of double range", offset=offset)
    exponent = int.from_bytes(content[pos : pos + exp_len], "big", signed=True)
    mantissa_bytes = content[pos + exp_len :]
    if len(mantissa_bytes) > _MAX_MANTISSA_OCTETS:
        raise BadValue(f"REAL mantissa of {len(mantissa_bytes)} octets", offset=offset)
    mantissa = int.from_bytes(mantissa_bytes, "big") << scale
    power = exponent * _BASE_BITS[base]
    try:
        value = math.ldexp(float(mantissa), power) if mantissa else 0.0
    except OverflowError:
        raise BadValue("REAL is outside the range of a double", offset=offset) from None
    return -value if first & 0x40 else value


def encode_real(value: float) -> bytes:
    """Canonical REAL content octets for a Python float."""
    if value == 0.0:
        return b"\x43" if math.copysign(1.0, value) < 0 else b""
    if math.isnan(value):
        return b"\x42"
    special = _SPECIAL_ENC.get(value)
    if special is not None:
        return special
    sign = 0x40 if value < 0 else 0
    mantissa_f, exponent = math.frexp(abs(value))
    mantissa = int(mantissa_f * (1 << 53))
    exponent -= 53
    while not mantissa & 1:
        mantissa >>= 1
        exponent += 1
    exp_octets = exponent.to_bytes(
        (exponent if exponent >= 0 else ~exponent).bit_length() // 8 + 1, "big", signed=True
    )
    fmt = len(exp_octets) - 1
    mant_octets = mantissa.to_bytes((mantissa.bit_length() + 7) // 8, "big")
    return bytes((0x80 | sign | fmt,)) + exp_octets + mant_octets
