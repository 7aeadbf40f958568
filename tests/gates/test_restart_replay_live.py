"""A captured, authentic trip replayed to a `goosectl run` that has just restarted, on real
frames: the controller on a veth pair with its journal, the breaker simulator on a pty,
the protection trip subscribed with `auth: required`. Needs root.

The attacker records the genuine signed trip off the wire while the first controller acts
on it. The trip clears and the breaker is closed again; the controller is restarted (an
upgrade, a crash). Before the protection IED's next frame reaches the restarted controller
(the test peer holds the trip stream back, as a cut or delayed path would), the attacker
sends the recorded frame: it verifies (its key is still in force), and only what the
controller knew before its restart can say it is old. The breaker must stay closed; the
genuine publisher, heard again, must be accepted and its next trip acted on. The IED's
clock is synchronised, as IEC 62351-6 assumes (what an unsynchronised one leaves open is
in docs/threat-model.md).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from goosectl.lab.netns import netlab
from tests.gates.bay import sayer, trip_signed, wait_until
from tests.goose.keyfiles import S, write_keys
from tests.support.peers import require_root
from tests.support.procs import Sim, goosectl, sim_counts

pytestmark = pytest.mark.root

SECRET = bytes(range(1, 33))

#: The protection IED (signed, key 7), bay 2's interlock and SCADA, goosectl's own
#: publishers; and the attacker, who keeps the first frame of the trip and sends it again.
PEER = """
import sys, time
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import load_keys
from goosectl.controller.demo.scenario import CILO, PROT, SCADA, publishers_config
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import Boolean
from goosectl.protocols.goose.utctime import time_quality
from tests.gates.peer import GOOD, serve, substation

iface, keyfile = sys.argv[1], sys.argv[2]
pubs = [p for p in publishers_config().publishers if p.name in ("prot-A", CILO, SCADA)]
pubs = [p.model_copy(update={"auth": "sign", "key_id": 7}) if p.gocb_ref == PROT else p
        for p in pubs]
hub = GooseHub(GooseConfig(publishers=pubs), keys=load_keys(keyfile))
hub.set_utc_offset(time.time_ns() - time.monotonic_ns())
hub.set_time_quality(time_quality(accuracy=10))  # a protection IED's clock: synchronised
sock = RawSocket(iface, timestamps=False)
held = {"prot": False}
captured = []

def send(effects):
    for e in effects:
        if not hasattr(e, "data"):
            continue
        if e.gocb_ref == PROT and held["prot"]:
            continue  # the trip stream's path is cut: its publisher goes on, unheard
        sock.send(e.data)

def trip(a, now, utc):
    out = hub.publish(PROT, (Boolean(a[0] == "1"), GOOD), now, utc)
    if a[0] == "1":  # the attacker records the trip's first frame
        captured.append(next(e.data for e in out if hasattr(e, "data")))
    send(out)

def hold(a, now, utc):
    held["prot"] = a[0] == "1"

on = substation(hub, send)
on.update(trip=trip, hold=hold, replay=lambda a, now, utc: sock.send(captured[0]))
serve(hub, send, on)
"""


def _config(tmp_path: Path, keys: Path) -> Path:
    data = trip_signed(keys)
    data["goose"]["interface_a"] = "net0"
    data["goose"].pop("interface_b", None)
    path = tmp_path / "bay.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Controller:
    """`goosectl run` in the controller's namespace, on its journal and control socket."""

    def __init__(self, ns, config: Path, port: str, tmp_path: Path) -> None:
        self.sock = tmp_path / "ctl.sock"
        self.proc = ns.popen(
            [sys.executable, "-u", "-m", "goosectl", "run", "--config", str(config),
             "--port", port, "--control", str(self.sock),
             "--journal", str(tmp_path / "journal.sqlite"), "-q"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        line = self.proc.stdout.readline()
        assert '"running"' in line, line + self.proc.stderr.read()

    def status(self) -> dict:
        return json.loads(goosectl("status", "--json", "--control", str(self.sock)).stdout)

    def breaker(self) -> str:
        return self.status()["breaker"]

    def prot(self) -> dict:
        (view,) = [v for v in self.status()["lgos"] if v["stream"] == "prot"]
        return view

    def stream(self, label: str) -> dict:
        (row,) = [r for r in self.status()["streams"] if r["stream"] == label]
        return row

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return out


def _wait(what: str, cond, show=lambda: "", timeout: float = 20.0) -> None:
    wait_until(what, cond, show, timeout=timeout)


def test_a_captured_trip_replayed_to_a_restarted_run_does_not_trip(tmp_path) -> None:
    require_root()
    now = time.time_ns()
    keys = write_keys(
        tmp_path,
        [{"key_id": 7, "algorithm": "hmac-sha256-128", "secret": SECRET,
          "not_before": now - 3600 * S, "not_after": now + 3600 * S}],
    )  # fmt: skip
    config = _config(tmp_path, keys)
    with netlab() as lab, Sim("--pty", "--spring-ms", "300") as sim:
        ied, ns = lab.namespace(), lab.namespace()
        lab.veth(ied, ns, a="net0", b="net0")
        peer = ied.popen(
            [sys.executable, "-u", "-c", PEER, "net0", str(keys)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        say = sayer(peer)
        ctl = None
        try:
            assert peer.stdout.readline().strip() == "ready", peer.stderr.read()
            ctl = Controller(ns, config, sim.port, tmp_path)
            _wait("learn the breaker is open", lambda: ctl.breaker() == "open", ctl.status)
            _wait("hear the trip stream", lambda: ctl.prot()["St"], ctl.prot)
            time.sleep(6)  # the breaker's spring charged (`--spring-ms`), anti-pump at rest
            say("scada 1")
            _wait("close the breaker", lambda: ctl.breaker() == "closed", ctl.status)
            say("scada 0")
            say("trip 1")  # genuine: it trips, and the attacker keeps its first frame
            _wait("trip on the genuine trip", lambda: ctl.breaker() == "open", ctl.status)
            say("trip 0")
            time.sleep(1)
            say("scada 1")
            _wait("close the breaker again", lambda: ctl.breaker() == "closed", ctl.status)
            say("scada 0")
            time.sleep(1)  # the journal's group commit has the stream's last state
            ctl.stop()
            say("hold 1")  # from now on the trip stream's frames do not reach the controller
            ctl = Controller(ns, config, sim.port, tmp_path)
            _wait("learn the breaker is closed", lambda: ctl.breaker() == "closed", ctl.status)
            say("replay")
            time.sleep(1)
            after_replay = ctl.breaker()
            refused = ctl.stream("prot")
            say("hold 0")  # the genuine publisher heard again: its heartbeat is accepted
            _wait("hear the trip stream again", lambda: ctl.prot()["St"], ctl.prot)
            say("trip 1")
            _wait("trip on the next genuine trip", lambda: ctl.breaker() == "open", ctl.status)
        finally:
            if peer.poll() is None:
                peer.stdin.close()
                peer.wait(timeout=30)
            if ctl is not None and ctl.proc.poll() is None:
                ctl.stop()
    _, executed = sim_counts(sim.err)
    assert after_replay == "closed", f"the replayed capture tripped the breaker: {refused}"
    assert executed["TRIP"] == 2, executed  # the two genuine trips, not the replay
    assert refused["counts"] == {"stale": 1}, refused  # counted, shown; the stream not valid
    assert refused["state"] == "lost", refused
