"""A machine instance and `dispatch`: run to completion, return what happened.

Dispatch works on local copies of state and context and commits them only when the whole
run (the event plus every event its actions raised) succeeded, so a rejected event or a
failing action leaves the machine exactly as it was. The shell gets a `Step`: the
transitions taken (for the journal) and the effects to execute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from copy import deepcopy
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from goosectl.controller.engine.context import (
    ContextError,
    apply_updates,
    initial_context,
    normalise_restored,
)
from goosectl.controller.engine.effects import Effect, Raise, StartTimer
from goosectl.controller.engine.registry import Event

#: `Event(name, payload, time)` without the Python-level `__new__` a NamedTuple has (one
#: interpreted frame per dispatch saved): the tuple built in C, the same object
_event = tuple.__new__

if TYPE_CHECKING:
    from goosectl.controller.engine.table import DynTimer, Row, Table

NS_PER_MS = 1_000_000
#: Events raised by actions within one dispatch; more means the table loops on itself.
MAX_CHAIN = 1000


class EngineError(Exception):
    """The table and its callables disagree at run time (bad router outcome, runaway chain)."""


class RunawayError(EngineError):
    """Machines kept answering each other (or one itself) without settling. Raised by the
    scheduler's guard (`scheduler.Guard`: too many steps for one input, or calls nested
    too deep) and by `dispatch` (a machine raising events at itself past `MAX_CHAIN`).
    `trail` holds the last (machine, event) pairs, `machines` the distinct machines among
    them: the loop."""

    def __init__(self, why: str, trail: Iterable[tuple[str, str]]) -> None:
        self.trail = tuple(trail)
        self.machines = tuple(dict.fromkeys(m for m, _ in self.trail))
        steps = " -> ".join(f"{m}:{e}" for m, e in self.trail)
        super().__init__(
            f"runaway: one input did not settle ({why}); machines in the loop: "
            f"{', '.join(self.machines)}; last steps: {steps}"
        )


class RejectedEvent(EngineError):
    """The current state does not accept the event (table policy `reject`)."""

    def __init__(self, machine: str, state: str, event: str, reason: str) -> None:
        self.machine, self.state, self.event = machine, state, event
        super().__init__(f"{machine}: event {event!r} rejected in state {state!r}: {reason}")


class Step:
    """The result of one dispatch: transitions taken (source, event, target) and effects."""

    __slots__ = ("effects", "ignored", "state", "transitions")

    def __init__(self, state: str) -> None:
        self.transitions: list[tuple[str, str, str]] = []
        self.effects: list[Effect] = []
        self.state = state
        self.ignored = 0

    def __repr__(self) -> str:
        return f"Step(state={self.state!r}, transitions={self.transitions}, effects={self.effects})"


class Machine:
    """One running instance of a `Table`; the only owner of its state and context."""

    __slots__ = (
        "_ctx",
        "_rows",
        "_view",
        "_writer",
        "ctx_fields",
        "id",
        "ignored",
        "started",
        "state",
        "table",
        "transitions_total",
    )

    def __init__(self, table: Table, machine_id: str, context: dict[str, Any]) -> None:
        self.table = table
        self.id = machine_id
        #: who writes the context, for an error (built once, not on every update)
        self._writer = f"{machine_id}: an action"
        self.state = table.initial
        self._rows = table.rows[self.state]
        self._ctx = initial_context(table.spec.context, context)
        self._view = MappingProxyType(self._ctx)
        self.ignored: Counter[str] = Counter()
        self.transitions_total = 0
        self.started = False

    def __deepcopy__(self, memo: dict[int, Any]) -> Machine:
        """A machine of its own (state, context, counters) on the same table: a copy of a
        controller runs ahead of it without touching it (`controller/logic/reflex.py`)."""
        new = object.__new__(Machine)
        memo[id(self)] = new
        for name in Machine.__slots__:
            if name not in ("_view", "table", "_rows") and hasattr(self, name):
                setattr(new, name, deepcopy(getattr(self, name), memo))
        new.table = self.table
        new._rows = self._rows
        new._view = MappingProxyType(new._ctx)
        return new

    @property
    def ctx(self) -> MappingProxyType[str, Any]:
        """Read-only view of the context; it changes only through dispatch."""
        return self._view

    @property
    def done(self) -> bool:
        return self.state in self.table.final

    # -- running ----------------------------------------------------------------------

    def start(self, now_ns: int) -> Step:
        """Enter the initial state: run its entry actions and arm its timers."""
        if self.started:
            raise EngineError(f"{self.id}: already started")
        step = Step(self.state)
        ctx = self._enter_only(self.state, now_ns, step)
        self._commit(self.state, ctx, step)
        self.started = True
        return step

    def dispatch(self, event: str, now_ns: int, payload: Any = None) -> Step:
        """Run `event` to completion at time `now_ns`; see the module docstring."""
        if not self.started:
            raise EngineError(f"{self.id}: dispatch before start()")
        state = self.state
        rows: tuple[Row, ...] | None = self._rows.get(event)
        step = Step(state)
        if rows is None:
            return self._unhandled(state, event, "no transition for this event", step)
        ev = _event(Event, (event, payload, now_ns))
        ctx, view = self._ctx, self._view
        queue: list[Raise] | None = None
        chain = 0
        while True:
            row: Row | None = None
            for r in rows:
                g = r.guard
                if g is None or bool(g(view, ev)) is not r.negate:
                    row = r
                    break
            if row is None:
                if chain == 0:
                    return self._unhandled(state, ev.name, "every guard refused it", step)
                self._ignore(state, ev.name, step, "raised event refused")
            else:
                if row.router is not None:
                    outcome = row.router(view, ev)
                    try:
                        row = row.routes[outcome]
                    except KeyError:
                        raise self._bad_route(row, outcome) from None
                effects = step.effects
                if row.stop_timers:
                    effects.extend(row.stop_timers)
                for fn in row.calls:  # exit, transition actions, entry: in that order
                    res = fn(view, ev)
                    if res is not None:
                        ctx, view, queue = self._apply(res, ctx, view, queue, effects)
                if row.start_timers:
                    effects.extend(row.start_timers)
                if row.dyn_timers:
                    effects.extend(_dynamic_timers(row.dyn_timers, ctx))
                step.transitions.append(row.record)
                state = row.target
            if not queue:
                break
            rows, ev, chain = self._next_raised(queue, state, chain, step, ev)
            if rows is None:
                break
        # commit (inlined: this is the hot path); `view` is already the proxy of `ctx`
        if ctx is not self._ctx:
            self._ctx = ctx
            self._view = view
        if state != self.state:
            self.state = state
            self._rows = self.table.rows[state]
        step.state = state
        self.transitions_total += len(step.transitions)
        return step

    def _next_raised(
        self, queue: list[Raise], state: str, chain: int, step: Step, ev: Event
    ) -> tuple[tuple[Row, ...] | None, Event, int]:
        """The next raised event `state` has rows for, off the front of `queue`: (its rows,
        the event, the chain's length so far); (None, ...) when the queue ran out. One it
        has no rows for is ignored (policy `ignore`, counted) or rejected."""
        while queue:
            chain += 1
            if chain > MAX_CHAIN:
                raise RunawayError(
                    f"{self.id} raised more than {MAX_CHAIN} events in one dispatch",
                    [(self.id, ev.name), *((self.id, r.event) for r in queue[:11])],
                )
            raised = queue.pop(0)
            rows = self.table.rows[state].get(raised.event)
            if rows is not None:
                return rows, _event(Event, (raised.event, raised.payload, ev.time_ns)), chain
            self._ignore(state, raised.event, step, "raised event not accepted")
        return None, ev, chain

    def _ignore(self, state: str, event: str, step: Step, why: str) -> None:
        """A raised event the state does not take: counted under policy `ignore`, else
        rejected (`why`)."""
        if not self.table.ignore_unhandled:
            raise RejectedEvent(self.id, state, event, why)
        step.ignored += 1
        self.ignored[event] += 1

    def _bad_route(self, row: Row, outcome: object) -> EngineError:
        """A router's outcome that its route map lacks: a table defect, named."""
        return EngineError(
            f"{self.id}: router {row.router_name!r} returned {outcome!r}, "
            f"which is not in its route map {sorted(row.routes)}"
        )

    def _apply(
        self,
        result: Any,
        ctx: dict[str, Any],
        view: MappingProxyType[str, Any],
        queue: list[Raise] | None,
        effects: list[Effect],
    ) -> tuple[dict[str, Any], MappingProxyType[str, Any], list[Raise] | None]:
        """Fold one action's result into (context, view, raise queue, effects)."""
        items = result if type(result) is list or type(result) is tuple else (result,)
        for r in items:
            t = type(r)
            if t is dict:
                table = self.table
                ctx = apply_updates(ctx, r, table.reducers, self._writer, table.plain)
                view = MappingProxyType(ctx)
            elif isinstance(r, Effect):
                effects.append(r)
            elif t is Raise:
                if queue is None:
                    queue = []
                queue.append(r)
            elif r is None:
                continue
            elif t is list or t is tuple:
                ctx, view, queue = self._apply(r, ctx, view, queue, effects)
            else:
                raise ContextError(
                    f"{self.id}: an action returned {t.__name__}; expected None, a dict of "
                    "updates, an Effect, a Raise or a list of them"
                )
        return ctx, view, queue

    def _unhandled(self, state: str, event: str, reason: str, step: Step) -> Step:
        if not self.table.ignore_unhandled:
            raise RejectedEvent(self.id, state, event, reason)
        self.ignored[event] += 1
        step.ignored = 1
        return step

    def _commit(self, state: str, ctx: dict[str, Any], step: Step) -> None:
        if ctx is not self._ctx:
            self._ctx = ctx
            self._view = MappingProxyType(ctx)
        if state != self.state:
            self.state = state
            self._rows = self.table.rows[state]
        step.state = state
        self.transitions_total += len(step.transitions)

    def _enter_only(self, state: str, now_ns: int, step: Step) -> dict[str, Any]:
        ev = Event("__enter__", None, now_ns)
        ctx, view = self._ctx, self._view
        queue: list[Raise] | None = None
        for fn in self.table.entry[state]:
            ctx, view, queue = self._apply(fn(view, ev), ctx, view, queue, step.effects)
        if queue:
            raise EngineError(f"{self.id}: entry actions of {state!r} raise events on start")
        starts, dyn, _ = self.table.timer_effects(state)
        step.effects.extend(starts)
        step.effects.extend(_dynamic_timers(dyn, ctx))
        return ctx

    # -- persistence ------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The authoritative state of this machine, JSON-ready."""
        return {
            "machine": self.id,
            "table": self.table.name,
            "version": self.table.version,
            "state": self.state,
            "context": dict(self._ctx),
            "transitions_total": self.transitions_total,
        }

    @classmethod
    def restore(cls, table: Table, snap: dict[str, Any]) -> Machine:
        """Rebuild from a snapshot without running entry actions again.

        Armed timers are not part of a machine: whoever owns the timer heap persists and
        re-arms them (see `scheduler.Scheduler`), or calls `rearm_timers` to start them afresh."""
        if snap.get("table") != table.name:
            raise EngineError(f"snapshot is of table {snap.get('table')!r}, not {table.name!r}")
        if snap["state"] not in table.rows:
            raise EngineError(f"snapshot state {snap['state']!r} is not in table {table.name!r}")
        m = cls(table, snap["machine"], {})
        ctx = normalise_restored(snap["context"], table.spec.context)
        m._ctx, m._view = ctx, MappingProxyType(ctx)
        m.state = snap["state"]
        m._rows = table.rows[m.state]
        m.transitions_total = int(snap.get("transitions_total", 0))
        m.started = True
        return m

    def rearm_timers(self) -> list[StartTimer]:
        """Fresh starts for the current state's timers (after a restore that lost them)."""
        starts, dyn, _ = self.table.timer_effects(self.state)
        return [*starts, *_dynamic_timers(dyn, self._ctx)]


def _dynamic_timers(dyn: tuple[DynTimer, ...], ctx: Mapping[str, Any]) -> list[StartTimer]:
    out = []
    for name, field, event in dyn:
        ms = ctx.get(field)
        if ms is None:
            continue  # no delay configured: the timer is off
        out.append(StartTimer(name, int(ms * NS_PER_MS), event))
    return out
