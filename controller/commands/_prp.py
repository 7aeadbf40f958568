"""`--prp native|kernel|off` of `run`, `listen`, `publish`, `capture` and `replay`: the
option and the few steps every command shares (the leading underscore keeps this module
out of the command discovery of `controller.cli`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from goosectl.controller.cli import CommandError
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.shell.goose_live import LiveGoose
from goosectl.controller.shell.prp_live import PrpLive, alarm_json, attach, check_kernel_device


def add_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--prp",
        choices=["off", "native", "kernel"],
        help="PRP (IEC 62439-3): native = goosectl is the LRE on --iface (LAN A) and "
        "--iface-b (LAN B); kernel = --iface is the kernel's PRP device; default: the "
        "config's goose.prp, else off",
    )


def config_with(
    config: GooseConfig,
    args: argparse.Namespace,
    iface: str | None = None,
    iface_b: str | None = None,
) -> GooseConfig:
    """The config with ``--prp`` applied, the interfaces (``args.iface`` and
    ``args.iface_b`` unless given) checked for the mode."""
    mode = getattr(args, "prp", None)
    if mode is not None and mode != config.prp.mode:
        config = config.model_copy(update={"prp": config.prp.model_copy(update={"mode": mode})})
    iface = iface or getattr(args, "iface", None)
    iface_b = iface_b or getattr(args, "iface_b", None)
    if config.prp.mode == "kernel" and iface:
        if iface_b:
            raise CommandError("--prp kernel: give the PRP device as --iface, no --iface-b")
        why = check_kernel_device(iface)
        if why is not None:
            raise CommandError(f"--prp kernel: {why}")
    return config


def start(live: LiveGoose, config: GooseConfig, reporter: Any | None = None) -> PrpLive | None:
    """The native LRE on ``live`` (None in the other modes); alarms to ``reporter``."""
    prp = attach(live, config.prp)
    if prp is not None and reporter is not None:

        def on_alarm(a: Any) -> None:
            reporter.alarm(alarm_json(a))
            sys.stdout.flush()

        prp.on_alarm = on_alarm
    return prp
