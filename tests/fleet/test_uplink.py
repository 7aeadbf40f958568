"""A real controller, its uplink and the collector on a real 3-node NATS cluster: what the
central store holds is the controller's journal, row for row, and the bay's liveness."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import paho.mqtt.client as paho
import pytest

from tests.fleet.bays import Bay, bay_row, central, fleet_status, start_collector, wait_until
from tests.fleet.brokers import NatsCluster
from tests.support.peers import REPO

SCHEMAS = REPO / "docs" / "fleet"


def schema(kind: str) -> dict:
    return json.loads((SCHEMAS / f"{kind}.schema.json").read_text())


class Watcher:
    """A plain MQTT subscriber on `goosectl/v1/#`: every (topic, payload) in arrival order."""

    def __init__(self, port: int) -> None:
        self.got: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"watch{time.time_ns()}")
        self.c.on_message = self._msg
        self.c.connect("127.0.0.1", port, 10)
        self.c.loop_start()
        self.c.subscribe("goosectl/v1/#", qos=1)

    def _msg(self, c: paho.Client, u: object, m: paho.MQTTMessage) -> None:
        with self.lock:
            self.got.append((m.topic, json.loads(m.payload)))

    def kinds(self, controller: str) -> list[tuple[str, dict]]:
        with self.lock:
            return [
                (t.rsplit("/", 1)[1], p) for t, p in self.got if p.get("controller") == controller
            ]

    def close(self) -> None:
        self.c.loop_stop()
        self.c.disconnect()


@pytest.fixture
def collector(nats: NatsCluster, tmp_path: Path) -> Iterator[str]:
    db = str(tmp_path / "fleet.sqlite")
    # the collector on node 3 first, the uplinks on node 1: a kill of n1 is not the collector's
    proc = start_collector(
        nats.url("n3", "n2", "n1"), db, f"collector-{tmp_path.name}", tmp_path / "collector.log"
    )
    try:
        yield db
    finally:
        proc.terminate()
        proc.wait(20)


def test_the_store_holds_the_journal_row_for_row_and_every_payload_fits_its_schema(
    nats: NatsCluster, collector: str, tmp_path: Path
) -> None:
    watch = Watcher(nats.mqtt["n2"])
    bay = Bay(tmp_path / "b1", "s1", "b1", nats.url()).start()
    try:
        bay.uplink()
        for mode in ("test", "on", "off", "on"):
            bay.mode(mode)
        wait_until(
            lambda: central(collector, "s1/b1") == bay.journal(), 60, "the store equals the journal"
        )
        seen = watch.kinds("s1/b1")
        for kind in ("birth", "state", "journal"):
            payloads = [p for k, p in seen if k == kind]
            assert payloads, f"no {kind} seen"
            for p in payloads:
                jsonschema.validate(p, schema(kind))
        first = [k for k, _ in seen]
        assert first.index("birth") < first.index("state") < first.index("journal")
        row = bay_row(collector, "s1/b1")
        assert row["liveness"] == "online" and row["gaps"] == [] and row["mode"] == "on"
        # a clean stop: the controller first, whose last rows the uplink still sends, then
        # the uplink, which publishes its own death (a clean disconnect fires no Will)
        assert bay.ctl is not None and bay.up is not None
        bay.ctl.terminate()
        bay.ctl.communicate(timeout=20)
        wait_until(lambda: central(collector, "s1/b1") == bay.journal(), 60, "the last rows stored")
        bay.up.terminate()
        bay.up.wait(20)
        death = wait_until(
            lambda: [p for k, p in watch.kinds("s1/b1") if k == "death"], 20, "the death"
        )
        for p in death:
            jsonschema.validate(p, schema("death"))
        assert death[-1]["bdSeq"] == row["bdSeq"]
        wait_until(
            lambda: bay_row(collector, "s1/b1")["liveness"] == "dead", 20, "dead in the store"
        )
    finally:
        bay.stop()
        watch.close()


def test_kill_9_is_a_death_and_a_restart_a_birth_with_bdseq_plus_one_before_any_batch(
    nats: NatsCluster, collector: str, tmp_path: Path
) -> None:
    ctl = "s1/b2"
    bay = Bay(tmp_path / "b2", "s1", "b2", nats.url(), keepalive=2).start()
    try:
        bay.uplink()
        wait_until(
            lambda: [
                r
                for r in fleet_status(collector)
                if r["controller"] == ctl and r["liveness"] == "online"
            ],
            60,
            "the bay online",
        )
        before = bay_row(collector, ctl)["bdSeq"]
        bay.kill(bay.ctl, bay.up)
        t0 = time.monotonic()
        wait_until(
            lambda: bay_row(collector, ctl)["liveness"] == "dead",
            3 * bay.keepalive,
            "the death (the Will) stored",
            every_s=0.1,
        )
        # the broker sends the Will 1.5x the keepalive after the last packet; what the
        # collector stores follows it (the bound here is the wait above, not a timing)
        assert time.monotonic() - t0 > 0
        assert bay_row(collector, ctl)["stale"] is True
        watch = Watcher(nats.mqtt["n2"])
        time.sleep(1)  # the retained messages of the old session arrive first
        with watch.lock:
            watch.got.clear()
        assert bay.sim is not None
        from tests.support.procs import start_run, wait_running

        bay.ctl = start_run(
            bay.sim.port, "--quiet", "--state", str(bay.state), "--control", str(bay.sock)
        )
        wait_running(bay.ctl)
        bay.uplink()
        wait_until(
            lambda: [k for k, _ in watch.kinds("s1/b2") if k == "journal"], 60, "a batch after"
        )
        seen = watch.kinds("s1/b2")
        kinds = [k for k, _ in seen]
        assert kinds[0] == "birth", kinds
        assert seen[0][1]["bdSeq"] == before + 1
        assert kinds.index("state") < kinds.index("journal")
        state = next(p for k, p in seen if k == "state")
        assert state["reachable"] is True and state["bdSeq"] == before + 1
        wait_until(lambda: bay_row(collector, ctl)["liveness"] == "online", 30, "online again")
        watch.close()
    finally:
        bay.stop()


def test_sigkill_of_the_uplinks_node_and_of_the_uplink_loses_no_row(
    nats: NatsCluster, collector: str, tmp_path: Path
) -> None:
    ctl = "s1/b3"
    bay = Bay(tmp_path / "b3", "s1", "b3", nats.url(), keepalive=2).start()
    toggles = iter(["test", "on"] * 1000)
    try:
        up = bay.uplink()
        wait_until(lambda: central(collector, "s1/b3"), 60, "rows stored")
        nats.kill("n1")  # the uplink tries n1 first: the node it is connected to
        end = time.monotonic() + 30
        while time.monotonic() < end:  # the controller journals while n1 is down
            bay.mode(next(toggles))
            time.sleep(0.2)
        during = bay.journal()
        wait_until(
            lambda: central(collector, ctl)[: len(during)] == during,
            60,
            "the rows journaled while n1 was down stored through another node",
        )
        nats.start("n1")
        bay.kill(up)  # and the uplink itself, mid-stream
        for _ in range(10):
            bay.mode(next(toggles))
        bay.uplink()
        for _ in range(10):
            bay.mode(next(toggles))
        assert bay.ctl is not None
        bay.ctl.terminate()  # its last rows written, the uplink sends them
        bay.ctl.communicate(timeout=20)
        wait_until(
            lambda: central(collector, ctl) == bay.journal(),
            120,
            "the store equals the journal",
        )
        seqs = [r[0] for r in central(collector, "s1/b3")]
        assert seqs == list(range(seqs[0], seqs[-1] + 1))
        assert bay_row(collector, ctl)["gaps"] == []
    finally:
        bay.stop()
        if nats.procs["n1"].poll() is not None:
            nats.start("n1")
