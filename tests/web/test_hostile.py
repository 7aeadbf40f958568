"""Strings from the wire reach the page as text: a capture whose gocbRef, goID and datSet
are HTML, replayed into a journal, shows those characters on the page and runs nothing."""

from __future__ import annotations

from pathlib import Path

from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose import Boolean, GooseFrame, UtcTime, encode_frame
from tests.support.procs import goosectl
from tests.web.conftest import shot

HOSTILE = "<img src=x onerror=alert(1)>"


def hostile_capture(path: Path) -> Path:
    def frame(st: int, sq: int) -> bytes:
        return encode_frame(
            GooseFrame(
                gocb_ref=HOSTILE,
                dat_set=HOSTILE,
                go_id=HOSTILE,
                all_data=(Boolean(st % 2 == 0),),
                t=UtcTime(1_700_000_000, 0, 0x0A),
                appid=0x1001,
                st_num=st,
                sq_num=sq,
                time_allowed_to_live=2000,
            )
        )

    t = 1_700_000_000_000_000_000
    with PcapWriter(path) as w:
        for st in (1, 2):
            for sq in range(3):
                w.write(frame(st, sq), t)
                t += 500_000_000
    return path


def test_a_hostile_gocbref_shows_as_text_and_runs_nothing(start_web, page, tmp_path) -> None:
    from playwright.sync_api import expect

    journal = tmp_path / "replay.sqlite"
    goosectl("replay", str(hostile_capture(tmp_path / "hostile.pcap")), "--journal", str(journal))
    web = start_web(
        "--journal", str(journal), "--control", str(tmp_path / "none.sock"), "--bind", "127.0.0.1:0"
    )
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(web.url)
    machine = page.locator("#timeline tbody td", has_text=HOSTILE).first
    expect(machine).to_be_visible(timeout=15_000)
    assert HOSTILE in machine.text_content()
    # the filter lists it as an option's text too
    assert any(HOSTILE in o for o in page.locator("#machine-filter option").all_text_contents())
    # no controller there: said in words, the page goes on
    expect(page.locator("#controller")).to_contain_text("unreachable", timeout=15_000)
    page.wait_for_timeout(1000)  # an onerror would have fired by now
    assert dialogs == []
    assert page.locator("img").count() == 1  # the histogram's own (hidden), nothing injected
    assert page.locator("img[src='x']").count() == 0
    shot(page, tmp_path, "web-hostile", doc=True)
