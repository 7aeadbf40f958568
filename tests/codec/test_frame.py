"""Frame-level behaviour: Ethernet/802.1Q/GOOSE header, goosePdu fields, strictness,
tolerance, and the error family's offsets and paths."""

from __future__ import annotations

import pytest

from goosectl.protocols.goose import (
    BadLength,
    BadTag,
    BadValue,
    Boolean,
    GooseError,
    GooseFrame,
    Integer,
    Structure,
    Truncated,
    TypeMismatch,
    UnknownField,
    UtcTime,
    Vlan,
    decode_frame,
    encode_frame,
    is_goose,
    mac,
    parse_header,
)
from goosectl.protocols.goose.ber import encode_length
from tests.codec.corpus import corpus_frames, flat16

BASE = GooseFrame(
    gocb_ref="IED1LD0/LLN0$GO$gcb01",
    dat_set="IED1LD0/LLN0$DS01",
    go_id="G1",
    all_data=(Boolean(True), Integer(7)),
    t=UtcTime(1_700_000_000, 0x123456, 0x0A),
    st_num=3,
    sq_num=9,
    appid=0x1001,
    src=mac("00:11:22:33:44:55"),
)


def _pdu_at(raw: bytes) -> int:
    return 18 if raw[12:14] == b"\x81\x00" else 14


def test_known_bytes_of_a_minimal_frame() -> None:
    raw = encode_frame(BASE)
    assert raw[:14] == bytes.fromhex("010ccd01000000112233445588b8")
    assert raw[14:16] == b"\x10\x01"  # APPID
    assert int.from_bytes(raw[16:18], "big") == len(raw) - 14  # Length covers APPID..end
    assert raw[18:22] == bytes(4)
    pdu = raw[22:]
    assert pdu[0] == 0x61 and pdu[1] == len(pdu) - 2
    assert pdu[2:4] == b"\x80\x15" and pdu[4:25] == b"IED1LD0/LLN0$GO$gcb01"
    assert raw.endswith(bytes.fromhex("ab06830101850107"))
    assert bytes.fromhex("84086553f1001234560a") in raw
    assert bytes.fromhex("8501038601098701008801018901008a0102") in raw


def test_round_trip_corpus() -> None:
    for frame in corpus_frames():
        raw = encode_frame(frame)
        assert decode_frame(raw) == frame
        assert encode_frame(decode_frame(raw)) == raw


def test_vlan_tag_in_buffer_and_stripped_by_kernel() -> None:
    tagged = encode_frame(GooseFrame(**{**_kw(BASE), "vlan": Vlan(10, 4)}))
    assert tagged[12:16] == b"\x81\x00\x80\x0a"
    assert decode_frame(tagged).vlan == Vlan(10, 4, 0)
    untagged = encode_frame(BASE)
    assert decode_frame(untagged).vlan is None
    # kernel removed the tag: the caller passes it in
    assert decode_frame(untagged, vlan=Vlan(7, 6)).vlan == Vlan(7, 6)
    assert parse_header(untagged, vlan=Vlan(7, 6)).vlan == Vlan(7, 6)
    # a tag still in the buffer wins over the caller's
    assert decode_frame(tagged, vlan=Vlan(7, 6)).vlan == Vlan(10, 4)


def _kw(frame: GooseFrame) -> dict:
    """Constructor keywords of ``frame``; numDatSetEntries recomputed unless given."""
    out = {name: getattr(frame, name) for name in frame.__dataclass_fields__}
    out["num_dat_set_entries"] = None
    return out


def test_simulation_bit_and_reserved2_exposed() -> None:
    raw = encode_frame(GooseFrame(**{**_kw(BASE), "reserved1": 0x8000, "reserved2": 0x1234}))
    frame = decode_frame(raw)
    assert frame.simulated and frame.reserved1 == 0x8000 and frame.reserved2 == 0x1234
    assert parse_header(raw).simulated
    assert not decode_frame(encode_frame(BASE)).simulated


def test_exact_size_frame_is_valid_and_padding_is_kept() -> None:
    raw = encode_frame(BASE)
    assert decode_frame(raw).trailer == b""
    padded = raw + bytes(10)
    frame = decode_frame(padded)
    assert frame.trailer == bytes(10) and encode_frame(frame) == padded


def test_length_longer_than_buffer_is_truncated() -> None:
    raw = encode_frame(BASE)
    with pytest.raises(Truncated) as err:
        decode_frame(raw[:-1])
    assert err.value.path == "length" and err.value.offset == 16


def test_length_below_header_is_bad_length() -> None:
    raw = bytearray(encode_frame(BASE))
    raw[16:18] = (7).to_bytes(2, "big")
    with pytest.raises(BadLength) as err:
        decode_frame(bytes(raw))
    assert err.value.path == "length"


def test_security_extension_after_pdu_is_kept() -> None:
    raw = bytearray(encode_frame(BASE))
    ext = b"\xde\xad\xbe\xef"
    raw += ext
    raw[16:18] = (int.from_bytes(raw[16:18], "big") + len(ext)).to_bytes(2, "big")
    frame = decode_frame(bytes(raw))
    assert frame.security == ext
    assert encode_frame(frame) == bytes(raw)


def test_unknown_pdu_tag_is_skipped_and_reported() -> None:
    raw = encode_frame(BASE)
    off = _pdu_at(raw) + 8
    body = raw[off + 2 :]
    extra = b"\x8c\x02\xbe\xef"  # context tag [12]: not in the goosePdu table
    new_body = body + extra
    frame_bytes = (
        raw[:16]
        + (8 + 2 + len(new_body)).to_bytes(2, "big")
        + raw[18:off]
        + b"\x61"
        + encode_length(len(new_body))
        + new_body
    )
    frame = decode_frame(frame_bytes)
    assert frame.unknown == (UnknownField(0x8C, b"\xbe\xef"),)
    assert frame.unknown[0].offset == len(frame_bytes) - 4
    assert encode_frame(frame) == frame_bytes
    assert frame.all_data == BASE.all_data


def _pdu_fields(raw: bytes) -> tuple[bytes, list[bytes]]:
    """Split a canonical frame into (header up to the PDU, [field TLVs])."""
    off = _pdu_at(raw) + 8
    assert raw[off] == 0x61
    pos = off + 2 if raw[off + 1] < 0x80 else off + 3
    fields = []
    while pos < len(raw):
        ln = raw[pos + 1]
        size = 2 + ln if ln < 0x80 else 3 + raw[pos + 2]
        fields.append(raw[pos : pos + size])
        pos += size
    return raw[:off], fields


def _rebuild(head: bytes, fields: list[bytes]) -> bytes:
    body = b"".join(fields)
    pdu = b"\x61" + encode_length(len(body)) + body
    off = _pdu_at(head)
    return head[: off + 2] + (8 + len(pdu)).to_bytes(2, "big") + head[off + 4 :] + pdu


def test_fields_out_of_order_missing_or_repeated_are_bad_tag() -> None:
    head, fields = _pdu_fields(encode_frame(BASE))
    swapped = fields[:]
    swapped[5], swapped[6] = swapped[6], swapped[5]  # sqNum before stNum
    with pytest.raises(BadTag) as err:
        decode_frame(_rebuild(head, swapped))
    assert err.value.path == "stNum"
    with pytest.raises(BadTag) as err:
        decode_frame(_rebuild(head, fields[:1] + fields[2:]))  # no timeAllowedtoLive
    assert err.value.path == "timeAllowedtoLive"
    with pytest.raises(BadTag):
        decode_frame(_rebuild(head, fields[:2] + fields[1:]))  # TAL twice
    with pytest.raises(Truncated) as err:
        decode_frame(_rebuild(head, fields[:-1]))  # no allData
    assert err.value.path == "allData"


def test_optional_fields_may_be_absent() -> None:
    head, fields = _pdu_fields(encode_frame(BASE))
    # goID (index 3), simulation (7) and ndsCom (9) are OPTIONAL / DEFAULT FALSE
    trimmed = [f for i, f in enumerate(fields) if i not in (3, 7, 9)]
    frame = decode_frame(_rebuild(head, trimmed))
    assert frame.go_id is None and frame.simulation is False and frame.nds_com is False
    assert frame.all_data == BASE.all_data


def test_indefinite_and_oversized_lengths_rejected() -> None:
    raw = bytearray(encode_frame(BASE))
    off = _pdu_at(raw) + 8
    raw[off + 1] = 0x80
    with pytest.raises(BadLength, match="indefinite"):
        decode_frame(bytes(raw))
    raw[off + 1] = 0x85
    with pytest.raises(BadLength, match="5 octets"):
        decode_frame(bytes(raw))


def test_long_form_lengths_decode_and_encode_minimally() -> None:
    big = GooseFrame(**{**_kw(BASE), "all_data": tuple(Integer(i) for i in range(200))})
    raw = encode_frame(big)
    assert b"\x61\x82" in raw and b"\xab\x82" in raw
    assert decode_frame(raw) == big


def test_non_goose_ethertype_and_short_buffers() -> None:
    raw = bytearray(encode_frame(BASE))
    assert is_goose(bytes(raw))
    raw[12:14] = b"\x08\x00"
    assert not is_goose(bytes(raw))
    with pytest.raises(BadValue) as err:
        decode_frame(bytes(raw))
    assert err.value.path == "ethertype" and err.value.offset == 12
    for n in (0, 5, 13, 17, 21):
        with pytest.raises(Truncated):
            decode_frame(encode_frame(BASE)[:n])


def test_error_path_names_nested_element() -> None:
    data = (
        Boolean(True),
        Integer(1),
        Integer(2),
        Structure((Boolean(False), Integer(300), Boolean(True))),
    )
    raw = bytearray(encode_frame(GooseFrame(**{**_kw(BASE), "all_data": data})))
    # corrupt the integer inside allData[3].structure[1]: 85 02 01 2c -> 85 09 ...
    i = raw.rindex(bytes.fromhex("8502012c"))
    raw[i + 1] = 0x09
    with pytest.raises(GooseError) as err:
        decode_frame(bytes(raw))
    assert err.value.path == "allData[3].structure[1]"
    assert err.value.offset == i + 1
    assert isinstance(err.value, Truncated)
    assert "allData[3].structure[1]" in str(err.value) and str(i + 1) in str(err.value)


def test_num_dat_set_entries_must_match() -> None:
    frame = GooseFrame(**{**_kw(BASE), "num_dat_set_entries": 5})
    with pytest.raises(BadValue) as err:
        decode_frame(encode_frame(frame))
    assert err.value.path == "numDatSetEntries"
    # the fast header parse does not decode allData, so it reports what was sent
    assert parse_header(encode_frame(frame)).num_dat_set_entries == 5


def test_header_parse_returns_raw_all_data_and_lazy_decode() -> None:
    frame = GooseFrame(**{**_kw(BASE), "all_data": flat16()})
    raw = encode_frame(frame)
    h = parse_header(raw)
    assert h.gocb_ref == frame.gocb_ref and h.go_id == "G1"
    assert (h.st_num, h.sq_num, h.conf_rev, h.time_allowed_to_live) == (3, 9, 1, 2000)
    assert h.t == frame.t and h.appid == 0x1001 and h.dst == frame.dst and h.src == frame.src
    assert raw[h.all_data_offset : h.all_data_offset + len(h.all_data)] == h.all_data
    assert h.decode_all_data() == frame.all_data
    # a retransmission differs only in sqNum: allData bytes compare equal
    again = parse_header(encode_frame(GooseFrame(**{**_kw(frame), "sq_num": 10})))
    assert again.all_data == h.all_data and again.sq_num == 10


def test_header_integers_out_of_range_rejected_on_decode() -> None:
    head, fields = _pdu_fields(encode_frame(BASE))
    # 2**32, and -1 in five octets (no unsigned reading fits 32 bits); a top bit set in
    # 1-4 octets is read unsigned (tests/hostile/test_unsigned_header.py)
    for bad in (bytes.fromhex("85050100000000"), bytes.fromhex("8505ffffffffff")):
        with pytest.raises(BadValue) as err:
            decode_frame(_rebuild(head, [*fields[:5], bad, *fields[6:]]))
        assert err.value.path == "stNum"


def test_padded_header_integers_are_tolerated_and_kept() -> None:
    head, fields = _pdu_fields(encode_frame(BASE))
    padded = bytes.fromhex("850400000003")
    raw = _rebuild(head, [*fields[:5], padded, *fields[6:]])
    frame = decode_frame(raw)
    assert frame.st_num == 3 and frame.int_widths == (None, 4, None, None, None)
    assert frame == decode_frame(encode_frame(BASE))  # width is not part of equality
    assert encode_frame(frame) == raw


def test_encode_rejects_bad_python_values_with_field_names() -> None:
    cases = {
        "st_num": (-1, "stNum", BadValue),
        "sq_num": (2**32, "sqNum", BadValue),
        "time_allowed_to_live": ("10", "timeAllowedtoLive", TypeMismatch),
        "gocb_ref": ("bad\x00ref", "gocbRef", BadValue),
        "dst": (b"\x01\x02", "dst", TypeMismatch),
        "appid": (70000, "appid", BadValue),
        "t": (12, "t", TypeMismatch),
    }
    for attr, (value, path, exc_type) in cases.items():
        with pytest.raises(exc_type) as err:
            encode_frame(GooseFrame(**{**_kw(BASE), attr: value}))
        assert err.value.path == path, attr
    with pytest.raises(BadValue):
        encode_frame(GooseFrame(**{**_kw(BASE), "vlan": Vlan(5000, 4)}))
    with pytest.raises(TypeMismatch) as err:
        encode_frame(GooseFrame(**{**_kw(BASE), "all_data": (Boolean(True), "x")}))
    assert err.value.path == "allData[1]"


def test_mac_helpers() -> None:
    assert mac("01-0C-CD-01-00-01") == bytes.fromhex("010ccd010001")
    for bad in ("01:02", "zz:00:00:00:00:00", "001:02:03:04:05:06"):
        with pytest.raises(TypeMismatch):
            mac(bad)
