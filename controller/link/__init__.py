"""The controller's side of the device link, sans-IO: link state and pending commands as
tables on the engine (`link.yaml`, `commands.yaml`), driven by `LinkCore`.

No clock, no I/O: `controller.shell.serial_link` is the shell that owns the port. Its
settings, `LinkConfig`, are a model of `controller.config.link`.
"""

from goosectl.controller.link.core import COMMANDS, LinkCore, LinkEvent

__all__ = ["COMMANDS", "LinkCore", "LinkEvent"]
