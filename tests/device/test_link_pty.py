"""Controller link and board end to end over real ptys (virtual time and real time)."""

from __future__ import annotations

from collections import Counter

from goosectl.controller.config.link import LinkConfig
from goosectl.controller.shell.serial_link import SerialLink
from goosectl.firmware_sim.faults import FaultConfig
from goosectl.firmware_sim.shell import ShellFaults
from goosectl.protocols.serial import messages as m
from tests.device.conftest import MS, drain

GUARD_S = 10.0  # hang guard only: no test asserts how long anything took


def _wait(link: SerialLink, pair, seq: int, kinds: set[str], step_ms: int = 10, limit_ms=60_000):
    seen: list = []

    def done() -> bool:
        seen.extend(drain(link))
        return any(e.seq == seq and e.kind in kinds for e in seen)

    ok = (
        pair.run_until_true(done, limit_ms * MS, step_ms * MS)
        if pair
        else link.run_until(done, GUARD_S)
    )
    assert ok, f"no {kinds} for seq {seq}: {seen}"
    return seen


def test_1000_trip_close_under_corruption_and_loss_each_operate_exactly_once(virtual_pty):
    faults = ShellFaults(FaultConfig(corrupt=0.05, drop=0.05), seed=2024)
    # A try survives both directions with p = 0.9^2 = 0.81 (5% loss and 5% corruption each
    # way); with the default 3 retries a command gives up (outcome unknown, rightly) with
    # p = 0.19^4 = 1.3e-3, about once in these 1,000 commands, and a seeded run either hits
    # such a streak or not. This test is about exactly-once under faults, not about giving
    # up: with 20 retries a give-up needs 21 losses in a row (p ~ 1e-15 per command).
    link, dev, pair = virtual_pty(faults, link_config=LinkConfig(max_retries=20))
    confirmed: Counter = Counter()
    for i in range(1000):
        command = "close" if i % 2 == 0 else "trip"
        seq = link.send_command(command, pair.now_ns)
        seen = _wait(link, pair, seq, {"operation_complete", "operation_failed", "cmd_failed"})
        outcome = [e for e in seen if e.seq == seq and e.kind != "cmd_ok"]
        assert [e.kind for e in outcome] == ["operation_complete"], outcome
        confirmed[command] += 1
        pair.run_for(100 * MS if command == "close" else 10 * MS)
        if command == "close":
            pair.run_for(5000 * MS)  # spring recharge, virtual
    ops = dev.fw.stats.operations
    assert ops == Counter({"close": 500, "open": 500})
    assert confirmed == Counter({"close": 500, "trip": 500})
    assert dev.fw.stats.executed["CLOSE"] == 500 and dev.fw.stats.executed["TRIP"] == 500
    # the faults really happened, and were survived by retries and the dedup store
    assert dev.rx.counts["corrupted"] > 20 and dev.tx.counts["dropped"] > 20
    assert dev.fw.machine("commands").ctx["repeats"] > 0
    assert link.core.decoder.error_count > 0 and dev.fw.decoder.error_count > 0


def test_every_command_and_event_end_to_end_over_a_pty_with_the_sim_in_a_thread(threaded_sim):
    tr, shell = threaded_sim()
    link = SerialLink(tr.path, LinkConfig(response_timeout_ms=200))
    try:
        assert link.open()
        assert link.run_until(lambda: link.state == "up", GUARD_S)
        events: list = []

        def do(command, kinds=None, **fields):
            if kinds is None:
                kinds = {"cmd_ok", "cmd_failed"}
            seq = link.send_command(command, **fields)
            events.extend(_wait(link, None, seq, kinds))
            return [e for e in events if e.seq == seq]

        assert do("ping")[0].kind == "cmd_ok"
        assert do("read_status")[0].get("result") == "done"
        assert do("configure", param=m.ConfigParam.OPEN_TIME_MS, value=10)[0].kind == "cmd_ok"
        assert do("set_output", mask=3, values=2)[0].kind == "cmd_ok"
        assert link.view["outputs"] == 2
        close = do("close", {"operation_complete"})
        assert [e.kind for e in close] == ["cmd_ok", "operation_complete"]
        link.run_until(
            lambda: any(
                e.kind == "spring" and e.get("charged")
                for e in (events.extend(drain(link)) or events)
            ),
            GUARD_S,
        )
        trip = do("trip", {"operation_complete"})
        assert trip[-1].get("operate_ms") >= 10
        assert do("reset", mode=m.ResetMode.CLEAR_LATCHED)[0].kind == "cmd_ok"
        shell_fw = shell.fw
        shell_fw.inject("inputs", 0x0011, shell.clock())  # racing the thread is fine: one call
        shell_fw.inject("gas_low", True, shell.clock())
        assert link.run_until(
            lambda: (
                {"inputs_changed", "alarm"}
                <= {e.kind for e in (events.extend(drain(link)) or events)}
            ),
            GUARD_S,
        )
        refused = do("close")
        assert refused[0].kind == "cmd_failed" and refused[0].reason == "close_blocked_alarm"
        kinds = {e.kind for e in events}
        assert {"position_changed", "spring", "inputs_changed", "alarm"} <= kinds
        mark = len(events)  # only what follows the reboot command counts
        do("reset", mode=m.ResetMode.REBOOT)
        assert link.run_until(
            lambda: any(
                e.kind == "device_reset" for e in (events.extend(drain(link)) or events[mark:])
            ),
            GUARD_S,
        )
        assert [e.reason for e in events[mark:] if e.kind == "device_reset"] == ["commanded"]
        assert link.run_until(lambda: link.state == "up", GUARD_S)
        pong = do("ping")[0]
        assert pong.kind == "cmd_ok", pong
    finally:
        link.close()


def test_stuck_mechanism_reports_operation_failure(virtual_pty):
    link, dev, pair = virtual_pty(ShellFaults(stuck=True))
    seq = link.send_command("close", pair.now_ns)
    seen = _wait(link, pair, seq, {"operation_failed"})
    fail = next(e for e in seen if e.kind == "operation_failed")
    assert fail.reason == "mechanism_timeout" and fail.seq == seq
    # failure came after operating time + margin (60 + 20 ms) of virtual time, not before
    assert dev.fw.stats.operations["close"] == 0


def test_device_reset_is_detected_and_resynchronised(virtual_pty):
    link, dev, pair = virtual_pty(
        ShellFaults(reset_after=12), link_config=LinkConfig(device_config={1: 25})
    )
    boot = dev.fw.boot_counter
    drain(link)
    seen: list = []
    for _ in range(20):
        seq = link.send_command("ping", pair.now_ns)
        pair.run_for(300 * MS)
        seen += drain(link)
        if any(e.kind == "device_reset" for e in seen):
            break
    assert [e.reason for e in seen if e.kind == "device_reset"] == ["watchdog"]
    assert dev.fw.boot_counter == boot + 1
    assert any(e.kind == "device_reset" and e.get("boot_counter") == boot + 1 for e in seen)
    pair.run_for(1000 * MS)
    assert link.state == "up" and link.view["boot_counter"] == boot + 1
    assert dev.fw.machine("commands").state == "synced"
    # the configuration was sent again after the reset
    assert dev.fw.machine("breaker").ctx["open_time_ms"] == 25
    assert link.send_command("close", pair.now_ns) > seq


def test_disconnect_then_reconnect_over_a_pty(threaded_sim):
    tr, shell = threaded_sim(ShellFaults(disconnect_after=6))
    link = SerialLink(tr.path, LinkConfig(reconnect_ms=50, response_timeout_ms=100))
    try:
        assert link.open()
        states: list = []
        link.on_event = lambda e: states.append(e.get("state")) if e.kind == "link_state" else None
        assert link.run_until(lambda: link.state == "up", GUARD_S)
        for _ in range(10):
            link.send_command("ping")
            link.run_until(lambda: False, 0.05)
        assert link.run_until(lambda: shell.disconnects == 1 and link.state == "up", GUARD_S)
        assert "down" in states and states[-1] == "up"
        link.on_event = None
        seq = link.send_command("ping")
        _wait(link, None, seq, {"cmd_ok"})
    finally:
        link.close()


def test_stalled_device_takes_the_link_down_with_timeouts(virtual_pty):
    link, dev, pair = virtual_pty(ShellFaults(stall_after=8))
    drain(link)
    seen: list = []
    for _ in range(10):
        link.send_command("ping", pair.now_ns)
        pair.run_for(300 * MS)
        seen += drain(link)
        if any(e.kind == "cmd_failed" for e in seen):
            break
    fail = next(e for e in seen if e.kind == "cmd_failed")
    assert fail.reason == "timeout" and fail.get("tries") == 4  # first try + 3 retries
    states = [e.get("state") for e in seen if e.kind == "link_state"]
    assert states[:2] == ["degraded", "down"]
    assert dev.stalled and link.core.commands.ctx["retransmissions"] >= 3


def test_malformed_frames_towards_the_controller_are_counted_not_fatal(virtual_pty):
    import os

    link, dev, pair = virtual_pty()
    junk = bytes(range(1, 200)) + b"\x00" + b"\x05\x01\x02\x03\x04\x00" + b"\xff" * 100 + b"\x00"
    os.write(dev.transport.fileno(), junk)
    dev.bytes_out += len(junk)
    pair.run_for(10 * MS)
    assert link.core.decoder.error_count >= 2
    seq = link.send_command("ping", pair.now_ns)
    assert [e.kind for e in _wait(link, pair, seq, {"cmd_ok"}) if e.seq == seq] == ["cmd_ok"]
