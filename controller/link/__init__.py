"""The controller's side of the device link, sans-IO: link state and pending commands as
tables on the engine (`link.yaml`, `commands.yaml`), driven by `LinkCore`.

No clock, no I/O: `controller.shell.serial_link` is the shell that owns the port.
"""

from controller.link.core import COMMANDS, LinkConfig, LinkCore, LinkEvent

__all__ = ["COMMANDS", "LinkConfig", "LinkCore", "LinkEvent"]
