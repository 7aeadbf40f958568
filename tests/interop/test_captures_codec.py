"""The real IED captures (tests/data/captures) through the codec: every GOOSE frame
decodes without error, re-encodes byte for byte, and the fast header parse agrees with
the full decode. The counts pin what PROVENANCE.md says is in each file."""

from __future__ import annotations

from pathlib import Path

import pytest

from goosectl.protocols.ethernet.pcap import read_capture
from goosectl.protocols.goose import (
    BitString,
    Boolean,
    Quality,
    data_shape,
    decode_all_data,
    decode_frame,
    encode_frame,
    is_goose,
    parse_header,
)
from tests.support.peers import capture_files

EXPECTED_GOOSE_FRAMES = {
    "iti_Sample_File_GOOSE.pcap": 451,
    "iti_GOOSE.pcap": 8,
    "iti_GOOSE_DEMO.pcap": 1,
    "brogoose_goose_orig.pcap": 16,
}


@pytest.mark.parametrize("path", capture_files(), ids=lambda p: p.name)
def test_capture_decodes_and_reencodes_byte_for_byte(path: Path) -> None:
    count = 0
    for cap in read_capture(path):
        if not is_goose(cap.data):
            continue
        frame = decode_frame(cap.data)
        assert encode_frame(frame) == cap.data, f"frame {cap.number}"
        head = parse_header(cap.data)
        assert (
            head.all_data
            == cap.data[head.all_data_offset : head.all_data_offset + len(head.all_data)]
        )
        assert head.decode_all_data() == frame.all_data
        assert decode_all_data(head.all_data) == frame.all_data
        assert (head.gocb_ref, head.st_num, head.sq_num, head.t) == (
            frame.gocb_ref,
            frame.st_num,
            frame.sq_num,
            frame.t,
        )
        assert len(frame.all_data) == frame.num_dat_set_entries
        count += 1
    assert count == EXPECTED_GOOSE_FRAMES[path.name]


def test_sample_file_facts_from_provenance() -> None:
    path = next(p for p in capture_files() if p.name == "iti_Sample_File_GOOSE.pcap")
    frames = [decode_frame(c.data) for c in read_capture(path)]
    assert {f.vlan.id for f in frames} == {0} and {f.vlan.priority for f in frames} == {4}
    assert {f.appid for f in frames} == {0x3001}
    assert {f.conf_rev for f in frames} == {1, 5, 2}
    assert {f.time_allowed_to_live for f in frames} == {15000}
    assert {f.t.quality for f in frames} == {0x27}
    assert {len(f.all_data) for f in frames} == {25}
    booleans = [v for f in frames for v in f.all_data if isinstance(v, Boolean) and v.value]
    assert booleans and {b.octet for b in booleans} == {0xFF}  # true sent as 0xFF
    # one stream keeps one shape
    by_ref: dict[str, set] = {}
    for f in frames:
        by_ref.setdefault(f.gocb_ref, set()).add(data_shape(f.all_data))
    assert all(len(shapes) == 1 for shapes in by_ref.values())


def test_sel_frames_nested_structures_and_quality() -> None:
    path = next(p for p in capture_files() if p.name == "brogoose_goose_orig.pcap")
    frames = [decode_frame(c.data) for c in read_capture(path)]
    assert {f.appid for f in frames} == {3, 4}
    first = frames[0]
    assert first.all_data[0].type_name == "structure"
    member = first.all_data[0].items[0]
    assert [v.type_name for v in member.items] == ["integer", "bit-string", "utc-time"]
    q = Quality.from_bitstring(member.items[1])
    assert q == Quality()  # all-zero 13-bit quality: good, process, no flags
    assert isinstance(member.items[1], BitString) and len(member.items[1]) == 13


def test_ge_frames_padded_integers_and_sqnum_reset() -> None:
    demo = next(p for p in capture_files() if p.name == "iti_GOOSE_DEMO.pcap")
    (cap,) = list(read_capture(demo))
    frame = decode_frame(cap.data)
    assert frame.int_widths == (5, 5, 5, 5, 5)  # this IED pads every header INTEGER
    assert frame.time_allowed_to_live == 10000 and frame.vlan.id == 10
    ge = next(p for p in capture_files() if p.name == "iti_GOOSE.pcap")
    frames = [decode_frame(c.data) for c in read_capture(ge)]
    assert [f.time_allowed_to_live for f in frames].count(40000) >= 2
    assert {1000, 2000} <= {f.time_allowed_to_live for f in frames}
