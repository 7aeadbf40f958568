"""CRC-16/IBM-3740: the catalogue check value, and three independent implementations agree."""

from __future__ import annotations

import crc as crc_lib
from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.protocols.serial import crc

CHECK_INPUT = b"123456789"


def test_catalogue_parameters() -> None:
    assert crc.NAME == "CRC-16/IBM-3740"
    assert (crc.WIDTH, crc.POLY, crc.INIT, crc.XOROUT) == (16, 0x1021, 0xFFFF, 0x0000)
    assert (crc.REFIN, crc.REFOUT) == (False, False)
    # the `crc` package's own definition of this variant has the same parameters
    cfg = crc_lib.Crc16.IBM_3740.value
    assert (cfg.width, cfg.polynomial, cfg.init_value, cfg.final_xor_value) == (
        crc.WIDTH,
        crc.POLY,
        crc.INIT,
        crc.XOROUT,
    )
    assert (cfg.reverse_input, cfg.reverse_output) == (crc.REFIN, crc.REFOUT)


def test_check_value_hot_path() -> None:
    assert crc.crc16(CHECK_INPUT) == 0x29B1 == crc.CHECK


def test_check_value_reference_table() -> None:
    assert crc.crc16_reference(CHECK_INPUT) == 0x29B1


def test_check_value_crc_package() -> None:
    assert crc_lib.Calculator(crc_lib.Crc16.IBM_3740).checksum(CHECK_INPUT) == 0x29B1


def test_not_the_xmodem_or_kermit_variant() -> None:
    # the two CCITT variants people confuse it with have different check values
    assert crc_lib.Calculator(crc_lib.Crc16.XMODEM).checksum(CHECK_INPUT) == 0x31C3
    assert crc.crc16(CHECK_INPUT) != 0x31C3


def test_table_first_entries() -> None:
    assert crc.TABLE[:4] == (0x0000, 0x1021, 0x2042, 0x3063)
    assert len(crc.TABLE) == 256


def test_empty_input_is_init() -> None:
    assert crc.crc16(b"") == 0xFFFF == crc.crc16_reference(b"")


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.binary(max_size=300))
def test_hot_path_equals_reference_and_package(data: bytes) -> None:
    want = crc_lib.Calculator(crc_lib.Crc16.IBM_3740, optimized=True).checksum(data)
    assert crc.crc16(data) == want
    assert crc.crc16_reference(data) == want


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.binary(max_size=100))
def test_appended_crc_has_zero_residue(data: bytes) -> None:
    framed = crc.crc16_append(data)
    assert framed[:-2] == data
    assert crc.crc16_ok(framed)
    assert crc.crc16(framed) == crc.RESIDUE


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.binary(min_size=1, max_size=100), st.data())
def test_single_bit_error_is_detected(data: bytes, draw: st.DataObject) -> None:
    framed = bytearray(crc.crc16_append(data))
    bit = draw.draw(st.integers(0, len(framed) * 8 - 1))
    framed[bit // 8] ^= 1 << (bit % 8)
    assert not crc.crc16_ok(framed)
