"""Replays of the real captures: classifications match what PROVENANCE.md describes."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import yaml

from tests.support.peers import CAPTURES, capture_files
from tests.support.procs import goosectl

REPO = Path(__file__).resolve().parents[2]


def replay_json(capture: Path, *extra: str) -> list[dict]:
    """The JSON lines of a replay; its exit status is 1 exactly when it found anomalies."""
    r = goosectl("replay", str(capture), "--json", *extra, check=False)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    (report,) = [x for x in lines if x.get("event") == "anomalies"]
    assert r.returncode == (1 if report["count"] else 0), r.stderr
    return lines


def frames_of(lines):
    return [x for x in lines if "frame" in x]


def test_every_capture_replays_without_malformed_frames():
    for cap in capture_files():
        lines = replay_json(cap)
        fr = frames_of(lines)
        assert fr, cap
        assert not [x for x in fr if x.get("class") in ("malformed", None)], cap
        assert lines[-1]["event"] == "counters" and lines[-1]["malformed"] == 0


def test_ge_f650_sqnum_reset_without_stnum_change():
    fr = frames_of(replay_json(CAPTURES / "iti_GOOSE.pcap"))
    assert [x["class"] for x in fr] == [
        "first",
        "retransmission",
        "retransmission",
        "out_of_order",
        "retransmission",
        "retransmission",
        "retransmission",
        "retransmission",
    ]
    assert {x["stNum"] for x in fr} == {1}
    assert [x["timeAllowedtoLive"] for x in fr[3:]] == [1000, 1000, 1000, 2000, 40000]
    assert fr[3]["stream_state"] == "questionable" and fr[4]["stream_state"] == "valid"


def test_three_publishers_sharing_appid_and_mac_are_kept_apart():
    lines = replay_json(CAPTURES / "iti_Sample_File_GOOSE.pcap")
    fr = frames_of(lines)
    assert {x["appid"] for x in fr} == {0x3001}
    assert {x["dst"] for x in fr} == {"01:0c:cd:01:00:00"}
    streams = lines[-1]["streams"]
    refs = sorted(s["gocbRef"] for s in streams.values())
    assert refs == [f"AA1C1Q0{n}A1LD0/LLN0$GO$gcb_A" for n in (1, 5, 7)]
    # kept apart, no stream ever looks like a replay or an out-of-order of another
    by_class = Counter(x["class"] for x in fr)
    assert by_class["replay"] == 0 and by_class["out_of_order"] == 0
    assert by_class["new_state"] > 200
    assert all(s["state"] == "valid" for s in streams.values())
    # each stream's stNum only goes forward
    last: dict[str, int] = {}
    for x in fr:
        assert x["stNum"] >= last.get(x["gocbRef"], 0)
        last[x["gocbRef"]] = x["stNum"]


def test_sel_relays_refresh_t_on_retransmission_and_stay_valid():
    fr = frames_of(replay_json(CAPTURES / "brogoose_goose_orig.pcap"))
    assert Counter(x["class"] for x in fr) == {"first": 2, "retransmission": 14}
    assert {x["appid"] for x in fr} == {3, 4}


def test_subscription_config_filters_and_counts_unmatched(tmp_path):
    cfg = tmp_path / "subs.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "subscriptions": [
                    {
                        "gocb_ref": "AA1C1Q05A1LD0/LLN0$GO$gcb_A",
                        "appid": "0x3001",
                        "dst": "01:0c:cd:01:00:00",
                        "conf_rev": 5,
                    }
                ]
            }
        )
    )
    lines = replay_json(CAPTURES / "iti_Sample_File_GOOSE.pcap", "--config", str(cfg))
    counters = lines[-1]
    assert len(counters["streams"]) == 1 and counters["unmatched"] > 200
    (stream,) = counters["streams"].values()
    assert stream["state"] == "valid"

    cfg.write_text(cfg.read_text().replace("conf_rev: 5", "conf_rev: 4"))
    lines = replay_json(CAPTURES / "iti_Sample_File_GOOSE.pcap", "--config", str(cfg))
    (stream,) = lines[-1]["streams"].values()
    assert stream["state"] == "config_mismatch"


def test_two_replays_give_identical_journals_and_output(tmp_path):
    cfg = tmp_path / "pub.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "publishers": [
                    {
                        "gocb_ref": "GCTL/LLN0$GO$echo",
                        "dat_set": "GCTL/LLN0$ds",
                        "appid": 0x2001,
                        "dst": "01:0c:cd:01:00:20",
                        "initial": [{"type": "boolean", "value": True}],
                    }
                ]
            }
        )
    )
    outs = []
    for k in range(2):
        j, o = tmp_path / f"j{k}.sqlite", tmp_path / f"o{k}.pcap"
        capture = str(CAPTURES / "iti_Sample_File_GOOSE.pcap")
        out = ("--journal", str(j), "--out", str(o), "--quiet", "--loop", "2")
        r = goosectl("replay", capture, "--config", str(cfg), *out, check=False)
        assert r.returncode in (0, 1), r.stderr  # 1: anomalies (the ABB relays' stale `t`)
        con = sqlite3.connect(j)
        dump_text = "\n".join(map(str, con.execute("SELECT * FROM journal ORDER BY seq")))
        con.close()
        outs.append((dump_text, o.read_bytes(), r.stdout))
    assert outs[0] == outs[1]
    assert len(outs[0][1]) > 24 + 100  # the publisher's frames were written


def test_unreadable_capture_exits_2(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"nope")
    r = goosectl("replay", str(bad), check=False)
    assert r.returncode == 2 and "magic" in r.stderr


def test_bad_config_exits_2_naming_file_key_and_reason(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        "subscriptions:\n  - gocb_ref: X\n    appid: 70000\n    dst: 01:0c:cd:01:00:00\n"
    )
    r = goosectl("replay", str(CAPTURES / "iti_GOOSE.pcap"), "--config", str(cfg), check=False)
    assert r.returncode == 2
    assert f"{cfg}:3: subscriptions.0.appid" in r.stderr and "65535" in r.stderr


def test_example_config_is_valid_and_runs(tmp_path):
    cfg = REPO / "examples" / "goose" / "subscriptions.yaml"
    out = tmp_path / "out.pcap"
    lines = replay_json(
        CAPTURES / "iti_Sample_File_GOOSE.pcap", "--config", str(cfg), "--out", str(out)
    )
    streams = lines[-1]["streams"]
    assert [s["state"] for s in streams.values()] == ["valid"]
    assert out.stat().st_size > 24


def test_the_abb_relays_coarse_t_is_not_taken_for_a_replay():
    """The ABB IEDs of iti_Sample_File_GOOSE.pcap stamp `t` at 1/64 s, so two state changes
    a few ms apart carry the same `t` (and, with the fraction truncated, one may read a
    hair older): `stale_time` flagged 85 of their 250 state changes questionable. A real
    relay must not cry wolf: no frame is stale or questionable, every stream stays valid."""
    lines = replay_json(CAPTURES / "iti_Sample_File_GOOSE.pcap")
    fr = frames_of(lines)
    changes = [x for x in fr if x["class"] in ("new_state", "missed_states")]
    assert len(changes) == 250
    assert Counter(x["class"] for x in fr)["stale"] == 0
    assert not [x for x in fr if x["flags"]], [x for x in fr if x["flags"]][:3]
    states = {x["state"] for x in lines if x.get("event") == "stream"}
    assert states == {"valid"}
