"""COBS framing edge cases: the block boundaries where encoders usually go wrong."""

from __future__ import annotations

import pytest
from cobs.cobs import _cobs_py
from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.protocols.serial.errors import BadCobs, ErrorKind
from goosectl.protocols.serial.framing import (
    DELIMITER,
    MAX_ENCODED,
    MAX_PAYLOAD,
    MAX_WIRE,
    cobs_decode,
    cobs_encode,
    wrap,
)


@pytest.mark.parametrize(
    ("payload", "encoded"),
    [
        (b"", b"\x01"),
        (b"\x00", b"\x01\x01"),
        (b"\x00\x00", b"\x01\x01\x01"),
        (b"\x11\x22\x00\x33", b"\x03\x11\x22\x02\x33"),
        (b"\x11\x00\x00\x00", b"\x02\x11\x01\x01\x01"),
        (b"\x11\x22\x33\x44", b"\x05\x11\x22\x33\x44"),
    ],
)
def test_known_vectors(payload: bytes, encoded: bytes) -> None:
    # vectors worked by hand from the rules in SPEC.md ("COBS")
    assert cobs_encode(payload) == encoded
    assert cobs_decode(encoded) == payload


def test_all_zeros_become_all_ones() -> None:
    for n in (1, 5, 64, 300):
        enc = cobs_encode(bytes(n))
        assert enc == b"\x01" * (n + 1)
        assert cobs_decode(enc) == bytes(n)


def test_253_byte_run_fits_one_block() -> None:
    data = bytes(range(1, 254))  # 253 non-zero bytes
    enc = cobs_encode(data)
    assert enc[0] == 0xFE and len(enc) == 254
    assert cobs_decode(enc) == data


def test_254_byte_run_is_one_full_block_without_trailer() -> None:
    data = bytes([0x42]) * 254
    enc = cobs_encode(data)
    assert enc[0] == 0xFF and len(enc) == 255  # shortest form: no trailing 0x01
    assert cobs_decode(enc) == data
    # a decoder must also accept the long form some encoders emit
    assert cobs_decode(enc + b"\x01") == data


def test_255_byte_run_needs_a_second_block() -> None:
    data = bytes([0x42]) * 255
    enc = cobs_encode(data)
    assert enc[0] == 0xFF and enc[255] == 0x02 and len(enc) == 257
    assert cobs_decode(enc) == data


def test_zero_right_after_full_block() -> None:
    data = bytes([0x42]) * 254 + b"\x00"
    enc = cobs_encode(data)
    assert enc == b"\xff" + bytes([0x42]) * 254 + b"\x01\x01"
    assert cobs_decode(enc) == data


@pytest.mark.parametrize(
    ("encoded", "offset"),
    [
        (b"\x05\x11\x22", 0),  # code points past the end
        (b"\x02\x11\x05\x22", 2),  # second code points past the end
        (b"\x03\x11\x00", 2),  # a delimiter inside a frame
        (b"\x00", 0),
        (b"\x02", 0),
    ],
)
def test_bad_cobs_names_the_offset(encoded: bytes, offset: int) -> None:
    with pytest.raises(BadCobs) as info:
        cobs_decode(encoded)
    err = info.value
    assert err.kind is ErrorKind.BAD_COBS
    assert err.offset == offset
    assert "COBS" in str(err) and not err.nackable


def test_size_constants() -> None:
    assert len(cobs_encode(bytes([7]) * MAX_PAYLOAD)) == MAX_ENCODED
    assert MAX_WIRE == MAX_ENCODED + 1


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.binary(max_size=700))
def test_round_trip_and_no_zero_inside(data: bytes) -> None:
    enc = cobs_encode(data)
    assert 0 not in enc
    assert len(enc) <= len(data) + 1 + len(data) // 254
    assert cobs_decode(enc) == data
    assert wrap(data) == enc + DELIMITER


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.binary(max_size=600))
def test_c_extension_matches_pure_python(data: bytes) -> None:
    # the pure-Python module of the same package is the oracle for the C one we use
    assert cobs_encode(data) == _cobs_py.encode(data)


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.binary(min_size=1, max_size=80).filter(lambda b: 0 not in b))
def test_decoder_never_raises_anything_but_badcobs(data: bytes) -> None:
    try:
        cobs_decode(data)
    except BadCobs as err:
        assert 0 <= err.offset <= len(data)
