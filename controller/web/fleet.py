"""The fleet collector's store, read-only, for the fleet page and the bay pages it links to.

The layout this reads is the collector's (docs/web.md, "The fleet page"): `fleet_bays`, one
row per bay (controller id, site, bay, birth and death with their bdSeq, the last `state`
payload and when it came, the highest seq stored), and `fleet_rows`, every bay's journal
rows keyed by (controller, seq). SQLite only for now (the collector's default); the page
says so for any other URL.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from goosectl.controller.fleet.view import liveness
from goosectl.controller.web.hub import AlarmBook, Poller, Retransmissions, conditions
from goosectl.controller.web.source import detail, read_only


class FleetError(Exception):
    """A fleet store that cannot be used, with the reason."""


def store_path(url: str) -> Path:
    """The SQLite file of `--fleet-db` (a path, `sqlite:///abs` or `sqlite:rel`)."""
    if url.startswith("sqlite:///"):
        return Path("/" + url.removeprefix("sqlite:///").lstrip("/"))
    if url.startswith("sqlite:"):
        return Path(url.removeprefix("sqlite:"))
    if "://" in url:
        raise FleetError(
            f"--fleet-db {url}: the page reads the collector's SQLite store only "
            "(a path or sqlite:///PATH)"
        )
    return Path(url)


class FleetStore:
    """One read-only connection to the store (one per thread that reads it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db: sqlite3.Connection | None = None
        self.error = ""

    def _open(self) -> sqlite3.Connection | None:
        if self.db is not None:
            return self.db
        if not self.path.exists():
            self.error = f"fleet store {self.path}: not there (yet)"
            return None
        try:
            db = read_only(self.path)
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        except sqlite3.Error as exc:
            self.error = f"fleet store {self.path}: {exc}"
            return None
        missing = {"fleet_bays", "fleet_rows"} - names
        if missing:
            db.close()
            self.error = f"fleet store {self.path}: no table {', '.join(sorted(missing))}"
            return None
        self.db, self.error = db, ""
        return db

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        db = self._open()
        if db is None:
            return []
        try:
            rows = db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            self.error = f"fleet store {self.path}: {exc}"
            self.close()
            return []
        self.error = ""
        return rows

    def close(self) -> None:
        if self.db is not None:
            with contextlib.suppress(sqlite3.Error):
                self.db.close()
        self.db = None


def bay_key(site: str, bay: str) -> str:
    return f"{site}/{bay}"


def parse_state(text: Any) -> dict[str, Any]:
    """A `fleet_bays.state` payload's status (the uplink's `state`: `status` is the
    controller's `status --json`) as the page's status JSON (`ok` true), or why not."""
    try:
        state = json.loads(text) if isinstance(text, str | bytes) else None
    except ValueError:
        state = None
    if not isinstance(state, dict) or not isinstance(state.get("status"), dict):
        return {"ok": False, "error": "no state received from this bay yet"}
    return {**state["status"], "ok": True, "journal_seq": state.get("journal_seq")}


def fleet_rows(store: FleetStore, now_s: float | None = None) -> list[dict[str, Any]]:
    """One row per bay, as the fleet page shows it."""
    now = time.time() if now_s is None else now_s
    out = []
    for r in store.query(
        "SELECT site, bay, bd_seq, birth_ns, death_bd_seq, state, state_ns, last_seq "
        "FROM fleet_bays ORDER BY site, bay"
    ):
        state = parse_state(r["state"])
        seen = r["state_ns"]
        age = None if seen is None else max(0.0, now - seen / 1e9)
        live = liveness(r["bd_seq"], r["death_bd_seq"], r["birth_ns"], seen, int(now * 1e9))
        had = state.get("journal_seq") if state["ok"] else None
        lgos = state.get("lgos", []) if state["ok"] else []
        out.append(
            {
                "site": str(r["site"]),
                "bay": str(r["bay"]),
                "key": bay_key(str(r["site"]), str(r["bay"])),
                "liveness": live,
                "breaker": state.get("position"),
                "bay_state": state.get("breaker"),
                "mode": state.get("mode"),
                "alarms": len(conditions(state)),
                "lgos_valid": sum(1 for v in lgos if isinstance(v, dict) and v.get("St")),
                "lgos_total": len(lgos),
                "last_seq": r["last_seq"],
                # rows the bay had (its last state's seq) that the store does not hold yet
                "lag": max(0, had - (r["last_seq"] or 0)) if isinstance(had, int) else None,
                "age_s": None if age is None else round(age, 1),
                "state_utc": None
                if seen is None
                else dt.datetime.fromtimestamp(seen / 1e9, dt.UTC)
                .isoformat(timespec="milliseconds")
                .replace("+00:00", "Z"),
            }
        )
    return out


class FleetJournal:
    """One bay's rows of the store's journal, with the interface of `JournalReader`."""

    def __init__(self, path: Path, key: str) -> None:
        self.store = FleetStore(path)
        self.site, _, self.bay = key.partition("/")
        self._controller: str | None = None

    def _id(self) -> str | None:
        """The bay's controller id, which keys its rows."""
        if self._controller is None:
            rows = self.store.query(
                "SELECT controller FROM fleet_bays WHERE site = ? AND bay = ?",
                (self.site, self.bay),
            )
            self._controller = str(rows[0]["controller"]) if rows else None
        return self._controller

    @property
    def error(self) -> str:
        return self.store.error

    def _rows(self, where: str, args: tuple[Any, ...], order: str, limit: int) -> list[dict]:
        controller = self._id()
        if controller is None:
            return []
        rows = self.store.query(
            "SELECT seq, utc_ns, machine, event, source, target, effects FROM fleet_rows "
            f"WHERE controller = ? {where} ORDER BY seq {order} LIMIT ?",
            (controller, *args, limit),
        )
        return [_row(r) for r in rows]

    def after(
        self, seq: int, limit: int = 1000, machine_prefix: str | None = None
    ) -> list[dict[str, Any]]:
        if machine_prefix is None:
            return self._rows("AND seq > ?", (seq,), "ASC", limit)
        return self._rows(
            "AND seq > ? AND substr(machine, 1, ?) = ?",
            (seq, len(machine_prefix), machine_prefix),
            "ASC",
            limit,
        )

    def last(self, limit: int) -> list[dict[str, Any]]:
        return self._rows("", (), "DESC", limit)[::-1]

    def close(self) -> None:
        self.store.close()


def _row(r: sqlite3.Row) -> dict[str, Any]:
    utc_ns = r["utc_ns"]
    utc = (
        dt.datetime.fromtimestamp(utc_ns / 1e9, dt.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
        if isinstance(utc_ns, int)
        else None
    )
    return {
        "seq": r["seq"],
        "utc": utc,
        "time_ns": utc_ns,
        "machine": r["machine"],
        "event": r["event"],
        "source": r["source"],
        "target": r["target"],
        "detail": detail(r["effects"]),
    }


class FleetHub(Poller):
    """Polls the store once a second: the fleet table, and each bay's payload in the shape
    a bay page takes (its state as the status JSON; alarms and retransmission intervals
    derived as for a local bay; no sessions: remote procedures are the fleet's own)."""

    def __init__(self, path: Path, poll_s: float = 1.0) -> None:
        super().__init__(poll_s)
        self.store = FleetStore(path)
        self.bays: dict[str, dict[str, Any]] = {}
        self._alarms: dict[str, AlarmBook] = {}
        self._retrans: dict[str, Retransmissions] = {}

    def poll(self) -> None:
        t = time.time()
        rows = fleet_rows(self.store, t)
        polled = dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds")
        polled = polled.replace("+00:00", "Z")
        states = {
            bay_key(str(r["site"]), str(r["bay"])): parse_state(r["state"])
            for r in self.store.query("SELECT site, bay, state FROM fleet_bays")
        }
        bays = {}
        for key, state in states.items():
            alarms = self._alarms.setdefault(key, AlarmBook())
            alarms.update(conditions(state))
            retrans = self._retrans.setdefault(key, Retransmissions())
            retrans.update(state.get("streams", []) if state["ok"] else [], t)
            bays[key] = {
                "controller": state,
                "sessions": [],
                "alarms": alarms.rows(),
                "retransmission_ms": retrans.view(),
                "trips": 0,
                "journal_error": self.store.error,
                "polled": polled,
            }
        self.bays = bays
        self.payload = {"fleet": rows, "error": self.store.error, "polled": polled}
        self._publish()

    def payload_of(self, key: str | None) -> dict[str, Any]:
        if key is None:
            return self.payload
        return self.bays.get(
            key,
            {"controller": {"ok": False, "error": f"no bay {key} in the fleet store"}},
        )
