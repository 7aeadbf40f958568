"""The scapy GOOSE layer: builds with Ether()/Dot1Q()/GOOSE(), shows, and dissects
through the codec (same bytes, same values)."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

from goosectl.protocols.goose import Boolean, FloatingPoint, UtcTime, decode_frame, encode_frame
from goosectl.protocols.goose.scapy_layer import GOOSE
from tests.codec.corpus import corpus_frames


def test_build_with_dot1q_and_decode_with_codec() -> None:
    pkt = (
        Ether(dst="01:0c:cd:01:00:01", src="00:11:22:33:44:55")
        / Dot1Q(vlan=10, prio=4)
        / GOOSE(
            appid=0x1000,
            gocbRef="IED/LLN0$GO$g",
            datSet="IED/LLN0$DS",
            stNum=7,
            t=UtcTime(1_700_000_000, 0, 0x0A),
            allData=(Boolean(True), FloatingPoint.f32(1.5)),
        )
    )
    frame = decode_frame(bytes(pkt))
    assert frame.vlan.id == 10 and frame.vlan.priority == 4 and frame.appid == 0x1000
    assert frame.st_num == 7 and frame.all_data == (Boolean(True), FloatingPoint.f32(1.5))


def test_dissect_show_and_rebuild_every_corpus_frame() -> None:
    for frame in corpus_frames():
        raw = encode_frame(frame)
        pkt = Ether(raw)
        g = pkt[GOOSE]
        assert g.gocbRef == frame.gocb_ref and g.stNum == frame.st_num
        assert tuple(g.allData) == frame.all_data
        assert bytes(pkt) == raw
        text = pkt.show(dump=True)
        assert "###[ GOOSE ]###" in text and "gocbRef" in text and "allData" in text


def test_malformed_goose_falls_back_to_raw() -> None:
    raw = bytearray(encode_frame(corpus_frames()[1]))
    assert raw[22] == 0x61
    raw[22] = 0x62  # not a goosePdu tag
    pkt = Ether(bytes(raw))
    assert GOOSE not in pkt and Raw in pkt


@pytest.mark.parametrize("field", ["stNum", "sqNum"])
def test_edit_field_and_recompute_length(field: str) -> None:
    pkt = Ether(encode_frame(corpus_frames()[1]))
    setattr(pkt[GOOSE], field, 300_000)
    del pkt[GOOSE].length
    assert getattr(decode_frame(bytes(pkt)), "st_num" if field == "stNum" else "sq_num") == 300_000
