"""The central store: every bay's journal rows, last birth/death/state, and the gaps.

One schema for SQLite (the default, a file) and PostgreSQL (`postgresql://...`, psycopg 3),
created on first start; the SQL is written once, with `?` parameters that the PostgreSQL
side turns into `%s`. Tables (documented for readers in docs/fleet.md):

  fleet_rows   (controller, seq) primary key: a row arriving twice is stored once
  fleet_bays   one row per bay: last birth, death, state, the highest seq covered
  fleet_gaps   seq ranges missing between covered ones; `lost` ranges the bay announced
               deleted before they were sent. A gap is a fleet alarm until it is filled.
  fleet_meta   the schema version

Everything a message changes is committed before the message is acknowledged to the
broker, so a collector killed at any moment loses nothing: the broker sends again what was
not acknowledged. The collector stores the messages waiting for it together, in one
transaction (`many`): a commit per message held it to ~7,900 one-row messages a second
here, under the fleet's 10,000 rows a second.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

DDL = (
    """CREATE TABLE IF NOT EXISTS fleet_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS fleet_rows (
        controller TEXT NOT NULL,
        seq BIGINT NOT NULL,
        utc_ns BIGINT NOT NULL,
        machine TEXT NOT NULL,
        event TEXT NOT NULL,
        source TEXT NOT NULL,
        target TEXT NOT NULL,
        effects TEXT NOT NULL,
        table_name TEXT NOT NULL,
        version TEXT NOT NULL,
        sent_ns BIGINT NOT NULL,
        stored_ns BIGINT NOT NULL,
        PRIMARY KEY (controller, seq))""",
    """CREATE TABLE IF NOT EXISTS fleet_bays (
        controller TEXT PRIMARY KEY,
        site TEXT NOT NULL,
        bay TEXT NOT NULL,
        bd_seq BIGINT NOT NULL DEFAULT 0,
        version TEXT,
        birth_ns BIGINT,
        death_ns BIGINT,
        death_bd_seq BIGINT,
        state TEXT,
        state_ns BIGINT,
        state_seq BIGINT,
        first_seq BIGINT,
        last_seq BIGINT NOT NULL DEFAULT 0,
        refused BIGINT NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS fleet_gaps (
        controller TEXT NOT NULL,
        seq_first BIGINT NOT NULL,
        seq_last BIGINT NOT NULL,
        lost INTEGER NOT NULL DEFAULT 0,
        opened_ns BIGINT NOT NULL,
        PRIMARY KEY (controller, seq_first))""",
)

BAY_COLUMNS = (
    "controller",
    "site",
    "bay",
    "bd_seq",
    "version",
    "birth_ns",
    "death_ns",
    "death_bd_seq",
    "state",
    "state_ns",
    "state_seq",
    "first_seq",
    "last_seq",
    "refused",
)


@dataclass(frozen=True)
class Gap:
    controller: str
    seq_first: int
    seq_last: int
    lost: bool


class Store:
    """The store on one connection (the collector's single writer thread, or a reader)."""

    def __init__(self, url: str, busy_timeout_s: float = 30.0) -> None:
        """`busy_timeout_s`: how long a SQLite write waits for another writer's lock
        before it fails (a reader's store makes its schema sure in a short write)."""
        self.url = url
        self.pg = url.startswith(("postgresql://", "postgres://"))
        if self.pg:
            import psycopg

            self.db: Any = psycopg.connect(url, autocommit=False)
        else:
            path = url.removeprefix("sqlite://") if url.startswith("sqlite://") else url
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # one user at a time: the collector builds it on one thread and stores on another
            self.db = sqlite3.connect(
                path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
        #: the open `many` transaction's cursor, and the bays it has made sure of
        self._outer: Any = None
        self._bays: set[str] = set()
        with self.tx() as cur:
            for ddl in DDL:
                cur.execute(ddl)
            self._exec(
                cur,
                "INSERT INTO fleet_meta VALUES ('schema', ?) ON CONFLICT (key) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )

    def close(self) -> None:
        self.db.close()

    # -- SQL on either side ---------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.pg else sql

    def _exec(self, cur: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        return cur.execute(self._sql(sql), params)

    @contextmanager
    def tx(self) -> Iterator[Any]:
        """One transaction: committed on success, rolled back on any error; inside `many`,
        part of its transaction."""
        if self._outer is not None:
            yield self._outer
            return
        with self._transaction() as cur:
            yield cur

    @contextmanager
    def many(self) -> Iterator[None]:
        """One transaction around every write inside it (the collector's batch of messages):
        all committed together or none (the broker then sends them all again)."""
        with self._transaction() as cur:
            self._outer = cur
            try:
                yield
            finally:
                self._outer = None
                self._bays.clear()

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        if self.pg:
            with self.db.transaction(), self.db.cursor() as cur:
                yield cur
            return
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self.pg:
            with self.db.cursor() as cur:
                cur.execute(self._sql(sql), params)
                rows = cur.fetchall()
            self.db.commit()
            return list(rows)
        return list(self.db.execute(sql, params).fetchall())

    # -- writes (one message each) --------------------------------------------------------

    def _bay(self, cur: Any, controller: str) -> None:
        if controller in self._bays:  # already inserted in this `many` transaction
            return
        if self._outer is not None:
            self._bays.add(controller)
        site, _, bay = controller.partition("/")
        self._exec(
            cur,
            "INSERT INTO fleet_bays (controller, site, bay) VALUES (?, ?, ?) "
            "ON CONFLICT (controller) DO NOTHING",
            (controller, site, bay),
        )

    def birth(self, controller: str, obj: dict[str, Any]) -> None:
        """A birth with a bdSeq at least the last one's (an older, retained one is ignored)."""
        with self.tx() as cur:
            self._bay(cur, controller)
            self._exec(
                cur,
                "UPDATE fleet_bays SET bd_seq = ?, version = ?, birth_ns = ? "
                "WHERE controller = ? AND bd_seq <= ?",
                (obj["bdSeq"], obj.get("version"), obj.get("utc_ns"), controller, obj["bdSeq"]),
            )

    def death(self, controller: str, obj: dict[str, Any], now_ns: int) -> None:
        """A death counts only for the current session (its bdSeq is the last birth's)."""
        with self.tx() as cur:
            self._bay(cur, controller)
            self._exec(
                cur,
                "UPDATE fleet_bays SET death_ns = ?, death_bd_seq = ? "
                "WHERE controller = ? AND bd_seq <= ?",
                (now_ns, obj["bdSeq"], controller, obj["bdSeq"]),
            )

    def state(self, controller: str, obj: dict[str, Any], now_ns: int) -> None:
        with self.tx() as cur:
            self._bay(cur, controller)
            self._exec(
                cur,
                "UPDATE fleet_bays SET state = ?, state_ns = ?, state_seq = ? "
                "WHERE controller = ? AND bd_seq <= ?",
                (json.dumps(obj), now_ns, obj.get("journal_seq"), controller, obj["bdSeq"]),
            )

    def refused(self, controller: str | None) -> None:
        """A payload refused (malformed, unexpected): counted on its bay when it has one."""
        if controller is None:
            return
        with self.tx() as cur:
            self._bay(cur, controller)
            self._exec(
                cur,
                "UPDATE fleet_bays SET refused = refused + 1 WHERE controller = ?",
                (controller,),
            )

    def batch(
        self,
        controller: str,
        first: int,
        last: int,
        rows: list[dict[str, Any]],
        sent_ns: int,
        now_ns: int,
        lost: tuple[int, int] | None = None,
    ) -> None:
        """Rows `first..last` stored once each; the range covered, gaps opened or filled.
        The rows are converted before anything is written, so a bad one (ValueError,
        TypeError) leaves the store, and the `many` transaction around it, untouched."""
        params = [
            (
                controller,
                r["seq"],
                int(r.get("utc_ns", 0)),
                str(r.get("machine", "")),
                str(r.get("event", "")),
                str(r.get("source", "")),
                str(r.get("target", "")),
                str(r.get("effects", "")),
                str(r.get("table", "")),
                str(r.get("version", "")),
                sent_ns,
                now_ns,
            )
            for r in rows
        ]
        with self.tx() as cur:
            self._bay(cur, controller)
            if params:
                cur.executemany(
                    self._sql(
                        "INSERT INTO fleet_rows VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT (controller, seq) DO NOTHING"
                    ),
                    params,
                )
            self._cover(cur, controller, first, last, now_ns, lost)

    def _cover(
        self,
        cur: Any,
        controller: str,
        first: int,
        last: int,
        now_ns: int,
        lost: tuple[int, int] | None,
    ) -> None:
        """Mark `first..last` covered: a gap before it is opened, the gaps it overlaps
        shrink, split or close. A `lost` range inside it stays as a lost gap."""
        top, low = self._exec(
            cur,
            "SELECT last_seq, first_seq FROM fleet_bays WHERE controller = ?",
            (controller,),
        ).fetchone()
        if low is None:
            # a bay's journal starts at seq 1, and its uplink's first batch there (with any
            # range retention deleted first announced as lost): anything before the first
            # batch seen is missing here, an alarm like any gap
            self._exec(
                cur, "UPDATE fleet_bays SET first_seq = 1 WHERE controller = ?", (controller,)
            )
        if first > top + 1:
            self._gap(cur, controller, top + 1, first - 1, False, now_ns)
        if last > top:
            self._exec(
                cur,
                "UPDATE fleet_bays SET last_seq = ? WHERE controller = ?",
                (last, controller),
            )
        overlapping = self._exec(
            cur,
            "SELECT seq_first, seq_last, lost FROM fleet_gaps WHERE controller = ? "
            "AND lost = 0 AND seq_first <= ? AND seq_last >= ?",
            (controller, last, first),
        ).fetchall()
        for g1, g2, _ in overlapping:
            self._exec(
                cur,
                "DELETE FROM fleet_gaps WHERE controller = ? AND seq_first = ?",
                (controller, g1),
            )
            if g1 < first:
                self._gap(cur, controller, g1, first - 1, False, now_ns)
            if g2 > last:
                self._gap(cur, controller, last + 1, g2, False, now_ns)
        if lost is not None:
            self._gap(cur, controller, lost[0], lost[1], True, now_ns)

    def _gap(self, cur: Any, controller: str, a: int, b: int, lost: bool, now_ns: int) -> None:
        self._exec(
            cur,
            "INSERT INTO fleet_gaps VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (controller, seq_first) DO UPDATE SET seq_last = excluded.seq_last, "
            "lost = excluded.lost",
            (controller, a, b, int(lost), now_ns),
        )

    # -- reads ------------------------------------------------------------------------------

    def bays(self) -> list[dict[str, Any]]:
        cols = ", ".join(BAY_COLUMNS)
        got = self.query(f"SELECT {cols} FROM fleet_bays ORDER BY controller")
        return [dict(zip(BAY_COLUMNS, r, strict=True)) for r in got]

    def gaps(self, controller: str | None = None) -> list[Gap]:
        sql = "SELECT controller, seq_first, seq_last, lost FROM fleet_gaps"
        got = (
            self.query(sql + " WHERE controller = ? ORDER BY seq_first", (controller,))
            if controller
            else self.query(sql + " ORDER BY controller, seq_first")
        )
        return [Gap(c, a, b, bool(lost)) for c, a, b, lost in got]

    def rows(self, controller: str, since_seq: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        cols = (
            "seq",
            "utc_ns",
            "machine",
            "event",
            "source",
            "target",
            "effects",
            "table_name",
            "version",
        )
        got = self.query(
            f"SELECT {', '.join(cols)} FROM fleet_rows WHERE controller = ? AND seq > ? "
            "ORDER BY seq LIMIT ?",
            (controller, since_seq, limit),
        )
        return [dict(zip(cols, r, strict=True)) for r in got]
