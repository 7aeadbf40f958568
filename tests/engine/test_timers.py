from goosectl.controller.engine import TimerHeap, VirtualClock


def test_due_timers_fire_in_time_order_with_stable_ties():
    h = TimerHeap()
    h.arm("m2", "t", 10, "e2")
    h.arm("m1", "t", 5, "e1")
    h.arm("m3", "t", 10, "e3")
    fired = [(d.deadline_ns, d.machine) for d in h.pop_due(10)]
    assert fired == [(5, "m1"), (10, "m2"), (10, "m3")]
    assert len(h) == 0


def test_rearm_replaces_and_cancel_is_lazy_but_final():
    h = TimerHeap()
    h.arm("m", "t", 5, "first")
    h.arm("m", "t", 20, "second")
    h.arm("m", "u", 7, "u")
    h.cancel("m", "u")
    assert [d.event for d in h.pop_due(10)] == []
    assert h.next_deadline() == 20
    assert [d.event for d in h.pop_due(20)] == ["second"]


def test_armed_round_trip_keeps_tie_order():
    h = TimerHeap()
    h.arm("m", "b", 10, "eb")
    h.arm("m", "a", 10, "ea")
    saved = h.armed("m")
    h2 = TimerHeap()
    for t in saved:
        h2.arm("m", t["name"], t["deadline_ns"], t["event"], t["payload"], seq=t["seq"])
    assert [d.event for d in h2.pop_due(10)] == ["eb", "ea"]


def test_virtual_clock_never_goes_back():
    c = VirtualClock(5)
    c.advance_to(7)
    try:
        c.advance_to(6)
    except ValueError as exc:
        assert "cannot go back" in str(exc)
    else:
        raise AssertionError("clock went back")
