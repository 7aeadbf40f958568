"""Several engine machines on one timer heap, talking to each other, effects by type.

For a group of small tables that send each other events (the device link's link and
command machines; the simulated board's breaker, spring, io, commands and events), each
effect type goes to one handler, and events sent while a step's effects are handled are
queued and delivered first-in first-out after it, so one input runs to completion
deterministically: same inputs, same times -> same outputs. (`Runner` is the simpler
sibling for independent machines with one effect sink and a journal.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, cast

from controller.engine.effects import CancelTimer, Effect, StartTimer
from controller.engine.machine import Machine
from controller.engine.timers import TimerHeap

#: (machine, effect, now_ns); a handler is keyed by its effect's exact type and gets only
#: that type, which a dict cannot say: the effect is typed Any here
Handler = Callable[[str, Any, int], None]


class Bus:
    """Dispatch events to named machines; hand non-timer effects to `handlers` by type."""

    def __init__(self, handlers: dict[type[Effect], Handler]) -> None:
        self.handlers = handlers
        self.timers = TimerHeap()
        self.machines: dict[str, Machine] = {}
        self._queue: deque[tuple[str, str, Any]] = deque()
        self._busy = False

    def start(self, name: str, machine: Machine, now_ns: int) -> None:
        self.machines[name] = machine
        self._effects(name, machine.start(now_ns).effects, now_ns)

    def send(self, name: str, event: str, now_ns: int, payload: Any = None) -> None:
        """Deliver `event`; if called from a handler it runs after the current step."""
        self._queue.append((name, event, payload))
        if not self._busy:
            self._drain(now_ns)

    def advance(self, now_ns: int) -> None:
        """Fire every timer due by `now_ns`, each at its own deadline, in arming order."""
        for due in self.timers.pop_due(now_ns):
            self.send(due.machine, due.event, due.deadline_ns, due.payload)

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def _drain(self, now_ns: int) -> None:
        self._busy = True
        try:
            while self._queue:
                name, event, payload = self._queue.popleft()
                step = self.machines[name].dispatch(event, now_ns, payload)
                self._effects(name, step.effects, now_ns)
        finally:
            self._busy = False
            self._queue.clear()

    def _effects(self, name: str, effects: list[Effect], now_ns: int) -> None:
        for e in effects:
            t = type(e)
            if t is StartTimer:  # exact types (a dict of handlers is keyed the same way)
                st = cast(StartTimer, e)
                self.timers.arm(name, st.name, now_ns + st.after_ns, st.event, st.payload)
            elif t is CancelTimer:
                self.timers.cancel(name, cast(CancelTimer, e).name)
            else:
                handler = self.handlers.get(t)
                if handler is not None:
                    handler(name, e, now_ns)
