"""The four layers on one engine, and the authority of the lowest (persisted) one."""

from __future__ import annotations

import pytest

from goosectl.controller.engine import RejectedEvent, Table
from goosectl.controller.engine.layers import (
    LayerStack,
    flow_spec,
    host_spec,
    phase_spec,
)

PHASES = ["prepare", "execute", "verify", "done"]


@pytest.fixture
def tables():
    phase = Table.from_spec(phase_spec("phase", PHASES))
    flow = Table.from_spec(
        flow_spec(
            "flow",
            ["check", "open", "confirm"],
            [("check", "open"), ("open", "confirm"), ("confirm", "check")],
        )
    )
    return phase, flow


def test_phase_only_moves_forward(tables):
    phase, _ = tables
    m = phase.new("p")
    m.start(0)
    m.dispatch("advance", 1)
    assert m.state == "execute"
    # there is no event that goes back; the only way is forward, one phase at a time
    assert all(
        r.target in PHASES[PHASES.index(s) :]
        for s, rows in phase.rows.items()
        for ev_rows in rows.values()
        for r in ev_rows
    )
    for _ in range(2):
        m.dispatch("advance", 2)
    assert m.done
    with pytest.raises(RejectedEvent):
        m.dispatch("advance", 3)


def test_flow_refuses_moves_off_the_whitelist(tables):
    _, flow = tables
    m = flow.new("f")
    m.start(0)
    with pytest.raises(RejectedEvent, match="to:confirm"):
        m.dispatch("to:confirm", 1)
    assert m.dispatch("to:open", 2).state == "open"


def test_host_lifecycle_guards():
    host = Table.from_spec(host_spec())
    m = host.new("h")
    m.start(0)
    with pytest.raises(RejectedEvent):
        m.dispatch("abort", 1)  # abort while not running
    m.dispatch("start", 2)
    with pytest.raises(RejectedEvent):
        m.dispatch("start", 3)  # start while running
    m.dispatch("pause", 4)
    with pytest.raises(RejectedEvent):
        m.dispatch("abort", 5)  # paused is not running
    m.dispatch("resume", 6)
    assert m.dispatch("abort", 7).state == "completed"


def test_lowest_layer_is_the_authority(tables):
    phase, flow = tables
    s = LayerStack(phase, flow, stack_id="bay1")
    assert s.host.state == "idle"
    with pytest.raises(PermissionError):
        s.move("open", 1)  # the flow moves only while the host runs
    s.start(1)
    s.move("open", 2)
    s.advance(3)
    snap = s.snapshot()
    assert set(snap) >= {"state", "context"} and snap["state"] == "execute"

    restored = LayerStack.restore(phase, flow, snap)
    assert (restored.flow.state, restored.host.state) == ("open", "running")

    # an upper view that drifts is corrected from the authority, never the other way round
    s.flow.dispatch("to:confirm", 4)
    assert not s.consistent()
    s.rebuild()
    assert s.flow.state == "open" and s.consistent()


def test_phase_complete_forces_flow_to_stop(tables):
    phase, flow = tables
    s = LayerStack(phase, flow)
    s.start(0)
    s.move("open", 1)
    for t in range(3):
        s.advance(2 + t)
    assert s.phase.done and s.flow.state == "stopped" and s.host.state == "completed"


def test_pause_and_abort_are_recorded_in_the_authority(tables):
    phase, flow = tables
    s = LayerStack(phase, flow)
    s.start(0)
    s.pause(1)
    assert LayerStack.restore(phase, flow, s.snapshot()).host.state == "paused"
    s.resume(2)
    s.abort(3)
    r = LayerStack.restore(phase, flow, s.snapshot())
    assert r.host.state == "completed" and r.phase.ctx["aborted"] and r.flow.state == "stopped"
