"""Effects: what a machine asks the shell to do. The engine only describes; the shell acts.

Effects are frozen, slotted dataclasses so a table can pre-build the ones that never change
(timer starts and cancels) once at compile time and hand out the same object on every
transition: nothing to allocate on the hot path. Domain effects (frames, serial commands)
subclass `Effect` in their own packages; the engine does not know them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Effect:
    """Base of every effect; `kind` names it in journals and digests."""

    @property
    def kind(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, slots=True)
class StartTimer(Effect):
    """Arm timer `name` of this machine to deliver `event` after `after_ns`.

    The delay is relative so the effect is time-independent and can be pre-built; the shell
    adds it to the dispatch time. Re-arming a running timer replaces it.
    """

    name: str
    after_ns: int
    event: str
    payload: Any = None


@dataclass(frozen=True, slots=True)
class CancelTimer(Effect):
    """Disarm timer `name` of this machine; cancelling an idle timer is not an error."""

    name: str


@dataclass(frozen=True, slots=True)
class Notify(Effect):
    """Tell the outside world something happened (status views, logs, the operator)."""

    topic: str
    data: Any = None


@dataclass(frozen=True, slots=True)
class Raise:
    """Returned by an action: queue `event` on the same machine, run before dispatch returns."""

    event: str
    payload: Any = None


#: Effects the scheduler executes itself (on its timer heap); anything else goes to the
#: handlers of the scheduler's owner.
TIMER_EFFECTS = frozenset({StartTimer, CancelTimer})


@dataclass(frozen=True, slots=True)
class Alarm(Effect):
    """Something an operator must see: raised (active) or cleared. Any layer raises one
    (the bay logic, a GOOSE publisher over its rate limit), the shell shows it."""

    name: str
    active: bool
    detail: str = ""
