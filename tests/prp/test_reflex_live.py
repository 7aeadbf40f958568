"""`run`'s shell with native PRP on two veth pairs (root), the trip reflex on as shipped:
a protection IED sends every frame on LAN A and LAN B with a trailer (the tests' own
sender's, `tests/support/prp_sender.py`); its trip opens the breaker through one TRIP
the reflex wrote before the LRE saw the frame, LAN B's copy is dropped, and the LRE's
counters are those of a frame counted after the TRIP as before it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
import yaml

from goosectl.lab.netns import netlab
from tests.gates.bay import ready_for_scada, sayer, wait_until
from tests.support.peers import require_root

pytestmark = pytest.mark.root

PEER = """
import sys, time
from tests.gates.peer import GOOD, serve, substation
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.demo.scenario import CILO, PROT, SCADA, publishers_config
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import Boolean
from tests.support.prp_sender import LAN_ID, trailer

pubs = [p for p in publishers_config().publishers if p.name in ("prot-A", CILO, SCADA)]
hub = GooseHub(GooseConfig(publishers=pubs))
hub.set_utc_offset(time.time_ns() - time.monotonic_ns())
socks = {side: RawSocket(iface, timestamps=False) for side, iface in (("A", "ta"), ("B", "tb"))}
seq = 0

def send(effects, gap_s=0.0):
    global seq
    for e in effects:
        if hasattr(e, "data"):
            socks["A"].send(trailer(e.data, seq, LAN_ID["A"]))
            if gap_s:
                time.sleep(gap_s)
            socks["B"].send(trailer(e.data, seq, LAN_ID["B"]))
            seq = (seq + 1) & 0xFFFF

on = substation(hub, send)
# the trip: LAN A's copy first, LAN B's 5 ms later
on["trip"] = lambda a, now, utc: send(
    hub.publish(PROT, (Boolean(a[0] == "1"), GOOD), now, utc), 0.005)
serve(hub, send, on)
"""


def test_a_trailed_trip_fires_the_reflex_before_the_lre_and_trips_once():
    """The breaker opens on the IED's trailed trip: the device executed one TRIP, written
    by the reflex (fired once, no disagreement); the LRE took every copy of both LANs,
    found no error and dropped LAN B's copies as duplicates."""
    require_root()
    from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
    from goosectl.controller.config.prp import PrpCfg
    from goosectl.controller.demo.live import DeviceThread
    from goosectl.controller.logic.core import BayController
    from goosectl.controller.shell.live_bay import BayLive
    from goosectl.controller.shell.prp_live import attach

    cfg = ControllerConfig.model_validate(yaml.safe_load(DEFAULT_CONFIG.read_text()))
    with netlab() as lab:
        left, right = lab.namespace(), lab.namespace()
        lab.veth(left, right, a="ta", b="ra")
        lab.veth(left, right, a="tb", b="rb")
        device = DeviceThread(spring_ms=300)
        device.start()
        bay = BayController(cfg, time.monotonic_ns(), None)
        with right.entered():
            live = BayLive(bay, "ra", "rb", device.path, status_every=False, reflex=True)
            prp = attach(live.live, PrpCfg(mode="native"))
        assert prp is not None and live.live.before_lre is not None
        reflex = live.core.reflex
        assert reflex is not None
        loop = threading.Thread(target=live.run)
        loop.start()
        peer = left.popen(
            [sys.executable, "-u", "-c", PEER],
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
            wait("arm the reflex", lambda: any(a is not None for a in reflex.armings))
            # keep-warm as shipped: the idle loop rehearses the armed path, writing nothing
            wait("rehearse the armed path", lambda: reflex.rehearsed >= 20, reflex.counts)
            say("trip 1")
            wait("open the breaker", lambda: bay.bay.state == "open", reflex.counts)
        finally:
            if peer.poll() is None:
                peer.stdin.close()
                peer.wait(timeout=30)
            live.stop()
            loop.join(timeout=30)
            device.stop()
        counts = prp.lre.counts
        prp.lre.settle()
        settled = prp.lre.counts
    assert device.shell.fw.stats.executed["TRIP"] == 1
    assert reflex.fired == reflex.fired_before_lre == 1, reflex.counts()
    assert reflex.disagreed == 0, reflex.counts()
    assert counts["lreCntRxA"] == counts["lreCntRxB"] > 0, counts
    assert counts["lreCntErrorsA"] == counts["lreCntErrorsB"] == 0, counts
    assert counts["lreCntErrWrongLanA"] == counts["lreCntErrWrongLanB"] == 0, counts
    assert settled["lreCntDuplicateA"] + settled["lreCntDuplicateB"] == counts["lreCntRxA"]
