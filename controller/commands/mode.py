"""`goosectl mode [on|test|test-blocked|off] [--simulation on|off]`: read or switch the
running controller's behaviour mode (IEC 61850-7-4 Mod/Beh) and simulation mode
(LPHD.Sim) over its control socket; every change is journaled."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from goosectl.controller.cli import EXIT_FINDINGS, CommandError
from goosectl.controller.config.bay import MODES
from goosectl.controller.shell.control import ControlUnavailable, default_path, request


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mode",
        help="read or set the running controller's mode (on, test, test-blocked, off) "
        "and simulation mode",
    )
    p.add_argument(
        "mode",
        nargs="?",
        choices=[*MODES, "test/blocked"],
        help="on: act and command; test: also act on test-flagged data, publish with "
        "q.test; test-blocked: as test, no command reaches the device; off: no command, "
        "nothing published",
    )
    p.add_argument(
        "--simulation",
        choices=["on", "off"],
        help="simulation mode (LPHD.Sim): on, a subscription takes its simulated stream "
        "once one arrives; off, simulated frames never act",
    )
    p.add_argument("--control", type=Path, help=f"control socket (default: {default_path()})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    req: dict = {"op": "mode"}
    if args.mode is not None:
        req["mode"] = args.mode
    if args.simulation is not None:
        req["simulation"] = args.simulation == "on"
    path = args.control or default_path()
    try:
        reply = request(path, req)
    except ControlUnavailable as exc:
        raise CommandError(f"{exc}: start `goosectl run` (or `goosectl demo --serve`)") from exc
    print(json.dumps(reply, indent=2, default=str))
    return 0 if reply.get("ok") else EXIT_FINDINGS
