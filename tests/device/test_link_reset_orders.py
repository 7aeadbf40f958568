"""A device reboot seen by the link in every order, on one virtual clock, sans-IO.

Around a reboot three things race: the device's POWER_UP reaching the controller, a reply
from the new boot reaching the controller (to the command, to its retry, to a resync or
keepalive), and the controller's retry of the command reaching the device. The serial line
keeps each direction in order, so an order is an interleaving of the two directions and the
controller's timers. Every interleaving of the first `DEPTH` moves is run from scratch,
with each command in each fate (lost before the reboot, executed with its reply lost,
arriving after the reboot), and judged by what the device executed (its own counters) and
what the controller reported:

- one reboot is one `device_reset`, whichever message revealed it;
- every command the caller sent gets exactly one outcome, never two;
- a CLOSE (an actuation) never runs late: it runs at most once, and never after the reboot
  unless it ran before; a TRIP (the safe direction) always ends with the breaker open;
- the link comes back `up` and the next command succeeds.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from goosectl.controller.config.link import LinkConfig
from goosectl.controller.link import LinkCore
from goosectl.firmware_sim.core import Firmware
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.stream import StreamDecoder

MS = 1_000_000
DEPTH = 4
MOVES = ("to_controller", "to_device", "timer")
FATES = ("lost", "executed_reply_lost", "after_reboot")
COMMANDS = {
    "ping": {},
    "trip": {},
    "close": {},
    "set_output": {"mask": 1, "values": 1},
}
TERMINAL = {"cmd_ok", "cmd_failed"}


def _frames(data: bytes) -> list[bytes]:
    """Whole COBS frames (each ends with its 0x00 delimiter)."""
    parts = data.split(b"\x00")
    return [p + b"\x00" for p in parts[:-1]]


class Line:
    """Controller and board joined by a line whose two directions we deliver by hand."""

    def __init__(self, breaker_closed: bool) -> None:
        self.now = 0
        self.fw = Firmware(now_ns=0, config={"breaker": {"anti_pump": 0}})
        self.link = LinkCore(LinkConfig(response_timeout_ms=50, idle_ms=10_000), 0)
        self.to_dev: list[bytes] = []
        self.to_ctl: list[bytes] = []
        self.events: list = []
        self.link.opened(0)
        self.settle(500 * MS)
        assert self.link.state == "up"
        if breaker_closed:
            self.command("close")
            self.settle(200 * MS)
            assert self.fw.machine("breaker").ctx["position"] == int(m.Dbpos.ON)
        self.events.clear()

    # -- moves ---------------------------------------------------------------------------
    def collect(self) -> None:
        self.to_dev += _frames(self.link.take_output())
        self.to_ctl += _frames(self.fw.take_output())
        self.events += self.link.take_events()

    def deliver_to_device(self) -> bool:
        if not self.to_dev:
            return False
        self.fw.receive(self.to_dev.pop(0), self.now)
        self.collect()
        return True

    def deliver_to_controller(self) -> bool:
        if not self.to_ctl:
            return False
        self.link.receive(self.to_ctl.pop(0), self.now)
        self.collect()
        return True

    def fire_timer(self) -> bool:
        due = [t for t in (self.link.next_deadline(), self.fw.next_deadline()) if t is not None]
        if not due:
            return False
        self.now = max(self.now, min(due))
        self.link.advance(self.now)
        self.fw.advance(self.now)
        self.collect()
        return True

    def move(self, name: str) -> bool:
        return {
            "to_controller": self.deliver_to_controller,
            "to_device": self.deliver_to_device,
            "timer": self.fire_timer,
        }[name]()

    def settle(self, for_ns: int) -> None:
        """Fair delivery, in order, until `for_ns` of virtual time has passed."""
        end = self.now + for_ns
        self.collect()
        while True:
            while self.deliver_to_device() or self.deliver_to_controller():
                pass
            due = [t for t in (self.link.next_deadline(), self.fw.next_deadline()) if t]
            if not due or min(due) > end:
                self.now = end
                return
            self.fire_timer()

    def command(self, name: str, **fields) -> int:
        seq = self.link.send_command(name, self.now, **fields)
        self.collect()
        return seq


def _run(command: str, fate: str, schedule: tuple[str, ...]) -> tuple[Line, int, Counter]:
    """(line, seq, what the device did since the command: mechanism moves and executed
    commands that moved nothing, from the board's own counters)."""
    line = Line(breaker_closed=command == "trip")
    before = line.fw.stats.operations + line.fw.stats.executed
    seq = line.command(command, **COMMANDS[command])
    frame = line.to_dev.pop(0)
    if fate == "executed_reply_lost":
        line.fw.receive(frame, line.now)
        line.fw.take_output()  # the reply is lost on the line
    line.fw.boot(line.now, m.ResetCause.WATCHDOG)
    if fate == "after_reboot":
        line.fw.receive(frame, line.now)  # reaches the new boot, unsynced
    line.collect()
    for move in schedule:
        line.move(move)
    line.settle(3000 * MS)
    return line, seq, line.fw.stats.operations + line.fw.stats.executed - before


# a timer move with frames in flight delays them past a response timeout; more than two in
# a row would exhaust the retries (a dead line, tested elsewhere), not reorder a live one
SCHEDULES = [s for s in itertools.product(MOVES, repeat=DEPTH) if s.count("timer") <= 2]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_order_around_a_reboot_one_reset_one_outcome_never_late(command):
    checked = 0
    for fate in FATES:
        for schedule in SCHEDULES:
            line, seq, did = _run(command, fate, schedule)
            where = f"{command} {fate} {schedule}"
            resets = [e for e in line.events if e.kind == "device_reset"]
            assert len(resets) == 1, f"{where}: {resets}"
            outcomes = [e for e in line.events if e.seq == seq and e.kind in TERMINAL]
            assert len(outcomes) == 1, f"{where}: {outcomes}"
            ran_before = fate == "executed_reply_lost"
            if command == "close":
                # an actuation never runs late: at most the one run before the reboot
                assert did["close"] == int(ran_before), f"{where}: {did}"
                ok = outcomes[0].kind == "cmd_ok"
                on = line.fw.machine("breaker").ctx["position"] == int(m.Dbpos.ON)
                assert ok == on, f"{where}: {outcomes} with the breaker {'on' if on else 'off'}"
                ops = [e for e in line.events if e.seq == seq and e.kind.startswith("operation")]
                assert len(ops) == 1, f"{where}: {ops}"
            elif command == "set_output":
                # outputs reset at boot; a late SET_OUTPUT would move a disconnector late
                assert did["SET_OUTPUT"] == int(ran_before), f"{where}: {did}"
            elif command == "trip":
                # the safe direction: the breaker ends open, the mechanism moved once
                assert did["open"] == 1, f"{where}: {did}"
                assert line.fw.machine("breaker").ctx["position"] == int(m.Dbpos.OFF), where
                assert outcomes[0].kind == "cmd_ok", f"{where}: {outcomes}"
                ops = [e for e in line.events if e.seq == seq and e.kind.startswith("operation")]
                assert [e.kind for e in ops] == ["operation_complete"], f"{where}: {ops}"
            else:
                assert outcomes[0].kind == "cmd_ok", f"{where}: {outcomes}"
            failed = Counter(e.seq for e in line.events if e.kind == "cmd_failed")
            assert all(n == 1 for n in failed.values()), f"{where}: {failed}"
            assert line.link.state == "up", f"{where}: {line.link.state}"
            after = line.command("ping")
            line.settle(200 * MS)
            assert [e.kind for e in line.events if e.seq == after] == ["cmd_ok"], where
            checked += 1
    assert checked == len(FATES) * len(SCHEDULES)


def test_a_reply_from_the_new_boot_before_its_power_up_is_one_reset():
    """The race CI hit: a keepalive answered by the rebooted device is read before the
    POWER_UP queued behind it; the POWER_UP then only syncs the device."""
    line = Line(breaker_closed=False)
    line.fw.boot(line.now, m.ResetCause.WATCHDOG)
    power_up = _frames(line.fw.take_output())
    seq = line.command("ping")
    line.deliver_to_device()  # the new boot answers the ping (no sync needed) ...
    line.deliver_to_controller()  # ... and that answer arrives first
    assert [e.reason for e in line.events if e.kind == "device_reset"] == ["boot_counter_changed"]
    line.to_ctl = power_up + line.to_ctl
    line.settle(1000 * MS)
    assert [e.kind for e in line.events if e.kind == "device_reset"] == ["device_reset"]
    assert [e.kind for e in line.events if e.seq == seq] == ["cmd_ok"]
    assert line.link.state == "up" and line.fw.machine("commands").state == "synced"


def test_a_close_asked_while_resyncing_waits_for_the_synced_device():
    """Sent at once, it would reach an unsynced device and be refused NOT_SYNCED."""
    line = Line(breaker_closed=False)
    line.fw.boot(line.now, m.ResetCause.WATCHDOG)
    line.collect()
    line.deliver_to_controller()  # POWER_UP read: connecting, resyncing
    assert line.link.state == "connecting"
    seq = line.command("close")
    on_wire = StreamDecoder(m.SENT_BY_CONTROLLER).feed(b"".join(line.to_dev))
    assert not [x for x in on_wire if isinstance(x, m.Close)], "a held close is not sent"
    line.settle(1000 * MS)
    kinds = [e.kind for e in line.events if e.seq == seq]
    assert kinds == ["cmd_ok", "operation_complete"], kinds
    assert line.fw.stats.executed["CLOSE"] == 1
