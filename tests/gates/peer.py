"""The command loop of the test peers that play the substation around a controller from
the other namespace (`python -c PEER`, goosectl's own publishers in a hub): the hub's
timers as they fall due, and one command a line on stdin, each answered `ok` when done
(`tests.gates.bay.sayer` sends them)."""

from __future__ import annotations

import select
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from goosectl.controller.demo.scenario import PROT, SCADA
from goosectl.protocols.goose import BitString, Boolean

#: the quality of the protection trip's second member: good
GOOD = BitString.from_bits("0000000000000")
#: a command's handler: (its words after the first, monotonic ns, UTC ns)
Command = Callable[[list[str], int, int], None]


def serve(hub: Any, send: Callable[[Iterable[Any]], None], on: dict[str, Command]) -> None:
    """Start `hub` (its first frames through `send`), print `ready`, then until stdin
    closes: fire the hub's due timers through `send`, and run each line's first word's
    handler from `on`."""
    send(hub.start(time.monotonic_ns(), time.time_ns()))
    print("ready", flush=True)
    while True:
        d = hub.next_deadline()
        if d is not None and d <= time.monotonic_ns():
            send(hub.advance(time.monotonic_ns()))
        if select.select([sys.stdin], [], [], 0.001)[0]:
            line = sys.stdin.readline()
            if not line:
                return
            words = line.split()
            on[words[0]](words[1:], time.monotonic_ns(), time.time_ns())
            print("ok", flush=True)


def substation(hub: Any, send: Callable[[Iterable[Any]], None]) -> dict[str, Command]:
    """The commands every such peer takes: `scada 0|1` (SCADA's close request) and
    `trip 0|1` (the protection IED's trip, its quality good), published on `hub`."""

    def scada(args: list[str], now: int, utc: int) -> None:
        send(hub.publish(SCADA, (Boolean(args[0] == "1"),), now, utc))

    def trip(args: list[str], now: int, utc: int) -> None:
        send(hub.publish(PROT, (Boolean(args[0] == "1"), GOOD), now, utc))

    return {"scada": scada, "trip": trip}
