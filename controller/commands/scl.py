"""`goosectl scl show|config`: read SCL (SCD, CID, ICD, IID) files.

`show` lists every IED's GOOSE control blocks (references, address, members with their MMS
types) and what each IED subscribes to; `config` writes the controller config of one IED.
Findings (broken references) go to stderr with file, line and element path; the rest of
the file is still shown. Exit 2 if the file cannot be read as SCL at all.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import yaml

from goosectl.controller.cli import CommandError
from goosectl.protocols.files import write_new
from goosectl.protocols.scl import Scl, SclError, load_scl

log = logging.getLogger(__package__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scl", help="read SCL files: show GoCBs and subscriptions, write configs")
    ssub = p.add_subparsers(dest="scl_command", metavar="SUBCOMMAND")
    ssub.required = True
    show = ssub.add_parser("show", help="every IED with its GoCBs and what it subscribes to")
    show.add_argument("file", type=Path)
    show.add_argument("--ied", help="only this IED")
    show.add_argument("--json", action="store_true", help="one JSON object")
    show.set_defaults(func=run_show)
    cfg = ssub.add_parser("config", help="write the controller config of one IED")
    cfg.add_argument("file", type=Path)
    cfg.add_argument("--ied", help="the IED to configure (optional if the file has one)")
    cfg.add_argument("--out", type=Path, help="write here (default: stdout)")
    cfg.set_defaults(func=run_config)


def read(path: Path, ied: str | None = None) -> Scl:
    try:
        scl = load_scl(path, ied)
    except SclError as exc:
        raise CommandError(str(exc)) from exc
    for f in scl.findings:
        log.warning("%s", f)
    return scl


def run_show(args: argparse.Namespace) -> int:
    from goosectl.controller.config.scl.view import show_json, show_text

    scl = read(args.file)
    try:
        if args.json:
            print(json.dumps(show_json(scl, args.ied), indent=2))
        else:
            print("\n".join(show_text(scl, args.ied)))
    except KeyError as exc:
        raise CommandError(exc.args[0]) from None
    return 0


class _Dumper(yaml.SafeDumper):
    """Writes APPIDs in hex, as SCL does; lists of scalars on one line."""


class Hex(int):
    pass


_Dumper.add_representer(
    Hex, lambda d, v: d.represent_scalar("tag:yaml.org,2002:int", f"0x{int(v):04x}")
)


def _hex_appids(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: Hex(v) if k == "appid" else _hex_appids(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_hex_appids(x) for x in data]
    return data


def config_text(scl: Scl, ied: str | None, source: Path) -> str:
    from goosectl.controller.config.scl.loader import SclConfigError, config_data, pick_ied

    try:
        view = pick_ied(scl, ied)
        data, notes = config_data(scl, view.name)
    except SclConfigError as exc:
        raise CommandError(str(exc)) from None
    head = [
        f"# Controller config of IED {view.name}, written by `goosectl scl config` from {source}.",
        "# The SCL is the source of truth: regenerate after it changes. Keep what SCL cannot",
        "# say (device port, logic timings, A/B, names, initial values) in an overlay instead:",
        f"#   scl: {{file: {source.name}, ied: {view.name}}}",
        "# plus only those keys, used as --config (README: SCL).",
    ]
    if notes:
        head += ["#", "# To fill in:"] + [f"#   {n}" for n in notes]
    if scl.findings:
        head += ["#", "# Findings in the SCL:"] + [f"#   {f}" for f in scl.findings]
    body = yaml.dump(
        _hex_appids(data), Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=100
    )
    return "\n".join(head) + "\n" + body


def run_config(args: argparse.Namespace) -> int:
    scl = read(args.file, args.ied)
    text = config_text(scl, args.ied, args.file)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    write_new(args.out, text)
    # the file just written must load as it is: check it the way every command will
    from goosectl.controller.config.bay import ControllerConfig
    from goosectl.controller.config.load import load_config
    from goosectl.controller.config.validate import ConfigError

    try:
        load_config(args.out, ControllerConfig)
    except ConfigError as exc:
        raise CommandError(f"the written config does not load (a bug):\n{exc}") from exc
    log.info("wrote %s", args.out)
    return 0


# -- the wire check hooks of `replay` and `listen` ------------------------------------------


def add_check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scl",
        type=Path,
        metavar="SCD",
        help="check every stream against this SCL file: matched, mismatched (each field "
        "named), missing or unexpected, in a table at the end",
    )


class WireRun:
    """A wire check as a command runs it: feed frames, print the verdicts at the end.
    `full`: every stream (the `--scl` table); otherwise only configured streams missing."""

    def __init__(self, check, title: str, full: bool) -> None:
        self.check = check
        self.title = title
        self.full = full

    def frame(self, ts_ns: int, buf: bytes, vlan=None) -> None:
        self.check.frame(ts_ns, buf, vlan)

    def print(self, as_json: bool, out=None) -> None:
        from goosectl.controller.config.scl.wire import table

        out = out or sys.stdout
        verdicts = self.check.verdicts()
        if not self.full:
            verdicts = [v for v in verdicts if v.status == "missing"]
            if not verdicts:
                return
        if as_json:
            for v in verdicts:
                out.write(json.dumps(v.as_json()) + "\n")
        else:
            out.write("\n" + "\n".join(table(verdicts, self.title)) + "\n")


def wire_check(scl_path: Path | None, config) -> WireRun | None:
    """The check to run: against `--scl`, else the config's subscriptions (then only the
    ones never seen are reported: a configured stream that never came is not silent).
    None when there is nothing to expect."""
    from goosectl.controller.config.scl.wire import (
        WireCheck,
        expected_from_config,
        expected_from_scl,
    )

    if scl_path is not None:
        return WireRun(WireCheck(expected_from_scl(read(scl_path))), f"wire vs {scl_path}", True)
    if config is not None and config.subscriptions:
        return WireRun(WireCheck(expected_from_config(config)), "configured streams", False)
    return None
