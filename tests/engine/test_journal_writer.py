"""The journal's writer thread: same rows as inline commits, loss counted and journaled,
a full disk survived (a real tmpfs filled up), retention by size and age, fsync off the loop.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from goosectl.controller.engine import Journal, Scheduler, Table
from goosectl.controller.engine.journal import JournalIOError
from goosectl.controller.shell.journal_store import open_journal
from goosectl.controller.shell.journal_writer import JournalWriter, Retention, WalSyncer
from tests.support.smallfs import fill, small_tmpfs

REPO = Path(__file__).resolve().parents[2]

WORKER = """
name: worker
initial: idle
states: [idle, busy, cooling]
events: [job, done, cooled]
context:
  jobs: sum
  queued: sum
  history: append
timers:
  - {state: busy, after_ms: 3, event: done}
  - {state: cooling, after_ms: 1.5, event: cooled}
transitions:
  - {source: idle, event: job, target: busy, actions: [{name: incr, args: {field: jobs}}]}
  - {source: busy, event: job, internal: true, actions: [{name: incr, args: {field: queued}}]}
  - {source: cooling, event: job, internal: true, actions: [{name: incr, args: {field: queued}}]}
  - {source: busy, event: done, target: cooling}
  - {source: cooling, event: cooled, target: idle}
"""


@pytest.fixture
def table(tmp_path: Path) -> Table:
    path = tmp_path / "worker.yaml"
    path.write_text(WORKER)
    return Table.load(path)


def drive(journal: Journal, table: Table, jobs: int, start_ms: float = 0.0) -> Scheduler:
    """Feed `jobs` jobs, 1 ms apart on the virtual clock, flushing like the live loop."""
    scheduler = Scheduler(journal)
    scheduler.start(table.new("w"), int(start_ms * 1e6))
    feed(scheduler, journal, jobs, start_ms)
    return scheduler


def feed(scheduler: Scheduler, journal: Journal, jobs: int, start_ms: float) -> None:
    for i in range(jobs):
        now = int((start_ms + 1 + i) * 1e6)
        scheduler.feed("w", "job", now, input_pos=i)
        journal.maybe_flush(now)


def dump(path: Path) -> tuple[list, list, list]:
    con = sqlite3.connect(path)
    try:
        return (
            con.execute("SELECT * FROM journal ORDER BY seq").fetchall(),
            con.execute("SELECT * FROM checkpoint ORDER BY machine").fetchall(),
            con.execute(
                "SELECT * FROM meta WHERE key NOT LIKE 'journal.%' ORDER BY key"
            ).fetchall(),
        )
    finally:
        con.close()


def wait_until(pred, what: str, timeout_s: float = 20.0) -> None:
    """Poll for a state another thread reaches; the deadline only bounds a broken run."""
    end = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


def own_rows(path: Path, event: str) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute(
            "SELECT seq, source, target, effects FROM journal WHERE machine = 'journal' "
            "AND event = ? ORDER BY seq",
            (event,),
        ).fetchall()
    finally:
        con.close()


def every_gap_is_explained(path: Path) -> None:
    """No silent loss: each sequence number missing from the table lies in a range that a
    `rows_lost` row names, and the counts those rows give add up to the transitions lost."""
    con = sqlite3.connect(path)
    seqs = [r[0] for r in con.execute("SELECT seq FROM journal ORDER BY seq")]
    con.close()
    present = set(seqs)
    missing = [s for s in range(1, seqs[-1] + 1) if s not in present]
    ranges = []
    for _, source, _, _ in own_rows(path, "rows_lost"):
        a, b = source.removeprefix("seq ").split("-")
        ranges.append((int(a), int(b)))
    unexplained = [s for s in missing if not any(a <= s <= b for a, b in ranges)]
    assert not unexplained, f"rows missing without a rows_lost row: {unexplained[:10]}"


def test_writer_gives_the_same_journal_as_inline_commits(tmp_path, table):
    inline = open_journal(tmp_path / "inline.sqlite", durability="group")
    drive(inline, table, 3000)
    inline.close()

    threaded = open_journal(tmp_path / "writer.sqlite", durability="group")
    writer = JournalWriter(threaded).start()
    drive(threaded, table, 3000)
    threaded.set_meta("k", {"v": 1})
    threaded.close()
    inline2 = open_journal(tmp_path / "inline.sqlite", durability="group")
    inline2.set_meta("k", {"v": 1})
    inline2.close()

    rows, checkpoints, meta = dump(tmp_path / "writer.sqlite")
    assert (rows, checkpoints, meta) == dump(tmp_path / "inline.sqlite")
    assert len(rows) > 3000 and writer.committed_rows == len(rows)
    assert writer.commits >= 1 and threaded.lost_rows == 0


def test_a_full_queue_drops_rows_counts_them_and_says_so(tmp_path, table):
    """The writer is held (another process holds the database's write lock, as a backup
    tool would): the loop never waits, drops what does not fit, and the journal says how
    many rows it lost; checkpoints are not lost."""
    path = tmp_path / "j.sqlite"
    journal = open_journal(path, durability="group", interval_ms=1)
    writer = JournalWriter(journal, max_rows=50, retry_s=0.05).start()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        scheduler = drive(journal, table, 2000)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert journal.lost_rows > 0
    # after the release the next flush gets through, carrying the rows_lost row
    feed(scheduler, journal, 10, start_ms=5000)
    journal.close()

    lost = own_rows(path, "rows_lost")
    assert lost, "no rows_lost row"
    counted = sum(int(target.split()[0]) for _, _, target, _ in lost)
    assert counted == journal.lost_rows == writer.status()["lost_rows"]
    assert "writer queue full" in lost[0][3]
    every_gap_is_explained(path)
    # the checkpoint is the machine as it ended, though rows before it were dropped
    con = sqlite3.connect(path)
    snap = json.loads(
        con.execute("SELECT snapshot FROM checkpoint WHERE machine = 'w'").fetchone()[0]
    )
    con.close()
    machine = scheduler.machines["w"]
    assert snap["state"] == machine.state and snap["context"]["jobs"] == machine.ctx["jobs"]


def test_disk_full_is_an_alarm_and_the_journal_resumes_when_space_returns(tmp_path, table):
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        path = disk / "j.sqlite"
        journal = open_journal(path, durability="group", interval_ms=1)
        writer = JournalWriter(journal, max_rows=2000, retry_s=0.05).start()
        scheduler = drive(journal, table, 200)
        filler = fill(disk)
        t = 1000.0
        while journal.alarm is None:  # record until the writer hits the full disk
            feed(scheduler, journal, 200, t)
            t += 300
            wait_until(lambda: writer.queued_rows < 2000 or writer.errors, "the writer moves")
            if t > 2e6:
                raise AssertionError("the journal never noticed the full disk")
        assert "database or disk is full" in journal.alarm, journal.alarm
        assert writer.status()["state"] == "failing"
        feed(scheduler, journal, 3000, t)  # more than the queue holds: dropped, counted
        assert journal.lost_rows > 0
        filler.unlink()
        wait_until(lambda: writer.health()[1] is None, "the writer commits again")
        feed(scheduler, journal, 10, t + 4000)
        assert journal.alarm is None
        journal.close()

        errors, oks = own_rows(path, "io_error"), own_rows(path, "io_ok")
        assert len(errors) == 1 and "database or disk is full" in errors[0][3]
        assert len(oks) == 1 and oks[0][0] > errors[0][0]
        lost = own_rows(path, "rows_lost")
        assert sum(int(x[2].split()[0]) for x in lost) == journal.lost_rows
        every_gap_is_explained(path)


def test_inline_commit_on_a_full_disk_raises_keeps_the_rows_and_resumes(tmp_path, table):
    """`step` commits inline: the caller learns it (so it runs no effect) and nothing is
    lost; the next flush after space returns writes it all."""
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        path = disk / "agent.sqlite"
        journal = open_journal(path, durability="step")
        scheduler = Scheduler(journal)
        scheduler.start(table.new("w"), 0)
        journal.flush(0)
        filler = fill(disk)
        recorded = 0
        with pytest.raises(JournalIOError) as err:
            for i in range(100_000):
                scheduler.feed("w", "job", (i + 1) * 1_000_000, input_pos=i)
                recorded = i + 1
                journal.flush((i + 1) * 1_000_000)
        assert "database or disk is full" in str(err.value) and str(path) in str(err.value)
        assert journal.alarm is not None and journal.unwritten > 0
        with pytest.raises(JournalIOError):
            journal.flush(None)  # still full: still refused, still kept
        filler.unlink()
        journal.flush(None)
        assert journal.alarm is None and journal.unwritten == 0
        journal.close()
        con = sqlite3.connect(path)
        inputs = [r[0] for r in con.execute("SELECT input FROM journal WHERE machine = 'w'")]
        own = con.execute(
            "SELECT event FROM journal WHERE machine = 'journal' ORDER BY seq"
        ).fetchall()
        seqs = [r[0] for r in con.execute("SELECT seq FROM journal ORDER BY seq")]
        con.close()
        assert set(range(recorded)) <= set(inputs)
        assert own == [("io_error",), ("io_ok",)]
        assert seqs == list(range(1, len(seqs) + 1))  # nothing lost, nothing twice


def test_a_start_on_a_full_disk_reads_the_journal_and_resumes_writing_later(tmp_path, table):
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        path = disk / "j.sqlite"
        first = open_journal(path, durability="group")
        drive(first, table, 100)
        first.set_meta("link.seq", 41)
        first.close()
        before = dump(path)[0]
        filler = fill(disk)

        journal = open_journal(path, durability="group", interval_ms=1)  # no traceback
        assert not journal.writable and "disk" in journal.alarm
        assert journal.get_meta("link.seq") == 41
        assert journal.seq == before[-1][0] + 1  # numbered on, after its io_error row
        writer = JournalWriter(journal, retry_s=0.05).start()
        scheduler = Scheduler(journal)
        scheduler.resume_or_start(table, "w", 0)
        feed(scheduler, journal, 50, 10_000)
        wait_until(lambda: writer.errors > 0, "the writer tries the full disk")
        filler.unlink()
        wait_until(lambda: writer.health()[1] is None, "the writer commits again")
        feed(scheduler, journal, 5, 20_000)
        journal.close()
        rows = dump(path)[0]
        assert rows[: len(before)] == before
        assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
        events = [r[3] for r in rows if r[2] == "journal"]
        assert events == ["io_error", "io_ok"]


def test_retention_by_size_keeps_the_file_bounded_and_says_what_it_deleted(tmp_path, table):
    path = tmp_path / "j.sqlite"
    journal = open_journal(path, durability="group", interval_ms=1)
    limit = 300 * 1024
    writer = JournalWriter(journal, retention=Retention(max_bytes=limit, every_s=0.0)).start()
    scheduler = drive(journal, table, 500)
    for k in range(30):
        feed(scheduler, journal, 500, 1000 + k * 600)
        journal.flush(None, wait_s=10)
        writer.drain(10)
    journal.close()
    con = sqlite3.connect(path)
    lo, hi, n = con.execute("SELECT MIN(seq), MAX(seq), COUNT(*) FROM journal").fetchone()
    pages, size = (con.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
    note = json.loads(
        con.execute("SELECT value FROM meta WHERE key = 'journal.retention'").fetchone()[0]
    )
    checkpoint = con.execute("SELECT seq FROM checkpoint WHERE machine = 'w'").fetchone()
    con.close()
    assert writer.trimmed_rows > 0 and lo > 1 and hi == journal.seq
    assert n == hi - lo + 1  # the oldest rows went, the rest is contiguous
    assert pages * size <= limit * 1.5, f"{pages * size} bytes for a {limit}-byte limit"
    assert note["reason"] == "size" and note["below_seq"] == lo
    assert checkpoint is not None  # checkpoints are never trimmed


def test_retention_by_age_deletes_what_was_written_before_the_limit(tmp_path, table):
    path = tmp_path / "j.sqlite"
    journal = open_journal(path, durability="group", interval_ms=1)
    writer = JournalWriter(
        journal, retention=Retention(max_bytes=None, max_age_s=0.5, every_s=0.05)
    ).start()
    scheduler = drive(journal, table, 200)
    journal.flush(None, wait_s=10)
    writer.drain(10)
    old_top = journal.seq
    wait_until(lambda: writer.trimmed_rows > 0, "rows older than 0.5 s deleted")
    feed(scheduler, journal, 50, 10_000)
    journal.close()
    con = sqlite3.connect(path)
    lo = con.execute("SELECT MIN(seq) FROM journal").fetchone()[0]
    con.close()
    assert lo > old_top  # everything written before the limit is gone, the new rows stay
    assert json.loads(dump_meta(path, "journal.retention"))["reason"] == "age"


def dump_meta(path: Path, key: str) -> str:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]
    finally:
        con.close()


def test_step_commits_are_fsynced_by_the_syncer_not_the_caller(tmp_path, table):
    path = tmp_path / "agent.sqlite"
    journal = open_journal(path, durability="step")
    syncer = WalSyncer(journal).start()
    assert journal.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    scheduler = Scheduler(journal)
    scheduler.start(table.new("w"), 0)
    for i in range(20):
        scheduler.feed("w", "job", (i + 1) * 1_000_000, input_pos=i)
        journal.flush((i + 1) * 1_000_000)
        # committed (visible to another connection) when flush returns
        other = sqlite3.connect(path)
        assert other.execute("SELECT MAX(input) FROM journal").fetchone()[0] == i
        other.close()
    wait_until(lambda: syncer.fsyncs > 0, "the WAL fsynced")
    journal.close()
    syncer.close()
    assert syncer.errors == 0 and os.path.exists(path)


def test_status_output_never_blocks_on_a_stream_nobody_reads():
    """A pipe whose reader never reads fills after 64 KiB; the writer thread blocks there,
    the caller does not: later lines are dropped and counted."""
    from goosectl.controller.shell.output_pump import LinePump

    r, w = os.pipe()
    stream = os.fdopen(w, "w")
    pump = LinePump(stream, max_lines=100)
    line = "x" * 199 + "\n"
    for _ in range(2000):  # 400 KB: far beyond the pipe
        pump.write(line)
    assert pump.dropped > 0 and pump.dropped + len(pump._q) + pump.written <= 2000
    os.close(r)  # the reader goes away: the blocked write fails, the thread ends
    pump.close()
    assert pump.dropped >= 2000 - 100 - 400  # at most the queue and ~what the pipe took
