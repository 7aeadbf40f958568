"""The compiled form of a table: what dispatch runs on.

Compilation turns the validated spec into ``{state: {event: (Row, ...)}}`` with every
callable bound, every constant effect (timer start/cancel) pre-built and every journal
record tuple pre-made, so a transition is a dict lookup and a few calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goosectl.controller.engine import builtins
from goosectl.controller.engine.context import REDUCERS, ReducerFn
from goosectl.controller.engine.effects import CancelTimer, StartTimer
from goosectl.controller.engine.findings import Finding, TableError
from goosectl.controller.engine.loader import DEFAULT_LIMITS, LineOf, LoaderLimits, load_spec
from goosectl.controller.engine.names import TableNames, check_names
from goosectl.controller.engine.registry import (
    Action,
    Guard,
    Registry,
    Router,
    load_registry_module,
)
from goosectl.controller.engine.spec import MachineSpec, TimerSpec, TransitionSpec
from goosectl.controller.engine.validate import Bound, check, expand_sources

if TYPE_CHECKING:
    from goosectl.controller.engine.machine import Machine

NS_PER_MS = 1_000_000

#: A timer whose delay is a context field: (timer name, field, event).
DynTimer = tuple[str, str, str]


class Row:
    """One compiled transition (for a routed row: the router plus one Row per outcome).

    A routed row carries index, source, event, guard, negate, router, router_name and
    routes; its outcome's Row carries the rest. Dispatch reads the transition fields only
    after the router picked that Row, so they are typed as a plain row has them (a routed
    row leaves them None) and `routes` as a routed row has it."""

    __slots__ = (
        "actions",
        "calls",
        "dyn_timers",
        "enter",
        "event",
        "exit",
        "guard",
        "index",
        "internal",
        "negate",
        "record",
        "router",
        "router_name",
        "routes",
        "source",
        "start_timers",
        "stop_timers",
        "target",
    )

    index: int
    source: str
    event: str
    guard: Guard | None
    negate: bool
    router: Router | None
    router_name: str | None
    routes: dict[str, Row]
    target: str
    internal: bool
    actions: tuple[Action, ...]
    exit: tuple[Action, ...]
    enter: tuple[Action, ...]
    calls: tuple[Action, ...]  # exit, actions, enter: what dispatch runs, in order
    stop_timers: tuple[CancelTimer, ...]
    start_timers: tuple[StartTimer, ...]
    dyn_timers: tuple[DynTimer, ...]
    record: tuple[str, str, str]  # (source, event, target) for Step.transitions

    def __init__(self, **kw: Any) -> None:
        for k in self.__slots__:
            setattr(self, k, kw.get(k))


class Table:
    """A validated, compiled machine description, shared by all its instances."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Table:
        """Immutable: a copied machine shares its table (a run ahead, `logic/reflex.py`)."""
        return self

    def __init__(self, spec: MachineSpec, bound: Bound, source: str) -> None:
        self.spec = spec
        self.name = spec.name
        self.version = spec.version
        self.source = source
        self.initial = spec.initial
        self.final = frozenset(spec.final)
        self.ignore_unhandled = spec.on_unhandled == "ignore"
        self.reducers: dict[str, ReducerFn] = {
            k: REDUCERS[f.reducer] for k, f in spec.context.items()
        }
        #: fields written by plain replacement (`apply_updates` merges those in one go)
        self.plain = frozenset(k for k, f in spec.context.items() if f.reducer == "replace")
        self._bound = bound
        self._timers_by_state: dict[str, list[TimerSpec]] = {}
        for tm in spec.timers:
            self._timers_by_state.setdefault(tm.state, []).append(tm)
        states = {s.name: s for s in spec.states}
        self.entry = {
            n: tuple(bound[("action", a.label())] for a in s.entry) for n, s in states.items()
        }
        self.exit = {
            n: tuple(bound[("action", a.label())] for a in s.exit) for n, s in states.items()
        }
        self.rows: dict[str, dict[str, tuple[Row, ...]]] = {n: {} for n in states}
        for index, t in enumerate(spec.transitions):
            for src in self._sources(t):
                row = self._compile(index, t, src)
                self.rows[src][t.event] = (*self.rows[src].get(t.event, ()), row)
        self._order_wildcards()

    def _sources(self, t: TransitionSpec) -> list[str]:
        return expand_sources(self.spec, t.sources())

    def _order_wildcards(self) -> None:
        """An explicit row for a state wins over a `*` row for the same event."""
        wild = {i for i, t in enumerate(self.spec.transitions) if "*" in t.sources()}
        for events in self.rows.values():
            for ev, rows in events.items():
                explicit = tuple(r for r in rows if r.index not in wild)
                if explicit and len(explicit) < len(rows):
                    events[ev] = explicit

    def timer_effects(
        self, state: str
    ) -> tuple[tuple[StartTimer, ...], tuple[DynTimer, ...], tuple[CancelTimer, ...]]:
        """(pre-built starts, dynamic (name, field, event) starts, cancels) for a state."""
        starts: list[StartTimer] = []
        dyn: list[DynTimer] = []
        stops: list[CancelTimer] = []
        for tm in self._timers_by_state.get(state, ()):
            name = tm.timer_name()
            stops.append(CancelTimer(name))
            if isinstance(tm.after_ms, str):
                dyn.append((name, tm.after_ms, tm.event))
            else:
                starts.append(StartTimer(name, int(tm.after_ms * NS_PER_MS), tm.event))
        return tuple(starts), tuple(dyn), tuple(stops)

    def _compile(
        self, index: int, t: TransitionSpec, source: str, target: str | None = None
    ) -> Row:
        b = self._bound
        if t.router is not None and target is None:
            routes = {
                outcome: self._compile(index, t, source, dest)
                for outcome, dest in (t.routes or {}).items()
            }
            first = next(iter(routes.values()))
            return Row(
                index=index,
                source=source,
                event=t.event,
                guard=first.guard,
                negate=first.negate,
                router=b[("router", t.router.label())],
                router_name=t.router.name,
                routes=routes,
            )
        target = target or t.target_from(source)
        assert target is not None
        internal = t.internal and target == source
        starts, dyn, _ = self.timer_effects(target)
        _, _, stops = self.timer_effects(source)
        row = Row(
            index=index,
            source=source,
            event=t.event,
            target=target,
            guard=b[("guard", t.guard.label())] if t.guard else None,
            negate=bool(t.guard and t.guard.negate),
            actions=tuple(b[("action", a.label())] for a in t.actions),
            internal=internal,
            exit=() if internal else self.exit[source],
            enter=() if internal else self.entry[target],
            stop_timers=() if internal else stops,
            start_timers=() if internal else starts,
            dyn_timers=() if internal else dyn,
            record=(source, t.event, target),
        )
        row.calls = (*row.exit, *row.actions, *row.enter)
        return row

    # -- construction ---------------------------------------------------------------

    @classmethod
    def from_spec(
        cls,
        spec: MachineSpec,
        registries: Iterable[Registry] = (),
        source: str | None = None,
        line_of: LineOf | None = None,
        *,
        registry_path: Sequence[str | Path] = (),
        near: str | Path | None = None,
        names: Iterable[type[TableNames]] = (),
    ) -> Table:
        """Validate and compile; raises TableError listing every finding.

        `near` is the folder of the table file and `registry_path` the folders the user
        allowed code from (see `load_registry_module`): what the `registry:` may import.
        `names`: the `States`/`Fields` the code reads this table by, each checked against
        it (`controller.engine.names`)."""
        src = source or f"<table {spec.name}>"
        registry, findings = resolve_registry(
            spec, registries, src, registry_path=registry_path, near=near, line_of=line_of
        )
        more, bound = check(spec, registry, src, line_of)
        findings.extend(more)
        findings.extend(check_names(spec, names, src))
        if findings:
            raise TableError(findings)
        return cls(spec, bound, src)

    @classmethod
    def load(
        cls,
        path: str | Path,
        registries: Iterable[Registry] = (),
        *,
        registry_path: Sequence[str | Path] = (),
        limits: LoaderLimits = DEFAULT_LIMITS,
        names: Iterable[type[TableNames]] = (),
    ) -> Table:
        spec, line_of = load_spec(path, limits)
        return cls.from_spec(
            spec,
            registries,
            str(path),
            line_of,
            registry_path=registry_path,
            near=Path(path).parent,
            names=names,
        )

    @classmethod
    def shared(cls, path: str | Path) -> Table:
        """`load(path)` with the default registries and limits, parsed once per content of
        the file: a `Table` is immutable, so every bay built from the same file can share
        one (a bay's logic table is a config's file; a process that builds many bays, a
        fleet replay or the test suite, parses it once). A file whose bytes changed is
        parsed again; one that cannot be read gets `load`'s own error."""
        try:
            text = Path(path).read_bytes()
        except OSError:
            return cls.load(path)
        return _shared(str(path), text)

    def new(self, machine_id: str | None = None, **context: Any) -> Machine:
        from goosectl.controller.engine.machine import Machine  # machine.py imports this module

        return Machine(self, machine_id or self.name, context)


@lru_cache(maxsize=32)
def _shared(path: str, _text: bytes) -> Table:
    """The table of `path` as it read `_text` (the key: a changed file is a new entry)."""
    return Table.load(path)


def resolve_registry(
    spec: MachineSpec,
    extra: Iterable[Registry],
    source: str,
    *,
    registry_path: Sequence[str | Path] = (),
    near: str | Path | None = None,
    line_of: LineOf | None = None,
) -> tuple[Registry, list[Finding]]:
    """Builtins, then the table's own `registry:` modules, then registries given in Python."""
    findings: list[Finding] = []
    modules: list[Registry] = []
    line = line_of(("registry",)) if line_of is not None else None
    for name in spec.registry:
        try:
            modules.append(load_registry_module(name, registry_path, near))
        except LookupError as exc:
            findings.append(Finding(source, line, name, str(exc), "registry"))
    return builtins.REGISTRY.merged(*modules, *extra), findings


def findings_for(path: str | Path, registries: Iterable[Registry] = ()) -> list[Finding]:
    """Every finding for a table file (empty when it is valid)."""
    try:
        Table.load(path, registries)
    except TableError as exc:
        return exc.findings
    return []
