"""`goosectl listen`: the live subscriber; every frame classified, every state change shown."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from controller.cli import CommandError
from controller.commands.replay import load_goose_config
from controller.commands.scl import add_check_args, wire_check
from controller.goose.hub import GooseHub
from controller.runtime.goose_live import LiveGoose, require_raw_sockets
from controller.runtime.goose_report import Reporter
from protocols.ethernet.rawsock import RawSocketError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("listen", help="live GOOSE subscriber on raw Ethernet (root)")
    p.add_argument("--iface", required=True, help="interface of network A")
    p.add_argument("--iface-b", help="interface of network B (redundant A/B)")
    p.add_argument(
        "--config",
        help="subscriptions (YAML/TOML, or SCL with --ied); default: observe every stream",
    )
    p.add_argument("--ied", help="with an SCL --config: the IED to configure")
    add_check_args(p)
    p.add_argument("--appid", type=lambda s: int(s, 0), help="print only this APPID")
    p.add_argument("--gocbref", help="print only this gocbRef")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument(
        "--simulation",
        action="store_true",
        help="simulation mode (LPHD.Sim): a subscription switches to its simulated stream "
        "at the first simulated frame (default: simulated frames are refused)",
    )
    p.set_defaults(func=run)


def open_live(hub: GooseHub, iface: str, iface_b: str | None) -> LiveGoose:
    reason = require_raw_sockets()
    if reason:
        raise CommandError(reason)
    try:
        return LiveGoose(hub, iface, iface_b)
    except PermissionError as exc:
        raise CommandError(str(exc)) from exc
    except (RawSocketError, OSError) as exc:
        raise CommandError(f"cannot open raw sockets: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    config = load_goose_config(args.config, args.ied)
    check = wire_check(args.scl, config)
    hub = GooseHub(config, simulation=args.simulation)
    live = open_live(hub, args.iface, args.iface_b)
    reporter = Reporter(hub, args.json, sys.stdout, args.appid, args.gocbref)
    signal.signal(signal.SIGINT, lambda *_: live.stop())
    signal.signal(signal.SIGTERM, lambda *_: live.stop())

    until = time.monotonic_ns() + int(args.duration * 1e9) if args.duration else None
    ready = {"event": "listening", "ifaces": [i for i in (args.iface, args.iface_b) if i]}
    print(json.dumps(ready) if args.json else f"-- listening on {', '.join(ready['ifaces'])}")
    sys.stdout.flush()
    try:
        live.run(
            on_frame=lambda n, ts, b, v, out: (
                check.frame(ts, b, v) if check is not None else None,
                reporter.frame(n, ts, b, v, out),
                sys.stdout.flush(),
            ),
            on_effects=lambda out: (reporter.effects(out), sys.stdout.flush()),
            until_ns=until,
        )
    finally:
        live.close()
    if check is not None and args.json:
        check.print(as_json=True)  # before the closing counters line
    reporter.summary()
    if check is not None and not args.json:
        check.print(as_json=False)
    if not args.json:
        print(json.dumps({"frames": live.frames, "sent": live.sent}))
    return 0
