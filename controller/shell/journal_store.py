"""The journal's SQLite store: the file every `Journal` of a controller commits to.

The engine records (`controller.engine.journal.Journal`: rows, checkpoints and meta packed
into batches) and touches no file; this module is where those batches become rows of a
SQLite file (WAL), where a file is claimed, opened, opened read-only on a full disk,
reopened when the disk has room again, read back, and its hash chain verified. The writer
thread (`controller.shell.journal_writer`) commits through the same `JournalStore` on a
connection of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from goosectl.controller import __version__
from goosectl.controller.engine.journal import (
    CHAIN_KEY,
    COLUMNS,
    HEAD_KEY,
    SOFTWARE_KEY,
    Batch,
    Durability,
    Journal,
    JournalIOError,
    JournalRefused,
    chain_mac,
    chained_rows,
    checkpoint_rows,
    row_hash,
)

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
    input INTEGER,
    hash TEXT
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

#: the agent journal's table of procedure texts (version -> the text a session ran)
PROCEDURES = (
    "CREATE TABLE IF NOT EXISTS procedures (version TEXT PRIMARY KEY, name TEXT NOT NULL, "
    "text TEXT NOT NULL)"
)


#: The lowest and highest seq in one read of the primary key's two ends. SQLite answers a
#: lone MIN or MAX from the index, but `SELECT MIN(seq), MAX(seq)` scans the whole table:
#: on a journal of a million rows, polled ten times a second by the uplink, that was most
#: of the uplink's CPU and a stream of page reads beside the controller.
SEQ_BOUNDS = "SELECT (SELECT MIN(seq) FROM journal), (SELECT MAX(seq) FROM journal)"


def seq_bounds(db: sqlite3.Connection) -> tuple[int | None, int | None]:
    """(lowest seq kept, highest seq written) of the journal in `db`; (None, None) empty."""
    lo, hi = db.execute(SEQ_BOUNDS).fetchone()
    return lo, hi


def open_journal(
    path: str | Path | None,
    durability: Durability = "group",
    interval_ms: float = 5.0,
    batch: int = 4096,
    key: bytes | None = None,
) -> Journal:
    """A journal committing to the SQLite file `path` (None: a journal in memory).

    A file journal records which goosectl last opened it for writing (`journal.software`),
    with its first batch."""
    if path is None:
        return Journal(None, "memory", interval_ms, batch, key)
    store = SqliteStore(str(path), durability, key)
    journal = Journal(store, durability, interval_ms, batch, key)
    if durability != "memory":
        journal.set_meta(SOFTWARE_KEY, {"goosectl": __version__})
    return journal


class SqliteStore:
    """The `Store` of a journal file: one reading connection, and the `JournalStore` that
    commits on it (inline commits; a writer thread commits on its own connection).

    A file SQLite cannot even open for writing (a full disk: no room for its WAL index) is
    read from an in-memory copy (`read_only`) and `alarm` says why; `reopen` opens the file
    for writing once a commit finds room."""

    def __init__(self, path: str, durability: Durability, key: bytes | None = None) -> None:
        self.path = path
        self.durability: Durability = durability
        self.key = key
        #: why the file could only be opened read-only (None: it takes commits)
        self.alarm: str | None = None
        self._deferred = False
        if path != ":memory:":
            claim_files(path)
        try:
            self.db = connect(path, durability)
            self.writable = True
        except sqlite3.OperationalError as exc:
            if path == ":memory:":
                raise
            # a full disk at start-up: read what is there, commit once the disk allows it
            self.db = read_only(path, exc)
            self.writable = False
            self.alarm = JournalIOError(path, exc, 0).detail
        except sqlite3.DatabaseError as exc:  # a damaged file: say which
            if "not a database" in str(exc):
                raise  # the command names the option that gave it (`--journal X: ...`)
            raise JournalRefused(f"journal {path}: not a usable journal ({exc})") from None
        try:
            self.committer = JournalStore(self.db, path, key)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise JournalRefused(f"journal {path}: not a usable journal ({exc})") from None

    @property
    def tampered(self) -> str | None:
        return self.committer.tampered

    def commit(self, batches: list[Batch]) -> None:
        self.committer.commit(batches)

    def reopen(self, pending: int) -> None:
        """After a start on a full disk: open the file for writing once the disk allows
        (JournalIOError, naming `pending` rows not written, while it does not)."""
        if self.writable:
            return
        try:
            db = connect(self.path, self.durability)
        except sqlite3.Error as exc:
            raise JournalIOError(self.path, exc, pending) from exc
        self.db.close()
        self.db = db
        self.committer = JournalStore(db, self.path, self.key)
        self.writable = True
        self._deferred_pragmas()

    def defer_sync(self) -> None:
        """Commit without fsync: whoever the journal's `on_commit` calls syncs the WAL."""
        self._deferred = True
        self._deferred_pragmas()

    def _deferred_pragmas(self) -> None:
        if self._deferred and self.writable:
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA wal_autocheckpoint=0")

    def last_seq(self) -> int:
        row = self.db.execute("SELECT MAX(seq) FROM journal").fetchone()
        return int(row[0] or 0)

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def checkpoint(self, machine_id: str) -> dict[str, Any] | None:
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
        sql = "SELECT * FROM journal"
        args: tuple[str, ...] = ()
        if machine is not None:
            sql += " WHERE machine = ?"
            args = (machine,)
        for r in self.db.execute(sql + " ORDER BY seq", args):
            yield dict(zip(COLUMNS, r, strict=True))

    def rows_after(self, seq: int) -> Iterator[dict[str, Any]]:
        for r in self.db.execute("SELECT * FROM journal WHERE seq > ? ORDER BY seq", (seq,)):
            yield dict(zip(COLUMNS, r, strict=True))

    def keep_text(self, version: str, name: str, text: str) -> None:
        try:
            self.db.execute(PROCEDURES)
            sql = "INSERT OR IGNORE INTO procedures VALUES (?,?,?)"
            self.db.execute(sql, (version, name, text))
        except sqlite3.Error as exc:
            raise JournalIOError(self.path, exc, 0) from exc

    def texts(self) -> dict[str, str]:
        try:
            self.db.execute(PROCEDURES)
            return dict(self.db.execute("SELECT version, text FROM procedures"))
        except sqlite3.Error as exc:
            raise JournalIOError(self.path, exc, 0) from exc

    def close(self) -> None:
        self.db.close()


def connect(path: str, durability: Durability) -> sqlite3.Connection:
    """A connection in WAL mode with the durability's synchronous level and the schema."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        if path != ":memory:":
            # a new file gives deleted rows' pages back to the filesystem (retention);
            # an existing one keeps its mode (and reuses free pages)
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            db.execute("PRAGMA journal_mode=WAL")
            sync = "FULL" if durability in ("sync", "step") else "NORMAL"
            db.execute(f"PRAGMA synchronous={sync}")
        db.executescript(SCHEMA)
        if "hash" not in {r[1] for r in db.execute("PRAGMA table_info(journal)")}:
            # a file of an older goosectl: its rows stay unchained, new ones are chained
            db.execute("ALTER TABLE journal ADD COLUMN hash TEXT")
    except BaseException:
        db.close()
        raise
    return db


def claim_files(path: str) -> None:
    """Open the journal's file ourselves, never through a link, before SQLite does (it
    follows links): created if missing; a symbolic link (a dangling one too: root must not
    create its target), a file of another user or one with other hard links is refused
    with `JournalRefused` naming it. Its `-wal` and `-shm`, if there, must be plain files
    of ours as well; SQLite creates them when missing (a link planted there later, in a
    sticky folder like /tmp, is one the kernel does not follow: protected_symlinks)."""
    from goosectl.protocols.files import UnsafeFile, own_file, refusal

    try:
        os.close(own_file(path))
    except UnsafeFile as exc:
        raise JournalRefused(f"journal {path}: {exc.strerror}") from None
    except OSError:
        return  # a full disk, a read-only folder: SQLite says what it needs, and where
    for name in (path + "-wal", path + "-shm"):
        try:
            st = os.lstat(name)
        except OSError:
            continue
        why = "is a symbolic link" if stat.S_ISLNK(st.st_mode) else refusal(st)
        if why is not None:
            raise JournalRefused(f"journal {path}: {name} {why}: refusing it")


def read_only(path: str, exc: sqlite3.Error, keep_rows: int = 10_000) -> sqlite3.Connection:
    """What a journal reads from while its file cannot be opened the usual way (a full disk:
    SQLite cannot size the WAL index, `-shm`): an in-memory copy of it, read through a
    connection in exclusive locking mode (whose WAL index lives in memory), then closed so
    the writer can open the file once the disk allows. Every table is copied except the
    journal's rows, of which the last `keep_rows` (the file keeps them all)."""
    mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    mem.executescript(SCHEMA)
    if not Path(path).exists():
        return mem
    src = sqlite3.connect(path, isolation_level=None)
    try:
        src.execute("PRAGMA locking_mode=EXCLUSIVE")
        tables = src.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        for name, sql in tables:
            if name not in ("journal", "meta", "checkpoint"):
                mem.execute(sql)
            tail = f" ORDER BY seq DESC LIMIT {keep_rows}" if name == "journal" else ""
            cur = src.execute(f'SELECT * FROM "{name}"{tail}')
            rows = cur.fetchall()
            if rows:
                cols = ",".join(f'"{d[0]}"' for d in cur.description)
                marks = ",".join("?" * len(rows[0]))
                mem.executemany(f'INSERT INTO "{name}" ({cols}) VALUES ({marks})', rows)
    except sqlite3.Error as err:
        mem.close()
        raise JournalIOError(path, err, 0, f"cannot be read either (opening: {exc})") from exc
    finally:
        src.close()
    return mem


class JournalStore:
    """The write side: turns batches into rows and commits them, one transaction each.

    Every row carries its link of the hash chain (`row_hash`). Opening, the store compares
    the file's last row with `journal.head` (rows cut while no controller ran); before each
    commit it asks SQLite whether another connection wrote (`data_version`) and looks at the
    file (the same inode, not smaller), and if so compares the last row and verifies the
    whole chain: a row deleted, rewritten or cut away is `tampered` (an alarm for the
    shell) at the next commit. The chain then goes on from the store's own last row, so
    the file keeps the break and `verify` finds the first bad row."""

    def __init__(self, db: sqlite3.Connection, path: str, key: bytes | None = None) -> None:
        self.db = db
        self.path = path
        self.key = key
        self._mac = chain_mac(key)
        #: why the file is not what this store committed (None while it is)
        self.tampered: str | None = None
        #: the last row this store committed (seq, hash): the next row is chained to it
        self._head = self._tail()
        #: the last row the file is expected to hold: ours, or what a change left there
        self._seen = self._head
        self._version = self._data_version()
        #: (device, inode, size) of the file at the last look
        self._ident: tuple[int, int, int] = (0, 0, 0)
        self.settle()
        #: set until the first chained commit: the seq the chain starts at goes into meta
        self._chain_from: int | None = None
        if db.execute("SELECT 1 FROM meta WHERE key = ?", (CHAIN_KEY,)).fetchone() is None:
            self._chain_from = (self._head[0] if self._head else 0) + 1
        head = db.execute("SELECT value FROM meta WHERE key = ?", (HEAD_KEY,)).fetchone()
        if head is not None:  # changed while nobody ran: the end, at least, is cheap to see
            want = json.loads(head[0])
            if self._head != (want.get("seq"), want.get("hash")):
                now = f"seq {self._head[0]}" if self._head else "no rows"
                self.tampered = (
                    f"journal {path}: changed while no controller ran (its last row is "
                    f"{now}, the last one committed seq {want.get('seq')})"
                )

    def settle(self) -> None:
        """Take the file as it is now (at the start, after our own retention, which may
        shrink it): a file that is another one, or smaller, at the next commit was changed
        by someone else. Our commits only grow it (WAL checkpoints write pages back)."""
        if self.path == ":memory:":
            return
        with contextlib.suppress(OSError):
            st = os.stat(self.path)
            self._ident = (st.st_dev, st.st_ino, st.st_size)

    def _tail(self) -> tuple[int, str] | None:
        row = self.db.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
        return None if row is None else (int(row[0]), row[1] or "")

    def _data_version(self) -> int:
        return int(self.db.execute("PRAGMA data_version").fetchone()[0])

    def _check(self) -> None:
        """Is the file still what we committed? Cheap while nobody else wrote to it (SQLite's
        `data_version` and a stat: the same file, not smaller); when someone did, the last
        row is compared with ours and the whole chain verified."""
        version = self._data_version()
        why = None
        ident = self._ident
        with contextlib.suppress(OSError):
            st = os.stat(self.path)
            ident = (st.st_dev, st.st_ino, st.st_size)
        if ident[:2] != self._ident[:2]:
            why = "the file was replaced by another one"
        elif ident[2] < self._ident[2]:
            why = f"the file was cut from {self._ident[2]} to {ident[2]} bytes"
        elif version != self._version:
            tail = self._tail()
            if tail != self._seen:
                was = f"seq {self._seen[0]}" if self._seen else "no rows"
                now = f"seq {tail[0]}" if tail else "no rows"
                why = f"its last row is {now}, this controller committed {was}"
            else:
                bad = verify(self.db, self.key)
                if bad is not None:
                    why = f"seq {bad[0]}: {bad[1]}"
        self._version = version
        self._ident = ident  # our commits only grow the file: the next check compares
        if why is not None:
            self.tampered = f"journal {self.path}: changed behind the controller ({why})"
            # found once; the chain goes on from our own last row, so the file shows the
            # break at the first row written after the change
            self._seen = self._tail()

    def commit(self, batches: list[Batch]) -> None:
        """Commit the batches in one transaction, in order; JournalIOError if the disk says
        no (the transaction is rolled back, nothing of it is written)."""
        self._check()
        key = self.key
        rows, prev = chained_rows(batches, self._head[1] if self._head else "", self._mac)
        checkpoints = checkpoint_rows(batches)
        meta = [kv for b in batches for kv in b.meta.items()]
        head = self._head
        if rows:
            head = (int(rows[-1][0]), prev)
            meta.append((HEAD_KEY, json.dumps({"seq": head[0], "hash": prev})))
            if self._chain_from is not None:
                mac = "keyed-blake2b-128" if key else "blake2b-128"
                meta.append((CHAIN_KEY, json.dumps({"mac": mac, "from_seq": rows[0][0]})))
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT INTO journal VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
            db.executemany(
                "INSERT INTO checkpoint VALUES (?,?,?,?,?) ON CONFLICT(machine) DO UPDATE SET "
                "seq=excluded.seq, input=excluded.input, snapshot=excluded.snapshot, "
                "timers=excluded.timers",
                checkpoints,
            )
            if meta:
                db.executemany(
                    "INSERT INTO meta VALUES (?,?) ON CONFLICT(key) DO UPDATE SET "
                    "value=excluded.value",
                    meta,
                )
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            self.rollback()
            if isinstance(exc, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
                raise  # a defect, not the disk
            raise JournalIOError(self.path, exc, len(rows)) from exc
        except BaseException:
            self.rollback()
            raise
        self._head = self._seen = head
        if rows:
            self._chain_from = None

    def rollback(self) -> None:
        if self.db.in_transaction:
            # SQLite may have rolled back already (it does on SQLITE_FULL)
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")


def verify(db: sqlite3.Connection, key: bytes | None = None) -> tuple[int, str] | None:
    """The first row that breaks the hash chain, as (seq, why), or None if it is intact.

    The chain starts at `journal.chain`'s `from_seq` (rows before it were written before
    goosectl chained rows) or, after retention deleted the oldest rows, at the first row
    left (`journal.retention`'s `below_seq`), whose own hash is taken as it is. The last
    row must be `journal.head`: rows truncated away at the end are found there."""
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"journal", "meta"} <= names:
        return (1, "no journal table (an empty or truncated file)")
    if "hash" not in {r[1] for r in db.execute("PRAGMA table_info(journal)")}:
        return (1, "rows without a hash chain (written by an older goosectl)")

    def meta(k: str) -> dict[str, Any]:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (k,)).fetchone()
        return json.loads(row[0]) if row else {}

    chain, head, kept = meta(CHAIN_KEY), meta(HEAD_KEY), meta("journal.retention")
    start = int(chain.get("from_seq", 1))
    if not chain and head:
        return (int(head["seq"]), "the chain's description (journal.chain) is missing")
    trimmed = int(kept.get("below_seq", 0))
    prev: str | None = None
    last: int | None = None
    mac = chain_mac(key)
    sql = "SELECT * FROM journal WHERE seq >= ? ORDER BY seq"
    for r in db.execute(sql, (start,)):
        row, stored = tuple(r[:10]), r[10]
        seq = int(row[0])
        if prev is None:
            if seq != start and not (trimmed and seq >= trimmed):
                return (start, f"rows {start}-{seq - 1} are missing")
            if seq == start:
                prev = ""
            else:  # the first row retention left: its link is where the chain resumes
                prev = stored or ""
                last = seq
                continue
        want = row_hash(prev, row, mac)
        if stored != want:
            why = "no hash" if not stored else "its hash does not follow the row before it"
            return (seq, why + " (a row before it deleted, or this one changed)")
        prev, last = want, seq
    if head:
        end = int(head["seq"])
        if last is None:
            return (start, f"no rows, where the journal's head says seq {end}")
        if last < end:
            return (last + 1, f"rows {last + 1}-{end} are missing (truncated)")
        if last > end or prev != head.get("hash"):
            return (end, "the last row is not the one the journal last committed")
    elif last is not None:
        return (last, "rows, but no journal.head: the journal's meta was changed")
    return None
