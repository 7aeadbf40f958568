"""What the bay logic asks of the controller: device commands, GOOSE publications, alarms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goosectl.controller.engine.effects import Effect


@dataclass(frozen=True, slots=True)
class DeviceCommand(Effect):
    """Send `command` ("trip", "close") to the breaker over the serial link."""

    command: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PublishTopic(Effect):
    """Publish a new state of every data set configured for `topic` (trip_ack, position,
    bf_trip, alarm ...), its members taken from the bay's context at this moment."""

    topic: str


@dataclass(frozen=True, slots=True)
class InputChanged(Effect):
    """An input of the bay logic became valid or invalid (or invalid for another reason).
    `value` is what acts now: the member's value while `valid`, the declared fail-safe value
    otherwise;
    `previous` is what acted before; `event` is the bay event the input feeds.
    `consequence` says what it means for the bay."""

    input: str
    stream: str
    event: str
    valid: bool
    value: Any
    previous: Any
    reason: str
    consequence: str


@dataclass(frozen=True, slots=True)
class ModeChanged(Effect):
    """The controller's behaviour mode (on, test, test-blocked, off) or simulation mode
    changed; `origin` says who asked (config, operator, command line)."""

    mode: str
    simulation: bool
    origin: str


@dataclass(frozen=True, slots=True)
class CommandWithheld(Effect):
    """The logic asked for a device command that the mode keeps from the device."""

    command: str
    reason: str
    mode: str
