"""R-GOOSE live: `goosectl run`'s shell with the protection trip subscribed over UDP
multicast on a veth pair (`rgoose:`, `auth: required`), and `listen --rgoose` /
`publish --rgoose` over unicast on loopback. goosectl's own publisher machine and R-GOOSE
sender publish the signed trip from the other namespace; forged SPDUs (unsecured, the
wrong key material, a replay of the genuine trip) do not trip the breaker. Needs root.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from goosectl.lab.netns import netlab
from tests.gates.bay import ready_for_scada, sayer, trip_signed, wait_until
from tests.goose.keyfiles import S, write_keys
from tests.support.peers import require_root

pytestmark = pytest.mark.root

SECRET = bytes(range(1, 33))
GROUP, PORT = "239.192.0.7", 102

PEER = """
import socket, sys, time
from tests.gates.peer import GOOD, serve, substation
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import load_keys
from goosectl.controller.demo.scenario import CILO, PROT, SCADA, publishers_config
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.shell.rgoose_live import RgoosePublisher, open_socket
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import Boolean, decode_frame, encode_frame
from goosectl.protocols.goose.security import ALGORITHMS, MacKey
from goosectl.protocols.rgoose import apdu_of_frame, encode

iface, keyfile, group, port, local = sys.argv[1:6]
keys = load_keys(keyfile)
pubs = [p for p in publishers_config().publishers if p.name in ("prot-A", CILO, SCADA)]
hub = GooseHub(GooseConfig(publishers=pubs), keys=keys)
raw = RawSocket(iface, timestamps=False)
udp = open_socket("0.0.0.0", 0, (), local)
rgoose = RgoosePublisher(udp, (group, int(port)), keys.keys[7])
last = {}

def send(effects):
    for e in effects:
        if not hasattr(e, "data"):
            continue
        if e.gocb_ref == PROT:  # the protection stream goes out as R-GOOSE only
            rgoose(e, 0)
        else:
            raw.send(e.data)
        last[e.gocb_ref] = e.data

def forged(kind):
    f = decode_frame(last[PROT])
    trip = encode_frame(type(f)(**{**{k: getattr(f, k) for k in f.__dataclass_fields__},
                                   "st_num": f.st_num + 1, "sq_num": 0,
                                   "all_data": (Boolean(True), GOOD), "trailer": b""}))
    apdu = apdu_of_frame(trip)
    number = max(rgoose.streams[apdu.appid].number + 1000, 1)
    if kind == "unsigned":
        return encode([apdu], number)
    if kind == "bad_mac":
        return encode([apdu], number, key=MacKey(7, ALGORITHMS["hmac-sha256-128"], bytes(32)))
    raise ValueError(kind)

on = substation(hub, send)
def trip(a, now, utc):
    on_trip(a, now, utc)
    last["trip_spdu"] = rgoose.last
on_trip, on["trip"] = on["trip"], trip
on["forge"] = lambda a, now, utc: udp.sendto(forged(a[0]), (group, int(port)))
on["replay"] = lambda a, now, utc: udp.sendto(last["trip_spdu"], (group, int(port)))
serve(hub, send, on)
"""


def _config(keys: Path, iface_addr: str) -> object:
    from goosectl.controller.config.bay import ControllerConfig

    rgoose = {"address": GROUP, "port": PORT, "iface": iface_addr}
    data = trip_signed(keys, rgoose=rgoose, ab=None)  # one transport, one side
    return ControllerConfig.model_validate(data)


def _keys(tmp: Path) -> Path:
    now = time.time_ns()
    window = {"not_before": now - 3600 * S, "not_after": now + 3600 * S}
    return write_keys(
        tmp, [{"key_id": 7, "algorithm": "hmac-sha256-128", "secret": SECRET, **window}]
    )


@pytest.mark.parametrize("reflex", [True, False], ids=["as-shipped", "no-reflex"])
def test_run_trips_on_a_signed_rgoose_trip_only(tmp_path, reflex):
    """As `run` ships (the trip reflex on) and with `--no-reflex`; the forgeries and the
    replay judged by the device's own books too."""
    require_root()
    from goosectl.controller.config.keys import load_keys
    from goosectl.controller.demo.live import DeviceThread
    from goosectl.controller.logic.core import BayController
    from goosectl.controller.logic.effects import DeviceCommand
    from goosectl.controller.shell.live_bay import BayLive
    from goosectl.controller.shell.rgoose_live import attach_subscriptions

    keys = _keys(tmp_path)
    cfg = _config(keys, "10.77.0.2")
    with netlab() as lab:
        sub, ctl = lab.namespace(), lab.namespace()
        lab.veth(sub, ctl, a="net0", b="net0")
        sub.ip("addr", "add", "10.77.0.1/24", "dev", "net0")
        ctl.ip("addr", "add", "10.77.0.2/24", "dev", "net0")
        device = DeviceThread(spring_ms=300)
        device.start()
        effects: list = []
        bay = BayController(cfg, time.monotonic_ns(), None, load_keys(keys))
        with ctl.entered():
            live = BayLive(bay, "net0", None, device.path, status_every=False, reflex=reflex)
            listeners = attach_subscriptions(live.live, cfg.goose.subscriptions, load_keys(keys))
        live.on_effects = effects.extend
        loop = threading.Thread(target=live.run)
        loop.start()
        peer = sub.popen(
            [sys.executable, "-u", "-c", PEER, "net0", str(keys), GROUP, str(PORT), "10.77.0.1"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

        say, wait = sayer(peer), wait_until

        try:
            assert peer.stdout.readline().strip() == "ready", peer.stderr.read()
            wait("learn the breaker is open", lambda: ready_for_scada(bay))
            say("scada 1")
            wait("close the breaker", lambda: bay.bay.state == "closed", bay.hub.counters)
            say("scada 0")
            for kind in ("unsigned", "bad_mac"):
                say(f"forge {kind}")
            forged_state = bay.bay.state
            counts = dict(bay.hub.counters()["auth"]["prot"]["counts"])
            say("trip 1")
            wait("open the breaker", lambda: bay.bay.state == "open")
            tripped = len([e for e in effects if type(e) is DeviceCommand and e.command == "trip"])
            say("replay")
            replays = listeners[0].receiver.counters().get("spdu_replay", 0)
        finally:
            if peer.poll() is None:
                peer.stdin.close()
                peer.wait(timeout=30)
            live.stop()
            loop.join(timeout=30)
            for lst in listeners:
                lst.close()
            device.stop()
    assert forged_state == "closed"
    assert device.shell.fw.stats.executed["TRIP"] == 1  # the genuine trip, not the replay
    assert counts["unsigned"] == 1 and counts["bad_mac"] == 1
    assert counts["verified"] > 3  # the stream's heartbeats came over R-GOOSE, verified
    assert tripped == 1
    trips = [e for e in effects if type(e) is DeviceCommand and e.command == "trip"]
    assert len(trips) == 1  # the replayed trip did nothing
    assert replays == 1


def test_listen_and_publish_rgoose_over_unicast_loopback(tmp_path):
    require_root()
    keys = _keys(tmp_path)
    with netlab() as lab:
        ns = lab.namespace()
        ns.ip("link", "set", "lo", "up")
        listen = ns.popen(
            [sys.executable, "-m", "goosectl", "listen", "--rgoose", "127.0.0.1:102",
             "--keys", str(keys), "--json", "--duration", "4"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert '"listening"' in listen.stdout.readline()
        pub = ns.popen(
            [sys.executable, "-m", "goosectl", "publish", "--rgoose", "127.0.0.1",
             "--keys", str(keys), "--key-id", "7", "--gocbref", "IED1LD0/LLN0$GO$trip",
             "--appid", "0x1010", "--dst", "01:0c:cd:01:00:10", "--max-time", "200",
             "--duration", "2",
             "--values", '[{"type":"boolean","value":false}]'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        out, err = pub.communicate('[{"type":"boolean","value":true}]\n', timeout=30)
        lines, _ = listen.communicate(timeout=30)
    done = json.loads(out.splitlines()[-1])
    assert done["rgoose"]["sent"] >= 5, err
    got = [json.loads(x) for x in lines.splitlines()]
    frames = [x for x in got if "frame" in x]
    assert frames[0]["allData"][0]["value"] is False and frames[0]["class"] == "first"
    assert any(x["allData"][0]["value"] is True and x["class"] == "new_state" for x in frames)
    assert {x["auth"]["status"] for x in frames} == {"verified"}
    (rg,) = [x for x in got if x.get("event") == "rgoose"]
    assert rg["counts"]["spdus"] == len(frames) == done["rgoose"]["sent"]
