"""`TimerHeap.move`: a deadline pushed back on every input without a heap push per input
(the GOOSE stream's TAL), yet firing exactly once, at the last deadline it was given."""

from goosectl.controller.engine import TimerHeap


def test_moved_later_fires_once_at_the_new_deadline_with_the_new_payload():
    h = TimerHeap()
    h.arm("m", "tal", 100, "tal_expired")
    for d in range(110, 1000, 10):
        assert h.move("m", "tal", d, ("sq", d))
    assert len(h._heap) == 1  # lazy: no entry per move
    assert list(h.pop_due(989)) == []  # the old entry came up and re-queued itself
    assert h.next_deadline() == 990
    (due,) = list(h.pop_due(990))
    assert (due.deadline_ns, due.event, due.payload) == (990, "tal_expired", ("sq", 990))
    assert list(h.pop_due(10**9)) == [] and len(h) == 0


def test_moved_earlier_is_a_rearm():
    h = TimerHeap()
    h.arm("m", "tal", 100, "tal_expired")
    assert h.move("m", "tal", 40)
    assert h.next_deadline() == 40
    assert [d.deadline_ns for d in h.pop_due(100)] == [40]


def test_moving_an_unarmed_or_fired_timer_says_so():
    h = TimerHeap()
    assert not h.move("m", "tal", 5)
    h.arm("m", "tal", 5, "e")
    list(h.pop_due(5))
    assert not h.move("m", "tal", 10)
    h.arm("m", "x", 5, "e")
    h.cancel("m", "x")
    assert not h.move("m", "x", 10)


def test_a_moved_timer_keeps_its_place_among_ties_and_in_a_checkpoint():
    h = TimerHeap()
    h.arm("a", "t", 10, "ea")
    h.arm("b", "t", 50, "eb")
    h.move("a", "t", 50)  # armed first: it fires first at the shared deadline
    saved = h.armed("a") + h.armed("b")
    assert [(t["deadline_ns"], t["event"]) for t in saved] == [(50, "ea"), (50, "eb")]
    assert [d.event for d in h.pop_due(50)] == ["ea", "eb"]
