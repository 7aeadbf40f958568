"""What the GOOSE machines ask of the shell, and what they tell the application."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goosectl.controller.engine.effects import Effect

_NEW = object.__new__
_SET = object.__setattr__


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


@dataclass(frozen=True, init=False)
class FrameClassified(Effect):
    """One received frame's verdict. `deliver` is true when its values may act: the frame
    carries a state (or revives a subscription the gate had refused) and the receive rules
    (`gate.py`) let it through; `refused` names the rule that stopped it otherwise.
    `values` is set when delivered, and `previous` then holds the allData bytes of the state
    before (None on a first frame), so an application can tell which members changed.

    One is made per received frame, so it is built in one step: its fields go in as one
    dict (a frozen slotted dataclass sets them one `object.__setattr__` at a time, ~1 us
    of a retransmission's ~3 us budget). Frozen and a dataclass all the same; the
    subscriber's fast path makes its reports with `from_fields` from a per-stream copy."""

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
    refused: str | None = None

    def __init__(
        self,
        stream: str,
        side: str,
        cls: str,
        flags: tuple[str, ...],
        quality: str,
        deliver: bool,
        st_num: int,
        sq_num: int,
        values: Any = None,
        previous: bytes | None = None,
        refused: str | None = None,
    ) -> None:
        _SET(
            self,
            "__dict__",
            {
                "stream": stream,
                "side": side,
                "cls": cls,
                "flags": flags,
                "quality": quality,
                "deliver": deliver,
                "st_num": st_num,
                "sq_num": sq_num,
                "values": values,
                "previous": previous,
                "refused": refused,
            },
        )

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> FrameClassified:
        """One whose fields are `fields`, every one of them, taken as they are (the caller's
        own dict, not to be used again): half the cost of the constructor."""
        report = _NEW(cls)
        _SET(report, "__dict__", fields)
        return report


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


@dataclass(frozen=True, slots=True)
class LgosChanged(Effect):
    """A subscription's LGOS machine changed (St, ErrSt, SimSt, learned source); the hub
    turns it into an `LgosView` with the stream's numbers."""

    stream: str


@dataclass(frozen=True, slots=True)
class LgosView(Effect):
    """The LGOS view of one subscription (IEC 61850-7-4 LGOS), sent whenever it changes.

    `st`: subscribed and valid (values may act); `sim_st`: the subscription takes the
    simulated stream; `err`: why not valid (`gate.ERR_TEXT`); `conf_rev`: expected,
    `rx_conf_rev`: last received; `refused`: frames refused so far, by reason."""

    stream: str
    label: str
    gocb_ref: str
    appid: int
    st: bool
    sim_st: bool
    last_st_num: int | None
    conf_rev: int | None
    rx_conf_rev: int | None
    err: str
    nds_com: bool
    src: str | None
    refused: tuple[tuple[str, int], ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "stream": self.label,
            "gocbRef": self.gocb_ref,
            "appid": self.appid,
            "St": self.st,
            "SimSt": self.sim_st,
            "LastStNum": self.last_st_num,
            "ConfRevNum": self.conf_rev,
            "RxConfRevNum": self.rx_conf_rev,
            "ErrSt": self.err,
            "NdsCom": self.nds_com,
            "src": self.src,
            "refused": dict(self.refused),
        }


@dataclass(frozen=True, slots=True)
class RxDrops:
    """The kernel dropped frames meant for us on one side (ring or receive buffer full).

    Reported whenever the count grows: a drop is never silent. ``new`` since the last
    report, the rest are totals since the socket opened."""

    side: str
    iface: str
    new: int
    drops: int
    packets: int
    freeze: int
    received: int
