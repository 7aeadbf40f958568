"""A device that misbehaves cannot stop the controller.

- a device that answers our seq as another command is a protocol error, never an answer;
- a device that stops reading: writes never block the loop; within the write deadline the
  port is a fault with an alarm naming it, and the link comes back when the device reads;
- a device port that vanishes: an alarm naming the port, reopened with a doubling backoff,
  cleared when the port is back; `goosectl run` refuses to start without its port;
- a second controller on the same device port is refused, naming the process that has it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time

import pytest

from goosectl.controller.config.link import LinkConfig
from goosectl.controller.link import LinkCore
from goosectl.controller.shell.serial_link import SerialLink
from goosectl.firmware_sim.core import Firmware
from goosectl.firmware_sim.transport import PtyTransport
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.port import PortError, open_serial
from goosectl.protocols.serial.stream import StreamDecoder, frame
from tests.device.conftest import drain
from tests.support.procs import start_run

MS = 1_000_000


def _pump(link: LinkCore, fw: Firmware, now: int, rewrite=None) -> None:
    for _ in range(20):
        out = link.take_output()
        if out:
            fw.receive(out, now)
        back = fw.take_output()
        if not out and not back:
            return
        if back and rewrite is not None:
            back = b"".join(frame(rewrite(x)) for x in StreamDecoder(m.SENT_BY_DEVICE).feed(back))
        if back:
            link.receive(back, now)


def _up(link: LinkCore, fw: Firmware) -> int:
    link.opened(0)
    now = 0
    for _ in range(50):
        _pump(link, fw, now)
        now += 10 * MS
        link.advance(now)
        fw.advance(now)
    assert link.state == "up"
    link.take_events()
    return now


def test_an_ack_naming_another_command_is_a_protocol_error_not_an_answer():
    fw = Firmware(now_ns=0)
    link = LinkCore(LinkConfig(max_retries=1), 0)
    now = _up(link, fw)

    def lie(msg):  # the device answers the TRIP's seq as if it had been a PING
        if isinstance(msg, m.Ack) and msg.command is m.MsgType.TRIP:
            return m.Ack(msg.seq, m.MsgType.PING, *[getattr(msg, f) for f in FIELDS])
        return msg

    FIELDS = ("result", "position", "flags", "inputs", "outputs", "boot_counter", "event_seq")
    seq = link.send_command("trip", now)
    _pump(link, fw, now, rewrite=lie)
    events = link.take_events()
    errors = [e for e in events if e.kind == "protocol_error"]
    assert [(e.seq, e.command, e.reason, e.get("answered")) for e in errors] == [
        (seq, "trip", "wrong_command", "PING")
    ]
    assert not [e for e in events if e.seq == seq and e.kind in ("cmd_ok", "cmd_failed")]
    assert link.commands.ctx["protocol_errors"] == 1
    # the retries get the same wrong answer from the device's store: the command ends as
    # a timeout (outcome unknown), never as a command that ran
    for _ in range(5):
        now += 60 * MS
        link.advance(now)
        _pump(link, fw, now, rewrite=lie)
    outcome = [e for e in link.take_events() if e.seq == seq and e.kind == "cmd_failed"]
    assert [e.reason for e in outcome] == ["timeout"]


def _alarms(events, name):
    return [(e.get("active"), e.get("detail")) for e in events if e.get("alarm") == name]


def _fill(fd: int) -> int:
    """Write until the line takes no more; how many bytes it took."""
    taken = 0
    for chunk in (4096, 1):  # big writes first, then byte by byte to the brim
        try:
            while True:
                taken += os.write(fd, b"\x55" * chunk)
        except BlockingIOError:
            pass
    return taken


def test_a_device_that_stops_reading_is_a_port_fault_not_a_blocked_loop():
    tr = PtyTransport()
    # answers are awaited far longer than the write deadline: the stalled port is the fault
    cfg = LinkConfig(reconnect_ms=50, response_timeout_ms=2000)
    link = SerialLink(tr.path, cfg, write_deadline_s=0.2)
    fw = Firmware(now_ns=time.monotonic_ns())
    try:
        assert link.open()
        # the "device" never reads; fill the line's buffer behind its back
        filler = os.open(tr.path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            # the kernel moves bytes from the line's write buffer to the reader's side in
            # the background: fill to the brim until a pause frees no more room
            while _fill(filler):
                time.sleep(0.1)
        finally:
            os.close(filler)
        for _ in range(20):
            link.send_command("ping")  # each returns at once: nothing blocks
        assert link.run_until(lambda: link.state == "down", 5.0)
        events = drain(link)
        stalled = _alarms(events, "port_stalled")
        assert stalled and stalled[0][0] is True and tr.path in stalled[0][1], events
        # the device reads again: its buffer drains, the link is reopened and comes back
        os.set_blocking(tr.pair.master_fd, False)
        try:
            while os.read(tr.pair.master_fd, 65536):
                pass
        except BlockingIOError:
            pass

        def serve() -> bool:
            try:
                data = os.read(tr.pair.master_fd, 4096)
            except (BlockingIOError, OSError):
                data = b""
            now = time.monotonic_ns()
            fw.advance(now)
            if data:
                fw.receive(data, now)
            out = fw.take_output()
            if out:
                os.write(tr.pair.master_fd, out)
            return link.state == "up"

        assert link.run_until(serve, 10.0)
        assert (False, stalled[0][1]) in _alarms(drain(link), "port_stalled")
    finally:
        link.close()
        tr.close()


def test_a_vanished_port_is_an_alarm_naming_it_retried_with_backoff(tmp_path):
    path = tmp_path / "device"
    tr = PtyTransport(str(path))
    link = SerialLink(str(path), LinkConfig(reconnect_ms=20, reconnect_max_ms=160))
    try:
        assert link.open()
        tr.close()  # the cable is pulled: the port and its path are gone
        assert link.run_until(lambda: link.view["reconnect_ms"] == 160, 10.0)
        events = drain(link)
        missing = _alarms(events, "port_unavailable")
        assert len(missing) == 1 and missing[0][0] is True and str(path) in missing[0][1]
        assert link.state == "down"
        tr = PtyTransport(str(path))  # plugged in again
        assert link.run_until(lambda: link.state != "down", 10.0)
        assert (False, missing[0][1]) in _alarms(drain(link), "port_unavailable")
        assert link.view["reconnect_ms"] == 20
    finally:
        link.close()
        tr.close()


def test_a_second_opener_of_the_device_port_is_refused_naming_the_holder():
    tr = PtyTransport()
    try:
        first = open_serial(tr.path, timeout=0, exclusive=True)
        try:
            with pytest.raises(PortError) as err:
                open_serial(tr.path, timeout=0, exclusive=True)
            assert err.value.errno == errno.EBUSY
            assert f"in use by process {os.getpid()}" in str(err.value)
            # the kernel's view agrees: the descriptor holds an exclusive flock
            probe = os.open(tr.path, os.O_RDWR | os.O_NONBLOCK | os.O_NOCTTY)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(probe)
        finally:
            first.close()
        open_serial(tr.path, timeout=0, exclusive=True).close()  # free again
    finally:
        tr.close()


def test_run_refuses_to_start_without_its_device_port(tmp_path):
    proc = start_run(
        str(tmp_path / "no-such-tty"), "--control", str(tmp_path / "ctl.sock"), "--duration", "5"
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert "no-such-tty" in err and "Traceback" not in err, err


def test_a_trip_confirmed_only_by_the_status_snapshot_moves_every_view():
    """Row 18: a device whose POSITION_CHANGE events never arrive, but whose ACKs show the
    breaker open. The link's view is the one source of truth: the change is reported as a
    position_changed (which the bay, its published XCBR Pos and the agent all follow) and
    the trip's operation completes; nothing keeps saying "closed"."""
    fw = Firmware(now_ns=0, config={"breaker": {"anti_pump": 0}})
    link = LinkCore(LinkConfig(), 0)
    link.opened(0)

    def no_position_events(msg):
        return None if isinstance(msg, m.PositionChange) else msg

    def pump(now):
        for _ in range(20):
            out = link.take_output()
            if out:
                fw.receive(out, now)
            back = [
                x
                for x in map(
                    no_position_events, StreamDecoder(m.SENT_BY_DEVICE).feed(fw.take_output())
                )
                if x is not None
            ]
            if not out and not back:
                return
            for x in back:
                link.receive(frame(x), now)

    now = 0
    for _ in range(50):
        pump(now)
        now += 10 * MS
        link.advance(now)
        fw.advance(now)
    assert link.state == "up"
    close = link.send_command("close", now)
    for _ in range(30):
        pump(now)
        now += 10 * MS
        link.advance(now)
        fw.advance(now)
    link.send_command("read_status", now)  # the status snapshot shows the breaker ON
    pump(now)
    seen = link.take_events()
    assert ("operation_complete", close) in [(e.kind, e.seq) for e in seen]
    assert [e.get("position") for e in seen if e.kind == "position_changed"][-1] == "ON"
    trip = link.send_command("trip", now)
    for _ in range(10):
        pump(now)
        now += 10 * MS
        link.advance(now)
        fw.advance(now)
    link.send_command("ping", now)
    pump(now)
    seen = link.take_events()
    moves = [(e.get("position"), e.get("cause")) for e in seen if e.kind == "position_changed"]
    assert moves[-1] == ("OFF", "status"), moves
    assert ("operation_complete", trip) in [(e.kind, e.seq) for e in seen]
    assert link.view["position"] == int(m.Dbpos.OFF)


def test_a_stored_reply_older_than_the_events_never_moves_the_position_back():
    """A retried command is answered from the device's store, with the status snapshot of
    its first answer: older than the POSITION_CHANGE events that followed. Its event_seq
    says so, and the breaker does not seem to move back."""
    fw = Firmware(now_ns=0, config={"breaker": {"anti_pump": 0}})
    link = LinkCore(LinkConfig(response_timeout_ms=1000), 0)
    now = _up(link, fw)
    seq = link.send_command("close", now)
    fw.receive(link.take_output(), now)
    fw.take_output()  # its ACK STARTED (position INTERMEDIATE) and first event are lost
    for _ in range(60):  # the mechanism travels; its events are re-sent and processed
        now += 10 * MS
        fw.advance(now)
        back = fw.take_output()
        if back:
            link.receive(back, now)
        acks = [x for x in StreamDecoder(m.SENT_BY_CONTROLLER).feed(link.take_output())]
        assert not [x for x in acks if isinstance(x, m.Close)], "no retry before 1 s"
        fw.receive(b"".join(frame(x) for x in acks), now)
    assert link.view["position"] == int(m.Dbpos.ON)
    link.take_events()
    now += 1000 * MS
    link.advance(now)  # the retry; the device answers it from its store
    _pump(link, fw, now)
    events = link.take_events()
    assert [e.kind for e in events if e.seq == seq] == ["cmd_ok"], events
    assert not [e for e in events if e.kind == "position_changed"], events
    assert link.view["position"] == int(m.Dbpos.ON)


def test_a_chattering_position_is_one_alarm_and_the_settled_position_not_a_flood():
    """Row 14: a contact bouncing every millisecond. The logic (and so the XCBR Pos
    publication) hears at most `chatter_max` changes, then one alarm, then - once the
    position is still for a window - where it settled, once."""
    fw = Firmware(now_ns=0)
    link = LinkCore(LinkConfig(chatter_max=5, chatter_window_ms=200), 0)
    now = _up(link, fw)
    events = []
    for i in range(500):  # 0.5 s of a contact bouncing every millisecond
        now += MS
        fw.inject("contacts_bad" if i % 2 == 0 else "contacts_ok", None, now)
        fw.advance(now)
        link.advance(now)
        _pump(link, fw, now)
        events += link.take_events()
    moves = [e for e in events if e.kind == "position_changed"]
    alarms = _alarms(events, "position_chatter")
    assert len(moves) == 5, moves
    assert [a[0] for a in alarms] == [True]
    assert link.view["chatter_suppressed"] > 100
    for _ in range(40):  # still for more than a window
        now += 10 * MS
        fw.advance(now)
        link.advance(now)
        _pump(link, fw, now)
        events += link.take_events()
    assert [a[0] for a in _alarms(events, "position_chatter")] == [True, False]
    settled = [e for e in events if e.kind == "position_changed"][-1]
    assert settled.get("cause") == "settled"
    assert settled.get("position") == m.Dbpos(fw.machine("breaker").ctx["position"]).name


def test_a_device_in_a_reboot_loop_is_an_alarm():
    fw = Firmware(now_ns=0)
    link = LinkCore(LinkConfig(reboot_max=3, reboot_window_ms=10_000), 0)
    now = _up(link, fw)
    events = []
    for _ in range(6):  # a restart every 100 ms
        now += 100 * MS
        fw.boot(now, m.ResetCause.WATCHDOG)
        for _ in range(5):
            _pump(link, fw, now)
            now += 5 * MS
            link.advance(now)
            fw.advance(now)
        events += link.take_events()
    assert len([e for e in events if e.kind == "device_reset"]) == 6
    assert [a[0] for a in _alarms(events, "device_reboot_loop")] == [True]


def test_operations_we_command_are_never_chatter():
    """A breaker cycled by our own commands as fast as the mechanism allows moves often,
    but every move is explained: no alarm, every change reported."""
    fw = Firmware(now_ns=0, config={"breaker": {"anti_pump": 0}, "spring": {"spring_charge_ms": 0}})
    link = LinkCore(LinkConfig(chatter_max=3, chatter_window_ms=10_000), 0)
    now = _up(link, fw)
    events = []
    for i in range(8):
        link.send_command("close" if i % 2 == 0 else "trip", now)
        for _ in range(15):
            now += 10 * MS
            fw.advance(now)
            link.advance(now)
            _pump(link, fw, now)
        events += link.take_events()
    assert not _alarms(events, "position_chatter")
    assert len([e for e in events if e.kind == "position_changed"]) == 16  # 8 x (mid, end)


def test_a_device_rebooting_every_5_ms_is_not_resynced_each_time():
    """Row 14, device side: a device rebooting every 5 ms for 15 s (the row saw 2,583
    resyncs). Past `reboot_max` restarts in the window the link holds the resync
    (`rebooting`, position unknown) until the device has been quiet for
    `reboot_quiet_ms`; then one resync, and the link is up with the position read."""
    fw = Firmware(now_ns=0)
    cfg = LinkConfig(reboot_max=3, reboot_window_ms=60_000, reboot_quiet_ms=500)
    link = LinkCore(cfg, 0)
    now = _up(link, fw)
    before = link.view["resyncs"]
    events = []
    states = set()
    for i in range(3000):  # 15 s, a restart every 5 ms
        now += 5 * MS
        fw.boot(now, m.ResetCause.WATCHDOG)
        link.advance(now)
        fw.advance(now)
        _pump(link, fw, now)
        events += link.take_events()
        if i > 10:
            states.add(link.state)
            assert link.view["position"] is None, i  # unknown while it loops
    resets = [e for e in events if e.kind == "device_reset"]
    assert len(resets) == 3000
    during = link.view["resyncs"] - before
    assert during <= cfg.reboot_max, during  # the first restarts only, then held
    assert link.view["resyncs_held"] >= 3000 - cfg.reboot_max
    assert states == {"rebooting"}
    assert [a[0] for a in _alarms(events, "device_reboot_loop")] == [True]
    # the device stops rebooting: one resync after the quiet time, and the link is up
    for _ in range(100):
        now += 10 * MS
        link.advance(now)
        fw.advance(now)
        _pump(link, fw, now)
        events += link.take_events()
    assert link.state == "up"
    assert link.view["resyncs"] - before == during + 1
    assert link.view["position"] == fw.machine("breaker").ctx["position"]
    assert [a[0] for a in _alarms(events, "device_reboot_loop")] == [True, False]
