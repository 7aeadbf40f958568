"""Every Data choice against hand-written BER vectors, plus the IEC 61850 helpers and caps."""

from __future__ import annotations

import math

import pytest

from goosectl.protocols.goose import (
    MAX_DEPTH,
    MAX_ELEMENTS,
    Array,
    BadLength,
    BadTag,
    BadValue,
    Bcd,
    BinaryTime,
    BitString,
    Boolean,
    BooleanArray,
    Dbpos,
    FloatingPoint,
    Integer,
    MmsString,
    ObjId,
    OctetString,
    Quality,
    Real,
    Structure,
    Truncated,
    TypeMismatch,
    Unsigned,
    UtcTime,
    VisibleString,
    data_shape,
    decode_all_data,
    decode_data,
    encode_all_data,
    encode_data,
)
from goosectl.protocols.goose.utctime import time_quality

VECTORS = [
    (Boolean(True), "830101"),
    (Boolean(False), "830100"),
    (BitString.from_bits("0110100000011"), "8403036818"),
    (BitString.from_bits(""), "840100"),
    (Integer(0), "850100"),
    (Integer(-1), "8501ff"),
    (Integer(128), "85020080"),
    (Integer(-129), "8502ff7f"),
    (Integer(2**63 - 1), "85087fffffffffffffff"),
    (Integer(-(2**63)), "85088000000000000000"),
    (Unsigned(255), "860200ff"),
    (Unsigned(2**32 - 1), "860500ffffffff"),
    (FloatingPoint.f32(1.5), "8705083fc00000"),
    (FloatingPoint.f64(-2.0), "87090bc000000000000000"),
    (Real(0.0), "8800"),
    (Real(-0.0), "880143"),
    (Real(math.inf), "880140"),
    (Real(-math.inf), "880141"),
    (Real(math.nan), "880142"),
    (Real(1.5), "880380ff03"),
    (Real(1.0), "8803800001"),
    (OctetString(b"\x00\xff"), "890200ff"),
    (VisibleString("AB c"), "8a0441422063"),
    (BinaryTime(1000), "8c04000003e8"),
    (BinaryTime(1000, 2), "8c06000003e80002"),
    (Bcd(99), "8d0163"),
    (BooleanArray(b"\xa0", 5), "8e0205a0"),
    (ObjId((1, 0, 8802, 1)), "8f0428c46201"),
    (ObjId((2, 100, 3)), "8f03813403"),
    (MmsString("é"), "9002c3a9"),
    (UtcTime(1, 0x800000, 0x0A), "9108000000018000000a"),
    (Structure((Boolean(True), Integer(5))), "a206830101850105"),
    (Array(()), "a100"),
    (Array((Structure(()),)), "a102a200"),
]


@pytest.mark.parametrize(("value", "hexstr"), VECTORS, ids=lambda v: repr(v)[:40])
def test_vector_encode_and_decode(value, hexstr: str) -> None:
    raw = bytes.fromhex(hexstr)
    assert encode_data(value) == raw
    assert decode_data(raw) == value
    assert encode_data(decode_data(raw)) == raw


def test_boolean_any_nonzero_is_true_and_octet_kept() -> None:
    v = decode_data(bytes.fromhex("8301ff"))
    assert v == Boolean(True) and v.octet == 0xFF
    assert encode_data(v) == bytes.fromhex("8301ff")
    assert decode_data(bytes.fromhex("830142")).value is True
    with pytest.raises(BadLength):
        decode_data(bytes.fromhex("83020101"))


def test_bit_string_unused_bits_validated() -> None:
    with pytest.raises(BadValue, match="unused-bits octet 8"):
        decode_data(bytes.fromhex("84020800"))
    with pytest.raises(BadValue, match="empty"):
        decode_data(bytes.fromhex("840103"))
    with pytest.raises(BadLength):
        decode_data(bytes.fromhex("8400"))
    # BER lets padding bits be anything; they are kept so re-encoding is exact
    v = decode_data(bytes.fromhex("84020387"))
    assert v.bits == "10000" and encode_data(v) == bytes.fromhex("84020387")
    assert v.bit(0) and not v.bit(4)


def test_integer_sizes() -> None:
    with pytest.raises(BadLength):
        decode_data(bytes.fromhex("8500"))
    with pytest.raises(BadLength):
        decode_data(bytes.fromhex("8509" + "01" * 9))
    padded = decode_data(bytes.fromhex("8504000000ff"))
    assert padded == Integer(255) and padded.width == 4
    assert encode_data(padded) == bytes.fromhex("8504000000ff")
    with pytest.raises(BadValue, match="outside"):
        decode_data(bytes.fromhex("8601ff"))  # unsigned must not be negative
    with pytest.raises(BadValue):
        encode_data(Integer(2**63))
    with pytest.raises(TypeMismatch):
        encode_data(Integer(1.5))  # type: ignore[arg-type]


def test_floating_point_checks_exponent_octet_and_size() -> None:
    assert decode_data(bytes.fromhex("8705083fc00000")).value == 1.5
    with pytest.raises(BadValue, match="exponent octet"):
        decode_data(bytes.fromhex("8705093fc00000"))
    with pytest.raises(BadValue, match="exponent octet"):
        decode_data(bytes.fromhex("8709084000000000000000"))
    with pytest.raises(BadLength):
        decode_data(bytes.fromhex("8704083fc000"))
    nan = FloatingPoint.f32(math.nan)
    assert decode_data(encode_data(nan)) == nan  # compared by bytes
    assert FloatingPoint.f32(0.1).value != 0.1  # float32 rounding is explicit


def test_real_every_ber_form() -> None:
    assert decode_data(bytes.fromhex("880380ff03")).value == 1.5  # base 2
    assert decode_data(bytes.fromhex("8803900101")).value == 8.0  # base 8, exp 1
    assert decode_data(bytes.fromhex("8803a00101")).value == 16.0  # base 16, exp 1
    assert decode_data(bytes.fromhex("88038c0001")).value == 8.0  # scale factor 3
    assert decode_data(bytes.fromhex("880483010005")).value == 5.0  # exp length octet
    assert decode_data(b"\x88\x05\x021.53").value == 1.53  # NR2
    assert decode_data(b"\x88\x04\x01-12").value == -12.0  # NR1
    assert decode_data(b"\x88\x06\x031,5E1").value == 15.0  # NR3 with comma
    with pytest.raises(BadValue):
        decode_data(bytes.fromhex("880144"))  # unknown special value
    with pytest.raises(BadValue):
        decode_data(bytes.fromhex("8803b00101"))  # reserved base
    with pytest.raises(BadValue):
        decode_data(b"\x88\x04\x01x12")  # not a number
    with pytest.raises(BadValue):
        decode_data(bytes.fromhex("8806827fffff0101"))  # exponent out of range
    with pytest.raises(BadLength):
        decode_data(bytes.fromhex("880180"))


def test_strings_times_and_objid_reject_bad_content() -> None:
    with pytest.raises(BadValue) as err:
        decode_data(bytes.fromhex("8a024109"))
    assert err.value.offset == 3
    with pytest.raises(BadValue, match="UTF-8"):
        decode_data(bytes.fromhex("9001ff"))
    for bad in ("8c03000000", "8c0500000000ff"):
        with pytest.raises(BadLength):
            decode_data(bytes.fromhex(bad))
    with pytest.raises(BadLength):
        decode_data(bytes.fromhex("910700000000000000"))
    with pytest.raises(Truncated):
        decode_data(bytes.fromhex("8f0228c4"))  # ends inside a sub-identifier
    with pytest.raises(BadValue):
        decode_data(bytes.fromhex("8f03288001"))  # leading 0x80
    with pytest.raises(BadValue):
        encode_data(VisibleString("é"))
    with pytest.raises(BadValue):
        encode_data(ObjId((3, 1)))


def test_unknown_and_constructed_tags_rejected() -> None:
    for raw in ("8b0100", "a30101", "0301ff", "1f0100"):
        with pytest.raises(BadTag):
            decode_data(bytes.fromhex(raw))


def test_truncation_at_every_position_is_reported() -> None:
    raw = encode_all_data(
        (Structure((Boolean(True), Integer(300), UtcTime(5, 6, 7))), VisibleString("xyz"))
    )
    for cut in range(1, len(raw)):
        try:
            decode_all_data(raw[:cut])
        except (Truncated, BadLength, BadValue) as exc:
            assert 0 <= exc.offset <= cut and exc.path.startswith("allData[")


def test_depth_cap() -> None:
    inner = encode_data(Boolean(True))
    for _ in range(MAX_DEPTH):
        inner = encode_data(Structure((decode_data(inner),)))
    assert decode_data(inner)  # exactly MAX_DEPTH levels is fine
    deeper = b"\xa2" + bytes((len(inner),)) + inner if len(inner) < 128 else None
    assert deeper is not None
    with pytest.raises(BadValue, match="nesting deeper"):
        decode_data(deeper)


def test_element_count_cap() -> None:
    ok = b"\x83\x01\x01" * MAX_ELEMENTS
    assert len(decode_all_data(ok)) == MAX_ELEMENTS
    with pytest.raises(BadLength, match="more than"):
        decode_all_data(ok + b"\x83\x01\x01")


def test_dbpos_helper() -> None:
    assert Dbpos.OFF.to_bitstring() == decode_data(bytes.fromhex("84020640"))
    assert Dbpos.ON.to_bitstring().bits == "10"
    for pos in Dbpos:
        assert Dbpos.from_bitstring(pos.to_bitstring()) is pos
    with pytest.raises(TypeMismatch):
        Dbpos.from_bitstring(BitString.from_bits("101"))


def test_quality_helper() -> None:
    assert Quality().to_bits() == "0" * 13
    q = Quality(
        validity="questionable",
        details=frozenset({"oldData", "overflow"}),
        substituted=True,
        test=True,
        operator_blocked=True,
    )
    assert q.to_bits() == "11" + "10000100" + "111"
    assert Quality.from_bitstring(q.to_bitstring()) == q
    assert encode_data(Quality(validity="invalid").to_bitstring()) == bytes.fromhex("8403034000")
    with pytest.raises(BadValue):
        Quality(validity="bogus").to_bits()
    with pytest.raises(TypeMismatch):
        Quality.from_bitstring(BitString.from_bits("01"))


def test_utc_time_ns_and_quality() -> None:
    t = UtcTime(1_700_000_000, 0x800000, time_quality(clock_not_synchronized=True, accuracy=10))
    assert t.to_ns() == 1_700_000_000_500_000_000
    assert t.clock_not_synchronized and not t.clock_failure and t.accuracy == 10
    assert t.iso() == "2023-11-14T22:13:20.500000000Z"
    for frac in (0, 1, 0x7FFFFF, 0xFFFFFF):
        u = UtcTime(7, frac, 0)
        assert UtcTime.from_ns(u.to_ns()) == u
    assert UtcTime.from_ns(999_999_999) == UtcTime(1, 0, 0)
    with pytest.raises(BadValue):
        UtcTime(2**32, 0, 0).to_bytes()
    with pytest.raises(BadValue):
        time_quality(accuracy=40)


def test_data_shape() -> None:
    a = (Boolean(True), Quality().to_bitstring(), FloatingPoint.f32(1), Structure((Integer(1),)))
    b = (Boolean(False), Quality(validity="invalid").to_bitstring(), FloatingPoint.f32(2),
         Structure((Integer(99999),)))  # fmt: skip
    assert data_shape(a) == data_shape(b)
    assert data_shape(a) == (
        "boolean",
        "bit-string/13",
        "floating-point/32",
        ("structure", ("integer",)),
    )
    assert data_shape((Dbpos.ON.to_bitstring(),)) != data_shape((Quality().to_bitstring(),))
    with pytest.raises(TypeMismatch):
        data_shape(("x",))  # type: ignore[arg-type]
