"""One test per kind of finding: each must name the offending item and point at its line."""

from __future__ import annotations

import pytest

from goosectl.controller.engine import Registry, Table, TableError
from goosectl.controller.engine.layers import workflow_spec
from tests.support.procs import goosectl

from .conftest import BASE, findings


def only(fs, code):
    hits = [f for f in fs if f.code == code]
    assert hits, f"expected a {code} finding, got {[str(f) for f in fs]}"
    return hits[0]


def test_valid_table_has_no_findings(table_file):
    assert findings(table_file(BASE)) == []


def test_unknown_source_state(table_file):
    p = table_file(BASE + "  - {source: z, event: go, target: b}\n")
    f = only(findings(p), "unknown_state")
    assert f.item == "z" and f.line == 10 and str(p) in str(f)


def test_unknown_initial_state(table_file):
    f = only(findings(table_file(BASE.replace("initial: a", "initial: q"))), "unknown_state")
    assert f.item == "q" and f.line == 3


def test_unknown_target(table_file):
    f = only(
        findings(table_file(BASE + "  - {source: b, event: go, target: nowhere}\n")),
        "unknown_target",
    )
    assert f.item == "nowhere" and "does not exist" in f.reason


def test_unknown_event(table_file):
    f = only(
        findings(table_file(BASE + "  - {source: b, event: bogus, target: c}\n")), "unknown_event"
    )
    assert f.item == "bogus"


def test_unknown_guard(table_file):
    text = BASE + "  - {source: b, event: go, target: c, guard: is_magic}\n"
    f = only(findings(table_file(text)), "unknown_guard")
    assert f.item == "is_magic" and f.line == 10


def test_unknown_action(table_file):
    text = BASE.replace(
        "{source: a, event: go, target: b}", "{source: a, event: go, target: b, actions: [launch]}"
    )
    f = only(findings(table_file(text)), "unknown_action")
    assert f.item == "launch" and f.line == 8


def test_unknown_router(table_file):
    text = BASE + "  - {source: b, event: go, router: pick, routes: {x: c}}\n"
    f = only(findings(table_file(text)), "unknown_router")
    assert f.item == "pick"


def test_action_used_as_guard(table_file):
    text = BASE + "  - {source: b, event: go, target: c, guard: notify}\n"
    f = only(findings(table_file(text)), "unknown_guard")
    assert "is a action" in f.reason


def test_bad_factory_arguments(table_file):
    text = BASE.replace(
        "{source: a, event: go, target: b}",
        "{source: a, event: go, target: b, actions: [{name: incr, args: {x: 1}}]}",
    )
    f = only(findings(table_file(text)), "bad_args")
    assert "incr" in f.item


def test_unreachable_state(table_file):
    text = (
        BASE.replace("states: [a, b, c]", "states: [a, b, c, island]").replace(
            "events: [go, stop]", "events: [go, stop]\n"
        )
        + "  - {source: island, event: go, target: c}\n"
    )
    f = only(findings(table_file(text)), "unreachable")
    assert f.item == "island"


def test_dead_end(table_file):
    text = (
        BASE.replace("states: [a, b, c]", "states: [a, b, c, trap]")
        + "  - {source: a, event: stop, target: trap}\n"
    )
    f = only(findings(table_file(text)), "dead_end")
    assert f.item == "trap" and "no way out" in f.reason


def test_two_unguarded_transitions_are_not_exclusive(table_file):
    text = BASE + "  - {source: a, event: go, target: c}\n"
    f = only(findings(table_file(text)), "not_exclusive")
    assert f.item == "(a, go)"


def test_same_guard_twice_is_not_exclusive(table_file):
    g = "{name: field_eq, args: {field: n, value: 1}}"
    text = BASE.replace("transitions:", "context: {n: replace}\ntransitions:") + (
        f"  - {{source: b, event: go, target: c, guard: {g}}}\n"
        f"  - {{source: b, event: go, target: a, guard: {g}}}\n"
    )
    f = only(findings(table_file(text)), "not_exclusive")
    assert f.item == "(b, go)" and "same guard" in f.reason


def test_guarded_with_fallback_last_is_exclusive(table_file):
    text = BASE.replace("transitions:", "context: {n: replace}\ntransitions:") + (
        "  - {source: b, event: go, target: c,\n"
        "     guard: {name: field_eq, args: {field: n, value: 1}}}\n"
        "  - {source: b, event: go, target: a}\n"
    )
    assert findings(table_file(text)) == []


def test_router_outcomes_must_equal_route_keys(table_file):
    text = BASE.replace("transitions:", "routers: {pick: {outcomes: [left, right]}}\ntransitions:")
    text += "  - {source: b, event: go, router: pick, routes: {left: a, middle: c}}\n"
    reg = Registry("test")
    reg.router(outcomes=("left", "right"), name="pick")(lambda ctx, ev: "left")
    f = only(findings(table_file(text), [reg]), "router_outcomes")
    assert f.item == "pick"
    assert "missing from the route map: right" in f.reason
    assert "never returns: middle" in f.reason


def test_router_without_declared_outcomes(table_file):
    reg = Registry("test")
    reg.router(outcomes=(), name="pick")(lambda ctx, ev: "x")
    text = BASE + "  - {source: b, event: go, router: pick, routes: {x: c}}\n"
    f = only(findings(table_file(text), [reg]), "router_outcomes")
    assert "declares no outcomes" in f.reason


def test_workflow_built_in_python_is_checked_too():
    spec = workflow_spec(
        "wf",
        ["check", "open", "report"],
        edges={"open": "report"},
        routes={"check": ("interlock", {"ok": "open"})},
        routers={"interlock": ["ok", "blocked"]},
        final=["report"],
    )
    reg = Registry("wf")
    reg.router(outcomes=("ok", "blocked"), name="interlock")(lambda c, e: "ok")
    with pytest.raises(TableError) as exc:
        Table.from_spec(spec, [reg])
    assert any(f.code == "router_outcomes" and "blocked" in f.reason for f in exc.value.findings)


def test_reserved_context_field(table_file):
    text = BASE.replace("transitions:", "context: {state: replace}\ntransitions:")
    f = only(findings(table_file(text)), "reserved_field")
    assert f.item == "state"


def test_timer_with_unknown_delay_field(table_file):
    text = BASE + "timers:\n  - {state: b, after_ms: tal, event: stop}\n"
    f = only(findings(table_file(text)), "unknown_field")
    assert f.item == "tal" and f.line == 11


def test_structure_error_names_key_and_line(table_file):
    text = BASE.replace("  - {source: b, event: stop, target: c}", "  - {source: b, evnt: stop}")
    fs = findings(table_file(text))
    assert any(f.code == "structure" and f.line == 9 and "transitions.1" in f.item for f in fs)


def test_yaml_syntax_error_has_line(table_file):
    f = only(findings(table_file("name: t\nstates: [a,\n  b\ninitial: a: b\n")), "syntax")
    assert f.line is not None


def test_unknown_registry_module(table_file):
    f = only(findings(table_file("registry: no.such.module\n" + BASE)), "registry")
    assert "no.such.module" in f.item


@pytest.mark.parametrize("ok", [True, False])
def test_table_check_cli(table_file, ok):
    p = table_file(BASE if ok else BASE + "  - {source: a, event: go, target: zz}\n")
    r = goosectl("table", "check", str(p), check=False)
    if ok:
        assert r.returncode == 0 and "3 states, 2 events, 2 transitions" in r.stdout
    else:
        assert r.returncode == 1 and "zz" in r.stderr and "unknown_target" in r.stderr


def test_tables_load_from_toml_and_json_too(tmp_path):
    import json

    import yaml

    data = yaml.safe_load(BASE)
    (tmp_path / "t.json").write_text(json.dumps(data))
    toml = "\n".join(
        [
            'name = "t"',
            'initial = "a"',
            'states = ["a", "b", "c"]',
            'final = ["c"]',
            'events = ["go", "stop"]',
            "[[transitions]]",
            'source = "a"',
            'event = "go"',
            'target = "b"',
            "[[transitions]]",
            'source = "b"',
            'event = "stop"',
            'target = "c"',
        ]
    )
    (tmp_path / "t.toml").write_text(toml)
    rows = []
    for name in ("t.json", "t.toml"):
        t = Table.load(tmp_path / name)
        rows.append(
            sorted(
                (s, e, r.target) for s, evs in t.rows.items() for e, rs in evs.items() for r in rs
            )
        )
    assert rows[0] == rows[1] == [("a", "go", "b"), ("b", "stop", "c")]
    (tmp_path / "bad.json").write_text('{"name": "t",\n "initial": }')
    f = only(findings(tmp_path / "bad.json"), "syntax")
    assert f.line == 2
