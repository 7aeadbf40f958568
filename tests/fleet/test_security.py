"""Security with real brokers: mqtts:// verified against the CA (a broker with a
certificate of another CA is never sent the credentials), credentials from a file, and
per-bay ACLs: on mosquitto an MQTT 5 client with bay 1's credential gets reason 0x87 for
bay 2's topics; on NATS (MQTT 3.1.1, no negative acknowledgement) nothing of it reaches
the collector and the server logs the violation."""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as paho
import pytest

from goosectl.controller.config.uplink import UplinkCfg
from goosectl.controller.fleet import topics
from goosectl.controller.fleet.collector import Collector
from goosectl.controller.fleet.mqtt import make_client, parse_broker, stop_loop
from goosectl.controller.fleet.store import Store
from goosectl.controller.fleet.uplink import Uplink
from tests.fleet.bays import wait_until
from tests.fleet.brokers import Mosquitto, NatsCluster
from tests.fleet.tls import make_ca, make_server_cert, open_dir

ACL = """\
# the collector reads every bay and may send requests
user central
topic read goosectl/v1/#
topic write goosectl/v1/+/+/cmd/req

# each bay: its own topics only, and only its own cmd/req to read
user bay1
topic write goosectl/v1/s1/bay1/#
topic read goosectl/v1/s1/bay1/cmd/req

user bay2
topic write goosectl/v1/s1/bay2/#
topic read goosectl/v1/s1/bay2/cmd/req
"""


def mosquitto_tls(root: Path) -> tuple[Mosquitto, Path]:
    ca = make_ca(root)
    cert, key = make_server_cert(root, ca)
    pw = root / "passwords"
    pw.write_text("")
    for user in ("central", "bay1", "bay2"):
        subprocess.run(["mosquitto_passwd", "-b", str(pw), user, f"{user}-secret"], check=True)
        (root / f"{user}.cred").write_text(f"{user}:{user}-secret\n")
    (root / "acl").write_text(ACL)
    for p in root.iterdir():
        p.chmod(0o644)
    broker = Mosquitto(
        root,
        f"allow_anonymous false\npassword_file {pw}\nacl_file {root / 'acl'}\n"
        f"cafile {ca[0]}\ncertfile {cert}\nkeyfile {key}\n",
    )
    return broker, ca[0]


def test_mqtts_with_the_ca_and_per_bay_acls_on_mosquitto() -> None:
    root = open_dir()
    broker, ca = mosquitto_tls(root)
    url = f"mqtts://127.0.0.1:{broker.port}"
    try:
        # bay 1's credential, MQTT 5 so the broker can say no in its PUBACK and SUBACK
        codes: dict[str, object] = {}
        done = threading.Event()
        c = make_client("bay1-probe", parse_broker(url), credentials=root / "bay1.cred",
                        ca_file=ca, mqtt5=True)  # fmt: skip

        def on_publish(cl: object, u: object, mid: int, rc: object, p: object) -> None:
            codes[f"pub{mid}"] = rc

        def on_subscribe(cl: object, u: object, mid: int, rcs: list, p: object) -> None:
            codes["sub"] = rcs[0]
            done.set()

        c.on_publish = on_publish
        c.on_subscribe = on_subscribe
        c.connect("127.0.0.1", broker.port, 10)
        c.loop_start()
        own = c.publish("goosectl/v1/s1/bay1/state", b"{}", qos=1)
        foreign = c.publish("goosectl/v1/s1/bay2/state", b"{}", qos=1)
        got: list[str] = []
        c.on_message = lambda cl, u, m: got.append(m.topic)
        c.subscribe([("goosectl/v1/s1/bay2/cmd/req", 1), ("goosectl/v1/s1/bay1/cmd/req", 1)])
        wait_until(lambda: len(codes) == 3, 20, "every acknowledgement")
        assert codes[f"pub{foreign.mid}"].value == 0x87  # Not authorized
        assert codes[f"pub{own.mid}"].value in (0x00, 0x10)  # accepted (no subscriber)
        # mosquitto 2.0 grants the subscription and applies `read` to every delivery:
        # central's requests to bay 2 never reach bay 1's credential, its own do
        central = make_client("central-probe", parse_broker(url),
                              credentials=root / "central.cred", ca_file=ca)  # fmt: skip
        central.connect("127.0.0.1", broker.port, 10)
        central.loop_start()
        central.publish("goosectl/v1/s1/bay2/cmd/req", b"{}", qos=1).wait_for_publish(10)
        central.publish("goosectl/v1/s1/bay1/cmd/req", b"{}", qos=1).wait_for_publish(10)
        wait_until(lambda: got, 20, "bay 1's own request delivered")
        time.sleep(0.5)
        stop_loop(central)
        central.disconnect()
        stop_loop(c)
        c.disconnect()
        assert got == ["goosectl/v1/s1/bay1/cmd/req"], got

        # the real uplink over mqtts:// with bay 1's credentials file reaches the collector
        db = str(root / "fleet.sqlite")
        col = Collector([url], db, client_id="central-1", credentials=root / "central.cred",
                        ca_file=ca)  # fmt: skip
        up = Uplink(
            UplinkCfg(
                broker=[url], site="s1", bay="bay1", credentials=root / "bay1.cred", ca_file=ca
            ),
            root / "no-journal.sqlite",
            root,
            None,
        )
        threads = [threading.Thread(target=x.run, daemon=True) for x in (col, up)]
        threads[0].start()
        wait_until(col.connected.is_set, 20, "the collector subscribed over TLS")
        threads[1].start()
        store = Store(db)
        wait_until(lambda: store.bays() and store.bays()[0]["birth_ns"], 20, "bay1's birth")
        store.close()

        # bay 1's credential configured as bay 2, over MQTT 5: the broker refuses its birth
        # (0x87), the uplink counts it and keeps running; nothing of it is stored
        rogue = Uplink(
            UplinkCfg(
                broker=[url],
                site="s1",
                bay="bay2",
                credentials=root / "bay1.cred",
                ca_file=ca,
                mqtt5=True,
            ),
            root / "no-journal.sqlite",
            root / "rogue",
            None,
        )
        (root / "rogue").mkdir()
        rt = threading.Thread(target=rogue.run, daemon=True)
        rt.start()
        wait_until(lambda: rogue.counters.refusals, 20, "the publish refused")
        assert any("Not authorized" in k for k in rogue.counters.refusals), rogue.counters
        assert rt.is_alive()
        rogue.stop.set()
        rt.join(10)
        store = Store(db)
        assert [b["controller"] for b in store.bays()] == ["s1/bay1"]
        store.close()

        # a broker whose certificate another CA signed: no connection, no credentials sent
        other, _ = make_ca(root, "other")
        bad = Uplink(
            UplinkCfg(
                broker=[url], site="s1", bay="bay2", credentials=root / "bay2.cred", ca_file=other
            ),
            root / "no-journal.sqlite",
            root / "bad",
            None,
        )
        (root / "bad").mkdir()
        t = threading.Thread(target=bad.run, daemon=True)
        t.start()
        wait_until(lambda: bad.counters.refusals, 20, "the TLS handshake refused")
        bad.stop.set()
        t.join(10)
        assert bad.counters.connects == 0
        assert any("SSL" in k for k in bad.counters.refusals), bad.counters.refusals
        up.stop.set()
        col.stop.set()
        for th in threads:
            th.join(10)
    finally:
        broker.stop()


NATS_ACCOUNTS = """
accounts {
  FLEET: {
    jetstream: enabled
    users: [
      {user: central, password: central-secret},
      {user: bay1, password: bay1-secret, permissions: {
        publish: {allow: ["goosectl.v1.s1.bay1.>", "$MQTT.>"]},
        subscribe: {allow: ["goosectl.v1.s1.bay1.cmd.req", "$MQTT.>"]}}},
    ]
  }
}
"""


def test_bay1_publishing_as_bay2_on_nats_reaches_nobody_and_is_logged(tmp_path: Path) -> None:
    cluster = NatsCluster(tmp_path, NATS_ACCOUNTS)
    cluster.start()
    try:
        cluster.ready({"user": "central", "password": "central-secret"})
        (tmp_path / "central.cred").write_text("central:central-secret\n")
        db = str(tmp_path / "fleet.sqlite")
        col = Collector([cluster.url("n2")], db, client_id="central-nats",
                        credentials=tmp_path / "central.cred")  # fmt: skip
        th = threading.Thread(target=col.run, daemon=True)
        th.start()
        wait_until(col.connected.is_set, 30, "the collector subscribed")
        c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="bay1-rogue")
        c.username_pw_set("bay1", "bay1-secret")
        granted: dict[str, list] = {}
        got: list[str] = []
        c.on_subscribe = lambda cl, u, mid, rcs, p: granted.setdefault("codes", list(rcs))
        c.on_message = lambda cl, u, m: got.append(m.topic)
        c.connect("127.0.0.1", cluster.mqtt["n1"], 10)
        c.loop_start()
        # payloads the collector would store: only the ACL keeps bay 2's out
        for bay in ("bay2", "bay1"):
            c.publish(
                topics.topic("s1", bay, "state"),
                topics.state("s1", bay, 1, None, 0, time.time_ns()),
                qos=1,
            ).wait_for_publish(10)
        wait_until(lambda: _seen(db, "s1/bay1"), 30, "bay 1's own state stored")
        # bay 1's credential asking for bay 2's requests, and its own
        c.subscribe(
            [(topics.topic("s1", "bay2", "cmd/req"), 1), (topics.topic("s1", "bay1", "cmd/req"), 1)]
        )
        wait_until(lambda: granted, 20, "the SUBACK")
        central = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="central-req")
        central.username_pw_set("central", "central-secret")
        central.connect("127.0.0.1", cluster.mqtt["n2"], 10)
        central.loop_start()
        for bay in ("bay2", "bay1"):
            central.publish(topics.topic("s1", bay, "cmd/req"), b"{}", qos=1).wait_for_publish(10)
        wait_until(lambda: got, 20, "bay 1's own request delivered")
        time.sleep(1)
        stop_loop(central)
        central.disconnect()
        stop_loop(c)
        c.disconnect()
        col.stop.set()
        th.join(10)
        # the subscription to bay 2's cmd/req refused in the SUBACK (0x80), its own granted
        codes = [getattr(rc, "value", rc) for rc in granted["codes"]]
        assert codes[0] == 0x80 and codes[1] in (0, 1), codes
        assert got == [topics.topic("s1", "bay1", "cmd/req")], got
        assert not _seen(db, "s1/bay2")  # nothing of the foreign publish got through
        log = cluster.log("n1")
        assert "Publish Violation" in log and "goosectl.v1.s1.bay2.state" in log, log[-2000:]
        assert "Subscription Violation" in log and "goosectl.v1.s1.bay2.cmd.req" in log, log[-2000:]
    finally:
        cluster.stop()


def _seen(db: str, controller: str) -> bool:
    store = Store(db)
    try:
        return any(b["controller"] == controller for b in store.bays())
    finally:
        store.close()


def test_mqtts_on_the_nats_cluster_verifies_the_broker_and_refuses_another_ca(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """NATS's MQTT listeners with TLS (the test CA's certificate for 127.0.0.1): the uplink
    and the collector verify it and the bay's rows arrive; an uplink given another CA is
    refused at the handshake with a reason that says so, and never connects."""
    ca = make_ca(tmp_path)
    cluster = NatsCluster(tmp_path, tls=make_server_cert(tmp_path, ca))
    cluster.start()
    try:
        cluster.ready(ca_file=ca[0])
        url = cluster.url("n1")
        assert url.startswith("mqtts://")
        db = str(tmp_path / "fleet.sqlite")
        col = Collector([cluster.url("n2")], db, client_id="central-tls", ca_file=ca[0])
        up = Uplink(
            UplinkCfg(broker=[url], site="s1", bay="bay1", ca_file=ca[0]),
            tmp_path / "no-journal.sqlite",
            tmp_path,
            None,
        )
        threads = [threading.Thread(target=x.run, daemon=True) for x in (col, up)]
        threads[0].start()
        wait_until(col.connected.is_set, 30, "the collector subscribed over TLS")
        threads[1].start()
        wait_until(lambda: _seen(db, "s1/bay1"), 30, "bay 1's birth stored over TLS")
        assert up.counters.connects >= 1

        other, _ = make_ca(tmp_path, "other")
        (tmp_path / "bad").mkdir()
        bad = Uplink(
            UplinkCfg(broker=[url], site="s1", bay="bay2", ca_file=other),
            tmp_path / "no-journal.sqlite",
            tmp_path / "bad",
            None,
        )
        with caplog.at_level(logging.WARNING, logger="goosectl.controller.fleet"):
            t = threading.Thread(target=bad.run, daemon=True)
            t.start()
            wait_until(lambda: bad.counters.refusals, 30, "the TLS handshake refused")
            bad.stop.set()
            t.join(10)
        assert bad.counters.connects == 0
        assert "connect: SSLCertVerificationError" in bad.counters.refusals
        said = bad.counters.last_error
        assert "certificate is not trusted (unable to get local issuer certificate" in said
        assert str(other) in said and "no credentials were sent" in said, said
        assert said in caplog.text
        up.stop.set()
        col.stop.set()
        for th in threads:
            th.join(10)
        assert not _seen(db, "s1/bay2")
    finally:
        cluster.stop()
