"""Static validation of a table: everything that can be known before the first event.

Each check is a small function over the spec that yields (key path, item, reason, code);
`check` runs them all and turns paths into lines. Calls are bound to the registry here too,
because a missing name or a wrong argument is a table error like any other.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from typing import Any

from goosectl.controller.engine.findings import Finding
from goosectl.controller.engine.loader import LineOf
from goosectl.controller.engine.registry import Registry
from goosectl.controller.engine.spec import RESERVED_FIELDS, CallRef, MachineSpec

Raw = tuple[tuple[Any, ...], str, str, str]  # (key path, item, reason, code)
Bound = dict[tuple[str, str], Callable[..., Any]]  # (kind, label) -> callable
WILDCARD = "*"


def expand_sources(spec: MachineSpec, sources: list[str]) -> list[str]:
    """`*` means every state that is not final."""
    if WILDCARD in sources:
        final = set(spec.final)
        return [s for s in spec.state_names() if s not in final]
    return sources


def _check_names(spec: MachineSpec) -> Iterator[Raw]:
    """Every name the spec uses is declared: states (once each), the initial and final
    states, the transitions' and timers' states and events, the context fields."""
    states = spec.state_names()
    seen: set[str] = set()
    for i, s in enumerate(states):
        if s in seen:
            yield ("states", i), s, "state declared twice", "duplicate_state"
        seen.add(s)
    if spec.initial not in seen:
        yield ("initial",), spec.initial, "initial state is not declared in states", "unknown_state"
    for i, f in enumerate(spec.final):
        if f not in seen:
            yield ("final", i), f, "final state is not declared in states", "unknown_state"
    events = set(spec.events)
    yield from _check_transition_names(spec, seen, events)
    yield from _check_timer_names(spec, seen, events)
    for name in spec.context:
        if name in RESERVED_FIELDS:
            yield ("context", name), name, "reserved field: owned by the engine", "reserved_field"


def _check_transition_names(spec: MachineSpec, seen: set[str], events: set[str]) -> Iterator[Raw]:
    """Each transition's sources, target, route targets and event are declared."""
    for i, t in enumerate(spec.transitions):
        for s in t.sources():
            if s != WILDCARD and s not in seen:
                yield (
                    ("transitions", i, "source"),
                    s,
                    "source state is not declared",
                    "unknown_state",
                )
        if t.target is not None and t.target not in seen:
            yield (
                ("transitions", i, "target"),
                t.target,
                "target state does not exist",
                "unknown_target",
            )
        for outcome, target in (t.routes or {}).items():
            if target not in seen:
                yield (
                    ("transitions", i, "routes", outcome),
                    target,
                    f"route {outcome!r} targets a state that does not exist",
                    "unknown_target",
                )
        if t.event not in events:
            yield (
                ("transitions", i, "event"),
                t.event,
                "event is not declared in events",
                "unknown_event",
            )


def _check_timer_names(spec: MachineSpec, seen: set[str], events: set[str]) -> Iterator[Raw]:
    """Each timer's state and event are declared, and a delay by name names a field."""
    for i, tm in enumerate(spec.timers):
        if tm.state not in seen:
            yield ("timers", i, "state"), tm.state, "timer state is not declared", "unknown_state"
        if tm.event not in events:
            yield (
                ("timers", i, "event"),
                tm.event,
                "timer event is not declared in events",
                "unknown_event",
            )
        if isinstance(tm.after_ms, str) and tm.after_ms not in spec.context:
            yield (
                ("timers", i, "after_ms"),
                tm.after_ms,
                "timer delay names a context field that is not declared",
                "unknown_field",
            )


def _check_graph(spec: MachineSpec) -> Iterator[Raw]:
    states = spec.state_names()
    final = set(spec.final)
    out: dict[str, set[str]] = defaultdict(set)
    for t in spec.transitions:
        for s in expand_sources(spec, t.sources()):
            target = t.target_from(s)
            out[s].update([target] if target else (t.routes or {}).values())
    reach, todo = {spec.initial}, deque([spec.initial])
    while todo:
        for nxt in out[todo.popleft()]:
            if nxt not in reach:
                reach.add(nxt)
                todo.append(nxt)
    for i, s in enumerate(states):
        if s not in reach:
            yield (
                ("states", i),
                s,
                f"unreachable from the initial state {spec.initial!r}",
                "unreachable",
            )
        if s not in final and not out[s]:
            yield ("states", i), s, "non-final state with no way out", "dead_end"
    for i, t in enumerate(spec.transitions):
        for s in t.sources():
            if s in final:
                yield (
                    ("transitions", i, "source"),
                    s,
                    "final state has an outgoing transition",
                    "final_exit",
                )


def _check_exclusive(spec: MachineSpec) -> Iterator[Raw]:
    rows: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, t in enumerate(spec.transitions):
        for s in expand_sources(spec, t.sources()):
            rows[(s, t.event)].append(i)
    for (state, event), idx in rows.items():
        if len(idx) < 2:
            continue
        explicit = [i for i in idx if WILDCARD not in spec.transitions[i].sources()]
        if explicit and len(explicit) < len(idx):
            # An explicit row for this state overrides the wildcard: not a conflict.
            idx = explicit
            if len(idx) < 2:
                continue
        labels: dict[str, int] = {}
        for pos, i in enumerate(idx):
            g = spec.transitions[i].guard
            label = g.label() if g else "<none>"
            item = f"({state}, {event})"
            if g is None and pos != len(idx) - 1:
                yield (
                    ("transitions", i),
                    item,
                    "unguarded transition before others for the same state and event: "
                    "it would shadow them (put the fallback last)",
                    "not_exclusive",
                )
            elif label in labels:
                yield (
                    ("transitions", i),
                    item,
                    f"two transitions with the same guard {label!r} are not exclusive "
                    f"(see transition {labels[label]})",
                    "not_exclusive",
                )
            labels[label] = i


def _bind_one(
    registry: Registry, kind: str, ref: CallRef, path: tuple[Any, ...], bound: Bound
) -> Iterator[Raw]:
    label = ref.label()
    if (kind, label) in bound:
        return
    entry = registry.entries.get(ref.name)
    if entry is None:
        yield path, ref.name, f"unknown {kind}: not in the registry", f"unknown_{kind}"
        return
    if entry.kind != kind:
        yield path, ref.name, f"is a {entry.kind}, used as a {kind}", f"unknown_{kind}"
        return
    if entry.factory:
        try:
            bound[(kind, label)] = entry.fn(**ref.args)
        except TypeError as exc:
            yield path, label, f"bad arguments: {exc}", "bad_args"
    elif ref.args:
        yield path, label, f"{kind} {ref.name!r} takes no arguments", "bad_args"
    else:
        bound[(kind, label)] = entry.fn


def _bind(spec: MachineSpec, registry: Registry, bound: Bound) -> Iterator[Raw]:
    for i, st in enumerate(spec.states):
        for j, a in enumerate(st.entry):
            yield from _bind_one(registry, "action", a, ("states", i, "entry", j), bound)
        for j, a in enumerate(st.exit):
            yield from _bind_one(registry, "action", a, ("states", i, "exit", j), bound)
    for i, t in enumerate(spec.transitions):
        if t.guard is not None:
            yield from _bind_one(registry, "guard", t.guard, ("transitions", i, "guard"), bound)
        for j, a in enumerate(t.actions):
            yield from _bind_one(registry, "action", a, ("transitions", i, "actions", j), bound)
        if t.router is not None:
            yield from _bind_one(registry, "router", t.router, ("transitions", i, "router"), bound)
            yield from _check_routes(spec, registry, i)


def _check_routes(spec: MachineSpec, registry: Registry, i: int) -> Iterator[Raw]:
    t = spec.transitions[i]
    assert t.router is not None and t.routes is not None
    keys = set(t.routes)
    declared: list[tuple[str, set[str]]] = []
    if t.router.name in spec.routers:
        declared.append(("the table", set(spec.routers[t.router.name].outcomes)))
    entry = registry.entries.get(t.router.name)
    if entry is not None and entry.outcomes:
        declared.append(("the registry", set(entry.outcomes)))
    if not declared:
        yield (
            ("transitions", i, "router"),
            t.router.name,
            "router declares no outcomes (declare them under routers: or in the registry)",
            "router_outcomes",
        )
    for where, outcomes in declared:
        missing, extra = sorted(outcomes - keys), sorted(keys - outcomes)
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"outcomes missing from the route map: {', '.join(missing)}")
            if extra:
                parts.append(f"routes for outcomes the router never returns: {', '.join(extra)}")
            yield (
                ("transitions", i, "routes"),
                t.router.name,
                f"router outcomes declared in {where} do not equal the route map's keys: "
                + "; ".join(parts),
                "router_outcomes",
            )


CHECKS = (_check_names, _check_graph, _check_exclusive)


def check(
    spec: MachineSpec, registry: Registry, source: str, line_of: LineOf | None = None
) -> tuple[list[Finding], Bound]:
    """All findings for `spec`, and the registry callables bound for compilation."""
    raw: list[Raw] = []
    for fn in CHECKS:
        raw.extend(fn(spec))
    bound: Bound = {}
    raw.extend(_bind(spec, registry, bound))
    lines = line_of or (lambda _p: None)
    return [Finding(source, lines(p), item, reason, code) for p, item, reason, code in raw], bound
