"""A page kept open for hours beside a busy bay costs the browser little, and nothing of
what it shows is lost for it: a burst of journal rows reaches the timeline whole and in
order, put on the page in a few batches rather than row by row; a snapshot that changed
nothing rewrites no cell; a hidden page closes its stream (the server sends it nothing) and
catches up, without a gap, when it is shown again.

The journal is a real one (the controller's own store commits the rows) read by a real
`goosectl web` in a real Chromium. Playwright shows every page as a visible foreground tab
and has no way to hide one, so the hidden test turns the document's visibility to hidden
itself and sends the `visibilitychange` a browser sends when its tab goes to the back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from goosectl.controller.engine.journal import Batch, Row
from goosectl.controller.shell.journal_store import SqliteStore
from tests.web.conftest import Relay, journal_seqs, timeline_seqs
from tests.web.test_page import WAIT_MS, expect, web_args

BURST = 1000

#: counts the times the page changed each table (or element with an id): one a task that
#: changed it, however many nodes that task touched
COUNT_CHANGES = """
window.__changes = {};
new MutationObserver((records) => {
  const touched = new Set();
  for (const r of records) {
    const n = r.target.nodeType === 1 ? r.target : r.target.parentElement;
    const table = n && n.closest('table');
    touched.add(table ? table.id : (n && n.id) || 'other');
  }
  for (const key of touched) window.__changes[key] = (window.__changes[key] || 0) + 1;
}).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""

#: the document's visibility as a test sets it (`window.__show(false)`: the tab went back)
VISIBILITY = """
let __visible = true;
Object.defineProperty(document, 'visibilityState', {get: () => (__visible ? 'visible' : 'hidden')});
Object.defineProperty(document, 'hidden', {get: () => !__visible});
window.__show = (on) => { __visible = on; document.dispatchEvent(new Event('visibilitychange')); };
"""


class Rows:
    """A journal file the test appends rows to through the controller's own store."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = SqliteStore(str(path), "group")
        self.seq = self.store.last_seq()

    def add(self, n: int, machine: str = "burst") -> list[int]:
        now = time.monotonic_ns()
        rows = [
            Row(
                self.seq + i,
                now + i,
                machine,
                "tick",
                "a",
                "b",
                f"row {self.seq + i}",
                "t",
                "1",
                None,
            )
            for i in range(1, n + 1)
        ]
        self.store.commit([Batch(rows=rows, checkpoints=[], meta={})])
        self.seq += n
        return [r.seq for r in rows]

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def rows(tmp_path: Path) -> Iterator[Rows]:
    r = Rows(tmp_path / "bay.sqlite")
    try:
        yield r
    finally:
        r.close()


def journal_web(start_web: Any, rows: Rows, tmp_path: Path) -> Any:
    return start_web(
        "--journal", str(rows.path), "--control", str(tmp_path / "none.sock"),
        "--bind", "127.0.0.1:0",
    )  # fmt: skip


def shown_seqs(page: Any) -> list[int]:
    return timeline_seqs(page)


def wait_shown(page: Any, want: list[int]) -> None:
    """Poll until the timeline shows exactly `want`, newest first."""
    seqs: list[int] = []
    for _ in range(60):
        seqs = shown_seqs(page)
        if seqs == want:
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"the timeline shows {seqs[:5]}..{seqs[-5:]} ({len(seqs)} rows)")


def arrived(page: Any, newest: int, count: int) -> dict[str, int]:
    """Wait (without scrolling) until the timeline's top row is `newest` and it says it has
    `count` rows; the changes the page made to get there."""
    expect()(page.locator("#timeline tbody tr").first).to_have_attribute(
        "data-seq", str(newest), timeout=WAIT_MS
    )
    expect()(page.locator("#timeline")).to_have_attribute("aria-rowcount", str(count + 1))
    return dict(page.evaluate("window.__changes"))


def test_a_burst_of_a_thousand_rows_shows_every_row_in_a_few_batches(
    start_web, rows, page, tmp_path
) -> None:
    first = rows.add(3, machine="bay")
    web = journal_web(start_web, rows, tmp_path)
    page.add_init_script(COUNT_CHANGES)
    page.goto(web.url)
    wait_shown(page, first[::-1])
    page.evaluate("window.__changes = {}")
    burst = rows.add(BURST)
    # put on the page a batch at a time, not a row at a time
    changes = arrived(page, burst[-1], BURST)
    assert changes.get("timeline", 0) <= 10, changes
    wait_shown(page, burst[::-1])  # the newest 1,000: the burst, every row, in order
    assert burst == journal_seqs(rows.path)[-BURST:]

    page.evaluate("window.__changes = {}")
    more = rows.add(300)  # a batch that pushes the oldest 300 of the burst out
    changes = arrived(page, more[-1], BURST)
    assert changes.get("timeline", 0) <= 10, changes
    wait_shown(page, (burst + more)[::-1][:BURST])
    # the oldest row kept is there to scroll to
    page.locator("#timeline-scroll").evaluate("e => { e.scrollTop = e.scrollHeight; }")
    expect()(page.locator(f"#timeline tbody tr[data-seq='{burst[300]}']")).to_be_visible()
    assert page.locator("#machine-filter option", has_text="burst").count() == 1


def test_a_snapshot_that_changed_nothing_rewrites_no_cell(controller, start_web, page) -> None:
    web = start_web(*web_args(controller))
    page.add_init_script(COUNT_CHANGES)
    page.goto(web.url)
    expect()(page.locator("#breaker")).to_have_text("open", timeout=WAIT_MS)
    expect()(page.locator("#lgos tbody tr").first).to_be_visible(timeout=WAIT_MS)
    page.wait_for_timeout(2000)  # the retransmission sparklines have their first points
    page.evaluate("window.__changes = {}")
    clock = page.locator("#clock").text_content()
    expect()(page.locator("#clock")).not_to_have_text(clock or "", timeout=WAIT_MS)
    page.wait_for_timeout(2500)  # two more snapshots at least
    changes = page.evaluate("window.__changes")
    # the snapshots came (the clock moved); a bay without a network changes nothing else
    assert changes.get("clock", 0) >= 2, changes
    for table in ("lgos", "alarms", "sessions"):
        assert changes.get(table, 0) == 0, (table, changes)


def test_a_hidden_page_gets_nothing_and_catches_up_when_shown(
    start_web, rows, page, tmp_path
) -> None:
    first = rows.add(5)
    web = journal_web(start_web, rows, tmp_path)
    relay = Relay(web.port)
    try:
        page.add_init_script(VISIBILITY)
        page.goto(relay.url)
        expect()(page.locator("#conn")).to_have_text("connected", timeout=WAIT_MS)
        wait_shown(page, first[::-1])

        page.evaluate("window.__show(false)")
        expect()(page.locator("#conn")).to_have_text("paused while the page is hidden")
        page.wait_for_timeout(1000)  # what was on its way when the stream closed
        sent = relay.forwarded
        during = rows.add(200)
        page.wait_for_timeout(3000)  # rows and heartbeats (every 2 s) a shown page would get
        assert relay.forwarded == sent, "bytes went to a hidden page: its stream is open"
        assert shown_seqs(page) == first[::-1]  # and it changed nothing

        page.evaluate("window.__show(true)")
        expect()(page.locator("#conn")).to_have_text("connected", timeout=WAIT_MS)
        wait_shown(page, (first + during)[::-1])  # from where it stopped: no gap, no repeat
    finally:
        relay.close()
