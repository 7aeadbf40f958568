"""`goosectl demo --web`: the scenario at real speed with the page live on it; the trip
stream's row, the network A outage and the breaker word change on the page as they happen,
and Ctrl-C ends the demo and its page."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from tests.support.lines import Lines
from tests.support.peers import REPO
from tests.support.procs import goosectl_argv
from tests.web.conftest import shot

#: the scenario plays about 20 s; what it shows is polled for with room to spare
WAIT_MS = 40_000


def test_demo_web_plays_the_scenario_on_the_page(page, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    argv = goosectl_argv(
        "demo", "--web", "127.0.0.1:0", "--out", str(tmp_path / "demo"),
        "--control", str(tmp_path / "demo.sock"), "--in-memory",
    )  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        line = out.wait_for(lambda x: "the page is live at" in x, "the page's URL", 120)
        url = line.split("the page is live at ", 1)[1].split()[0]
        page.goto(url)
        prot = page.locator("#streams tbody tr[data-stream='prot']").first
        expect(prot).to_be_visible(timeout=WAIT_MS)
        st_before = int(prot.locator("td").nth(5).text_content() or 0)
        # network A goes silent (8-11 s): the trip stream's row says side A lost, in words
        sides = prot.locator("td[data-field='sides']")
        expect(sides).to_contain_text("A lost", timeout=WAIT_MS)
        expect(page.locator("#net-a")).to_have_text("lost", timeout=WAIT_MS)
        shot(page, tmp_path, "web-demo-network-a-lost", doc=True)
        assert int(prot.locator("td").nth(5).text_content() or 0) > st_before  # trips
        expect(sides).to_contain_text("A valid", timeout=WAIT_MS)  # and back
        # the stuck breaker at 15 s: breaker failure, an urgent alarm in words
        expect(page.locator("#bay-state")).to_have_text("breaker_failure", timeout=WAIT_MS)
        expect(page.locator("#alarms tbody")).to_contain_text("active, unacknowledged")
        shot(page, tmp_path, "web-demo-breaker-failure", doc=True)
        err.wait_for(lambda x: "serving" in x, "the scenario's end", 120)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0, "\n".join(err.lines[-20:])
    assert any("goosectl demo: a bay controller" in x for x in out.lines)  # its report
