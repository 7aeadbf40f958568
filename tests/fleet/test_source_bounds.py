"""The uplink's reading of the journal's range (`JournalReader.bounds`, polled ten times
a second): the two ends of the primary key, never a scan of the table. `SELECT MIN(seq),
MAX(seq)` scanned it (SQLite answers only a lone MIN or MAX from the index): 13 ms a
poll on a lab journal of a few hundred thousand rows, most of the uplink's CPU beside the
wire-trip benchmark's controller. The journal is a real one (`open_journal`)."""

from __future__ import annotations

import sqlite3

from goosectl.controller.fleet.source import JournalReader
from goosectl.controller.shell.journal_store import SEQ_BOUNDS, open_journal


def _journal(path, rows: int) -> None:
    journal = open_journal(path)
    journal.close()
    db = sqlite3.connect(path)
    db.executemany(
        "INSERT INTO journal (seq, time_ns, machine, event, source, target, effects, "
        "table_name, version) VALUES (?, ?, 'm', 'e', 'a', 'b', '', 't', '1')",
        ((seq, seq * 1000) for seq in range(1, rows + 1)),
    )
    db.execute("DELETE FROM journal WHERE seq < 40")  # retention took the oldest rows
    db.commit()
    db.close()


def test_bounds_are_the_oldest_kept_and_the_newest_row(tmp_path) -> None:
    path = tmp_path / "bay.sqlite"
    _journal(path, 5000)
    assert JournalReader(path).bounds() == (40, 5000)


def test_an_empty_journal_has_no_bounds(tmp_path) -> None:
    path = tmp_path / "bay.sqlite"
    open_journal(path).close()
    assert JournalReader(path).bounds() == (0, 0)


def test_bounds_read_the_index_ends_and_never_scan_the_table(tmp_path) -> None:
    path = tmp_path / "bay.sqlite"
    _journal(path, 100)
    plan = [row[3] for row in sqlite3.connect(path).execute("EXPLAIN QUERY PLAN " + SEQ_BOUNDS)]
    assert [p for p in plan if p.startswith("SEARCH journal")] == ["SEARCH journal"] * 2, plan
    assert not [p for p in plan if p.startswith("SCAN journal")], plan
    # the form it replaced, for contrast: the same question, the whole table read
    old = sqlite3.connect(path).execute("EXPLAIN QUERY PLAN SELECT MIN(seq), MAX(seq) FROM journal")
    assert [row[3] for row in old] == ["SCAN journal"]
