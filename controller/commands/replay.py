"""`goosectl replay FILE`: the subscriber (and any configured publishers) over a capture."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from controller.cli import CommandError
from controller.configfile import ConfigError, load_config
from controller.engine import Journal
from controller.goose.config import GooseConfig
from controller.goose.hub import GooseHub
from controller.runtime.goose_report import Reporter
from controller.runtime.replay import Replay, capture_frames
from protocols.ethernet.pcap import CaptureError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay", help="run the GOOSE machines over a pcap/pcapng on the virtual clock"
    )
    p.add_argument("file", type=Path)
    p.add_argument(
        "--config",
        type=Path,
        help="subscriptions/publishers (YAML or TOML); "
        "without it every stream seen is supervised (observer mode)",
    )
    p.add_argument("--out", type=Path, help="write frames the publishers send to this pcap")
    p.add_argument("--journal", type=Path, help="SQLite journal of every transition")
    pace = p.add_mutually_exclusive_group()
    pace.add_argument("--speed", type=float, help="pace against the wall clock (1 = real time)")
    pace.add_argument("--topspeed", action="store_true", help="as fast as possible (default)")
    p.add_argument("--loop", type=int, default=1, help="replay the capture N times")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--appid", type=lambda s: int(s, 0), help="print only this APPID")
    p.add_argument("--gocbref", help="print only this gocbRef")
    p.add_argument("--quiet", action="store_true", help="print only the per-stream report")
    p.set_defaults(func=run)


def load_goose_config(path: Path | None) -> GooseConfig:
    if path is None:
        return GooseConfig()
    try:
        return load_config(path, GooseConfig)
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc


def run(args: argparse.Namespace) -> int:
    config = load_goose_config(args.config)
    if args.speed is not None and args.speed <= 0:
        raise CommandError("--speed must be > 0")
    if args.loop < 1:
        raise CommandError("--loop must be >= 1")
    journal = Journal(args.journal, durability="group") if args.journal else None
    hub = GooseHub(config, journal)
    reporter = Reporter(hub, args.json, sys.stdout, args.appid, args.gocbref)

    def on_frame(number, ts, data, effects):
        if not args.quiet:
            reporter.frame(number, ts, data, None, effects)

    def on_effects(effects):
        if not args.quiet:
            reporter.effects(effects)

    replay = Replay(hub, args.out, args.speed, on_frame, on_effects)
    try:
        replay.run(capture_frames(args.file, args.loop))
    except CaptureError as exc:
        raise CommandError(str(exc)) from exc
    finally:
        replay.close()
    reporter.summary()
    return 0
