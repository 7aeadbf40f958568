"""COBS framing: turn a payload into bytes with no 0x00 inside, and back.

A 0x00 byte only ever means "end of frame", so a receiver that lost sync (garbage, a
dropped byte, a reset in mid-frame) is back in step at the next 0x00, and a frame's
length is bounded without a length field that could itself be corrupted.

Why the `cobs` package (its C extension `cobs.cobs`): it is maintained, implements the
Cheshire & Baker encoding exactly as SPEC.md describes it, and is fast. Measured here
(encode / decode, best of 5 x 2000 calls):

    16-byte payload:  C 0.047 / 0.048 us    pure Python (cobs._cobs_py) 1.19 / 0.96 us
    64-byte payload:  C 0.074 / 0.067 us    pure Python                 2.41 / 1.41 us

The C form is ~25x faster and costs less than the Python call around it, so nothing is
gained by writing our own.
"""

from __future__ import annotations

from cobs import cobs as _cobs

from goosectl.protocols.serial.errors import BadCobs

DELIMITER = b"\x00"
MAX_PAYLOAD = 64  # decoded bytes: header(4) + body + CRC(2); fits a 64-byte MCU buffer
MAX_ENCODED = MAX_PAYLOAD + (MAX_PAYLOAD + 253) // 254  # COBS adds one byte per 254
MAX_WIRE = MAX_ENCODED + 1  # plus the delimiter: the largest frame on the wire


def cobs_encode(payload: bytes) -> bytes:
    """COBS-encode ``payload`` (no delimiter added)."""
    encoded: bytes = _cobs.encode(payload)  # the C extension has no type information
    return encoded


def cobs_decode(encoded: bytes | bytearray | memoryview) -> bytes:
    """Decode one COBS block (without its delimiter); raises `BadCobs` with the reason."""
    try:
        decoded: bytes = _cobs.decode(encoded)
    except _cobs.DecodeError as exc:
        raise BadCobs(
            f"invalid COBS encoding: {exc}", offset=_first_bad_code(encoded), frame=bytes(encoded)
        ) from None
    return decoded


def _first_bad_code(encoded: bytes | bytearray | memoryview) -> int:
    """Offset of the code byte (or zero byte) that made COBS decoding fail, for the report."""
    i, n = 0, len(encoded)
    while i < n:
        code = encoded[i]
        if code == 0:
            return i
        for j in range(i + 1, min(i + code, n)):
            if encoded[j] == 0:
                return j
        if i + code > n:
            return i
        i += code
    return n


def wrap(payload: bytes) -> bytes:
    """One complete wire frame: COBS(payload) followed by the 0x00 delimiter."""
    encoded: bytes = _cobs.encode(payload)
    return encoded + DELIMITER
