"""The device limits of a bay's configuration reach the link that applies them: a value
set in the config file is the one the link's machine runs with (a field that is parsed
but never passed on would look configurable and change nothing)."""

from __future__ import annotations

from controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from controller.config.load import load_config
from controller.logic.core import BayController

LIMITS = {
    "chatter_max": 7,
    "chatter_window_ms": 750.0,
    "reboot_max": 5,
    "reboot_window_ms": 30_000.0,
    "reboot_quiet_ms": 1234.0,
}


def test_every_device_limit_in_the_config_reaches_the_link():
    cfg = load_config(DEFAULT_CONFIG, ControllerConfig)
    cfg = cfg.model_copy(update={"device": cfg.device.model_copy(update=LIMITS)})
    bay = BayController(cfg, 0)
    ctx = bay.link.bus.machines["link"].ctx
    assert {k: ctx[k] for k in LIMITS} == LIMITS
