"""tshark as the oracle: our `goosectl decode --json` objects equal Wireshark's GOOSE
fields, field by field, for every frame of the real captures and of a generated corpus
that covers every Data choice (written with our encoder and our pcap writer).

PDML is used because it keeps repeated Data elements in order and nested. Where
Wireshark 4.0 only shows raw octets (binary-time, float64), is limited to 32 bits
(integers wider than 4 octets print wrongly), or mangles text (mMSString shown as
Latin-1), the comparison uses Wireshark's own byte boundaries (``value``) and decodes
those octets independently here; everything else compares Wireshark's rendered value.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from goosectl.controller.cli import main as goosectl
from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose import encode_frame
from tests.codec.corpus import corpus_frames
from tests.support.peers import capture_files, require_tshark

pytestmark = pytest.mark.peer


def _pdml(path: Path) -> list[ET.Element]:
    tshark = require_tshark()
    out = subprocess.run(
        [tshark, "-r", str(path), "-T", "pdml"],
        check=True,
        capture_output=True,
        timeout=300,
    ).stdout
    return ET.fromstring(out).findall("packet")


def _ours(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert goosectl(["decode", str(path), "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def _field(parent: ET.Element, name: str) -> ET.Element | None:
    for f in parent.iter("field"):
        if f.get("name") == name:
            return f
    return None


def _children(el: ET.Element) -> list[ET.Element]:
    return [c for c in el if c.tag == "field"]


def _ws_time(show: str) -> str:
    """'Nov 14, 2023 22:13:20.071111083 UTC' -> '2023-11-14T22:13:20.071111083Z'."""
    head, frac = show.removesuffix(" UTC").rsplit(".", 1)
    base = dt.datetime.strptime(head, "%b %d, %Y %H:%M:%S")
    return f"{base:%Y-%m-%dT%H:%M:%S}.{frac}Z"


def _utc(el: ET.Element) -> dict[str, Any]:
    raw = bytes.fromhex(el.get("value", ""))
    return {
        "iso": _ws_time(el.get("show", "")),
        "seconds": int.from_bytes(raw[0:4], "big"),
        "fraction": int.from_bytes(raw[4:7], "big"),
        "quality": raw[7],
    }


def _int(el: ET.Element) -> int:
    raw = bytes.fromhex(el.get("value", ""))
    if len(raw) > 4:  # Wireshark 4.0 prints INTEGERs wider than 32 bits wrongly
        return int.from_bytes(raw, "big", signed=True)
    return int(el.get("show", ""))


def _bits(data_el: ET.Element, value_name: str) -> str:
    pad = _field(data_el, "ber.bitstring.padding")
    val = _field(data_el, value_name)
    if pad is None:  # "Empty" bit string
        return ""
    raw = bytes.fromhex(val.get("value", "")) if val is not None else b""
    n = len(raw) * 8 - int(pad.get("show", "0"))
    return format(int.from_bytes(raw, "big"), f"0{len(raw) * 8}b")[:n] if n > 0 else ""


def _data(el: ET.Element) -> dict[str, Any]:
    """One PDML goose.Data element -> our JSON element form."""
    kind = el.get("showname", "").removeprefix("Data: ").rsplit(" (", 1)[0]
    kids = _children(el)
    if kind in ("structure", "array"):
        inner = kids[0]
        return {"type": kind, "value": [_data(d) for d in _children(inner)]}
    leaf = kids[0] if kids else el
    if kind == "boolean":
        return {"type": kind, "value": leaf.get("show") != "0"}
    if kind == "bit-string":
        return {"type": kind, "value": _bits(el, "goose.bit_string")}
    if kind == "booleanArray":
        return {"type": kind, "value": _bits(el, "goose.booleanArray")}
    if kind in ("integer", "unsigned", "bcd"):
        return {"type": kind, "value": _int(leaf)}
    if kind == "floating-point":
        raw = bytes.fromhex(_field(el, "goose.floating_point").get("value", ""))
        shown = _field(el, "goose.float_value")
        if raw[0] == 8:
            assert shown is not None
            value = struct.unpack(">f", struct.pack(">f", float(shown.get("show", ""))))[0]
            return {"type": kind, "value": value, "bits": 32}
        return {"type": kind, "value": struct.unpack(">d", raw[1:])[0], "bits": 64}
    if kind == "real":
        return {"type": kind, "value": float(leaf.get("show", ""))}
    if kind == "octet-string":
        return {"type": kind, "value": leaf.get("value", "")}
    if kind == "visible-string":
        return {"type": kind, "value": leaf.get("show", "")}
    if kind == "mMSString":
        return {"type": kind, "value": bytes.fromhex(leaf.get("value", "")).decode("utf-8")}
    if kind == "binary-time":
        raw = bytes.fromhex(leaf.get("value", ""))
        days = int.from_bytes(raw[4:6], "big") if len(raw) == 6 else None
        return {"type": kind, "value": {"ms": int.from_bytes(raw[0:4], "big"), "days": days}}
    if kind == "objId":
        return {"type": kind, "value": leaf.get("show", "")}
    if kind == "utc-time":
        return {"type": kind, "value": _utc(leaf)}
    raise AssertionError(f"Data choice {kind!r} not handled by the oracle")


def _wireshark_json(pkt: ET.Element) -> dict[str, Any] | None:
    goose = next((p for p in pkt.findall("proto") if p.get("name") == "goose"), None)
    if goose is None:
        return None
    frame = next(p for p in pkt.findall("proto") if p.get("name") == "frame")
    eth = next(p for p in pkt.findall("proto") if p.get("name") == "eth")
    vlan_proto = next((p for p in pkt.findall("proto") if p.get("name") == "vlan"), None)

    def show(name: str, parent: ET.Element = goose) -> str | None:
        f = _field(parent, name)
        return None if f is None else f.get("show")

    vlan = None
    if vlan_proto is not None:
        vlan = {
            "id": int(show("vlan.id", vlan_proto)),
            "priority": int(show("vlan.priority", vlan_proto)),
        }
    all_data = _field(goose, "goose.allData")
    return {
        "frame": int(show("frame.number", frame)),
        "time": float(show("frame.time_epoch", frame)),
        "src": show("eth.src", eth),
        "dst": show("eth.dst", eth),
        "vlan": vlan,
        "appid": int(show("goose.appid"), 16),
        "simulated": show("goose.reserve1.s_bit") == "1",
        "gocbRef": show("goose.gocbRef"),
        "timeAllowedtoLive": _int(_field(goose, "goose.timeAllowedtoLive")),
        "datSet": show("goose.datSet"),
        "goID": show("goose.goID"),
        "t": _utc(_field(goose, "goose.t")),
        "stNum": _int(_field(goose, "goose.stNum")),
        "sqNum": _int(_field(goose, "goose.sqNum")),
        "simulation": show("goose.simulation") == "1",
        "confRev": _int(_field(goose, "goose.confRev")),
        "ndsCom": show("goose.ndsCom") == "1",
        "numDatSetEntries": _int(_field(goose, "goose.numDatSetEntries")),
        "allData": [_data(d) for d in _children(all_data)],
    }


def _normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """Round what both sides print with different precision: frame time (tshark prints
    9 digits of a float) and REALs (Wireshark renders them with %g-like precision)."""
    out = dict(obj)
    out["time"] = round(obj["time"], 6)

    def fix(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        res = []
        for it in items:
            it = dict(it)
            if it["type"] in ("structure", "array"):
                it["value"] = fix(it["value"])
            elif it["type"] == "real":
                it["value"] = float(f"{it['value']:.6g}")
            res.append(it)
        return res

    out["allData"] = fix(obj["allData"])
    return out


def _compare(path: Path, capsys: pytest.CaptureFixture[str]) -> int:
    ours = _ours(path, capsys)
    theirs = [j for j in (_wireshark_json(p) for p in _pdml(path)) if j is not None]
    assert [o["frame"] for o in ours] == [t["frame"] for t in theirs]
    for o, t in zip(ours, theirs, strict=True):
        assert "error" not in o, o
        assert _normalise(o) == _normalise(t), f"{path.name} frame {o['frame']}"
    return len(ours)


@pytest.mark.parametrize("path", capture_files(), ids=lambda p: p.name)
def test_captures_match_tshark(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _compare(path, capsys) > 0


def test_generated_corpus_matches_tshark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "corpus.pcap"
    frames = corpus_frames()
    with PcapWriter(path) as w:
        for i, frame in enumerate(frames):
            w.write(encode_frame(frame), 1_700_000_000_123_456_789 + i * 1_000_000)
    assert _compare(path, capsys) == len(frames)
    # the corpus really covers every Data choice of the issue
    seen: set[str] = set()

    def walk(items: list[dict[str, Any]]) -> None:
        for it in items:
            seen.add(it["type"])
            if it["type"] in ("structure", "array"):
                walk(it["value"])

    for line in _ours(path, capsys):
        walk(line["allData"])
    assert seen == {
        "array", "structure", "boolean", "bit-string", "integer", "unsigned",
        "floating-point", "real", "octet-string", "visible-string", "binary-time", "bcd",
        "booleanArray", "objId", "mMSString", "utc-time",
    }  # fmt: skip
