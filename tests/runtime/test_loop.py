"""The one loop (`controller/shell/loop.py`): ready sources served in the fixed order of
their kinds whatever order they were registered or became ready in, timers every round,
a wrong registration refused by name, and a live controller's other inputs plugged in as
sources of the same loop. Real pipes, a real selector."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.shell.goose_live import LiveGoose
from goosectl.controller.shell.loop import Loop, LoopError, Source


@contextmanager
def pipes(n: int) -> Iterator[list[tuple[int, int]]]:
    made = [os.pipe() for _ in range(n)]
    try:
        yield made
    finally:
        for r, w in made:
            os.close(r)
            os.close(w)


def reader(fd: int, name: str, seen: list[str]):
    def on_ready() -> None:
        os.read(fd, 64)
        seen.append(name)

    return on_ready


class Rounds:
    """A timer that counts the rounds it saw and stops the loop after `stop_after`."""

    name = "rounds"

    def __init__(self, loop: Loop, stop_after: int) -> None:
        self.loop, self.stop_after, self.fired = loop, stop_after, 0

    def deadline(self) -> int:
        return time.monotonic_ns() + 1_000_000_000

    def fire(self, now: int) -> None:
        self.fired += 1
        if self.fired >= self.stop_after:
            self.loop.stop()


def test_ready_sources_are_served_goose_first_then_serial_then_control():
    seen: list[str] = []
    loop = Loop()
    with pipes(4) as ((r1, w1), (r2, w2), (r3, w3), (r4, w4)):
        # registered, and made readable, in the reverse of the round's order
        loop.add(Source("stdin", "input", r4, reader(r4, "stdin", seen)))
        loop.add(Source("control socket", "control", r3, reader(r3, "control", seen)))
        loop.add(Source("serial port", "serial", r2, reader(r2, "serial", seen)))
        loop.add(Source("goose A", "goose", r1, reader(r1, "goose", seen)))
        for w in (w4, w3, w2, w1):
            os.write(w, b"x")
        loop.timers.append(Rounds(loop, 1))
        loop.run()
        loop.close()
    assert seen == ["goose", "serial", "control", "stdin"]


def test_timers_and_idle_work_run_every_round_after_the_sources():
    order: list[str] = []
    loop = Loop()
    with pipes(1) as ((r, w),):
        loop.add(Source("control socket", "control", r, reader(r, "source", order)))
        os.write(w, b"x")
        rounds = Rounds(loop, 3)
        loop.timers.append(rounds)
        loop.idle.append(lambda _now: order.append("idle"))
        loop.spin = True  # three rounds without sleeping
        loop.run()
        loop.close()
    assert rounds.fired == 3
    assert order == ["source", "idle", "idle", "idle"]


def test_a_wrong_registration_is_refused_with_the_source_named():
    loop = Loop()
    with pipes(1) as ((r, _w),):
        with pytest.raises(LoopError, match="'udp' is not one of"):
            Source("rgoose", "udp", r, lambda: None)
        loop.add(Source("serial port", "serial", r, lambda: None))
        with pytest.raises(LoopError, match=r"'control socket': fd \d+ is already 'serial port'"):
            loop.add(Source("control socket", "control", r, lambda: None))
        loop.remove(r)
        loop.remove(r)  # not watched any more: nothing to do
        loop.add(Source("control socket", "control", r, lambda: None))
        loop.close()


def test_a_live_controller_without_interfaces_serves_its_other_inputs_and_timers():
    live = LiveGoose(GooseHub(GooseConfig()), None)
    seen: list[str] = []
    rounds: list[int] = []
    with pipes(2) as ((r1, w1), (r2, w2)):
        live.add_reader(r1, reader(r1, "control", seen))
        live.add_reader(r2, reader(r2, "serial", seen), "serial", "serial port")
        os.write(w1, b"x")
        os.write(w2, b"x")
        live.on_round.append(lambda now: (rounds.append(now), live.stop() if seen else None))
        live.run(until_ns=time.monotonic_ns() + 10_000_000_000)
        live.remove_reader(r1)
        live.remove_reader(r2)
    live.close()
    assert seen == ["serial", "control"]
    assert rounds and live.stopped
