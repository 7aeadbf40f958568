"""`goosectl agent ...`: supervisory procedures on a running controller (`goosectl run`,
`goosectl demo --serve`), over its local control socket."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from goosectl.controller.cli import EXIT_OK, CommandError
from goosectl.controller.shell.control import (
    ControlDenied,
    ControlUnavailable,
    default_path,
    request,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agent", help="run and supervise procedures on a running controller")
    p.add_argument(
        "--control",
        type=Path,
        default=None,
        help=f"control socket (default: {default_path()}; env GOOSECTL_CONTROL)",
    )
    a = p.add_subparsers(dest="agent_command", metavar="ACTION")
    a.required = True
    r = a.add_parser("run", help="start a procedure: goosectl agent run isolate bay=1")
    r.add_argument("procedure")
    r.add_argument("params", nargs="*", metavar="key=value")
    a.add_parser("list", help="sessions and available procedures")
    st = a.add_parser("status", help="one session, or all")
    st.add_argument("session", nargs="?")
    for name, helptext in (
        ("confirm", "confirm the step a session waits on"),
        ("deny", "decline the step a session waits on"),
        ("abort", "abort a session (cancels its running tool)"),
        ("history", "every transition of a session, from the journal"),
    ):
        c = a.add_parser(name, help=helptext)
        c.add_argument("session")
    p.set_defaults(func=run)


def _params(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"parameter {item!r} is not key=value")
        out[key] = value
    return out


def run(args: argparse.Namespace) -> int:
    op = args.agent_command
    req: dict = {"op": op}
    if op == "run":
        req.update(procedure=args.procedure, params=_params(args.params))
    elif getattr(args, "session", None):
        req["session"] = args.session
    path = args.control or default_path()
    try:
        reply = request(path, req)
    except ControlDenied as exc:
        raise CommandError(str(exc)) from exc
    except ControlUnavailable as exc:
        raise CommandError(
            f"{exc}: start `goosectl run` (or `goosectl demo --serve`) first"
        ) from exc
    if not reply.get("ok"):  # refused: an unknown procedure or session, a step not waiting
        what = " ".join([op, *([args.procedure] if op == "run" else [req.get("session", "")])])
        why = str(reply.get("error") or "refused").splitlines() or ["refused"]
        raise CommandError(f"agent {what.strip()}: {' '.join(w.strip() for w in why)}")
    print(json.dumps(reply, indent=2, default=str))
    return EXIT_OK
