"""`goosectl run --config CFG`: the controller live (root for raw sockets)."""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path

from controller.cli import CommandError
from controller.configfile import ConfigError, load_config
from controller.engine import Journal
from controller.logic.config import DEFAULT_CONFIG, ControllerConfig
from controller.runtime.goose_live import require_raw_sockets


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run the bay controller live: GOOSE on raw Ethernet (A/B), "
        "the device on a serial port",
    )
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    p.add_argument("--iface", help="network A (default: goose.interface_a of the config)")
    p.add_argument(
        "--iface-b", help="network B (default: goose.interface_b, unless --iface is given)"
    )
    p.add_argument("--port", help="serial port or URL of the device (default: device.port)")
    p.add_argument("--journal", type=Path, help="SQLite journal (default: config journal)")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--quiet", action="store_true", help="no status line every second")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config, ControllerConfig)
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc
    iface = args.iface or cfg.goose.interface_a
    if not iface:
        raise CommandError(f"{args.config}: goose.interface_a is not set and no --iface given")
    port = args.port or cfg.device.port
    if port == "sim":
        raise CommandError(
            "device.port is `sim`: start one with `goosectl sim --pty` and "
            "pass its path with --port"
        )
    reason = require_raw_sockets()
    if reason:
        raise CommandError(reason)
    from controller.logic.core import BayController
    from controller.runtime.live_bay import BayLive

    journal_path = args.journal or cfg.journal
    journal = Journal(journal_path, durability="group") if journal_path else None
    bay = BayController(cfg, time.monotonic_ns(), journal)
    # interfaces come as a pair: --iface overrides the config's A and B together
    iface_b = args.iface_b if args.iface else cfg.goose.interface_b
    try:
        live = BayLive(bay, iface, iface_b, port, status_every=not args.quiet)
    except PermissionError as exc:
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        raise CommandError(f"cannot open the network interfaces: {exc}") from exc
    signal.signal(signal.SIGINT, lambda *_: live.stop())
    signal.signal(signal.SIGTERM, lambda *_: live.stop())
    until = time.monotonic_ns() + int(args.duration * 1e9) if args.duration else None
    print(
        json.dumps({"event": "running", "iface": iface, "iface_b": iface_b, "port": port}),
        flush=True,
    )
    try:
        live.run(until)
    finally:
        if journal is not None:
            journal.close()
    print(
        json.dumps(
            {
                "event": "stopped",
                "breaker": bay.bay.state,
                "frames_in": live.live.frames,
                "frames_out": live.live.sent,
                "counters": dict(live.status.counts),
                "goose": bay.hub.counters(),
            }
        )
    )
    return 0
