"""A bay as an operator runs it for the fleet: the breaker simulator, `goosectl run
--no-network` on it, and `goosectl uplink` beside it; the collector as its own process;
and what the tests read back (the controller's journal, the central store)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from goosectl.controller.fleet.store import Store
from tests.support.peers import REPO
from tests.support.procs import Sim, goosectl, goosectl_argv, start_run, wait_running


def spawn(*args: str, log: Path) -> subprocess.Popen:
    out = open(log, "ab")  # noqa: SIM115 - the process keeps it
    return subprocess.Popen(goosectl_argv(*args), cwd=REPO, stdout=out, stderr=out)


class Bay:
    """One bay in `root`: `start()` the simulator and the controller, `uplink()` the
    uplink (again after a kill), `kill()` with SIGKILL."""

    def __init__(self, root: Path, site: str, bay: str, broker: str, keepalive: int = 2) -> None:
        self.root, self.site, self.bay, self.broker = root, site, bay, broker
        self.keepalive = keepalive
        self.state = root / "state"
        self.sock = root / "control.sock"
        self.sim: Sim | None = None
        self.ctl: subprocess.Popen | None = None
        self.up: subprocess.Popen | None = None

    @property
    def controller(self) -> str:
        return f"{self.site}/{self.bay}"

    def start(self, *run_args: str) -> Bay:
        """`run_args`: more of `goosectl run`'s options (`--config`, `--procedures`)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.sim = Sim("--pty")
        self.ctl = start_run(
            self.sim.port, "--quiet", "--state", str(self.state), "--control", str(self.sock),
            *run_args,
        )  # fmt: skip
        wait_running(self.ctl)
        return self

    def uplink(self) -> subprocess.Popen:
        self.up = spawn(
            "uplink", "--state", str(self.state), "--control", str(self.sock),
            "--broker", self.broker, "--site", self.site, "--bay", self.bay,
            "--keepalive", str(self.keepalive),
            log=self.root / "uplink.log",
        )  # fmt: skip
        return self.up

    def mode(self, mode: str) -> None:
        goosectl("mode", mode, "--control", str(self.sock))

    def journal(self) -> list[tuple[Any, ...]]:
        """The controller's own rows: (seq, machine, event, source, target)."""
        db = sqlite3.connect(f"file:{self.state / 'bay.sqlite'}?mode=ro", uri=True)
        try:
            return db.execute(
                "SELECT seq, machine, event, source, target FROM journal ORDER BY seq"
            ).fetchall()
        finally:
            db.close()

    def kill(self, *procs: subprocess.Popen | None) -> None:
        for p in procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()

    def stop(self) -> str:
        """Everything stopped; the simulator's stderr (its counters: `sim_counts`)."""
        for p in (self.up, self.ctl):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.communicate(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate()
        return self.sim.stop() if self.sim is not None else ""


def central(db: str, controller: str) -> list[tuple[Any, ...]]:
    store = Store(db)
    try:
        got = store.query(
            "SELECT seq, machine, event, source, target FROM fleet_rows WHERE controller = ? "
            "ORDER BY seq",
            (controller,),
        )
        return [tuple(r) for r in got]
    finally:
        store.close()


def wait_until(pred: Any, timeout_s: float, what: str, every_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"never happened: {what} (last: {last!r})")


def fleet_status(db: str) -> list[dict[str, Any]]:
    import json

    done = goosectl("fleet", "status", "--json", "--db", db, check=False)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def bay_row(db: str, controller: str) -> dict[str, Any]:
    """The fleet table's row of one bay (the store also has the retained bays of others)."""
    rows = [r for r in fleet_status(db) if r["controller"] == controller]
    assert rows, f"{controller} not in the fleet table"
    return rows[0]


def start_collector(
    broker: str, db: str, client_id: str, log: Path, priority: str = "normal"
) -> subprocess.Popen:
    """`goosectl fleet collect` (at `--priority`), returned once its subscription is
    acknowledged: rows published before a session exists are nobody's to keep."""
    proc = spawn(
        "fleet", "collect", "--broker", broker, "--db", db, "--client-id", client_id,
        "--priority", priority, log=log,
    )  # fmt: skip
    wait_until(lambda: "subscribed" in log.read_text(), 60, "the collector subscribed")
    return proc
