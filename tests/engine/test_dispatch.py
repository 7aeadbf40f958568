"""Dispatch semantics a table author relies on."""

from __future__ import annotations

import pytest

from goosectl.controller.engine import (
    CancelTimer,
    EngineError,
    Notify,
    Raise,
    Registry,
    RejectedEvent,
    StartTimer,
    Table,
)
from goosectl.controller.engine.context import ContextError
from goosectl.controller.engine.spec import MachineSpec

REG = Registry("dispatch-tests")


@REG.action
def chain(ctx, ev):
    return [{"log": f"chain:{ev.name}"}, Raise("second"), Raise("third"), Notify("chained")]


@REG.action
def note(ctx, ev):
    return {"log": ev.name}


@REG.action
def write_state(ctx, ev):
    return {"state": "hacked"}


@REG.action
def boom(ctx, ev):
    raise RuntimeError("action failed")


@REG.action
def mutate(ctx, ev):
    ctx["n"] = 99  # must be impossible: the context is read-only


@REG.router(outcomes=("x", "y"))
def pick(ctx, ev):
    return ev.payload


def make(policy="reject", extra=(), **spec):
    base = {
        "name": "m",
        "initial": "a",
        "states": ["a", "b", "c", "d"],
        "final": ["d"],
        "events": ["go", "second", "third", "back", "bad", "fail", "route", "finish", "mut"],
        "on_unhandled": policy,
        "context": {"log": "append", "n": "sum", "cfg": "merge", "tal_ms": {"default": 40}},
        "timers": [
            {"state": "b", "after_ms": 5, "event": "back"},
            {"state": "c", "after_ms": "tal_ms", "event": "back"},
        ],
        "transitions": [
            {"source": "a", "event": "go", "target": "b", "actions": ["chain"]},
            {"source": "b", "event": "second", "target": "c", "actions": ["note"]},
            {
                "source": "c",
                "event": "third",
                "target": "c",
                "internal": True,
                "actions": ["note", {"name": "incr", "args": {"field": "n", "by": 2}}],
            },
            {"source": ["b", "c"], "event": "back", "target": "a"},
            {"source": "a", "event": "bad", "target": "b", "actions": ["write_state"]},
            {"source": "a", "event": "fail", "target": "b", "actions": ["note", "boom"]},
            {"source": "a", "event": "mut", "target": "b", "actions": ["mutate"]},
            {"source": "a", "event": "route", "router": "pick", "routes": {"x": "b", "y": "c"}},
            {"source": "*", "event": "finish", "target": "d"},
            *extra,
        ],
        **spec,
    }
    t = Table.from_spec(MachineSpec.model_validate(base), [REG])
    m = t.new("m1")
    m.start(0)
    return m


def test_run_to_completion_processes_raised_events_in_order():
    m = make()
    step = m.dispatch("go", 10)
    assert step.transitions == [("a", "go", "b"), ("b", "second", "c"), ("c", "third", "c")]
    assert m.state == "c"
    assert m.ctx["log"] == ("chain:go", "second", "third")
    assert m.ctx["n"] == 2
    assert Notify("chained") in step.effects
    # b's timer armed then cancelled on leaving b; c's timer from the context field
    kinds = [(type(e).__name__, getattr(e, "name", None)) for e in step.effects]
    assert ("StartTimer", "b:back") in kinds and ("CancelTimer", "b:back") in kinds
    assert StartTimer("c:back", 40_000_000, "back") in step.effects


def test_internal_self_transition_keeps_timers():
    m = make()
    m.dispatch("go", 0)
    step = m.dispatch("third", 1)
    assert step.transitions == [("c", "third", "c")]
    assert not any(isinstance(e, (StartTimer, CancelTimer)) for e in step.effects)


def test_reject_policy_raises_and_changes_nothing():
    m = make()
    before = (m.state, dict(m.ctx))
    with pytest.raises(RejectedEvent) as exc:
        m.dispatch("second", 1)
    assert "'second' rejected in state 'a'" in str(exc.value)
    assert (m.state, dict(m.ctx)) == before


def test_ignore_policy_counts_and_changes_nothing():
    m = make(policy="ignore")
    step = m.dispatch("second", 1)
    assert step.ignored == 1 and step.transitions == [] and m.state == "a"
    m.dispatch("second", 2)
    assert m.ignored["second"] == 2


# in c, `chain` raises "second" (no row in c) and then "third" (c -> c)
_CHAIN_IN_C = ({"source": "c", "event": "go", "target": "c", "actions": ["chain"]},)


def test_ignored_raised_event_does_not_stop_the_ones_after_it():
    m = make(policy="ignore", extra=_CHAIN_IN_C)
    m.dispatch("go", 0)
    assert m.state == "c"
    log = m.ctx["log"]
    step = m.dispatch("go", 1)
    assert step.transitions == [("c", "go", "c"), ("c", "third", "c")]
    assert step.ignored == 1 and m.ignored["second"] == 1
    assert m.ctx["log"] == (*log, "chain:go", "third")


def test_rejected_raised_event_rolls_back_the_whole_step():
    m = make(extra=_CHAIN_IN_C)
    m.dispatch("go", 0)
    before = (m.state, dict(m.ctx))
    with pytest.raises(RejectedEvent, match="'second' rejected in state 'c'"):
        m.dispatch("go", 1)
    assert (m.state, dict(m.ctx)) == before


def test_reserved_field_write_is_refused_and_atomic():
    m = make()
    with pytest.raises(ContextError, match="reserved field 'state'"):
        m.dispatch("bad", 1)
    assert m.state == "a"


def test_failing_action_leaves_machine_untouched():
    m = make()
    with pytest.raises(RuntimeError):
        m.dispatch("fail", 1)
    assert m.state == "a" and m.ctx["log"] == ()


def test_context_is_read_only_to_actions():
    m = make()
    with pytest.raises(TypeError):
        m.dispatch("mut", 1)
    assert m.ctx["n"] == 0


def test_router_picks_target_and_rejects_unknown_outcome():
    m = make()
    assert m.dispatch("route", 1, "y").state == "c"
    m2 = make()
    with pytest.raises(EngineError, match="returned 'z'"):
        m2.dispatch("route", 1, "z")
    assert m2.state == "a"


def test_wildcard_reaches_final_and_final_accepts_nothing():
    m = make()
    m.dispatch("finish", 1)
    assert m.done
    with pytest.raises(RejectedEvent):
        m.dispatch("go", 2)


def test_guard_order_and_negation():
    extra = [
        {
            "source": "b",
            "event": "go",
            "target": "c",
            "guard": {"name": "field_eq", "args": {"field": "n", "value": 0}},
        },
        {"source": "b", "event": "go", "target": "a"},
    ]
    m = make(extra=extra)
    m.dispatch("route", 0, "x")
    assert m.dispatch("go", 1).state == "c"
    negated = [
        {
            "source": "b",
            "event": "go",
            "target": "c",
            "guard": {"name": "field_eq", "args": {"field": "n", "value": 0}, "not": True},
        },
        {"source": "b", "event": "go", "target": "a"},
    ]
    m = make(extra=negated)
    m.dispatch("route", 0, "x")
    assert m.dispatch("go", 1).state == "a"


def test_reducers():
    from goosectl.controller.engine.context import REDUCERS

    assert REDUCERS["append"]((1,), 2) == (1, 2)
    assert REDUCERS["sum"](None, 3) == 3
    assert REDUCERS["merge"]({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}}) == {"a": {"b": 1, "c": 3}}
    assert REDUCERS["replace"](1, 2) == 2


def test_dispatch_before_start_is_an_error():
    t = make().table
    with pytest.raises(EngineError, match="before start"):
        t.new("x").dispatch("go", 0)


def test_snapshot_restore_round_trip():
    from goosectl.controller.engine import Machine

    m = make()
    m.dispatch("go", 0)
    m2 = Machine.restore(m.table, m.snapshot())
    assert (m2.state, dict(m2.ctx)) == (m.state, dict(m.ctx))
    assert m2.dispatch("back", 5).state == "a"
