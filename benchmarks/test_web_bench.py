"""The web page costs the controller nothing it would notice: the wire trip (trip sent ->
trip-ack received, `goosectl run` on veth) with five pages open on `goosectl web` against
the same run without them, within 10 % at p50 and p99.

The page is a separate process; what reaches the controller is its poller's two control
requests a second, whatever the number of pages, and read-only journal reads. A row not
met is an XFAIL with its numbers (`check_budget`), as every budget row on a shared host.
"""

from __future__ import annotations

import contextlib

from benchmarks.percentiles import check_budget, summarise
from tests.support.peers import _require, require_iec61850, require_root
from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS, Web

GROUP = "web"
PAGES = 5
#: within this share of the run without pages
WITHIN = 0.10


def serve_heartbeats(trip, seconds: float) -> None:
    """The lab peer publishes its heartbeats for `seconds`, answering nothing."""
    with contextlib.suppress(TimeoutError):
        trip.pump_until(lambda h: False, seconds)


def test_wire_trip_with_five_pages_open(benchmark, short) -> None:
    require_root()
    require_iec61850()
    _require(CHROMIUM.exists(), "Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    from goosectl.lab.wire_latency import WireTrip, peer_fifo

    n = 1000 if short else 5000
    trip = WireTrip()
    web = None
    try:
        with peer_fifo():
            without = [trip.sample() for _ in range(n)]
        web = Web(
            "--control", str(trip.tmp / "control.sock"), "--state", str(trip.tmp / "state"),
            "--bind", "127.0.0.1:0",
        )  # fmt: skip
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                pages = [browser.new_context().new_page() for _ in range(PAGES)]
                for page in pages:
                    page.goto(web.url)
                    page.wait_for_selector("#conn:text('connected')", timeout=30_000)
                    serve_heartbeats(trip, 0.2)
                # the peer's streams went quiet while the pages opened: live again first
                serve_heartbeats(trip, 3.0)
                with_pages: list[int] = []
                stalled = ""
                with peer_fifo():
                    try:
                        for _ in range(n):
                            with_pages.append(trip.sample())
                    except TimeoutError as exc:
                        # the budget row not met, with its numbers (the run without pages
                        # completed: a stall here is the row's subject, not the lab's)
                        stalled = f"{exc} after {len(with_pages)} of {n} trips"
                still = [pg.locator("#conn").text_content() for pg in pages]
            finally:
                browser.close()
    finally:
        if web is not None:
            web.stop()
        trip.close()
    assert still == ["connected"] * PAGES, still  # the pages were live throughout
    a = summarise("wire trip -> trip-ack, no page", GROUP, without)
    if stalled:
        check_budget(
            False,
            f"with {PAGES} pages open {stalled}; without: p50 {a.p50:.0f} us, p99 "
            f"{a.p99:.0f} us (n {a.n})",
        )
    b = summarise(f"wire trip -> trip-ack, {PAGES} pages open", GROUP, with_pages)
    benchmark.extra_info.update({"without": a.as_dict(), "with_pages": b.as_dict()})
    benchmark.pedantic(lambda: None, rounds=1)
    numbers = (
        f"{PAGES} pages: p50 {b.p50:.0f} us, p99 {b.p99:.0f} us; none: p50 {a.p50:.0f} us, "
        f"p99 {a.p99:.0f} us (n {a.n} each)"
    )
    check_budget(
        b.p50 <= a.p50 * (1 + WITHIN) and b.p99 <= a.p99 * (1 + WITHIN),
        f"within {WITHIN:.0%} of the run without pages: {numbers}",
    )
