"""What the bay logic asks of the controller: device commands, GOOSE publications, alarms."""

from __future__ import annotations

from dataclasses import dataclass

from controller.engine.effects import Effect


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
class Alarm(Effect):
    """Something an operator must see: raised (active) or cleared."""

    name: str
    active: bool
    detail: str = ""
