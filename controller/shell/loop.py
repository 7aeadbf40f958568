"""The one selectors loop of a live controller, and the sources it serves.

A round: wait (select, to the earliest timer: asleep up to a millisecond before it, then
polling, since epoll rounds a timeout up to whole milliseconds), the ready file descriptors
handled in the fixed order of `SOURCE_KINDS` (GOOSE sockets first, so a trip frame is read
before the serial port, the control socket or stdin are served), then the timers (every
round, each doing what is due), then the idle work (every round; the garbage collector's
young collection only in rounds where nothing was ready). A new transport plugs in as one
more `Source` (R-GOOSE over UDP and PRP supervision are GOOSE sources of their own) or one
more `Timer`; nothing here knows what a frame is.

A light round: when `light_every` asks the loop to wake sooner than anything is due (the
trip reflex's keep-warm), a wake with nothing ready runs the `light` work alone: no timer
is due and nothing was read, so the timers and the idle work have nothing to do that a
loop asleep until the deadline would have done sooner, and the wake costs what the light
work costs.

Why one loop: one thread decides everything, in one order, so a frame, a serial byte and a
control request can never race; the pure machines it drives never see a clock or a socket.
"""

from __future__ import annotations

import gc
import selectors
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

#: The kinds of file-descriptor source, in the order a round serves the ready ones.
#: `input` is anything else read from outside (stdin for `publish`).
SOURCE_KINDS = ("goose", "serial", "control", "input")
#: Closer than this to a deadline the loop polls instead of sleeping (epoll's millisecond).
SPIN_NS = 1_200_000
# --realtime: the collector runs only in idle rounds, at most this often, and only when no
# timer is due within IDLE_GC_MIN_NS; every IDLE_GC_FULL-th idle collection is a full one
IDLE_GC_EVERY_NS = 100_000_000
IDLE_GC_MIN_NS = 2_000_000
IDLE_GC_FULL = 100


class LoopError(ValueError):
    """A source registered wrongly (an unknown kind, a file descriptor twice)."""


@dataclass(eq=False, slots=True)
class Source:
    """One file descriptor the loop watches: `on_ready` reads it when the kernel says it
    is readable (and must not block). `kind` fixes its place in the round."""

    name: str
    kind: str
    fd: int
    on_ready: Callable[[], None]
    rank: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise LoopError(
                f"source {self.name!r}: kind {self.kind!r} is not one of {SOURCE_KINDS}"
            )
        self.rank = SOURCE_KINDS.index(self.kind)


class Timer(Protocol):
    """Work the loop does every round after the ready sources, each timer deciding what
    is due at the round's `now`; `deadline` is when it next needs a round (None: never)."""

    name: str

    def deadline(self) -> int | None: ...

    def fire(self, now: int) -> None: ...


@dataclass(eq=False)
class Loop:
    """The selector, the sources in their order, the timers and the idle work."""

    sel: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    sources: dict[int, Source] = field(default_factory=dict)
    timers: list[Timer] = field(default_factory=list)
    #: called at the end of every round with its `now` (the journal's group commit)
    idle: list[Callable[[int], None]] = field(default_factory=list)
    #: the longest the loop may sleep right now (frames the kernel refused wait for a
    #: retry); None: to the earliest deadline
    wait_cap: Callable[[], float | None] = lambda: None
    #: the longest the loop may sleep for its light work (None: no light work wanted now),
    #: and that work, alone in a round woken for it (see module)
    light_every: Callable[[], float | None] = lambda: None
    light: list[Callable[[int], None]] = field(default_factory=list)
    #: poll without ever sleeping: a core of its own, caches kept warm (`run --spin`)
    spin: bool = False
    #: collect garbage only in idle rounds (`run --realtime`)
    idle_gc: bool = False
    stopped: bool = False
    gc_rounds: int = 0
    _next_gc: int = 0

    def add(self, source: Source) -> None:
        """Watch `source.fd`; a descriptor already watched is a registration error."""
        if source.fd in self.sources:
            raise LoopError(f"source {source.name!r}: fd {source.fd} is already "
                            f"{self.sources[source.fd].name!r}")  # fmt: skip
        self.sources[source.fd] = source
        self.sel.register(source.fd, selectors.EVENT_READ, source)

    def remove(self, fd: int) -> None:
        """Stop watching `fd` (one that is not watched: nothing to do)."""
        if self.sources.pop(fd, None) is not None:
            self.sel.unregister(fd)

    def collect_if_idle(self, first_due: int | None, clock: Callable[[], int]) -> None:
        """--realtime, a round where nothing was ready and no timer is due soon: a young
        collection (tens of us) now and then, a full one every IDLE_GC_FULL young ones."""
        t = clock()
        if t >= self._next_gc and (first_due is None or first_due - t > IDLE_GC_MIN_NS):
            self.gc_rounds += 1
            gc.collect(2 if self.gc_rounds % IDLE_GC_FULL == 0 else 0)
            self._next_gc = t + IDLE_GC_EVERY_NS

    def run(self, until_ns: int | None = None) -> None:
        """Rounds until `stop` or the monotonic clock reaches `until_ns`. A round: wait to
        the earliest deadline (asleep to 1 ms before it, then polling: epoll rounds up to
        whole milliseconds), the ready sources in order, the timers, the idle work. Written
        out in one function, locals hoisted: a round is paid before every frame."""
        clock = time.monotonic_ns
        select, timers, idle, light = self.sel.select, self.timers, self.idle, self.light
        never = (1 << 63) - 1 if until_ns is None else until_ns
        while not self.stopped:
            now = clock()
            if now >= never:
                break
            wake = never
            for timer in timers:
                d = timer.deadline()
                if d is not None and d < wake:
                    wake = d
            slack = wake - now
            timeout = 0.0 if (self.spin or slack < SPIN_NS) else (slack - 1_000_000) / 1e9
            lit = False
            if timeout > 0.0:
                cap = self.wait_cap()
                if cap is not None:  # a retry is owed at the cap: a full round then
                    if timeout > cap:
                        timeout = cap
                elif light:
                    every = self.light_every()
                    if every is not None and timeout > every:
                        timeout, lit = every, True
            ready = select(timeout)
            if not ready:
                if self.idle_gc:  # the earliest deadline, as computed for the wait
                    self.collect_if_idle(None if wake == never else wake, clock)
                if lit:  # woken for the light work alone, if nothing is due yet
                    now = clock()
                    if now < wake:
                        for work in light:
                            work(now)
                        continue
            elif len(ready) > 1:
                ready.sort(key=_rank)
            for key, _ in ready:
                key.data.on_ready()
            now = clock()
            for timer in timers:
                timer.fire(now)
            for work in idle:
                work(now)

    def stop(self) -> None:
        self.stopped = True

    def close(self) -> None:
        self.sel.close()


def _rank(ready: tuple[selectors.SelectorKey, int]) -> int:
    rank: int = ready[0].data.rank
    return rank
