"""Effects of the controller's link tables, executed by `LinkCore`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goosectl.controller.engine.effects import Effect


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
