"""`goosectl fleet ...`: the central side of the fleet (docs/fleet.md): `collect` keeps
the store from the broker, `status` prints one row per bay, `journal` reads a bay's rows."""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path
from types import FrameType

from goosectl.controller.cli import EXIT_FINDINGS, CommandError
from goosectl.controller.commands._sidecar import add_priority_arg, lower_priority

DEFAULT_DB = "fleet.sqlite"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet", help="the fleet's central store: collect, status, journal")
    a = p.add_subparsers(dest="fleet_command", metavar="ACTION")
    a.required = True
    c = a.add_parser("collect", help="store every bay's birth, death, state and journal")
    c.add_argument("--broker", required=True, help="broker URL(s), comma-separated")
    c.add_argument("--credentials", type=Path, help="file with username:password")
    c.add_argument("--ca-file", type=Path, help="CA certificates for mqtts://")
    c.add_argument("--client-id", default="goosectl-collector", help="the persistent session")
    # the central side: on its own host it has no controller to yield to, and beside the
    # brokers and bays (the demo, the load test) SCHED_IDLE starved it (docs/fleet.md)
    add_priority_arg(c, default="normal")
    for q in (
        c,
        a.add_parser("status", help="one row per bay"),
        a.add_parser("journal", help="a bay's central journal rows"),
    ):
        q.add_argument("--db", default=DEFAULT_DB, help="store: a SQLite file or postgresql://...")
    st = a.choices["status"]
    st.add_argument("--json", action="store_true", help="the rows as JSON")
    st.add_argument("--stale-s", type=float, default=25.0, help="a state older is stale")
    j = a.choices["journal"]
    j.add_argument("bay", metavar="SITE/BAY")
    j.add_argument("--since", type=int, default=0, help="rows after this seq")
    j.add_argument("--limit", type=int, default=1000)
    d = a.add_parser("demo", help="the fleet on this machine: a NATS cluster, N bays, no root")
    d.add_argument("--bays", type=int, default=3, help="how many bays (default 3)")
    d.add_argument("--keep", action="store_true", help="keep the demo's folder")
    pr = a.add_parser("procedure", help="start a procedure on a bay: SITE/BAY NAME key=value")
    pr.add_argument("bay", metavar="SITE/BAY")
    pr.add_argument("procedure")
    pr.add_argument("params", nargs="*", metavar="key=value")
    remote = [pr]
    for name in ("confirm", "abort"):
        q = a.add_parser(name, help=f"{name} the step a bay's session waits on")
        q.add_argument("bay", metavar="SITE/BAY")
        q.add_argument("session")
        q.add_argument("step")
        remote.append(q)
    for q in remote:
        q.add_argument("--broker", required=True, help="broker URL")
        q.add_argument("--credentials", type=Path, help="file with username:password")
        q.add_argument("--ca-file", type=Path, help="CA certificates for mqtts://")
        q.add_argument(
            "--role", default="OPERATOR", choices=["VIEWER", "OPERATOR"], help="IEC 62351-8"
        )
        q.add_argument("--identity", default=_identity(), help="who asks (journaled)")
        q.add_argument("--timeout", type=float, default=15.0, help="seconds for the answer")
    p.set_defaults(func=run)


def _identity() -> str:
    import getpass
    import socket

    return f"{getpass.getuser()}@{socket.gethostname()}"


def _remote(args: argparse.Namespace) -> int:
    from goosectl.controller.commands.agent import _params
    from goosectl.controller.fleet.remote import call

    site, sep, bay = args.bay.partition("/")
    if not sep:
        raise CommandError(f"{args.bay!r}: a bay is SITE/BAY")
    req: dict = {"op": args.fleet_command, "role": args.role, "identity": args.identity}
    if args.fleet_command == "procedure":
        req.update(op="run", procedure=args.procedure, params=_params(args.params))
    else:
        req.update(session=args.session, step=args.step)
    try:
        resp = call(
            [u.strip() for u in args.broker.split(",") if u.strip()],
            site,
            bay,
            req,
            credentials=args.credentials,
            ca_file=args.ca_file,
            timeout_s=args.timeout,
        )
    except (TimeoutError, OSError, ValueError) as exc:
        raise CommandError(str(exc)) from exc
    print(json.dumps(resp, indent=2, default=str))
    return 0 if resp.get("ok") else EXIT_FINDINGS


def run(args: argparse.Namespace) -> int:
    if args.fleet_command == "collect":
        return _collect(args)
    if args.fleet_command == "demo":
        from goosectl.controller.fleet.demo import run_demo

        try:
            return run_demo(max(1, args.bays), keep=args.keep)
        except (FileNotFoundError, TimeoutError) as exc:
            raise CommandError(str(exc)) from exc
    if args.fleet_command in ("procedure", "confirm", "abort"):
        return _remote(args)
    from goosectl.controller.fleet.store import Store

    try:
        store = Store(args.db)
    except Exception as exc:
        raise CommandError(f"store {args.db}: {exc}") from exc
    try:
        if args.fleet_command == "status":
            from goosectl.controller.fleet.view import fleet_rows, table

            rows = fleet_rows(store, time.time_ns(), args.stale_s)
            if args.json:
                print(json.dumps(rows, indent=2))
            else:
                print("\n".join(table(rows)))
            return EXIT_FINDINGS if any(r["gaps"] or r["stale"] for r in rows) else 0
        for r in store.rows(args.bay, args.since, args.limit):
            print(json.dumps(r))
        return 0
    finally:
        store.close()


def _collect(args: argparse.Namespace) -> int:
    from goosectl.controller.fleet.collector import Collector
    from goosectl.controller.fleet.mqtt import BrokerError

    lower_priority(args.priority, "goosectl fleet collect")
    try:
        col = Collector(
            [u.strip() for u in args.broker.split(",") if u.strip()],
            args.db,
            client_id=args.client_id,
            credentials=args.credentials,
            ca_file=args.ca_file,
        )
    except BrokerError as exc:
        raise CommandError(str(exc)) from exc

    def stop(signum: int, frame: FrameType | None) -> None:
        col.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    col.on_subscribed = lambda: print(f"subscribed: {args.broker} -> {args.db}", flush=True)
    col.run()
    print(f"stored {col.stored} rows; refused {dict(col.refused)}", flush=True)
    return 0
