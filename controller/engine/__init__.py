"""The transition-table engine: tables as data, sans-IO dispatch, timers, journal, layers.

table = Table.load("breaker.yaml")          # validated and compiled, or TableError
m = table.new("bay1")
step = m.start(now_ns)                      # entry actions, timers armed
step = m.dispatch("trip", now_ns, payload)  # run to completion
step.transitions, step.effects              # for the journal, for the shell
"""

from controller.engine.effects import CancelTimer, Effect, Notify, Raise, StartTimer
from controller.engine.findings import Finding, TableError
from controller.engine.journal import Journal
from controller.engine.machine import EngineError, Machine, RejectedEvent, Step
from controller.engine.registry import Event, Registry
from controller.engine.runner import Runner
from controller.engine.spec import MachineSpec
from controller.engine.table import Table
from controller.engine.timers import TimerHeap, VirtualClock

__all__ = [
    "CancelTimer",
    "Effect",
    "EngineError",
    "Event",
    "Finding",
    "Journal",
    "Machine",
    "MachineSpec",
    "Notify",
    "Raise",
    "Registry",
    "RejectedEvent",
    "Runner",
    "StartTimer",
    "Step",
    "Table",
    "TableError",
    "TimerHeap",
    "VirtualClock",
]
