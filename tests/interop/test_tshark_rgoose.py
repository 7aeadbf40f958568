"""tshark's `rgoose` dissector as the oracle for the SPDUs goosectl writes: on UDP 102 it
finds the session header, the key id and SPDU number, the APDU and the goosePdu inside,
and the signature trailer, exactly where goosectl put them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose import GooseFrame, Integer, encode_frame
from goosectl.protocols.goose.utctime import UtcTime
from goosectl.protocols.rgoose import PORT, apdu_of_frame, encode
from goosectl.protocols.rgoose.udp import frame
from tests.rgoose.vectors import key
from tests.support.peers import require_tshark

pytestmark = pytest.mark.peer

FIELDS = (
    "rgoose.spdu_id",
    "rgoose.spdu_num",
    "rgoose.version",
    "rgoose.key_id",
    "rgoose.appid",
    "rgoose.simulation",
    "rgoose.hmac",
    "goose.gocbRef",
    "goose.stNum",
    "goose.sqNum",
    "goose.integer",
)


@pytest.mark.parametrize("alg", ["hmac-sha256-128", "hmac-sha256-256", None])
def test_tshark_decodes_goosectls_spdu(tmp_path: Path, alg: str | None) -> None:
    tshark = require_tshark()
    goose = GooseFrame(
        gocb_ref="GCTL1LD0/LLN0$GO$trip",
        dat_set="GCTL1LD0/LLN0$DS1",
        all_data=(Integer(4711),),
        t=UtcTime(1_800_000_000, 0, 0x0A),
        st_num=42,
        sq_num=3,
        appid=0x1001,
        reserved1=0x8000,
    )
    apdu = apdu_of_frame(encode_frame(goose))
    k = key(alg, key_id=77) if alg else None
    spdu = encode([apdu], 9001, key=k)
    pcap = tmp_path / "rgoose.pcap"
    with PcapWriter(pcap) as w:
        w.write(frame(spdu, src="10.0.0.1", dst="239.192.0.1", sport=PORT, dport=PORT), 10**18)
    out = subprocess.run(
        [tshark, "-r", str(pcap), "-T", "fields", *(a for f in FIELDS for a in ("-e", f))],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.strip("\n")
    got = dict(zip(FIELDS, out.split("\t"), strict=True))
    trailer = spdu[len(spdu) - 2 - k.algorithm.mac_len :] if k else b""
    assert got == {
        "rgoose.spdu_id": "0xa1",
        "rgoose.spdu_num": "9001",
        "rgoose.version": "0x0002",
        "rgoose.key_id": f"0x{(77 if k else 0):08x}",
        "rgoose.appid": "0x1001",
        "rgoose.simulation": "0x01",
        "rgoose.hmac": trailer.hex(),
        "goose.gocbRef": "GCTL1LD0/LLN0$GO$trip",
        "goose.stNum": "42",
        "goose.sqNum": "3",
        "goose.integer": "4711",
    }
