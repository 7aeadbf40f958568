"""`goosectl fleet demo`: the fleet on one machine, without root, in a temporary folder.

A 3-node NATS cluster, the collector, and N bays (each the breaker simulator, `goosectl
run --no-network` on it, and `goosectl uplink` beside it, every one its own process as in
production); then a remote close with its confirmation, a trip, an alarm (one bay's device
cable pulled: its simulator stopped), the fleet table, one broker node killed while the
bays keep journaling, and the proof that nothing was lost: every bay's central rows equal
its journal. Everything it started is stopped at the end.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from goosectl.controller.fleet import remote
from goosectl.controller.fleet.cluster import NatsCluster
from goosectl.controller.fleet.collector import Collector
from goosectl.controller.fleet.store import Store
from goosectl.controller.fleet.view import fleet_rows, table
from goosectl.controller.shell.control import request

SITE = "demo"
PROCEDURES = {
    "remote_close": """
name: remote_close
version: "1"
description: close the breaker once the operator confirms
params: {}
equipment: [breaker]
conflict: refuse
start: close
steps:
  close: {tool: device, args: {command: close}, confirm: true, timeout_ms: 5000, next: done}
  done: {tool: note, args: {text: closed}}
""",
    "remote_trip": """
name: remote_trip
version: "1"
description: trip the breaker once the operator confirms
params: {}
equipment: [breaker]
conflict: refuse
start: trip
steps:
  trip: {tool: device, args: {command: trip}, confirm: true, timeout_ms: 5000, next: done}
  done: {tool: note, args: {text: tripped}}
""",
}


def _goosectl(*args: str) -> list[str]:
    return [sys.executable, "-m", "goosectl", *args]


class DemoBay:
    def __init__(self, root: Path, name: str, broker: str, procedures: Path) -> None:
        self.name = name
        self.root = root / name
        self.root.mkdir(parents=True)
        self.state = self.root / "state"
        self.sock = self.root / "control.sock"
        log = open(self.root / "sim.log", "w")  # noqa: SIM115 - the process keeps it
        self.sim = subprocess.Popen(
            _goosectl("sim", "--pty", "--spring-ms", "100", "--anti-pump", "0"),
            stdout=subprocess.PIPE, stderr=log, text=True,
        )  # fmt: skip
        assert self.sim.stdout is not None
        port = self.sim.stdout.readline().strip()
        self.ctl = subprocess.Popen(
            _goosectl("run", "--no-network", "--quiet", "--port", port, "--state",
                      str(self.state), "--control", str(self.sock), "--procedures",
                      str(procedures)),
            stdout=subprocess.PIPE, stderr=open(self.root / "run.log", "w"), text=True,  # noqa: SIM115
        )  # fmt: skip
        assert self.ctl.stdout is not None
        first = self.ctl.stdout.readline()
        if '"running"' not in first:
            raise RuntimeError(f"{name}: the controller did not start: {first}")
        self.up = subprocess.Popen(
            _goosectl("uplink", "--state", str(self.state), "--control", str(self.sock),
                      "--broker", broker, "--site", SITE, "--bay", name, "--keepalive", "2"),
            stdout=subprocess.DEVNULL, stderr=open(self.root / "uplink.log", "w"),  # noqa: SIM115
        )  # fmt: skip

    @property
    def controller(self) -> str:
        return f"{SITE}/{self.name}"

    def journal(self) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(f"file:{self.state / 'bay.sqlite'}?mode=ro", uri=True)
        try:
            return db.execute(
                "SELECT seq, machine, event, source, target FROM journal ORDER BY seq"
            ).fetchall()
        finally:
            db.close()

    def stop(self) -> None:
        for p in (self.up, self.ctl, self.sim):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in (self.up, self.ctl, self.sim):
            try:
                p.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()


def _until(pred: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise TimeoutError(f"the demo waited too long for: {what}")


def _session_state(bay: DemoBay, sid: Any) -> dict[str, Any]:
    """A session's status, asked of the bay's own control socket (not through the fleet)."""
    status: dict[str, Any] = request(bay.sock, {"op": "status", "session": sid})["status"]
    return status


class _FleetDemo:
    """The demo's parts and its narration: each act one method, so `run_demo` is the script."""

    def __init__(self, root: Path, out: TextIO) -> None:
        self.root = root
        self.out = out
        self.procedures = root / "procedures"
        self.procedures.mkdir()
        for name, text in PROCEDURES.items():
            (self.procedures / f"{name}.yaml").write_text(text)
        self.cluster = NatsCluster(root / "nats")
        self.bays: list[DemoBay] = []
        self.collector: Collector | None = None
        self.thread: threading.Thread | None = None
        self.urls: list[str] = []

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def start_cluster(self) -> None:
        self.say(f"== a 3-node NATS cluster (JetStream, MQTT listeners) in {self.root}")
        cluster = self.cluster
        cluster.start()
        cluster.ready()
        self.say(
            "   " + ", ".join(f"{n} mqtt://127.0.0.1:{cluster.mqtt[n]}" for n in cluster.names)
        )

    def start_collector(self) -> str:
        """The collector on its own thread, subscribed; the path of the store it writes."""
        db = str(self.root / "fleet.sqlite")
        self.collector = Collector(self.cluster.url("n3", "n2", "n1").split(","), db)
        self.thread = threading.Thread(target=self.collector.run, name="collector", daemon=True)
        self.thread.start()
        _until(self.collector.connected.is_set, 60, "the collector's subscription")
        self.say(f"== the collector on n3 (persistent session), store {db}")
        self.urls = self.cluster.url().split(",")
        return db

    def start_bays(self, bays: int) -> None:
        """N bays, each starting on a different broker of the cluster."""
        urls = self.urls
        for i in range(bays):
            rotated = ",".join(urls[i % 3 :] + urls[: i % 3])
            self.bays.append(DemoBay(self.root, f"bay{i + 1}", rotated, self.procedures))
            first = rotated.split(",")[0]
            self.say(f"== bay{i + 1}: simulator, controller, uplink (first broker {first})")

    def ask(self, bay: DemoBay, req: dict[str, Any]) -> dict[str, Any]:
        """A request to a bay through the fleet (the first broker), as the central operator."""
        return remote.call(
            [self.urls[0]],
            SITE,
            bay.name,
            {"identity": "demo@central", "role": "OPERATOR", **req},
        )

    def operate(self, bay: DemoBay, procedure: str) -> None:
        """Run a procedure remotely: a VIEWER's confirm refused, the OPERATOR's taken."""
        sid = self.ask(bay, {"op": "run", "procedure": procedure})["reply"]["session"]
        st = _until(
            lambda: (s := _session_state(bay, sid))["state"] == "awaiting_confirmation" and s,
            20,
            f"{procedure} waiting for its confirmation",
        )
        self.say(f"   {bay.controller}: {procedure} session {sid} waits at step {st['step']}")
        viewer = self.ask(bay, {"op": "confirm", "role": "VIEWER", "session": sid,
                                "step": st["step"]})  # fmt: skip
        self.say(f"   a VIEWER's confirm: refused ({viewer['error']})")
        ok = self.ask(bay, {"op": "confirm", "session": sid, "step": st["step"]})
        self.say(f"   the OPERATOR's confirm: {'done' if ok['ok'] else ok['error']}")
        _until(
            lambda: _session_state(bay, sid)["state"] in ("completed", "aborted"),
            20,
            f"{procedure} done",
        )

    def operate_bays(self) -> None:
        self.say("== a close on bay1, remotely, with its confirmation")
        self.operate(self.bays[0], "remote_close")
        if len(self.bays) > 1:
            self.say("== a close and a trip on bay2")
            self.operate(self.bays[1], "remote_close")
            self.operate(self.bays[1], "remote_trip")

    def pull_cable(self, store: Store) -> None:
        """The last bay's simulator stopped, until its alarm shows in the fleet table."""
        alarm = self.bays[-1]
        self.say(f"== an alarm: {alarm.controller}'s device cable pulled (its simulator stopped)")
        alarm.sim.send_signal(signal.SIGTERM)
        alarm.sim.communicate(timeout=20)
        _until(
            lambda: any(
                r["controller"] == alarm.controller and r["alarms"]
                for r in fleet_rows(store, time.time_ns())
            ),
            60,
            "the alarm in the fleet table",
        )

    def show_table(self, store: Store) -> None:
        self.say("== the fleet table (goosectl fleet status)")
        for line in table(fleet_rows(store, time.time_ns())):
            self.say("   " + line)

    def kill_broker(self) -> None:
        """One broker node killed while every bay keeps journaling mode changes."""
        self.say("== n1 killed (SIGKILL); the bays keep journaling, their uplinks move on")
        self.cluster.kill("n1")
        for k in range(10):
            for b in self.bays:
                request(b.sock, {"op": "mode", "mode": "test" if k % 2 == 0 else "on"})
            time.sleep(0.3)

    def count_lost(self, store: Store) -> int:
        """The controllers stopped; problems found comparing each journal with the store."""
        self.say("== the controllers stop; is anything lost?")
        for b in self.bays:
            b.ctl.send_signal(signal.SIGTERM)
            b.ctl.communicate(timeout=20)
        return sum(self._bay_lost(store, b) for b in self.bays)

    def _bay_lost(self, store: Store, b: DemoBay) -> int:
        """One bay's problems: its gaps once the central rows equal its journal, else 1."""
        own = b.journal()

        def same() -> bool:
            got = store.query(
                "SELECT seq, machine, event, source, target FROM fleet_rows "
                "WHERE controller = ? ORDER BY seq",
                (b.controller,),
            )
            return [tuple(r) for r in got] == own

        try:
            _until(same, 60, f"{b.controller}'s rows")
        except TimeoutError as exc:
            self.say(f"   {b.controller}: {exc}")
            return 1
        gaps = store.gaps(b.controller)
        self.say(f"   {b.controller}: journal 1..{own[-1][0]}, central the same rows, "
                 f"{len(gaps)} gaps")  # fmt: skip
        return len(gaps)

    def stop(self, keep: bool) -> None:
        """Everything started stopped, and the folder removed unless kept."""
        self.say("== stopping everything")
        for b in self.bays:
            b.stop()
        if self.collector is not None and self.thread is not None:
            self.collector.stop.set()
            self.thread.join(10)
        self.cluster.stop()
        if not keep:
            import shutil

            shutil.rmtree(self.root, ignore_errors=True)


def run_demo(bays: int = 3, out: TextIO = sys.stdout, keep: bool = False) -> int:
    """The demo; 0 when nothing was lost."""
    demo = _FleetDemo(Path(tempfile.mkdtemp(prefix="goosectl-fleet-demo-")), out)
    try:
        demo.start_cluster()
        db = demo.start_collector()
        demo.start_bays(bays)
        store = Store(db)
        _until(
            lambda: (
                sum(r["liveness"] == "online" for r in fleet_rows(store, time.time_ns())) == bays
            ),
            60,
            "every bay online",
        )
        demo.operate_bays()
        demo.pull_cable(store)
        demo.show_table(store)
        demo.kill_broker()
        lost = demo.count_lost(store)
        store.close()
        demo.say("== nothing lost" if lost == 0 else f"== {lost} problems")
        return 0 if lost == 0 else 1
    finally:
        demo.stop(keep)
