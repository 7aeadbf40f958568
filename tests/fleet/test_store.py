"""The central store on SQLite and on a real PostgreSQL cluster, one schema: rows arriving
twice are stored once, a missing range is a gap until it is filled, an older session's
retained birth or death never overrides the current one, bad payloads are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from goosectl.controller.fleet import topics
from goosectl.controller.fleet.collector import Collector
from goosectl.controller.fleet.store import Store
from goosectl.controller.fleet.view import fleet_rows
from tests.fleet.brokers import Postgres


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    pg = Postgres()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "fleet.sqlite")
    pg: Postgres = request.getfixturevalue("postgres")
    store = Store(pg.url)
    with store.tx() as cur:
        for t in ("fleet_rows", "fleet_bays", "fleet_gaps"):
            cur.execute(f"DELETE FROM {t}")
    store.close()
    return pg.url


def rows(a: int, b: int) -> list[dict]:
    return [
        {"seq": s, "utc_ns": s, "machine": "m", "event": "e", "source": "a", "target": "b",
         "effects": "-", "table": "t", "version": "1"}
        for s in range(a, b + 1)
    ]  # fmt: skip


def batch(a: int, b: int, controller: str = "s1/b1") -> bytes:
    site, bay = controller.split("/")
    return topics.journal_batch(site, bay, a, b, rows(a, b), 1)


def test_duplicates_are_stored_once_and_a_gap_stays_until_it_is_filled(db: str) -> None:
    col = Collector(["mqtt://127.0.0.1:1"], db)
    for a, b in ((1, 10), (5, 10), (1, 10)):  # redelivery, overlapping re-send
        col.handle("goosectl/v1/s1/b1/journal", batch(a, b))
    col.handle("goosectl/v1/s1/b1/journal", batch(21, 30))
    assert [(g.seq_first, g.seq_last, g.lost) for g in col.store.gaps()] == [(11, 20, False)]
    col.handle("goosectl/v1/s1/b1/journal", batch(11, 15))
    assert [(g.seq_first, g.seq_last) for g in col.store.gaps()] == [(16, 20)]
    col.handle("goosectl/v1/s1/b1/journal", batch(16, 20))
    assert col.store.gaps() == []
    col.handle("goosectl/v1/s1/b2/journal", batch(6, 9, "s1/b2"))  # the first batch seen
    assert [(g.seq_first, g.seq_last) for g in col.store.gaps("s1/b2")] == [(1, 5)]
    seqs = [
        r[0]
        for r in col.store.query(
            "SELECT seq FROM fleet_rows WHERE controller = ? ORDER BY seq", ("s1/b1",)
        )
    ]
    assert seqs == list(range(1, 31))
    col.store.close()


def test_an_older_sessions_death_does_not_kill_the_current_one(db: str) -> None:
    col = Collector(["mqtt://127.0.0.1:1"], db)
    col.handle("goosectl/v1/s1/b1/birth", topics.birth("s1", "b1", 5, "x", 0, 1))
    col.handle("goosectl/v1/s1/b1/state", topics.state("s1", "b1", 5, None, 0, 2))
    col.handle("goosectl/v1/s1/b1/death", topics.death("s1", "b1", 4))  # retained, old
    col.handle("goosectl/v1/s1/b1/birth", topics.birth("s1", "b1", 3, "old", 0, 1))
    (row,) = fleet_rows(col.store, now_ns=0)
    assert row["liveness"] == "online" and row["bdSeq"] == 5 and row["version"] == "x"
    col.handle("goosectl/v1/s1/b1/death", topics.death("s1", "b1", 5))
    (row,) = fleet_rows(col.store, now_ns=0)
    assert row["liveness"] == "dead" and row["stale"] is True
    col.store.close()


@pytest.mark.parametrize(
    ("topic", "payload", "why"),
    [
        ("goosectl/v1/s1/b1/journal", b"{not json", "journal: not JSON"),
        ("goosectl/v1/s1/b1/journal", b'{"schema": 2}', "journal: schema 2 is not 1"),
        ("goosectl/v1/s1/b1/journal", batch(1, 3, "s1/b2"), "journal: payload names"),
        ("goosectl/v1/s1/b1/birth", b'{"schema": 1, "controller": "s1/b1"}', "birth: a birth"),
        ("goosectl/v1/s1/b1/other", b"{}", "unexpected topic"),
        ("elsewhere/x", b"{}", "unexpected topic"),
    ],
)
def test_a_bad_payload_is_counted_and_refused_with_its_reason_and_nothing_stored(
    db: str, topic: str, payload: bytes, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    col = Collector(["mqtt://127.0.0.1:1"], db)
    col.handle(topic, payload)
    assert sum(col.refused.values()) == 1
    assert why in caplog.text
    assert col.store.query("SELECT COUNT(*) FROM fleet_rows")[0][0] == 0
    col.store.close()


def test_fleet_status_and_journal_read_the_store(tmp_path: Path) -> None:
    from tests.support.procs import goosectl

    db = str(tmp_path / "fleet.sqlite")
    col = Collector(["mqtt://127.0.0.1:1"], db)
    col.handle("goosectl/v1/s1/b1/birth", topics.birth("s1", "b1", 2, "x", 0, 1))
    col.handle("goosectl/v1/s1/b1/journal", batch(1, 4))
    col.handle("goosectl/v1/s1/b1/journal", batch(8, 9))
    col.store.close()
    rows = goosectl("fleet", "journal", "s1/b1", "--since", "2", "--db", db).stdout.splitlines()
    assert [json.loads(r)["seq"] for r in rows] == [3, 4, 8, 9]
    status = goosectl("fleet", "status", "--db", db, check=False)
    assert status.returncode == 1  # a gap (and no state yet: stale) is an alarm
    head, line = status.stdout.splitlines()
    assert head.split()[:3] == ["bay", "liveness", "breaker"]
    assert line.split()[0] == "s1/b1" and "stale" in line and "5-7" in line


def test_messages_stored_together_are_each_stored_or_refused_as_alone(db: str) -> None:
    """The collector's batch (one transaction for the messages waiting): the same rows,
    gaps and refusals as one message at a time, a bad row refused without its neighbours."""
    col = Collector(["mqtt://127.0.0.1:1"], db)
    bad = json.loads(batch(11, 12))
    bad["rows"][0]["utc_ns"] = "not a number"
    col.handle_many(
        [
            ("goosectl/v1/s1/b1/journal", batch(1, 5)),
            ("goosectl/v1/s1/b1/journal", batch(1, 5)),  # delivered twice
            ("goosectl/v1/s1/b1/journal", json.dumps(bad).encode()),
            ("goosectl/v1/s1/b1/journal", batch(6, 10)),
            ("goosectl/v1/s1/b2/journal", batch(1, 3, "s1/b2")),
            ("goosectl/v1/s1/b1/journal", batch(13, 14)),
        ]
    )
    seqs = col.store.query("SELECT controller, seq FROM fleet_rows ORDER BY controller, seq")
    assert seqs == [("s1/b1", s) for s in (*range(1, 11), 13, 14)] + [
        ("s1/b2", s) for s in (1, 2, 3)
    ]
    assert [(g.controller, g.seq_first, g.seq_last) for g in col.store.gaps()] == [
        ("s1/b1", 11, 12)
    ]
    assert sum(col.refused.values()) == 1 and col.stored == 20  # rows taken, twice counted twice
    assert {b["controller"]: b["refused"] for b in col.store.bays()} == {"s1/b1": 1, "s1/b2": 0}
