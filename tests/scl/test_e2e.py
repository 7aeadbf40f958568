"""End to end through the command line: `scl config` on an SCD, frames published by our
own publishers from the same SCD, `replay --device sim` with that config, and the wire
check finding a deliberately wrong APPID, confRev and member type."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose import Boolean, Quality
from tests.support.peers import REPO
from tests.support.procs import goosectl

SCD = REPO / "examples" / "scl" / "bay1.scd"
S = 1_000_000_000
T0 = 1_800_000_000 * S
PROT, CILO, SCADA = "PROT1LD0/LLN0$GO$trip", "BAY2LD0/LLN0$GO$cilo", "SCADA1LD0/LLN0$GO$cmd"


def scl_config(tmp: Path, ied: str) -> Path:
    out = tmp / f"{ied}.yaml"
    goosectl("scl", "config", str(SCD), "--ied", ied, "--out", str(out))
    return out


def publishers(tmp: Path, *ieds: str, change=None) -> GooseConfig:
    """The publishers `scl config` writes for these IEDs (optionally changed)."""
    pubs = []
    for ied in ieds:
        data = yaml.safe_load(scl_config(tmp, ied).read_text())
        pubs += data["goose"]["publishers"]
    if change is not None:
        pubs = [change(p) for p in pubs]
    return GooseConfig.model_validate({"publishers": pubs})


def capture(cfg: GooseConfig, path: Path) -> Path:
    """Our publishers over 8 s of virtual time: bay 2 enables closing, SCADA asks to
    close at 0.5 s, the protection trips at 6 s."""
    hub = GooseHub(cfg)
    frames = [(T0, e.data) for e in hub.start(T0, T0) if type(e) is SendFrame]
    q = Quality().to_bitstring()
    script = [
        (0.1, CILO, (Boolean(True),)),
        (0.5, SCADA, (Boolean(True),)),
        (0.8, SCADA, (Boolean(False),)),
        (6.0, PROT, (Boolean(True), q)),
        (6.5, PROT, (Boolean(False), q)),
    ]

    def until(t: int) -> None:
        while (d := hub.next_deadline()) is not None and d <= t:
            frames.extend((d, e.data) for e in hub.advance(d) if type(e) is SendFrame)

    for at, gocb, values in script:
        t = T0 + int(at * S)
        until(t)
        if gocb in hub.by_gocb:
            frames.extend(
                (t, e.data) for e in hub.publish(gocb, values, t, t) if type(e) is SendFrame
            )
    until(T0 + 8 * S)
    with PcapWriter(path) as w:
        for ts, data in sorted(frames, key=lambda f: f[0]):
            w.write(data, ts)
    return path


def test_scl_config_then_replay_with_the_simulator_trips_the_breaker(tmp_path):
    ctl = scl_config(tmp_path, "GCTL1")
    text = ctl.read_text()
    # the later-binding input of CILO1 is listed to fill in, the rest is configured
    assert "#   input interlock:bay3 at CILO1 (later binding, pLN=CILO" in text
    cap = capture(publishers(tmp_path, "PROT1", "BAY2", "SCADA1"), tmp_path / "cap.pcap")
    r = goosectl("replay", str(cap), "--device", "sim", "--config", str(ctl))
    out = r.stdout
    assert "6.000 s  device   TRIP sent (protection)" in out, out
    assert "bay      close_request: open -> closing" in out, out
    assert "final bay state: open" in out
    # every configured stream came: nothing reported missing
    assert "missing" not in out


def test_the_same_scd_used_directly_as_config_gives_the_same_run(tmp_path):
    cap = capture(publishers(tmp_path, "PROT1", "BAY2", "SCADA1"), tmp_path / "cap.pcap")
    via_file = goosectl(
        "replay", str(cap), "--device", "sim", "--config", str(scl_config(tmp_path, "GCTL1"))
    )
    direct = goosectl("replay", str(cap), "--device", "sim", "--config", str(SCD), "--ied", "GCTL1")
    timeline = [x for x in via_file.stdout.splitlines() if " s  " in x]
    assert timeline and timeline == [x for x in direct.stdout.splitlines() if " s  " in x]


def wrong(p: dict) -> dict:
    """PROT1's trip with the APPID, confRev and the quality member's type all wrong."""
    if p["gocb_ref"] != PROT:
        return p
    return p | {
        "appid": 0x1009,
        "conf_rev": 2,
        "members": ["boolean", "integer"],
        "initial": [{"type": "boolean", "value": False}, {"type": "integer", "value": 0}],
    }


def test_wire_check_names_the_wrong_appid_confrev_and_member_type(tmp_path):
    cfg = publishers(tmp_path, "PROT1", "BAY2", "SCADA1", change=wrong)
    hub_cap = tmp_path / "wrong.pcap"
    # the script's trip values do not fit the wrong shape: the first state and its repeats
    hub = GooseHub(cfg)
    frames = [(T0, e.data) for e in hub.start(T0, T0) if type(e) is SendFrame]
    while (d := hub.next_deadline()) is not None and d <= T0 + 3 * S:
        frames.extend((d, e.data) for e in hub.advance(d) if type(e) is SendFrame)
    with PcapWriter(hub_cap) as w:
        for ts, data in frames:
            w.write(data, ts)
    r = goosectl("replay", str(hub_cap), "--quiet", "--json", "--scl", str(SCD))
    rows = {
        x["gocbRef"]: x
        for x in map(json.loads, r.stdout.splitlines())
        if x.get("event") == "wire_check"
    }
    prot = rows[PROT]
    assert prot["status"] == "mismatched"
    diffs = {d["field"]: d for d in prot["differences"]}
    assert set(diffs) == {"appid", "confRev", "memberTypes"}
    assert diffs["appid"] == {"field": "appid", "expected": 0x1001, "seen": [0x1009]}
    assert diffs["confRev"] == {"field": "confRev", "expected": 1, "seen": [2]}
    assert diffs["memberTypes"]["expected"] == ["boolean", "bit-string/13"]
    assert diffs["memberTypes"]["seen"] == [["boolean", "integer"]]
    assert rows[CILO]["status"] == rows[SCADA]["status"] == "matched"
    # GCTL1 publishes nothing in this capture: its three control blocks are missing
    assert {k for k, v in rows.items() if v["status"] == "missing"} == {
        "GCTL1LD0/LLN0$GO$pos",
        "GCTL1LD0/LLN0$GO$tripack",
        "GCTL1LD0/LLN0$GO$rbrf",
    }
    # the JSON lines come before the closing counters line
    assert json.loads(r.stdout.splitlines()[-1])["event"] == "counters"
    # the text table says the same, one row per stream and each field named
    t = goosectl("replay", str(hub_cap), "--quiet", "--scl", str(SCD)).stdout
    assert "2 matched, 1 mismatched, 3 missing, 0 unexpected" in t
    assert "appid 0x1009 (expected 0x1001)" in t
    assert "confRev 2 (expected 1)" in t
    assert "member types: member 1 is integer, not bit-string/13" in t


def test_a_configured_stream_that_never_comes_is_reported(tmp_path):
    cap = capture(publishers(tmp_path, "PROT1", "SCADA1"), tmp_path / "nobay2.pcap")
    r = goosectl("replay", str(cap), "--quiet", "--config", str(SCD), "--ied", "GCTL1")
    assert "configured streams: 0 matched, 0 mismatched, 1 missing, 0 unexpected" in r.stdout
    assert f"missing    {CILO}" in r.stdout
