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


def run_demo(bays: int = 3, out: TextIO = sys.stdout, keep: bool = False) -> int:
    """The demo; 0 when nothing was lost."""
    root = Path(tempfile.mkdtemp(prefix="goosectl-fleet-demo-"))

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    procedures = root / "procedures"
    procedures.mkdir()
    for name, text in PROCEDURES.items():
        (procedures / f"{name}.yaml").write_text(text)
    cluster = NatsCluster(root / "nats")
    started: list[DemoBay] = []
    collector: Collector | None = None
    thread: threading.Thread | None = None
    try:
        say(f"== a 3-node NATS cluster (JetStream, MQTT listeners) in {root}")
        cluster.start()
        cluster.ready()
        say("   " + ", ".join(f"{n} mqtt://127.0.0.1:{cluster.mqtt[n]}" for n in cluster.names))
        db = str(root / "fleet.sqlite")
        collector = Collector(cluster.url("n3", "n2", "n1").split(","), db)
        thread = threading.Thread(target=collector.run, name="collector", daemon=True)
        thread.start()
        _until(collector.connected.is_set, 60, "the collector's subscription")
        say(f"== the collector on n3 (persistent session), store {db}")
        urls = cluster.url().split(",")
        for i in range(bays):
            rotated = ",".join(urls[i % 3 :] + urls[: i % 3])
            started.append(DemoBay(root, f"bay{i + 1}", rotated, procedures))
            first = rotated.split(",")[0]
            say(f"== bay{i + 1}: simulator, controller, uplink (first broker {first})")
        store = Store(db)
        _until(
            lambda: (
                sum(r["liveness"] == "online" for r in fleet_rows(store, time.time_ns())) == bays
            ),
            60,
            "every bay online",
        )
        first_url = [urls[0]]

        def ask(bay: DemoBay, req: dict[str, Any]) -> dict[str, Any]:
            return remote.call(
                first_url, SITE, bay.name, {"identity": "demo@central", "role": "OPERATOR", **req}
            )

        def operate(bay: DemoBay, procedure: str) -> None:
            started_ = ask(bay, {"op": "run", "procedure": procedure})
            sid = started_["reply"]["session"]
            st = _until(
                lambda: (
                    (s := request(bay.sock, {"op": "status", "session": sid})["status"])["state"]
                    == "awaiting_confirmation"
                    and s
                ),
                20,
                f"{procedure} waiting for its confirmation",
            )
            say(f"   {bay.controller}: {procedure} session {sid} waits at step {st['step']}")
            viewer = ask(bay, {"op": "confirm", "role": "VIEWER", "session": sid,
                               "step": st["step"]})  # fmt: skip
            say(f"   a VIEWER's confirm: refused ({viewer['error']})")
            ok = ask(bay, {"op": "confirm", "session": sid, "step": st["step"]})
            say(f"   the OPERATOR's confirm: {'done' if ok['ok'] else ok['error']}")
            _until(
                lambda: (
                    request(bay.sock, {"op": "status", "session": sid})["status"]["state"]
                    in ("completed", "aborted")
                ),
                20,
                f"{procedure} done",
            )

        say("== a close on bay1, remotely, with its confirmation")
        operate(started[0], "remote_close")
        if bays > 1:
            say("== a close and a trip on bay2")
            operate(started[1], "remote_close")
            operate(started[1], "remote_trip")
        alarm = started[-1]
        say(f"== an alarm: {alarm.controller}'s device cable pulled (its simulator stopped)")
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
        say("== the fleet table (goosectl fleet status)")
        for line in table(fleet_rows(store, time.time_ns())):
            say("   " + line)
        say("== n1 killed (SIGKILL); the bays keep journaling, their uplinks move on")
        cluster.kill("n1")
        for k in range(10):
            for b in started:
                request(b.sock, {"op": "mode", "mode": "test" if k % 2 == 0 else "on"})
            time.sleep(0.3)
        say("== the controllers stop; is anything lost?")
        for b in started:
            b.ctl.send_signal(signal.SIGTERM)
            b.ctl.communicate(timeout=20)
        lost = 0
        for b in started:
            own = b.journal()

            def same(b: DemoBay = b, own: list[tuple[Any, ...]] = own) -> bool:
                got = store.query(
                    "SELECT seq, machine, event, source, target FROM fleet_rows "
                    "WHERE controller = ? ORDER BY seq",
                    (b.controller,),
                )
                return [tuple(r) for r in got] == own

            try:
                _until(same, 60, f"{b.controller}'s rows")
                gaps = store.gaps(b.controller)
                say(f"   {b.controller}: journal 1..{own[-1][0]}, central the same rows, "
                    f"{len(gaps)} gaps")  # fmt: skip
                lost += len(gaps)
            except TimeoutError as exc:
                say(f"   {b.controller}: {exc}")
                lost += 1
        store.close()
        say("== nothing lost" if lost == 0 else f"== {lost} problems")
        return 0 if lost == 0 else 1
    finally:
        say("== stopping everything")
        for b in started:
            b.stop()
        if collector is not None and thread is not None:
            collector.stop.set()
            thread.join(10)
        cluster.stop()
        if not keep:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
