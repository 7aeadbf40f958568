"""IEC 62351-6 on real frames: `goosectl run`'s live shell over a veth pair, the protection
trip subscribed with `auth: required`. A test peer in the other namespace publishes the
trip stream signed (goosectl's own publisher, key 7) and sends forgeries of a trip built as
a forger would (the right addresses, APPID, gocbRef, confRev and the next stNum): none of
them trips the breaker, each is counted under its reason; the genuine signed trip trips.
Needs root.
"""

from __future__ import annotations

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

PEER = """
import sys, time
from tests.gates.peer import GOOD, serve, substation
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import load_keys
from goosectl.controller.demo.scenario import CILO, PROT, SCADA, publishers_config
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import Boolean, decode_frame, encode_frame
from goosectl.protocols.goose.security import ALGORITHMS, PROFILES, MacKey, parse, sign
from tests.gates.bay import ready_for_scada, sayer, wait_until

iface, keyfile = sys.argv[1], sys.argv[2]
keys = load_keys(keyfile)
pubs = [p for p in publishers_config().publishers if p.name in ("prot-A", CILO, SCADA)]
pubs = [p.model_copy(update={"auth": "sign", "key_id": 7}) if p.gocb_ref == PROT else p
        for p in pubs]
hub = GooseHub(GooseConfig(publishers=pubs), keys=keys)
hub.set_utc_offset(time.time_ns() - time.monotonic_ns())
sock = RawSocket(iface, timestamps=False)
last = {}
PROFILE = PROFILES["length-crc"]

def send(effects):
    for e in effects:
        if hasattr(e, "data"):
            sock.send(e.data)
            last[e.gocb_ref] = e.data

def forged(kind):
    genuine = last[PROT]
    ext = parse(genuine, PROFILE)
    f = decode_frame(ext.unsigned)
    trip = encode_frame(type(f)(**{**{k: getattr(f, k) for k in f.__dataclass_fields__},
                                   "st_num": f.st_num + 1, "sq_num": 0,
                                   "all_data": (Boolean(True), GOOD), "trailer": b""}))
    hmac = ALGORITHMS["hmac-sha256-128"]
    if kind == "unsigned":
        return trip
    if kind == "unknown_key":
        return sign(trip, MacKey(8, hmac, bytes(32)), PROFILE)
    if kind == "expired_key":
        return sign(trip, MacKey(9, hmac, bytes(32)), PROFILE)
    if kind == "bad_mac":
        return sign(trip, MacKey(7, hmac, bytes(32)), PROFILE)
    if kind == "flipped":  # the genuine frame with its trip member set: the MAC is stale
        b = bytearray(genuine)
        i = b.rindex(bytes.fromhex("830100"))  # allData's first member, boolean FALSE
        b[i + 2] = 1
        return bytes(b)
    if kind == "malformed":
        return genuine[:-5]
    raise ValueError(kind)

on = substation(hub, send)
on["forge"] = lambda a, now, utc: sock.send(forged(a[0]))
serve(hub, send, on)
"""


def _config(keys: Path) -> object:
    from goosectl.controller.config.bay import ControllerConfig

    return ControllerConfig.model_validate(trip_signed(keys))


@pytest.mark.parametrize("reflex", [True, False], ids=["as-shipped", "no-reflex"])
def test_run_with_auth_required_trips_on_the_signed_trip_only(tmp_path, reflex):
    """As `run` ships (the trip reflex on) and with `--no-reflex`: the forgeries move
    nothing, judged by the device's own books (a TRIP written by the reflex ahead of the
    engine would open the breaker while the engine refused the frame)."""
    require_root()
    from goosectl.controller.config.keys import load_keys
    from goosectl.controller.demo.live import DeviceThread
    from goosectl.controller.logic.core import BayController
    from goosectl.controller.logic.effects import DeviceCommand
    from goosectl.controller.shell.keys import KeyService
    from goosectl.controller.shell.live_bay import BayLive

    now = time.time_ns()
    keys = write_keys(
        tmp_path,
        [
            {"key_id": 7, "algorithm": "hmac-sha256-128", "secret": SECRET,
             "not_before": now - 3600 * S, "not_after": now + 3600 * S},
            {"key_id": 9, "algorithm": "hmac-sha256-128", "secret": bytes(32),
             "not_before": now - 7200 * S, "not_after": now - 3600 * S},
        ],
    )  # fmt: skip
    cfg = _config(keys)
    with netlab() as lab:
        sub, ctl = lab.namespace(), lab.namespace()
        lab.veth(sub, ctl, a="net0", b="net0")
        device = DeviceThread(spring_ms=300)
        device.start()
        effects: list = []
        bay = BayController(cfg, time.monotonic_ns(), None, load_keys(keys))
        with ctl.entered():
            live = BayLive(bay, "net0", None, device.path, status_every=False, reflex=reflex)
        live.on_effects = effects.extend
        service = KeyService(bay.hub, str(keys))
        service.start()
        live.live.on_round.append(service.tick)
        loop = threading.Thread(target=live.run)
        loop.start()
        peer = sub.popen(
            [sys.executable, "-u", "-c", PEER, "net0", str(keys)],
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
            kinds = ["unsigned", "unknown_key", "expired_key", "bad_mac", "flipped", "malformed"]
            for kind in kinds:
                say(f"forge {kind}")
            forged_state = bay.bay.state
            forged_device = dict(device.shell.fw.stats.executed)
            counts = dict(bay.hub.counters()["auth"]["prot"]["counts"])
            if reflex:  # keep-warm as shipped: the signed candidate rehearsed, MAC zeroed
                rehearsed = live.core.reflex.counts  # type: ignore[union-attr]
                wait("rehearse the armed path", lambda: rehearsed()["rehearsed"] >= 20)
            say("trip 1")
            wait("open the breaker", lambda: bay.bay.state == "open")
            if reflex:  # the forgeries did not put the genuine trip on the engine's path
                assert live.core.reflex.counts()["fired"] == 1  # type: ignore[union-attr]
        finally:
            if peer.poll() is None:
                peer.stdin.close()
                peer.wait(timeout=30)
            live.stop()
            loop.join(timeout=30)
            device.stop()
    assert forged_state == "closed"
    assert "TRIP" not in forged_device, forged_device
    assert device.shell.fw.stats.executed["TRIP"] == 1
    trips = [e for e in effects if type(e) is DeviceCommand and e.command == "trip"]
    assert len(trips) == 1
    assert counts["unsigned"] == 1
    assert counts["unknown_key"] == 1
    assert counts["expired_key"] == 1
    assert counts["bad_mac"] == 2  # the wrong secret, and the flipped genuine frame
    assert counts["bad_extension"] == 1
    assert counts["verified"] > 3
