"""The one scheduler: every group of machines in the product runs on it.

A `Scheduler` holds machines by name, one `TimerHeap`, a first-in first-out queue of
internal events, a table of effect handlers keyed by the effect's exact type, an optional
journal, and one runaway `Guard`. The GOOSE hub and the bay (on the hub's scheduler), the
device link, the simulated board and the agent's sessions each own one, so machines run
until quiet by one ordering rule, written here. The loops that join a scheduler to what
is not its machines (the bay settling its reports and its link's events, the agent host
with its tools, the virtual wire between two endpoints) keep their own order but count
on the same guard: whatever goes round without settling ends in one error,
`RunawayError`, that names the machines and events in the loop.

The ordering rule, for one input from outside (`feed`, `send` or `advance` called while
nothing runs):

1. `feed` fires the timers due by its time first, each at its own deadline (`advance`
   does only that); `send` does not look at the clock.
2. The machine dispatches the event (run to completion, see `machine.Machine.dispatch`).
3. Its step is handled: `on_step` hears of it if it took a transition, its timer effects
   are applied, then every other effect goes, in order, to the handler of its exact type
   (or to `default`), then the journal records the step.
4. Events that handlers `send` meanwhile wait in the queue and are delivered, first in
   first out, once the step is handled, each handled the same way; the input returns
   when the queue is empty. A handler that needs a step's result may `feed` instead: that
   machine dispatches at once, nested, and its own sends join the same queue.

The scheduler is pure: the caller passes every time (monotonic live, capture or virtual
time in replay), so the same inputs at the same times give the same steps and journal.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from goosectl.controller.engine.effects import TIMER_EFFECTS, Effect
from goosectl.controller.engine.journal import Journal
from goosectl.controller.engine.machine import Machine, RunawayError, Step
from goosectl.controller.engine.table import Table
from goosectl.controller.engine.timers import TimerHeap

#: (machine, effect, now_ns); a handler is keyed by its effect's exact type and gets only
#: that type, which a dict cannot say: the effect is typed Any here
Handler = Callable[[str, Any, int], None]
#: (machine, step, now_ns): told of every step that took a transition (timelines)
StepHook = Callable[[Machine, Step, int], None]

#: Steps one input may cause before the guard calls it a loop. Far above any real input:
#: the largest are a timer storm (every stream of a full bank losing its TAL in one
#: `advance`, a handful of steps each) and a restart starting every machine.
RUNAWAY_STEPS = 200_000
#: How deep one input's calls may nest (a handler feeding a machine whose handler feeds
#: ...; the bay settling what its own step caused). Real inputs nest a few deep; a loop
#: that recurses is stopped here, well before Python's recursion limit.
RUNAWAY_NEST = 48
#: how many of the last steps a `RunawayError` names
TRAIL = 12


class Guard:
    """Counts the steps since the last input from outside; past `limit`, or with calls
    nested deeper than `nest`, it raises `RunawayError`.

    `enter`/`exit` bracket an input (nested brackets belong to the outermost one, which
    resets the count); `step` counts one step. Counting is one addition and one compare;
    only the last `TRAIL` steps before the error are remembered, for its message."""

    __slots__ = ("_limit", "count", "depth", "nest", "trail", "watch")

    def __init__(self, limit: int = RUNAWAY_STEPS, nest: int = RUNAWAY_NEST) -> None:
        self.count = 0
        self.depth = 0
        self.nest = nest
        self.trail: deque[tuple[str, str]] = deque(maxlen=TRAIL)
        self._limit = self.watch = 0
        self.limit = limit

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        if value < 1:
            raise ValueError(f"a runaway limit must be >= 1, got {value}")
        self._limit = value
        self.watch = value - TRAIL  # from here on, steps are remembered

    def enter(self) -> None:
        d = self.depth
        if not d:
            self.count = 0  # the trail needs no reset: an error overwrites all of it
        elif d >= self.nest:
            self.deep()
        self.depth = d + 1

    def exit(self) -> None:
        self.depth -= 1

    def step(self, who: str, what: str) -> None:
        self.count += 1
        if self.count > self.watch:
            self.near(who, what)

    def deep(self) -> None:
        """Calls nested past `nest`: a loop that recurses. The next `TRAIL` steps are
        remembered (the count jumps to where that starts), then the error."""
        self.count = max(self.count, self.watch)

    def near(self, who: str, what: str) -> None:
        """A step close to the limit: remembered; past the limit, the error."""
        self.trail.append((who, what))
        if self.count > self._limit:
            why = (
                f"calls nested {self.depth} deep"
                if self.depth > self.nest
                else f"more than {self._limit} steps"
            )
            raise RunawayError(why, self.trail)


class Scheduler:
    """Machines by name on one timer heap; effects to handlers by type; see the module."""

    def __init__(
        self,
        journal: Journal | None = None,
        handlers: Mapping[type[Effect], Handler] | None = None,
        *,
        default: Handler | None = None,
        limit: int = RUNAWAY_STEPS,
    ) -> None:
        self.machines: dict[str, Machine] = {}
        self.timers = TimerHeap()
        self.journal = journal
        if journal is not None:
            journal.timer_source = self.timers.armed
        #: told of every step that took a transition, timers' included (timelines)
        self.on_step: StepHook | None = None
        self.guard = Guard(limit)
        #: the input position (pcap index, control sequence) the journal rows refer to
        self.last_input: int | None = None
        self._routes: dict[type, Handler | None] = dict.fromkeys(TIMER_EFFECTS)
        self._default: Handler | None = None
        self.route(handlers or {}, default)
        self._queue: deque[tuple[str, str, int, Any]] = deque()
        self._depth = 0

    def route(
        self, handlers: Mapping[type[Effect], Handler], default: Handler | None = None
    ) -> None:
        """Add handlers (exact effect type -> handler); `default` takes every other
        non-timer effect. Timer effects are the scheduler's own."""
        for t, h in handlers.items():
            if t in TIMER_EFFECTS:
                raise ValueError(f"{t.__name__} is the scheduler's own effect")
            self._routes[t] = h
        if default is not None:
            self._default = default

    # -- machines ---------------------------------------------------------------------

    def start(self, machine: Machine, now_ns: int) -> Step:
        """Add `machine` under its id and enter its initial state."""
        self.machines[machine.id] = machine
        self._enter()
        try:
            self.guard.step(machine.id, "__start__")
            step = machine.start(now_ns)
            self._handle(machine, step, now_ns)
            if self._queue and self._depth == 1:
                self._drain()
        finally:
            self._exit()
        return step

    def resume_or_start(
        self, table: Table, machine_id: str, now_ns: int, **context: Any
    ) -> tuple[Machine, int | None]:
        """Restore a machine and its armed timers from the journal's checkpoint, or start it
        fresh. Returns (machine, the last input position the checkpoint covers or None)."""
        cp = self.journal.checkpoint(machine_id) if self.journal else None
        if cp is None:
            machine = table.new(machine_id, **context)
            self.start(machine, now_ns)
            return machine, None
        machine = Machine.restore(table, cp["snapshot"])
        self.machines[machine_id] = machine
        for t in cp["timers"]:
            self.timers.arm(
                machine_id, t["name"], t["deadline_ns"], t["event"], t["payload"], seq=t["seq"]
            )
        self.last_input = cp["input"]
        return machine, cp["input"]

    def forget(self, machine_id: str) -> None:
        """Drop a machine and its timers (a bounded table evicting an idle member); its
        journal rows stay, it simply receives nothing more."""
        self.machines.pop(machine_id, None)
        self.timers.cancel_machine(machine_id)

    # -- inputs -----------------------------------------------------------------------

    def feed(
        self,
        machine_id: str,
        event: str,
        now_ns: int,
        payload: Any = None,
        input_pos: int | None = None,
    ) -> Step:
        """Deliver `event` now, after firing the timers due before it; returns its step.
        Events the step's handlers send are delivered before an outside input returns."""
        # the guard's bracket and count inlined (`_enter`, `Guard.step`): this is the hot path
        g = self.guard
        d = g.depth
        if not d:
            g.count = 0
        elif d >= g.nest:
            g.deep()
        g.depth = d + 1
        self._depth += 1
        try:
            if self.timers.any_due(now_ns):
                self._fire(now_ns)
            if input_pos is not None:
                self.last_input = input_pos
            machine = self.machines[machine_id]
            g.count += 1
            if g.count > g.watch:
                g.near(machine_id, event)
            step = machine.dispatch(event, now_ns, payload)
            self._handle(machine, step, now_ns)
            if self._queue and self._depth == 1:
                self._drain()
        except BaseException:
            self._exit()
            raise
        g.depth -= 1
        self._depth -= 1
        return step

    def send(self, machine_id: str, event: str, now_ns: int, payload: Any = None) -> None:
        """Deliver `event`; from a handler it waits until the current step is handled."""
        self._queue.append((machine_id, event, now_ns, payload))
        if not self._depth:
            self._enter()
            try:
                self._drain()
            finally:
                self._exit()

    def advance(self, now_ns: int) -> list[tuple[Machine, Step]]:
        """Fire every timer due by `now_ns`, each at its own deadline, in arming order;
        each one's sent events are delivered before the next timer fires."""
        self._enter()
        try:
            return self._fire(now_ns)
        finally:
            self._exit()

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    # -- the loop ---------------------------------------------------------------------

    def _enter(self) -> None:
        self._depth += 1
        self.guard.enter()

    def _exit(self) -> None:
        self.guard.exit()
        self._depth -= 1
        if not self._depth:
            self._queue.clear()  # left over only when a step raised

    def _fire(self, now_ns: int) -> list[tuple[Machine, Step]]:
        fired = []
        machines, g = self.machines, self.guard
        for due in self.timers.pop_due(now_ns):
            machine = machines.get(due.machine)
            if machine is None:
                continue
            g.count += 1
            if g.count > g.watch:
                g.near(due.machine, due.event)
            step = machine.dispatch(due.event, due.deadline_ns, due.payload)
            self._handle(machine, step, due.deadline_ns)
            fired.append((machine, step))
            if self._queue and self._depth == 1:
                self._drain()
        return fired

    def _drain(self) -> None:
        queue, machines, g = self._queue, self.machines, self.guard
        while queue:
            machine_id, event, now_ns, payload = queue.popleft()
            machine = machines[machine_id]
            g.count += 1
            if g.count > g.watch:
                g.near(machine_id, event)
            self._handle(machine, machine.dispatch(event, now_ns, payload), now_ns)

    def _handle(self, machine: Machine, step: Step, now_ns: int) -> None:
        if step.transitions and self.on_step is not None:
            self.on_step(machine, step, now_ns)
        effects = step.effects
        if effects:
            mid = machine.id
            self.timers.apply(mid, effects, now_ns)
            routes, default = self._routes, self._default
            for e in effects:
                handler = routes.get(type(e), default)
                if handler is not None:
                    handler(mid, e, now_ns)
        if self.journal is not None:
            self.journal.record(machine, step, now_ns, self.last_input)
