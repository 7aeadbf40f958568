"""Attack and anomaly results surface: `replay` (and `listen`, which shares the report)
prints an anomalies section, per stream what happened, when (UTC) and in which frames,
in text and `--json`, and exits 1 when it found any, 0 when the capture was clean. Every
event line (stream state, LGOS) carries its time (UTC) and the frame number.

The traces are made here from bro-goose's `goose_orig.pcap` (two SEL relays) the way its
`goose_poisoning.pcap` was made from it: frames of the capture replayed later, a forged
frame injected, and a publisher falling silent past its TAL."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

from goosectl.protocols.ethernet.pcap import PcapWriter, read_capture
from goosectl.protocols.goose import decode_frame, encode_frame
from tests.support.peers import CAPTURES
from tests.support.procs import goosectl

ORIG = CAPTURES / "brogoose_goose_orig.pcap"
SEL351 = "SEL_351_1CFG/LLN0$GO$NewGOOSEMessage"


def _utc(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns // 1000 / 1e6, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _trace(path: Path, records: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    with PcapWriter(path) as w:
        for ts, data in records:
            w.write(data, ts)
    return records


def _orig() -> list[tuple[int, bytes]]:
    return [(f.ts_ns, f.data) for f in read_capture(ORIG)]


def replay_trace(path: Path) -> list[tuple[int, bytes]]:
    """Frames 3 and 1 (SEL-351, sqNum 522 and 521) sent again after frame 8 (sqNum 524)."""
    orig = _orig()
    t = orig[7][0]
    return _trace(path, [*orig[:8], (t + 1000, orig[2][1]), (t + 2000, orig[0][1]), *orig[8:]])


def inject_trace(path: Path) -> list[tuple[int, bytes]]:
    """A forged SEL-351 frame with the next stNum after frame 8: the relay's own frames
    that follow go back in stNum."""
    orig = _orig()
    forged = dataclasses.replace(decode_frame(orig[6][1]), st_num=24, sq_num=0)
    t = orig[7][0]
    return _trace(path, [*orig[:8], (t + 1000, encode_frame(forged)), *orig[8:]])


def silent_trace(path: Path) -> list[tuple[int, bytes]]:
    """SEL-351 silent after 2 s until 6 s (frames 7, 9 and 12 left out): past its 2 s TAL."""
    orig = _orig()
    return _trace(path, [r for i, r in enumerate(orig) if i not in (6, 8, 11)])


def test_a_clean_capture_exits_0_and_says_no_anomalies() -> None:
    done = goosectl("replay", str(ORIG), check=False)
    assert done.returncode == 0, done.stderr
    assert "\nanomalies: none\n\nstreams:\n" in done.stdout
    done = goosectl("replay", str(ORIG), "--json", check=False)
    assert done.returncode == 0, done.stderr
    (report,) = [
        x for x in map(json.loads, done.stdout.splitlines()) if x.get("event") == "anomalies"
    ]
    assert report == {"event": "anomalies", "count": 0, "streams": {}}


def test_replayed_frames_are_an_anomaly_with_their_frame_numbers(tmp_path) -> None:
    cap = tmp_path / "replayed.pcap"
    records = replay_trace(cap)
    done = goosectl("replay", str(cap), "--json", check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    (report,) = [x for x in lines if x.get("event") == "anomalies"]
    assert report["count"] == 2
    ((sid, found),) = report["streams"].items()
    assert sid.startswith(SEL351 + "@")
    (out_of_order,) = found
    assert out_of_order["kind"] == "out_of_order"
    assert out_of_order["frames"] == [9, 10] and out_of_order["count"] == 2
    assert out_of_order["first"] == {"frame": 9, "utc": _utc(records[8][0])}
    assert out_of_order["last"] == {"frame": 10, "utc": _utc(records[9][0])}
    text = goosectl("replay", str(cap), check=False)
    assert text.returncode == 1
    section = text.stdout.split("\nanomalies:\n", 1)[1].split("\nstreams:\n")[0]
    assert f"  {sid}:\n" in section
    assert (
        f"    out_of_order: 2 frame(s) 9,10 ({_utc(records[8][0])} .. {_utc(records[9][0])})"
        in section
    )


def test_an_injected_frame_and_the_replays_it_causes_are_named(tmp_path) -> None:
    cap = tmp_path / "injected.pcap"
    inject_trace(cap)
    done = goosectl("replay", str(cap), "--json", check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    (report,) = [x for x in lines if x.get("event") == "anomalies"]
    ((sid, found),) = report["streams"].items()
    assert sid.startswith(SEL351 + "@")
    kinds = {a["kind"]: a["frames"] for a in found}
    # the relay's next frame after the forged state (frame 9) continues the sequence
    # from before the jump: two sequences on one stream, a conflict, named at that frame
    # and cleared once the forged one is silent past its TAL (frame 13)
    assert kinds == {"two_sequences": [10], "conflict": [10], "conflict_cleared": [13]}
    # every stream event carries the time and the frame it came with
    events = [x for x in lines if x.get("event") == "stream"]
    assert events and all({"utc", "frame_no"} <= x.keys() for x in events)
    assert [x["frame_no"] for x in events if x["gocbRef"] == SEL351] == [1, 10, 13]


def test_a_stream_lost_says_when_and_after_which_frame(tmp_path) -> None:
    cap = tmp_path / "silent.pcap"
    records = silent_trace(cap)
    done = goosectl("replay", str(cap), "--json", check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    (lost,) = [x for x in lines if x.get("event") == "stream" and x["state"] == "lost"]
    # SEL-351's last frame before the silence is frame 5; its TAL is 2000 ms
    assert lost["utc"] == _utc(records[4][0] + 2_000_000_000)
    assert lost["frame_no"] == 7  # the last frame read before the TAL ran out
    lgos = [x for x in lines if x.get("event") == "lgos"]
    assert lgos and all({"utc", "frame_no"} <= x.keys() for x in lgos)
    (report,) = [x for x in lines if x.get("event") == "anomalies"]
    (found,) = report["streams"].values()
    assert [a["kind"] for a in found] == ["lost", "restart"]
    text = goosectl("replay", str(cap), check=False).stdout
    stamp = _utc(records[4][0] + 2_000_000_000)
    assert f"-- {stamp} #7 stream {SEL351} appid 0x0003 side -: lost" in text
