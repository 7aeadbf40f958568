"""`goosectl uplink`: a bay's birth, death, state and journal to the fleet's MQTT broker,
as a process of its own beside `goosectl run` (docs/fleet.md)."""

from __future__ import annotations

import argparse
import logging
import signal
from pathlib import Path
from types import FrameType

from goosectl.controller.cli import CommandError
from goosectl.controller.commands._sidecar import add_priority_arg, lower_priority
from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.config.validate import ConfigError
from goosectl.controller.shell.control import default_path

log = logging.getLogger("goosectl.controller.fleet")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "uplink",
        help="send a running controller's state and journal to the fleet's MQTT broker",
    )
    p.add_argument(
        "--config", type=Path, default=DEFAULT_CONFIG, help="the controller's config (uplink:)"
    )
    p.add_argument(
        "--state",
        type=Path,
        default=Path("."),
        help="the controller's state folder: its journal bay.sqlite is read there (read-only) "
        "and the uplink's checkpoint uplink.json kept there (default: .)",
    )
    p.add_argument("--journal", type=Path, help="the journal (default: config journal or STATE)")
    p.add_argument("--control", type=Path, help=f"control socket (default: {default_path()})")
    p.add_argument(
        "--broker", help="broker URL(s), comma-separated: mqtt://HOST:PORT, mqtts://HOST:PORT"
    )
    p.add_argument("--site", help="site topic segment (default: uplink.site)")
    p.add_argument("--bay", help="bay topic segment (default: uplink.bay)")
    p.add_argument("--keepalive", type=int, help="MQTT keepalive, seconds")
    add_priority_arg(p, default=None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from goosectl.controller.config.uplink import UplinkCfg
    from goosectl.controller.fleet.mqtt import BrokerError
    from goosectl.controller.fleet.uplink import Uplink

    try:
        cfg = load_config(args.config, ControllerConfig)
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc
    overrides = {
        k: v
        for k, v in (
            ("broker", args.broker),
            ("site", args.site),
            ("bay", args.bay),
            ("keepalive_s", args.keepalive),
            ("priority", args.priority),
        )
        if v is not None
    }
    try:
        ucfg = UplinkCfg.model_validate({**cfg.uplink.model_dump(), **overrides})
    except ValueError as exc:
        raise CommandError(f"uplink settings: {exc}") from exc
    lower_priority(ucfg.priority, "goosectl uplink")
    journal = args.journal or cfg.journal or args.state / "bay.sqlite"
    args.state.mkdir(parents=True, exist_ok=True)
    control = args.control or cfg.control.socket or default_path()
    try:
        uplink = Uplink(ucfg, journal, args.state, control)
    except BrokerError as exc:
        raise CommandError(str(exc)) from exc

    def stop(signum: int, frame: FrameType | None) -> None:
        uplink.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"uplink {ucfg.site}/{ucfg.bay} -> {', '.join(ucfg.broker)}", flush=True)
    try:
        uplink.run()
    except BrokerError as exc:
        raise CommandError(str(exc)) from exc
    c = uplink.counters
    log.warning(
        "uplink stopped: connects=%d batches=%d rows=%d states=%d lost_links=%d refusals=%s",
        c.connects, c.batches, c.rows, c.states, c.lost_links, c.refusals,
    )  # fmt: skip
    return 0
