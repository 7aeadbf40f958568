"""`goosectl fleet collect`: every bay's topics into the central store.

A persistent MQTT session (clean session off, a fixed client id, QoS 1 on `goosectl/v1/#`):
while the collector is away the broker keeps what it missed (NATS keeps the session in
JetStream, so any node of the cluster resumes it). The messages waiting when the store
thread comes round (up to `BATCH_MESSAGES`) are stored in one transaction and only then
acknowledged (paho's manual acknowledgement), so a collector killed between the two gets
them again: rows are de-duplicated on (controller, seq), never lost. One transaction per
message was the collector's limit: its commits, not the decoding, held it under the
fleet's 10,000 rows a second (docs/fleet.md).

A payload that is not what its topic promises (not JSON, another schema version, a range
out of order) or a topic outside the layout is counted, logged with its reason and
acknowledged (a poison message must not come back for ever); nothing of it is stored.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho

from goosectl.controller.fleet import topics
from goosectl.controller.fleet.mqtt import (
    Broker,
    connect_error,
    make_client,
    parse_broker,
    stop_loop,
)
from goosectl.controller.fleet.store import Store

log = logging.getLogger(__package__)

#: messages stored in one transaction at most: enough to amortise the commit at the
#: fleet's rate, few enough that the acknowledgements (and the broker's redelivery after a
#: crash) stay small
BATCH_MESSAGES = 500
#: how long a batch's SQLite write waits for another writer's lock before it is tried
#: again (nothing acknowledged, nothing lost): the wait is inside SQLite, where neither
#: SIGTERM's handler nor `stop` can end it, and the store's 30 s for readers would keep a
#: stopping collector that long
STORE_BUSY_S = 2.0


class Collector:
    def __init__(
        self,
        brokers: list[str],
        db_url: str,
        *,
        client_id: str = "goosectl-collector",
        credentials: Any = None,
        ca_file: Any = None,
        keepalive_s: int = 10,
    ) -> None:
        self.brokers: list[Broker] = [parse_broker(u) for u in brokers]
        self.store = Store(db_url, busy_timeout_s=STORE_BUSY_S)
        self.client_id = client_id
        self.credentials = credentials
        self.ca_file = ca_file
        self.keepalive_s = keepalive_s
        self.stop = threading.Event()
        self.refused: Counter[str] = Counter()
        self.stored = 0
        self.store_errors = 0
        self.connected = threading.Event()
        self._q: queue.SimpleQueue[tuple[paho.Client, paho.MQTTMessage] | None] = (
            queue.SimpleQueue()
        )
        self._down = threading.Event()
        #: called once the first subscription is acknowledged (`fleet collect` says so)
        self.on_subscribed: Callable[[], None] | None = None

    def _on_connect(self, client: paho.Client, u: Any, flags: Any, rc: Any, p: Any) -> None:
        if rc.is_failure:
            log.warning("collector: connection refused: %s", rc)
            self._down.set()
            return
        client.subscribe(f"{topics.ROOT}/#", qos=1)

    def _on_subscribe(self, client: paho.Client, u: Any, mid: int, rcs: Any, p: Any) -> None:
        if any(rc.is_failure for rc in rcs):
            log.warning("collector: subscription refused: %s", rcs)
            self._down.set()
            return
        if not self.connected.is_set() and self.on_subscribed is not None:
            self.on_subscribed()
        self.connected.set()

    def _on_disconnect(self, client: paho.Client, u: Any, flags: Any, rc: Any, p: Any) -> None:
        self.connected.clear()
        self._down.set()

    def _on_message(self, client: paho.Client, u: Any, msg: paho.MQTTMessage) -> None:
        self._q.put((client, msg))

    def run(self) -> None:
        """Until `stop`: one connection at a time, the next broker when it is lost; the
        messages stored on this thread."""
        worker = threading.Thread(target=self._links, name="collector-links", daemon=True)
        worker.start()
        while not self.stop.is_set():
            try:
                item = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            if item is None:
                break
            batch = [item]
            while len(batch) < BATCH_MESSAGES:
                try:
                    more = self._q.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self.stop.set()
                    break
                batch.append(more)
            self._store_and_ack(batch)
        worker.join(timeout=5)
        self.store.close()

    def _store_and_ack(self, batch: list[tuple[paho.Client, paho.MQTTMessage]]) -> None:
        """The messages stored in one transaction, then each acknowledged; on a database
        error none is, and the whole batch is tried again."""
        while True:
            try:
                self.handle_many([(m.topic, bytes(m.payload)) for _, m in batch])
            except Exception as exc:  # the database: not acknowledged, tried again
                self.store_errors += 1
                log.warning("collector: store: %s; trying again", exc)
                if self.stop.wait(1.0):
                    return
                continue
            for client, msg in batch:
                client.ack(msg.mid, msg.qos)
            return

    def _links(self) -> None:
        i = 0
        while not self.stop.is_set():
            broker = self.brokers[i % len(self.brokers)]
            i += 1
            client = make_client(
                self.client_id,
                broker,
                credentials=self.credentials,
                ca_file=self.ca_file,
                clean_session=False,
            )
            client.manual_ack_set(True)
            client.on_connect = self._on_connect
            client.on_disconnect = self._on_disconnect
            client.on_message = self._on_message
            client.on_subscribe = self._on_subscribe
            self._down.clear()
            try:
                client.connect(broker.host, broker.port, keepalive=self.keepalive_s)
            except (OSError, ValueError) as exc:
                log.warning("collector: %s", connect_error(broker, exc, self.ca_file))
                self.stop.wait(0.5)
                continue
            client.loop_start()
            while not (self.stop.is_set() or self._down.is_set()):
                self._down.wait(0.2)
            if self.stop.is_set():
                client.disconnect()
            stop_loop(client)
            if not self.stop.is_set():
                log.warning("collector: lost %s; next broker", broker)
                self.stop.wait(0.2)

    def handle_many(self, messages: list[tuple[str, bytes]]) -> None:
        """(topic, payload) messages into the store in one transaction, each stored or
        refused with its reason as `handle` would; a database error stores none."""
        stored = self.stored
        try:
            with self.store.many():
                for name, payload in messages:
                    self.handle(name, payload)
        except BaseException:
            self.stored = stored  # rolled back: counted when stored on the next try
            raise

    def handle(self, name: str, payload: bytes) -> None:
        """One message into the store, or refused with its reason."""
        t = topics.parse_topic(name)
        if t is None or t.kind in ("cmd/req", "cmd/resp"):
            if t is None:
                self._refuse(None, f"unexpected topic {name[:200]!r}")
            return
        now = time.time_ns()
        try:
            obj = topics.decode(payload)
            if obj.get("controller") != t.controller:
                raise topics.PayloadError(
                    f"payload names {obj.get('controller')!r}, its topic {t.controller!r}"
                )
            if t.kind == "journal":
                first, last, rows = topics.check_batch(obj)
                lost = obj.get("lost")
                span = (int(lost[0]), int(lost[1])) if isinstance(lost, list) else None
                self.store.batch(
                    t.controller, first, last, rows, int(obj.get("sent_ns", 0)), now, span
                )
                self.stored += len(rows)
            elif t.kind in ("birth", "death", "state"):
                if not isinstance(obj.get("bdSeq"), int):
                    raise topics.PayloadError(f"a {t.kind} needs an integer bdSeq")
                if t.kind == "birth":
                    self.store.birth(t.controller, obj)
                elif t.kind == "death":
                    self.store.death(t.controller, obj, now)
                else:
                    self.store.state(t.controller, obj, now)
        except (topics.PayloadError, KeyError, TypeError, ValueError) as exc:
            self._refuse(t.controller, f"{t.kind}: {exc}")

    def _refuse(self, controller: str | None, why: str) -> None:
        self.refused[why.split(":")[0]] += 1
        log.warning("collector: refused %s", why)
        self.store.refused(controller)
