"""The transition-table engine: tables as data, sans-IO dispatch, timers, journal, layers.

table = Table.load("breaker.yaml")          # validated and compiled, or TableError
m = table.new("bay1")
step = m.start(now_ns)                      # entry actions, timers armed
step = m.dispatch("trip", now_ns, payload)  # run to completion
step.transitions, step.effects              # for the journal, for the shell

sched = Scheduler(journal, {SendFrame: send})  # machines, timers, effects by type, journal
sched.start(m, now_ns); sched.feed("bay1", "trip", now_ns, payload)  # runs until quiet,
                                            # or RunawayError naming the loop
"""

from goosectl.controller.engine.effects import CancelTimer, Effect, Notify, Raise, StartTimer
from goosectl.controller.engine.findings import Finding, TableError
from goosectl.controller.engine.journal import Journal
from goosectl.controller.engine.machine import (
    EngineError,
    Machine,
    RejectedEvent,
    RunawayError,
    Step,
)
from goosectl.controller.engine.registry import Event, Registry
from goosectl.controller.engine.scheduler import Guard, Scheduler
from goosectl.controller.engine.spec import MachineSpec
from goosectl.controller.engine.table import Table
from goosectl.controller.engine.timers import TimerHeap, VirtualClock

__all__ = [
    "CancelTimer",
    "Effect",
    "EngineError",
    "Event",
    "Finding",
    "Guard",
    "Journal",
    "Machine",
    "MachineSpec",
    "Notify",
    "Raise",
    "Registry",
    "RejectedEvent",
    "RunawayError",
    "Scheduler",
    "StartTimer",
    "Step",
    "Table",
    "TableError",
    "TimerHeap",
    "VirtualClock",
]
