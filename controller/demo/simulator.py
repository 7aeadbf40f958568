"""The bay controller and the firmware simulator joined by a real pty, on one virtual clock.

The simulator's shell (`firmware_sim.shell.DeviceShell`) owns the pty master; the
controller's serial shell (`SerialLink`, the same one `goosectl run` uses on a tty) opens
the slave with pyserial. `VirtualPortPair` moves virtual time only when no byte is in
flight, so the bytes really cross the kernel's tty layer and the run stays deterministic.
"""

from __future__ import annotations

from typing import Any

from goosectl.controller.logic.core import BayController
from goosectl.controller.replay.virtual_wire import VirtualPortPair
from goosectl.controller.shell.serial_link import SerialLink
from goosectl.firmware_sim.core import Firmware
from goosectl.firmware_sim.shell import DeviceShell
from goosectl.firmware_sim.transport import PtyTransport


def pty_wire(endpoint: BayController | Any, fw: Firmware, t0: int):
    """(wire, close): a VirtualPortPair over a fresh pty, and how to tear it down.
    `endpoint` is the bay controller, or the bay with the agent (`AgentBay`)."""
    transport = PtyTransport()
    device = DeviceShell(transport, firmware=fw, clock=lambda: t0)
    port = SerialLink(transport.path, core=endpoint, now_ns=t0)
    if not port.open(t0):
        transport.close()
        raise OSError(f"cannot open the simulator's pty {transport.path}: {port.open_errors}")
    pair = VirtualPortPair(port, device, start_ns=t0)

    def close() -> None:
        port.close()
        transport.close()

    return pair, close
