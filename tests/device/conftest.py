"""Fixtures: the board on a real pty, the controller's SerialLink on its slave path."""

from __future__ import annotations

import threading
import time

import pytest

from goosectl.controller.config.link import LinkConfig
from goosectl.controller.replay.virtual_wire import VirtualPortPair
from goosectl.controller.shell.serial_link import SerialLink
from goosectl.firmware_sim.core import Firmware
from goosectl.firmware_sim.shell import DeviceShell, ShellFaults
from goosectl.firmware_sim.transport import PtyTransport

MS = 1_000_000
FAST = {"breaker": {"anti_pump": 0}, "spring": {"spring_charge_ms": 50}}


@pytest.fixture
def virtual_pty():
    """(link, shell, pair) on one virtual clock through a real pty."""
    made = []

    def make(faults: ShellFaults | None = None, config=None, link_config=None):
        tr = PtyTransport()
        fw = Firmware(config=config if config is not None else {"breaker": {"anti_pump": 0}})
        dev = DeviceShell(tr, fw, faults, clock=lambda: 0)
        link = SerialLink(tr.path, link_config or LinkConfig(), now_ns=0)
        made.append((tr, link))
        link.open(0)
        pair = VirtualPortPair(link, dev)
        pair.run_for(1000 * MS)
        assert link.state == "up"
        return link, dev, pair

    yield make
    for tr, link in made:
        link.close()
        tr.close()


@pytest.fixture
def threaded_sim():
    """The board served in real time by a thread; returns (transport, shell)."""
    started = []

    def make(faults: ShellFaults | None = None, config=None):
        tr = PtyTransport()
        shell = DeviceShell(tr, Firmware(now_ns=time.monotonic_ns(), config=config or FAST), faults)
        stop = threading.Event()
        th = threading.Thread(target=shell.run, args=(stop,), daemon=True)
        th.start()
        started.append((tr, stop, th))
        return tr, shell

    yield make
    for tr, stop, th in started:
        stop.set()
        th.join(5)
        tr.close()


def drain(link: SerialLink) -> list:
    out = list(link.events)
    link.events.clear()
    return out
