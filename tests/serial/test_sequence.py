"""Sequence arithmetic and the device's at-most-once memory."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.protocols.serial.sequence import (
    DEDUP_WINDOW,
    DedupWindow,
    Verdict,
    seq_distance,
    seq_newer,
    seq_next,
)

seqs = st.integers(0, 0xFFFF)


def test_next_wraps() -> None:
    assert seq_next(0) == 1
    assert seq_next(0xFFFE) == 0xFFFF
    assert seq_next(0xFFFF) == 0


def test_newer_across_the_wrap() -> None:
    assert seq_newer(0xFFFF, 0)
    assert seq_newer(0xFFF0, 5)
    assert not seq_newer(5, 0xFFF0)
    assert not seq_newer(7, 7)
    assert seq_distance(0xFFFF, 1) == 2
    assert seq_distance(1, 0xFFFF) == -2


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(seqs, st.integers(1, 0x7FFF))
def test_newer_is_antisymmetric(a: int, step: int) -> None:
    b = (a + step) & 0xFFFF
    assert seq_newer(a, b) and not seq_newer(b, a)
    assert seq_distance(a, b) == step


def test_fresh_window_executes_anything() -> None:
    w = DedupWindow()
    assert w.classify(1234) == (Verdict.NEW, None)


def test_repeat_returns_stored_response_not_new() -> None:
    w = DedupWindow()
    w.remember(10, b"ack-10")
    assert w.classify(10) == (Verdict.REPEAT, b"ack-10")
    assert w.classify(11) == (Verdict.NEW, None)
    assert w.classify(9) == (Verdict.STALE, None)  # older and never seen: must not run late


def test_window_keeps_the_last_n_and_older_become_stale() -> None:
    w = DedupWindow(size=DEDUP_WINDOW)
    for s in range(100, 100 + DEDUP_WINDOW + 2):
        w.remember(s, bytes([s & 0xFF]))
    assert len(w) == DEDUP_WINDOW
    assert w.classify(100) == (Verdict.STALE, None)
    newest = 100 + DEDUP_WINDOW + 1
    assert w.classify(newest) == (Verdict.REPEAT, bytes([newest & 0xFF]))
    assert w.classify(newest - DEDUP_WINDOW + 1)[0] is Verdict.REPEAT


def test_window_across_the_wrap() -> None:
    w = DedupWindow(size=2)
    for s in (0xFFFE, 0xFFFF, 0, 1):
        assert w.classify(s)[0] is Verdict.NEW
        w.remember(s, b"r%d" % s)
    assert w.classify(1) == (Verdict.REPEAT, b"r1")
    assert w.classify(0xFFFF)[0] is Verdict.STALE
    assert w.classify(2)[0] is Verdict.NEW


def test_rebase_after_power_up() -> None:
    w = DedupWindow()
    w.remember(500, b"old")
    w.rebase(next_command_seq=501)  # the controller's counter, from EVENT_ACK of POWER_UP
    assert len(w) == 0
    assert w.classify(500)[0] is Verdict.STALE  # sent before the reset: never replayed
    assert w.classify(480)[0] is Verdict.STALE
    assert w.classify(501)[0] is Verdict.NEW


def test_baseline_at_construction() -> None:
    assert DedupWindow(baseline=7).classify(6)[0] is Verdict.STALE
    assert DedupWindow(baseline=0).classify(0)[0] is Verdict.NEW


def test_window_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        DedupWindow(size=0)


@settings(deadline=None)  # no wall-clock assertions in unit tests
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 6)), max_size=200), seqs)
def test_at_most_once_under_retries_and_late_copies(
    ops: list[tuple[bool, int]], start: int
) -> None:
    """A controller that retries and a line that replays old frames never run a seq twice."""
    w = DedupWindow()
    executed: list[int] = []
    issued: list[int] = []
    seq = start
    for new_command, back in ops:
        if new_command or not issued:
            issued.append(seq)
            arriving = seq
            seq = seq_next(seq)
        else:
            arriving = issued[max(0, len(issued) - 1 - back)]  # retry or a late duplicate
        verdict, stored = w.classify(arriving)
        if verdict is Verdict.NEW:
            executed.append(arriving)
            w.remember(arriving, b"resp")
        elif verdict is Verdict.REPEAT:
            assert stored == b"resp"
    assert len(executed) == len(set(executed))
