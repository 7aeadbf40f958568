"""The web page's peers, real: `goosectl sim --pty`, `goosectl run --no-network` on it,
`goosectl web` as its own process, and Debian's Chromium driven by Playwright (never a
downloaded browser). Under GOOSECTL_REQUIRE_PEERS=1 a missing Chromium or Playwright fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.control.conftest import Controller
from tests.support.lines import Lines
from tests.support.peers import REPO, _require
from tests.support.procs import Sim, goosectl_argv

CHROMIUM = Path("/usr/bin/chromium")
#: headless on a machine without internet: no background fetches flooding refusals
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS_IMG = REPO / "docs" / "img"

#: closes at once (breaker closed), trips at once, and one that waits for confirmation
CLOSE_NOW = """
name: close_now
params: {}
equipment: ["bay1"]
start: close_breaker
steps:
  close_breaker: {tool: device, args: {command: close}, timeout_ms: 4000}
"""
CLOSE_CONFIRMED = """
name: close_confirmed
params: {}
equipment: ["bay1"]
start: close_breaker
steps:
  close_breaker: {tool: device, args: {command: close}, confirm: true, timeout_ms: 4000,
                  next: done}
  done: {tool: note, args: {text: "closed"}}
"""


class Web:
    """`goosectl web ARGS` as its own process; `url` from its first line."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            goosectl_argv("web", *args),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)
        line = self.out.wait_for(lambda x: x.startswith("goosectl web: "), "goosectl web", 30)
        self.url = line.removeprefix("goosectl web: ")

    @property
    def port(self) -> int:
        return int(self.url.rstrip("/").rsplit(":", 1)[1])

    def kill(self) -> None:
        """SIGKILL: what a crash does (nothing flushed, no goodbye to the page)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


@pytest.fixture
def web_procs() -> Iterator[list[Web]]:
    started: list[Web] = []
    try:
        yield started
    finally:
        for w in started:
            w.kill()


@pytest.fixture
def start_web(web_procs: list[Web]):
    def start(*args: str) -> Web:
        w = Web(*args)
        web_procs.append(w)
        return w

    return start


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Sim]:
    s = Sim("--pty", "--spring-ms", "100", link=tmp_path / "device.pty")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def controller(tmp_path: Path, sim: Sim) -> Iterator[Controller]:
    procedures = tmp_path / "procedures"
    procedures.mkdir()
    (procedures / "close_now.yaml").write_text(CLOSE_NOW)
    (procedures / "close_confirmed.yaml").write_text(CLOSE_CONFIRMED)
    c = Controller(tmp_path, sim.port)
    try:
        yield c
    finally:
        if c.proc.poll() is None:
            c.proc.send_signal(signal.SIGTERM)
            c.proc.wait(timeout=30)


#: the timeline's rows as a person reads them: scrolled through from the top (the page makes
#: table rows only for the part scrolled to), each time to the last row the page made, until
#: it has made the row after it, to the last of the rows the table says it has; in their
#: place's order (aria-rowindex)
TIMELINE_SEQS = """async () => {
  const box = document.getElementById('timeline-scroll');
  const frame = () => new Promise((ok) => requestAnimationFrame(ok));
  const rows = () => document.querySelectorAll('#timeline tbody tr');
  const place = (tr) => Number(tr.getAttribute('aria-rowindex'));
  const seen = new Map();
  box.scrollTop = 0;
  for (let i = 0; i < 3; i++) await frame();
  for (let step = 0; step < 200; step++) {
    const made = rows();
    for (const tr of made) seen.set(place(tr), Number(tr.dataset.seq));
    if (!made.length) break;
    const last = made[made.length - 1];
    const end = place(last);
    const count = Number(document.getElementById('timeline').getAttribute('aria-rowcount'));
    if (end >= count) break;  // the last row (the header is the first of the count)
    box.scrollTop += last.getBoundingClientRect().top - box.getBoundingClientRect().top;
    for (let i = 0; i < 60; i++) {
      await frame();
      const now = rows();
      if (now.length && place(now[now.length - 1]) > end) break;
    }
  }
  box.scrollTop = 0;
  for (let i = 0; i < 3; i++) await frame();
  return [...seen.entries()].sort((a, b) => a[0] - b[0]).map(([, seq]) => seq);
}"""


def timeline_seqs(page: Any) -> list[int]:
    """The seq of every row on the page's timeline, newest first."""
    return list(page.evaluate(TIMELINE_SEQS))


def journal_seqs(path: Path) -> list[int]:
    """Every sequence number the journal holds, as another reader sees it."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT seq FROM journal ORDER BY seq")]
    finally:
        db.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    _require(CHROMIUM.exists(), "Debian's chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _require(False, f"playwright for Python is not installed (the test extra): {exc}")
        raise
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(20_000)
    try:
        yield pg
    finally:
        ctx.close()


def shot(page: Any, tmp_path: Path, name: str, doc: bool = False) -> Path:
    """A PNG of what the page shows, kept in the test's folder; one that docs/web.md
    shows (`doc`) is also copied to docs/img with GOOSECTL_WEB_SCREENSHOTS=1."""
    out = tmp_path / f"{name}.png"
    page.screenshot(path=str(out))
    if doc and os.environ.get("GOOSECTL_WEB_SCREENSHOTS") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        (DOCS_IMG / out.name).write_bytes(out.read_bytes())
    return out


class Relay:
    """A TCP relay between the browser and `goosectl web`, so a test can cut only the
    event stream: `stall()` keeps every open connection but forwards nothing more (a
    network that went silent), new connections pass."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.live: list[tuple[socket.socket, socket.socket, threading.Event]] = []
        self.muted: list[tuple[socket.socket, socket.socket, threading.Event]] = []
        self.lock = threading.Lock()
        self.closed = False
        #: bytes passed either way so far
        self.forwarded = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _accept(self) -> None:
        while not self.closed:
            try:
                a, _ = self.sock.accept()
            except OSError:
                return
            try:
                b = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                a.close()
                continue
            b.settimeout(None)
            mute = threading.Event()
            with self.lock:
                self.live.append((a, b, mute))
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pipe, args=(src, dst, mute), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, mute: threading.Event) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not mute.is_set():
                    dst.sendall(data)
                    with self.lock:
                        self.forwarded += len(data)
        except OSError:
            pass
        finally:
            if not mute.is_set():
                for s in (src, dst):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

    def stall(self) -> int:
        """Mute every connection open now; how many."""
        with self.lock:
            for _, _, mute in self.live:
                mute.set()
            n = len(self.live)
            self.muted, self.live = self.muted + self.live, []
        return n

    def close(self) -> None:
        self.closed = True
        self.sock.close()
        with self.lock:
            for a, b, _ in self.muted + self.live:
                a.close()
                b.close()
