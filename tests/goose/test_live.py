"""GOOSE on real wires: veth pairs in namespaces this test creates (and always removes),
libiec61850 as the independent peer on the other end. Needs root."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from goosectl.lab.netns import netlab
from goosectl.protocols.ethernet.rawsock import RawSocket
from tests.support.libiec61850_rx import start_primed_receiver
from tests.support.lines import Lines
from tests.support.peers import require_binary, require_iec61850, require_root
from tests.support.procs import goosectl

pytestmark = pytest.mark.root

GOCB = "PEER/LLN0$GO$trip"
DST = "01:0c:cd:01:00:01"


def start_listener(ns, *args: str) -> tuple[subprocess.Popen, Lines]:
    """`goosectl listen --json` in `ns`, once it printed `listening` (its sockets are open:
    a frame sent from then on is queued for it). It runs until `stop_listener`."""
    proc = ns.popen(
        [sys.executable, "-u", "-m", "goosectl", "listen", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = Lines(proc.stdout)
    try:
        out.wait_for_json(lambda x: x.get("event") == "listening", "listen to print `listening`")
    except AssertionError as exc:
        proc.kill()
        raise AssertionError(f"{exc}\nstderr: {proc.communicate(timeout=60)[1]}") from None
    return proc, out


def stop_listener(proc: subprocess.Popen, out: Lines) -> list[dict]:
    """SIGTERM (listen stops, prints its anomalies and counters, exits 1 if it found any
    anomaly, else 0); every JSON line it printed."""
    proc.terminate()
    proc.wait(timeout=60)
    lines = [json.loads(x) for x in out.all()]
    (report,) = [x for x in lines if x.get("event") == "anomalies"]
    assert proc.returncode == (1 if report["count"] else 0), proc.stderr.read()
    return lines


def side_is(side: str, state: str):
    """A predicate for the listener's line reporting one network side in `state`."""
    return lambda x: x.get("event") == "stream" and (x["side"], x["state"]) == (side, state)


def frame_line(st: int, cls: str):
    """A predicate for the listener's line classifying the frame with stNum `st` as `cls`."""
    return lambda x: x.get("stNum") == st and x.get("class") == cls


PEER_SEQUENCE = """
import json, sys, time
from goosectl.lab.iec61850_peer import Publisher
p = Publisher(sys.argv[1], appid=0x1000, dst=bytes.fromhex("010ccd010001"), use_vlan=False,
              gocb_ref="PEER/LLN0$GO$trip", dataset="PEER/LLN0$ds", go_id="trip", tal_ms=800)
v = lambda b: [{"type": "boolean", "value": b}]
def send(st=None, sq=None, value=False, gap=0.01):
    p.set_numbers(st, sq)
    p.publish(v(value))
    time.sleep(gap)
send(10, 0)             # first
send()                  # retransmission (10, 1)
send(10, 1)             # duplicate
send(10, 0)             # out_of_order
p.new_state(); send(value=True)   # new_state (11, 0)
send(14, 0, True)       # missed_states
send(12, 0, False)      # the sequence before the jump goes on, new data: a conflict
time.sleep(1.2)         # the behaviour under test: TAL 800 ms expires in real time, lost
p.new_state()           # (a fresh `t`: a restarted publisher's first state is after its last)
send(4294967295, 0)     # a restarted publisher: restart, accepted whatever its stNum
p.new_state(); send(value=True)   # stNum wraps to 1: new_state + wrap
p.close()
"""


def test_libiec61850_publisher_to_our_subscriber():
    require_root()
    require_iec61850()
    with netlab() as lab:
        pub, sub = lab.namespace(), lab.namespace()
        v = lab.veth(pub, sub)
        listener, out = start_listener(sub, "--iface", v.b)
        pub.python(PEER_SEQUENCE, v.a)
        out.wait_for_json(frame_line(1, "new_state"), "the last frame (stNum wrapped to 1)")
        lines = stop_listener(listener, out)
    frames = [x for x in lines if "frame" in x]
    got = [(x["stNum"], x["sqNum"], x["class"], x["flags"]) for x in frames]
    assert got == [
        (10, 0, "first", []),
        (10, 1, "retransmission", []),
        (10, 1, "duplicate", []),
        (10, 0, "out_of_order", []),
        (11, 0, "new_state", []),
        # set by hand, without new data (the same `t` is not stale: coarse IED clocks)
        (14, 0, "missed_states", ["unchanged_data"]),
        # forward of the state before the jump, with new data: two sequences on one
        # stream, a conflict (with the jump's data and `t` it would be one more jump, as a
        # stNum-mutated copy is, and prove nothing)
        (12, 0, "new_state", ["two_sequences", "conflict"]),
        (4294967295, 0, "restart", ["tal_late"]),
        (1, 0, "new_state", ["wrap"]),
    ]
    assert all(x["gocbRef"] == GOCB and x["appid"] == 0x1000 for x in frames)
    states = [x["state"] for x in lines if x.get("event") == "stream"]
    assert states[:2] == ["valid", "suspect"]
    lost = states.index("lost")  # TAL expired while the publisher was silent ...
    assert states[lost + 1] == "valid"  # ... and the restart was reported as a recovery


def test_our_publisher_to_libiec61850_subscriber():
    require_root()
    require_iec61850()
    values = [{"type": "boolean", "value": False}, {"type": "integer", "value": 7}]
    with netlab() as lab:
        a, b = lab.namespace(), lab.namespace()
        v = lab.veth(a, b)
        with a.entered():
            primers = RawSocket(v.a)
        with primers:
            rx = start_primed_receiver(b, primers, v.b, 6, dst=bytes.fromhex(DST.replace(":", "")))
        new = json.dumps([{"type": "boolean", "value": True}, {"type": "integer", "value": -3}])
        pub = a.popen(
            [
                sys.executable,
                "-m",
                "goosectl",
                "publish",
                "--iface",
                v.a,
                "--gocbref",
                GOCB,
                "--appid",
                "0x1000",
                "--dst",
                DST,
                "--vlan",
                "10",
                "--priority",
                "5",
                "--values",
                json.dumps(values),
                "--min-time",
                "20",
                "--max-time",
                "200",
                "--json",
                "--duration",  # publish runs until Ctrl-C or this, stdin closed or not
                "5",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # No wait: the new state is queued before the publisher runs. It sends its first
        # state (1, 0) when it starts, then reads stdin, so the order is (1, 0), [a
        # retransmission of state 1 if it was descheduled for a MinTime], (2, 0), (2, 1)...
        pub.stdin.write(new + "\n")
        pub.stdin.close()
        out, rx_err = rx.communicate(timeout=30)
        pub.wait(timeout=30)
        assert pub.returncode == 0, pub.stderr.read()
    msgs = [json.loads(x) for x in out.splitlines() if x.startswith("{") and "stNum" in x]
    assert len(msgs) >= 4, out + rx_err
    assert {m["gocbRef"] for m in msgs} == {GOCB}  # observer mode: only our publisher's
    seq = [(m["stNum"], m["sqNum"]) for m in msgs]
    assert seq[0] == (1, 0) and (2, 0) in seq
    first_new = seq.index((2, 0))
    assert seq[:first_new] == [(1, i) for i in range(first_new)]
    assert [m["sqNum"] for m in msgs[first_new:]] == list(range(len(msgs) - first_new))
    assert msgs[0]["values"] == [
        {"type": "boolean", "value": False},
        {"type": "integer", "value": 7},
    ]
    assert msgs[first_new]["values"][1] == {"type": "integer", "value": -3}
    assert msgs[0]["timeAllowedToLive"] == 40  # 2 x MinTime
    assert msgs[0]["confRev"] == 1


def test_failover_live_no_state_change_lost_and_loss_reported():
    require_root()
    cfg_text = (
        "subscriptions:\n"
        f"  - gocb_ref: {GOCB}\n    appid: 0x1000\n    dst: '{DST}'\n    ab: {{mode: merge}}\n"
    )
    with netlab() as lab:
        pub, sub = lab.namespace(), lab.namespace()
        va = lab.veth(pub, sub, a="netA", b="netA")
        vb = lab.veth(pub, sub, a="netB", b="netB")
        cfg = sub.run(["mktemp", "--suffix", ".yaml"]).stdout.strip()
        with open(cfg, "w") as fh:
            fh.write(cfg_text)
        listener, out = start_listener(sub, "--iface", va.b, "--iface-b", vb.b, "--config", cfg)
        values = json.dumps([{"type": "integer", "value": 0}])
        p = pub.popen(
            [
                sys.executable,
                "-m",
                "goosectl",
                "publish",
                "--iface",
                va.a,
                "--iface-b",
                vb.a,
                "--gocbref",
                GOCB,
                "--appid",
                "0x1000",
                "--dst",
                DST,
                "--values",
                values,
                # MinTime 100 ms, so TAL 200 ms in a burst: a scheduling stall of the
                # publisher on a busy machine is not a loss (at 10 ms, under load, it was)
                "--min-time",
                "100",
                "--max-time",
                "300",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out.wait_for_json(frame_line(1, "first"), "the publisher's first frame")
        # The scenario's pacing (behaviour under test, not waits): state changes 20 ms
        # apart inside the 100 ms-MinTime burst, network A fails mid-burst, then three more
        # changes 50 ms apart that only network B carries.
        for i in range(1, 4):
            p.stdin.write(json.dumps([{"type": "integer", "value": i}]) + "\n")
            p.stdin.flush()
            time.sleep(0.02)
        va.set("a", False)  # network A fails mid-burst
        for i in range(4, 7):
            p.stdin.write(json.dumps([{"type": "integer", "value": i}]) + "\n")
            p.stdin.flush()
            time.sleep(0.05)
        out.wait_for_json(side_is("A", "lost"), "side A reported lost")
        out.wait_for_json(frame_line(7, "new_state"), "the last state via B", anywhere=True)
        va.set("a", True)
        out.wait_for_json(side_is("A", "valid"), "side A recovered (valid after lost)")
        lines = stop_listener(listener, out)  # the listener stops while the publisher runs
        p.stdin.close()
        p.terminate()  # publish runs until told to stop
        p.wait(timeout=10)
    delivered = [x["stNum"] for x in lines if x.get("class") in ("first", "new_state")]
    assert delivered == list(range(1, 8))  # every state exactly once, none lost
    side_events = [(x["side"], x["state"]) for x in lines if x.get("event") == "stream"]
    lost = side_events.index(("A", "lost"))  # loss of A reported ...
    assert ("A", "valid") in side_events[lost:]  # ... and its recovery
    assert ("-", "lost") not in side_events and ("B", "lost") not in side_events


def test_without_cap_net_raw_listen_and_run_exit_2_saying_why():
    """Root without CAP_NET_RAW (setpriv drops it) is refused with the reason, exit 2."""
    require_root()
    drop = (require_binary("setpriv", "util-linux"), "--bounding-set=-net_raw", "--inh-caps=-all")
    for args in (
        ["listen", "--iface", "lo", "--duration", "1"],
        ["run", "--iface", "lo", "--port", "/dev/null", "--duration", "1"],
    ):
        r = goosectl(*args, check=False, timeout=60, prefix=drop)
        assert r.returncode == 2, (args, r.stderr)
        assert "needs root or CAP_NET_RAW" in r.stderr


def test_a_frame_that_breaks_a_machine_is_reported_and_the_loop_goes_on():
    """A defect behind one frame (here: a hub that raises) never stops the live loop."""
    from goosectl.controller.goose.hub import GooseHub
    from tests.goose.helpers import raw_frame
    from tests.support.netns import live_on_veth

    class Fragile(GooseHub):
        def frame(self, buf, side, now_ns, vlan=None):
            if not hasattr(self, "broke"):
                self.broke = True
                raise RuntimeError("a table defect")
            return super().frame(buf, side, now_ns, vlan)

    live, seen = live_on_veth(Fragile(), [raw_frame(1, sq) for sq in range(3)], 3)
    assert live.errors == 1 and "a table defect" in live.last_error
    assert len(seen) == 3 and seen[0][0].topic == "error"
    assert [e.cls for out in seen[1:] for e in out if hasattr(e, "cls")] == [
        "first",
        "retransmission",
    ]
