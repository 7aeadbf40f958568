"""The publisher's rate limit (GOOSE side): at most `max_changes` new
states within any `change_window_ms`; a change beyond it is held back (the latest wins)
and published when a slot frees, so the last state always reaches the wire; the first
crossing is one alarm and one journal row, the all-clear another."""

from __future__ import annotations

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.engine.effects import Alarm
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.shell.journal_store import open_journal
from goosectl.protocols.goose import decode_frame

from .helpers import GOCB, MS, UTC0, bools, frames, pub_cfg, publisher


def _alarms(effects: list) -> list[tuple[str, bool]]:
    return [(e.name, e.active) for e in effects if type(e) is Alarm]


def _new_states(effects: list) -> list[tuple[int, tuple]]:
    out = []
    for f in frames(effects):
        fr = decode_frame(f.data)
        if fr.sq_num == 0:
            out.append((fr.st_num, tuple(x.value for x in fr.all_data)))
    return out


def test_a_trip_right_after_quiet_goes_at_once():
    """Defaults: a trip after a quiet spell, then a whole trip/close/trip sequence within
    a second, each change a new state on the wire at the instant it was asked for."""
    hub = publisher()
    hub.start(0, UTC0)
    for t in range(1, 5000):  # five quiet seconds of retransmissions
        hub.advance(t * MS)
    out = hub.publish(GOCB, bools(True, False), 5000 * MS, UTC0)
    assert _new_states(out) == [(2, (True, False))]
    assert _alarms(out) == []
    for i, t in enumerate((5030, 5100, 5400, 5460, 5500, 5530)):
        out = hub.publish(GOCB, bools(i % 2 == 1, True), t * MS, UTC0)
        assert _new_states(out) == [(3 + i, (i % 2 == 1, True))], t
    m = hub.scheduler.machines[f"pub:{GOCB}"]
    assert m.ctx["coalesced"] == 0 and not m.ctx["limited"]


def test_changes_beyond_the_limit_are_held_and_the_latest_is_published():
    hub = publisher(max_changes=3, change_window_ms=100)
    out = hub.start(0, UTC0)  # the initial state is the first of the window
    published = _new_states(out)
    alarms = _alarms(out)
    for t in (1, 2):
        published += _new_states(hub.publish(GOCB, bools(True, t == 2), t * MS, UTC0))
    assert [st for st, _ in published] == [1, 2, 3]
    # over the limit: held back, the latest replacing the one before; one alarm
    for t in range(3, 50):
        out = hub.publish(GOCB, bools(t % 2 == 0, False), t * MS, UTC0 + t * MS)
        assert _new_states(out) == []
        alarms += _alarms(out)
    assert alarms == [(f"publish_rate:{GOCB}", True)]
    m = hub.scheduler.machines[f"pub:{GOCB}"]
    assert m.ctx["coalesced"] == 47 and m.ctx["limit_crossings"] == 1
    # the oldest (the initial state at 0) leaves the window at 100 ms: the latest goes out
    out = hub.advance(99 * MS)
    assert _new_states(out) == []
    out = hub.advance(100 * MS)
    assert _new_states(out) == [(4, (False, False))]  # t=49: odd, False
    assert decode_frame(frames(out)[0].data).t.to_ns() // 1000 == (UTC0 + 49 * MS) // 1000
    # quiet for a window after the release: the alarm clears
    cleared = []
    for t in range(101, 260):
        cleared += _alarms(hub.advance(t * MS))
    assert cleared == [(f"publish_rate:{GOCB}", False)]
    # and the next change goes at once again
    assert _new_states(hub.publish(GOCB, bools(True, True), 300 * MS, UTC0)) == [(5, (True, True))]


def test_a_chattering_publisher_is_bounded_over_15_seconds():
    """A change every millisecond for 15 s: without the limit every one is a new state on
    the wire; with it, at most max_changes per window plus the held one, and the final
    value is the last state published."""

    def run(max_changes: int) -> tuple[int, int, tuple]:
        hub = GooseHub(
            GooseConfig.model_validate({"publishers": [pub_cfg(max_changes=max_changes)]})
        )
        sent = frames(hub.start(0, UTC0))
        for t in range(1, 15_001):
            sent += frames(hub.advance(t * MS))
            sent += frames(hub.publish(GOCB, bools(t % 2 == 0, t == 15_000), t * MS, UTC0))
        for t in range(15_001, 17_001):
            sent += frames(hub.advance(t * MS))
        decoded = [decode_frame(f.data) for f in sent]
        news = [d for d in decoded if d.sq_num == 0]
        return len(sent), len(news), tuple(x.value for x in news[-1].all_data)

    unlimited = run(10**9)
    limited = run(20)
    assert unlimited[1] == 15_001  # every change a new state
    assert limited[1] <= 20 * 16 + 1  # 16 windows of 1 s, the initial state
    assert limited[0] * 10 < unlimited[0]
    assert unlimited[2] == limited[2] == (True, True)  # the final state is on the wire


def test_the_crossing_and_the_clear_are_journal_rows(tmp_path):
    journal = open_journal(tmp_path / "j.sqlite", durability="memory")
    hub = GooseHub(
        GooseConfig.model_validate({"publishers": [pub_cfg(max_changes=2, change_window_ms=50)]}),
        journal=journal,
    )
    hub.start(0, UTC0)
    for t in range(1, 20):
        hub.publish(GOCB, bools(t % 2 == 0, False), t * MS, UTC0)
    for t in range(20, 200):
        hub.advance(t * MS)
    journal.flush(200 * MS)
    rows = journal.db.execute(
        "SELECT event, time_ns FROM journal WHERE machine = ? AND event LIKE 'rate_%'",
        (f"pub:{GOCB}",),
    ).fetchall()
    assert [r[0] for r in rows] == ["rate_limited", "rate_ok"]
    assert rows[0][1] == 2 * MS  # the first change held back


def test_the_limit_is_configured_per_publisher_and_checked():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="max_changes"):
        GooseConfig.model_validate({"publishers": [pub_cfg(max_changes=0)]})
    with pytest.raises(ValidationError, match="change_window_ms"):
        GooseConfig.model_validate({"publishers": [pub_cfg(change_window_ms=0)]})
