"""Effects the firmware's tables ask the firmware core to carry out.

The tables decide *what* happens (which answer, which event, which other machine to
poke); the core (`firmware_sim.core`) only executes these values. Keeping them as frozen
data means a step's effects can be compared, logged and replayed like everything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goosectl.controller.engine.effects import Effect


@dataclass(frozen=True, slots=True)
class Respond(Effect):
    """Answer the command being executed: an ACK `result` or a NACK `reason` (+ `detail`).

    Exactly one of `result` / `reason` is set. The core turns it into an ACK (with the
    status snapshot) or a NACK frame, stores it in the dedup window and sends it.
    """

    result: int | None = None
    reason: int | None = None
    detail: int = 0


@dataclass(frozen=True, slots=True)
class Emit(Effect):
    """Queue an unsolicited event: `kind` is a `protocols.serial.messages` class name,
    `fields` its body (the event queue machine assigns the seq)."""

    kind: str
    fields: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Signal(Effect):
    """Deliver `event` to another machine of the board (e.g. the breaker tells the spring
    to discharge). Delivered after the current step, in order."""

    target: str
    event: str
    payload: Any = None


@dataclass(frozen=True, slots=True)
class AfterAnswer(Effect):
    """Deliver `event` to machine `target` once the answer to the current command has been
    built: what that answer must still report is changed after it (READ_STATUS clears
    EVENT_OVERFLOW, yet its own ACK shows the flag: SPEC 6.3)."""

    target: str
    event: str


@dataclass(frozen=True, slots=True)
class Transmit(Effect):
    """Put these exact bytes (a whole frame) on the UART."""

    frame: bytes


@dataclass(frozen=True, slots=True)
class Execute(Effect):
    """The command handler accepted a command as new: run it on the board."""

    command: Any  # a protocols.serial.messages command Message


@dataclass(frozen=True, slots=True)
class Operated(Effect):
    """The mechanism really moved (coil energised and contacts travelled): counted by the
    core so tests can prove at-most-once actuation from the device's own books."""

    direction: str  # "open" | "close"


@dataclass(frozen=True, slots=True)
class Reboot(Effect):
    """Restart the board once the current answer has been sent (RESET mode REBOOT)."""

    cause: int
