"""Drive machines on a timer heap with an optional journal: the engine's reference loop.

The runner is pure: the caller passes every time. Live shells call it with monotonic time,
replay and `goosectl table run` with virtual time; either way timers that fall due before
an input fire first, at their own deadlines, in a stable order. Other effects are handed
to `on_effects` for the shell to execute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.engine.journal import Journal
from controller.engine.machine import Machine, Step
from controller.engine.table import Table
from controller.engine.timers import TimerHeap

EffectSink = Callable[[Machine, Step, int], None]


class Runner:
    def __init__(self, journal: Journal | None = None, on_effects: EffectSink | None = None):
        self.journal = journal
        self.on_effects = on_effects
        #: called for every step that took a transition, timers' included (timelines)
        self.on_step: EffectSink | None = None
        self.timers = TimerHeap()
        if journal is not None:
            journal.timer_source = self.timers.armed
        self.machines: dict[str, Machine] = {}
        self.last_input: int | None = None

    def start(self, machine: Machine, now_ns: int) -> Step:
        self.machines[machine.id] = machine
        step = machine.start(now_ns)
        self._after(machine, step, now_ns)
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

    def advance(self, now_ns: int) -> list[tuple[Machine, Step]]:
        """Fire every timer due at or before `now_ns`, each at its own deadline."""
        fired = []
        for due in self.timers.pop_due(now_ns):
            machine = self.machines.get(due.machine)
            if machine is None:
                continue
            step = machine.dispatch(due.event, due.deadline_ns, due.payload)
            self._after(machine, step, due.deadline_ns)
            fired.append((machine, step))
        return fired

    def feed(
        self,
        machine_id: str,
        event: str,
        now_ns: int,
        payload: Any = None,
        input_pos: int | None = None,
    ) -> Step:
        """Deliver an input event after firing the timers due before it."""
        if self.timers.any_due(now_ns):
            self.advance(now_ns)
        machine = self.machines[machine_id]
        if input_pos is not None:
            self.last_input = input_pos
        step = machine.dispatch(event, now_ns, payload)
        self._after(machine, step, now_ns)
        return step

    def _after(self, machine: Machine, step: Step, now_ns: int) -> None:
        if step.transitions and self.on_step is not None:
            self.on_step(machine, step, now_ns)
        if step.effects:
            self.timers.apply(machine.id, step.effects, now_ns)
            if self.on_effects is not None:
                self.on_effects(machine, step, now_ns)
        if self.journal is not None:
            self.journal.record(machine, step, now_ns, self.last_input)
