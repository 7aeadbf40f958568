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
from functools import partial
from pathlib import Path

import pytest

from goosectl.lab.netns import netlab
from tests.gates.bay import ready_for_scada
from tests.support import procs
from tests.support.peers import require_iec61850, require_root

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
goosectl = partial(procs.goosectl, timeout=60)
GOCB = "PROT1LD0/LLN0$GO$trip"
DST = "01:0c:cd:01:00:01"

PEER = """
import sys, time
from goosectl.lab.iec61850_peer import Publisher
from goosectl.controller.shell.goose_live import interface_mac
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import Boolean, BitString, GooseFrame, UtcTime, encode_frame

iface = sys.argv[1]
common = dict(appid=0x1001, dst=bytes.fromhex("010ccd010001"), use_vlan=False,
              gocb_ref="PROT1LD0/LLN0$GO$trip", dataset="PROT1LD0/LLN0$dstrip", go_id="trip",
              tal_ms=3000)
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
        time_allowed_to_live=3000, t=UtcTime(1_800_000_000 + st, 0, 0x0A), st_num=st,
        sq_num=sq, dst=common["dst"], src=src, appid=0x1001,
        reserved1=0x8000 if s_bit else 0)))
    time.sleep(0.05)
mine = interface_mac(sock)  # the simulated stream's source, as libiec61850 sent it
ours(2, 0, mine, True)                              # S-bit, simulation FALSE: refused
ours(8, 0, bytes.fromhex("020000000bad"), False)    # another MAC: a conflict
send(7, 1, False)
real.close()
"""


def listen(ns, iface: str, cfg: Path) -> subprocess.Popen:
    """`goosectl listen --json` once its sockets are open; SIGTERM stops it."""
    proc = ns.popen(
        [sys.executable, "-u", "-m", "goosectl", "listen", "--iface", iface, "--config",
         str(cfg), "--json"],
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
        proc = listen(sub, v.b, cfg)
        pub.python(PEER, v.a)
        time.sleep(3.5)  # the publisher stopped: its TAL (3 s) expires
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err  # the refusals and the stream lost are anomalies
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
        # no source configured: a second one is a sequence of its own, a conflict
        (8, "first", None),
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
        (False, "conflict"),  # the second source
        (False, "lost"),  # the publisher stopped: 3 s (its TAL) later
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
    }


SUBSTATION = """
import select, sys, time
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.goose.hub import GooseHub
from goosectl.lab.iec61850_peer import Publisher
from goosectl.controller.demo.scenario import CILO, SCADA, publishers_config
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import Boolean, parse_header

iface = sys.argv[1]
common = dict(appid=0x1001, dst=bytes.fromhex("010ccd010001"), vlan_id=10, vlan_prio=6,
              gocb_ref="PROT1LD0/LLN0$GO$trip", dataset="PROT1LD0/LLN0$dstrip", go_id="PROT1",
              tal_ms=2000)
Q = {"good": "0000000000000", "invalid": "0100000000000", "test": "0000000000010"}
sock = RawSocket(iface, timestamps=False, promiscuous=True)
hub = GooseHub(GooseConfig(publishers=[p for p in publishers_config().publishers
                                       if p.gocb_ref in (CILO, SCADA)]))

def values(value, q):
    return [{"type": "boolean", "value": value}, {"type": "bit-string", "bits": Q[q]}]

# the protection IED and a test set simulating it (libiec61850 both; the application paces
# their retransmissions): [publisher, current values, last sent]
ieds = {"trip": [Publisher(iface, **common), values(False, "good"), 0.0]}
seen, counted = {}, 0
frames = []  # (gocbRef, stNum, sqNum) of every controller frame, in arrival order

def send(effects):
    for e in effects:
        if hasattr(e, "data"):
            sock.send(e.data)

def publish(name, value, q):
    if name not in ieds:
        ieds[name] = [Publisher(iface, **common, simulation=True), None, 0.0]
    else:
        ieds[name][0].new_state()
    ieds[name][1] = values(value == "1", q)
    ieds[name][0].publish(ieds[name][1])
    ieds[name][2] = time.monotonic()

def command(words):
    global counted
    if words[0] == "scada":
        hub.scheduler.feed(f"pub:{SCADA}", "publish", time.monotonic_ns(),
                        ((Boolean(words[1] == "1"),), time.time_ns()))
        send(hub.drain())
    elif words[0] in ("trip", "sim"):
        publish(words[0], words[1], words[2] if len(words) > 2 else "good")
    elif words[0] == "count":  # the controller's frames since the last count
        n, counted = sum(seen.values()) - counted, sum(seen.values())
        return f"count {n}"
    elif words[0] == "seen":
        return repr(seen)
    elif words[0] == "frames":
        return repr(frames)
    return "ok"

send(hub.start(time.monotonic_ns(), time.time_ns()))
ieds["trip"][0].publish(ieds["trip"][1])
print("ready", flush=True)
while True:
    now = time.monotonic()
    for ied in ieds.values():
        if now - ied[2] >= 0.5:
            ied[0].publish(ied[1])
            ied[2] = now
    d = hub.next_deadline()
    if d is not None and d <= time.monotonic_ns():
        send(hub.advance(time.monotonic_ns()))
    for f in sock.recv_batch():
        h = parse_header(f.frame)
        if h.gocb_ref.startswith("GCTL1"):
            seen[(h.src.hex(), h.t.quality)] = seen.get((h.src.hex(), h.t.quality), 0) + 1
            frames.append((h.gocb_ref, h.st_num, h.sq_num))
    if select.select([sys.stdin], [], [], 0.001)[0]:
        line = sys.stdin.readline()
        if not line:
            break
        print(command(line.split()), flush=True)
for ied in ieds.values():
    ied[0].close()
"""


class Substation:
    """The peer above in the substation's namespace, one command at a time."""

    def __init__(self, ns, iface: str) -> None:
        self.proc = ns.popen(
            [sys.executable, "-u", "-c", SUBSTATION, iface],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout.readline().strip() == "ready", self.proc.stderr.read()

    def __call__(self, line: str, then_s: float = 0.3) -> str:
        """Send a command, read its answer, give the controller `then_s` to act on it."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        time.sleep(then_s)
        return answer

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class LiveController:
    """`goosectl run`'s shell in the controller's namespace, in a thread, its control
    socket served by its loop; the breaker simulator on a pty."""

    def __init__(self, lab, sock: Path, device: dict | None = None) -> None:
        """`device`: settings over the default config's `device:` (the link's timing)."""
        from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
        from goosectl.controller.config.load import load_config
        from goosectl.controller.demo.live import DeviceThread
        from goosectl.controller.logic.core import BayController
        from goosectl.controller.shell.control import ControlServer, controller_ops
        from goosectl.controller.shell.live_bay import BayLive

        self.sub, self.ctl = lab.namespace(), lab.namespace()
        self.veth = lab.veth(self.sub, self.ctl, a="net0", b="net0")
        self.device = DeviceThread(spring_ms=300)
        self.device.start()
        self.effects: list = []
        config = load_config(DEFAULT_CONFIG, ControllerConfig)
        if device:
            config = config.model_copy(update={"device": config.device.model_copy(update=device)})
        self.bay = BayController(config, time.monotonic_ns())
        with self.ctl.entered():
            self.live = BayLive(self.bay, "net0", None, self.device.path, status_every=False)
        self.live.on_effects = self.effects.extend
        self.server = ControlServer(sock, controller_ops(self.bay, lambda r, n: {"ok": False}))
        self.server.attach(self.live.live.add_reader, self.live.live.remove_reader)
        self.loop = threading.Thread(target=self.live.run)
        self.loop.start()

    def close(self) -> None:
        self.live.stop()
        self.loop.join(timeout=30)
        self.server.close()
        self.device.stop()

    def of(self, *types) -> list:
        return [e for e in list(self.effects) if type(e) in types]

    def wait(self, what: str, cond, timeout: float = 10.0, debug=None) -> None:
        """Until `cond()` holds (the controller's loop runs in its own thread)."""
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                raise AssertionError(
                    f"the controller did not {what} within {timeout} s"
                    + (f": {debug()}" if debug else "")
                )
            time.sleep(0.01)

    def closed(self) -> None:
        self.wait("close the breaker", lambda: self.bay.bay.state == "closed")

    def knows_open(self) -> None:
        """Until the device has told the bay its breaker is open and SCADA's stream is
        valid: a close request before that finds the position unknown, or is the stream's
        first value rather than a new request, and is refused (`bay.yaml`), by design."""
        self.wait("learn the breaker is open", lambda: ready_for_scada(self.bay))

    def refused_input(self, reason: str) -> None:
        from goosectl.controller.logic.effects import InputChanged

        self.wait(
            f"refuse an input ({reason})",
            lambda: any(not e.valid and e.reason == reason for e in self.of(InputChanged)),
        )


def test_run_acts_only_on_what_the_rules_let_through_and_switches_mode_live(tmp_path):
    require_root()
    require_iec61850()
    from goosectl.controller.logic.effects import CommandWithheld, DeviceCommand, InputChanged
    from goosectl.controller.shell.hostclock import host_time_quality

    sock = tmp_path / "ctl.sock"
    with netlab() as lab:
        ctl = LiveController(lab, sock)
        try:
            ctl_mac = ctl.ctl.mac("net0").hex()
            ied = Substation(ctl.sub, "net0")
            ctl.knows_open()
            ied("scada 1")  # SCADA closes the breaker
            ctl.closed()
            ied("scada 0")
            ied("trip 1 invalid")  # refused: the quality is invalid
            ctl.refused_input("q invalid")
            ied("trip 0")
            ied("trip 1 test")  # refused: the controller is not in test mode
            ctl.refused_input("q test")
            ied("trip 0")
            ied("sim 1")  # refused: the controller is not in simulation mode
            mode = goosectl("mode", "test", "--json", "--control", str(sock))
            ied("trip 1 test")  # acts: the breaker opens
            ctl.wait("open the breaker", lambda: ctl.bay.bay.state == "open")
            status = goosectl("status", "--json", "--control", str(sock))
            seen = eval(ied("seen", 0))  # the peer's own repr of what it received
            frames = eval(ied("frames", 0))
            ied.close()
        finally:
            ctl.close()
    trips = [e for e in ctl.of(DeviceCommand) if e.command == "trip"]
    assert len(trips) == 1, ctl.of(DeviceCommand, InputChanged)
    assert not ctl.of(CommandWithheld)
    reasons = [e.reason for e in ctl.of(InputChanged) if not e.valid]
    assert [r for r in reasons if r.startswith("q ")] == ["q invalid", "q test"], reasons
    assert json.loads(mode.stdout) == {
        "ok": True,
        "mode": "test",
        "simulation": False,
        "changed": ["mode"],
    }
    reply = json.loads(status.stdout)
    prot = next(x for x in reply["lgos"] if x["stream"] == "prot")
    assert prot["St"] and not prot["SimSt"] and prot["refused"]["simulation"] >= 1
    assert reply["mode"] == "test" and reply["breaker"] == "open"
    # the controller's frames: from its interface's MAC, `t` saying what the clock is worth
    assert {src for src, _ in seen} == {ctl_mac}, seen
    assert {q for _, q in seen} == {host_time_quality()}
    # the trip-ack left from inside the trip's handling (`BayController.urgent`) and the
    # TRIP was written to the device there; nothing went out twice for it
    acks = [f for f in frames if f[0].endswith("tripack") and f[2] == 0]
    assert acks, frames  # the trip's new state
    assert len(frames) == len(set(frames)), [f for f in frames if frames.count(f) > 1]
    assert len(ctl.live.device_latencies) >= 2  # the close and the trip


def test_a_trip_waiting_behind_the_command_on_the_wire_counts_in_the_stop_report(tmp_path):
    """The link is stop-and-wait: a TRIP that arrives while the CLOSE is unanswered goes
    out once the CLOSE is. Its frame-to-device time is the stop report's too (measured
    from the trip frame's read), or the report's percentiles leave out the slow trips."""
    require_root()
    require_iec61850()
    from goosectl.controller.logic.effects import DeviceCommand

    # answers may take a second: the held board does not make the link give up
    timing = {"response_timeout_ms": 1000, "max_retries": 1}
    with netlab() as lab:
        ctl = LiveController(lab, tmp_path / "ctl.sock", device=timing)
        try:
            ied = Substation(ctl.sub, "net0")
            ctl.wait("bring the link up", lambda: ctl.bay.link.state == "up")
            ctl.knows_open()
            ctl.device.hold()  # the board reads nothing: the CLOSE stays unanswered
            ied("scada 1")
            ied("trip 1")
            commands = lambda: [e.command for e in ctl.of(DeviceCommand)]  # noqa: E731
            ctl.wait("command the trip", lambda: "trip" in commands(), debug=commands)
            latencies = len(ctl.live.device_latencies)
            ctl.device.release()
            ctl.wait("write the trip", lambda: len(ctl.live.device_latencies) >= 2)
            ied.close()
        finally:
            ctl.close()
    # the CLOSE went out at its frame; the TRIP only when the CLOSE was answered
    assert latencies == 1
    assert len(ctl.live.device_latencies) == 2, list(ctl.live.device_latencies)
    assert ctl.live.device_latencies[1] > ctl.live.device_latencies[0]


def test_test_blocked_withholds_simulation_switches_off_publishes_nothing_live(tmp_path):
    require_root()
    require_iec61850()
    from goosectl.controller.logic.effects import CommandWithheld, DeviceCommand
    from goosectl.protocols.goose import Dbpos

    sock = tmp_path / "ctl.sock"
    with netlab() as lab:
        ctl = LiveController(lab, sock)
        try:
            ied = Substation(ctl.sub, "net0")
            ctl.knows_open()
            ied("scada 1")  # SCADA closes the breaker
            ctl.closed()
            ied("scada 0")
            goosectl("mode", "test-blocked", "--simulation", "on", "--control", str(sock))
            ied("sim 1")  # the test set's trip: the subscription switches, the logic trips
            ctl.wait("withhold the TRIP", lambda: ctl.of(CommandWithheld))
            during = json.loads(goosectl("status", "--json", "--control", str(sock)).stdout)
            line = ctl.live.status.line()  # what `goosectl run` prints every second
            position = Dbpos(ctl.bay.link.view["position"])
            ied("trip 1")  # the real stream: refused while the simulated one acts
            goosectl("mode", "off", "--control", str(sock))
            ied("count", 1.5)  # from here: what does the controller send while off?
            off = ied("count", 0)
            goosectl("mode", "on", "--simulation", "off", "--control", str(sock))
            ied("count", 1.5)
            back = ied("count", 0)
            ied.close()
        finally:
            ctl.close()
    assert [e.command for e in ctl.of(DeviceCommand)] == ["close"]  # the TRIP never went out
    withheld = [(w.command, w.reason, w.mode) for w in ctl.of(CommandWithheld)]
    assert withheld[0] == ("trip", "protection", "test-blocked")
    assert position is Dbpos.ON  # the breaker never moved
    prot = next(x for x in during["lgos"] if x["stream"] == "prot")
    assert prot["St"] and prot["SimSt"] and during["mode"] == "test-blocked"
    assert line.startswith("mode=test-blocked,simulation ") and "prot:ok:sim" in line, line
    assert off == "count 0", off
    assert back != "count 0", back
