"""N journals written at R rows/s each for S seconds by the product's journal (`Journal`
in group durability with its writer thread, `JournalWriter`), in one process: the load
test's stand-in for N controllers, which do not fit on the CI machine's two cores beside
their uplinks and the cluster. Each journal is ROOT/cNN/bay.sqlite, as `goosectl run
--state ROOT/cNN` writes it. Prints "ready" once every journal exists (WAL on), then
waits for a line on stdin before writing: the uplinks start between the two, so none of
them opens a journal while its writer is still setting it up (each side then waits out
SQLite's busy timeout: the start took minutes on a loaded host). Prints one JSON line per
journal at the end: its last seq.

    python -m tests.fleet.load_writers ROOT N RATE SECONDS
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from goosectl.controller.engine import Scheduler, Table
from goosectl.controller.shell.journal_clock import anchor
from goosectl.controller.shell.journal_store import open_journal
from goosectl.controller.shell.journal_writer import JournalWriter, Retention

TOGGLE = """
name: toggle
initial: a
states: [a, b]
events: [flip]
transitions:
  - {source: a, event: flip, target: b}
  - {source: b, event: flip, target: a}
"""


def main(root: Path, n: int, rate: float, seconds: float) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "toggle.yaml").write_text(TOGGLE)
    table = Table.load(root / "toggle.yaml")
    schedulers = []
    for i in range(n):
        d = root / f"c{i:02d}"
        d.mkdir(exist_ok=True)
        journal = open_journal(d / "bay.sqlite", durability="group", interval_ms=50)
        JournalWriter(journal, retention=Retention(max_bytes=None, max_age_s=None)).start()
        anchor(journal, "monotonic")
        scheduler = Scheduler(journal)
        scheduler.start(table.new("t"), time.monotonic_ns())
        schedulers.append((journal, scheduler))
    print("ready", flush=True)
    sys.stdin.readline()  # go: the uplinks are started
    tick = 0.05
    per_tick = rate * tick
    start = time.monotonic()
    done = 0.0
    while (now := time.monotonic()) - start < seconds:
        due = (now - start) / tick * per_tick
        k = int(due - done)
        if k:
            t = time.monotonic_ns()
            for journal, scheduler in schedulers:
                for _ in range(k):
                    scheduler.feed("t", "flip", t)
                journal.maybe_flush(t)
            done += k
        time.sleep(max(0.0, tick - (time.monotonic() - now)))
    for i, (journal, _) in enumerate(schedulers):
        journal.close()
        print(json.dumps({"controller": f"c{i:02d}", "seq": journal.seq}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
