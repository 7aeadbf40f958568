"""A captured, authentic trip replayed to a controller that has just restarted, in
process (`tests/gates/test_restart_replay_live.py` does it to `goosectl run` on veths).

Under `auth: required` a replayed genuine trip does nothing while the controller knows
the stream (`tests/goose/test_auth.py`: the same frame, and stNum + 1 with an old `t`).
A restarted controller knows the stream from its journal: the stream machine's last
checkpoint, recalled before the first frame (`SubscriberBank.recall`), so the captured
frame, arriving before the genuine publisher's next one, is judged against the state the
controller had when it stopped. Here that state is the trip itself: the replay is a copy
of it, and stale.
"""

from __future__ import annotations

from pathlib import Path

from goosectl.controller.demo.scenario import PROT
from goosectl.controller.logic.core import BayController
from goosectl.lab.latency import MS, TripBench
from goosectl.lab.trip_work import SIGNED_KEY_ID, signed_keys


def _captured_trip(journal: Path) -> bytes:
    """A genuine signed trip as an attacker records it off the wire (the controller acts
    on it: the breaker opens), and the controller stopped."""
    first = TripBench(journal=journal, keys=signed_keys(), key_id=SIGNED_KEY_ID)
    try:
        first._reclose()
        now = first.wire.now_ns
        frame = first._trip_frame(True, now)
        first.bay.frame(frame, "A", now)
        first._run_until(now + 100 * MS)
        assert first.bay.bay.state == "open"
        return frame
    finally:
        first.close()


def test_a_captured_trip_replayed_to_a_restarted_controller_does_not_trip(monkeypatch, tmp_path):
    journal = tmp_path / "bay.sqlite"
    captured = _captured_trip(journal)
    tag = PROT.encode()
    hearing = {"prot": False}
    frame = BayController.frame

    def until_replay(self, data, *args, **kw):
        """The restarted controller hears the interlock stream, not yet the trip stream."""
        if not hearing["prot"] and tag in bytes(data):
            return None
        return frame(self, data, *args, **kw)

    monkeypatch.setattr(BayController, "frame", until_replay)
    restarted = TripBench(journal=journal, keys=signed_keys(), key_id=SIGNED_KEY_ID)
    restarted.bay.hub.bank.recall()  # as `run` does, before its trip stream's first frame
    try:
        restarted._reclose()  # closed (raises otherwise); its trip-stream frame unheard
        hearing["prot"] = True
        now = restarted.wire.now_ns
        restarted.bay.frame(captured, "A", now)  # the replay, before the publisher's next
        restarted._run_until(now + 100 * MS)
        assert restarted.bay.bay.state == "closed", "the replayed capture tripped the breaker"
        (row,) = [r for r in restarted.bay.hub.bank.rows() if r["stream"] == "prot"]
        assert row["counts"] == {"stale": 1}
    finally:
        restarted.close()
