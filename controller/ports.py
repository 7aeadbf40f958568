"""The seams between the pure core and the shells that drive it, as `typing.Protocol`s.

A shell (`controller.shell`: sockets, the serial port, the loop) drives a sans-IO endpoint
by calling its inputs with the time and executing what comes back. Several endpoints share
one shape: the GOOSE loop (`LiveGoose`) runs a bare `GooseHub` or the bay controller seen
through it (`BayGooseCore`); the serial loop (`SerialLink`) feeds a `LinkCore`, the bay
controller (which wraps one), or the bay with the agent layer (`AgentBay`). The shapes are
written here once, so the shells' constructors say what they need instead of `Any`, and
mypy checks every endpoint against them structurally: no endpoint inherits from anything.

Why here: both sides must see these names, and the import rules (ARCHITECTURE.md) let the
shells import the core but never the other way. This module sits beside the pure packages,
imports only the engine's journal type and the GOOSE codec's `Vlan`, and does no I/O, so
`controller.goose`, `controller.logic`, `controller.link` and `controller.shell` may all
import it. Checked with the engine's strict mypy settings (pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from goosectl.controller.engine.journal import Journal
    from goosectl.protocols.goose import Vlan


class Clock(Protocol):
    """Monotonic time in nanoseconds: `time.monotonic_ns` live, a virtual clock in replay."""

    def __call__(self) -> int: ...


# -- GOOSE --------------------------------------------------------------------------------


class Subscribed(Protocol):
    """One subscription as the GOOSE loop sees it: the group address to join, and the
    APPID and gocbRef the kernel filter lets in on it."""

    @property
    def dst(self) -> bytes: ...

    @property
    def appid(self) -> int: ...

    @property
    def gocb_ref(self) -> str: ...


class SubscriptionsView(Protocol):
    """What the GOOSE loop reads of the subscriber bank when it opens its sockets."""

    @property
    def observer(self) -> bool:
        """No subscription configured: listen to every stream (promiscuous)."""
        ...

    @property
    def subs(self) -> SubscriptionTable: ...

    def merge_sides(self, on: bool = True) -> None:
        """Frames arrive on two networks: merge every stream's two copies (A/B)."""
        ...

    def rejects(self, buf: bytes) -> bool:
        """A frame of no subscription, found without a parse (counted by the bank)."""
        ...


class SubscriptionTable(Protocol):
    """The bank's subscriptions by key; the loop only walks them for their addresses."""

    def values(self) -> Iterable[Subscribed]: ...


class JournalOwner(Protocol):
    """What owns the journal the loop flushes between rounds (None: no journal)."""

    @property
    def journal(self) -> Journal | None: ...


class GooseEndpoint(Protocol):
    """What `LiveGoose` runs: frames and time in, effects out (`SendFrame` for the sockets,
    anything else for the caller's sink). `GooseHub` and `BayGooseCore` have this shape."""

    @property
    def bank(self) -> SubscriptionsView: ...

    @property
    def scheduler(self) -> JournalOwner: ...

    def start(self, now_ns: int, utc_ns: int) -> list[Any]:
        """Start every machine; `utc_ns` is the wall clock at `now_ns` (for `t`)."""
        ...

    def frame(self, buf: bytes, side: str, now_ns: int, vlan: Vlan | None = None) -> list[Any]:
        """One received frame on network `side` ("A" or "B"), with the tag the kernel
        stripped."""
        ...

    def advance(self, now_ns: int) -> list[Any]:
        """Run the timers due by `now_ns`."""
        ...

    def link(self, side: str, up: bool, now_ns: int) -> list[Any]:
        """Network `side` lost or regained its carrier."""
        ...

    def next_deadline(self) -> int | None:
        """When `advance` has something to do next (monotonic ns), None if nothing is armed."""
        ...

    def set_source_mac(self, mac: bytes) -> None:
        """The MAC the publishers send from, once the shell knows its interface."""
        ...

    def set_time_quality(self, quality: int) -> None:
        """The TimeQuality octet of `t`, from the host clock's state."""
        ...


# -- the device link ----------------------------------------------------------------------


class SerialEndpoint(Protocol):
    """What `SerialLink` feeds from the port: bytes and time in, bytes for the port and link
    events out. `LinkCore`, `BayController` and `AgentBay` have this shape."""

    #: set by the link table when the port should be opened again; the shell clears it
    reopen_wanted: bool

    @property
    def state(self) -> str:
        """The link's state (down, syncing, up, ...)."""
        ...

    @property
    def view(self) -> dict[str, Any]:
        """The link's status, JSON-ready."""
        ...

    def opened(self, now_ns: int) -> None: ...

    def closed(self, now_ns: int, reason: str | None = None) -> None: ...

    def receive(self, data: bytes, now_ns: int) -> None:
        """Bytes read from the port."""
        ...

    def advance(self, now_ns: int) -> None: ...

    def next_deadline(self) -> int | None: ...

    def take_output(self) -> bytes:
        """Bytes to write to the port, taken once."""
        ...

    def take_events(self) -> list[Any]:
        """Link outcomes not consumed by the endpoint itself, taken once."""
        ...
