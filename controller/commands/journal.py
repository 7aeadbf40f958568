"""`goosectl journal DIR|FILE` and `goosectl journal verify FILE`: a controller's journal
read by a person, in UTC, while the controller may still be writing it.

The file is opened read-only (SQLite's WAL lets a reader see every committed row while the
writer goes on); times are the rows' own, turned to UTC by the clock anchors the shell
records (`controller.shell.journal_clock`). `verify` checks the hash chain every row
carries (`controller.shell.journal_store.verify`): exit 0 intact, 1 with the first bad seq.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from goosectl.controller.cli import EXIT_FINDINGS, CommandError
from goosectl.controller.engine.journal import CHAIN_KEY, COLUMNS
from goosectl.controller.shell.journal_clock import UTC_NS
from goosectl.controller.shell.journal_store import verify
from goosectl.controller.shell.journal_writer import KEY_ENV, journal_key

#: `--since -10m`: a span back from now (s, m, h, d)
_AGO = re.compile(r"-(\d+(?:\.\d+)?)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "journal",
        help="show a journal's rows in UTC (also while a controller writes it); verify it",
        description=(
            "goosectl journal DIR|FILE shows the rows of a journal (a state folder's "
            "bay.sqlite, or the file); goosectl journal verify FILE checks its hash chain "
            "(exit 0 intact, 1 naming the first bad seq)."
        ),
    )
    p.add_argument("what", nargs="+", metavar="DIR|FILE", help="a state folder or a journal; "
                   "`verify FILE` checks the file's hash chain")  # fmt: skip
    p.add_argument("--since", help="rows from this UTC time on: ISO 8601, or -10m, -2h, -1d")
    p.add_argument("--machine", help="only this machine's rows (a glob: 'limit:*')")
    p.add_argument("--follow", action="store_true", help="keep showing new rows (Ctrl-C ends)")
    p.add_argument("--json", action="store_true", help="one JSON object per row")
    p.add_argument("--key", type=Path, help=f"verify: the chain's key file (default ${KEY_ENV})")
    # `--since -10m` is a value, not an option: argparse takes what looks like a negative
    # number as one, so a span is made to look like one to this parser
    p._negative_number_matcher = re.compile(r"^-\d+(\.\d+)?[smhd]?$")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.what[0] == "verify":
        if len(args.what) != 2:
            raise CommandError("journal verify: give one journal file (journal verify FILE)")
        return cmd_verify(_file(Path(args.what[1])), args.key)
    if len(args.what) != 1:
        raise CommandError(f"journal: give one folder or file, not {len(args.what)}")
    return show(_file(Path(args.what[0])), args)


def _file(path: Path) -> Path:
    """A state folder means its bay journal; anything else must be an existing file."""
    if path.is_dir():
        path = path / "bay.sqlite"
    if not path.is_file():
        raise CommandError(f"{path}: no such journal file")
    return path


def open_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection: never writes the file, sees what the writer committed."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.execute("SELECT name FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as exc:
        raise CommandError(f"{path}: not a journal ({exc})") from None
    return db


def cmd_verify(path: Path, key_file: Path | None) -> int:
    db = open_ro(path)
    try:
        key = journal_key(key_file)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        chain = (
            db.execute("SELECT value FROM meta WHERE key = ?", (CHAIN_KEY,)).fetchone()
            if "meta" in tables
            else None
        )
        keyed = chain is not None and json.loads(chain[0]).get("mac", "").startswith("keyed")
        if keyed and key is None:
            raise CommandError(f"{path}: its chain is keyed: give --key FILE or ${KEY_ENV}")
        bad = verify(db, key)
        if bad is None:
            lo, hi, n = db.execute("SELECT MIN(seq), MAX(seq), COUNT(*) FROM journal").fetchone()
            span = f"seq {lo}-{hi}" if n else "no rows yet"
            print(f"{path}: intact, {n} rows ({span})")
            return 0
    except sqlite3.DatabaseError as exc:
        raise CommandError(f"{path}: not a journal ({exc})") from None
    finally:
        db.close()
    print(f"{path}: seq {bad[0]}: {bad[1]}")
    return EXIT_FINDINGS


def since_ns(text: str, now_ns: int) -> int:
    """`--since` as UTC nanoseconds: ISO 8601 (no zone means UTC) or a span back."""
    m = _AGO.fullmatch(text.strip())
    if m:
        return now_ns - int(float(m.group(1)) * _UNIT_S[m.group(2)] * 1e9)
    try:
        when = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"--since {text}: not an ISO 8601 time (2026-12-01T12:00:00Z) or a span (-10m)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1e9)


def utc(ns: int | None) -> str:
    if ns is None:
        return "-" * 27
    sec, rest = divmod(int(ns), 1_000_000_000)
    stamp = dt.datetime.fromtimestamp(sec, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{rest // 1000:06d}Z"


def show(path: Path, args: argparse.Namespace) -> int:
    db = open_ro(path)
    where, params = ["j.seq > ?"], [0]
    if args.since:
        where.append(f"{UTC_NS} >= ?")
        params.append(since_ns(args.since, time.time_ns()))
    if args.machine:
        where.append("j.machine GLOB ?")
        params.append(args.machine)
    cols = ", ".join(f"j.{c}" if c != "table" else "j.table_name" for c in COLUMNS[:-1])
    sql = f"SELECT {cols}, {UTC_NS} FROM journal AS j WHERE {' AND '.join(where)} ORDER BY j.seq"
    last = 0
    try:
        while True:
            params[0] = last
            for r in db.execute(sql, params):
                last = r[0]
                row: dict[str, Any] = dict(zip(COLUMNS[:-1], r[:-1], strict=True))
                row["utc"] = utc(r[-1])
                print(json.dumps(row) if args.json else line(row), flush=args.follow)
            if not args.follow:
                return 0
            time.sleep(0.5)
    except sqlite3.DatabaseError as exc:
        raise CommandError(f"{path}: not a journal ({exc})") from None
    finally:
        db.close()


def line(row: dict[str, Any]) -> str:
    """One row for a person: when (UTC), seq, machine, event, the move, the detail."""
    detail = row["effects"]
    tail = f"  {detail}" if detail not in ("-", None) else ""
    return (
        f"{row['utc']}  {row['seq']:>7}  {row['machine']}  {row['event']}  "
        f"{row['source']} -> {row['target']}{tail}"
    )
