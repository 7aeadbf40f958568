"""The journal: every transition, in order, plus checkpoints to resume from, recorded here
and committed by a `Store` (the SQLite file of `controller.shell.journal_store`, or
`MemoryStore`): the engine does no I/O.

Recording is an append to an in-memory list; `flush` packs what was recorded since the last
flush into one `Batch` (rows, the checkpoints of the machines they touched, meta) and
commits it in one transaction, so a checkpoint never runs ahead of or behind its journal.
The shell calls `maybe_flush` when the group interval has passed (time is passed in: the
journal reads no clock).

Who commits a batch:
  inline   `Store.commit` on the caller's thread (sync, step, and group without a sink)
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
cannot even create its WAL index) starts from an in-memory copy of the file (its store's
`writable` is False) and the store opens the file for writing once a commit finds room.

A small key/value `meta` table rides in the same transactions (e.g. the device link's next
sequence number, so a restarted controller continues above it; `journal.software`, the
goosectl version that last opened the file for writing).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from goosectl.controller.engine.effects import Effect
from goosectl.controller.engine.machine import Machine, Step

Durability = Literal["sync", "group", "step", "memory"]

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


class Row(NamedTuple):
    """A journal row as recorded; `effects` becomes their digest when committed."""

    seq: int
    time_ns: int
    machine: str
    event: str
    source: str
    target: str
    #: the step's effects, or the detail text of one of the journal's own rows
    effects: Sequence[Effect] | str
    table: str
    version: str
    input: int | None


class Checkpoint(NamedTuple):
    """A machine's state as taken at a flush, committed with the rows that led to it."""

    machine: str
    seq: int
    input: int | None
    snapshot: dict[str, Any]
    timers: list[dict[str, Any]]


@dataclass(slots=True)
class Loss:
    """Rows a full writer refused, not yet said in a `journal/rows_lost` row."""

    rows: int
    first_seq: int
    last_seq: int
    first_ns: int
    last_ns: int
    why: str


#: `Row`'s constructor without its Python-level `__new__`: `record` makes one per
#: transition on the loop, so it takes the C call
_new_row = tuple.__new__


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


def chained_rows(batches: list[Batch], prev: str, mac: Any) -> tuple[list[tuple[Any, ...]], str]:
    """The rows of `batches` as committed (effects digested, each with its chain link after
    `prev`), and the last link."""
    rows = []
    for b in batches:
        for r in b.rows:
            row = (*r[:6], effects_digest(r[6]), *r[7:])
            prev = row_hash(prev, row, mac)
            rows.append((*row, prev))
    return rows, prev


def checkpoint_rows(batches: list[Batch]) -> list[tuple[str, int, int | None, str, str]]:
    """The checkpoints of `batches` as committed: snapshot and timers as sorted JSON."""
    return [
        (
            c.machine,
            c.seq,
            c.input,
            json.dumps(c.snapshot, sort_keys=True, default=json_default),
            json.dumps(c.timers, sort_keys=True, default=json_default),
        )
        for b in batches
        for c in b.checkpoints
    ]


class JournalRefused(Exception):
    """A journal file goosectl will not use: not a journal (malformed, not SQLite), or not
    a file of ours to write (a link, someone else's). The message names the file."""


class JournalIOError(Exception):
    """A commit that the disk refused (full, read-only, failing). Says which journal, what
    SQLite said, and what happens to the rows."""

    def __init__(self, path: str, exc: Exception, rows: int, what: str = "") -> None:
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


class Store(Protocol):
    """Where a journal's batches are committed and read back: the SQLite file
    (`controller.shell.journal_store.SqliteStore`) or `MemoryStore`."""

    path: str
    #: False while the file could only be opened read-only (`reopen` when the disk allows)
    writable: bool
    #: why the store could only be opened read-only (None: it takes commits)
    alarm: str | None

    @property
    def tampered(self) -> str | None:
        """Why the store no longer holds what it committed (None while it does)."""
        ...

    def commit(self, batches: list[Batch]) -> None:
        """All or nothing, in one transaction; `JournalIOError` when the disk says no."""
        ...

    def reopen(self, pending: int) -> None: ...
    def defer_sync(self) -> None: ...
    def last_seq(self) -> int: ...
    def get_meta(self, key: str, default: Any = None) -> Any: ...
    def checkpoint(self, machine_id: str) -> dict[str, Any] | None: ...
    def checkpoints(self) -> list[str]: ...
    def rows(self, machine: str | None = None) -> Iterator[dict[str, Any]]: ...
    def rows_after(self, seq: int) -> Iterator[dict[str, Any]]: ...
    def keep_text(self, version: str, name: str, text: str) -> None: ...
    def texts(self) -> dict[str, str]: ...
    def close(self) -> None: ...


class MemoryStore:
    """A store that keeps what it commits in memory, as the file would (digests, chain
    links, checkpoints through JSON): tests, replays and `table run` without --journal."""

    path = ":memory:"
    writable = True
    alarm: str | None = None
    tampered: str | None = None

    def __init__(self) -> None:
        self._rows: list[tuple[Any, ...]] = []
        self._checkpoints: dict[str, tuple[str, int, int | None, str, str]] = {}
        self._meta: dict[str, str] = {}
        self._texts: dict[str, str] = {}
        self._prev = ""
        self._mac = chain_mac(None)

    def commit(self, batches: list[Batch]) -> None:
        rows, self._prev = chained_rows(batches, self._prev, self._mac)
        self._rows += rows
        self._checkpoints.update((c[0], c) for c in checkpoint_rows(batches))
        for b in batches:
            self._meta.update(b.meta)

    def reopen(self, pending: int) -> None:
        return None

    def defer_sync(self) -> None:
        return None

    def last_seq(self) -> int:
        return int(self._rows[-1][0]) if self._rows else 0

    def get_meta(self, key: str, default: Any = None) -> Any:
        value = self._meta.get(key)
        return default if value is None else json.loads(value)

    def checkpoint(self, machine_id: str) -> dict[str, Any] | None:
        c = self._checkpoints.get(machine_id)
        if c is None:
            return None
        snapshot, timers = json.loads(c[3]), json.loads(c[4])
        return {"snapshot": snapshot, "input": c[2], "seq": c[1], "timers": timers}

    def checkpoints(self) -> list[str]:
        return sorted(self._checkpoints)

    def rows(self, machine: str | None = None) -> Iterator[dict[str, Any]]:
        for r in self._rows:
            if machine is None or r[2] == machine:
                yield dict(zip(COLUMNS, r, strict=True))

    def rows_after(self, seq: int) -> Iterator[dict[str, Any]]:
        for r in self._rows:
            if r[0] > seq:
                yield dict(zip(COLUMNS, r, strict=True))

    def keep_text(self, version: str, name: str, text: str) -> None:
        self._texts.setdefault(version, text)

    def texts(self) -> dict[str, str]:
        return dict(self._texts)

    def close(self) -> None:
        return None


class Journal:
    """The recording side: rows and checkpoints in memory until `flush` hands them to the
    store (inline) or to a writer (`attach`). `store` None: a `MemoryStore`, durability
    `memory`. A journal file is opened by `controller.shell.journal_store.open_journal`."""

    def __init__(
        self,
        store: Store | None = None,
        durability: Durability = "group",
        interval_ms: float = 5.0,
        batch: int = 4096,
        key: bytes | None = None,
    ) -> None:
        if store is None:
            durability = "memory"
            store = MemoryStore()
        elif not hasattr(store, "commit"):
            raise TypeError(
                f"Journal({store!r}): a journal takes a store; a journal file is opened by "
                "goosectl.controller.shell.journal_store.open_journal"
            )
        self.durability: Durability = durability
        self.store: Store = store
        #: the MAC key of the hash chain (None: an unkeyed chain), see `row_hash`
        self.key = key
        #: the current I/O error (an alarm for the shell), None while the disk takes commits
        self.alarm: str | None = store.alarm
        self.interval_ns = int(interval_ms * 1_000_000)
        self.batch = batch
        self._pending: list[Row] = []
        self._dirty: dict[str, tuple[Machine, int | None]] = {}
        self._last_flush_ns: int | None = None
        self._last_ns = 0
        self._meta: dict[str, str] = {}
        self.seq = store.last_seq()
        #: batches committed inline or handed to the writer
        self.flushes = 0
        #: Who owns the armed timers (the scheduler's heap): asked at flush time, so a checkpoint
        #: holds the timers exactly as they were after the machine's last recorded step.
        self.timer_source: Callable[[str], list[dict[str, Any]]] = lambda _machine: []
        #: the writer of a `group` journal (None: commits inline), see `attach`
        self.sink: Sink | None = None
        #: called after every inline commit (a WAL syncer's kick)
        self.on_commit: Callable[[], None] | None = None
        #: rows dropped because the writer was full, since the journal was opened
        self.lost_rows = 0
        #: the loss not yet recorded
        self._loss: Loss | None = None
        self._health_seen = 0
        if self.alarm is not None:
            self._note("io_error", "ok", "failing", self.alarm, None)

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def db(self) -> Any:
        """The SQLite connection of a file store (for tools and tests that read the file
        as it is); the journal itself only talks to its store."""
        return getattr(self.store, "db", None)

    def defer_sync(self, on_commit: Callable[[], None]) -> None:
        """Commit without fsync (synchronous=NORMAL: a commit is in the WAL, so it survives
        the process, when `flush` returns) and call `on_commit` after each commit: whoever
        that is fsyncs the WAL and runs the WAL checkpoints, off the caller's thread."""
        self.on_commit = on_commit
        self.store.defer_sync()

    @property
    def writable(self) -> bool:
        """False while the file could only be opened read-only (a full disk at start-up)."""
        return self.store.writable

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
                    _new_row(
                        Row,
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
                        ),
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
        """A meta value as committed (what `set_meta` holds for the next flush is not)."""
        return self.store.get_meta(key, default)

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
            self.store.reopen(len(self._pending))
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

    def _take(self) -> Batch | None:
        if not self._pending and not self._dirty and not self._meta:
            return None
        seq, timers = self.seq, self.timer_source
        batch = Batch(
            self._pending,
            [
                Checkpoint(mid, seq, pos, m.snapshot(), timers(mid))
                for mid, (m, pos) in self._dirty.items()
            ],
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
        own = [r for r in batch.rows if r.machine == SELF and r is not noted]
        lost = [r for r in batch.rows if r.machine != SELF]
        self._pending[:0] = own
        if lost:
            self.lost_rows += len(lost)
            first, last = lost[0], lost[-1]
            if self._loss is None:
                _, why = self.sink.health() if self.sink is not None else (0, None)
                reason = "writer queue full" + (f": {why}" if why else "")
                self._loss = Loss(0, first.seq, last.seq, first.time_ns, last.time_ns, reason)
            loss = self._loss
            loss.rows += len(lost)
            loss.last_seq, loss.last_ns = last.seq, last.time_ns
        if noted is not None and self._loss is not None:
            # the rows_lost row's own number stays unused: inside the range it will name
            self._loss.last_seq = max(self._loss.last_seq, noted.seq)

    def _note_loss(self, loss: Loss, now_ns: int | None) -> Row:
        n = loss.rows
        return self._note(
            "rows_lost",
            f"seq {loss.first_seq}-{loss.last_seq}",
            f"{n} rows",
            f"{n} rows lost, recorded between {loss.first_ns} and {loss.last_ns} ns: {loss.why}",
            now_ns,
        )

    def _note(self, event: str, source: str, target: str, detail: str, now_ns: int | None) -> Row:
        """One of the journal's own rows (machine `journal`), numbered like any other."""
        self.seq += 1
        t = self._last_ns if now_ns is None else now_ns
        row = Row(self.seq, t, SELF, event, source, target, detail, SELF, "1", None)
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
            if not self.store.writable:
                # the writer could open the file again: read the live file too
                with contextlib.suppress(JournalIOError):
                    self.store.reopen(len(self._pending))
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
            self.store.close()

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
        return self.store.checkpoint(machine_id)

    def checkpoints(self) -> list[str]:
        return self.store.checkpoints()

    def rows(self, machine: str | None = None) -> Iterator[dict[str, Any]]:
        """Every journal row (flushing first), optionally of one machine."""
        self._committed()
        return self.store.rows(machine)

    def rows_after(self, seq: int) -> Iterator[dict[str, Any]]:
        """Committed rows with a sequence number above `seq` (no flush)."""
        return self.store.rows_after(seq)

    def keep_text(self, version: str, name: str, text: str) -> None:
        """Keep the text of a procedure version (the agent's: a restored session is parsed
        from it, whatever the file says by then); `JournalIOError` if the disk says no."""
        self.store.keep_text(version, name, text)

    def texts(self) -> dict[str, str]:
        """Every procedure text kept, by version."""
        return self.store.texts()


def json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).hex()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "_asdict"):
        return obj._asdict()
    raise TypeError(f"context value of type {type(obj).__name__} is not JSON-serialisable")
