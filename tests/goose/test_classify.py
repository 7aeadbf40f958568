"""Sequence rules, wraps and flags: one frame at a time against a subscriber."""

from __future__ import annotations

import pytest

from goosectl.controller.goose.classify import classify_sequence, st_delta

from .helpers import GOCB, MS, raw_frame, states, subscriber, verdicts

U = 2**32 - 1


@pytest.mark.parametrize(
    "prev, cur, expected",
    [
        ((5, 3), (5, 4), ("retransmission", False)),
        ((5, 3), (5, 3), ("duplicate", False)),
        ((5, 3), (5, 1), ("out_of_order", False)),
        ((5, 3), (6, 0), ("new_state", False)),
        ((5, 3), (9, 0), ("missed_states", False)),
        ((5, 3), (4, 7), ("replay", False)),
        ((U, 3), (1, 0), ("new_state", True)),
        ((U, 3), (2, 0), ("missed_states", True)),
        ((7, U), (7, 1), ("retransmission", True)),
        ((1, 0), (U, 0), ("replay", False)),
    ],
)
def test_sequence_rules(prev, cur, expected):
    assert classify_sequence(False, True, *prev, *cur) == expected


def test_first_and_restart():
    assert classify_sequence(True, False, 0, 0, 9, 4)[0] == "first"
    assert classify_sequence(False, False, 9, 4, 1, 0)[0] == "restart"


def test_st_delta_skips_zero():
    assert st_delta(U, 1) == (1, True)
    assert st_delta(3, 3) == (0, False)


def feed(hub, seq):
    out = []
    for i, (buf, t_ms) in enumerate(seq):
        out += hub.frame(buf, "A", t_ms * MS if t_ms is not None else i * MS)
    return out


def classes(out):
    return [(v.cls, v.flags) for v in verdicts(out)]


def test_stream_walk_through_every_class():
    hub = subscriber()
    out = feed(
        hub,
        [
            (raw_frame(10, 0, values=(True, False)), 0),
            (raw_frame(10, 1, values=(True, False)), 4),
            (raw_frame(10, 1, values=(True, False)), 5),
            (raw_frame(11, 0, values=(True, True), t_s=1_750_000_001), 8),
            (raw_frame(13, 0, values=(False, True), t_s=1_750_000_002), 9),
            (raw_frame(12, 5, values=(True, True), t_s=1_750_000_001), 10),
            (raw_frame(13, 1, values=(False, True), t_s=1_750_000_002), 11),
        ],
    )
    assert classes(out) == [
        ("first", ()),
        ("retransmission", ()),
        ("duplicate", ()),
        ("new_state", ()),
        ("missed_states", ()),
        ("replay", ()),
        ("retransmission", ()),
    ]
    delivered = [v.st_num for v in verdicts(out) if v.deliver]
    assert delivered == [10, 11, 13]
    assert states(out) == [("-", "valid"), ("-", "suspect"), ("-", "valid")]


def test_tal_expiry_then_restart_is_accepted():
    hub = subscriber()
    out = feed(hub, [(raw_frame(50, 3, tal=100), 0)])
    out += hub.advance(99 * MS)
    assert states(out) == [("-", "valid")]
    out = hub.advance(100 * MS)
    assert states(out) == [("-", "lost")]
    # a restarted publisher starts again at stNum 1, with a `t` after its last state's:
    # accepted, not a replay
    out = hub.frame(raw_frame(1, 0, tal=100, t_s=1_750_000_060), "A", 250 * MS)
    assert classes(out) == [("restart", ("tal_late",))]
    assert states(out) == [("-", "valid")]


def test_flags():
    hub = subscriber(conf_rev=2, members=["boolean", "boolean"])
    out = feed(
        hub,
        [
            (raw_frame(1, 0, conf_rev=1), 0),
        ],
    )
    assert classes(out) == [("first", ("confrev_mismatch",))]
    assert states(out) == [("-", "config_mismatch")]

    hub = subscriber()
    out = feed(
        hub,
        [
            (raw_frame(1, 0, t_s=100), 0),
            (raw_frame(2, 0, t_s=100), 1),  # same t, same data
            (raw_frame(3, 0, t_s=101, nds_com=True, values=(True, False)), 2),
            (raw_frame(4, 0, t_s=102, simulation=True, values=(False, False)), 3),
            (raw_frame(5, 0, t_s=103, s_bit=True, values=(True, True)), 4),
            (raw_frame(6, 0, t_s=104, values=(True, True, True)), 5),
        ],
    )
    got = [(v.stream.split("@")[0], v.cls, v.flags) for v in verdicts(out)]
    real, sim = GOCB, f"{GOCB}~sim"
    # the same `t` on the next state is normal (IEDs stamp `t` coarsely): not stale
    assert got[1] == (real, "new_state", ("unchanged_data",))
    assert got[2] == (real, "new_state", ("ndscom",))
    # simulated frames (the field, or the S-bit alone) are a stream of their own: a test
    # set's sequence numbers never disturb the real publisher's
    assert got[3] == (sim, "first", ("simulation",))
    assert got[4] == (sim, "new_state", ("s_bit_mismatch",))
    assert got[5] == (real, "missed_states", ("shape_mismatch",))
    assert states(out) == [
        ("-", "valid"),
        ("-", "config_mismatch"),
        ("sim", "simulated"),
        ("sim", "suspect"),
    ]


def test_a_late_frame_finds_the_stream_lost_first():
    """Timers due before a frame fire before it: a frame after TAL is a restart, tal_late."""
    hub = subscriber()
    hub.frame(raw_frame(1, 0, tal=10), "A", 0)
    out = hub.frame(raw_frame(1, 1, tal=10), "A", 11 * MS)  # the shell did not advance
    assert states(out) == [("-", "lost"), ("-", "valid")]
    assert classes(out) == [("restart", ("tal_late",))]


def test_unmatched_and_malformed_are_counted_not_fatal():
    hub = subscriber(gocb_ref="OTHER/LLN0$GO$x")
    out = hub.frame(raw_frame(1, 0), "A", 0)
    assert classes(out) == [("unmatched", ())]
    out = hub.frame(raw_frame(1, 0)[:40], "A", 1)
    assert classes(out) == [("malformed", ())]
    c = hub.counters()
    assert c["unmatched"] == 1 and c["malformed"] == 1 and c["streams"] == {}


def test_injected_stream_is_flagged():
    """An attacker jumps stNum with a stale `t`, interleaved with the genuine publisher."""
    hub = subscriber()
    genuine = [raw_frame(20, i, t_s=1_000) for i in range(3)]
    out = hub.frame(genuine[0], "A", 0)
    out += hub.frame(raw_frame(120, 0, t_s=900, values=(True, True)), "A", 1 * MS)
    out += hub.frame(genuine[1], "A", 2 * MS)
    out += hub.frame(genuine[2], "A", 3 * MS)
    got = classes(out)
    # its `t` is older than the stream's: a replay, neither delivered nor remembered, so
    # the genuine publisher's frames go on as before
    assert got[1] == ("stale", ("stale_time",))
    assert got[2][0] == "retransmission" and got[3][0] == "retransmission"
    assert ("-", "suspect") in states(out)


def test_a_jump_then_the_old_sequence_is_a_conflict_at_its_first_frame():
    """A forged stNum jump with a current `t`, then the genuine publisher goes on: the first
    genuine frame after the jump shows two sequences; from then on each frame is judged
    against the sequence it continues, so the genuine new state is delivered."""
    hub = subscriber()
    out = hub.frame(raw_frame(20, 0, t_s=1_000), "A", 0)
    out += hub.frame(raw_frame(1020, 0, t_s=1_000, values=(False, False)), "A", 1 * MS)
    out += hub.frame(raw_frame(20, 1, t_s=1_000), "A", 10 * MS)
    out += hub.frame(raw_frame(21, 0, t_s=1_001, values=(True, True)), "A", 20 * MS)
    out += hub.frame(raw_frame(1020, 1, t_s=1_000, values=(False, False)), "A", 30 * MS)
    got = classes(out)
    assert got[1] == ("missed_states", ("unchanged_data",))
    assert got[2] == ("retransmission", ("two_sequences", "conflict"))
    assert got[3] == ("new_state", ("conflict",))
    assert got[4] == ("retransmission", ("conflict",))
    assert [v.deliver for v in verdicts(out)] == [True, True, False, True, False]
    alarms = [e for e in out if type(e).__name__ == "Alarm"]
    assert [a.active for a in alarms if a.name.startswith("goose_conflict:")] == [True]
    (view,) = hub.lgos()
    assert view.err == "conflict" and not view.st
