"""`goosectl web`: the live bay page in a browser (controller/web), a separate process that
reads the controller's control socket and journal and never writes to either except the
confirm and abort requests an OPERATOR sends."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from goosectl.controller.cli import CommandError
from goosectl.controller.commands._sidecar import add_priority_arg, lower_priority
from goosectl.controller.shell.control import default_path

DEFAULT_BIND = "127.0.0.1:8061"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("web", help="the live bay page in a browser (read-only unless --tokens)")
    p.add_argument("--control", type=Path, help=f"control socket (default: {default_path()})")
    p.add_argument("--state", type=Path, help="the controller's state folder (its bay.sqlite)")
    p.add_argument("--journal", type=Path, help="the journal to read (default: STATE/bay.sqlite)")
    p.add_argument(
        "--bind",
        default=DEFAULT_BIND,
        metavar="HOST:PORT",
        help=f"where to listen (default {DEFAULT_BIND}; port 0: any free one); an address "
        "other than loopback needs --tls-cert, --tls-key and --tokens",
    )
    p.add_argument(
        "--fleet-db",
        metavar="URL",
        help="serve the fleet page from the fleet collector's store (its SQLite file, or "
        "sqlite:///PATH) instead of one controller",
    )
    p.add_argument("--tls-cert", type=Path, help="certificate (PEM) for HTTPS")
    p.add_argument("--tls-key", type=Path, help="its private key (PEM)")
    p.add_argument(
        "--tokens",
        type=Path,
        help="token file, one `ROLE NAME TOKEN` a line (VIEWER or OPERATOR), mode 600; "
        "without it the page is read-only",
    )
    add_priority_arg(p)
    p.set_defaults(func=run)


def parse_bind(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise CommandError(f"--bind {text}: expected HOST:PORT, e.g. {DEFAULT_BIND}")
    try:
        n = int(port)
    except ValueError:
        raise CommandError(f"--bind {text}: the port {port!r} is not a number") from None
    if not 0 <= n <= 65535:
        raise CommandError(f"--bind {text}: the port must be 0 to 65535")
    return host.strip("[]"), n


def run(args: argparse.Namespace) -> int:
    from goosectl.controller.web.auth import Sessions, TokenFileError, load_tokens
    from goosectl.controller.web.server import WebServer, is_loopback, tls_context
    from goosectl.controller.web.source import Controller

    host, port = parse_bind(args.bind)
    lower_priority(args.priority, "goosectl web")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise CommandError("--tls-cert and --tls-key go together")
    if not is_loopback(host) and (args.tls_cert is None or args.tokens is None):
        raise CommandError(
            f"--bind {args.bind}: not a loopback address, so the page needs TLS and sign-in: "
            "give --tls-cert, --tls-key and --tokens (or bind 127.0.0.1)"
        )
    tls = None
    if args.tls_cert is not None:
        try:
            tls = tls_context(args.tls_cert, args.tls_key)
        except (OSError, ValueError) as exc:
            raise CommandError(f"--tls-cert/--tls-key: {exc}") from None
    try:
        tokens = load_tokens(args.tokens) if args.tokens is not None else None
    except TokenFileError as exc:
        raise CommandError(str(exc)) from None
    journal = args.journal or (args.state / "bay.sqlite" if args.state else None)
    fleet = None
    if args.fleet_db is not None:
        from goosectl.controller.web.fleet import FleetError, store_path

        if args.control or args.state or args.journal:
            raise CommandError("--fleet-db reads the fleet's store: no --control/--state/--journal")
        try:
            fleet = store_path(args.fleet_db)
        except FleetError as exc:
            raise CommandError(str(exc)) from None
    try:
        server = WebServer(
            (host, port),
            Controller(args.control or default_path()),
            journal,
            Sessions(tokens),
            tls,
            fleet=fleet,
        )
    except OSError as exc:
        raise CommandError(f"--bind {args.bind}: {exc.strerror or exc}") from None
    print(f"goosectl web: {server.url()}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve()
    finally:
        server.server_close()
    return 0
