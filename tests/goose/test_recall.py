"""What a restarted controller knows of a stream before its first frame: the last state its
journal recalls (`SubscriberBank.recall`), against which that first frame is judged as a
frame after TAL expiry is (classify.py, `_old`). And the rule both share for a state
before the last one.

The journal is the engine's own (its checkpoints, in a `MemoryStore` shared by the
controller before and after its restart, as the SQLite file is in `goosectl run`).
"""

from __future__ import annotations

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.engine import Journal
from goosectl.controller.engine.journal import MemoryStore
from goosectl.controller.goose.hub import GooseHub

from .helpers import DST, GOCB, MS, raw_frame, verdicts

T0 = 1_750_000_000
UNSYNCHRONISED = 0x20 | 0x0A


def controller(store: MemoryStore, skew_ms: float = 100.0) -> GooseHub:
    """A subscriber to the test stream whose journal commits to `store`, its streams'
    last states recalled from it (as `goosectl run` does at start)."""
    cfg = GooseConfig.model_validate(
        {"subscriptions": [{"gocb_ref": GOCB, "appid": 0x1010, "dst": DST}],
         "receive": {"t_skew_ms": skew_ms}}
    )  # fmt: skip
    hub = GooseHub(cfg, journal=Journal(store))
    hub.bank.recall()
    return hub


def judged(hub: GooseHub, frame: bytes, now_ns: int) -> tuple[str, tuple, bool]:
    (v,) = verdicts(hub.frame(frame, "A", now_ns))
    return v.cls, v.flags, v.deliver


def stopped(hub: GooseHub, now_ns: int) -> None:
    """The controller stops: what it journaled is committed."""
    hub.scheduler.journal.flush(now_ns)


def ran_with_a_cleared_trip(store: MemoryStore) -> tuple[bytes, bytes]:
    """A controller that heard the trip (stNum 5) and its clearing (stNum 6, a second
    later), then stopped. Returns (the trip's first frame, the clearing's first frame)."""
    hub = controller(store)
    trip = raw_frame(5, 0, t_s=T0 + 10, values=(True, False))
    clear = raw_frame(6, 0, t_s=T0 + 11)
    assert judged(hub, raw_frame(4, 0, t_s=T0), 0)[0] == "first"
    assert judged(hub, trip, 10 * MS)[0] == "new_state"
    assert judged(hub, clear, 20 * MS)[0] == "new_state"
    assert judged(hub, raw_frame(6, 1, t_s=T0 + 11), 30 * MS)[0] == "retransmission"
    stopped(hub, 40 * MS)
    return trip, clear


def test_a_trip_recorded_before_the_restart_is_stale_after_it():
    store = MemoryStore()
    trip, _ = ran_with_a_cleared_trip(store)
    hub = controller(store)
    assert judged(hub, trip, 0) == ("stale", ("stale_recalled",), False)
    # the genuine publisher's next heartbeat of its current state: the stream's first state
    assert judged(hub, raw_frame(6, 9, t_s=T0 + 11), 5 * MS) == ("first", (), True)


def test_a_copy_of_the_last_state_recalled_is_stale_a_later_heartbeat_of_it_is_not():
    """The recalled sqNum is the last judged frame's: retransmissions counted on the fast
    path do not move it, so a recorded heartbeat of the last state is accepted, and
    delivers the state the controller had when it stopped."""
    store = MemoryStore()
    _, clear = ran_with_a_cleared_trip(store)
    hub = controller(store)
    assert judged(hub, clear, 0) == ("stale", ("stale_recalled",), False)
    assert judged(hub, raw_frame(6, 1, t_s=T0 + 11), 2 * MS) == ("first", (), True)


def test_a_publisher_restarted_while_the_controller_was_down_is_accepted():
    store = MemoryStore()
    trip, _ = ran_with_a_cleared_trip(store)
    hub = controller(store)
    # stNum 1 again, its first state stamped after its last one: a restart, not a replay
    assert judged(hub, raw_frame(1, 0, t_s=T0 + 600), 0) == ("first", (), True)
    # and once it is heard, the stream goes on as any other: the old trip is old
    assert judged(hub, trip, 1 * MS)[:3:2] == ("stale", False)


def test_a_second_restart_before_any_frame_still_recalls_the_state():
    store = MemoryStore()
    trip, _ = ran_with_a_cleared_trip(store)
    between = controller(store)  # heard nothing of the stream before it stopped again
    stopped(between, 1 * MS)
    hub = controller(store)
    assert judged(hub, trip, 0)[0] == "stale"


def test_without_a_journal_the_first_frame_is_the_first_state():
    """`replay` and `listen` judge a capture on its own: nothing is recalled."""
    hub = GooseHub(
        GooseConfig.model_validate({"subscriptions": [{"gocb_ref": GOCB, "appid": 0x1010,
                                                        "dst": DST}]})
    )  # fmt: skip
    assert hub.bank.recall() == 0
    assert judged(hub, raw_frame(5, 0, t_s=T0 + 10), 0) == ("first", (), True)


def test_after_tal_expiry_an_earlier_state_within_the_skew_is_stale():
    """A trip that lasted less than the skew, replayed after its clearing once the stream
    was lost: the skew does not let it through (a restarted publisher's first state is
    stamped after its last, its restart takes longer than that)."""
    store = MemoryStore()
    hub = controller(store, skew_ms=5000)  # wider than the trip
    trip = raw_frame(5, 0, t_s=T0 + 10, values=(True, False), tal=100)
    assert judged(hub, trip, 0)[0] == "first"
    assert judged(hub, raw_frame(6, 0, t_s=T0 + 11, tal=100), 1 * MS)[0] == "new_state"
    hub.advance(500 * MS)  # TAL runs out: the stream is lost
    assert judged(hub, trip, 600 * MS)[:2] == ("stale", ("stale_time", "tal_late"))


def test_a_publisher_whose_clock_is_unsynchronised_is_not_judged_by_its_t():
    """A relay restarted before its clock synchronised stamps whatever its clock says: its
    stNum 1 with an early `t` is accepted (docs/threat-model.md says what that leaves)."""
    store = MemoryStore()
    ran_with_a_cleared_trip(store)
    hub = controller(store)
    early = raw_frame(1, 0, t_s=T0 - 3600, quality=UNSYNCHRONISED)
    assert judged(hub, early, 0) == ("first", (), True)
