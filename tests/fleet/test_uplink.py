"""A real controller, its uplink and the collector on a real 3-node NATS cluster: what the
central store holds is the controller's journal, row for row, and the bay's liveness."""

from __future__ import annotations

import json
import signal
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
#: from the broker's Will to a subscriber on another node of the cluster: routing between
#: nodes and a loaded host's scheduling, not the broker's 1.5x keepalive
DELIVERY_S = 0.5


def schema(kind: str) -> dict:
    return json.loads((SCHEMAS / f"{kind}.schema.json").read_text())


class Watcher:
    """A plain MQTT subscriber on `goosectl/v1/#`: every (topic, payload) in arrival order."""

    def __init__(self, port: int) -> None:
        self.got: list[tuple[str, dict]] = []
        #: when each arrived (time.monotonic), in the same order
        self.at: list[float] = []
        self.lock = threading.Lock()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"watch{time.time_ns()}")
        self.c.on_message = self._msg
        self.c.connect("127.0.0.1", port, 10)
        self.c.loop_start()
        self.c.subscribe("goosectl/v1/#", qos=1)

    def _msg(self, c: paho.Client, u: object, m: paho.MQTTMessage) -> None:
        with self.lock:
            self.got.append((m.topic, json.loads(m.payload)))
            self.at.append(time.monotonic())

    def kinds(self, controller: str) -> list[tuple[str, dict]]:
        with self.lock:
            return [
                (t.rsplit("/", 1)[1], p) for t, p in self.got if p.get("controller") == controller
            ]

    def first_at(self, controller: str, kind: str, **fields: object) -> float | None:
        """When the first `kind` of `controller` with these fields arrived, or None."""
        with self.lock:
            for (t, p), at in zip(self.got, self.at, strict=True):
                if (
                    p.get("controller") == controller
                    and t.rsplit("/", 1)[1] == kind
                    and all(p.get(k) == v for k, v in fields.items())
                ):
                    return at
        return None

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
        deaths = Watcher(nats.mqtt["n2"])
        time.sleep(1)  # subscribed; an old session's retained death has arrived
        bay.kill(bay.ctl, bay.up)
        killed = time.monotonic()
        # MQTT: the broker sends the Will once 1.5x the keepalive passed without a packet
        # from the client, whose last packet went out before the kill
        seen = wait_until(
            lambda: deaths.first_at(ctl, "death", bdSeq=before),
            3 * bay.keepalive,
            "the death (the Will) with the bay's bdSeq",
            every_s=0.05,
        )
        took = seen - killed
        deaths.close()
        print(f"death {took:.2f} s after kill -9 (keepalive {bay.keepalive} s)")
        assert took <= 1.5 * bay.keepalive + DELIVERY_S, took
        wait_until(lambda: bay_row(collector, ctl)["liveness"] == "dead", 20, "the death stored")
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
        connects = [
            line
            for line in (bay.root / "uplink.log").read_text().splitlines()
            if "connected" in line
        ]
        assert f"127.0.0.1:{nats.mqtt['n1']}" in connects[-1], connects  # the node it is on
        nats.kill("n1")
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


def test_an_uplink_polling_adds_no_journal_row_while_nothing_happens(
    nats: NatsCluster, collector: str, tmp_path: Path
) -> None:
    """The uplink asks for the status once a second on one connection: its first read is
    journaled (who looked), the rest only counted: polling adds no row to the journal."""
    ctl = "s1/b4"
    bay = Bay(tmp_path / "b4", "s1", "b4", nats.url()).start()
    try:
        bay.uplink()
        wait_until(
            lambda: [
                r for r in fleet_status(collector) if r["controller"] == ctl and r["reachable"]
            ],
            60,
            "the bay's state stored",
        )
        wait_until(
            lambda: [r for r in bay.journal() if r[1] == "control"], 20, "the first read journaled"
        )
        wait_until(lambda: central(collector, ctl) == bay.journal(), 60, "the store is the journal")
        polls = 8
        time.sleep(polls + 2)  # at least `polls` status polls of the uplink
        # the bay's own rows go on (its publishers' retransmissions); of the uplink's
        # polls, only the connection's first read is a row
        looked = [r for r in bay.journal() if r[1] == "control"]
        assert len(looked) == 1, looked
        bay.mode("test")  # a real change is journaled and reaches the store as before
        wait_until(
            lambda: [r for r in bay.journal() if r[1] == "control"][1:], 20, "the change journaled"
        )
        wait_until(lambda: central(collector, ctl) == bay.journal(), 60, "the change stored")
        assert bay.ctl is not None
        bay.ctl.terminate()
        out, _ = bay.ctl.communicate(timeout=20)
        report = json.loads(out.strip().splitlines()[-1])
        assert report["event"] == "stopped"
        assert report["control"]["requests.read_unjournaled"] >= polls, report["control"]
    finally:
        bay.stop()


def test_a_silent_uplink_is_announced_dead_within_1_5x_keepalive(
    nats: NatsCluster, collector: str, tmp_path: Path
) -> None:
    """A kill -9 closes the socket and the broker sends the Will at once; a frozen uplink
    (a hung host, a cut cable) sends nothing and closes nothing, and only the keepalive
    can tell: the death must still come within 1.5x the keepalive of its last packet."""
    ctl = "s1/b5"
    bay = Bay(tmp_path / "b5", "s1", "b5", nats.url(), keepalive=2).start()
    deaths = Watcher(nats.mqtt["n2"])
    try:
        up = bay.uplink()
        wait_until(
            lambda: [
                r
                for r in fleet_status(collector)
                if r["controller"] == ctl and r["liveness"] == "online"
            ],
            60,
            "the bay online",
        )
        bd_seq = bay_row(collector, ctl)["bdSeq"]
        up.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()  # its last packet went out before this
        seen = wait_until(
            lambda: deaths.first_at(ctl, "death", bdSeq=bd_seq),
            4 * bay.keepalive,
            "the death (the Will) of the frozen uplink",
            every_s=0.05,
        )
        took = seen - stopped
        print(f"death {took:.2f} s after the uplink froze (keepalive {bay.keepalive} s)")
        assert took <= 1.5 * bay.keepalive + DELIVERY_S, took
        wait_until(lambda: bay_row(collector, ctl)["liveness"] == "dead", 20, "the death stored")
        up.send_signal(signal.SIGCONT)
    finally:
        deaths.close()
        bay.kill(bay.up)
        bay.stop()
