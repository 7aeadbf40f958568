"""An unsigned header field sent as a negative BER
INTEGER (top bit set). libiec61850 reads every one of them unsigned; Wireshark 4.0 reads
stNum and sqNum unsigned and shows timeAllowedtoLive and confRev as signed INTEGERs (-1,
-127). Our decoder reads all of them unsigned, so it is compared with tshark where tshark
treats the field as unsigned and with libiec61850 for every field.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose import decode_frame
from tests.hostile.frames import hostile
from tests.interop.test_tshark_codec import _field, _int, _pdml
from tests.support.peers import require_iec61850

pytestmark = pytest.mark.peer

#: (field, content octets as an attack tool writes them)
CRAFTED = [
    ("sqNum", "ffff"),
    ("sqNum", "80"),
    ("sqNum", "ffffffff"),
    ("stNum", "80"),
    ("stNum", "ff00"),
    ("confRev", "81"),
    ("timeAllowedtoLive", "ffff"),
    ("timeAllowedtoLive", "ffffffff"),
]
ATTR = {
    "sqNum": "sq_num",
    "stNum": "st_num",
    "confRev": "conf_rev",
    "timeAllowedtoLive": "time_allowed_to_live",
}


def _frames() -> list[bytes]:
    return [hostile(**{name: bytes.fromhex(content)}) for name, content in CRAFTED]


def test_stnum_and_sqnum_read_like_tshark(tmp_path: Path) -> None:
    path = tmp_path / "crafted.pcap"
    frames = _frames()
    with PcapWriter(path) as w:
        for i, raw in enumerate(frames):
            w.write(raw, 1_700_000_000_000_000_000 + i * 1_000_000)
    packets = _pdml(path)
    assert len(packets) == len(frames)
    for (name, content), raw, pkt in zip(CRAFTED, frames, packets, strict=True):
        ours = decode_frame(raw)
        goose = next(p for p in pkt.findall("proto") if p.get("name") == "goose")
        theirs = {f: _int(_field(goose, f"goose.{f}")) for f in ("stNum", "sqNum")}
        assert (theirs["stNum"], theirs["sqNum"]) == (ours.st_num, ours.sq_num), content
        assert ours.non_canonical == (name,)
        if name in ("stNum", "sqNum"):
            assert theirs[name] == int(content, 16)  # tshark reads the octets unsigned


def test_every_field_reads_like_libiec61850() -> None:
    require_iec61850()
    from goosectl.lab.iec61850_peer import parse_with_libiec61850

    for (name, content), raw in zip(CRAFTED, _frames(), strict=True):
        ours = decode_frame(raw)
        seen = parse_with_libiec61850(raw)
        assert seen is not None and seen["valid"], content
        assert (seen["stNum"], seen["sqNum"]) == (ours.st_num, ours.sq_num), content
        assert seen["timeAllowedToLive"] == ours.time_allowed_to_live, content
        assert seen["confRev"] == ours.conf_rev, content
        assert getattr(ours, ATTR[name]) == int(content, 16)
