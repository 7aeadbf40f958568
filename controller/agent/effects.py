"""What a session asks of the runtime, and what it tells the operator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goosectl.controller.engine.effects import Effect


@dataclass(frozen=True, slots=True)
class RunTool(Effect):
    """Run step `step` (attempt `attempt`) of `session`; the result comes back as an event.

    `reconcile` is set when a restarted controller resumes a step whose tool was in flight:
    a device command is then re-sent with its recorded sequence number (the device answers
    a repeat from its store) or settled from the device's status, never executed twice."""

    session: str
    step: str
    attempt: int
    tool: str
    args: Any
    reconcile: bool = False
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class CancelTool(Effect):
    session: str
    step: str
    reason: str


@dataclass(frozen=True, slots=True)
class Plan(Effect):
    """The session needs its next step: the service walks the procedure's workflow."""

    session: str
    outcome: str  # "start", an outcome of the last step, or "failed" (take the fallback)


@dataclass(frozen=True, slots=True)
class Respond(Effect):
    """The session's answer to the operator: how it ended and why."""

    session: str
    outcome: str
    text: str
