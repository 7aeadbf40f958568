"""Attacks on the receive rules by someone on the station LAN without IEC 62351-6, through
the command line as they were found: the demo's own scenario capture (`goosectl demo`
writes it; its protection IED trips at 6, 9 and 15 s) with crafted protection frames
added, replayed with `goosectl replay FILE --device sim`.

- one forged frame (spoofed source MAC, stNum + 1000, trip FALSE, TAL 2**32-1 ms) made
  every genuine frame after it a `replay`: the trips did nothing, silently;
- the captured trip re-sent with stNum = live + 1 and its old `t` tripped;
- a byte-exact copy of an old trip after the stream's TAL ran out tripped as a `restart`.
"""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from pathlib import Path

import pytest

from goosectl.protocols.goose import Boolean, GooseFrame, UtcTime, decode_frame, encode_frame
from tests.gates.rewrite import PROT_APPID, S, frames_of, write
from tests.support.procs import goosectl

REPO = Path(__file__).resolve().parents[2]
TRIPS = [6.0, 9.0, 15.0]


#: `t` quality of a synchronised station clock (PTP or SNTP): leap seconds known, 10 bits;
#: the demo's capture says ClockNotSynchronized (a replay's clock), which its `t` is never
#: judged by, so the protection IED's frames get this one
SYNCED = 0x8A


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> list[tuple[int, bytes]]:
    out = tmp_path_factory.mktemp("demo")
    goosectl("demo", "--in-memory", "--out", str(out / "d"))
    frames = []
    for ts, data in frames_of(out / "d" / "scenario.pcap"):
        f = decode_frame(data)
        if f.appid == PROT_APPID:
            t = UtcTime(f.t.seconds, f.t.fraction, SYNCED)
            data = encode_frame(dataclasses.replace(f, t=t))
        frames.append((ts, data))
    return frames


def replay(path: Path, *extra: str) -> str:
    return goosectl("replay", str(path), "--device", "sim", *extra).stdout


def sent(report: str, command: str) -> list[float]:
    return [
        float(m.group(1))
        for m in re.finditer(rf"^\s+(\d+\.\d+) s  device   {command} sent", report, re.M)
    ]


def prot(frames: list[tuple[int, bytes]]) -> list[tuple[float, GooseFrame]]:
    """The genuine protection frames on network A (VLAN 10) at their capture time (s)."""
    t0 = frames[0][0]
    out = []
    for ts, data in frames:
        f = decode_frame(data)
        on_a = f.vlan is not None and f.vlan.id == 10
        if f.appid == PROT_APPID and on_a and f.src.hex() == "020000001001":  # not the test set
            out.append(((ts - t0) / S, f))
    return out


def insert(frames, at_s: float, frame: GooseFrame) -> list[tuple[int, bytes]]:
    ts = frames[0][0] + int(at_s * S)
    return sorted([*frames, (ts, encode_frame(frame))], key=lambda x: x[0])


def before(frames, at_s: float) -> GooseFrame:
    return [f for t, f in prot(frames) if t < at_s][-1]


def test_one_forged_jump_does_not_suppress_the_trips_and_raises_an_alarm(scenario, tmp_path):
    last = before(scenario, 5.0)
    forged = dataclasses.replace(
        last,
        st_num=last.st_num + 1000,
        sq_num=0,
        time_allowed_to_live=0xFFFFFFFF,
        all_data=(Boolean(False), last.all_data[1]),
        t=UtcTime.from_ns(last.t.to_ns() + S // 10),
    )
    path = write(tmp_path / "forged.pcap", insert(scenario, 5.0, forged))
    journal = tmp_path / "j.sqlite"
    report = replay(path, "--journal", str(journal))
    assert sent(report, "TRIP") == TRIPS, report
    # said at once, naming the stream: an alarm, the LGOS, a journal row
    alarm = re.search(
        r"^\s+(\d+\.\d+) s  ALARM    goose_conflict:prot@1001\S* raised", report, re.M
    )
    assert alarm is not None, report
    assert 5.0 < float(alarm.group(1)) < 6.0
    assert "lgos     prot: NOT valid: conflict" in report
    rows = sqlite3.connect(journal).execute(
        "SELECT machine, event FROM journal WHERE event = 'conflict'"
    )
    sid = "prot@1001/01:0c:cd:01:00:01"
    assert sorted(m for m, _ in rows) == [f"lgos:{sid}", sid]  # the stream, and its LGOS


def test_a_forged_jump_on_the_interlock_stream_blocks_closes_while_in_conflict(scenario, tmp_path):
    """The same attack on bay 2's interlock stream: a permissive taken from a stream in
    conflict could be the forger's, so the interlock goes to its fail-safe (blocked) from
    the first frame that shows the conflict until one sequence is silent past its TAL."""
    t0 = scenario[0][0]
    cilo = [((ts - t0) / S, decode_frame(d)) for ts, d in scenario]
    last = [f for t, f in cilo if f.appid == 0x1002 and t < 5.0][-1]
    forged = dataclasses.replace(last, st_num=last.st_num + 1000, sq_num=0)
    path = write(tmp_path / "cilo.pcap", insert(scenario, 5.0, forged))
    report = replay(path)
    blocked = re.search(r"^\s+(\d+\.\d+) s  input    bay2-cilo: invalid \(conflict\)", report, re.M)
    cleared = re.search(
        r"^\s+(\d+\.\d+) s  ALARM    goose_conflict:bay2-cilo\S* cleared", report, re.M
    )
    assert blocked is not None and cleared is not None, report
    assert "ALARM    goose_conflict:bay2-cilo@1002/01:0c:cd:01:00:02 raised" in report
    closes = sent(report, "CLOSE")
    assert not [c for c in closes if float(blocked.group(1)) <= c < float(cleared.group(1))]
    assert sent(report, "TRIP") == TRIPS


def test_a_replayed_trip_with_a_new_stnum_and_its_old_t_does_not_trip(scenario, tmp_path):
    trip = next(f for t, f in prot(scenario) if t >= 6.0 and f.all_data[0] == Boolean(True))
    live = before(scenario, 14.0)  # the breaker closed again at 13.5 s
    replayed = dataclasses.replace(trip, st_num=live.st_num + 1, sq_num=0)
    path = write(tmp_path / "replayed.pcap", insert(scenario, 14.0, replayed))
    report = replay(path)
    assert sent(report, "TRIP") == TRIPS, report
    assert "stale [stale_time" in report


def test_a_byte_exact_old_trip_after_tal_expiry_does_nothing(scenario, tmp_path):
    trip = next(f for t, f in prot(scenario) if t >= 6.0 and f.all_data[0] == Boolean(True))
    t0 = scenario[0][0]
    # the IED falls silent on both networks from 11.5 s to 14.5 s (its TAL of 2 s runs
    # out), the breaker closes at 13.5 s, then the copy of the trip of 6 s comes
    quiet = [
        (ts, d)
        for ts, d in scenario
        if not (decode_frame(d).appid == PROT_APPID and 11.5 * S <= ts - t0 < 14.5 * S)
    ]
    path = write(tmp_path / "old.pcap", insert(quiet, 14.4, trip))
    # on one network (no A/B): no window of recent (stNum, sqNum) pairs can hide the copy
    cfg = tmp_path / "bay.yaml"
    text = (REPO / "controller" / "config" / "defaults" / "bay1.yaml").read_text()
    cfg.write_text(re.sub(r"\n +ab: \{mode: merge.*", "", text))
    report = replay(path, "--config", str(cfg))
    assert "goose    prot lost" in report
    assert sent(report, "TRIP") == TRIPS, report


def test_a_flood_from_another_mac_before_the_ied_does_not_lock_it_out(scenario, tmp_path):
    """With no source configured, frames of the protection gocbRef from another MAC from
    2 s before the genuine IED: the first source seen is learned with an alarm, and the
    IED's frames are a second source, a conflict (alarm), never refused: its trips act."""
    first = prot(scenario)[0][1]
    t0 = scenario[0][0]
    fake = []
    for k in range(200):  # every 100 ms from -2 s to 18 s, trip FALSE, its own sequence
        f = dataclasses.replace(
            first, src=bytes.fromhex("02badbadbad0"), st_num=1, sq_num=k, time_allowed_to_live=2000
        )
        fake.append((t0 - 2 * S + k * S // 10, encode_frame(f)))
    frames = sorted([*scenario, *fake], key=lambda x: x[0])
    report = replay(write(tmp_path / "flood.pcap", frames))
    assert sent(report, "TRIP") == [t + 2.0 for t in TRIPS], report  # the capture starts at -2 s
    assert (
        "ALARM    goose_source:prot@1001/01:0c:cd:01:00:01 raised: learned 02:ba:db:ad:ba:d0"
        in report
    )
    assert (
        "ALARM    goose_conflict:prot@1001/01:0c:cd:01:00:01 raised: a second source MAC" in report
    )


def test_a_forged_tal_of_days_does_not_keep_a_silent_stream_alive(scenario, tmp_path):
    """One frame with TAL 2**32-1 ms, then the IED falls silent: the stream is lost after
    the subscription's MaxTime x `tal_factor` (4 x 1000 ms here), or the cap without one."""
    last = before(scenario, 5.0)
    forged = dataclasses.replace(last, sq_num=last.sq_num + 1, time_allowed_to_live=0xFFFFFFFF)
    t0 = scenario[0][0]
    silent = [
        (ts, d)
        for ts, d in scenario
        if not (decode_frame(d).appid == PROT_APPID and ts - t0 >= 5 * S)
    ]
    path = write(tmp_path / "tal.pcap", insert(silent, 5.0, forged))
    text = (REPO / "controller" / "config" / "defaults" / "bay1.yaml").read_text()
    for name, setting, lost_by in (
        ("maxtime", "      max_time_ms: 1000\n", 9.0 + 0.01),
        ("cap", "", 8.0 + 0.01),
    ):
        cfg = tmp_path / f"{name}.yaml"
        body = text.replace(
            "      members: [boolean, bit-string/13]\n",
            "      members: [boolean, bit-string/13]\n" + setting,
            1,
        )
        if name == "cap":
            body = body.replace(
                "  subscriptions:\n", "  receive: {tal_cap_ms: 3000}\n  subscriptions:\n", 1
            )
        cfg.write_text(body)
        report = replay(path, "--config", str(cfg))
        lost = re.search(r"^\s+(\d+\.\d+) s  goose    prot lost", report, re.M)
        assert lost is not None, report
        assert 5.0 < float(lost.group(1)) <= lost_by, (name, report)
