"""The board's firmware, sans-IO, on virtual time: every command, refusal and event."""

from __future__ import annotations

import pytest

from goosectl.firmware_sim.core import Firmware
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.crc import crc16
from goosectl.protocols.serial.framing import wrap
from goosectl.protocols.serial.messages import AckResult, Dbpos, NackReason
from goosectl.protocols.serial.stream import StreamDecoder, frame

MS = 1_000_000


def _raw(payload: bytes) -> bytes:
    """A frame with a good CRC around any payload (to build frames the encoder refuses)."""
    return wrap(payload + crc16(payload).to_bytes(2, "big"))


class Board:
    """A firmware and a controller-side decoder; the clock is ours."""

    def __init__(self, **config) -> None:
        self.fw = Firmware(config=config)
        self.rx = StreamDecoder(m.SENT_BY_DEVICE)
        self.now = 0
        self.seq = 100
        self.events: list = []
        self.sync()

    def read(self) -> list:
        """Everything the board sent; events are acknowledged (and kept once per seq)."""
        out: list = []
        while data := self.fw.take_output():
            got = self.rx.feed(data)
            out += got
            for x in got:
                if isinstance(x, m.Message) and m.spec_for(x).kind is m.Kind.EVENT:
                    if isinstance(x, m.PowerUp) or x.seq > self.events[-1].seq:
                        self.events.append(x)
                    self.fw.receive(frame(m.EventAck(x.seq, self.seq + 1)), self.now)
        return out

    def sync(self) -> None:
        assert isinstance(self.read()[0], m.PowerUp)
        assert self.fw.machine("commands").state == "synced"

    def at(self, ms: int) -> None:
        self.now += ms * MS
        self.fw.advance(self.now)
        self.read()

    def cmd(self, msg_cls, *body, seq: int | None = None):
        if seq is None:
            self.seq += 1
            seq = self.seq
        self.fw.receive(frame(msg_cls(seq, *body)), self.now)
        answers = [x for x in self.read() if isinstance(x, (m.Ack, m.Nack))]
        assert len(answers) == 1, answers
        return answers[0]


def test_boot_sends_power_up_and_answers_close_not_synced() -> None:
    fw = Firmware(boot_counter=41)
    rx = StreamDecoder(m.SENT_BY_DEVICE)
    (pu,) = rx.feed(fw.take_output())
    assert pu == m.PowerUp(1, 42, m.ResetCause.POWER_ON)
    fw.receive(frame(m.Close(5)), 0)
    (nack,) = rx.feed(fw.take_output())
    assert nack.reason is NackReason.NOT_SYNCED
    fw.receive(frame(m.Trip(6)), 0)  # TRIP needs no sync
    (ack,) = rx.feed(fw.take_output())
    assert ack.result is AckResult.NO_CHANGE and not ack.flags & m.StatusFlag.SYNCED


def test_close_then_trip_with_times_events_and_spring() -> None:
    b = Board()
    ack = b.cmd(m.Close)
    assert ack.result is AckResult.STARTED and ack.position is Dbpos.INTERMEDIATE
    assert ack.flags & m.StatusFlag.CLOSE_COIL and ack.flags & m.StatusFlag.SYNCED
    b.at(59)
    assert b.fw.machine("breaker").state == "closing"
    b.at(1)
    assert b.fw.machine("breaker").state == "closed"
    changes = [e for e in b.events if isinstance(e, m.PositionChange)]
    assert [(c.previous, c.position) for c in changes] == [
        (Dbpos.OFF, Dbpos.INTERMEDIATE),
        (Dbpos.INTERMEDIATE, Dbpos.ON),
    ]
    assert changes[-1].operate_ms == 60 and changes[-1].cause is m.PositionCause.CLOSE_COMMAND
    assert b.cmd(m.Close).result is AckResult.NO_CHANGE
    b.at(300)  # outside the anti-pump window
    assert b.cmd(m.Trip).result is AckResult.STARTED
    assert b.cmd(m.Trip).reason is NackReason.BUSY
    b.at(30)
    assert b.fw.machine("breaker").ctx["position"] == Dbpos.OFF
    assert b.cmd(m.Close).reason is NackReason.SPRING_DISCHARGED
    b.at(5000)  # the 5 s default spring charge, on virtual time
    spring = [e.charged for e in b.events if isinstance(e, m.SpringCharged)]
    assert spring == [False, True]
    assert b.cmd(m.Close).result is AckResult.STARTED
    b.at(60)
    assert dict(b.fw.stats.operations) == {"close": 2, "open": 1}


def test_anti_pump_lockout_until_clear_latched() -> None:
    b = Board()
    b.cmd(m.Close)
    b.at(60)
    assert b.cmd(m.Trip).result is AckResult.STARTED  # inside the window: latches
    b.at(30 + 5000)
    assert b.cmd(m.Close).reason is NackReason.ANTI_PUMP
    alarms = [(e.alarm, e.active) for e in b.events if isinstance(e, m.Alarm)]
    assert (m.AlarmId.ANTI_PUMP_LOCKOUT, True) in alarms
    assert b.cmd(m.Reset, m.ResetMode.CLEAR_LATCHED).result is AckResult.DONE
    assert b.cmd(m.Close).result is AckResult.STARTED


def test_gas_alarm_blocks_close_and_trip_circuit_fault_refuses_trip() -> None:
    b = Board()
    b.fw.inject("gas_low", True, b.now)
    b.read()
    nack = b.cmd(m.Close)
    assert (
        nack.reason is NackReason.CLOSE_BLOCKED_ALARM and nack.detail == m.AlarmId.GAS_PRESSURE_LOW
    )
    assert b.cmd(m.Configure, m.ConfigParam.ALARM_BLOCKS_CLOSE, 0).result is AckResult.DONE
    assert b.cmd(m.Close).result is AckResult.STARTED
    b.at(60)
    b.fw.inject("trip_circuit_ok", False, b.now)
    b.read()
    assert b.cmd(m.Trip).reason is NackReason.TRIP_CIRCUIT_FAULT
    assert (m.AlarmId.TRIP_CIRCUIT_FAULT, True) in [
        (e.alarm, e.active) for e in b.events if isinstance(e, m.Alarm)
    ]


def test_stuck_mechanism_reports_timeout_after_operating_time_plus_margin() -> None:
    b = Board(breaker={"open_time_ms": 40})
    b.cmd(m.Close)
    b.at(400)
    b.fw.inject("stuck", True, b.now)
    assert b.cmd(m.Trip).result is AckResult.STARTED
    b.at(59)
    assert not [e for e in b.events if isinstance(e, m.Alarm)]
    b.at(1)  # 40 ms open time + 20 ms margin
    (alarm,) = [e for e in b.events if isinstance(e, m.Alarm)]
    assert alarm.alarm is m.AlarmId.MECHANISM_TIMEOUT and alarm.active
    assert b.fw.machine("breaker").ctx["position"] == Dbpos.ON
    assert b.fw.stats.operations["open"] == 0


def test_outputs_inputs_and_configure_ranges() -> None:
    b = Board()
    assert b.cmd(m.SetOutput, 0x0003, 0x0001).result is AckResult.DONE
    assert b.cmd(m.SetOutput, 0x0003, 0x0001).result is AckResult.NO_CHANGE
    b.fw.receive(_raw(b"\x01\x05\x00\x07\x00\x01\x00\x02"), b.now)  # value outside mask
    (nack,) = b.read()
    assert nack.reason is NackReason.BAD_VALUE and nack.detail == 6
    assert b.cmd(m.ReadStatus).outputs == 0x0001
    b.fw.inject("inputs", 0x0005, b.now)
    b.read()
    (ic,) = [e for e in b.events if isinstance(e, m.InputChange)]
    assert (ic.inputs, ic.changed) == (0x0005, 0x0005)
    assert b.cmd(m.Configure, m.ConfigParam.OPEN_TIME_MS, 4).reason is NackReason.OUT_OF_RANGE
    assert b.cmd(m.Configure, m.ConfigParam.OPEN_TIME_MS, 100).result is AckResult.DONE
    assert b.fw.machine("breaker").ctx["open_supervision_ms"] == 120


def test_repeat_is_answered_from_store_and_stale_is_refused() -> None:
    b = Board()
    first = b.cmd(m.Close, seq=500)
    again = b.cmd(m.Close, seq=500)
    assert again == first  # same bytes, not executed twice
    assert b.fw.stats.executed["CLOSE"] == 1 and b.fw.stats.operations["close"] == 0
    b.at(60)
    assert b.fw.stats.operations["close"] == 1
    for s in (501, 502, 503, 504):
        b.cmd(m.Ping, seq=s)
    assert b.cmd(m.Close, seq=500).reason is NackReason.STALE_SEQUENCE  # fell out of the window
    assert b.fw.stats.operations["close"] == 1


def test_reboot_command_resets_and_rebases() -> None:
    b = Board()
    boot = b.fw.boot_counter
    ack = b.cmd(m.Reset, m.ResetMode.REBOOT)
    assert ack.result is AckResult.DONE and ack.boot_counter == boot
    (pu,) = [e for e in b.events if isinstance(e, m.PowerUp)][-1:]
    assert pu.boot_counter == boot + 1 and pu.cause is m.ResetCause.COMMANDED
    assert b.fw.machine("commands").state == "synced"  # our EVENT_ACK synced it again
    assert b.cmd(m.Close, seq=b.seq - 5).reason is NackReason.STALE_SEQUENCE


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x02\x01\x00\x07", NackReason.UNKNOWN_VERSION),
        (b"\x01\x33\x00\x07", NackReason.UNKNOWN_TYPE),
        (b"\x01\x80\x00\x07", NackReason.UNEXPECTED_TYPE),
        (b"\x01\x03\x00\x07\x00", NackReason.BAD_LENGTH),
        (b"\x01\x06\x00\x07\x09", NackReason.BAD_VALUE),
    ],
)
def test_malformed_frames_with_good_crc_are_nacked_not_executed(payload, reason) -> None:
    b = Board()
    b.fw.receive(_raw(payload), b.now)
    (nack,) = b.read()
    assert nack.reason is reason and nack.seq == 7
    assert sum(b.fw.stats.executed.values()) == 0


def test_garbage_is_counted_and_dropped_never_a_crash() -> None:
    import random

    b = Board()
    rng = random.Random(1)
    for _ in range(300):
        b.fw.receive(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 90))), b.now)
    b.fw.receive(b"\x00", b.now)  # flush a half frame
    b.read()
    assert b.fw.decoder.error_count > 0
    assert b.cmd(m.Ping).result is AckResult.DONE  # still answering
