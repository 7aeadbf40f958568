"""The disk off the live loop: a writer thread for `group` journals, a WAL syncer for `step`.

`JournalWriter` owns every write of a `group` journal (its own SQLite connection). The live
loop's `Journal.flush` only appends a batch to a bounded queue (a lock, a deque append, a
notify); the writer commits queued batches together, one transaction, and:

- when the queue holds `max_rows` rows it refuses new batches: the loop drops their rows and
  counts them, never waits (the journal writes a `rows_lost` row once a batch gets through);
- when the disk refuses a commit (ENOSPC, EIO, read-only) it keeps the batches, reports
  the error (`health`, which the loop turns into an `io_error` row and an alarm) and tries
  again every `retry_s`, so the journal resumes by itself when space returns;
- it applies the retention limits (`Retention`): the oldest rows go first, by age and by
  size; checkpoints and meta are never deleted.

`WalSyncer` serves a `step` journal (the agent layer): the loop still commits each input
before its effects run (a write into the WAL, in the page cache: a SIGKILL after it loses
nothing), but the fsync that makes it survive a power loss runs here, right after.

A thread that holds the GIL delays the loop by up to the interpreter's switch interval (5 ms
by default) when the loop wakes: `bound_gil_wait` lowers it for live processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goosectl.controller import logs
from goosectl.controller.engine.journal import Batch, Journal, JournalIOError, JournalRefused
from goosectl.controller.report.bay_report import percentiles
from goosectl.controller.shell.journal_clock import anchor as anchor_clock
from goosectl.controller.shell.journal_store import JournalStore, connect, open_journal, seq_bounds

log = logging.getLogger(__package__)

#: The loop waits at most this long for the GIL when a writer thread holds it.
SWITCH_INTERVAL_S = 0.0002

MARKS = """
CREATE TABLE IF NOT EXISTS marks (
    utc_ns INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL
);
"""


def bound_gil_wait(interval_s: float = SWITCH_INTERVAL_S) -> None:
    """Let a thread that wants the GIL (the loop, woken by a frame) get it within
    `interval_s` of asking, whatever the writer thread is doing."""
    sys.setswitchinterval(min(sys.getswitchinterval(), interval_s))


@dataclass(frozen=True)
class Retention:
    """How much journal is kept. The oldest rows are deleted first, by `seq`, until the file
    is under `max_bytes` (down to `low` of it) and holds nothing written more than
    `max_age_s` ago (wall clock, so reboots do not matter). None: no limit.

    Checked every `every_s`; each check also writes a time mark (wall-clock time, first
    sequence number written after it) that the age limit is applied with, so ages are
    exact to `every_s`."""

    max_bytes: int | None = 512 * 1024 * 1024
    max_age_s: float | None = 30 * 86400.0
    every_s: float = 30.0
    low: float = 0.8
    #: rows deleted per transaction (a delete also goes through the WAL)
    chunk: int = 20_000
    #: the first seq someone still needs (the fleet uplink's unacknowledged rows): rows
    #: from it on are never deleted, whatever the limits say; None: no one
    hold: Callable[[], int | None] | None = None


class JournalWriter:
    """The writer thread of one `group` journal. `start()` attaches it; `Journal.close()`
    flushes and closes it (waiting up to its timeout for a disk that is full).

    The loop's side of a hand-over is a deque append, two integer updates and, when the
    writer sleeps, one event set. The writer sleeps whenever its queue is empty and is
    woken only by a hand-over, which the loop makes in its idle work, after the round's
    inputs: the writer then runs while the loop waits in select. A writer that polled
    its queue on its own clock would wake in the middle of inputs, ask for the GIL (taking
    it from the loop within the switch interval) and, preempted while holding it under
    default scheduling, keep the loop waiting until the host ran it again."""

    def __init__(
        self,
        journal: Journal,
        max_rows: int = 65_536,
        retention: Retention | None = None,
        retry_s: float = 1.0,
        coalesce_rows: int = 16_384,
    ) -> None:
        self.journal = journal
        self.path = journal.path
        #: why the file is not what this writer committed (a journal/io_error row names it)
        self.tampered: str | None = None
        self.max_rows = max_rows
        self.retention = retention or Retention()
        self.retry_s = retry_s
        self.coalesce_rows = coalesce_rows
        self._q: deque[Batch] = deque()
        #: rows handed over (written by the loop only) and rows done with (writer only)
        self._in_rows = 0
        self._out_rows = 0
        self._sleeping = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        #: waited on by `drain` and a waiting `submit`; notified after every commit
        self._done = threading.Condition()
        self._deadline = 0.0
        self._health: tuple[int, str | None] = (0, None)
        self.version = 0
        self._state: str | None = None
        #: rows and commits written, errors seen, rows given up at close, rows trimmed
        self.committed_rows = 0
        self.commits = 0
        self.errors = 0
        self.abandoned_rows = 0
        self.trimmed_rows = 0
        self.queue_peak = 0
        self.last_error: str | None = None
        #: duration of every commit (ns), the last 100,000
        self.commit_ns: deque[int] = deque(maxlen=100_000)
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)

    def start(self) -> JournalWriter:
        self.journal.attach(self)
        self._thread.start()
        return self

    # -- the loop's side (Journal calls these) ------------------------------------------

    def submit(self, batch: Batch, wait_s: float = 0.0) -> bool:
        size = batch.size
        if self.queued_rows and self.queued_rows + size > self.max_rows:
            if wait_s <= 0 or self._stop.is_set() or self._state == "failing":
                return False  # waiting for a disk that refuses would only delay
            end = time.monotonic() + wait_s
            with self._done:
                while self.queued_rows and self.queued_rows + size > self.max_rows:
                    left = end - time.monotonic()
                    if left <= 0 or not self._thread.is_alive():
                        return False
                    self._done.wait(left)
        self._q.append(batch)
        self._in_rows += size
        queued = self._in_rows - self._out_rows
        if queued > self.queue_peak:
            self.queue_peak = queued
        if self._sleeping:
            self._sleeping = False
            self._wake.set()
        return True

    def health(self) -> tuple[int, str | None]:
        return self._health

    def drain(self, timeout_s: float | None = None) -> bool:
        self._wake.set()
        with self._done:
            self._done.wait_for(
                lambda: not self.queued_rows or not self._thread.is_alive(), timeout_s
            )
        return not self.queued_rows

    def close(self, timeout_s: float | None = 10.0) -> None:
        """Commit what is queued and stop; after `timeout_s` of a disk that refuses, give up
        (the rows still queued are counted in `abandoned_rows`)."""
        self._deadline = time.monotonic() + (timeout_s if timeout_s is not None else 1e9)
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def queued_rows(self) -> int:
        return self._in_rows - self._out_rows

    # -- the thread -----------------------------------------------------------------------

    def _next_work(self, next_check: float) -> bool:
        """Wait, asleep, for batches or the retention check; False once closing with
        nothing left."""
        while not self._q:
            now = time.monotonic()
            if self._stop.is_set():
                return False
            if now >= next_check:
                return True
            self._sleeping = True
            if self._q:  # a batch came between the look and the flag: no sleep
                self._sleeping = False
                break
            self._wake.wait(next_check - now)
            self._wake.clear()
            self._sleeping = False
        return True

    def _run(self) -> None:
        store: JournalStore | None = None
        next_check = 0.0
        #: taken from the queue, not yet committed (kept across retries)
        batches: list[Batch] = []
        while True:
            if not batches and not self._next_work(next_check) and not self._q:
                break
            n = sum(b.size for b in batches)
            while self._q and (not batches or n + self._q[0].size <= self.coalesce_rows):
                b = self._q.popleft()
                batches.append(b)
                n += b.size
            try:
                if store is None:
                    store = self._open()
                if batches:
                    t0 = time.perf_counter_ns()
                    store.commit(batches)
                    if store.tampered is not None and self.tampered != store.tampered:
                        self.tampered = store.tampered
                        self._failing(store.tampered)
                    self.commit_ns.append(time.perf_counter_ns() - t0)
                    self.commits += 1
                    self.committed_rows += sum(len(b.rows) for b in batches)
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + self.retention.every_s
                    self._retain(store.db)
                    store.settle()  # our own trimming may shrink the file
            except (JournalIOError, sqlite3.OperationalError) as exc:
                # a commit, the opening or the retention: the disk said no. A fresh
                # connection is tried after `retry_s` (one that saw an I/O error may not
                # recover by itself)
                if not isinstance(exc, JournalIOError):
                    exc = JournalIOError(self.path, exc, 0)
                self._failing(exc.detail)
                if store is not None:
                    with contextlib.suppress(sqlite3.Error):
                        store.db.close()
                    store = None
                if self._wait_retry():
                    continue
                self._done_with(batches, committed=False)
                self._done_with(self._drain_queue(), committed=False)
                break
            except Exception as exc:  # a defect (say, a context value JSON cannot hold)
                self._failing(f"journal {self.path}: {type(exc).__name__}: {exc}")
                self._done_with(batches, committed=False)
                batches = []
                continue
            self._done_with(batches, committed=True)
            batches = []
            self._ok()
        if store is not None:
            with contextlib.suppress(sqlite3.Error):
                store.db.close()

    def _open(self) -> JournalStore:
        db = connect(self.path, "group")
        try:
            db.executescript(MARKS)
            # the WAL is cut back to this after each checkpoint, so it does not keep the peak
            db.execute("PRAGMA journal_size_limit=8388608")
        except BaseException:
            db.close()
            raise
        return JournalStore(db, self.path, self.journal.key)

    def _done_with(self, batches: list[Batch], committed: bool) -> None:
        for b in batches:
            self._out_rows += b.size
            if not committed:
                self.abandoned_rows += len(b.rows)
        with self._done:
            self._done.notify_all()

    def _drain_queue(self) -> list[Batch]:
        out = []
        while self._q:
            out.append(self._q.popleft())
        return out

    def _wait_retry(self) -> bool:
        """Sleep `retry_s` before trying again; False when closing has run out of time
        (what is still queued is then given up and counted)."""
        if self._stop.is_set():
            left = self._deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(self.retry_s, left))
        else:
            self._stop.wait(self.retry_s)
        return True

    def _failing(self, why: str) -> None:
        self.errors += 1
        self.last_error = why
        if self._state != "failing" or self._health[1] != why:
            self._state = "failing"
            self._health = (self._health[0] + 1, why)
            self.version = self._health[0]

    def _ok(self) -> None:
        if self.tampered is not None:  # stays raised: the file cannot be trusted again
            return
        if self._state != "ok":
            self._state = "ok"
            self._health = (self._health[0] + 1, None)
            self.version = self._health[0]

    # -- retention --------------------------------------------------------------------------

    def _retain(self, db: sqlite3.Connection) -> None:
        """Write a time mark, then delete what is past the limits, oldest first."""
        r = self.retention
        utc = time.time_ns()
        top = db.execute("SELECT MAX(seq) FROM journal").fetchone()[0] or 0
        db.execute("INSERT OR REPLACE INTO marks VALUES (?, ?)", (utc, top + 1))
        if r.max_age_s is not None:
            row = db.execute(
                "SELECT seq FROM marks WHERE utc_ns <= ? ORDER BY utc_ns DESC LIMIT 1",
                (utc - int(r.max_age_s * 1e9),),
            ).fetchone()
            if row is not None:
                self._delete_below(db, row[0], "age", utc)
                db.execute(
                    "DELETE FROM marks WHERE utc_ns < (SELECT MAX(utc_ns) FROM marks "
                    "WHERE utc_ns <= ?)",
                    (utc - int(r.max_age_s * 1e9),),
                )
        if r.max_bytes is not None:
            used = _used_bytes(db)
            if used > r.max_bytes:
                lo, hi = seq_bounds(db)
                if lo is not None and hi is not None:
                    share = 1.0 - r.low * r.max_bytes / used
                    self._delete_below(db, lo + max(1, int((hi - lo + 1) * share)), "size", utc)
        db.execute("PRAGMA incremental_vacuum")

    def _delete_below(self, db: sqlite3.Connection, below: int, reason: str, utc: int) -> None:
        """Delete rows with seq < `below`, a chunk per transaction, and say so in meta."""
        held = self.retention.hold() if self.retention.hold is not None else None
        if held is not None:
            below = min(below, held)
        deleted = 0
        while True:
            lo = db.execute("SELECT MIN(seq) FROM journal").fetchone()[0]
            if lo is None or lo >= below:
                break
            upto = min(below, lo + self.retention.chunk)
            db.execute("BEGIN IMMEDIATE")
            try:
                cur = db.execute("DELETE FROM journal WHERE seq < ?", (upto,))
                deleted += cur.rowcount
                note = {"below_seq": upto, "reason": reason, "utc_ns": utc}
                db.execute(
                    "INSERT INTO meta VALUES ('journal.retention', ?) ON CONFLICT(key) "
                    "DO UPDATE SET value=excluded.value",
                    (json.dumps(note),),
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                raise
        self.trimmed_rows += deleted

    # -- reports ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """For the stop report: what was written, lost, trimmed, and how long commits took."""
        return {
            "path": self.path,
            "state": self._state or "idle",
            "error": self._health[1],
            "committed_rows": self.committed_rows,
            "commits": self.commits,
            "lost_rows": self.journal.lost_rows + self.abandoned_rows,
            "queued_rows": self.queued_rows,
            "queue_peak_rows": self.queue_peak,
            "trimmed_rows": self.trimmed_rows,
            "errors": self.errors,
            "commit_us": percentiles(list(self.commit_ns)),
        }


def _used_bytes(db: sqlite3.Connection) -> int:
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    return (pages - free) * size


class WalSyncer:
    """The fsync of a `step` journal, off the loop.

    The loop's commit (synchronous=NORMAL) writes the WAL before any effect runs, so a killed
    process loses nothing it acted on; this thread then fsyncs the WAL file so a power loss
    loses at most the commits of the last `lag` (reported: `fsync_lag_us`). It also runs the
    WAL checkpoints (the loop's connection never does: a checkpoint fsyncs too)."""

    def __init__(self, journal: Journal, checkpoint_bytes: int = 4 * 1024 * 1024) -> None:
        self.journal = journal
        self.path = journal.path
        self.checkpoint_bytes = checkpoint_bytes
        self._cv = threading.Condition()
        self._kicked = 0
        self._kick_ns = 0
        self._closing = False
        self._health: tuple[int, str | None] = (0, None)
        self.fsyncs = 0
        self.errors = 0
        #: kick -> fsync done (ns): how long a committed step was exposed to a power loss
        self.lag_ns: deque[int] = deque(maxlen=100_000)
        self._thread = threading.Thread(target=self._run, name="journal-fsync", daemon=True)

    def start(self) -> WalSyncer:
        self.journal.defer_sync(self.kick)
        self._thread.start()
        return self

    def kick(self) -> None:
        """Called by the journal after each commit (the loop's thread)."""
        with self._cv:
            if not self._kicked:
                self._kick_ns = time.perf_counter_ns()
            self._kicked += 1
            self._cv.notify()

    def health(self) -> tuple[int, str | None]:
        return self._health

    def close(self) -> None:
        with self._cv:
            self._closing = True
            self._cv.notify()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        fd: int | None = None
        ino = None
        db: sqlite3.Connection | None = None
        wal = self.path + "-wal"
        while True:
            with self._cv:
                while not self._kicked and not self._closing:
                    self._cv.wait()
                if not self._kicked and self._closing:
                    break
                self._kicked = 0
                since = self._kick_ns
            try:
                try:
                    st = os.stat(wal)
                except FileNotFoundError:
                    continue  # closed: the last connection checkpointed the WAL and removed it
                if fd is None or st.st_ino != ino:
                    if fd is not None:
                        os.close(fd)
                    fd, ino = os.open(wal, os.O_RDONLY), st.st_ino
                os.fdatasync(fd)  # what SQLite itself does for its WAL on Linux
                self.fsyncs += 1
                self.lag_ns.append(time.perf_counter_ns() - since)
                if st.st_size >= self.checkpoint_bytes:
                    if db is None:
                        db = sqlite3.connect(self.path, isolation_level=None)
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                if self._health[1] is not None:
                    self._health = (self._health[0] + 1, None)
            except (OSError, sqlite3.Error) as exc:
                self.errors += 1
                why = f"journal {self.path}: fsync: {exc}"
                if self._health[1] != why:
                    self._health = (self._health[0] + 1, why)
        if fd is not None:
            os.close(fd)
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()

    def status(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "fsyncs": self.fsyncs,
            "errors": self.errors,
            "error": self._health[1],
            "fsync_lag_us": percentiles(list(self.lag_ns)),
        }


#: The environment variable naming the file whose bytes key the journal's hash chain.
KEY_ENV = "GOOSECTL_JOURNAL_KEY_FILE"


def journal_key(path: str | os.PathLike[str] | None = None) -> bytes | None:
    """The MAC key of the journal's hash chain: derived (BLAKE2b-256) from the bytes of
    `path`, else of the file `$GOOSECTL_JOURNAL_KEY_FILE` names; None if neither is given
    (an unkeyed chain). The file must be a regular file nobody else may read: a key that
    others can read lets them rewrite the journal undetected. `KeyFileError` otherwise."""
    where = path if path is not None else os.environ.get(KEY_ENV) or None
    if where is None:
        return None
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise KeyFileError(f"journal key {where}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyFileError(f"journal key {where}: not a regular file")
        if st.st_mode & 0o077:
            raise KeyFileError(
                f"journal key {where}: readable or writable by others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}; chmod 600 it)"
            )
        data = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    if not data.strip():
        raise KeyFileError(f"journal key {where}: empty")
    return hashlib.blake2b(data.strip(), digest_size=32).digest()


class KeyFileError(JournalRefused):
    """The journal key's file cannot be used: says which file and why."""


class LiveJournals:
    """The journals of a live controller (`goosectl run`): the bay's (`group`, with its
    writer thread) and the agent's (`step`, fsync on a thread unless `agent_fsync` is
    "inline"); their I/O alarms shown in the status view; closed in order; reported."""

    def __init__(
        self,
        bay_path: Path | None,
        agent_path: Path | None,
        retention: Retention | None = None,
        queue_rows: int = 65_536,
        agent_fsync: str = "thread",
    ) -> None:
        key = journal_key()
        self.bay = open_journal(bay_path, durability="group", key=key) if bay_path else None
        self.agent = open_journal(agent_path, durability="step", key=key) if agent_path else None
        for journal in (self.bay, self.agent):  # monotonic times -> UTC (journal_utc view)
            anchor_clock(journal, "monotonic")
        self.writer = (
            JournalWriter(self.bay, max_rows=queue_rows, retention=retention).start()
            if self.bay is not None
            else None
        )
        self.syncer = (
            WalSyncer(self.agent).start()
            if self.agent is not None and agent_fsync == "thread"
            else None
        )
        if self.writer is not None or self.syncer is not None:
            bound_gil_wait()
        self._shown: dict[str, str | None] = {}
        self._next_ns = 0

    def watch(self, status: Any, every_ns: int = 100_000_000) -> Callable[[int], None]:
        """A hook for the loop's rounds: an I/O alarm of either journal appears in the
        status view (`alarms[journal]`, `alarms[agent_journal]`) and is logged once as it
        is raised (WARNING) and once as it clears (INFO), as an `alarm` event."""

        def poll(now_ns: int) -> None:
            if now_ns < self._next_ns:
                return
            self._next_ns = now_ns + every_ns
            for name, why in self.alarms().items():
                if why == self._shown.get(name):
                    continue
                self._shown[name] = why
                status.alarms[name] = why is not None
                if why is not None:
                    logs.event(
                        log, logging.WARNING, "alarm", "alarm %s: %s; control continues",
                        name, why, alarm=name, active=True, detail=why,
                    )  # fmt: skip
                else:
                    logs.event(
                        log, logging.INFO, "alarm", "%s: commits resumed", name,
                        alarm=name, active=False, detail="commits resumed",
                    )  # fmt: skip

        return poll

    def alarms(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        if self.bay is not None:
            out["journal"] = self.bay.alarm
        if self.agent is not None:
            why = self.agent.alarm
            if why is None and self.syncer is not None:
                why = self.syncer.health()[1]
            out["agent_journal"] = why
        return out

    def close(self, timeout_s: float = 5.0) -> None:
        """Flush and close both (the bay's writer waits up to `timeout_s` for a full disk)."""
        try:
            if self.bay is not None:
                self.bay.close(timeout_s)
        finally:
            if self.agent is not None:
                self.agent.close()
            if self.syncer is not None:
                self.syncer.close()

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.writer is not None:
            out["bay"] = self.writer.status()
        if self.agent is not None:
            agent: dict[str, Any] = {
                "path": self.agent.path,
                "error": self.agent.alarm,
                "unwritten_rows": self.agent.unwritten,
            }
            if self.syncer is not None:
                agent.update(self.syncer.status())
            out["agent"] = agent
        return out
