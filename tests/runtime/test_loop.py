"""The one loop (`controller/shell/loop.py`): ready sources served in the fixed order of
their kinds whatever order they were registered or became ready in, timers every round,
a wrong registration refused by name, and a live controller's other inputs plugged in as
sources of the same loop. Real pipes, a real selector."""

from __future__ import annotations

import itertools
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


class Counting:
    """A timer due every `every_ns`, counting the rounds its `fire` saw and the due ones."""

    name = "counting"

    def __init__(self, every_ns: int) -> None:
        self.every_ns = every_ns
        self.next = time.monotonic_ns() + every_ns
        self.rounds = self.due = 0

    def deadline(self) -> int:
        return self.next

    def fire(self, now: int) -> None:
        self.rounds += 1
        if now >= self.next:
            self.due += 1
            self.next = now + self.every_ns


def _light_run(timer_every_ns: int, every_s: float | None, run_ns: int) -> tuple:
    loop = Loop()
    timer = Counting(timer_every_ns)
    loop.timers.append(timer)
    idle: list[int] = []
    loop.idle.append(idle.append)
    light: list[int] = []
    loop.light.append(light.append)
    loop.light_every = lambda: every_s
    end = time.monotonic_ns() + run_ns
    loop.run(end)
    loop.close()
    # the loop polls in the last SPIN_NS before `end`, as before any deadline: not counted
    return timer, [t for t in idle if t < end - 2_000_000], light


def test_light_rounds_wake_for_the_light_work_alone_and_timers_still_fire_on_time():
    """A loop asked to wake every millisecond for light work (the reflex's keep-warm) runs
    that work about a thousand times a second and nothing else in those wakes; a timer's
    rounds still come at its deadlines; with no light work wanted nothing wakes."""
    timer, idle, light = _light_run(10_000_000_000, 0.001, 300_000_000)  # nothing due
    assert len(light) > 10, len(light)  # ~300 at 1 ms apart; a starved host delays them
    assert len(idle) <= 2, len(idle)
    assert all(b > a for a, b in itertools.pairwise(light))
    timer, idle, light = _light_run(50_000_000, 0.001, 300_000_000)  # due every 50 ms
    assert 4 <= timer.due <= 6, timer.due
    assert len(light) > 10, len(light)
    timer, idle, light = _light_run(10_000_000_000, None, 100_000_000)  # nothing armed
    assert light == [] and len(idle) <= 2
