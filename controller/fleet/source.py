"""What the uplink reads and keeps: the controller's journal, opened read-only, and the
uplink's own checkpoint file.

The journal is the controller's SQLite file in WAL mode; a read-only connection never takes
the writer's lock, so the controller's commits never wait for the uplink. UTC comes from
the `journal_utc` view the controller's shell creates (`controller.shell.journal_clock`);
a journal without it (an old file) gives `time_ns` as it is.

The checkpoint (`uplink.json` in the uplink's state folder) holds the last journal seq the
broker acknowledged and the last birth/death sequence number (bdSeq). It is replaced by a
rename, so it is the old one or the new one, never half; one that cannot be read is taken
as nothing acknowledged: everything is sent again (the collector de-duplicates), nothing
is skipped. The controller's journal retention reads the same file (`held_from`), so it
never deletes a row the broker has not acknowledged.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goosectl.controller.shell.journal_store import seq_bounds

CHECKPOINT = "uplink.json"


@dataclass
class Checkpoint:
    acked_seq: int = 0
    bd_seq: int = 0


def load_checkpoint(path: Path) -> Checkpoint:
    try:
        obj = json.loads(path.read_text())
        return Checkpoint(int(obj["acked_seq"]), int(obj["bd_seq"]))
    except (OSError, ValueError, KeyError, TypeError):
        return Checkpoint()


def save_checkpoint(path: Path, cp: Checkpoint) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"acked_seq": cp.acked_seq, "bd_seq": cp.bd_seq}))
    os.replace(tmp, path)


def held_from(state_dir: Path) -> int | None:
    """The first journal seq the uplink of this state folder still needs (retention keeps
    it and every later row), or None when no uplink has ever run there."""
    path = state_dir / CHECKPOINT
    if not path.exists():
        return None
    return load_checkpoint(path).acked_seq + 1


class JournalReader:
    """The controller's journal, read-only. Opened lazily and again after an error: the
    controller may not have created it yet, or may be restarting."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._utc = False

    def _open(self) -> sqlite3.Connection | None:
        if self._db is None:
            if not self.path.exists():
                return None
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)
            try:
                names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            except sqlite3.Error:
                db.close()
                return None
            if "journal" not in names:
                db.close()
                return None
            self._utc = "journal_utc" in names
            self._db = db
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def bounds(self) -> tuple[int, int]:
        """(lowest seq kept, highest seq written); (0, 0) for an empty or absent journal."""
        db = self._open()
        if db is None:
            return 0, 0
        try:
            lo, hi = seq_bounds(db)
        except sqlite3.Error:
            self.close()
            return 0, 0
        return lo or 0, hi or 0

    def rows_after(self, seq: int, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` rows with seq > `seq`, in seq order, as published."""
        db = self._open()
        if db is None:
            return []
        if not self._utc:
            # the controller makes the view just after the journal: a reader that opened
            # the file in between must not send monotonic times as UTC for ever after
            with contextlib.suppress(sqlite3.Error):
                self._utc = bool(
                    db.execute("SELECT 1 FROM sqlite_master WHERE name = 'journal_utc'").fetchone()
                )
        source = "journal_utc" if self._utc else "journal"
        utc = "utc_ns" if self._utc else "time_ns"
        try:
            got = db.execute(
                f"SELECT seq, COALESCE({utc}, time_ns), machine, event, source, target, "
                f"effects, table_name, version FROM {source} WHERE seq > ? ORDER BY seq "
                "LIMIT ?",
                (seq, limit),
            ).fetchall()
        except sqlite3.Error:
            self.close()
            return []
        return [
            {
                "seq": r[0],
                "utc_ns": int(r[1]),
                "machine": r[2],
                "event": r[3],
                "source": r[4],
                "target": r[5],
                "effects": r[6],
                "table": r[7],
                "version": r[8],
            }
            for r in got
        ]

    def __enter__(self) -> JournalReader:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.close()
