"""`goosectl status`: the running controller's modes, breaker, inputs and the LGOS view of
every subscription (St, SimSt, LastStNum, ConfRevNum, RxConfRevNum, ErrSt, NdsCom, source),
over its control socket."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from goosectl.controller.cli import EXIT_FINDINGS, CommandError
from goosectl.controller.goose.effects import LgosView
from goosectl.controller.report.bay_report import lgos_lines
from goosectl.controller.shell.control import ControlUnavailable, default_path, request


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "status",
        help="modes, breaker, inputs and every subscription's LGOS of a running controller",
    )
    p.add_argument("--json", action="store_true", help="the reply as JSON")
    p.add_argument("--control", type=Path, help=f"control socket (default: {default_path()})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = args.control or default_path()
    try:
        reply = request(path, {"op": "controller"})
    except ControlUnavailable as exc:
        raise CommandError(f"{exc}: start `goosectl run` (or `goosectl demo --serve`)") from exc
    if args.json or not reply.get("ok"):
        print(json.dumps(reply, indent=2, default=str))
        return 0 if reply.get("ok") else EXIT_FINDINGS
    print("\n".join(text(reply)))
    return 0


def text(r: dict) -> list[str]:
    sim = "on" if r["simulation"] else "off"
    out = [
        f"mode {r['mode']}, simulation {sim}; breaker {r['breaker']} "
        f"(position {r['position']}), device link {r['link']}",
        "interlocks: "
        + (", ".join(f"{k} {v}" for k, v in sorted(r["interlocks"].items())) or "none"),
        "inputs:",
    ]
    for name, i in r["inputs"].items():
        why = f" ({i['reason']})" if "reason" in i else ""
        out.append(f"  {name}: {i['state']}{why}, value {json.dumps(i['value'])}")
    views = [
        LgosView(
            "",
            v["stream"],
            v["gocbRef"],
            v["appid"],
            v["St"],
            v["SimSt"],
            v["LastStNum"],
            v["ConfRevNum"],
            v["RxConfRevNum"],
            v["ErrSt"],
            v["NdsCom"],
            v["src"],
            tuple(sorted(v["refused"].items())),
        )
        for v in r["lgos"]
    ]
    return [*out, *lgos_lines(views)]
