"""`goosectl demo`: the README's main job (see controller/runtime/demo.py)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from controller.cli import CommandError
from controller.configfile import ConfigError
from controller.logic.config import DEFAULT_CONFIG


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="build a scenario, replay it through the controller and "
        "the simulated breaker, report (no root needed)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="folder for the pcaps, journal and report (default: ./goosectl-demo-<UTC time>)",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_CONFIG,
        help="the controller's config: YAML/TOML/JSON, or SCL with --ied "
        "(examples/scl/bay1.scd --ied GCTL1 describes the demo's substation)",
    )
    p.add_argument("--ied", help="with an SCL --config: the IED the controller is")
    p.add_argument(
        "--in-memory",
        action="store_true",
        help="connect the simulator in memory instead of over a real pty",
    )
    p.add_argument(
        "--serve",
        type=float,
        metavar="SECONDS",
        help="after the scenario keep the controller running and serve `goosectl agent` "
        "for SECONDS (0: until Ctrl-C)",
    )
    p.add_argument("--control", type=Path, help="control socket path (with --serve)")
    p.add_argument(
        "--live",
        action="store_true",
        help="on veth pairs in namespaces with libiec61850 as the protection IED (root)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.live:
        from controller.runtime.demo_live import run_live_demo

        return run_live_demo(args)
    from controller.runtime.demo import print_progress, report_lines, run_demo

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    folder = args.out or Path(f"goosectl-demo-{stamp}")
    print(f"goosectl demo: writing to {folder}/")
    try:
        result = run_demo(
            folder,
            args.config,
            pty=not args.in_memory,
            ied=args.ied,
            progress=print_progress(),
            serve_s=args.serve,
            control=args.control,
        )
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc
    print("\n".join(report_lines(result)))
    return 0
