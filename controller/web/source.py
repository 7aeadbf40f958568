"""What the page shows, read from outside the controller: the control socket's snapshots
and the journal, opened read-only.

The journal is SQLite in WAL mode written by the controller's writer thread; a reader in
another process sees each commit whole and never blocks the writer. Rows are read by
sequence number, so a reader that asks for "after N" never misses or repeats a row.
"""

from __future__ import annotations

import contextlib
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

from goosectl.controller.shell.control import ControlUnavailable, request

#: the columns a timeline row carries to the page
COLUMNS = ("seq", "utc", "machine", "event", "source", "target", "effects")


def read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write: `mode=ro` (the path quoted, so `?`, `#` or `%` in a
    folder name stay part of it) and `query_only`; rows by name."""
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    db = sqlite3.connect(uri, uri=True, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA query_only = 1")
    return db


class Controller:
    """The control socket as the page needs it: one request per call, a fresh connection
    each time (the controller closes idle clients), every failure a reason, not a raise."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def ask(self, req: dict[str, Any], timeout_s: float = 3.0) -> dict[str, Any]:
        """The controller's reply, or `{"ok": False, "error": ...}` when it cannot be had."""
        if self.path is None:
            return {"ok": False, "error": "no control socket given (--control or --state)"}
        try:
            return request(self.path, req, timeout_s)
        except ControlUnavailable as exc:
            return {"ok": False, "error": str(exc), "unreachable": True}
        except (OSError, ValueError) as exc:
            return {"ok": False, "error": f"control socket {self.path}: {exc}", "unreachable": True}


class JournalReader:
    """The controller's journal, read-only. A missing file is no error: the page says so
    and the reader tries again on the next call (the controller may not have made it)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.db: sqlite3.Connection | None = None
        self.error = "" if path is not None else "no journal given (--journal or --state)"
        self._utc = False

    def _open(self) -> sqlite3.Connection | None:
        if self.db is not None or self.path is None:
            return self.db
        if not self.path.exists():
            self.error = f"journal {self.path}: not there (yet)"
            return None
        try:
            db = read_only(self.path)
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        except sqlite3.Error as exc:
            self.error = f"journal {self.path}: {exc}"
            return None
        if "journal" not in names:
            db.close()
            self.error = f"journal {self.path}: not a goosectl journal (no table journal)"
            return None
        self._utc = "journal_utc" in names
        self.db, self.error = db, ""
        return db

    def _query(self, where: str, args: tuple[Any, ...], order: str, limit: int) -> list[dict]:
        db = self._open()
        if db is None:
            return []
        src = "journal_utc" if self._utc else "journal"
        utc = "utc" if self._utc else "NULL AS utc"
        sql = (
            f"SELECT seq, {utc}, time_ns, machine, event, source, target, effects FROM {src} "
            f"{where} ORDER BY seq {order} LIMIT ?"
        )
        try:
            rows = db.execute(sql, (*args, limit)).fetchall()
        except sqlite3.Error as exc:
            self.error = f"journal {self.path}: {exc}"
            self.close()
            return []
        self.error = ""
        return [_row(r) for r in rows]

    def after(
        self, seq: int, limit: int = 1000, machine_prefix: str | None = None
    ) -> list[dict[str, Any]]:
        """Rows with a sequence number above `seq`, oldest first, at most `limit`; only
        machines whose name starts with `machine_prefix` when given."""
        if machine_prefix is None:
            return self._query("WHERE seq > ?", (seq,), "ASC", limit)
        return self._query(
            "WHERE seq > ? AND substr(machine, 1, ?) = ?",
            (seq, len(machine_prefix), machine_prefix),
            "ASC",
            limit,
        )

    def max_seq(self) -> int:
        """The newest row's sequence number (0: none), by the primary key's index."""
        db = self._open()
        if db is None:
            return 0
        try:
            row = db.execute("SELECT MAX(seq) FROM journal").fetchone()
        except sqlite3.Error as exc:
            self.error = f"journal {self.path}: {exc}"
            self.close()
            return 0
        return int(row[0] or 0)

    def last(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` rows, oldest first (a page's first fill)."""
        return self._query("", (), "DESC", limit)[::-1]

    def close(self) -> None:
        if self.db is not None:
            with contextlib.suppress(sqlite3.Error):
                self.db.close()
        self.db = None


def detail(effects: object) -> str:
    """A row's effects as a person reads them: a digest (16 hex digits) says nothing, a
    text detail (a control request's peer, a limit's reason) does."""
    return "" if _is_digest(effects) else str(effects)[:500]


def _row(r: sqlite3.Row) -> dict[str, Any]:
    return {
        "seq": r["seq"],
        "utc": r["utc"],
        "time_ns": r["time_ns"],
        "machine": r["machine"],
        "event": r["event"],
        "source": r["source"],
        "target": r["target"],
        "detail": detail(r["effects"]),
    }


def _is_digest(text: object) -> bool:
    return isinstance(text, str) and len(text) == 16 and all(c in "0123456789abcdef" for c in text)
