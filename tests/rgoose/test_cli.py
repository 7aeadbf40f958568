"""`goosectl decode` and `goosectl replay` of pcaps holding R-GOOSE (UDP 102): the same
lines, verdicts and machines as for Layer-2 GOOSE, and the SPDU number's replay rule."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from goosectl.controller.cli import main as goosectl
from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.rgoose import PORT, apdu_of_frame, encode
from goosectl.protocols.rgoose.udp import frame
from tests.goose.helpers import DST, GOCB, MS, UTC0, raw_frame
from tests.goose.keyfiles import S, write_keys
from tests.rgoose.vectors import GCM128, HMAC128, MATERIAL, UNSECURED, key

SECRET = bytes(range(1, 33))


def _udp(spdu: bytes, src: str = "10.0.0.1") -> bytes:
    return frame(spdu, src=src, dst="239.192.0.1", sport=PORT, dport=PORT)


def _pcap(path: Path, spdus: list[bytes], t0: int = UTC0) -> Path:
    with PcapWriter(path) as w:
        for i, s in enumerate(spdus):
            w.write(_udp(s), t0 + i * 10 * MS)
    return path


def _keys(tmp: Path) -> Path:
    window = {"not_before": UTC0 - 3600 * S, "not_after": UTC0 + 3600 * S}
    return write_keys(
        tmp,
        [
            {"key_id": 1, "algorithm": "aes-128-gcm", "secret": MATERIAL, **window},
            {"key_id": 7, "algorithm": "hmac-sha256-256", "secret": SECRET, **window},
        ],
    )


def _signed(st: int, number: int, secret: bytes = SECRET, **kw: object) -> bytes:
    apdu = apdu_of_frame(raw_frame(st, 0, **kw))  # type: ignore[arg-type]
    return encode([apdu], number, key=key("hmac-sha256-256", 7, secret))


def test_decode_shows_rgoose_with_its_verdicts(tmp_path, capsys) -> None:
    vectors_t = 1_790_705_554 * S  # the vectors' own time: key 1 in force then
    window = {"not_before": vectors_t - 3600 * S, "not_after": vectors_t + 3600 * S}
    keys = write_keys(
        tmp_path, [{"key_id": 1, "algorithm": "aes-128-gcm", "secret": MATERIAL, **window}]
    )
    pcap = _pcap(tmp_path / "v.pcap", [UNSECURED, HMAC128, GCM128, GCM128[:-1]], vectors_t)
    assert goosectl(["decode", str(pcap), "--json", "--keys", str(keys)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x.get("auth", {}).get("reason", x.get("auth", {}).get("status")) for x in lines] == [
        "unsigned",
        "bad_mac",  # key 1 of this file is the GCM key: the HMAC SPDU does not verify
        "verified",
        None,
    ]
    assert [x.get("gocbRef") for x in lines[:3]] == ["GOISIM/LLN0$GO$gcb1"] * 3
    assert lines[2]["rgoose"] == {
        "src": "10.0.0.1", "dst": "239.192.0.1", "spdu_number": 0, "key_id": 1
    }  # fmt: skip
    assert lines[2]["allData"][2]["value"] == "r-goose"
    assert lines[3]["kind"] == "bad-spdu" and lines[3]["path"] == "signature"
    assert lines[3]["offset"] > 42  # the frame's offset: Ethernet, IPv4 and UDP before it


def test_replay_trips_on_a_signed_rgoose_trip_only(tmp_path, capsys) -> None:
    cfg = tmp_path / "goose.yaml"
    sub = {"gocb_ref": GOCB, "appid": 0x1010, "dst": DST, "auth": "required"}
    cfg.write_text(yaml.safe_dump({"subscriptions": [sub]}))
    trip = {"values": (True, False)}
    genuine = _signed(2, 4, **trip)
    pcap = _pcap(
        tmp_path / "trip.pcap",
        [
            _signed(1, 1),
            encode([apdu_of_frame(raw_frame(2, 0, **trip))], 2),  # forged: unsecured
            _signed(2, 3, secret=bytes(32), **trip),  # forged: wrong key material
            genuine,
            genuine,  # replayed as it was
            _signed(3, 4, values=(True, True)),  # a new stNum under the old SPDU number
        ],
    )
    args = ["replay", str(pcap), "--json", "--config", str(cfg), "--keys", str(_keys(tmp_path))]
    assert goosectl(args) == 1  # the forgeries are findings (exit 1)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    frames = [(x["stNum"], x["class"], x["allData"][0]["value"]) for x in lines if "frame" in x]
    assert frames == [
        (1, "first", False),
        (2, "auth_refused", True),
        (2, "auth_refused", True),
        (2, "new_state", True),
    ]
    (rg,) = [x for x in lines if x.get("event") == "rgoose"]
    assert rg["counts"]["spdu_replay"] == 2
    (anomalies,) = [x for x in lines if x.get("event") == "anomalies"]
    kinds = {a["kind"]: a["frames"] for s in anomalies["streams"].values() for a in s}
    assert kinds["unsigned"] == [2] and kinds["bad_mac"] == [3]
    assert lines[-1]["event"] == "counters"
