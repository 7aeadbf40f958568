"""The receive rules on real frames: veth pairs in namespaces this test creates (and always
removes), libiec61850 publishing where it can set the field (confRev, ndsCom, simulation,
the data set's shape and quality), goosectl's own codec where it cannot (the S-bit, a
second source MAC for the same gocbRef). Needs root.

1. `goosectl listen --json`: each rule refuses what it should, with its reason, and the
   "lgos" events say when the subscription stops and starts being valid.
2. `goosectl run`'s live shell with the breaker simulator on a pty: a trip with Tr.q
   invalid, with the test bit, or simulated never trips; `goosectl mode test` over the
   control socket makes the test trip act; `goosectl status` shows the LGOS; the frames the
   controller publishes carry its interface's MAC and the host clock's time quality.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from controller.runtime.netns import netlab
from tests.support.peers import require_iec61850, require_root

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
GOCB = "PROT1LD0/LLN0$GO$trip"
DST = "01:0c:cd:01:00:01"

PEER = """
import sys, time
from controller.runtime.iec61850_peer import Publisher
from controller.runtime.goose_live import interface_mac
from protocols.ethernet.rawsock import RawSocket
from protocols.goose import Boolean, BitString, GooseFrame, UtcTime, encode_frame

iface = sys.argv[1]
common = dict(appid=0x1001, dst=bytes.fromhex("010ccd010001"), use_vlan=False,
              gocb_ref="PROT1LD0/LLN0$GO$trip", dataset="PROT1LD0/LLN0$dstrip", go_id="trip",
              tal_ms=2000)
GOOD = {"type": "bit-string", "bits": "0000000000000"}

def vals(v, extra=False):
    out = [{"type": "boolean", "value": v}, GOOD]
    return out + [GOOD] if extra else out

def once(st, sq, v, extra=False, **kw):
    p = Publisher(iface, **common, **kw)
    p.set_numbers(st, sq)
    p.publish(vals(v, extra))
    p.close()
    time.sleep(0.05)

real = Publisher(iface, **common)
def send(st, sq, v, extra=False):
    real.set_numbers(st, sq)
    real.publish(vals(v, extra))
    time.sleep(0.05)

send(1, 0, False); send(1, 1, False)        # valid: first, retransmission
once(2, 0, True, conf_rev=2)                 # confRev + 1: refused
send(3, 0, False)                            # valid again
once(4, 0, True, nds_com=True)               # ndsCom: refused
send(5, 0, False)
once(1, 0, True, simulation=True)            # simulated (libiec61850 sets the field only)
send(5, 1, False)                            # the real stream is undisturbed
send(6, 0, True, extra=True)                 # a member too many: refused
send(7, 0, False)
# what libiec61850 cannot do: the S-bit alone, and a second source for the gocbRef
sock = RawSocket(iface, timestamps=False)
def ours(st, sq, src, s_bit):
    sock.send(encode_frame(GooseFrame(
        gocb_ref=common["gocb_ref"], dat_set=common["dataset"], go_id="trip",
        all_data=(Boolean(True), BitString.from_bits("0000000000000")),
        time_allowed_to_live=2000, t=UtcTime(1_800_000_000 + st, 0, 0x0A), st_num=st,
        sq_num=sq, dst=common["dst"], src=src, appid=0x1001,
        reserved1=0x8000 if s_bit else 0)))
    time.sleep(0.05)
mine = interface_mac(sock)  # the simulated stream's source, as libiec61850 sent it
ours(2, 0, mine, True)                              # S-bit, simulation FALSE: refused
ours(8, 0, bytes.fromhex("020000000bad"), False)    # another MAC: foreign_source
send(7, 1, False)
real.close()
"""


def listen(ns, iface: str, cfg: Path, seconds: float) -> subprocess.Popen:
    proc = ns.popen(
        [sys.executable, "-u", "-m", "controller", "listen", "--iface", iface, "--config",
         str(cfg), "--json", "--duration", str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    first = proc.stdout.readline()
    assert json.loads(first)["event"] == "listening", first + proc.stderr.read()
    return proc


def test_listen_refuses_each_rule_and_reports_lgos_changes(tmp_path):
    require_root()
    require_iec61850()
    cfg = tmp_path / "sub.yaml"
    cfg.write_text(
        "subscriptions:\n"
        f"  - {{name: prot, gocb_ref: '{GOCB}', appid: 0x1001, dst: '{DST}',\n"
        "     members: [boolean, bit-string/13]}\n"
    )
    with netlab() as lab:
        pub, sub = lab.namespace(), lab.namespace()
        v = lab.veth(pub, sub)
        proc = listen(sub, v.b, cfg, seconds=4.0)
        pub.python(PEER, v.a)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        mac = ":".join(f"{b:02x}" for b in pub.mac(v.a))
    lines = [json.loads(x) for x in out.splitlines()]
    frames = [
        (x["stNum"], x["class"], x.get("refused"))
        for x in lines
        if "frame" in x and x.get("gocbRef") == GOCB
    ]
    assert frames == [
        (1, "first", None),
        (1, "retransmission", None),
        (2, "new_state", "confrev"),
        (3, "new_state", None),
        (4, "new_state", "ndscom"),
        (5, "new_state", None),
        (1, "first", "simulation"),  # the simulated stream: its own sequence numbers
        (5, "retransmission", None),
        (6, "new_state", "shape"),
        (7, "new_state", None),
        (2, "new_state", "simulation"),  # the S-bit alone marks a simulated frame too
        (8, "foreign_source", "foreign_source"),
        (7, "retransmission", None),
    ]
    lgos = [(x["St"], x["ErrSt"]) for x in lines if x.get("event") == "lgos"]
    assert lgos == [
        (True, "none"),
        (False, "confrev"),
        (True, "none"),
        (False, "ndscom"),
        (True, "none"),
        (False, "shape"),
        (True, "none"),
        (False, "lost"),  # the publisher stopped: 2 s (its TAL) later
    ]
    last = [x for x in lines if x.get("event") == "lgos"][-1]
    assert last["src"] == mac and last["ConfRevNum"] == 1 and last["LastStNum"] == 7
    counters = lines[-1]
    (stream,) = counters["streams"].values()
    assert stream["lgos"]["refused"] == {
        "confrev": 1,
        "ndscom": 1,
        "shape": 1,
        "simulation": 2,
        "foreign_source": 1,
    }


SUBSTATION = """
import select, sys, time
from controller.goose.config import GooseConfig
from controller.goose.hub import GooseHub
from controller.runtime.iec61850_peer import Publisher
from controller.runtime.scenario import CILO, SCADA, publishers_config
from protocols.ethernet.rawsock import RawSocket
from protocols.goose import Boolean, parse_header

iface = sys.argv[1]
common = dict(appid=0x1001, dst=bytes.fromhex("010ccd010001"), vlan_id=10, vlan_prio=6,
              gocb_ref="PROT1LD0/LLN0$GO$trip", dataset="PROT1LD0/LLN0$dstrip", go_id="PROT1",
              tal_ms=2000)
Q = {"good": "0000000000000", "invalid": "0100000000000", "test": "0000000000010"}
prot = Publisher(iface, **common)
sock = RawSocket(iface, timestamps=False, promiscuous=True)
hub = GooseHub(GooseConfig(publishers=[p for p in publishers_config().publishers
                                       if p.gocb_ref in (CILO, SCADA)]))
seen = {}

def send(effects):
    for e in effects:
        if hasattr(e, "data"):
            sock.send(e.data)

def values(value, q):
    return [{"type": "boolean", "value": value}, {"type": "bit-string", "bits": Q[q]}]

current = values(False, "good")

def trip(value, q="good"):
    global current
    current = values(value, q)
    prot.new_state()
    prot.publish(current)

def scada(value):
    hub.runner.feed(f"pub:{SCADA}", "publish", time.monotonic_ns(),
                    ((Boolean(value),), time.time_ns()))
    send(hub.drain())

def sim(value):
    p = Publisher(iface, **common, simulation=True)
    p.set_numbers(1, 0)
    p.publish(values(value, "good"))
    p.close()

# (seconds from the start, or from "go" on stdin for the second part, action)
first = [
    (0.5, lambda: scada(True)), (0.7, lambda: scada(False)),           # close
    (1.5, lambda: trip(True, "invalid")), (1.8, lambda: trip(False)),  # refused: q invalid
    (2.1, lambda: trip(True, "test")), (2.4, lambda: trip(False)),     # refused: mode on
    (2.7, lambda: sim(True)),                                          # refused: simulated
]
second = [(0.2, lambda: trip(True, "test")), (0.5, lambda: trip(False, "test"))]  # acts

send(hub.start(time.monotonic_ns(), time.time_ns()))
prot.publish(current)
t0 = last = time.monotonic()
script, phase = first, 1
print("ready", flush=True)
while True:
    now = time.monotonic()
    if script and now - t0 >= script[0][0]:
        script.pop(0)[1]()
        last = now
        if not script:
            print(f"phase {phase} done", flush=True)
    if now - last >= 0.5:  # libiec61850 retransmissions: the application paces them
        prot.publish(current)
        last = now
    d = hub.next_deadline()
    if d is not None and d <= time.monotonic_ns():
        send(hub.advance(time.monotonic_ns()))
    for f in sock.recv_batch():
        h = parse_header(f.frame)
        if h.gocb_ref.startswith("GCTL1"):
            seen[(h.src.hex(), h.t.quality)] = seen.get((h.src.hex(), h.t.quality), 0) + 1
    if select.select([sys.stdin], [], [], 0.001)[0]:
        line = sys.stdin.readline()
        if line.strip() == "go":
            script, phase, t0 = second, 2, time.monotonic()
        else:
            break  # stdin closed: the test is done
prot.close()
print(repr(seen), flush=True)
"""


def test_run_acts_only_on_what_the_rules_let_through_and_switches_mode_live(tmp_path):
    require_root()
    require_iec61850()
    from controller.configfile import load_config
    from controller.logic.config import DEFAULT_CONFIG, ControllerConfig
    from controller.logic.core import BayController
    from controller.logic.effects import CommandWithheld, DeviceCommand, InputChanged
    from controller.runtime.control import ControlServer, controller_ops
    from controller.runtime.demo_live import DeviceThread
    from controller.runtime.hostclock import host_time_quality
    from controller.runtime.live_bay import BayLive

    cfg = load_config(DEFAULT_CONFIG, ControllerConfig)
    sock = tmp_path / "ctl.sock"
    effects: list = []
    device = DeviceThread(spring_ms=300)
    with netlab() as lab:
        sub, ctl = lab.namespace(), lab.namespace()
        v = lab.veth(sub, ctl, a="net0", b="net0")
        ctl_mac = ctl.mac("net0").hex()
        device.start()
        try:
            bay = BayController(cfg, time.monotonic_ns())
            with ctl.entered():
                live = BayLive(bay, "net0", None, device.path, status_every=False)
            live.on_effects = effects.extend
            server = ControlServer(sock, controller_ops(bay, lambda r, n: {"ok": False}))
            server.attach(live.live.add_reader, live.live.remove_reader)
            loop = threading.Thread(target=live.run)
            loop.start()
            peer = sub.popen(
                [sys.executable, "-u", "-c", SUBSTATION, v.a],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                assert peer.stdout.readline().strip() == "ready", peer.stderr.read()
                assert peer.stdout.readline().strip() == "phase 1 done"
                time.sleep(0.2)  # the last frames of phase 1 are handled
                mode = goosectl("mode", "test", "--control", str(sock))
                peer.stdin.write("go\n")
                peer.stdin.flush()
                assert peer.stdout.readline().strip() == "phase 2 done"
                time.sleep(0.3)  # the breaker opens (10 ms), its position is published
                status = goosectl("status", "--json", "--control", str(sock))
                peer.stdin.close()  # the peer stops and prints what it saw
                peer.wait(timeout=30)
                out, err = peer.stdout.read(), peer.stderr.read()
            finally:
                live.stop()
                loop.join(timeout=30)
                server.close()
        finally:
            device.stop()
    trips = [e for e in effects if type(e) is DeviceCommand and e.command == "trip"]
    assert len(trips) == 1, [e for e in effects if type(e) in (DeviceCommand, InputChanged)]
    assert not [e for e in effects if type(e) is CommandWithheld]
    reasons = [e.reason for e in effects if type(e) is InputChanged and not e.valid]
    assert [r for r in reasons if r.startswith("q ")] == ["q invalid", "q test"], reasons
    assert json.loads(mode.stdout) == {
        "ok": True,
        "mode": "test",
        "simulation": False,
        "changed": ["mode"],
    }
    reply = json.loads(status.stdout)
    prot = next(x for x in reply["lgos"] if x["stream"] == "prot")
    assert prot["St"] and prot["refused"] == {"simulation": 1}
    assert reply["mode"] == "test" and reply["breaker"] == "open"
    # the controller's frames: from its interface's MAC, `t` saying what the clock is worth
    seen = eval(out.strip().splitlines()[-1])  # the peer's own repr
    assert {src for src, _ in seen} == {ctl_mac}, (seen, err)
    assert {q for _, q in seen} == {host_time_quality()}


def goosectl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
