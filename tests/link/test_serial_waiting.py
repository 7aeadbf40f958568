"""`SerialLink` on a real pty: the device's answer waits in the port while every timeout
of its command comes due (the controller descheduled), and the round that wakes takes it
first (`take_waiting`, then the round's `poll`). The board is `firmware_sim` in memory,
its bytes written into the pty's device side by the test; times are virtual."""

from __future__ import annotations

import time

from goosectl.controller.config.link import LinkConfig
from goosectl.controller.shell.serial_link import SerialLink
from goosectl.firmware_sim.core import Firmware
from goosectl.firmware_sim.transport import PtyTransport

MS = 1_000_000
CONFIG = LinkConfig(response_timeout_ms=50, max_retries=3, idle_ms=60_000)


class Line:
    """The link on the pty's controller side, the board behind its device side."""

    def __init__(self) -> None:
        self.tr = PtyTransport()
        self.fw = Firmware(now_ns=0, config={"breaker": {"anti_pump": 0}})
        self.link = SerialLink(self.tr.path, CONFIG, now_ns=0)
        self.link.open(0)
        for t in range(0, 500 * MS, 10 * MS):
            self.round(t)
        assert self.link.state == "up"
        self.link.events.clear()

    def board(self, t: int) -> None:
        """The board reads what the controller wrote and writes its answers (at `t`)."""
        data = self._drain()
        if data:
            self.fw.receive(data, t)
        self.fw.advance(t)
        out = self.fw.take_output()
        if out:
            self.tr.write(out)
            self._settled()

    def _drain(self) -> bytes:
        """What the controller wrote (the kernel moves it within the settle time)."""
        self._settled()
        got = b""
        while chunk := self.tr.read():
            got += chunk
        return got

    def _settled(self) -> None:
        time.sleep(0.01)  # the pty hands the bytes to the other side

    def round(self, t: int) -> None:
        """One loop round at `t`: the waiting input, the timers, the writes; the board."""
        self.link.take_waiting(t)
        self.link.poll(t)
        self.board(t)

    def close(self) -> None:
        self.link.close()
        self.tr.close()


def test_an_answer_waiting_in_the_pty_past_every_timeout_is_taken_first():
    line = Line()
    try:
        t0 = 600 * MS
        line.round(t0)
        seq = line.link.send_command("ping", t0)
        line.board(t0)  # the board answers at once; the controller is not running
        line.round(t0 + 1000 * MS)  # wakes after all four tries' timeouts came due
        done = [e for e in line.link.events if e.seq == seq and e.kind.startswith("cmd_")]
        assert [e.kind for e in done] == ["cmd_ok"], list(line.link.events)
        assert line.link.state == "up"
    finally:
        line.close()
