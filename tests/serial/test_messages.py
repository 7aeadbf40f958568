"""The message table: every type round-trips, and every malformed payload is named precisely."""

from __future__ import annotations

import struct
from dataclasses import FrozenInstanceError, fields

import crc as crc_lib
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.errors import (
    BadBodyLength,
    BadCrc,
    BadFieldValue,
    EncodeError,
    ErrorKind,
    FrameTooShort,
    LinkProtocolError,
    UnknownType,
    UnknownVersion,
    WrongDirection,
)
from tests.serial.strategies import message_of, messages

_CRC = crc_lib.Calculator(crc_lib.Crc16.IBM_3740)


def with_crc(data: bytes) -> bytes:
    """Append a CRC computed by an independent library, not by the code under test."""
    return data + _CRC.checksum(data).to_bytes(2, "big")


def test_table_covers_every_type_once() -> None:
    assert sorted(m.SPECS) == sorted(int(t) for t in m.MsgType)
    assert len({s.cls for s in m.SPECS.values()}) == len(m.SPECS)


def test_type_code_ranges_match_direction() -> None:
    for code, spec in m.SPECS.items():
        if code < 0x40:
            assert spec.kind in m.SENT_BY_CONTROLLER, spec.name
        else:
            assert spec.kind in m.SENT_BY_DEVICE, spec.name
        assert (0x40 <= code < 0x80) == (spec.kind is m.Kind.EVENT)


def test_table_field_names_are_the_dataclass_fields() -> None:
    for spec in m.SPECS.values():
        assert tuple(f[0] for f in spec.fields) == tuple(f.name for f in fields(spec.cls))[1:]


def test_messages_are_frozen_and_slotted() -> None:
    msg = m.Trip(1)
    with pytest.raises(FrozenInstanceError):
        msg.seq = 2  # type: ignore[misc]
    assert not hasattr(msg, "__dict__")


def test_golden_bytes_trip() -> None:
    # version 1, type 0x03, seq 0x1234 big-endian, no body, CRC big-endian
    assert m.encode_payload(m.Trip(0x1234)) == with_crc(b"\x01\x03\x12\x34")


def test_golden_bytes_ack() -> None:
    ack = m.Ack(
        seq=0x0102,
        command=m.MsgType.CLOSE,
        result=m.AckResult.STARTED,
        position=m.Dbpos.OFF,
        flags=int(m.StatusFlag.SPRING_CHARGED | m.StatusFlag.SYNCED),
        inputs=0xA005,
        outputs=0x0003,
        boot_counter=7,
        event_seq=0xFFFF,
    )
    body = bytes([0x04, 0x02, 0x01, 0x02, 0x01, 0xA0, 0x05, 0x00, 0x03, 0x00, 0x07, 0xFF, 0xFF])
    assert m.encode_payload(ack) == with_crc(b"\x01\x80\x01\x02" + body)


def test_golden_bytes_configure() -> None:
    msg = m.Configure(9, m.ConfigParam.SPRING_CHARGE_MS, 5000)
    assert m.encode_payload(msg) == with_crc(b"\x01\x07\x00\x09\x03\x00\x00\x13\x88")


@pytest.mark.parametrize("spec", list(m.SPECS.values()), ids=lambda s: s.name)
@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(data=st.data())
def test_every_type_round_trips(spec: m.MessageSpec, data: st.DataObject) -> None:
    msg = data.draw(message_of(spec))
    payload = m.encode_payload(msg)
    assert len(payload) == spec.size
    assert m.decode_payload(payload) == msg
    assert m.decode_payload(payload, frozenset({spec.kind})) == msg


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(messages())
def test_decoded_enum_fields_are_enum_members(msg: m.Message) -> None:
    back = m.decode_payload(m.encode_payload(msg))
    spec = m.spec_for(back)
    for i, allowed in spec.checked:
        value = getattr(back, spec.fields[i][0])
        assert value is allowed[int(value)]


def test_dbpos_from_contacts() -> None:
    assert m.dbpos_from_contacts(False, False) is m.Dbpos.INTERMEDIATE
    assert m.dbpos_from_contacts(False, True) is m.Dbpos.OFF
    assert m.dbpos_from_contacts(True, False) is m.Dbpos.ON
    assert m.dbpos_from_contacts(True, True) is m.Dbpos.BAD


def test_config_defaults_from_the_issue() -> None:
    p = m.CONFIG_PARAMS
    assert p[m.ConfigParam.OPEN_TIME_MS].default == 30
    assert p[m.ConfigParam.CLOSE_TIME_MS].default == 60
    assert p[m.ConfigParam.SPRING_CHARGE_MS].default == 5000
    assert set(p) == set(m.ConfigParam)
    for r in p.values():
        assert r.minimum <= r.default <= r.maximum <= 0xFFFFFFFF


# ------------------------------------------------------------------ encode errors


@pytest.mark.parametrize(
    ("msg", "words"),
    [
        (m.Trip(0x10000), "TRIP"),
        (m.Trip(-1), "TRIP"),
        (m.SetOutput(1, 0x1FFFF, 0), "SET_OUTPUT"),
        (m.Alarm(1, m.AlarmId.GAS_PRESSURE_LOW, 2), "ALARM.active"),  # type: ignore[arg-type]
        (m.Reset(1, 7), "RESET.mode"),  # type: ignore[arg-type]
        (m.Ack(1, m.MsgType.ACK, 0, 0, 0, 0, 0, 0, 0), "ACK.command"),
        (m.Configure(1, m.ConfigParam.ANTI_PUMP, "1"), "CONFIGURE"),  # type: ignore[arg-type]
        (m.Message(1), "not a device-link message"),
        (m.SetOutput(1, 0x00F0, 0x0101), "SET_OUTPUT.values sets bits outside mask"),
    ],
)
def test_unencodable_messages_raise_encode_error(msg: m.Message, words: str) -> None:
    with pytest.raises(EncodeError, match=words.replace(".", r"\.")):
        m.encode_payload(msg)


# ------------------------------------------------------------------ decode errors


def test_too_short() -> None:
    with pytest.raises(FrameTooShort) as info:
        m.decode_payload(b"\x01\x03\x00")
    assert info.value.kind is ErrorKind.TOO_SHORT
    assert info.value.seq is None and not info.value.nackable


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(messages(), st.data())
def test_any_single_byte_change_is_bad_crc(msg: m.Message, data: st.DataObject) -> None:
    payload = bytearray(m.encode_payload(msg))
    i = data.draw(st.integers(0, len(payload) - 1))
    payload[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(BadCrc) as info:
        m.decode_payload(bytes(payload))
    err = info.value
    assert err.offset == len(payload) - 2
    assert err.seq is None and m.nack_for(err, 1) is None  # untrusted: dropped, not nacked


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.integers(0, 255).filter(lambda v: v != m.VERSION), st.integers(0, 0xFFFF))
def test_unknown_version_is_nackable_with_seq(version: int, seq: int) -> None:
    payload = with_crc(struct.pack(">BBH", version, m.MsgType.TRIP, seq) + b"future body")
    with pytest.raises(UnknownVersion) as info:
        m.decode_payload(payload)
    err = info.value
    assert (err.seq, err.version, err.msg_type, err.offset) == (seq, version, 3, 0)
    nack = m.nack_for(err, boot_counter=42)
    assert nack == m.Nack(seq, m.NackReason.UNKNOWN_VERSION, 3, m.VERSION, 42)
    assert m.decode_payload(m.encode_payload(nack)) == nack  # the NACK itself is valid


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.integers(0, 255).filter(lambda c: c not in m.SPECS), st.integers(0, 0xFFFF))
def test_unknown_type_is_nackable_with_seq(code: int, seq: int) -> None:
    payload = with_crc(struct.pack(">BBH", m.VERSION, code, seq))
    with pytest.raises(UnknownType) as info:
        m.decode_payload(payload)
    err = info.value
    assert (err.seq, err.msg_type, err.offset) == (seq, code, 1)
    assert m.nack_for(err, 3) == m.Nack(seq, m.NackReason.UNKNOWN_TYPE, code, 0, 3)


def test_wrong_direction() -> None:
    payload = m.encode_payload(m.PowerUp(5, 2, m.ResetCause.WATCHDOG))
    with pytest.raises(WrongDirection) as info:
        m.decode_payload(payload, m.SENT_BY_CONTROLLER)
    assert m.nack_for(info.value, 0).reason is m.NackReason.UNEXPECTED_TYPE
    # the same bytes are fine for the side that should receive them
    assert isinstance(m.decode_payload(payload, m.SENT_BY_DEVICE), m.PowerUp)


@pytest.mark.parametrize("delta", [-2, -1, 1, 5])
def test_bad_body_length(delta: int) -> None:
    good = m.encode_payload(m.SetOutput(77, 0x00FF, 0x000F))[:-2]
    bad = good[:delta] if delta < 0 else good + bytes(delta)
    with pytest.raises(BadBodyLength) as info:
        m.decode_payload(with_crc(bad))
    err = info.value
    assert err.seq == 77 and err.offset == 4
    assert "SET_OUTPUT body is" in err.reason
    nack = m.nack_for(err, 9)
    assert nack == m.Nack(77, m.NackReason.BAD_LENGTH, m.MsgType.SET_OUTPUT, 4, 9)


@pytest.mark.parametrize(
    ("payload", "offset", "field"),
    [
        (b"\x01\x41\x00\x01\x07\x01\x00\x00\x1e", 4, "position"),  # Dbpos 7
        (b"\x01\x41\x00\x01\x02\x01\x09\x00\x1e", 6, "cause"),
        (b"\x01\x42\x00\x01\x01\x02", 5, "active"),  # bool 2
        (b"\x01\x07\x00\x01\x63\x00\x00\x00\x01", 4, "param"),  # no parameter 0x63
        (b"\x01\x80\x00\x01\x40" + bytes(12), 4, "command"),  # ACK for an event type
        (b"\x01\x05\x00\x01\x00\xf0\x01\x01", 6, "values"),  # SET_OUTPUT outside mask
    ],
)
def test_bad_field_value_names_field_and_offset(payload: bytes, offset: int, field: str) -> None:
    with pytest.raises(BadFieldValue) as info:
        m.decode_payload(with_crc(payload))
    err = info.value
    assert err.offset == offset and f".{field} " in err.reason
    assert m.nack_for(err, 0).detail == offset


def test_error_message_says_what_where_why() -> None:
    with pytest.raises(LinkProtocolError) as info:
        m.decode_payload(with_crc(b"\x01\x99\x00\x05"))
    text = str(info.value)
    assert "unknown_type" in text and "0x99" in text and "offset 1" in text and "seq 5" in text


def test_errors_pickle() -> None:
    import pickle

    with pytest.raises(LinkProtocolError) as info:
        m.decode_payload(with_crc(b"\x02\x03\x00\x05"))
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is UnknownVersion and back.seq == 5 and str(back) == str(info.value)


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.binary(max_size=80))
def test_arbitrary_payloads_only_raise_link_errors(data: bytes) -> None:
    try:
        msg = m.decode_payload(data)
    except LinkProtocolError as err:
        assert isinstance(err.kind, ErrorKind)
    else:
        assert m.encode_payload(msg) == data  # anything accepted is canonical
