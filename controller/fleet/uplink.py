"""`goosectl uplink`: one bay's birth, death, state and journal to an MQTT broker.

A process of its own beside the controller, never inside its loop: it reads the journal
read-only (`source.JournalReader`) and asks the control socket for the same snapshot
`goosectl status --json` prints, so a slow or absent broker can cost the controller
nothing.

One connection at a time, each made afresh (a new client, so nothing of an old session is
re-sent ahead of the new birth):

1. bdSeq + 1, persisted before the connect, and the death (retained, that bdSeq) set as
   the Will, so the broker announces the bay dead if this process or its link dies;
2. on CONNACK: the birth (retained, QoS 1: bdSeq, version, the journal's last seq), then a
   fresh state, and only then journal batches, from the checkpoint on;
3. journal batches at QoS 1 in seq order, up to `in_flight` unacknowledged; the
   checkpoint advances only over a prefix of acknowledged batches, so after any restart
   (of this process, the controller or the broker) sending resumes after the last
   acknowledged row: at least once, never a row skipped. Rows the journal no longer has
   (retention ran before they were acknowledged) are announced as a `lost` range;
4. state (retained) when the snapshot changes and at least every `state_every_s`.

A lost connection moves to the next broker URL (a cluster's other nodes). A clean stop
publishes the death itself (a clean disconnect does not fire the Will).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho

from goosectl.controller import __version__
from goosectl.controller.config.uplink import UplinkCfg
from goosectl.controller.fleet import topics
from goosectl.controller.fleet.mqtt import (
    Broker,
    connect_error,
    make_client,
    parse_broker,
    stop_loop,
)
from goosectl.controller.fleet.remote import RemoteCommands
from goosectl.controller.fleet.source import (
    CHECKPOINT,
    JournalReader,
    load_checkpoint,
    save_checkpoint,
)
from goosectl.controller.shell.control import Connection, ControlUnavailable

log = logging.getLogger(__package__)


@dataclass
class Counters:
    connects: int = 0
    refused: int = 0
    lost_links: int = 0
    batches: int = 0
    rows: int = 0
    states: int = 0
    lost_rows: int = 0
    #: the last connect failure, said as the log says it
    last_error: str = ""
    refusals: dict[str, int] = field(default_factory=dict)

    def refuse(self, why: str) -> None:
        self.refusals[why] = self.refusals.get(why, 0) + 1


class _LinkLost(Exception):
    """The client refused a publish: the session ends, the next broker is tried."""


@dataclass
class _InFlight:
    """A session's sending position: the last seq sent, the batches not yet acknowledged
    (mid, their last seq), and whether the checkpoint has moved since it was saved."""

    sent: int
    saved_at: float
    pending: deque[tuple[int, int]] = field(default_factory=deque)
    dirty: bool = False


class Uplink:
    def __init__(
        self,
        cfg: UplinkCfg,
        journal: Path,
        state_dir: Path,
        control: Path | None,
    ) -> None:
        self.cfg = cfg
        self.brokers: list[Broker] = [parse_broker(u) for u in cfg.broker]
        self.reader = JournalReader(journal)
        self.state_dir = state_dir
        self.cp_path = state_dir / CHECKPOINT
        self.cp = load_checkpoint(self.cp_path)
        self.control = control
        #: the status poll's one connection: the controller journals a connection's
        #: first read only, so a poll a second adds no row while nothing happens
        self._conn = Connection(control, timeout_s=2.0) if control is not None else None
        self.counters = Counters()
        self.stop = threading.Event()
        self.client_id = f"goosectl-uplink-{cfg.site}-{cfg.bay}"
        self._acked: set[int] = set()
        self._lock = threading.Lock()
        self._connected = threading.Event()
        self._down = threading.Event()
        self._refusal: str | None = None
        self._publish_refused = False
        self._replaced = False
        self._status: dict[str, Any] | None = None
        self._status_key = ""
        self._state_at = 0.0
        self._polled_at = 0.0
        self.commands = RemoteCommands(control, state_dir, cfg.max_cmd_bytes)
        self._cmds: queue.SimpleQueue[paho.MQTTMessage] = queue.SimpleQueue()

    # -- paho's callbacks (its network thread) ------------------------------------------

    def _on_connect(
        self, client: paho.Client, userdata: Any, flags: Any, rc: Any, props: Any
    ) -> None:
        if rc.is_failure:
            self._refusal = str(rc)
            self._down.set()
        else:
            self._connected.set()

    def _on_disconnect(
        self, client: paho.Client, userdata: Any, flags: Any, rc: Any, props: Any
    ) -> None:
        self._down.set()

    def _on_message(self, client: paho.Client, userdata: Any, msg: paho.MQTTMessage) -> None:
        self._cmds.put(msg)

    def _on_publish(
        self, client: paho.Client, userdata: Any, mid: int, rc: Any, props: Any
    ) -> None:
        # MQTT 5 brokers may refuse a publish in its PUBACK (0x87 for an ACL): not acked
        if rc is not None and getattr(rc, "is_failure", False):
            with self._lock:
                self.counters.refuse(f"publish refused: {rc}")
            self._publish_refused = True
            self._down.set()  # the connection is made again, after a growing pause
            return
        with self._lock:
            self._acked.add(mid)

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> None:
        """Until `stop` is set: connect, send, and on a lost link the next broker."""
        i = 0
        backoff = 0.2
        backoff_refused = 1.0
        while not self.stop.is_set():
            broker = self.brokers[i % len(self.brokers)]
            i += 1
            client = self._new_client(broker)
            if not self._connect(client, broker):
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.2
            self._connected_to(client, broker)
            if self._publish_refused:
                # the broker said no (an ACL): nothing acknowledged, nothing skipped; ask
                # again later rather than in a loop
                log.warning("uplink: %s refused a publish: %s", broker, self.counters.refusals)
                self._publish_refused = False
                self.stop.wait(backoff_refused)
                backoff_refused = min(backoff_refused * 2, 30.0)
        self.reader.close()
        if self._conn is not None:
            self._conn.close()

    def _new_client(self, broker: Broker) -> paho.Client:
        """A fresh client for `broker`, under the next bdSeq (persisted first), the death
        of that bdSeq its Will."""
        self.cp.bd_seq += 1
        save_checkpoint(self.cp_path, self.cp)
        client = make_client(
            self.client_id,
            broker,
            credentials=self.cfg.credentials,
            ca_file=self.cfg.ca_file,
            cert_file=self.cfg.cert_file,
            key_file=self.cfg.key_file,
            mqtt5=self.cfg.mqtt5,
        )
        client.will_set(
            topics.topic(self.cfg.site, self.cfg.bay, "death"),
            topics.death(self.cfg.site, self.cfg.bay, self.cp.bd_seq),
            qos=1,
            retain=True,
        )
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_message = self._on_message
        client.max_inflight_messages_set(self.cfg.in_flight + 4)
        client.max_queued_messages_set(0)
        return client

    def _connect(self, client: paho.Client, broker: Broker) -> bool:
        """Connected and CONNACKed; False (counted, logged, the client let go) when the
        connect failed, was refused or went unanswered."""
        self._connected.clear()
        self._down.clear()
        self._refusal = None
        try:
            client.connect(broker.host, broker.port, keepalive=self.cfg.keepalive_s)
        except (OSError, ValueError) as exc:
            self.counters.refuse(f"connect: {type(exc).__name__}")
            self.counters.last_error = connect_error(broker, exc, self.cfg.ca_file)
            log.warning("uplink: %s", self.counters.last_error)
            return False
        client.loop_start()
        deadline = time.monotonic() + max(5.0, self.cfg.keepalive_s)
        while not (self._connected.is_set() or self._down.is_set() or self.stop.is_set()):
            if time.monotonic() > deadline:
                break
            self._connected.wait(0.05)
        if not self._connected.is_set():
            self.counters.refused += 1
            why = self._refusal or "no CONNACK"
            self.counters.refuse(f"connect refused: {why}")
            log.warning("uplink: %s refused the connection: %s", broker, why)
            stop_loop(client)
            client.disconnect()
            return False
        return True

    def _connected_to(self, client: paho.Client, broker: Broker) -> None:
        """One session on a connected client; a clean stop publishes the death itself
        (a clean disconnect does not fire the Will)."""
        self.counters.connects += 1
        log.info("uplink: connected to %s, bdSeq %d", broker, self.cp.bd_seq)
        clean = self._session(client)
        if clean:
            client.publish(
                topics.topic(self.cfg.site, self.cfg.bay, "death"),
                topics.death(self.cfg.site, self.cfg.bay, self.cp.bd_seq),
                qos=1,
                retain=True,
            ).wait_for_publish(2.0)
            client.disconnect()
        else:
            self.counters.lost_links += 1
            log.warning("uplink: lost the link to %s; next broker", broker)
        stop_loop(client)

    def _session(self, client: paho.Client) -> bool:
        """One connection: birth, state, then the journal. True on a clean stop."""
        self._announce(client)
        s = _InFlight(sent=self.cp.acked_seq, saved_at=time.monotonic())
        try:
            while not self.stop.is_set():
                if self._down.is_set():
                    return False
                self._take_acks(s)
                self._serve_commands(client)
                mono = time.monotonic()
                if s.dirty and mono - s.saved_at >= 0.2:
                    save_checkpoint(self.cp_path, self.cp)
                    s.saved_at, s.dirty = mono, False
                busy = len(s.pending) < self.cfg.in_flight and self._send_batch(client, s)
                if mono - self._polled_at >= 1.0 and (
                    self._poll_status() or mono - self._state_at >= self.cfg.state_every_s
                ):
                    self._publish_state(client, self.reader.bounds()[1])
                if not busy:
                    self.stop.wait(self.cfg.poll_s)
        except _LinkLost:
            return False
        # a clean stop: what was acknowledged is kept
        with self._lock:
            while s.pending and s.pending[0][0] in self._acked:
                self.cp.acked_seq = s.pending.popleft()[1]
        save_checkpoint(self.cp_path, self.cp)
        return True

    def _announce(self, client: paho.Client) -> None:
        """The birth (retained, with the journal's last seq), a fresh state, and the
        subscription to commands: before any journal batch."""
        site, bay = self.cfg.site, self.cfg.bay
        with self._lock:
            self._acked.clear()
        _, hi = self.reader.bounds()
        now = time.time_ns()
        client.publish(
            topics.topic(site, bay, "birth"),
            topics.birth(site, bay, self.cp.bd_seq, __version__, hi, now),
            qos=1,
            retain=True,
        )
        self._poll_status(force=True)
        self._publish_state(client, hi)
        client.subscribe(topics.topic(site, bay, "cmd/req"), qos=1)

    def _take_acks(self, s: _InFlight) -> None:
        """The checkpoint moved over the acknowledged prefix of the batches in flight."""
        with self._lock:
            while s.pending and s.pending[0][0] in self._acked:
                mid, last = s.pending.popleft()
                self._acked.discard(mid)
                self.cp.acked_seq = last
                s.dirty = True

    def _send_batch(self, client: paho.Client, s: _InFlight) -> bool:
        """The next journal batch (and any range retention deleted unsent) published;
        True when it was full, so more may wait. Raises `_LinkLost` if the client refused."""
        site, bay = self.cfg.site, self.cfg.bay
        lo, hi = self.reader.bounds()
        if 0 < hi < s.sent and not self._replaced:
            self._journal_replaced(hi, s.sent)
        lost = None
        if lo > s.sent + 1:
            lost = (s.sent + 1, lo - 1)
        rows = [] if self._replaced else self.reader.rows_after(s.sent, self.cfg.batch_rows)
        if self._replaced:
            lost = None
        if not rows and lost is None:
            return False
        last = rows[-1]["seq"] if rows else lo - 1
        info = client.publish(
            topics.topic(site, bay, "journal"),
            topics.journal_batch(site, bay, s.sent + 1, last, rows, time.time_ns(), lost),
            qos=1,
        )
        if info.rc != paho.MQTT_ERR_SUCCESS:
            raise _LinkLost
        if lost is not None:
            self.counters.lost_rows += lost[1] - lost[0] + 1
            log.warning("uplink: journal rows %d-%d were deleted unsent", *lost)
        s.pending.append((info.mid, last))
        s.sent = last
        self.counters.batches += 1
        self.counters.rows += len(rows)
        return len(rows) == self.cfg.batch_rows

    def _journal_replaced(self, hi: int, sent: int) -> None:
        """A new journal under the old checkpoint: its rows reuse sequence numbers the
        store already has; said once, never resent as theirs."""
        self._replaced = True
        self.counters.refuse("journal behind the checkpoint")
        log.warning(
            "uplink: the journal ends at seq %d, below the %d acknowledged: a new "
            "journal for this bay needs a new checkpoint (remove %s)",
            hi, sent, self.cp_path,
        )  # fmt: skip

    def _serve_commands(self, client: paho.Client) -> None:
        """Every cmd/req that arrived: relayed or refused, answered on cmd/resp/{corr}."""
        while True:
            try:
                msg = self._cmds.get_nowait()
            except queue.Empty:
                return
            site, bay = self.cfg.site, self.cfg.bay
            if msg.topic != topics.topic(site, bay, "cmd/req"):
                self.counters.refuse("unexpected topic")
                log.warning("uplink: refused a message on %r", msg.topic[:200])
                continue
            corr, resp = self.commands.handle(bytes(msg.payload), f"{site}/{bay}")
            if not resp["ok"]:
                log.warning("uplink: cmd/req refused: %s", resp.get("error"))
            client.publish(
                topics.topic(site, bay, f"cmd/resp/{corr or 'unknown'}"),
                topics.encode(resp),
                qos=1,
            )

    def _poll_status(self, force: bool = False) -> bool:
        """Ask the controller for its status; True when it changed (or `force`)."""
        self._polled_at = time.monotonic()
        status: dict[str, Any] | None = None
        if self._conn is not None:
            try:
                reply = self._conn.ask({"op": "controller"})
            except (ControlUnavailable, OSError, ValueError):
                reply = None
            if reply is not None and reply.get("ok"):
                status = {k: v for k, v in reply.items() if k != "ok"}
        key = json.dumps(status, sort_keys=True, default=str)
        changed = force or key != self._status_key
        self._status, self._status_key = status, key
        return changed

    def _publish_state(self, client: paho.Client, seq: int) -> None:
        self._state_at = time.monotonic()
        self.counters.states += 1
        client.publish(
            topics.topic(self.cfg.site, self.cfg.bay, "state"),
            topics.state(
                self.cfg.site, self.cfg.bay, self.cp.bd_seq, self._status, seq, time.time_ns()
            ),
            qos=1,
            retain=True,
        )
