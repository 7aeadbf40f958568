"""`goosectl table check|render|run`: the engine on a table file, no controller needed."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from pathlib import Path
from typing import Any

from goosectl.controller.cli import EXIT_FINDINGS, EXIT_OK, CommandError
from goosectl.controller.engine import RejectedEvent, Scheduler, Table, TableError
from goosectl.controller.engine.diagram import FORMATS
from goosectl.controller.engine.journal import Journal
from goosectl.controller.engine.loader import DEFAULT_LIMITS, LoaderLimits
from goosectl.controller.engine.machine import Step
from goosectl.controller.shell.journal_store import open_journal

log = logging.getLogger(__package__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("table", help="check, draw and run transition tables")
    tsub = p.add_subparsers(dest="table_command", metavar="ACTION")
    tsub.required = True

    c = tsub.add_parser("check", help="validate a table; findings exit 1")
    c.add_argument("file", type=Path)
    _load_options(c)
    c.set_defaults(func=cmd_check)

    r = tsub.add_parser(
        "render", help="draw a table (or a procedure's workflow) as Mermaid or Graphviz dot"
    )
    r.add_argument("file", type=Path)
    _load_options(r)
    r.add_argument(
        "--format",
        choices=sorted(FORMATS),
        default=None,
        help="mermaid (the default: paste into Markdown) or dot (pipe into Graphviz: "
        "`goosectl table render T.yaml --format dot | dot -Tsvg > t.svg`)",
    )
    r.set_defaults(func=cmd_render)

    u = tsub.add_parser(
        "run", help="feed timestamped events on the virtual clock, print the journal as JSON lines"
    )
    u.add_argument("file", type=Path)
    _load_options(u)
    u.add_argument(
        "--events",
        type=Path,
        required=True,
        help='JSON lines: {"time_ms"|"time_ns", "event", "payload"?}',
    )
    u.add_argument("--journal", type=Path, help="SQLite journal; an existing one is resumed")
    u.add_argument("--durability", choices=["sync", "group"], default="sync")
    u.add_argument(
        "--until-ms",
        type=float,
        help="advance the clock to here after the last event, firing due timers",
    )
    u.add_argument("--machine", default=None, help="machine id (default: the table name)")
    u.set_defaults(func=cmd_run)


def _load_options(p: argparse.ArgumentParser) -> None:
    """What a table file may cost and what code it may run."""
    p.add_argument(
        "--registry-path",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="allow the table's `registry:` to import code from DIR (repeatable); without "
        "it only installed packages are imported, never a file next to the table or in "
        "the current directory",
    )
    d = DEFAULT_LIMITS
    for name, what in (
        ("max_bytes", "file size in bytes"),
        ("max_aliases", "YAML aliases"),
        ("max_depth", "nesting depth"),
        ("max_nodes", "values once YAML aliases are expanded"),
    ):
        p.add_argument(
            "--" + name.replace("_", "-"),
            type=_positive,
            default=getattr(d, name),
            help=f"refuse a document beyond this many: {what} (default {getattr(d, name)})",
        )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def _load(args: argparse.Namespace) -> Table:
    path = args.file
    limits = LoaderLimits(args.max_bytes, args.max_aliases, args.max_depth, args.max_nodes)
    try:
        return Table.load(path, registry_path=args.registry_path, limits=limits)
    except TableError as exc:
        if exc.findings and all(f.code in ("io", "encoding", "format") for f in exc.findings):
            # unreadable, or not a document at all: a wrong file, not findings in a table
            from goosectl.controller.commands.config import sniff

            sniff(path)  # names what the file is when it can tell (a capture, a journal)
            raise CommandError(f"{path}: {exc.findings[0].reason}") from None
        from goosectl.controller.commands.config import show_findings

        show_findings([str(f) for f in exc.findings])
        raise CommandError(f"{path}: {len(exc.findings)} finding(s)", EXIT_FINDINGS) from exc


def _is_procedure(path: Path) -> bool:
    """A procedure file (steps:) given to `table`: checked and drawn as a procedure."""
    from goosectl.controller.commands.config import sniff

    try:
        kind, _ = sniff(path)
    except CommandError:
        return False  # not a document at all: the table loader says why
    return kind.name == "procedure"


def cmd_check(args: argparse.Namespace) -> int:
    if _is_procedure(args.file):
        from goosectl.controller.commands.config import check_procedure

        print(
            f"{args.file}: ok: {check_procedure(args.file)} "
            "(a procedure, checked as one; `goosectl config check` takes any kind of file)"
        )
        return EXIT_OK
    t = _load(args)
    spec = t.spec
    print(
        f"{args.file}: ok: table {spec.name!r} v{spec.version}: {len(spec.states)} states, "
        f"{len(spec.events)} events, {len(spec.transitions)} transitions, "
        f"{len(spec.timers)} timers"
    )
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    if _is_procedure(args.file):
        from goosectl.controller.agent.procedure import load_procedure

        spec = load_procedure(args.file).table.spec  # its workflow on the engine
    else:
        spec = _load(args).spec
    fmt = args.format or "mermaid"
    if args.format is None and not sys.stdout.isatty():
        # piped somewhere: say which format it is, since `| dot` needs --format dot
        log.info(
            "table render: writing Mermaid (the default); "
            "for Graphviz (`| dot -Tsvg`) use --format dot"
        )
    sys.stdout.write(FORMATS[fmt](spec))
    return EXIT_OK


def read_events(path: Path) -> list[tuple[int, str, object]]:
    """Parse an events file; every bad line is named with its number and reason."""
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CommandError(f"{path}: cannot read events: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise CommandError(
            f"{path}: not an events file (JSON lines): not UTF-8 text at byte {exc.start}"
        ) from None
    last = None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            t = int(obj["time_ns"]) if "time_ns" in obj else round(float(obj["time_ms"]) * 1000000)
            event = obj["event"]
            if not isinstance(event, str):
                raise ValueError("event must be a string")
        except (ValueError, KeyError, TypeError) as exc:
            raise CommandError(f"{path}:{n}: bad event line: {exc}") from exc
        if last is not None and t < last:
            raise CommandError(f"{path}:{n}: time goes back ({t} ns < {last} ns)")
        last = t
        out.append((t, event, obj.get("payload")))
    return out


def effect_json(effect: object) -> object:
    """An effect as JSON: its type and fields (`Notify {"topic": ..., "data": ...}`)."""
    if dataclasses.is_dataclass(effect) and not isinstance(effect, type):
        fields = {f.name: getattr(effect, f.name) for f in dataclasses.fields(effect)}
        return {"type": type(effect).__name__, **fields}
    return repr(effect)


def cmd_run(args: argparse.Namespace) -> int:
    """The table's machine fed the events file, every committed row printed as JSON."""
    if _is_procedure(args.file):
        raise CommandError(
            f"{args.file}: a procedure: it runs on a controller (`goosectl agent run NAME`), "
            "not on its own; `goosectl table check` and `render` take it"
        )
    table = _load(args)
    events = read_events(args.events)
    run = _TableRun(open_journal(args.journal, durability=args.durability))
    mid = args.machine or table.name
    start_ns = events[0][0] if events else 0
    _, resumed_at = run.scheduler.resume_or_start(table, mid, start_ns)
    run.printed = run.journal.seq if resumed_at is not None else 0
    seq_at_start = run.printed
    rejected = run.feed(mid, events, resumed_at)
    end_ns = events[-1][0] if events else 0
    if args.until_ms is not None:
        end_ns = round(args.until_ms * 1_000_000)
        run.scheduler.advance(end_ns)
    run.emit(True, end_ns)
    run.journal.close()
    if resumed_at is not None and run.printed == seq_at_start and resumed_at >= len(events) - 1:
        # a resumed journal that already holds every event: say so rather than print nothing
        log.info(
            "%s: every event of %s is in this journal already (machine %s in state %s): "
            "nothing left to run (another --journal starts over)",
            args.journal,
            args.events,
            mid,
            run.scheduler.machines[mid].state,
        )
    if rejected:
        print(f"{rejected} event(s) rejected", file=sys.stderr)
    return EXIT_OK


class _TableRun:
    """A scheduler on a journal, printing rows once committed, each with the effects of
    its step (the journal keeps only their digest)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.scheduler = Scheduler(journal)
        self.scheduler.on_step = self.remember
        #: journal seq -> the JSON effects of its step, until the row is printed
        self.effects: dict[int, list] = {}
        #: the last seq printed
        self.printed = 0

    def remember(self, machine, step: Step, now_ns: int) -> None:
        for i in range(len(step.transitions)):
            self.effects[self.journal.seq + 1 + i] = [effect_json(e) for e in step.effects]

    def feed(self, mid: str, events: list[tuple[int, str, Any]], resumed_at: int | None) -> int:
        """The events after the resumed position fed in order; how many were rejected."""
        rejected = 0
        for pos, (t, event, payload) in enumerate(events):
            if resumed_at is not None and pos <= resumed_at:
                continue
            try:
                self.scheduler.feed(mid, event, t, payload, input_pos=pos)
            except RejectedEvent as exc:
                rejected += 1
                # A rejected input is still consumed: record it so a resume moves past it.
                machine = self.scheduler.machines[mid]
                self.journal.record(machine, Step(machine.state), t, pos)
                print(json.dumps({"input": pos, "rejected": str(exc)}), file=sys.stderr)
            self.emit(False, t)
        return rejected

    def emit(self, force: bool, now_ns: int) -> None:
        """Print rows once they are committed: what is printed is what a restart keeps."""
        if force:
            self.journal.flush(now_ns)
        elif not self.journal.maybe_flush(now_ns):
            return
        for row in self.journal.rows_after(self.printed):
            row["effects_digest"] = row["effects"]
            row["effects"] = self.effects.pop(row["seq"], row["effects"])
            print(json.dumps(row, sort_keys=True, default=repr))
            self.printed = row["seq"]
