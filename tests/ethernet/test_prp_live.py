"""`goosectl listen --prp native` on two veth pairs (LAN A, LAN B; root), fed by the
independent PRP sender of tests/support/prp_sender.py: every state change delivered
exactly once whatever LAN B does, the MIB counters equal to what was sent, a crossed
cable alarmed; with PRP off a trailer is still shown; the kernel's PRP device where
the kernel has one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from protocols.ethernet.rawsock import RawSocket
from tests.support.lines import Lines
from tests.support.prp_sender import Scenario

pytestmark = pytest.mark.root


@pytest.fixture
def lans(netlab):
    left, right = netlab.namespace(), netlab.namespace()
    netlab.veth(left, right, a="ta", b="ra")
    netlab.veth(left, right, a="tb", b="rb")
    with left.entered():
        socks = {"A": RawSocket("ta", timestamps=False), "B": RawSocket("tb", timestamps=False)}
    yield left, right, socks
    for s in socks.values():
        s.close()


def listen(right, *args: str) -> tuple[subprocess.Popen, Lines]:
    proc = right.popen(
        [sys.executable, "-u", "-m", "controller", "listen", "--iface", "ra", "--iface-b", "rb",
         "--json", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out = Lines(proc.stdout)
    out.wait_for_json(lambda x: x.get("event") == "listening", "listening")
    return proc, out


def stop(proc: subprocess.Popen, out: Lines) -> list[dict]:
    proc.terminate()
    proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read()
    return [json.loads(x) for x in out.all() if x.startswith("{")]


def send(socks, sc: Scenario) -> None:
    for a in sc.arrivals:
        socks[a.port].send(a.frame)


def wait_frames(out: Lines, n: int) -> None:
    for _ in range(n):
        out.wait_for_json(lambda x: "frame" in x and "class" in x, f"{n} frame lines")


@pytest.mark.parametrize(
    "faults",
    [{"loss_b": 0.2}, {"loss_b": 0.8}, {"cut_b_at": 100}, {"reorder_b": 0.3},
     {"triples": 0.3}, {"wrong_lan_b": True}, {"vlan": True, "loss_b": 0.2}],
    ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()),
)  # fmt: skip
def test_every_state_change_once_and_the_counters_equal_what_was_sent(lans, faults) -> None:
    _, right, socks = lans
    sc = Scenario(states=200, seed=3).build(**faults)
    proc, out = listen(right, "--prp", "native")
    send(socks, sc)
    wait_frames(out, 200)
    lines = stop(proc, out)
    frames = [x for x in lines if "frame" in x and "class" in x]
    assert sorted(f["stNum"] for f in frames) == list(range(1, 201))  # each exactly once
    assert all("prp.trailer.prp_sequence_nr" in f for f in frames)
    assert {f["prp.trailer.prp_sequence_nr"] for f in frames} == {a.seq for a in sc.arrivals}
    (prp,) = [x for x in lines if x.get("event") == "prp"]
    got, want = prp["counters"], sc.expected()
    # per LAN exactly what arrived there; which LAN's copy is read first depends on the
    # order the two rings are read, so the table's verdicts are compared summed
    for k in ("lreCntRxA", "lreCntRxB", "lreCntErrWrongLanA", "lreCntErrWrongLanB"):
        assert got[k] == want[k], k
    for kind in ("Unique", "Duplicate", "Multi"):
        assert got[f"lreCnt{kind}A"] + got[f"lreCnt{kind}B"] == (
            want[f"lreCnt{kind}A"] + want[f"lreCnt{kind}B"]
        ), kind
    assert got["lreCntErrorsA"] == got["lreCntErrorsB"] == 0
    alarms = [x for x in lines if x.get("event") == "prp_alarm"]
    if faults.get("wrong_lan_b"):
        assert [(a["kind"], a["port"]) for a in alarms] == [("crossed_cable", "B")]
        assert any(f.get("prp.wrong_lan") for f in frames) or got["lreCntErrWrongLanB"] > 0
    else:
        assert alarms == []


def test_with_prp_off_a_trailer_is_still_shown(lans) -> None:
    _, right, socks = lans
    sc = Scenario(states=5).build()
    proc, out = listen(right)
    send(socks, sc)
    wait_frames(out, 10)
    lines = stop(proc, out)
    frames = [x for x in lines if "frame" in x and "class" in x]
    assert len(frames) == 10  # no LRE: both copies reach the GOOSE-level merge
    assert sorted(f["prp.trailer.prp_lan"] for f in frames) == [10] * 5 + [11] * 5
    assert not [x for x in lines if x.get("event") == "prp"]


def test_kernel_mode_needs_a_prp_device(lans) -> None:
    """`--prp kernel` on a plain interface is refused, naming what to create."""
    _, right, _ = lans
    done = right.run([sys.executable, "-m", "controller", "listen", "--iface", "ra", "--prp",
                      "kernel", "--duration", "0.1"], check=False)  # fmt: skip
    assert done.returncode == 2
    assert "type hsr" in done.stderr and "proto 1" in done.stderr and "CONFIG_HSR" in done.stderr


def test_kernel_prp_device_carries_goosectl_frames(lans) -> None:
    """Where the kernel has a PRP device: goosectl listens on prp0 with `--prp kernel`
    while the kernel's LRE discards the duplicates of our independent sender."""
    _, right, socks = lans
    made = right.ip("link", "add", "prp0", "type", "hsr", "slave1", "ra", "slave2", "rb",
                    "supervision", "45", "proto", "1", check=False)  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"the kernel has no PRP device (needs CONFIG_HSR): {made.stderr.strip()}")
    right.ip("link", "set", "prp0", "up")
    proc = right.popen(
        [sys.executable, "-u", "-m", "controller", "listen", "--iface", "prp0", "--prp",
         "kernel", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out = Lines(proc.stdout)
    out.wait_for_json(lambda x: x.get("event") == "listening", "listening")
    sc = Scenario(states=50).build(loss_b=0.2)
    send(socks, sc)
    wait_frames(out, 50)
    lines = stop(proc, out)
    frames = [x for x in lines if "frame" in x and "class" in x]
    assert sorted(f["stNum"] for f in frames) == list(range(1, 51))
