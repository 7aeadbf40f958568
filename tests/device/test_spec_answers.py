"""The answers protocols/serial/SPEC.md gives a device author, checked against the simulator.

Each test drives `firmware_sim` the way a firmware engineer's test bench would: raw frames
written to the board's real pty and read back from it, by a controller stand-in that does
exactly what the test says (it acknowledges events only when told to), on one virtual
clock (`VirtualPortPair`), so windows like the 200 ms anti-pumping window are exact.
SPEC sections are named in each test.
"""

from __future__ import annotations

import contextlib
import os

import pytest

from goosectl.controller.replay.virtual_wire import VirtualPortPair
from goosectl.firmware_sim.core import Firmware
from goosectl.firmware_sim.shell import DeviceShell
from goosectl.firmware_sim.transport import PtyTransport
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.crc import crc16
from goosectl.protocols.serial.framing import wrap
from goosectl.protocols.serial.messages import AckResult, AlarmId, Dbpos, NackReason, StatusFlag
from goosectl.protocols.serial.stream import StreamDecoder, frame

MS = 1_000_000
SPRING_MS = 5000


class Bench:
    """The controller side of a test bench: raw frames over the pty's slave path."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        self.rx = StreamDecoder(m.SENT_BY_DEVICE)
        self.bytes_in = 0
        self.bytes_out = 0
        self.out = bytearray()
        self.received: list[m.Message] = []
        self.auto_ack = True
        self.next_seq = 100  # what EVENT_ACKs announce as the controller's next command seq

    # -- the Shell protocol of VirtualPortPair
    def fileno(self) -> int:
        return self.fd

    def next_deadline(self) -> int | None:
        return None

    def poll(self, now_ns: int | None = None) -> int:
        got = 0
        while True:
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                break
            if not data:
                break
            got += len(data)
            for msg in self.rx.feed(data):
                assert isinstance(msg, m.Message), msg  # the board never sends a bad frame
                self.received.append(msg)
                if self.auto_ack and m.spec_for(msg).kind is m.Kind.EVENT:
                    self.out += frame(m.EventAck(msg.seq, self.next_seq))
        self.bytes_in += got
        while self.out:
            n = os.write(self.fd, self.out)
            self.bytes_out += n
            del self.out[:n]
        return got

    def close(self) -> None:
        os.close(self.fd)

    # -- what a test reads
    def events(self) -> list[m.Message]:
        """Every event received, once per seq (re-sent events are dropped here)."""
        seen: dict[int, m.Message] = {}
        for x in self.received:
            if m.spec_for(x).kind is m.Kind.EVENT:
                seen.setdefault(x.seq, x)
        return list(seen.values())

    def alarms(self) -> list[tuple[AlarmId, bool]]:
        return [(e.alarm, e.active) for e in self.events() if isinstance(e, m.Alarm)]


class Rig:
    """The board on a pty, the bench on its slave path, one virtual clock."""

    def __init__(self, config: dict | None = None, sync: bool = True) -> None:
        self.tr = PtyTransport()
        self.fw = Firmware(now_ns=0, config=config or {})
        self.dev = DeviceShell(self.tr, self.fw, clock=lambda: 0)
        self.bench = Bench(self.tr.path)
        self.pair = VirtualPortPair(self.bench, self.dev)
        self.seq = 99
        if sync:
            self.pair.run_for(0)
            assert isinstance(self.bench.events()[0], m.PowerUp)
            assert self.fw.machine("commands").state == "synced"

    @property
    def now(self) -> int:
        return self.pair.now_ns

    def at(self, ms: float) -> None:
        """Let `ms` of virtual time pass."""
        self.pair.run_for(round(ms * MS))

    def send(self, msg: m.Message | bytes) -> None:
        self.bench.out += msg if isinstance(msg, bytes) else frame(msg)
        self.pair.run_for(0)

    def cmd(self, cls, *body, seq: int | None = None) -> m.Ack | m.Nack:
        """One command; returns the board's answer to it (ACK or NACK with its seq)."""
        if seq is None:
            self.seq = (self.seq + 1) & 0xFFFF
            seq = self.seq
        before = len(self.bench.received)
        self.send(cls(seq, *body))
        answers = [
            x
            for x in self.bench.received[before:]
            if isinstance(x, (m.Ack, m.Nack)) and x.seq == seq
        ]
        assert len(answers) == 1, self.bench.received[before:]
        return answers[0]

    def inject(self, what: str, value) -> None:
        self.fw.inject(what, value, self.now)
        self.pair.run_for(0)

    def close_breaker(self) -> None:
        assert self.cmd(m.Close).result is AckResult.STARTED
        self.at(60)
        assert self.fw.machine("breaker").ctx["position"] == Dbpos.ON

    def close(self) -> None:
        self.bench.close()
        self.tr.close()


@pytest.fixture
def rig():
    made: list[Rig] = []

    def make(**kw) -> Rig:
        r = Rig(**kw)
        made.append(r)
        return r

    yield make
    for r in made:
        with contextlib.suppress(OSError):
            r.close()


# ------------------------------------------------------------ 5.1 anti-pumping


@pytest.mark.parametrize(
    ("after_on_ms", "latched"),
    [(0, True), (199, True), (200, False), (1000, False)],
)
def test_a_trip_within_200_ms_of_on_latches_the_lockout_and_later_ones_do_not(
    rig, after_on_ms: int, latched: bool
) -> None:
    """SPEC 5.1 Anti-pumping: a TRIP accepted less than ANTI_PUMP_WINDOW_MS (200 ms) after
    the POSITION_CHANGE to ON that ended a CLOSE latches the lockout; at 200 ms or later it
    is an ordinary trip."""
    r = rig(config={"spring": {"spring_charge_ms": 50}})
    r.close_breaker()
    r.at(after_on_ms)
    ack = r.cmd(m.Trip)
    assert ack.result is AckResult.STARTED
    assert bool(ack.flags & StatusFlag.ANTI_PUMP_LOCKOUT) is latched
    r.at(30 + 50)  # open, spring charged again
    answer = r.cmd(m.Close)
    if latched:
        assert answer.reason is NackReason.ANTI_PUMP
        assert (AlarmId.ANTI_PUMP_LOCKOUT, True) in r.bench.alarms()
    else:
        assert answer.result is AckResult.STARTED
        assert r.bench.alarms() == []


def test_anti_pump_off_never_latches_and_does_not_clear_a_latched_lockout(rig) -> None:
    """SPEC 5.1: ANTI_PUMP = 0 stops new lockouts; only RESET CLEAR_LATCHED clears one."""
    r = rig(config={"spring": {"spring_charge_ms": 50}})
    r.close_breaker()
    r.cmd(m.Trip)  # latches
    r.at(100)
    assert r.cmd(m.Configure, m.ConfigParam.ANTI_PUMP, 0).result is AckResult.DONE
    assert r.cmd(m.Close).reason is NackReason.ANTI_PUMP
    assert r.cmd(m.Reset, m.ResetMode.CLEAR_LATCHED).result is AckResult.DONE
    r.close_breaker()
    assert not r.cmd(m.Trip).flags & StatusFlag.ANTI_PUMP_LOCKOUT  # inside the window, off
    r.at(100)
    assert r.cmd(m.Close).result is AckResult.STARTED


def test_lockout_alarm_is_raised_with_the_trip_before_its_position_change(rig) -> None:
    """SPEC 5.1: the ALARM ANTI_PUMP_LOCKOUT (active 1) is generated when the latching TRIP
    is accepted, before the trip's POSITION_CHANGE to INTERMEDIATE; that TRIP's ACK
    already shows flags ANTI_PUMP_LOCKOUT and CLOSE_BLOCKED."""
    r = rig(config={"spring": {"spring_charge_ms": 50}})
    r.close_breaker()
    n = len(r.bench.events())
    ack = r.cmd(m.Trip)
    assert ack.flags & StatusFlag.ANTI_PUMP_LOCKOUT and ack.flags & StatusFlag.CLOSE_BLOCKED
    r.at(30)
    new = r.bench.events()[n:]
    assert [type(e) for e in new[:3]] == [m.Alarm, m.PositionChange, m.PositionChange]
    assert (new[0].alarm, new[0].active) == (AlarmId.ANTI_PUMP_LOCKOUT, True)
    assert new[1].position is Dbpos.INTERMEDIATE and new[1].seq == new[0].seq + 1
    assert ack.event_seq == new[1].seq  # both generated before the ACK was built


def test_reset_clear_latched_reports_the_lockout_cleared(rig) -> None:
    """SPEC 5.1 RESET: CLEAR_LATCHED answers ACK DONE whose flags no longer show the
    lockout, and generates ALARM ANTI_PUMP_LOCKOUT active 0; with nothing latched it is
    ACK DONE and generates no event."""
    r = rig(config={"spring": {"spring_charge_ms": 50}})
    quiet = r.cmd(m.Reset, m.ResetMode.CLEAR_LATCHED)
    assert quiet.result is AckResult.DONE and r.bench.alarms() == []
    r.close_breaker()
    r.cmd(m.Trip)
    r.at(100)
    ack = r.cmd(m.Reset, m.ResetMode.CLEAR_LATCHED)
    assert ack.result is AckResult.DONE
    assert not ack.flags & (StatusFlag.ANTI_PUMP_LOCKOUT | StatusFlag.CLOSE_BLOCKED)
    assert r.bench.alarms() == [
        (AlarmId.ANTI_PUMP_LOCKOUT, True),
        (AlarmId.ANTI_PUMP_LOCKOUT, False),
    ]
    assert ack.event_seq == r.bench.events()[-1].seq


# ------------------------------------------------------------ 5.1 CLOSE refusals


def test_close_refusals_come_in_the_spec_order(rig) -> None:
    """SPEC 5.1 CLOSE: when several refusals apply, the first of BUSY, POSITION_BAD,
    (NO_CHANGE), ANTI_PUMP, CLOSE_BLOCKED_ALARM, SPRING_DISCHARGED is the answer."""
    r = rig(config={"spring": {"spring_charge_ms": SPRING_MS}})
    r.close_breaker()  # the spring is discharged from here for 5 s
    r.cmd(m.Trip)  # within the window: lockout
    r.inject("gas_low", True)
    assert r.cmd(m.Close).reason is NackReason.BUSY  # opening: BUSY before everything
    r.at(30)
    # open, locked out, gas low, spring discharged: ANTI_PUMP first
    assert r.cmd(m.Close).reason is NackReason.ANTI_PUMP
    r.inject("contacts_bad", None)
    bad = r.cmd(m.Close)
    assert (bad.reason, bad.detail) == (NackReason.POSITION_BAD, Dbpos.BAD)
    r.inject("contacts_ok", {"closed": False})
    assert r.cmd(m.Reset, m.ResetMode.CLEAR_LATCHED).result is AckResult.DONE
    blocked = r.cmd(m.Close)
    assert (blocked.reason, blocked.detail) == (NackReason.CLOSE_BLOCKED_ALARM, 1)
    r.inject("gas_low", False)
    assert r.cmd(m.Close).reason is NackReason.SPRING_DISCHARGED
    r.at(SPRING_MS)
    assert r.cmd(m.Close).result is AckResult.STARTED


def test_not_synced_and_stale_come_before_any_close_refusal(rig) -> None:
    """SPEC 5.1 CLOSE order, first steps: a repeated seq is answered from the store, an old
    one is STALE_SEQUENCE, and an unsynced board says NOT_SYNCED, whatever the breaker's
    own refusals would be."""
    r = rig(sync=False)
    r.bench.auto_ack = False
    r.pair.run_for(0)
    r.inject("gas_low", True)
    assert r.cmd(m.Close, seq=7).reason is NackReason.NOT_SYNCED
    assert r.cmd(m.Close, seq=7).reason is NackReason.NOT_SYNCED  # stored, re-sent
    r.send(m.EventAck(1, 20))  # POWER_UP acknowledged: commands before seq 20 are stale
    assert r.cmd(m.Close, seq=8).reason is NackReason.STALE_SEQUENCE
    assert r.cmd(m.Close, seq=20).reason is NackReason.CLOSE_BLOCKED_ALARM


# ------------------------------------------------------------ 5.1 CONFIGURE


def test_configure_answers_done_even_when_the_value_is_unchanged(rig) -> None:
    """SPEC 5.1 CONFIGURE: ACK DONE whenever the parameter now holds the value, also when it
    already did (NO_CHANGE is only for TRIP, CLOSE and SET_OUTPUT, which actuate)."""
    r = rig(config={"spring": {"spring_charge_ms": 50}})
    assert r.cmd(m.Configure, m.ConfigParam.OPEN_TIME_MS, 30).result is AckResult.DONE
    assert r.cmd(m.Configure, m.ConfigParam.OPEN_TIME_MS, 45).result is AckResult.DONE
    assert r.cmd(m.Configure, m.ConfigParam.OPEN_TIME_MS, 45).result is AckResult.DONE
    r.close_breaker()
    r.at(300)
    r.cmd(m.Trip)
    r.at(45)
    last = r.bench.events()[-1]
    assert isinstance(last, m.PositionChange) and (last.position, last.operate_ms) == (
        Dbpos.OFF,
        45,
    )


def _raw(payload: bytes) -> bytes:
    """A frame with a good CRC around any payload (one the encoder would refuse)."""
    return wrap(payload + crc16(payload).to_bytes(2, "big")) + b"\x00"


def test_unknown_configure_parameter_is_bad_value_at_offset_4_and_not_stored(rig) -> None:
    """SPEC 3 check 9 and 5.1 CONFIGURE agree: an undefined parameter id is a coded field
    with no defined code: NACK BAD_VALUE, detail 4 (the offset of `param`), neither
    executed nor stored, so the same seq with a good body is then executed."""
    r = rig()
    before = len(r.bench.received)
    r.send(_raw(bytes([1, 0x07, 0x01, 0x2C, 99, 0, 0, 0, 1])))  # seq 300, param 99
    (nack,) = [x for x in r.bench.received[before:] if isinstance(x, m.Nack)]
    assert (nack.seq, nack.reason, nack.rejected_type, nack.detail) == (
        300,
        NackReason.BAD_VALUE,
        0x07,
        4,
    )
    good = r.cmd(m.Configure, m.ConfigParam.EVENT_RETRY_MS, 100, seq=300)
    assert good.result is AckResult.DONE


def test_out_of_range_configure_is_out_of_range_and_stored(rig) -> None:
    """SPEC 5.1 CONFIGURE: a known parameter with a value outside its range is NACK
    OUT_OF_RANGE, stored like any step-2 answer (a retry gets the same NACK)."""
    r = rig()
    assert r.cmd(m.Configure, m.ConfigParam.OPEN_TIME_MS, 1).reason is NackReason.OUT_OF_RANGE
    again = r.cmd(m.Configure, m.ConfigParam.OPEN_TIME_MS, 40, seq=r.seq)
    assert again.reason is NackReason.OUT_OF_RANGE  # the stored answer, not executed


# ------------------------------------------------------------ 5.3 ACK event_seq


def _sync_manually(r: Rig, next_seq: int = 100) -> None:
    r.bench.auto_ack = False
    r.send(m.EventAck(1, next_seq))
    assert r.fw.machine("commands").state == "synced"


def test_ack_event_seq_counts_events_still_queued(rig) -> None:
    """SPEC 5.3: an ACK's event_seq is the newest event generated, including events queued
    and not yet sent; events dropped by a full queue take no seq."""
    r = rig(sync=False)
    _sync_manually(r)
    for i in range(1, 4):
        r.inject("inputs", i)
    sent = [e.seq for e in r.bench.events() if isinstance(e, m.InputChange)]
    assert sent == [2]  # one event outstanding at a time
    assert r.cmd(m.Ping).event_seq == 4
    for seq in (2, 3, 4):
        r.send(m.EventAck(seq, 0))
    assert [e.seq for e in r.bench.events()] == [1, 2, 3, 4]
    assert r.cmd(m.Ping).event_seq == 4


# ------------------------------------------------------------ 6.4 POWER_UP


def test_a_repeated_event_ack_of_power_up_does_not_rebase_the_sequence(rig) -> None:
    """SPEC 6.4: only the EVENT_ACK that acknowledges the outstanding POWER_UP syncs the
    board and sets newest = next_command_seq - 1; a repeated one (its first copy's answer
    got lost, say) is ignored, whatever next_command_seq it carries."""
    r = rig(sync=False)
    _sync_manually(r, next_seq=100)
    assert r.cmd(m.Ping, seq=100).result is AckResult.DONE
    r.send(m.EventAck(1, 500))  # repeated: would make 101..498 stale
    assert r.cmd(m.Ping, seq=101).result is AckResult.DONE
    r.send(m.EventAck(1, 10))  # repeated: would make 50 new again
    assert r.cmd(m.Ping, seq=50).reason is NackReason.STALE_SEQUENCE
    assert r.fw.machine("events").ctx["stray_acks"] == 2


# ------------------------------------------------------------ 6.3 EVENT_OVERFLOW


def test_the_read_status_that_clears_event_overflow_still_shows_it(rig) -> None:
    """SPEC 6.3: the ACK of the READ_STATUS that clears EVENT_OVERFLOW carries the flag (its
    snapshot is taken before clearing); the next answer shows it clear. The ALARM
    EVENT_OVERFLOW is queued once, with the next seq, when space frees."""
    r = rig(sync=False)
    _sync_manually(r)
    for i in range(1, 10):  # 8 fit the queue (seqs 2..9); the 9th is lost
        r.inject("inputs", i)
    ping = r.cmd(m.Ping)
    assert ping.flags & StatusFlag.EVENT_OVERFLOW and ping.event_seq == 9
    assert r.cmd(m.ReadStatus).flags & StatusFlag.EVENT_OVERFLOW
    assert not r.cmd(m.Ping).flags & StatusFlag.EVENT_OVERFLOW
    assert not r.cmd(m.ReadStatus).flags & StatusFlag.EVENT_OVERFLOW
    for seq in range(2, 11):
        r.send(m.EventAck(seq, 0))
    events = r.bench.events()
    assert [e.seq for e in events] == list(range(1, 11))
    assert isinstance(events[-1], m.Alarm)
    assert (events[-1].alarm, events[-1].active) == (AlarmId.EVENT_OVERFLOW, True)
    assert not any(isinstance(e, m.Alarm) for e in events[:-1])
