"""A real controller for the control-socket tests: `goosectl sim --pty` (the breaker
simulator on a pty) and `goosectl run --no-network` with a state folder and a control socket,
both separate processes, started the way an operator would and stopped with SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import procs
from tests.support.lines import Lines
from tests.support.procs import Sim, start_run

REPO = Path(__file__).resolve().parents[2]
BAY = REPO / "examples" / "controller" / "bay1.yaml"

#: A procedure that completes at once (one note): each `run` is a whole session's journal.
HELLO = """
name: hello
params: {n: {type: int}}
equipment: ["unit{n}"]
start: say
steps:
  say: {tool: note, args: {text: "hello {n}"}}
"""

#: Waits for the operator at once (no device involved): a session that stays open.
HOLD = """
name: hold
params: {n: {type: int}}
equipment: ["unit{n}"]
start: ask
steps:
  ask: {tool: note, args: {text: "go on?"}, confirm: true}
"""

#: Trips the breaker without asking (the device's own counters show it happened).
TRIP = """
name: trip
params: {}
equipment: ["bay1"]
start: open_breaker
steps:
  open_breaker: {tool: device, args: {command: trip}, timeout_ms: 4000}
"""


goosectl = partial(procs.goosectl, timeout=60)


class Controller:
    """`goosectl run --no-network` on the simulator's pty, with `control:`/`agent:` limits
    from `limits` written into its config."""

    def __init__(
        self,
        tmp: Path,
        port: str,
        limits: dict[str, Any] | None = None,
        *,
        name: str = "ctl",
        state: Path | None = None,
        control: Path | None = None,
        journal: Path | None = None,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        expect_running: bool = True,
    ) -> None:
        self.config = tmp / f"{name}.yaml"
        self.config.write_text(BAY.read_text() + "\n" + (yaml.safe_dump(limits) if limits else ""))
        self.state = state or tmp / f"{name}-state"
        self.sock = control if control is not None else tmp / f"{name}.sock"
        procedures = tmp / "procedures"
        procedures.mkdir(exist_ok=True)
        for packaged in (REPO / "controller" / "agent" / "procedures").glob("*.yaml"):
            (procedures / packaged.name).write_text(packaged.read_text())  # isolate, close
        (procedures / "hello.yaml").write_text(HELLO)
        (procedures / "trip.yaml").write_text(TRIP)
        (procedures / "hold.yaml").write_text(HOLD)
        args = [
            "--quiet",
            "--config",
            str(self.config),
            "--state",
            str(self.state),
            "--procedures",
            str(procedures),
        ]
        if control is not False:
            args += ["--control", str(self.sock)]
        if journal is not None:
            args += ["--journal", str(journal)]
        self.proc = start_run(port, *args, env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)
        self.running: dict[str, Any] = {}
        if expect_running:
            line = self.out.wait_for(lambda x: '"running"' in x, "the controller to run", 60)
            self.running = json.loads(line)
            self.sock = Path(self.running["control"])

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, obj: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
        from goosectl.controller.shell.control import request

        return request(self.sock, obj, timeout_s)

    def stop(self) -> dict[str, Any]:
        """SIGTERM; the `stopped` report (counters, the control socket's counts)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        line = self.out.wait_for(lambda x: '"stopped"' in x, "the stopped report", 10)
        return json.loads(line)

    def journal(self, machine_prefix: str) -> list[tuple]:
        """(machine, event, source, target, detail) rows of the controller's journal."""
        import sqlite3

        db = sqlite3.connect(self.state / "bay.sqlite")
        try:
            return list(
                db.execute(
                    "SELECT machine, event, source, target, effects FROM journal "
                    "WHERE machine LIKE ? ORDER BY seq",
                    (machine_prefix + "%",),
                )
            )
        finally:
            db.close()


def connect(path: Path, timeout_s: float = 10.0) -> socket.socket:
    """A connection; a full listen backlog (EAGAIN, the controller busy accepting) is
    tried again until `timeout_s`."""
    end = time.monotonic() + timeout_s
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout_s)
        try:
            s.connect(str(path))
            return s
        except BlockingIOError:
            s.close()
            if time.monotonic() > end:
                raise
            time.sleep(0.001)


def read_line(s: socket.socket) -> dict[str, Any]:
    """One reply line (the socket's timeout bounds a failing test)."""
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {buf!r}")
        buf += chunk
    return json.loads(buf)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Sim]:
    s = Sim("--pty", "--spring-ms", "100", link=tmp_path / "device.pty")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def controllers(tmp_path: Path, sim: Sim) -> Iterator[Callable[..., Controller]]:
    """Start controllers on the simulator (`start(limits, **kw)`); all stopped at the end."""
    started: list[Controller] = []

    def start(limits: dict[str, Any] | None = None, **kw: Any) -> Controller:
        c = Controller(tmp_path, sim.port, limits, **kw)
        started.append(c)
        return c

    try:
        yield start
    finally:
        for c in started:
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
                try:
                    c.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    c.proc.kill()
                    c.proc.wait()
