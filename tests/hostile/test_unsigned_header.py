"""An unsigned header field whose BER content has its top bit set, e.g.
sqNum ``86 02 ff ff`` as attack tools write it. `decode` printed an error and the
subscriber classified the frame malformed, while tshark and libiec61850 read 65535 (see
tests/interop/test_unsigned_header_peers.py). Now it is read unsigned like both peers,
flagged non-canonical, and classified like any frame.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goosectl.controller.cli import main as goosectl
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose import (
    BadValue,
    GooseFrame,
    decode_frame,
    encode_frame,
    frame_to_json,
    parse_header,
)
from tests.goose.helpers import verdicts
from tests.hostile.frames import BASE, hostile

CASES = [
    ("sqNum", "ffff", 65535),
    ("stNum", "80", 128),
    ("confRev", "ff", 255),
    ("timeAllowedtoLive", "ffffffff", 0xFFFFFFFF),
]
ATTR = {
    "sqNum": "sq_num",
    "stNum": "st_num",
    "confRev": "conf_rev",
    "timeAllowedtoLive": "time_allowed_to_live",
}


@pytest.mark.parametrize(("field", "content", "value"), CASES)
def test_top_bit_header_fields_read_unsigned_and_flagged(field, content, value):
    raw = hostile(**{field: bytes.fromhex(content)})
    head = parse_header(raw)
    frame = decode_frame(raw)
    assert getattr(head, ATTR[field]) == getattr(frame, ATTR[field]) == value
    assert head.non_canonical == frame.non_canonical == (field,)
    assert frame_to_json(frame)["nonCanonical"] == [field]
    # everything else is the frame it was
    assert frame.all_data == BASE.all_data and frame.gocb_ref == BASE.gocb_ref
    # re-encoding writes the canonical form of the same value, which reads back unflagged
    again = decode_frame(encode_frame(frame))
    assert getattr(again, ATTR[field]) == value and again.non_canonical == ()


def test_two_fields_at_once_are_both_named():
    raw = hostile(stNum=b"\x80", sqNum=b"\xff\xff")
    frame = decode_frame(raw)
    assert (frame.st_num, frame.sq_num) == (128, 65535)
    assert frame.non_canonical == ("stNum", "sqNum")


def test_canonical_frames_carry_no_flag_and_stay_byte_exact():
    raw = encode_frame(GooseFrame(**{**_kw(BASE), "sq_num": 65535, "st_num": 128}))
    frame = decode_frame(raw)
    assert frame.non_canonical == () and "nonCanonical" not in frame_to_json(frame)
    assert encode_frame(frame) == raw


@pytest.mark.parametrize("content", ["ffffffffff", "8000000001", "0100000000"])
def test_values_beyond_32_bits_are_still_refused(content):
    with pytest.raises(BadValue) as err:
        decode_frame(hostile(sqNum=bytes.fromhex(content)))
    assert err.value.path == "sqNum"


def test_the_subscriber_classifies_it_like_any_frame():
    hub = GooseHub()  # observer mode: every stream supervised
    t = 1_000_000_000
    first = verdicts(hub.frame(encode_frame(BASE), "A", t))
    assert [v.cls for v in first] == ["first"]
    attack = verdicts(hub.frame(hostile(sqNum=b"\xff\xff"), "A", t + 1_000_000))
    assert [(v.cls, v.sq_num) for v in attack] == [("retransmission", 65535)]
    assert "non_canonical" in attack[0].flags
    assert hub.bank.malformed == 0
    # the next canonical frame: sqNum goes back from 65535 to 8, seen as such, no flag
    after = verdicts(
        hub.frame(encode_frame(GooseFrame(**{**_kw(BASE), "sq_num": 8})), "A", t + 2_000_000)
    )
    assert [v.cls for v in after] == ["out_of_order"]
    assert "non_canonical" not in after[0].flags


def test_a_retransmission_of_a_flagged_state_keeps_the_flag_through_the_fast_path():
    hub = GooseHub()
    t = 1_000_000_000
    hub.frame(hostile(stNum=b"\x80"), "A", t)  # the stream remembers this frame
    again = GooseFrame(**{**_kw(BASE), "sq_num": 8})
    v = verdicts(hub.frame(hostile(again, stNum=b"\x80"), "A", t + 1_000_000))
    assert [(x.cls, x.st_num, x.sq_num) for x in v] == [("retransmission", 128, 8)]
    assert "non_canonical" in v[0].flags


def test_goosectl_decode_prints_it(tmp_path: Path, capsys):
    path = tmp_path / "attack.pcap"
    with PcapWriter(path) as w:
        w.write(encode_frame(BASE), 1_700_000_000_000_000_000)
        w.write(hostile(sqNum=b"\xff\xff"), 1_700_000_000_001_000_000)
    assert goosectl(["decode", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "error" not in lines[1]
    assert "sqNum=65535" in lines[1] and lines[1].endswith(" non-canonical=sqNum")
    assert "non-canonical" not in lines[0]
    assert goosectl(["decode", str(path), "--json"]) == 0
    objs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert objs[1]["sqNum"] == 65535 and objs[1]["nonCanonical"] == ["sqNum"]
    assert "nonCanonical" not in objs[0]


def _kw(frame: GooseFrame) -> dict:
    return {k: getattr(frame, k) for k in frame.__dataclass_fields__}
