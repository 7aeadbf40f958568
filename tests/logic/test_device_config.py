"""The device limits of a bay's configuration reach the link that applies them: a value
set in the config file is the one the link's machine runs with (a field that is parsed
but never passed on would look configurable and change nothing)."""

from __future__ import annotations

import pytest

from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.link import LinkConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.config.validate import ConfigError
from goosectl.controller.logic.core import BayController

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


def test_a_bad_link_setting_names_the_field_and_the_reason():
    """`LinkConfig` is validated like every config model: from code too, the error names
    the field and says why (a device parameter against the message schema's range)."""
    with pytest.raises(ValueError) as retries:
        LinkConfig(max_retries=-1)
    assert "max_retries" in str(retries.value)
    assert "greater than or equal to 0" in str(retries.value)
    with pytest.raises(ValueError) as param:
        LinkConfig(device_config={1: 1})
    assert "device_config" in str(param.value)
    assert "OPEN_TIME_MS=1 is outside 5..1000 ms" in str(param.value)


def test_a_bad_device_limit_in_a_file_names_file_line_field_and_reason(tmp_path):
    path = tmp_path / "bay.yaml"
    path.write_text(DEFAULT_CONFIG.read_text().replace("device:", "device:\n  reboot_max: 0", 1))
    with pytest.raises(ConfigError) as exc:
        load_config(path, ControllerConfig)
    (line,) = str(exc.value).splitlines()
    at = DEFAULT_CONFIG.read_text().splitlines().index("device:") + 2  # the line added
    assert line.startswith(f"{path}:{at}: device.reboot_max: ")
    assert "greater than or equal to 1" in line
