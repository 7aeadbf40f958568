"""Actions of the mode table (tables/mode.yaml) and the names of its states."""

from __future__ import annotations

from goosectl.controller.engine.registry import Registry
from goosectl.controller.logic.effects import CommandWithheld, ModeChanged

REGISTRY = Registry("controller-mode")

#: mode as written (config, commands) -> state of the mode table, and back
STATE_OF = {"on": "on", "test": "test", "test-blocked": "test_blocked", "off": "off"}
MODE_OF = {v: k for k, v in STATE_OF.items()}
#: states in which data with the quality test bit acts, and publications carry the bit
TEST_STATES = frozenset({"test", "test_blocked"})
#: states in which no command reaches the device
WITHHOLDING = frozenset({"test_blocked", "off"})


@REGISTRY.action(factory=True)
def changed(mode: str):
    def action(ctx, ev):
        return [{"mode": mode}, ModeChanged(mode, bool(ctx["simulation"]), str(ev.payload or ""))]

    return action


@REGISTRY.action(factory=True)
def sim_changed(enabled: bool):
    def action(ctx, ev):
        return ModeChanged(ctx["mode"], enabled, str(ev.payload or ""))

    return action


@REGISTRY.action(factory=True)
def withheld(mode: str):
    def action(ctx, ev):
        cmd = ev.payload
        return CommandWithheld(cmd.command, cmd.reason, mode)

    return action
