"""IEC 62351-6 signed frames against the independent peers: tshark decodes their goosePdu
exactly as it decodes the same frames unsigned, and libiec61850 (which knows nothing of the
extension) still receives them, values and all."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import GooseFrame, UtcTime, Vlan, encode_frame
from goosectl.protocols.goose.security import ALGORITHMS, PROFILES, MacKey, sign
from tests.codec.corpus import corpus_frames
from tests.interop.test_libiec61850_codec import (
    ALL_TYPES,
    DATSET,
    DST,
    GOCB,
    GOID,
    to_data,
)
from tests.interop.test_libiec61850_codec import link as link  # the veth fixture
from tests.interop.test_tshark_codec import _pdml, _wireshark_json
from tests.support.libiec61850_rx import start_primed_receiver

KEYS = {
    "hmac-sha256-80": MacKey(3, ALGORITHMS["hmac-sha256-80"], bytes(range(32))),
    "hmac-sha256-256": MacKey(70_000, ALGORITHMS["hmac-sha256-256"], bytes(range(32))),
    "aes-gmac-128": MacKey(5, ALGORITHMS["aes-gmac-128"], bytes(range(16))),
}


def _signed(frame: bytes, i: int, alg: str, profile: str) -> bytes:
    key = KEYS[alg]
    iv = i.to_bytes(12, "big") if key.algorithm.gmac else None
    return sign(frame, key, PROFILES[profile], iv=iv, time_of_current_key=1_700_000_000)


def _tshark_view(path: Path) -> list[dict]:
    return [j for j in (_wireshark_json(p) for p in _pdml(path)) if j is not None]


@pytest.mark.parametrize("alg", sorted(KEYS))
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_tshark_decodes_signed_frames_like_unsigned_ones(tmp_path, alg, profile) -> None:
    frames = [
        f
        for f in corpus_frames()
        if not f.reserved1 & 0x8000 or profile != "flag-length"  # no S-bit there
    ]
    plain, signed = tmp_path / "plain.pcap", tmp_path / "signed.pcap"
    with PcapWriter(plain) as a, PcapWriter(signed) as b:
        for i, frame in enumerate(frames):
            ts = 1_700_000_000_123_456_789 + i * 1_000_000
            raw = encode_frame(frame)
            a.write(raw, ts)
            b.write(_signed(raw, i, alg, profile), ts)
    theirs_plain, theirs_signed = _tshark_view(plain), _tshark_view(signed)
    assert len(theirs_signed) == len(frames) >= 3
    for p, s in zip(theirs_plain, theirs_signed, strict=True):
        if profile == "flag-length":
            # the flag is Reserved1 bit 15, which Wireshark reads as the Ed2.1 S-bit: the
            # documented cost of this profile
            assert s.pop("simulated") is True
            p.pop("simulated")
        assert s == p


@pytest.mark.root
@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("vlan", [Vlan(10, 4), None], ids=["tagged", "untagged"])
def test_libiec61850_receives_signed_frames(link, vlan, profile) -> None:
    _, ours, theirs = link
    base = GooseFrame(
        gocb_ref=GOCB, dat_set=DATSET, go_id=GOID, appid=0x1234, dst=DST,
        src=bytes.fromhex("02000000aa01"), vlan=vlan, conf_rev=9,
        t=UtcTime(1_700_000_100, 0x400000, 0x0A), all_data=tuple(map(to_data, ALL_TYPES)),
    )  # fmt: skip
    plan = [(100, 0, "hmac-sha256-80"), (100, 1, "hmac-sha256-256"), (101, 0, "aes-gmac-128")]
    with ours.entered():
        sock = RawSocket("us0")
    with sock:
        receiver = start_primed_receiver(theirs, sock, "peer0", len(plan), dst=DST)
        for i, (st, sq, alg) in enumerate(plan):
            raw = encode_frame(dataclasses.replace(base, st_num=st, sq_num=sq))
            sock.send(_signed(raw, i, alg, profile))
    out, err = receiver.communicate(timeout=30)
    assert receiver.returncode == 0, err
    got = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [(m["stNum"], m["sqNum"]) for m in got] == [(st, sq) for st, sq, _ in plan]
    for msg in got:
        assert msg["valid"] and msg["parseError"] == 0
        assert msg["values"] == ALL_TYPES
        assert (msg["gocbRef"], msg["confRev"]) == (GOCB, 9)
