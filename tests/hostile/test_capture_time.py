"""Capture timestamps before 1970 or after 2106, or a clock that jumps.

Before: a traceback (a UtcTime the publisher could not encode), 1,000,012 frames and
893 MB published after a 10^6 s step, days of catch-up after a 2^32 s step. Now a jump
(back, or forward past `--max-gap`, default 60 s) is reported and counted, the gap is not
replayed (timers re-anchor instead of catching up heartbeat by heartbeat), and a capture
outside 1970..2106 starts at 1970-01-01 with a warning.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goosectl.controller.cli import main as goosectl
from goosectl.controller.replay.capture_clock import (
    MAX_NS,
    CaptureClock,
    CaptureTimeError,
    TimeJump,
)
from goosectl.controller.replay.goose_replay import capture_frames
from goosectl.protocols.ethernet.pcap import read_capture
from goosectl.protocols.goose import GooseFrame, encode_frame
from tests.hostile.frames import BASE, pcapng

S = 1_000_000_000
T0 = 1_700_000_000 * S

PUBLISHER = """\
publishers:
  - gocb_ref: GCTL1LD0/LLN0$GO$pos
    dat_set: GCTL1LD0/LLN0$ds_pos
    appid: 0x2001
    dst: 01:0c:cd:01:00:20
    members: [boolean]
    initial: [{type: boolean, value: false}]
    max_time_ms: 1000
"""


def _frame(sq: int) -> bytes:
    kw = {k: getattr(BASE, k) for k in BASE.__dataclass_fields__}
    return encode_frame(GooseFrame(**{**kw, "sq_num": sq}))


def _capture(tmp_path: Path, times: list[int], tsoffset_s: int = 0) -> Path:
    path = tmp_path / "capture.pcapng"
    path.write_bytes(pcapng([(t, _frame(i)) for i, t in enumerate(times)], tsoffset_s))
    return path


def _replay(tmp_path: Path, capture: Path, *args: str, capsys) -> tuple[int, list[str], int]:
    config = tmp_path / "pub.yaml"
    config.write_text(PUBLISHER)
    out = tmp_path / "out.pcap"
    out.unlink(missing_ok=True)  # --out is always a new file (never one written through)
    code = goosectl(["replay", str(capture), "--config", str(config), "--out", str(out), *args])
    lines = capsys.readouterr().out.splitlines()
    return code, lines, sum(1 for _ in read_capture(out))


def _steady(n: int, start: int = T0) -> list[int]:
    return [start + i * S for i in range(n)]


# -- the clock ---------------------------------------------------------------------------


def test_a_steady_capture_keeps_its_own_times():
    jumps: list[TimeJump] = []
    clock = CaptureClock(on_jump=jumps.append)
    times = [T0, T0 + 5, T0 + 5, T0 + 59 * S]  # equal times and a 59 s gap are fine
    assert [clock.place(i, t) for i, t in enumerate(times, 1)] == times
    assert jumps == [] and clock.total_jumps == 0


def test_steps_back_and_leaps_forward_are_jumps_and_not_replayed():
    jumps: list[TimeJump] = []
    clock = CaptureClock(max_gap_ns=60 * S, on_jump=jumps.append)
    placed = [
        clock.place(1, T0),
        clock.place(2, T0 + S),
        clock.place(3, T0 + S - 10**6 * S),  # back 10^6 s
        clock.place(4, T0 + 2 * S - 10**6 * S),  # then steady again
        clock.place(5, T0 + 2 * S - 10**6 * S + 2**32 * S),  # forward 2^32 s
        clock.place(6, T0 + 3 * S - 10**6 * S + 2**32 * S),
    ]
    assert placed == [T0, T0 + S, T0 + S, T0 + 2 * S, T0 + 2 * S, T0 + 3 * S]
    assert [(j.frame, j.kind, j.step_ns) for j in jumps] == [
        (3, "back", -(10**6) * S),
        (5, "forward", 2**32 * S),
    ]
    assert clock.jumps == {"back": 1, "forward": 1, "range": 0}
    assert "goes back 1000000.000000 s" in jumps[0].text()


def test_the_gap_limit_is_configurable():
    clock = CaptureClock(max_gap_ns=300 * S)
    assert clock.place(1, T0) == T0 and clock.place(2, T0 + 120 * S) == T0 + 120 * S
    assert clock.total_jumps == 0
    clock = CaptureClock(max_gap_ns=60 * S)
    assert clock.place(1, T0) == T0 and clock.place(2, T0 + 120 * S) == T0
    assert clock.jumps["forward"] == 1


@pytest.mark.parametrize("start", [-5 * S, -(2**40) * S, MAX_NS, 2**33 * S])
def test_a_capture_outside_1970_2106_starts_at_the_epoch(start):
    jumps: list[TimeJump] = []
    clock = CaptureClock(on_jump=jumps.append)
    assert clock.place(1, start) == 0 and clock.place(2, start + S) == S
    assert [j.kind for j in jumps] == ["range"]
    assert "outside 1970..2106" in jumps[0].text()


def test_replay_time_past_2106_is_a_clear_error():
    clock = CaptureClock()
    clock.place(1, MAX_NS - 2 * S)
    clock.place(2, MAX_NS - S)
    with pytest.raises(CaptureTimeError, match="frame 3: replay time passes 2106-02-07"):
        clock.place(3, MAX_NS)


def test_loops_are_spaced_not_jumps(tmp_path):
    path = _capture(tmp_path, _steady(3))
    clock = CaptureClock()
    times = [ts for _, ts, _ in capture_frames(path, loops=2, clock=clock)]
    assert times == [*_steady(3), *_steady(3, T0 + 3 * S)]  # last + 1 s, then as captured
    assert clock.total_jumps == 0


# -- goosectl replay ---------------------------------------------------------------------


@pytest.mark.parametrize("step", [10**6 * S, 2**32 * S, -(10**6) * S])
def test_replay_reports_a_jump_and_does_not_catch_up(tmp_path, capsys, step):
    times = [*_steady(10), *_steady(10, T0 + 9 * S + step + S)]
    code, lines, published = _replay(tmp_path, _capture(tmp_path, times), capsys=capsys)
    assert code == 0
    jumps = [x for x in lines if x.startswith("!! time jump: frame 11:")]
    assert len(jumps) == 1, lines
    assert lines[-1].endswith("time_jumps=1")
    # 20 s of capture with a 1 s heartbeat: about 20 frames, not one per second of the gap
    assert 15 <= published <= 30


def test_replay_within_a_raised_gap_limit_replays_the_gap(tmp_path, capsys):
    times = [*_steady(3), *_steady(3, T0 + 120 * S)]
    code, lines, published = _replay(tmp_path, _capture(tmp_path, times), capsys=capsys)
    assert code == 0 and lines[-1].endswith("time_jumps=1") and published < 20
    code, lines, published = _replay(
        tmp_path, _capture(tmp_path, times), "--max-gap", "300", capsys=capsys
    )
    # the gap replayed: the stream's TAL runs out in it, an anomaly (exit 1)
    assert code == 1 and not any("time jump" in x for x in lines)
    assert published >= 120  # the publisher's heartbeats through the 2 minutes


@pytest.mark.parametrize("offset_s", [-(10 * 365 * 86400), 2**32 + 86400])
def test_captures_before_1970_or_after_2106_replay_with_a_warning(tmp_path, capsys, offset_s):
    path = _capture(tmp_path, [i * S for i in range(5)], tsoffset_s=offset_s)
    code, lines, published = _replay(tmp_path, path, "--json", capsys=capsys)
    assert code == 0
    events = [json.loads(x) for x in lines]
    (jump,) = [e for e in events if e.get("event") == "time_jump"]
    assert (jump["frame"], jump["kind"], jump["replay_ns"]) == (1, "range", 0)
    assert events[-1]["event"] == "counters" and events[-1]["time_jumps"] == 1
    assert published >= 5


def test_replay_device_sim_reports_the_jump_on_its_timeline(tmp_path, capsys):
    times = [*_steady(3), *_steady(3, T0 - 10**6 * S)]
    code = goosectl(["replay", str(_capture(tmp_path, times)), "--device", "sim"])
    out = capsys.readouterr().out
    assert code == 0
    assert "notice   capture time jump: frame 4: capture time" in out
    assert "goes back 1000002.000000 s" in out
    assert "  1 capture time jump(s) (1 back): gaps not replayed" in out
