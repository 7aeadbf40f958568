"""The publisher machine: schedules, TAL, sequence numbers and wraps, refusals, sides."""

from __future__ import annotations

import pytest

from goosectl.controller.engine import Machine
from goosectl.controller.goose.publisher_actions import PublishError, active_sides, next_num
from goosectl.controller.goose.schedule import interval_ms
from goosectl.protocols.goose import Integer, decode_frame

from .helpers import GOCB, MS, UTC0, bools, frames, publisher


def run_schedule(hub, until_ms):
    """(time ms, stNum, sqNum, TAL) of every frame the publisher sends until `until_ms`."""
    out = [(0, f) for f in frames(hub.start(0, UTC0))]
    while (d := hub.next_deadline()) is not None and d <= until_ms * MS:
        out += [(d // MS, f) for f in frames(hub.advance(d))]
    rows = []
    for t, f in out:
        fr = decode_frame(f.data)
        rows.append((t, fr.st_num, fr.sq_num, fr.time_allowed_to_live))
    return rows


def test_doubling_schedule_and_tal():
    rows = run_schedule(publisher(min_time_ms=4, max_time_ms=1000), 3100)
    assert [r[0] for r in rows] == [0, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2024, 3024]
    assert [r[2] for r in rows] == list(range(12))
    assert all(r[1] == 1 for r in rows)
    # TAL = 2 x the gap to the next frame
    assert [r[3] for r in rows[:5]] == [8, 8, 16, 32, 64]
    assert rows[-1][3] == 2000


def test_fixed_burst_schedule():
    rows = run_schedule(
        publisher(
            schedule="fixed-burst", min_time_ms=10, max_time_ms=500, burst_count=3, tal_factor=3
        ),
        1200,
    )
    assert [r[0] for r in rows] == [0, 10, 20, 30, 530, 1030]
    assert [r[3] for r in rows] == [30, 30, 30, 1500, 1500, 1500]


def test_interval_formula():
    assert [interval_ms("doubling", k, 4, 100, 0) for k in range(7)] == [4, 4, 8, 16, 32, 64, 100]
    with pytest.raises(ValueError):
        interval_ms("chaos", 0, 1, 2, 3)


def test_change_during_burst_restarts_it():
    hub = publisher()
    hub.start(0, UTC0)
    hub.advance(4 * MS)
    hub.advance(8 * MS)
    out = frames(hub.publish(GOCB, bools(True, False), 9 * MS, UTC0 + 9 * MS))
    f = decode_frame(out[0].data)
    assert (f.st_num, f.sq_num, f.time_allowed_to_live) == (2, 0, 8)
    assert f.t.to_ns() // 1000 == (UTC0 + 9 * MS) // 1000
    assert hub.next_deadline() == 13 * MS  # MinTime after the change, not the old burst's 16
    f2 = decode_frame(frames(hub.advance(13 * MS))[0].data)
    assert (f2.st_num, f2.sq_num) == (2, 1)
    assert f2.t == f.t  # t is the time of the state change, kept by retransmissions


def test_wraps():
    assert next_num(2**32 - 1) == 1 and next_num(0) == 1 and next_num(5) == 6
    hub = publisher()
    hub.start(0, UTC0)
    m = hub.scheduler.machines[f"pub:{GOCB}"]
    snap = m.snapshot()
    snap["context"].update(st=2**32 - 1, sq=2**32 - 1)
    hub.scheduler.machines[m.id] = Machine.restore(m.table, snap)
    f = decode_frame(frames(hub.advance(4 * MS))[0].data)
    assert f.sq_num == 1  # sqNum wraps to 1, not 0
    f = decode_frame(frames(hub.publish(GOCB, bools(True, True), 5 * MS, UTC0))[0].data)
    assert (f.st_num, f.sq_num) == (1, 0)


def test_type_mismatch_is_refused_and_changes_nothing():
    hub = publisher()
    hub.start(0, UTC0)
    with pytest.raises(PublishError, match="expected 2 members"):
        hub.publish(GOCB, (Integer(5), Integer(6)), 1 * MS, UTC0)
    with pytest.raises(PublishError):
        hub.publish(GOCB, bools(True), 1 * MS, UTC0)
    assert hub.counters()["publishers"][GOCB]["st"] == 1


def test_sides_failover_and_failback():
    assert active_sides("A", {"A": True, "B": True}) == ("A",)
    assert active_sides("A", {"A": False, "B": True}) == ("B",)
    assert active_sides("both", {"A": True, "B": False}) == ("A",)
    hub = publisher(sides="A")
    hub.start(0, UTC0)
    out = hub.link("A", False, 1 * MS)
    assert [(e.active, e.reason) for e in out] == [(("B",), "link A down")]
    assert frames(hub.advance(4 * MS))[0].sides == ("B",)
    out = hub.link("A", True, 5 * MS)
    assert [e.active for e in out] == [("A",)]
    assert frames(hub.advance(8 * MS))[0].sides == ("A",)


def test_config_errors_are_clear(tmp_path):
    from goosectl.controller.config.goose import GooseConfig
    from goosectl.controller.config.load import load_config
    from goosectl.controller.config.validate import ConfigError

    p = tmp_path / "cfg.yaml"
    p.write_text(
        "publishers:\n  - gocb_ref: X\n    dat_set: D\n    appid: 0xZZ\n"
        "    dst: 01:0c:cd:01\n    max_time_ms: 1\n"
    )
    with pytest.raises(ConfigError) as exc:
        load_config(p, GooseConfig)
    msg = str(exc.value)
    assert f"{p}:4: publishers.0.appid" in msg
    assert f"{p}:5: publishers.0.dst" in msg


def test_source_mac_the_interfaces_unless_configured_never_zeros():
    from goosectl.controller.goose.publisher import REPLAY_SRC

    hub = publisher()
    assert {decode_frame(f.data).src for f in frames(hub.start(0, UTC0))} == {REPLAY_SRC}
    hub = publisher()
    hub.set_source_mac(bytes.fromhex("02aabbccddee"))  # what the live shell reads
    assert decode_frame(frames(hub.start(0, UTC0))[0].data).src == bytes.fromhex("02aabbccddee")
    hub = publisher(src="02:00:00:00:00:07")
    hub.set_source_mac(bytes.fromhex("02aabbccddee"))  # a configured src wins
    assert decode_frame(frames(hub.start(0, UTC0))[0].data).src == bytes.fromhex("020000000007")


def test_time_quality_is_what_the_shell_says_the_clock_is_worth():
    from goosectl.controller.goose.publisher import VIRTUAL_TIME_QUALITY

    hub = publisher()
    first = decode_frame(frames(hub.start(0, UTC0))[0].data)
    assert first.t.quality == VIRTUAL_TIME_QUALITY == 0x3F  # not synchronised, unspecified
    hub.set_time_quality(0x89)  # synchronised, 9 bits
    out = frames(hub.publish(GOCB, bools(True, False), 5 * MS, UTC0 + 5 * MS))
    assert decode_frame(out[0].data).t.quality == 0x89


def test_a_muted_publisher_sends_nothing_and_keeps_counting():
    hub = publisher(min_time_ms=4, max_time_ms=100)
    hub.start(0, UTC0)
    assert frames(hub.mute(True, 1 * MS)) == []
    sent = []
    for t in range(2, 300):
        sent += frames(hub.advance(t * MS))
    sent += frames(hub.publish(GOCB, bools(True, True), 300 * MS, UTC0))
    assert sent == []  # neither retransmissions nor a new state
    hub.mute(False, 301 * MS)
    nxt = []
    while not nxt:
        nxt = frames(hub.advance(hub.next_deadline()))
    fr = decode_frame(nxt[0].data)
    assert fr.st_num == 2 and fr.sq_num > 0  # the state published while muted, repeated


def test_a_stnum_jump_wraps_as_stnum_does() -> None:
    from goosectl.controller.goose.publisher_actions import U32_MAX, next_num, skip_num

    for n in (0, 1, 7, U32_MAX - 3, U32_MAX):
        for by in (1, 2, 5, 100):
            expected = n
            for _ in range(by):
                expected = next_num(expected)
            assert skip_num(n, by) == expected, (n, by)
    assert skip_num(9, 0) == 9
