"""The journal: every transition, in order, in SQLite (WAL), plus checkpoints to resume from.

Recording is an append to an in-memory list; writing happens in `flush`, which the shell
calls when it is idle or when the group-commit interval has passed (time is passed in: the
journal reads no clock). Checkpoints are written in the same transaction as the journal
rows they follow, so after a crash the checkpoint and the journal always agree: the
restarted process resumes after the last committed input and nothing is applied twice.

Durability modes (per journal, so per machine group):
  sync   commit every record before `record` returns; synchronous=FULL (survives power loss)
  group  commit every `interval_ms` or `batch` records, whichever comes first;
         synchronous=NORMAL: survives a process crash at once, power loss after the OS flush
  step   commit when the caller says (`flush`), synchronous=FULL: the agent layer flushes
         after each input, so every transition that input caused (a session's loop and
         workflow machines together) is durable, atomically, before any effect runs
  memory nothing written to disk (tests, `table run` without --journal)

A small key/value `meta` table rides in the same transactions (e.g. the device link's next
sequence number, so a restarted controller continues above it).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from controller.engine.machine import Machine, Step

Durability = Literal["sync", "group", "step", "memory"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY,
    time_ns INTEGER NOT NULL,
    machine TEXT NOT NULL,
    event TEXT NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    effects TEXT NOT NULL,
    table_name TEXT NOT NULL,
    version TEXT NOT NULL,
    input INTEGER
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoint (
    machine TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    input INTEGER,
    snapshot TEXT NOT NULL,
    timers TEXT NOT NULL
);
"""

COLUMNS = (
    "seq",
    "time_ns",
    "machine",
    "event",
    "source",
    "target",
    "effects",
    "table",
    "version",
    "input",
)


def effects_digest(effects: list) -> str:
    """A short, stable fingerprint of a step's effects (their reprs are deterministic)."""
    if not effects:
        return "-"
    return hashlib.blake2b(repr(effects).encode(), digest_size=8).hexdigest()


class Journal:
    def __init__(
        self,
        path: str | Path | None = None,
        durability: Durability = "group",
        interval_ms: float = 5.0,
        batch: int = 4096,
    ) -> None:
        if path is None:
            durability = "memory"
        self.durability: Durability = durability
        self.path = str(path) if path is not None else ":memory:"
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        if path is not None:
            self.db.execute("PRAGMA journal_mode=WAL")
            sync = "FULL" if durability in ("sync", "step") else "NORMAL"
            self.db.execute(f"PRAGMA synchronous={sync}")
        self.db.executescript(SCHEMA)
        self.interval_ns = int(interval_ms * 1_000_000)
        self.batch = batch
        self._pending: list[tuple] = []
        self._dirty: dict[str, tuple[Machine, int | None]] = {}
        self._last_flush_ns: int | None = None
        self._meta: dict[str, str] = {}
        row = self.db.execute("SELECT MAX(seq) FROM journal").fetchone()
        self.seq = int(row[0] or 0)
        self.flushes = 0
        #: Who owns the armed timers (the runner's heap): asked at flush time, so a checkpoint
        #: holds the timers exactly as they were after the machine's last recorded step.
        self.timer_source: Callable[[str], list] = lambda _machine: []

    # -- hot path ---------------------------------------------------------------------

    def record(
        self,
        machine: Machine,
        step: Step,
        now_ns: int,
        input_pos: int | None = None,
    ) -> None:
        """Queue the step's transitions and mark the machine for the next checkpoint."""
        if step.transitions:
            table = machine.table
            pend = self._pending
            seq = self.seq
            for src, ev, dst in step.transitions:
                seq += 1
                pend.append(
                    (
                        seq,
                        now_ns,
                        machine.id,
                        ev,
                        src,
                        dst,
                        step.effects,
                        table.name,
                        table.version,
                        input_pos,
                    )
                )
            self.seq = seq
        self._dirty[machine.id] = (machine, input_pos)
        if self.durability == "sync":
            self.flush(now_ns)

    def set_meta(self, key: str, value: Any) -> None:
        """Written with the next flush, in the same transaction as the journal rows."""
        self._meta[key] = json.dumps(value)

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def maybe_flush(self, now_ns: int) -> bool:
        """Flush if the group interval passed or the batch is full; the shell calls this."""
        if self.durability == "step" or (not self._pending and not self._dirty):
            return False
        if self._last_flush_ns is None:
            self._last_flush_ns = now_ns
        if len(self._pending) >= self.batch or now_ns - self._last_flush_ns >= self.interval_ns:
            self.flush(now_ns)
            return True
        return False

    # -- disk -------------------------------------------------------------------------

    def flush(self, now_ns: int | None = None) -> None:
        if not self._pending and not self._dirty and not self._meta:
            return
        rows = [(*r[:6], effects_digest(r[6]), *r[7:]) for r in self._pending]
        checkpoints = [
            (
                mid,
                self.seq,
                pos,
                json.dumps(m.snapshot(), sort_keys=True, default=_json_default),
                json.dumps(self.timer_source(mid), sort_keys=True, default=_json_default),
            )
            for mid, (m, pos) in self._dirty.items()
        ]
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("INSERT INTO journal VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
            db.executemany(
                "INSERT INTO checkpoint VALUES (?,?,?,?,?) ON CONFLICT(machine) DO UPDATE SET "
                "seq=excluded.seq, input=excluded.input, snapshot=excluded.snapshot, "
                "timers=excluded.timers",
                checkpoints,
            )
            if self._meta:
                db.executemany(
                    "INSERT INTO meta VALUES (?,?) ON CONFLICT(key) DO UPDATE SET "
                    "value=excluded.value",
                    list(self._meta.items()),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._pending.clear()
        self._dirty.clear()
        self._meta.clear()
        self._last_flush_ns = now_ns
        self.flushes += 1

    def close(self) -> None:
        self.flush()
        self.db.close()

    # -- reading ----------------------------------------------------------------------

    def checkpoint(self, machine_id: str) -> dict[str, Any] | None:
        """{"snapshot", "input", "seq", "timers"} of the last committed state, or None."""
        row = self.db.execute(
            "SELECT snapshot, input, seq, timers FROM checkpoint WHERE machine = ?", (machine_id,)
        ).fetchone()
        if row is None:
            return None
        return {
            "snapshot": json.loads(row[0]),
            "input": row[1],
            "seq": row[2],
            "timers": json.loads(row[3]),
        }

    def checkpoints(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT machine FROM checkpoint ORDER BY machine")]

    def rows(self, machine: str | None = None) -> Iterator[dict[str, Any]]:
        """Every journal row (flushing first), optionally of one machine."""
        self.flush()
        sql = "SELECT * FROM journal"
        args: tuple = ()
        if machine is not None:
            sql += " WHERE machine = ?"
            args = (machine,)
        for r in self.db.execute(sql + " ORDER BY seq", args):
            yield dict(zip(COLUMNS, r, strict=True))

    def rows_after(self, seq: int) -> Iterator[dict[str, Any]]:
        """Committed rows with a sequence number above `seq` (no flush)."""
        for r in self.db.execute("SELECT * FROM journal WHERE seq > ? ORDER BY seq", (seq,)):
            yield dict(zip(COLUMNS, r, strict=True))


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "_asdict"):
        return obj._asdict()
    raise TypeError(f"context value of type {type(obj).__name__} is not JSON-serialisable")
