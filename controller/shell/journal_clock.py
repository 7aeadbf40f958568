"""UTC for journal rows.

A journal row's `time_ns` is the time the engine ran on: live (`goosectl run`) the
monotonic clock, which timers need because it never jumps, but which means nothing outside
the process (it counts from the machine's boot); in replay and the demo the virtual clock,
i.e. the capture's own timestamps, already UTC. So the shell that opens a journal records
a clock anchor in its `meta` table, ``clock@<first seq>`` = {"clock", "time_ns",
"utc_ns", "utc"}: from that sequence number on (a resumed journal gets a new anchor, since
the monotonic clock restarts with the machine), ``utc_ns = anchor.utc_ns + (time_ns -
anchor.time_ns)``. The view `journal_utc` (every column of `journal` plus `utc_ns` and
`utc`, ISO 8601 with a Z) does that arithmetic in SQLite, so a person reads

    sqlite3 bay.sqlite "SELECT utc, machine, event, source, target FROM journal_utc"

without knowing the rule. The engine's journal reads no clock; this shell module does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
import time
from typing import Literal

from goosectl.controller.engine import Journal

Clock = Literal["monotonic", "virtual"]

#: the anchor that applies to a row: the newest `clock@N` with N <= the row's seq
_ANCHOR = (
    "(SELECT value FROM meta WHERE key LIKE 'clock@%' "
    "AND CAST(substr(key, 7) AS INTEGER) <= j.seq "
    "ORDER BY CAST(substr(key, 7) AS INTEGER) DESC LIMIT 1)"
)
UTC_NS = f"(j.time_ns + json_extract({_ANCHOR}, '$.utc_ns') - json_extract({_ANCHOR}, '$.time_ns'))"
VIEW = (
    "CREATE VIEW IF NOT EXISTS journal_utc AS SELECT j.*, "
    f"{UTC_NS} AS utc_ns, "
    f"strftime('%Y-%m-%dT%H:%M:%fZ', {UTC_NS} / 1e9, 'unixepoch') AS utc "
    "FROM journal AS j"
)


def anchor(journal: Journal | None, clock: Clock) -> None:
    """Record how this run's `time_ns` maps to UTC, from the journal's next row on.

    `monotonic`: the live clock, read here beside the wall clock. `virtual`: replay and
    demo time, which is capture (UTC) time already: the offset is 0."""
    if journal is None:
        return
    if clock == "monotonic":
        mono, wall = time.monotonic_ns(), time.time_ns()
        note = dt.datetime.fromtimestamp(wall / 1e9, dt.UTC).isoformat().replace("+00:00", "Z")
    else:
        mono = wall = 0
        note = "time_ns is capture time (UTC)"
    journal.set_meta(
        f"clock@{journal.seq + 1}",
        {"clock": clock, "time_ns": mono, "utc_ns": wall, "utc": note},
    )
    db = getattr(journal, "db", None)
    if db is not None:
        # a read-only or full disk must not stop the controller: the view is a convenience
        with contextlib.suppress(sqlite3.Error):
            db.execute(VIEW)
