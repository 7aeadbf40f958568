"""`goosectl config check FILE`: validate any file goosectl reads, as what it is.

goosectl reads four kinds of document: the controller config (one format for every command;
a GOOSE-only file is the same schema with the bay parts absent), transition tables,
procedures, and SCL. `check` tells which kind a file is from its content (a table has
`states:`, a procedure `steps:`, a config its sections; SCL by suffix or its root element),
validates it the way the commands that use it do, and prints every finding with the file,
line, key and reason. Exit 0 valid, 1 findings, 2 the file cannot be read or is none of
these (a capture, a journal, a binary).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from goosectl.controller.cli import EXIT_FINDINGS, EXIT_OK, CommandError

#: what a top-level key says about the kind of a YAML/TOML/JSON document
TABLE_KEYS = frozenset({"states", "transitions", "initial", "events"})
PROCEDURE_KEYS = frozenset({"steps", "start"})

#: magic numbers of files goosectl writes or reads that are not documents
MAGIC = (
    (b"\xd4\xc3\xb2\xa1", "a packet capture (pcap): `goosectl decode` or `replay` read it"),
    (b"\xa1\xb2\xc3\xd4", "a packet capture (pcap): `goosectl decode` or `replay` read it"),
    (b"\x4d\x3c\xb2\xa1", "a packet capture (pcap): `goosectl decode` or `replay` read it"),
    (b"\xa1\xb2\x3c\x4d", "a packet capture (pcap): `goosectl decode` or `replay` read it"),
    (b"\x0a\x0d\x0d\x0a", "a packet capture (pcapng): `goosectl decode` or `replay` read it"),
    (b"SQLite format 3\x00", "an SQLite database (a journal?), not a config"),
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="check any config, table, procedure or SCL file")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION")
    csub.required = True
    c = csub.add_parser(
        "check",
        help="say what kind of file it is and validate it as such; findings exit 1",
        description="Validate a controller config (full or GOOSE-only), a transition table, "
        "a procedure or an SCL file, as the commands that read it do. Exit 0 valid, "
        "1 findings (each with file, line, key and reason), 2 unreadable or none of these.",
    )
    c.add_argument("file", type=Path)
    c.add_argument("--ied", help="SCL (or a config with an scl: overlay): the IED to configure")
    c.set_defaults(func=cmd_check)


@dataclass(frozen=True)
class Kind:
    name: str  # "config", "table", "procedure", "scl"
    why: str  # what gave it away, for the user


def sniff(path: Path) -> tuple[Kind, dict | None]:
    """The kind of document at `path`, and its parsed data when it is YAML/TOML/JSON.

    Raises CommandError (exit 2) for a file that cannot be read or is not a document at
    all; a document that does not parse is reported by its checker as findings."""
    from goosectl.controller.engine import TableError
    from goosectl.controller.engine.loader import read_document
    from goosectl.protocols.scl import SCL_SUFFIXES

    if path.is_dir():
        raise CommandError(f"{path}: is a folder, not a file")
    try:
        with path.open("rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror}") from None
    for magic, what in MAGIC:
        if head.startswith(magic):
            raise CommandError(f"{path}: {what}")
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if path.suffix.lower() in SCL_SUFFIXES or (
        text.startswith(b"<") and b"<SCL" in head.replace(b"scl:SCL", b"SCL")
    ):
        return Kind("scl", "SCL (IEC 61850-6)"), None
    if text.startswith(b"<"):
        raise CommandError(f"{path}: an XML file that is not SCL (no <SCL> root)")
    if path.suffix.lower() not in (".yaml", ".yml", ".toml", ".json"):
        raise CommandError(
            f"{path}: not a YAML, TOML or JSON document (by its name), nor SCL: "
            "configs, tables and procedures are .yaml, .toml or .json"
        )
    try:
        data, _ = read_document(path)
    except TableError:
        return Kind("unparsed", "a document that does not parse"), None
    keys = set(data)
    if keys & TABLE_KEYS and not keys & PROCEDURE_KEYS:
        return Kind("table", f"a transition table ({', '.join(sorted(keys & TABLE_KEYS))})"), data
    if "steps" in keys:
        return Kind("procedure", "a procedure (steps:)"), data
    from goosectl.controller.config.bay import ControllerConfig
    from goosectl.controller.config.goose import GooseConfig

    if keys & {*ControllerConfig.model_fields, "scl"}:
        return Kind("config", "a controller config"), data
    if keys & set(GooseConfig.model_fields):
        return Kind("config", "a GOOSE-only controller config (the goose section)"), data
    raise CommandError(
        f"{path}: cannot tell what this is from its top-level keys ({', '.join(sorted(keys))}): "
        "a config has goose:/device:/logic:/inputs: (or subscriptions:/publishers:), a table "
        "states:/transitions:, a procedure steps:"
    )


def _findings(path: Path, what: str, findings: list[str]) -> NoReturn:
    """Print each finding, then say how many there were."""
    show_findings(findings)
    raise CommandError(f"{path}: {what}: {len(findings)} finding(s)", EXIT_FINDINGS)


def show_findings(findings: list[str]) -> None:
    """Each finding on stderr. A finding may span lines (a parser's message quotes the line
    it stopped at): its later lines are indented, so what a user counts on the screen is
    the number the command reports (`config check`, `table check`)."""
    for finding in findings:
        first, *rest = [line for line in finding.splitlines() if line.strip()] or [""]
        print(first, file=sys.stderr)
        for line in rest:
            print(f"    {line}", file=sys.stderr)


def config_findings(exc: BaseException) -> list[str]:
    """The findings a ConfigError stands for. A document that does not parse carries them
    as a TableError (each one may be several lines); validation and SCL errors are one
    line per finding, a line that starts with blanks continuing the one before."""
    from goosectl.controller.engine import TableError

    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, TableError) and cause.findings:
            return [str(f) for f in cause.findings]
        cause = cause.__cause__
    findings: list[str] = []
    for line in str(exc).splitlines():
        if not line.strip():
            continue
        if findings and line[:1].isspace():
            findings[-1] += "\n" + line
        else:
            findings.append(line)
    return findings


def check_table(path: Path, registry_path: list[Path] | None = None, limits=None) -> str:
    """A table as `table check` checks it; returns the summary, raises with findings."""
    from goosectl.controller.engine import Table, TableError
    from goosectl.controller.engine.loader import DEFAULT_LIMITS

    try:
        t = Table.load(path, registry_path=registry_path or [], limits=limits or DEFAULT_LIMITS)
    except TableError as exc:
        _io_error(path, exc)
        _findings(path, "table", [str(f) for f in exc.findings])
    spec = t.spec
    return (
        f"table {spec.name!r} v{spec.version}: {len(spec.states)} states, "
        f"{len(spec.events)} events, {len(spec.transitions)} transitions, "
        f"{len(spec.timers)} timers"
    )


def check_procedure(path: Path) -> str:
    """A procedure as the agent loads it (steps, routes against tool outcomes, workflow)."""
    from goosectl.controller.agent.procedure import ProcedureError, load_procedure

    try:
        proc = load_procedure(path)
    except ProcedureError as exc:
        _io_error(path, exc)
        _findings(path, "procedure", [str(f) for f in exc.findings])
    spec = proc.spec
    dangerous = sum(1 for s in spec.steps.values() if s.confirm)
    params = ", ".join(spec.params) or "none"
    return (
        f"procedure {spec.name!r} v{spec.version}: {len(spec.steps)} steps "
        f"({dangerous} to confirm), parameters: {params}"
    )


def check_config(path: Path, ied: str | None) -> str:
    from goosectl.controller.config.bay import ControllerConfig
    from goosectl.controller.config.load import load_config
    from goosectl.controller.config.validate import ConfigError

    try:
        cfg = load_config(path, ControllerConfig, ied)
    except ConfigError as exc:
        _findings(path, "config", config_findings(exc))
    g = cfg.goose
    bay = (
        f", {_n(cfg.inputs, 'input')}, {_n(cfg.publications, 'publication')}, "
        f"device {cfg.device.port}"
        if cfg.inputs or cfg.publications
        else " (GOOSE only: no inputs or publications)"
    )
    return (
        f"controller config: {_n(g.subscriptions, 'subscription')}, "
        f"{_n(g.publishers, 'publisher')}{bay}"
    )


def _n(items, word: str) -> str:
    return f"{len(items)} {word}{'' if len(items) == 1 else 's'}"


def check_scl(path: Path, ied: str | None) -> str:
    from goosectl.protocols.scl import SclError, load_scl

    try:
        scl = load_scl(path)
    except SclError as exc:
        raise CommandError(str(exc)) from None
    if scl.findings:
        _findings(path, "SCL", [str(f) for f in scl.findings])
    summary = (
        f"SCL: {_n(scl.ieds, 'IED')} ({', '.join(scl.ieds) or 'none'}), {_n(scl.gocbs, 'GoCB')}"
    )
    if ied is not None:
        summary += "; as --ied " + check_config(path, ied)
    return summary


def _io_error(path: Path, exc) -> None:
    """A file that could not be read at all is not a finding in it: exit 2."""
    if exc.findings and all(f.code == "io" for f in exc.findings):
        raise CommandError(f"{path}: {exc.findings[0].reason}")


def check(path: Path, ied: str | None = None) -> str:
    """Check `path` as what it is; the one-line summary of a valid file."""
    kind, _ = sniff(path)
    if kind.name == "unparsed":  # report the parser's findings under the likeliest kind
        return check_config(path, ied)
    checker = {
        "table": lambda: check_table(path),
        "procedure": lambda: check_procedure(path),
        "config": lambda: check_config(path, ied),
        "scl": lambda: check_scl(path, ied),
    }[kind.name]
    return checker()


def cmd_check(args: argparse.Namespace) -> int:
    print(f"{args.file}: ok: {check(args.file, args.ied)}")
    return EXIT_OK
