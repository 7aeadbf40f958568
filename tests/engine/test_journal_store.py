"""The journal records without I/O; its store commits. A journal in memory reads back
exactly what the same journal committed to a SQLite file reads back."""

from __future__ import annotations

import json
from pathlib import Path

from goosectl.controller.engine import Journal, Scheduler, Table
from goosectl.controller.shell.journal_store import open_journal

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tables" / "breaker.yaml"
EVENTS = REPO / "examples" / "tables" / "breaker-events.jsonl"


def _run(journal: Journal) -> tuple[list[dict], dict | None]:
    r = Scheduler(journal)
    r.start(Table.load(EXAMPLE).new("b"), 0)
    for line in EVENTS.read_text().splitlines():
        e = json.loads(line)
        r.feed("b", e["event"], int(e["time_ms"] * 1e6))
    return list(journal.rows()), journal.checkpoint("b")


def test_memory_and_file_journals_read_back_the_same_rows(tmp_path):
    memory = _run(Journal(None))
    on_file = open_journal(tmp_path / "j.sqlite", durability="group")
    try:
        assert _run(on_file) == memory
    finally:
        on_file.close()
    assert len(memory[0]) > 5 and memory[1] is not None
    # the rows are chained the same way in both
    assert all(r["hash"] for r in memory[0])


def test_a_path_is_not_a_store():
    try:
        Journal("j.sqlite")  # type: ignore[arg-type]
    except TypeError as exc:
        assert "open_journal" in str(exc)
    else:
        raise AssertionError("Journal took a path")


def test_procedure_texts_are_kept_by_either_store(tmp_path):
    for journal in (Journal(None), open_journal(tmp_path / "a.sqlite", durability="step")):
        journal.keep_text("v1", "isolate", "name: isolate")
        journal.keep_text("v1", "isolate", "a second text for the same version is ignored")
        assert journal.texts() == {"v1": "name: isolate"}
        journal.close()
