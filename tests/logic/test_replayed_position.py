"""An old POSITION_CHANGE replayed on the serial line must not revert the breaker view.

The bay controller drives the real board over a real pty on the virtual clock. The board
closes (its POSITION_CHANGE ON carries a high event seq of that boot), restarts (event seqs
start again at 1), and trips: its ACKs report OFF. The old ON frame is then written onto
the line every 10 ms, as a faulty or hostile device would: its seq is "newer" than this
boot's, but this boot's own counter (every ACK's event_seq) says it never happened. The
bay must stay open and its published XCBR Pos must not move.
"""

from __future__ import annotations

import os
from pathlib import Path

from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.logic.core import BayController
from goosectl.controller.logic.effects import PublishTopic
from goosectl.controller.replay.virtual_wire import VirtualPortPair
from goosectl.controller.shell.serial_link import SerialLink
from goosectl.firmware_sim.core import Firmware
from goosectl.firmware_sim.shell import DeviceShell
from goosectl.firmware_sim.transport import PtyTransport
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.stream import frame

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "controller" / "bay1.yaml"
MS = 1_000_000


def _pos_publications(bay: BayController) -> int:
    """New states of XCBR Pos the bay asked for (each is a new stNum on the wire)."""
    return sum(1 for r in bay.reports if type(r) is PublishTopic and r.topic == "position")


def test_an_old_position_event_replayed_after_a_restart_and_a_trip_changes_nothing():
    tr = PtyTransport()
    fw = Firmware(config={"breaker": {"anti_pump": 0}, "spring": {"spring_charge_ms": 50}})
    dev = DeviceShell(tr, fw, None, clock=lambda: 0)
    bay = BayController(load_config(CONFIG, ControllerConfig), 0, None)
    bay.start(0)
    link = SerialLink(tr.path, core=bay, now_ns=0)
    try:
        link.open(0)
        pair = VirtualPortPair(link, dev)
        pair.run_for(1000 * MS)
        # a busy first boot: its event seqs climb well above what the next boot will reach
        for _ in range(4):
            bay.link.send_command("close", pair.now_ns)
            pair.run_for(500 * MS)
            bay.link.send_command("trip", pair.now_ns)
            pair.run_for(500 * MS)
        bay.link.send_command("close", pair.now_ns)
        pair.run_for(500 * MS)
        assert bay.bay.state == "closed"
        old_on = frame(
            m.PositionChange(
                bay.link.view["last_event_seq"],
                m.Dbpos.ON,
                m.Dbpos.INTERMEDIATE,
                m.PositionCause.CLOSE_COMMAND,
                60,
            )
        )
        bay.link.send_command("reset", pair.now_ns, mode=m.ResetMode.REBOOT)
        pair.run_for(2000 * MS)
        bay.link.send_command("trip", pair.now_ns)
        pair.run_for(500 * MS)
        assert bay.bay.state == "open" and fw.machine("breaker").state == "open"
        published = _pos_publications(bay)
        for _ in range(100):
            os.write(tr.pair.master_fd, old_on)  # onto the line, as the device would
            dev.bytes_out += len(old_on)
            pair.run_for(10 * MS)
        for _ in range(3):  # the device's own answers, which report OFF
            bay.link.send_command("ping", pair.now_ns)
            pair.run_for(100 * MS)
        assert bay.link.view["position"] == int(m.Dbpos.OFF)
        assert bay.bay.state == "open"
        assert bay.bay.ctx["position"] == "off"
        assert _pos_publications(bay) == published, "the replay moved XCBR Pos"
        assert bay.link.view["replayed_events"] >= 1  # counted, not silently dropped
        # the same old change under the very next seq of this boot: the seq cannot tell,
        # but it moves the breaker from where it is not (INTERMEDIATE -> ON while OFF)
        nxt = frame(
            m.PositionChange(
                (bay.link.view["last_event_seq"] + 1) & 0xFFFF,
                m.Dbpos.ON,
                m.Dbpos.INTERMEDIATE,
                m.PositionCause.CLOSE_COMMAND,
                60,
            )
        )
        os.write(tr.pair.master_fd, nxt)
        dev.bytes_out += len(nxt)
        pair.run_for(500 * MS)
        assert bay.bay.state == "open" and bay.bay.ctx["position"] == "off"
        assert _pos_publications(bay) == published, "the replay moved XCBR Pos"
        # and the breaker still works: a close now is a change the view follows
        bay.link.send_command("close", pair.now_ns)
        pair.run_for(500 * MS)
        assert bay.bay.state == "closed" and fw.machine("breaker").state == "closed"
    finally:
        link.close()
        tr.close()
