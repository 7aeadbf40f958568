"""The fleet page on a store in the fleet collector's layout (the collector is the fleet's
work; its tables as docs/web.md lists them), filled from a real controller's status and journal,
one bay per liveness; the page's rows, a bay page fed from the store, live updates, no
actions, hostile names as text, axe-core clean."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from tests.support.procs import goosectl
from tests.web.conftest import shot, timeline_seqs

WAIT_MS = 15_000
HOSTILE = "<img src=x onerror=alert(1)>"
#: the fleet collector's tables the page reads (controller/fleet/store.py on main), as
#: docs/web.md lists them
SCHEMA = """
CREATE TABLE fleet_rows (
    controller TEXT NOT NULL, seq BIGINT NOT NULL, utc_ns BIGINT NOT NULL,
    machine TEXT NOT NULL, event TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL,
    effects TEXT NOT NULL, table_name TEXT NOT NULL, version TEXT NOT NULL,
    sent_ns BIGINT NOT NULL, stored_ns BIGINT NOT NULL,
    PRIMARY KEY (controller, seq));
CREATE TABLE fleet_bays (
    controller TEXT PRIMARY KEY, site TEXT NOT NULL, bay TEXT NOT NULL,
    bd_seq BIGINT NOT NULL DEFAULT 0, version TEXT, birth_ns BIGINT, death_ns BIGINT,
    death_bd_seq BIGINT, state TEXT, state_ns BIGINT, state_seq BIGINT, first_seq BIGINT,
    last_seq BIGINT NOT NULL DEFAULT 0, refused BIGINT NOT NULL DEFAULT 0);
"""


def fill(store: Path, controller: Any) -> tuple[dict[str, Any], list[tuple]]:
    """The store as a collector would leave it: the controller's bay online with its
    state and journal, a second bay dead, a third stale with a hostile name."""
    status = json.loads(
        goosectl("status", "--json", "--control", str(controller.sock), timeout=60).stdout
    )
    status.pop("ok")
    src = sqlite3.connect(controller.state / "bay.sqlite")
    rows = list(
        src.execute(
            "SELECT seq, utc_ns, machine, event, source, target, effects, table_name, "
            "version FROM journal_utc ORDER BY seq"
        )
    )
    src.close()
    now = time.time_ns()
    last = rows[-1][0]
    state = {"schema": 1, "status": status, "journal_seq": last, "reachable": True}
    db = sqlite3.connect(store)
    db.executescript(SCHEMA)
    db.executemany(
        "INSERT INTO fleet_bays (controller, site, bay, bd_seq, birth_ns, death_ns, "
        "death_bd_seq, state, state_ns, last_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            ("c1", "north", "bay1", 1, now, None, None, json.dumps(state), now, last),
            ("c2", "north", "bay2", 2, now, now, 2, json.dumps(state), now, 17),
            ("c3", "south", HOSTILE, 1, now, None, None, "not json", now - 120 * 10**9, 0),
        ],
    )
    db.executemany("INSERT INTO fleet_rows VALUES ('c1', ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0)", rows)
    db.commit()
    db.close()
    return state, rows


def test_fleet_page_and_a_bay_from_the_store(controller, start_web, page, tmp_path) -> None:
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import expect

    store = tmp_path / "fleet.sqlite"
    state, rows = fill(store, controller)
    f = tmp_path / "tokens"
    f.write_text("OPERATOR alice alice-0123456789abcdef\n")
    f.chmod(0o600)
    web = start_web("--fleet-db", f"sqlite:///{store}", "--tokens", str(f), "--bind", "127.0.0.1:0")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(web.url)
    page.fill("#token", "alice-0123456789abcdef")
    page.click("button[type=submit]")

    def field(key: str, name: str) -> Any:
        return page.locator(f"#bays tr[data-bay='{key}'] td[data-field='{name}']")

    expect(field("north/bay1", "liveness")).to_have_text("online", timeout=WAIT_MS)
    expect(field("north/bay2", "liveness")).to_have_text("dead")
    hostile = page.locator("#bays tbody tr", has_text=HOSTILE)
    expect(hostile.locator("td[data-field='liveness']")).to_have_text("stale")
    expect(field("north/bay1", "breaker")).to_have_text("open")
    assert page.locator("#bays img").count() == 0
    bad = [
        (v["id"], v["impact"])
        for v in Axe().run(page).response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert bad == []
    shot(page, tmp_path, "web-fleet", doc=True)

    # the bay's page, from the store: its journal, no buttons even for an OPERATOR
    page.click("#bays a >> text=north/bay1")
    expect(page.locator("#title")).to_have_text("goosectl bay north/bay1", timeout=WAIT_MS)
    expect(page.locator("#breaker")).to_have_text("open", timeout=WAIT_MS)
    expect(page.locator("#timeline")).to_have_attribute(
        "aria-rowcount", str(len(rows) + 1), timeout=WAIT_MS
    )
    assert timeline_seqs(page) == [r[0] for r in rows][::-1]  # every row, newest first
    expect(page.locator("#role")).to_contain_text("read-only")

    # the collector stores a new row and a new state: the page follows
    db = sqlite3.connect(store)
    new = rows[-1][0] + 1
    status = {**state["status"], "position": "on", "breaker": "closed"}
    closed = {**state, "status": status, "journal_seq": new}
    db.execute(
        "UPDATE fleet_bays SET state = ?, state_ns = ?, last_seq = ? WHERE controller = 'c1'",
        (json.dumps(closed), time.time_ns(), new),
    )
    db.execute(
        "INSERT INTO fleet_rows VALUES ('c1', ?, ?, 'bay', 'position', 'closing', "
        "'closed', '-', 'bay', '1', 0, 0)",
        (new, time.time_ns()),
    )
    db.commit()
    db.close()
    expect(page.locator("#breaker")).to_have_text("closed", timeout=WAIT_MS)
    expect(page.locator("#timeline tbody tr").first).to_have_attribute(
        "data-seq", str(rows[-1][0] + 1), timeout=WAIT_MS
    )
    forged = page.evaluate(
        """async () => {
          const me = await (await fetch('/api/me')).json();
          const r = await fetch('/api/sessions/s1/confirm', {method: 'POST',
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf},
            body: JSON.stringify({step: 'close_breaker'})});
          return [r.status, await r.json()];
        }"""
    )
    assert forged[0] == 403 and "read-only" in forged[1]["error"], forged
    assert dialogs == []


def test_fleet_db_other_than_sqlite_is_refused() -> None:
    done = goosectl("web", "--fleet-db", "postgresql://x/y", check=False, timeout=60)
    assert done.returncode == 2 and "SQLite" in done.stderr, done.stderr
