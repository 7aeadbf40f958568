"""tshark (`-o prp.enable:TRUE`) as the oracle for goosectl's PRP frames: every frame the
LRE sends, data and supervision, untagged and tagged, short and long, decodes with the
SeqNr, LanId and LSDUsize it was given and no expert warning."""

from __future__ import annotations

import subprocess
from pathlib import Path

from goosectl.controller.prp import Lre, LreConfig
from goosectl.protocols.ethernet.pcap import PcapWriter
from tests.support.peers import require_tshark
from tests.support.prp_sender import goose

MAC = bytes.fromhex("020000ee0005")


def frames() -> list[tuple[bytes, str]]:
    """(frame, what it is) in order: (A, B) pairs of data frames, then supervision."""
    out: list[tuple[bytes, str]] = []
    lre = Lre(LreConfig(mac=MAC))
    lre.seq = 65_534  # the wrap is in the file too
    tiny = goose(1, 0)[:40]  # a frame shorter than the minimum: padded before the trailer
    for f, what in ((goose(1, 0), "untagged"), (goose(2, 0, vlan=True), "tagged"),
                    (tiny, "padded"), (goose(3, 0) + bytes(1200), "long")):  # fmt: skip
        a, b = lre.send(f)
        out += [(a, what), (b, what)]
    for port_frame in lre.supervision(0):
        out.append((port_frame[1], "supervision"))
    tagged = Lre(LreConfig(mac=MAC, vlan_tci=(4 << 13) | 10))
    for port_frame in tagged.supervision(0):
        out.append((port_frame[1], "supervision tagged"))
    return out


def test_tshark_decodes_every_prp_frame_with_the_right_trailer(tmp_path: Path) -> None:
    tshark = require_tshark()
    sent = frames()
    path = tmp_path / "prp.pcap"
    with PcapWriter(path) as w:
        for i, (f, _) in enumerate(sent):
            w.write(f, 1_000_000_000 + i)
    fields = ["prp.trailer.prp_sequence_nr", "prp.trailer.prp_lan", "prp.trailer.prp_size",
              "prp.trailer.prp1_suffix", "prp.trailer.version", "hsr_prp_supervision.version",
              "hsr_prp_supervision.tlv.type", "_ws.expert.severity", "frame.len",
              "vlan.id"]  # fmt: skip
    args = [tshark, "-o", "prp.enable:TRUE", "-r", str(path), "-T", "fields", "-E", "occurrence=f"]
    for f in fields:
        args += ["-e", f]
    res = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120)
    rows = [dict(zip(fields, line.split("\t"), strict=True)) for line in res.stdout.splitlines()]
    assert len(rows) == len(sent)
    seqs = [int(r["prp.trailer.prp_sequence_nr"]) for r in rows]
    assert seqs == [65_534, 65_534, 65_535, 65_535, 0, 0, 1, 1, 2, 2, 0, 0]
    assert [r["prp.trailer.prp_lan"] for r in rows] == ["10", "11"] * 6
    for r, (f, what) in zip(rows, sent, strict=True):
        tag = 4 if what in ("tagged", "supervision tagged") else 0
        assert int(r["prp.trailer.prp_size"]) == len(f) - 14 - tag, what
        assert r["prp.trailer.prp1_suffix"] == "0x88fb" and r["prp.trailer.version"] == "PRP-1"
        assert r["_ws.expert.severity"] == "", (what, r)
        assert int(r["frame.len"]) >= (70 if tag else 66), what
        if what.startswith("supervision"):
            assert r["hsr_prp_supervision.version"] == "1"
            assert r["hsr_prp_supervision.tlv.type"] == "20"
            assert int(r["prp.trailer.prp_size"]) == 52
    assert rows[2]["vlan.id"] == "0" and rows[-1]["vlan.id"] == "10"
    # the LSDUsize check itself: tshark's "[correct]" on every frame (no "WRONG")
    verbose = [tshark, "-o", "prp.enable:TRUE", "-r", str(path), "-V"]
    text = subprocess.run(verbose, capture_output=True, text=True, check=True, timeout=120).stdout
    assert text.count("[correct]") == len(sent) and "WRONG" not in text
