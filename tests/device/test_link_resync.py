"""A controller that replaces another one on a device that did not restart.

The device's command counter (its `newest`) is wherever the previous controller left it;
the new controller starts again at seq 1 (a new state folder, new hardware), so every
command it sends is older than the device's newest: NACK STALE_SEQUENCE. The link must
learn that from the first NACK, move its counter past the device's, and carry on, and a
trip asked for meanwhile must reach the breaker. Real board, real pty, virtual time.
"""

from __future__ import annotations

from goosectl.controller.config.link import LinkConfig
from goosectl.controller.replay.virtual_wire import VirtualPortPair
from goosectl.controller.shell.serial_link import SerialLink
from tests.device.conftest import MS, drain


def _used_device(virtual_pty, commands: int):
    """The board after a first controller sent `commands` pings and went away."""
    link, dev, pair = virtual_pty()
    for _ in range(commands):
        link.send_command("ping", pair.now_ns)
        pair.run_for(20 * MS)
    link.send_command("close", pair.now_ns)
    pair.run_for(500 * MS)
    assert dev.fw.machine("breaker").state == "closed"
    link.close()
    return dev, pair.now_ns


def _second_controller(tr_path: str, dev, now_ns: int):
    link = SerialLink(tr_path, LinkConfig(), now_ns=now_ns)
    # the pair counts bytes in flight per direction: the board's counters include the
    # first controller's traffic, which this one never sees
    link.bytes_in, link.bytes_out = dev.bytes_out, dev.bytes_in
    link.open(now_ns)
    return link, VirtualPortPair(link, dev, start_ns=now_ns)


def test_a_new_controller_resynchronises_its_sequence_and_a_trip_meanwhile_acts(virtual_pty):
    dev, now = _used_device(virtual_pty, 40)
    before = dev.fw.stats.executed["TRIP"]
    link, pair = _second_controller(dev.transport.path, dev, now)
    try:
        # the trip is asked for at once, while the link is still connecting
        seq = link.send_command("trip", pair.now_ns)
        pair.run_for(1000 * MS)
        seen = drain(link)
        assert link.state == "up", seen
        done = [e for e in seen if e.seq == seq and e.kind in ("operation_complete", "cmd_failed")]
        assert [e.kind for e in done] == ["operation_complete"], seen
        assert dev.fw.stats.executed["TRIP"] == before + 1
        assert dev.fw.machine("breaker").state == "open"
        resyncs = [e for e in seen if e.kind == "sequence_resync"]
        assert len(resyncs) == 1, seen  # said once, not per command
        # every command from here on is new to the device: no more STALE_SEQUENCE
        ping = link.send_command("ping", pair.now_ns)
        pair.run_for(100 * MS)
        assert [e.kind for e in drain(link) if e.seq == ping] == ["cmd_ok"]
    finally:
        link.close()
