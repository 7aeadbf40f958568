"""BER primitives: lengths and integers, the only two encodings every other module shares.

Decoding accepts what X.690 BER allows (long-form lengths even when short form would do)
and rejects what it forbids (indefinite length, non-minimal integers). Encoding is always
the minimal (DER-style) form, which is what makes ``encode(decode(b)) == b`` hold for
canonical frames.
"""

from __future__ import annotations

from goosectl.protocols.goose.errors import BadLength, BadValue, Truncated

#: Longest long-form length accepted: 2 octets covers the 16-bit GOOSE Length field; we
#: allow up to 4 (BER permits leading zeros) and still bound the value by the buffer.
MAX_LENGTH_OCTETS = 4


def read_length(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read a BER length at ``pos``; return (length, position of the first content octet).

    The content must fit before ``end``; a length that points past it is Truncated.
    """
    if pos >= end:
        raise Truncated("length octet missing", offset=pos)
    first = buf[pos]
    pos += 1
    if first < 0x80:
        length = first
    elif first == 0x80:
        raise BadLength("indefinite length (0x80) is not allowed in GOOSE", offset=pos - 1)
    else:
        count = first & 0x7F
        if count > MAX_LENGTH_OCTETS:
            raise BadLength(
                f"long-form length with {count} octets (max {MAX_LENGTH_OCTETS})", offset=pos - 1
            )
        if pos + count > end:
            raise Truncated("long-form length octets missing", offset=pos - 1)
        length = int.from_bytes(buf[pos : pos + count], "big")
        pos += count
    if pos + length > end:
        raise Truncated(
            f"length {length} runs past the end of its container ({end - pos} octets left)",
            offset=pos - 1,
        )
    return length, pos


def encode_length(n: int) -> bytes:
    """Minimal BER length: short form below 128, else 0x81/0x82/... plus big-endian octets."""
    if n < 0x80:
        return bytes((n,))
    octets = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes((0x80 | len(octets),)) + octets


def tlv(tag: int, content: bytes) -> bytes:
    """One primitive or constructed TLV with a minimal length."""
    n = len(content)
    if n < 0x80:
        return bytes((tag, n)) + content
    return bytes((tag,)) + encode_length(n) + content


def decode_signed(content: bytes, offset: int, max_octets: int) -> int:
    """BER INTEGER content: 1..max_octets octets, two's complement.

    X.690 8.3.2 asks for the minimal form, but real IEDs pad (the GE/ITI demo frame sends
    a 5-octet timeAllowedtoLive), so padding is accepted here; callers that must re-encode
    exactly record the width (see `nonminimal_width`).
    """
    n = len(content)
    if n == 0 or n > max_octets:
        raise BadLength(f"integer of {n} octets (allowed 1..{max_octets})", offset=offset)
    return int.from_bytes(content, "big", signed=True)


def nonminimal_width(buf: bytes, start: int, stop: int) -> int | None:
    """The octet count of a padded INTEGER encoding, or None when it is minimal."""
    if stop - start < 2:
        return None
    a, b = buf[start], buf[start + 1] & 0x80
    if (a == 0 and not b) or (a == 0xFF and b):
        return stop - start
    return None


def encode_signed(value: int, width: int | None = None) -> bytes:
    """Two's complement octets of ``value``: minimal, or ``width`` octets when that was the
    width it arrived with (and the value still fits)."""
    size = (value if value >= 0 else ~value).bit_length() // 8 + 1
    if type(width) is int and size < width <= 8:
        size = width
    return value.to_bytes(size, "big", signed=True)


def decode_unsigned(content: bytes, offset: int, max_octets: int, bits: int) -> int:
    """An INTEGER constrained to 0..2**bits-1 (stNum, confRev, MMS unsigned ...)."""
    value = decode_signed(content, offset, max_octets)
    if value < 0 or value.bit_length() > bits:
        raise BadValue(f"{value} is outside 0..2**{bits}-1", offset=offset)
    return value
