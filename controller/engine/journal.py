"""The journal: every transition, in order, in SQLite (WAL), plus checkpoints to resume from.

Recording is an append to an in-memory list; `flush` packs what was recorded since the last
flush into one `Batch` (rows, the checkpoints of the machines they touched, meta) and
commits it in one transaction, so a checkpoint never runs ahead of or behind its journal.
The shell calls `maybe_flush` when the group interval has passed (time is passed in: the
journal reads no clock).

Who commits a batch:
  inline   `JournalStore.commit` on the caller's thread (sync, step, and group without a sink)
  a sink   group durability with a writer attached (`controller.shell.journal_writer`):
           `flush` only hands the batch over; the writer thread commits it. A sink that is
           full refuses the batch: its rows are dropped and counted (never its checkpoints or
           meta, which ride with the next batch), and the next batch that gets through
           carries a `journal/rows_lost` row saying how many rows, which sequence numbers
           and which times were lost, and why.

Durability modes (per journal, so per machine group):
  sync   commit every record before `record` returns; synchronous=FULL (survives power loss)
  group  commit every `interval_ms` or `batch` records, whichever comes first;
         synchronous=NORMAL: survives a process crash at commit, power loss after the OS flush
  step   commit when the caller says (`flush`), before the caller runs any effect: the agent
         layer flushes after each input, so every transition that input caused (a session's
         loop and workflow machines together) is committed, atomically, before any effect.
         synchronous=FULL unless a WAL syncer takes the fsync off the caller's thread
         (`on_commit`, see `controller.shell.journal_writer.WalSyncer`)
  memory nothing written to disk (tests, `table run` without --journal)

An I/O error (a full disk, a failing device) never escapes as a bare sqlite error: an inline
commit raises `JournalIOError` and keeps the batch for the next flush; a writer keeps retrying
and reports its health, which `maybe_flush` turns into `journal/io_error` and `journal/io_ok`
rows and the `alarm` attribute the shell shows. A journal opened on a full disk (SQLite
cannot even create its WAL index) starts from an in-memory copy of the file (`read_only`)
and opens the file for writing once a commit finds room.

A small key/value `meta` table rides in the same transactions (e.g. the device link's next
sequence number, so a restarted controller continues above it; `journal.software`, the
goosectl version that last opened the file for writing).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from goosectl.controller import __version__
from goosectl.controller.engine.effects import Effect
from goosectl.controller.engine.machine import Machine, Step

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
    "hash",
)

#: The machine name of the journal's own rows (rows lost, I/O errors and recoveries).
SELF = "journal"

#: The meta key naming the goosectl version that last opened the journal for writing.
SOFTWARE_KEY = "journal.software"

#: Meta keys of the hash chain: how rows are chained (and from which seq on), and the last
#: row committed (seq, hash), written in the same transaction as that row.
CHAIN_KEY = "journal.chain"
HEAD_KEY = "journal.head"

#: A journal row as recorded: (seq, time ns, machine, event, source, target, the step's
#: effects (a digest when committed) or the journal's own detail text, table, version, input)
Row = tuple[int, int, str, str, str, str, Sequence[Effect] | str, str, str, int | None]
#: A checkpoint as taken: (machine, seq, input, snapshot, armed timers)
Checkpoint = tuple[str, int, int | None, dict[str, Any], list[dict[str, Any]]]


def effects_digest(effects: Sequence[Effect] | str) -> str:
    """A short, stable fingerprint of a step's effects (their reprs are deterministic).

    The journal's own rows carry their detail as text instead, stored as it is."""
    if type(effects) is str:
        return effects
    if not effects:
        return "-"
    return hashlib.blake2b(repr(effects).encode(), digest_size=8).hexdigest()


def chain_mac(key: bytes | None) -> Any:
    """The hash every row's link starts from (copied per row, so its set-up is paid once):
    BLAKE2b-128, in its keyed mode (a MAC) when `key` is given."""
    return hashlib.blake2b(digest_size=16, key=key or b"")


def row_hash(prev: str, row: tuple[Any, ...], mac: Any) -> str:
    """The chain link of a committed row: BLAKE2b-128 over the previous row's hash (32
    hex digits, "" for the first row) and this row's columns (seq .. input, effects as
    committed), from `chain_mac`. With a key it is a MAC: nobody without the key can
    write a row, or rewrite the rows after a change, that verifies. Without a key the
    chain still shows any change or deletion to whoever did not recompute every hash after
    it. The columns' repr is the encoding: unambiguous for str, int and None, and the same
    on every run (a replay's journal is byte for byte the same)."""
    m = mac.copy()
    m.update((prev + repr(row)).encode())
    return str(m.hexdigest())


class JournalRefused(Exception):
    """A journal file goosectl will not use: not a journal (malformed, not SQLite), or not
    a file of ours to write (a link, someone else's). The message names the file."""


class JournalIOError(Exception):
    """A commit that the disk refused (full, read-only, failing). Says which journal, what
    SQLite said, and what happens to the rows."""

    def __init__(self, path: str, exc: sqlite3.Error, rows: int, what: str = "") -> None:
        self.path = path
        self.code = getattr(exc, "sqlite_errorname", type(exc).__name__)
        self.reason = str(exc)
        self.rows = rows
        tail = what or f"{rows} row(s) not written"
        super().__init__(f"journal {path}: {self.reason} ({self.code}); {tail}")

    @property
    def detail(self) -> str:
        """One line for an alarm: what failed and why, without the row count."""
        return f"journal {self.path}: {self.reason} ({self.code})"


@dataclass(slots=True)
class Batch:
    """What one flush hands to the disk. Built on the recording thread: rows as recorded
    (effects still objects, digested by whoever commits), each touched machine's snapshot and
    armed timers as they are now, meta values already JSON."""

    rows: list[Row]
    checkpoints: list[Checkpoint]
    meta: dict[str, str]
    #: the machines behind `checkpoints`: a dropped batch gives them back to the next one
    dirty: dict[str, tuple[Machine, int | None]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Rows, and at least 1: a checkpoint-only batch still takes a commit."""
        return len(self.rows) or 1


class Sink(Protocol):
    """Where a journal with a writer hands its batches (see `journal_writer.JournalWriter`)."""

    #: bumped on every change of health (read on the loop: one attribute, no call)
    version: int

    def submit(self, batch: Batch, wait_s: float = 0.0) -> bool:
        """Take the batch (True) or refuse it because the queue is full (False), after
        waiting up to `wait_s` for room."""
        ...

    def health(self) -> tuple[int, str | None]:
        """(a counter bumped on every change, the current I/O error or None)."""
        ...

    def drain(self, timeout_s: float | None = None) -> bool:
        """Wait until everything submitted is committed; False if it could not be."""
        ...

    def close(self, timeout_s: float | None = None) -> None: ...


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
        key, mac = self.key, self._mac
        prev = self._head[1] if self._head else ""
        rows = []
        for b in batches:
            for r in b.rows:
                row = (*r[:6], effects_digest(r[6]), *r[7:])
                prev = row_hash(prev, row, mac)
                rows.append((*row, prev))
        checkpoints = [
            (
                mid,
                seq,
                pos,
                json.dumps(snapshot, sort_keys=True, default=_json_default),
                json.dumps(timers, sort_keys=True, default=_json_default),
            )
            for b in batches
            for mid, seq, pos, snapshot, timers in b.checkpoints
        ]
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


class Journal:
    def __init__(
        self,
        path: str | Path | None = None,
        durability: Durability = "group",
        interval_ms: float = 5.0,
        batch: int = 4096,
        key: bytes | None = None,
    ) -> None:
        if path is None:
            durability = "memory"
        self.durability: Durability = durability
        self.path = str(path) if path is not None else ":memory:"
        #: the MAC key of the hash chain (None: an unkeyed chain), see `row_hash`
        self.key = key
        #: the current I/O error (an alarm for the shell), None while the disk takes commits
        self.alarm: str | None = None
        if self.path != ":memory:":
            claim_files(self.path)
        try:
            self.db = connect(self.path, durability)
            self._writable = True
        except sqlite3.OperationalError as exc:
            if self.path == ":memory:":
                raise
            # a full disk at start-up: read what is there, commit once the disk allows it
            self.db = read_only(self.path, exc)
            self._writable = False
            self.alarm = JournalIOError(self.path, exc, 0).detail
        except sqlite3.DatabaseError as exc:  # a damaged file: say which
            if "not a database" in str(exc):
                raise  # the command names the option that gave it (`--journal X: ...`)
            raise JournalRefused(f"journal {self.path}: not a usable journal ({exc})") from None
        try:
            self.store = JournalStore(self.db, self.path, key)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise JournalRefused(f"journal {self.path}: not a usable journal ({exc})") from None
        self.interval_ns = int(interval_ms * 1_000_000)
        self.batch = batch
        self._pending: list[Row] = []
        self._dirty: dict[str, tuple[Machine, int | None]] = {}
        self._last_flush_ns: int | None = None
        self._last_ns = 0
        self._meta: dict[str, str] = {}
        row = self.db.execute("SELECT MAX(seq) FROM journal").fetchone()
        self.seq = int(row[0] or 0)
        #: batches committed inline or handed to the writer
        self.flushes = 0
        #: Who owns the armed timers (the runner's heap): asked at flush time, so a checkpoint
        #: holds the timers exactly as they were after the machine's last recorded step.
        self.timer_source: Callable[[str], list[dict[str, Any]]] = lambda _machine: []
        #: the writer of a `group` journal (None: commits inline), see `attach`
        self.sink: Sink | None = None
        #: called after every inline commit (a WAL syncer's kick)
        self.on_commit: Callable[[], None] | None = None
        #: rows dropped because the writer was full, since the journal was opened
        self.lost_rows = 0
        #: the loss not yet recorded: [rows, first seq, last seq, first ns, last ns, why]
        self._loss: list[Any] | None = None
        self._health_seen = 0
        self._deferred = False
        if self.alarm is not None:
            self._note("io_error", "ok", "failing", self.alarm, None)
        if self.durability != "memory":
            # which software wrote this file (the last to open it), with its first batch
            self.set_meta(SOFTWARE_KEY, {"goosectl": __version__})

    def defer_sync(self, on_commit: Callable[[], None]) -> None:
        """Commit without fsync (synchronous=NORMAL: a commit is in the WAL, so it survives
        the process, when `flush` returns) and call `on_commit` after each commit: whoever
        that is fsyncs the WAL and runs the WAL checkpoints, off the caller's thread."""
        self.on_commit = on_commit
        self._deferred = True
        self._deferred_pragmas(self.db)

    def _deferred_pragmas(self, db: sqlite3.Connection) -> None:
        if self._deferred and self._writable:
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA wal_autocheckpoint=0")

    @property
    def writable(self) -> bool:
        """False while the file could only be opened read-only (a full disk at start-up)."""
        return self._writable

    def attach(self, sink: Sink) -> None:
        """Hand every later flush to `sink` (a writer thread) instead of committing inline.

        The sink owns the writing from here on (its own connection); this one only reads."""
        if self.durability != "group":
            raise ValueError(f"a writer serves `group` journals, not {self.durability!r}")
        self.sink = sink

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
            # a step without effects keeps no list alive until the flush: one object fewer
            # per row for the garbage collector to count, and to walk, on the loop
            effects = step.effects or ()
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
                        effects,
                        table.name,
                        table.version,
                        input_pos,
                    )
                )
            self.seq = seq
        self._last_ns = now_ns
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
        """Flush if the group interval passed or the batch is full; the shell calls this.
        With a writer attached it also notices the writer's health (see `alarm`)."""
        sink = self.sink
        if sink is not None and sink.version != self._health_seen:
            self._watch(sink, now_ns)
        if self.durability == "step" or (not self._pending and not self._dirty):
            return False
        if self._last_flush_ns is None:
            self._last_flush_ns = now_ns
        if len(self._pending) >= self.batch or now_ns - self._last_flush_ns >= self.interval_ns:
            self.flush(now_ns)
            return True
        return False

    # -- disk -------------------------------------------------------------------------

    def flush(self, now_ns: int | None = None, wait_s: float = 0.0) -> None:
        """Commit what was recorded (inline), or hand it to the writer.

        `wait_s`: how long a full writer queue is waited for before the rows are dropped
        (closing and reading wait; the live loop never does). Inline, a commit the disk
        refuses raises `JournalIOError` and keeps everything for the next flush."""
        noted = None
        if self._loss is not None and self.sink is not None:
            noted = self._note_loss(self._loss, now_ns)
        batch = self._take()
        if batch is None:
            return
        self._last_flush_ns = now_ns
        if self.sink is not None:
            if self.sink.submit(batch, wait_s):
                self.flushes += 1
                if noted is not None:
                    self._loss = None
            else:
                self._drop(batch, noted)
            return
        try:
            self._ensure_writable()
            self.store.commit([batch])
            self._tampered(self.store.tampered, now_ns)
        except JournalIOError as exc:
            self._give_back(batch)
            if self.alarm != exc.detail:
                self._note(
                    "io_error",
                    "ok" if self.alarm is None else "failing",
                    "failing",
                    exc.detail,
                    now_ns,
                )
                self.alarm = exc.detail
            raise
        self.flushes += 1
        if self.alarm is not None:
            self.alarm = None
            self._note("io_ok", "failing", "ok", "commits resumed", now_ns)
            self.flush(now_ns)
        if self.on_commit is not None:
            self.on_commit()

    def _tampered(self, why: str | None, now_ns: int | None) -> None:
        """A change behind our back, found at a commit: a `journal/tampered` row and the
        alarm, which stays (the file cannot be trusted again until it is verified)."""
        if why is not None and self.alarm != why:
            self._note("tampered", "intact", "tampered", why, now_ns)
            self.alarm = why

    def _ensure_writable(self) -> None:
        """After a start on a full disk: open the file for writing once the disk allows."""
        if self._writable:
            return
        try:
            db = connect(self.path, self.durability)
        except sqlite3.Error as exc:
            raise JournalIOError(self.path, exc, len(self._pending)) from exc
        self.db.close()
        self.db = db
        self.store = JournalStore(db, self.path, self.key)
        self._writable = True
        self._deferred_pragmas(db)

    def _take(self) -> Batch | None:
        if not self._pending and not self._dirty and not self._meta:
            return None
        seq, timers = self.seq, self.timer_source
        batch = Batch(
            self._pending,
            [(mid, seq, pos, m.snapshot(), timers(mid)) for mid, (m, pos) in self._dirty.items()],
            self._meta,
            self._dirty,
        )
        self._pending, self._dirty, self._meta = [], {}, {}
        return batch

    def _give_back(self, batch: Batch) -> None:
        """A batch that was not committed becomes pending again, ahead of newer records."""
        self._pending[:0] = batch.rows
        self._dirty = {**batch.dirty, **self._dirty}
        self._meta = {**batch.meta, **self._meta}

    def _drop(self, batch: Batch, noted: Row | None) -> None:
        """The writer is full: count the transition rows and let them go. Kept for the next
        batch: the checkpoints (taken again from the live machines), the meta and the
        journal's own rows, except a `rows_lost` row, which is written again, updated,
        with the next batch that gets through (its sequence number stays unused)."""
        self._dirty = {**batch.dirty, **self._dirty}
        self._meta = {**batch.meta, **self._meta}
        own = [r for r in batch.rows if r[2] == SELF and r is not noted]
        lost = [r for r in batch.rows if r[2] != SELF]
        self._pending[:0] = own
        if lost:
            self.lost_rows += len(lost)
            first, last = lost[0], lost[-1]
            if self._loss is None:
                _, why = self.sink.health() if self.sink is not None else (0, None)
                reason = "writer queue full" + (f": {why}" if why else "")
                self._loss = [0, first[0], last[0], first[1], last[1], reason]
            loss = self._loss
            loss[0] += len(lost)
            loss[2], loss[4] = last[0], last[1]
        if noted is not None and self._loss is not None:
            # the rows_lost row's own number stays unused: inside the range it will name
            self._loss[2] = max(self._loss[2], noted[0])

    def _note_loss(self, loss: list[Any], now_ns: int | None) -> Row:
        n, first_seq, last_seq, first_ns, last_ns, why = loss
        return self._note(
            "rows_lost",
            f"seq {first_seq}-{last_seq}",
            f"{n} rows",
            f"{n} rows lost, recorded between {first_ns} and {last_ns} ns: {why}",
            now_ns,
        )

    def _note(self, event: str, source: str, target: str, detail: str, now_ns: int | None) -> Row:
        """One of the journal's own rows (machine `journal`), numbered like any other."""
        self.seq += 1
        t = self._last_ns if now_ns is None else now_ns
        row = (self.seq, t, SELF, event, source, target, detail, SELF, "1", None)
        self._pending.append(row)
        return row

    def _watch(self, sink: Sink, now_ns: int) -> None:
        """Turn a change of the writer's health into a row and the `alarm` attribute."""
        version, why = sink.health()
        if version == self._health_seen:
            return
        self._health_seen = version
        if why == self.alarm:
            return
        if why is not None:
            self._note(
                "io_error", "ok" if self.alarm is None else "failing", "failing", why, now_ns
            )
        else:
            self._note("io_ok", "failing", "ok", "commits resumed", now_ns)
            if not self._writable:
                # the writer could open the file again: read the live file too
                with contextlib.suppress(JournalIOError):
                    self._ensure_writable()
        self.alarm = why

    def close(self, timeout_s: float = 10.0) -> None:
        """Flush everything (waiting for the writer rather than dropping), then close. A
        writer that cannot commit within `timeout_s` (the disk still full) gives up and
        counts what it held; inline, what could not be committed is left in `unwritten`."""
        try:
            if self.sink is not None:
                self.flush(self._last_ns, wait_s=timeout_s)
                self.sink.close(timeout_s)
            else:
                # the alarm and `unwritten` say what was not written
                with contextlib.suppress(JournalIOError):
                    self.flush()
        finally:
            self.db.close()

    @property
    def unwritten(self) -> int:
        """Rows recorded here and not handed to the disk or a writer (after a failed flush)."""
        return len(self._pending)

    # -- reading ----------------------------------------------------------------------

    def _committed(self) -> None:
        """Make everything recorded so far readable (flush, and wait for the writer)."""
        if self.sink is not None:
            self.flush(self._last_ns, wait_s=10.0)
            self.sink.drain(10.0)
        else:
            self.flush()

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
        self._committed()
        sql = "SELECT * FROM journal"
        args: tuple[str, ...] = ()
        if machine is not None:
            sql += " WHERE machine = ?"
            args = (machine,)
        for r in self.db.execute(sql + " ORDER BY seq", args):
            yield dict(zip(COLUMNS, r, strict=True))

    def rows_after(self, seq: int) -> Iterator[dict[str, Any]]:
        """Committed rows with a sequence number above `seq` (no flush)."""
        for r in self.db.execute("SELECT * FROM journal WHERE seq > ? ORDER BY seq", (seq,)):
            yield dict(zip(COLUMNS, r, strict=True))


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


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "_asdict"):
        return obj._asdict()
    raise TypeError(f"context value of type {type(obj).__name__} is not JSON-serialisable")
