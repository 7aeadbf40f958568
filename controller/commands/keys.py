"""`goosectl keys check FILE` / `goosectl keys reload`: the IEC 62351-6 key file.

`check` reads a key file as `run` would (every secret's mode and length checked) and lists
its keys and their windows; `reload` asks the running controller to read its key file
again (as SIGHUP does): a bad file is refused and the controller keeps its keys.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from goosectl.controller.cli import EXIT_FINDINGS, CommandError
from goosectl.controller.config.keys import load_keys
from goosectl.controller.config.validate import ConfigError
from goosectl.controller.shell.control import ControlUnavailable, default_path, request


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("keys", help="check an IEC 62351-6 key file, or reload the running one")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    c = verbs.add_parser("check", help="read a key file as `run` would and list its keys")
    c.add_argument("file", help="the key file (YAML)")
    c.set_defaults(func=check)
    r = verbs.add_parser("reload", help="the running controller reads its key file again")
    r.add_argument("--control", type=Path, help=f"control socket (default: {default_path()})")
    r.set_defaults(func=reload)


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat().replace("+00:00", "Z")


def check(args: argparse.Namespace) -> int:
    try:
        kf = load_keys(args.file)
    except ConfigError as exc:
        raise CommandError(f"key file: {exc}") from None
    out = {
        "file": kf.source,
        "grace_s": kf.grace_ns / 1e9,
        "keys": [
            {
                "key_id": k.key_id,
                "algorithm": k.algorithm,
                "not_before": _iso(k.not_before_ns),
                "not_after": _iso(k.not_after_ns),
                "chain": k.chain,
            }
            for k in sorted(kf.keys.values(), key=lambda k: (k.not_before_ns, k.key_id))
        ],
    }
    print(json.dumps(out, indent=2))
    return 0


def reload(args: argparse.Namespace) -> int:
    try:
        reply = request(args.control or default_path(), {"op": "reload_keys"})
    except ControlUnavailable as exc:
        raise CommandError(f"{exc}: start `goosectl run`") from exc
    print(json.dumps(reply, indent=2, default=str))
    return 0 if reply.get("ok") else EXIT_FINDINGS
