"""Hypothesis: whatever arrives, the engine only ever does what the table says."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.controller.engine import RejectedEvent, Table
from goosectl.controller.engine.spec import MachineSpec
from tests.support.examples import examples

SPEC = MachineSpec.model_validate(
    {
        "name": "prop",
        "initial": "s0",
        "states": [f"s{i}" for i in range(6)],
        "events": ["a", "b", "c", "d"],
        "context": {"count": "sum", "seen": "append"},
        "transitions": [
            {
                "source": "s0",
                "event": "a",
                "target": "s1",
                "actions": [{"name": "incr", "args": {"field": "count"}}],
            },
            {
                "source": "s1",
                "event": "b",
                "target": "s2",
                "guard": {"name": "field_lt", "args": {"field": "count", "value": 3}},
            },
            {"source": "s1", "event": "b", "target": "s3"},
            {
                "source": "s2",
                "event": "c",
                "target": "s0",
                "actions": [{"name": "store", "args": {"field": "seen"}}],
            },
            {"source": "s3", "event": "d", "target": "s4"},
            {
                "source": "s4",
                "event": "a",
                "target": "s5",
                "actions": [{"name": "raise", "args": {"event": "c"}}],
            },
            {"source": "s5", "event": "c", "target": "s0"},
            {"source": "s5", "event": "b", "target": "s0"},
        ],
    }
)
TABLE = Table.from_spec(SPEC)
ALLOWED = {(src, t.event, t.target) for t in SPEC.transitions for src in t.sources()}


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "zz"]), st.integers(0, 9)), max_size=60)
)
def test_random_sequences_only_take_table_transitions(events):
    m = TABLE.new("p")
    m.start(0)
    for i, (ev, payload) in enumerate(events):
        before = (m.state, dict(m.ctx))
        try:
            step = m.dispatch(ev, i, payload)
        except RejectedEvent:
            assert (m.state, dict(m.ctx)) == before
            continue
        for tr in step.transitions:
            assert tr in ALLOWED
        if step.transitions:
            assert step.transitions[0][0] == before[0]
            assert step.transitions[-1][2] == m.state
        assert m.state in TABLE.rows
