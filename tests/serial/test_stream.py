"""The incremental decoder: any split, any noise, bounded memory, every error counted."""

from __future__ import annotations

import struct

import crc as crc_lib
import pytest
from cobs import cobs
from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.errors import ErrorKind, LinkProtocolError
from goosectl.protocols.serial.framing import MAX_ENCODED
from goosectl.protocols.serial.stream import StreamDecoder, decode_frame, frame
from tests.serial.strategies import messages
from tests.support.examples import examples

_CRC = crc_lib.Calculator(crc_lib.Crc16.IBM_3740)


def raw_frame(payload_wo_crc: bytes) -> bytes:
    """A well-framed payload with a correct CRC from an independent library."""
    payload = payload_wo_crc + _CRC.checksum(payload_wo_crc).to_bytes(2, "big")
    return cobs.encode(payload) + b"\x00"


def msgs(results: list) -> list[m.Message]:
    return [r for r in results if isinstance(r, m.Message)]


def errs(results: list) -> list[LinkProtocolError]:
    return [r for r in results if isinstance(r, LinkProtocolError)]


def feed_chunks(dec: StreamDecoder, data: bytes, cuts: list[int]) -> list:
    out: list = []
    prev = 0
    for c in [*sorted(set(cuts)), len(data)]:
        out += dec.feed(data[prev:c])
        assert dec.buffered <= MAX_ENCODED
        prev = c
    return out


SAMPLE = [
    m.PowerUp(1, 17, m.ResetCause.POWER_ON),
    m.Ack(1, m.MsgType.TRIP, m.AckResult.STARTED, m.Dbpos.ON, 0x203, 0, 0, 17, 1),
    m.PositionChange(2, m.Dbpos.OFF, m.Dbpos.ON, m.PositionCause.TRIP_COMMAND, 31),
    m.Nack(2, m.NackReason.SPRING_DISCHARGED, m.MsgType.CLOSE, 0, 17),
]


def test_frame_is_cobs_of_payload_plus_delimiter() -> None:
    msg = m.Trip(0x0100)  # seq contains a zero byte, so COBS has work to do
    wire = frame(msg)
    assert wire.endswith(b"\x00") and 0 not in wire[:-1]
    assert cobs.decode(wire[:-1]) == m.encode_payload(msg)
    assert decode_frame(wire[:-1]) == msg


def test_every_split_point_gives_the_same_messages() -> None:
    wire = b"".join(frame(x) for x in SAMPLE)
    for cut in range(len(wire) + 1):
        dec = StreamDecoder(m.SENT_BY_DEVICE)
        assert msgs(dec.feed(wire[:cut]) + dec.feed(wire[cut:])) == SAMPLE
        assert dec.error_count == 0 and dec.messages == len(SAMPLE)


def test_byte_at_a_time() -> None:
    wire = b"".join(frame(x) for x in SAMPLE)
    dec = StreamDecoder()
    out = []
    for b in wire:
        out += dec.feed(bytes([b]))
    assert out == SAMPLE


def test_accepts_bytearray_and_memoryview() -> None:
    wire = frame(SAMPLE[0])
    assert StreamDecoder().feed(bytearray(wire)) == [SAMPLE[0]]
    assert StreamDecoder().feed(memoryview(wire)) == [SAMPLE[0]]


def test_str_is_refused_with_a_clear_error() -> None:
    with pytest.raises(TypeError, match="not str"):
        StreamDecoder().feed("\x01\x00")  # type: ignore[arg-type]


def test_empty_frames_are_ignored_not_errors() -> None:
    dec = StreamDecoder()
    assert dec.feed(b"\x00\x00" + frame(SAMPLE[0]) + b"\x00") == [SAMPLE[0]]
    assert dec.error_count == 0


@pytest.mark.parametrize(
    ("wire", "kind"),
    [
        (b"\x05\x01\x02\x00", ErrorKind.BAD_COBS),
        (b"\x02\x01\x00", ErrorKind.TOO_SHORT),
        (cobs.encode(b"\x01\x03\x00\x01\x00\x00") + b"\x00", ErrorKind.BAD_CRC),
        (raw_frame(b"\x09\x03\x00\x01"), ErrorKind.UNKNOWN_VERSION),
        (raw_frame(b"\x01\x3e\x00\x01"), ErrorKind.UNKNOWN_TYPE),
        (raw_frame(b"\x01\x03\x00\x01"), ErrorKind.WRONG_DIRECTION),  # TRIP sent to controller
        (raw_frame(b"\x01\x81\x00\x01\x01"), ErrorKind.BAD_LENGTH),
        (raw_frame(b"\x01\x42\x00\x01\x01\x05"), ErrorKind.BAD_VALUE),
        (b"\x01" * (MAX_ENCODED + 1) + b"\x00", ErrorKind.TOO_LONG),
    ],
)
def test_each_error_kind_is_reported_counted_and_survived(wire: bytes, kind: ErrorKind) -> None:
    dec = StreamDecoder(m.SENT_BY_DEVICE)
    lead = frame(SAMPLE[0])
    out = dec.feed(lead + wire + frame(SAMPLE[1]))
    assert msgs(out) == SAMPLE[:2]  # the neighbours on both sides survive
    (err,) = errs(out)
    assert err.kind is kind
    assert err.stream_offset == len(lead)
    assert dec.errors == {kind: 1}
    assert dec.messages == 2


def test_nack_round_trip_from_device_to_controller() -> None:
    """A device answers an unknown type with a NACK the controller can decode and match."""
    device = StreamDecoder(m.SENT_BY_CONTROLLER)
    (err,) = device.feed(raw_frame(b"\x01\x3e\xbe\xef"))
    assert isinstance(err, LinkProtocolError) and err.nackable
    nack = m.nack_for(err, boot_counter=3)
    assert nack is not None
    controller = StreamDecoder(m.SENT_BY_DEVICE)
    assert controller.feed(frame(nack)) == [m.Nack(0xBEEF, m.NackReason.UNKNOWN_TYPE, 0x3E, 0, 3)]


def test_noise_without_delimiter_is_bounded_and_reported_once() -> None:
    dec = StreamDecoder()
    out = []
    for _ in range(2000):
        out += dec.feed(b"\x55" * 500)
        assert dec.buffered <= MAX_ENCODED
    assert [e.kind for e in errs(out)] == [ErrorKind.TOO_LONG]
    assert errs(out)[0].stream_offset == 0
    # the first delimiter ends the junk; the next frame decodes
    assert dec.feed(b"\x00" + frame(SAMPLE[2])) == [SAMPLE[2]]
    assert dec.errors == {ErrorKind.TOO_LONG: 1}


def test_oversized_frame_in_one_feed_and_across_feeds() -> None:
    big = b"\x07" * (MAX_ENCODED + 10)
    dec = StreamDecoder()
    out = dec.feed(big + b"\x00" + frame(SAMPLE[0]))
    assert [type(x) for x in out][-1] is m.PowerUp
    out = dec.feed(big[:40]) + dec.feed(big[40:]) + dec.feed(b"\x00" + frame(SAMPLE[0]))
    assert msgs(out) == [SAMPLE[0]]
    assert dec.errors == {ErrorKind.TOO_LONG: 2}


def test_exactly_max_encoded_is_accepted_by_the_bound() -> None:
    # a frame of exactly MAX_ENCODED bytes is not TOO_LONG (it fails later, on CRC)
    dec = StreamDecoder()
    (err,) = dec.feed(b"\x01" * MAX_ENCODED + b"\x00")
    assert err.kind is not ErrorKind.TOO_LONG


def test_reset_drops_a_partial_frame() -> None:
    dec = StreamDecoder()
    wire = frame(SAMPLE[0])
    dec.feed(wire[:4])
    dec.reset()
    assert dec.buffered == 0
    assert dec.feed(wire) == [SAMPLE[0]]


def test_stream_offsets_accumulate_across_feeds() -> None:
    dec = StreamDecoder()
    dec.feed(frame(SAMPLE[0]))
    dec.feed(b"\xff\xff")
    (err,) = dec.feed(b"\x00")
    assert err.stream_offset == len(frame(SAMPLE[0]))


# ------------------------------------------------------------------ properties

garbage = st.binary(min_size=1, max_size=150)
soup_items = st.lists(
    st.one_of(messages().map(lambda x: ("msg", x)), garbage.map(lambda g: ("junk", g))),
    max_size=40,
)


@settings(max_examples=examples(300), deadline=None)
@given(soup_items, st.lists(st.integers(0, 6000), max_size=30))
def test_soup_every_untouched_frame_is_decoded(items: list, cuts: list[int]) -> None:
    """Random byte soup interleaved with frames: every frame not glued to junk survives.

    A frame is untouched when the byte before it is a 0x00 (or it starts the stream):
    junk that ends without a delimiter merges with the next frame, which no framing can
    separate.
    """
    wire = b""
    expected: list[m.Message] = []
    for tag, x in items:
        if tag == "msg":
            if not wire or wire.endswith(b"\x00"):
                expected.append(x)
            wire += frame(x)
        else:
            wire += x
    dec = StreamDecoder()
    out = feed_chunks(dec, wire, cuts)
    got = iter(msgs(out))
    assert all(any(g == want for g in got) for want in expected)  # ordered subsequence
    assert dec.error_count == len(errs(out))
    assert all(isinstance(x, m.Message | LinkProtocolError) for x in out)


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.lists(messages(), min_size=1, max_size=12), st.data())
def test_one_corrupted_byte_loses_only_its_own_frame(frames: list, data: st.DataObject) -> None:
    wires = [frame(x) for x in frames]
    victim = data.draw(st.integers(0, len(wires) - 1))
    w = bytearray(wires[victim])
    pos = data.draw(st.integers(0, len(w) - 2))  # not the delimiter: that would glue frames
    w[pos] ^= data.draw(st.integers(1, 255))
    wires[victim] = bytes(w)
    dec = StreamDecoder()
    out = dec.feed(b"".join(wires))
    assert msgs(out) == frames[:victim] + frames[victim + 1 :]
    assert 1 <= dec.error_count <= 2  # a byte turned into 0x00 splits the frame in two


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.binary(max_size=3000), st.lists(st.integers(0, 3000), max_size=20))
def test_arbitrary_bytes_never_raise_and_stay_bounded(data: bytes, cuts: list[int]) -> None:
    for accept in (None, m.SENT_BY_DEVICE, m.SENT_BY_CONTROLLER):
        dec = StreamDecoder(accept)
        out = feed_chunks(dec, data, cuts)
        assert dec.messages + dec.error_count == len(out)


def test_struct_layout_of_header_is_frozen() -> None:
    # version/type/seq at fixed offsets in every version: what lets any version be nacked
    assert m.HEADER.format == ">BBH" and struct.calcsize(m.HEADER.format) == 4
