"""What the GOOSE machines ask of the shell, and what they tell the application."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.engine.effects import Effect


@dataclass(frozen=True, slots=True)
class Transmit(Effect):
    """A publisher wants frame (stNum, sqNum) out with this TAL; `Publisher` builds bytes."""

    st_num: int
    sq_num: int
    tal_ms: int
    t_ns: int
    data: bytes
    sides: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SendFrame(Effect):
    """Bytes for the wire, on the given sides ("A", "B")."""

    gocb_ref: str
    sides: tuple[str, ...]
    data: bytes


@dataclass(frozen=True, slots=True)
class FrameClassified(Effect):
    """One received frame's verdict. `values` is set when the data set is delivered, and
    `previous` then holds the allData bytes of the state before (None on a first frame),
    so an application can tell which members changed."""

    stream: str
    side: str
    cls: str
    flags: tuple[str, ...]
    quality: str
    deliver: bool
    st_num: int
    sq_num: int
    values: Any = None
    previous: bytes | None = None


@dataclass(frozen=True, slots=True)
class StreamState(Effect):
    """A stream (or one side of an A/B stream) changed quality: valid, lost, ..."""

    stream: str
    side: str
    state: str


@dataclass(frozen=True, slots=True)
class PublisherSides(Effect):
    """The publisher's active sides changed (failover or failback)."""

    gocb_ref: str
    active: tuple[str, ...]
    reason: str
