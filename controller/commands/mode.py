"""`goosectl mode [on|test|test-blocked|off] [--simulation on|off]`: read or switch the
running controller's behaviour mode (IEC 61850-7-4 Mod/Beh) and simulation mode
(LPHD.Sim) over its control socket; every change is journaled.

It prints one line a person reads (`mode test, simulation off (changed: mode)`), or the
controller's reply as JSON with `--json`. A refusal is one line on stderr and exit 2, as
for `agent`: a command that printed a reply with `"ok": false` looked like it had worked."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from goosectl.controller.cli import EXIT_OK, CommandError
from goosectl.controller.config.bay import MODES
from goosectl.controller.shell.control import (
    ControlDenied,
    ControlUnavailable,
    default_path,
    request,
)


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
    p.add_argument("--json", action="store_true", help="the controller's reply as JSON")
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
    except ControlDenied as exc:
        raise CommandError(str(exc)) from exc
    except ControlUnavailable as exc:
        raise CommandError(
            f"{exc}: start `goosectl run` (or `goosectl demo --serve`), or name its socket "
            "with --control PATH"
        ) from exc
    if not reply.get("ok") or "mode" not in reply:
        why = " ".join(str(reply.get("error") or "refused").split())
        raise CommandError(f"mode: the controller on {path} refused: {why}")
    print(json.dumps(reply, indent=2, default=str) if args.json else text(req, reply))
    return EXIT_OK


def text(req: dict, reply: dict) -> str:
    """`mode test, simulation off (changed: mode)`: what the controller is in now, and
    whether this request changed it (a request for what already holds changes nothing)."""
    now = f"mode {reply['mode']}, simulation {'on' if reply.get('simulation') else 'off'}"
    if set(req) == {"op"}:
        return now
    changed = reply.get("changed") or []
    return f"{now} ({'changed: ' + ', '.join(changed) if changed else 'unchanged: already so'})"
