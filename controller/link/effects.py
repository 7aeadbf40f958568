"""Effects of the controller's link tables, executed by `LinkCore`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from controller.engine.effects import Effect


@dataclass(frozen=True, slots=True)
class LinkEvent:
    """An outcome the control logic can act on.

    kind: cmd_ok | cmd_failed | operation_complete | operation_failed | position_changed |
    alarm | spring | inputs_changed | device_reset | link_state | protocol_error.
    A command re-issued after a device reset reports `reconciled` in its data.
    `seq`/`command` name the command concerned (if any); `reason` says why it failed;
    `data` carries the details (result, position, operate_ms, state ...).
    """

    kind: str
    seq: int | None = None
    command: str | None = None
    reason: str | None = None
    data: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.data).get(key, default)


@dataclass(frozen=True, slots=True)
class Transmit(Effect):
    """Write these bytes (whole frames) to the port."""

    frame: bytes


@dataclass(frozen=True, slots=True)
class Submit(Effect):
    """Queue a command on the command machine; `tag` is "user", "resync" or "keepalive"."""

    command: str
    fields: tuple[tuple[str, Any], ...] = ()
    tag: str = "user"
    #: re-send under this earlier sequence number (a restarted controller reconciling a
    #: command it had sent): the device answers a repeat from its store, never runs it twice
    seq: int | None = None
    #: the sequence number the caller knows this command by, when it goes on the wire under
    #: a newer one (held through a resync, or re-issued after a device reset): outcomes are
    #: reported under it, so the caller never has to learn a second number
    origin: int | None = None


@dataclass(frozen=True, slots=True)
class Outcome(Effect):
    event: LinkEvent


@dataclass(frozen=True, slots=True)
class Signal(Effect):
    """Deliver `event` to the other link machine after this step."""

    target: str
    event: str
    payload: Any = None


@dataclass(frozen=True, slots=True)
class Reopen(Effect):
    """Ask the shell to close and reopen the port (reconnect)."""


class QueueEntry(NamedTuple):
    """A command on the command machine (queued, or the one pending on the wire).

    `seq` is on the wire; `origin` is the number the caller knows (they differ for a
    command held through a resync or re-issued after a device reset); `fields` rebuild
    `frame` under a new seq."""

    seq: int
    command: str
    tag: str
    frame: bytes
    fields: tuple[tuple[str, Any], ...]
    origin: int


class Response(NamedTuple):
    """What the command machine tells the link machine when a command settles: the
    answer (None after a timeout), whose command it was, and whether it was sent more
    than once (a repeat may be answered from the device's store, an older snapshot)."""

    msg: Any
    origin: int
    command: str
    tag: str
    reason: str | None
    repeat: bool


class InDoubt(NamedTuple):
    """A caller's command in flight when the device restarted: its outcome is unknown
    until the device is read again (reconciled by the link machine)."""

    origin: int
    command: str
    fields: tuple[tuple[str, Any], ...]


#: a named tuple's constructor without its Python-level `__new__`, for the shapes a trip
#: makes (`QueueEntry`, `UserCommand`): one C call instead of a Python frame each
new_shape = tuple.__new__


class DeviceEvent(NamedTuple):
    """An event frame from the device, with the seq the acknowledgement carries (the
    command machine's next)."""

    msg: Any
    next_seq: int


class UserCommand(NamedTuple):
    """A caller's command handed to the link machine, with the seq it is known by."""

    sub: Submit
    seq: int
