"""Device link over a real pty: command round trip and sustained message rate.

Both ends run in this thread: the controller's `SerialLink` (LinkCore, tables, pyserial)
on the pty slave and the board's `DeviceShell` (Firmware tables) on the master. One round
trip = send_command -> frame written -> board decodes, dedups, executes, answers -> link
decodes, settles the command table, emits cmd_ok. Reported beside the bare pty round
trip (`measure_pty_floor` from the codec suite) measured in the same run.
"""

from __future__ import annotations

import select
import time

from benchmarks.percentiles import ratio, sample_calls
from benchmarks.test_serial_codec_bench import measure_pty_floor
from goosectl.controller.config.link import LinkConfig
from goosectl.controller.shell.serial_link import SerialLink
from goosectl.firmware_sim.core import Firmware
from goosectl.firmware_sim.shell import DeviceShell
from goosectl.firmware_sim.transport import PtyTransport
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.stream import frame

GROUP = "link/pty"


def _pair():
    tr = PtyTransport()
    dev = DeviceShell(tr, Firmware(now_ns=time.monotonic_ns()))
    link = SerialLink(tr.path, LinkConfig(idle_ms=60_000, response_timeout_ms=1000))
    link.open()
    end = time.monotonic() + 5
    while link.state != "up":
        assert time.monotonic() < end, "link did not come up"
        select.select([dev.fileno(), link.fileno()], [], [], 0.01)
        dev.poll()
        link.poll()
    link.events.clear()
    return tr, dev, link


def _round_trip(dev: DeviceShell, link: SerialLink, command: str = "ping") -> None:
    link.send_command(command)
    fds = [dev.fileno(), link.fileno()]
    while not link.events:
        select.select(fds, [], [], 1.0)
        dev.poll()
        link.poll()
    ev = link.events.popleft()
    assert ev.kind == "cmd_ok", ev


def test_command_round_trip_over_pty(benchmark, samples: int) -> None:
    n = max(300, samples // 100)
    ack_bytes = len(frame(m.Ack(1, m.MsgType.PING, m.AckResult.DONE, m.Dbpos.OFF, 0, 0, 0, 1, 1)))
    floor = measure_pty_floor(ack_bytes, n, group=GROUP)
    tr, dev, link = _pair()
    try:
        rt = sample_calls(
            lambda: _round_trip(dev, link), n, name="ping_round_trip", group=GROUP, warmup=50
        )
        ratio(rt, floor)
        trip = sample_calls(
            lambda: _round_trip(dev, link, "read_status"),
            n,
            name="read_status_round_trip",
            group=GROUP,
            warmup=50,
        )
        ratio(trip, floor)
        # sustained rate: stop-and-wait, so messages/s = 2 frames per exchange
        count = n * 2
        t0 = time.perf_counter()
        for _ in range(count):
            _round_trip(dev, link)
        dt = time.perf_counter() - t0
        per_s = 2 * count / dt
        benchmark.extra_info.update(
            floor_p50_us=round(floor.p50, 1),
            floor_p99_us=round(floor.p99, 1),
            rt_p50_us=round(rt.p50, 1),
            rt_p99_us=round(rt.p99, 1),
            messages_per_s=round(per_s),
            commands_per_s=round(count / dt),
        )
        print(
            f"\nlink/pty: floor p50 {floor.p50:.1f} us p99 {floor.p99:.1f} us; "
            f"ping rt p50 {rt.p50:.1f} us p99 {rt.p99:.1f} us "
            f"(x{rt.p50 / floor.p50:.1f} / x{rt.p99 / floor.p99:.1f}); "
            f"{per_s:.0f} messages/s ({count / dt:.0f} commands/s)"
        )
        assert dev.fw.decoder.error_count == 0 and link.core.decoder.error_count == 0
        benchmark.pedantic(lambda: _round_trip(dev, link), rounds=50, iterations=1)
    finally:
        link.close()
        tr.close()
