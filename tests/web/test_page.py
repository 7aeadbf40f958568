"""The bay page in Debian's Chromium, on a real controller: what an engineer sees change,
a page that survives its server and its stream being cut without losing or repeating a
journal row, actions that operate once, roles, hostile strings, accessibility.

Waits are generous polls (the page has seconds, not milliseconds): a test fails on what
the page shows, never on how fast a shared machine is.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import Sim, goosectl, sim_counts
from tests.web.conftest import Relay, journal_seqs, shot, timeline_seqs

WAIT_MS = 15_000


def expect():
    from playwright.sync_api import expect as _expect

    return _expect


def web_args(controller: Any, *more: str) -> list[str]:
    return [
        "--control",
        str(controller.sock),
        "--state",
        str(controller.state),
        "--bind",
        "127.0.0.1:0",
        *more,
    ]


def page_seqs(page: Any) -> list[int]:
    return timeline_seqs(page)


def watch_connection(page: Any) -> None:
    """Record every word the status region says, so a short 'disconnected' is seen."""
    page.add_init_script(
        """
        window.__conn = [];
        new MutationObserver(() => {
          const c = document.getElementById('conn');
          if (c) window.__conn.push(c.textContent);
        }).observe(document, {subtree: true, childList: true, characterData: true});
        """
    )


def said_disconnected(page: Any) -> None:
    """The status region said 'disconnected' (however briefly); polled from here, since
    the page's CSP forbids the eval a `wait_for_function` string needs."""
    for _ in range(60):
        if "disconnected" in page.evaluate("window.__conn"):
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"the page never said disconnected: {page.evaluate('window.__conn')}")


def wait_timeline_equals_journal(page: Any, journal: Path) -> list[int]:
    """Poll until the page's rows are exactly the journal's, up to the newest it shows."""
    last: tuple[list[int], list[int]] = ([], [])
    for _ in range(60):
        seqs = page_seqs(page)
        shown = sorted(seqs)
        rows = [s for s in journal_seqs(journal) if shown and s <= shown[-1]]
        if shown and shown == rows and len(seqs) == len(set(seqs)):
            return shown
        last = (shown, rows)
        page.wait_for_timeout(500)
    raise AssertionError(f"page rows {last[0][-20:]} != journal rows {last[1][-20:]}")


def wait_on_timeline(page: Any, seq: int) -> None:
    """Poll until row `seq` is on the page's timeline (scrolled to, wherever it is: rows
    journaled after it push it down)."""
    for _ in range(60):
        if seq in page_seqs(page):
            return
        page.wait_for_timeout(250)
    raise AssertionError(f"row {seq} never reached the timeline: {page_seqs(page)[:20]}")


def wait_for_row(journal: Path, machine: str, target: str, after: int) -> int:
    """The seq of the first row of `machine` entering `target` after seq `after`, once
    the controller's writer has committed it."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
        try:
            row = db.execute(
                "SELECT MIN(seq) FROM journal WHERE machine = ? AND target = ? AND seq > ?",
                (machine, target, after),
            ).fetchone()
        finally:
            db.close()
        if row[0] is not None:
            return int(row[0])
        time.sleep(0.1)
    raise AssertionError(f"no {machine} row entering {target} after seq {after} in {journal}")


def test_breaker_word_follows_a_close_and_a_trip(controller, start_web, page, tmp_path) -> None:
    web = start_web(*web_args(controller))
    page.goto(web.url)
    breaker = page.locator("#breaker")
    expect()(breaker).to_have_text("open", timeout=WAIT_MS)
    expect()(page.locator("#conn")).to_have_text("connected", timeout=WAIT_MS)
    # ISA-101: colour only for what is abnormal, and any coloured cell says its state in
    # words. Without a network the only abnormal thing is the subscriptions never received
    # (status lists them from the start): every alarm-coloured row is one of them
    rows = page.locator("tr:has(.alarm)").all_text_contents()
    assert rows and all("never" in r for r in rows), rows
    for text in page.locator(".abnormal, .alarm").all_text_contents():
        assert text.strip(), "a coloured cell without a word"
    shot(page, tmp_path, "web-bay-open")

    assert controller.request({"op": "run", "procedure": "close_now", "params": {}})["ok"]
    expect()(breaker).to_have_text("closed", timeout=WAIT_MS)
    # the journal row of the close is on the page's timeline as well
    closed = page.locator("#timeline tbody tr[data-machine='bay']", has_text="closed")
    expect()(closed.first).to_be_visible(timeout=WAIT_MS)
    assert any(r[0] == "bay" and r[3] == "closed" for r in controller.journal("bay"))
    shot(page, tmp_path, "web-bay-closed", doc=True)

    assert controller.request({"op": "run", "procedure": "trip", "params": {}})["ok"]
    expect()(breaker).to_have_text("open", timeout=WAIT_MS)
    assert any(r[0] == "bay" and r[3] == "open" for r in controller.journal("bay"))
    shot(page, tmp_path, "web-bay-tripped")


def test_state_api_is_status_json(controller, start_web) -> None:
    import urllib.request

    web = start_web(*web_args(controller))
    with urllib.request.urlopen(web.url + "api/state", timeout=10) as r:
        page_json = json.loads(r.read())
    cli = json.loads(
        goosectl("status", "--json", "--control", str(controller.sock), timeout=60).stdout
    )
    assert page_json.keys() == cli.keys()
    assert page_json == cli


def test_timeline_survives_a_killed_server_and_a_stalled_stream(
    controller, start_web, page, tmp_path
) -> None:
    journal = controller.state / "bay.sqlite"
    web = start_web(*web_args(controller))
    port = web.port
    watch_connection(page)
    relay = Relay(port)
    try:
        page.goto(relay.url)
        expect()(page.locator("#conn")).to_have_text("connected", timeout=WAIT_MS)
        before = wait_timeline_equals_journal(page, journal)

        # the server dies mid-scenario: the page says so, the journal goes on. Every row
        # compared comes of a real event (the close, then the trip), never of the
        # page's own status reads, which the controller need not journal
        web.kill()
        expect()(page.locator("#conn")).to_have_text("disconnected", timeout=WAIT_MS)
        controller.request({"op": "run", "procedure": "close_now", "params": {}})
        closed = wait_for_row(journal, "bay", "closed", after=before[-1])
        page.wait_for_timeout(1500)  # rows the page cannot have yet
        start_web(*web_args(controller)[:-1], f"127.0.0.1:{port}")
        expect()(page.locator("#conn")).to_have_text("connected", timeout=WAIT_MS)
        expect()(page.locator("#breaker")).to_have_text("closed", timeout=WAIT_MS)
        wait_on_timeline(page, closed)
        first = wait_timeline_equals_journal(page, journal)
        assert first[-1] >= closed and before[-1] in first  # the close's rows, none lost

        # only the stream is cut: the connection stays open and goes silent
        page.evaluate("window.__conn = []")
        assert relay.stall() >= 1
        controller.request({"op": "run", "procedure": "trip", "params": {}})
        said_disconnected(page)
        expect()(page.locator("#conn")).to_have_text("connected", timeout=WAIT_MS)
        expect()(page.locator("#breaker")).to_have_text("open", timeout=WAIT_MS)
        # the status says open as soon as the bay is; its rows reach the file with the
        # writer's next commit: compare once the trip's rows are there
        opened = wait_for_row(journal, "bay", "open", after=first[-1])
        wait_on_timeline(page, opened)
        second = wait_timeline_equals_journal(page, journal)
        assert second[-1] >= opened > first[-1]
        assert second[0] == journal_seqs(journal)[0]  # from the first row: nothing lost
        shot(page, tmp_path, "web-reconnected")
    finally:
        relay.close()


def sign_in(page: Any, url: str, token: str) -> None:
    page.goto(url)
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_selector("#breaker")


def tokens(tmp_path: Path) -> Path:
    f = tmp_path / "tokens"
    f.write_text(
        "# role name token\n"
        "OPERATOR alice alice-0123456789abcdef\n"
        "VIEWER bob bob-0123456789abcdef\n"
    )
    f.chmod(0o600)
    return f


def waiting_session(controller: Any) -> str:
    r = controller.request({"op": "run", "procedure": "close_confirmed", "params": {}})
    assert r["ok"], r
    sid = r["session"]
    for _ in range(100):
        st = controller.request({"op": "status", "session": sid})["status"]
        if st["state"] == "awaiting_confirmation":
            return sid
        subprocess.run(["sleep", "0.1"], check=True)
    raise AssertionError(f"session {sid} never waited for confirmation: {st}")


def test_a_confirm_operates_once_even_on_a_double_click(
    controller, sim: Sim, start_web, page, tmp_path
) -> None:
    web = start_web(*web_args(controller, "--tokens", str(tokens(tmp_path))))
    sign_in(page, web.url, "alice-0123456789abcdef")
    expect()(page.locator("#role")).to_contain_text("OPERATOR", timeout=WAIT_MS)
    sid = waiting_session(controller)
    button = page.locator(f"#sessions tr[data-session='{sid}'] button", has_text="Confirm")
    expect()(button).to_be_visible(timeout=WAIT_MS)
    shot(page, tmp_path, "web-confirm", doc=True)
    button.dblclick()
    expect()(page.locator("#breaker")).to_have_text("closed", timeout=WAIT_MS)
    # the same POST again, as a retrying browser or a second tab would send it
    again = page.evaluate(
        """async ([sid]) => {
          const me = await (await fetch('/api/me')).json();
          const r = await fetch(`/api/sessions/${sid}/confirm`, {method: 'POST',
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf},
            body: JSON.stringify({step: 'close_breaker'})});
          return [r.status, await r.json()];
        }""",
        [sid],
    )
    assert again[0] == 200 and again[1].get("repeat") is True, again
    controller.stop()
    _operations, executed = sim_counts(sim.stop())
    assert executed.get("CLOSE") == 1, executed
    confirms = [r for r in controller.journal("control") if "op='confirm'" in r[4]]
    assert len(confirms) == 1, confirms
    assert "via='web:alice/OPERATOR'" in confirms[0][4]


def test_a_viewer_has_no_button_and_a_forged_post_is_refused(
    controller, sim: Sim, start_web, page, tmp_path
) -> None:
    import urllib.error
    import urllib.request

    web = start_web(*web_args(controller, "--tokens", str(tokens(tmp_path))))
    sign_in(page, web.url, "bob-0123456789abcdef")
    sid = waiting_session(controller)
    row = page.locator(f"#sessions tr[data-session='{sid}']")
    expect()(row).to_contain_text("awaiting confirmation", timeout=WAIT_MS)
    assert row.locator("button").count() == 0
    shot(page, tmp_path, "web-viewer", doc=True)
    forged = page.evaluate(
        """async ([sid]) => {
          const me = await (await fetch('/api/me')).json();
          const r = await fetch(`/api/sessions/${sid}/confirm`, {method: 'POST',
            headers: {'Content-Type': 'application/json', 'X-CSRF-Token': me.csrf},
            body: JSON.stringify({step: 'close_breaker'})});
          return [r.status, await r.json()];
        }""",
        [sid],
    )
    assert forged[0] == 403 and "VIEWER" in forged[1]["error"], forged

    # an operator's cookie used from another origin, or without its CSRF token (alice
    # signs in with a plain client: the page's cookie is bob's)
    login = urllib.request.Request(
        web.url + "login",
        data=b"token=alice-0123456789abcdef",
        headers={"Origin": web.url.rstrip("/")},
        method="POST",
    )

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a: Any, **k: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as signed:
        opener.open(login, timeout=10)
    assert signed.value.code == 303
    cookie = signed.value.headers["Set-Cookie"].split(";", 1)[0]
    for headers in (
        {"Origin": "http://evil.example", "X-CSRF-Token": "x"},
        {"Origin": web.url.rstrip("/")},
        {},
    ):
        req = urllib.request.Request(
            web.url + f"api/sessions/{sid}/confirm",
            data=b'{"step": "close_breaker"}',
            headers={"Content-Type": "application/json", "Cookie": cookie, **headers},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)
        assert refused.value.code == 403, headers
    st = controller.request({"op": "status", "session": sid})["status"]
    assert st["state"] == "awaiting_confirmation"
    controller.stop()
    _, executed = sim_counts(sim.stop())
    assert "CLOSE" not in executed, executed


def test_axe_finds_no_serious_violation(controller, start_web, page, tmp_path) -> None:
    from axe_playwright_python.sync_playwright import Axe

    web = start_web(*web_args(controller, "--tokens", str(tokens(tmp_path))))
    page.goto(web.url)  # the sign-in page
    results = [("sign-in", Axe().run(page))]
    sign_in(page, web.url, "alice-0123456789abcdef")
    waiting_session(controller)
    expect()(page.locator("#sessions button").first).to_be_visible(timeout=WAIT_MS)
    expect()(page.locator("#timeline tbody tr").first).to_be_visible(timeout=WAIT_MS)
    results.append(("bay", Axe().run(page)))
    bad = [
        (name, v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for name, r in results
        for v in r.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert bad == []
