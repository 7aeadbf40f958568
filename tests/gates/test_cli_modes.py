"""`goosectl mode` and `goosectl status` over the control socket of `goosectl demo --serve`
(no root needed), and `goosectl replay --json`'s lgos events."""

from __future__ import annotations

import json
import selectors
import signal
import sqlite3
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from tests.support import procs

REPO = Path(__file__).resolve().parents[2]


goosectl = partial(procs.goosectl, timeout=120)


def wait_for_line(stream, text: str, timeout: float) -> None:
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if sel.select(end - time.monotonic()):
            line = stream.readline()
            if not line:
                raise AssertionError(f"stream closed before {text!r}")
            if text in line:
                return
    raise AssertionError(f"no {text!r} within {timeout} s")


def test_mode_and_status_against_a_serving_demo(tmp_path):
    sock = tmp_path / "demo.sock"
    out = tmp_path / "d"
    demo = subprocess.Popen(
        [sys.executable, "-m", "goosectl", "demo", "--in-memory", "--out", str(out),
         "--serve", "60", "--control", str(sock)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_for_line(demo.stderr, "serving `goosectl agent", timeout=180)
        st = json.loads(goosectl("status", "--json", "--control", str(sock)).stdout)
        assert st["mode"] == "on" and st["simulation"] is False
        assert [v["stream"] for v in st["lgos"]] == ["prot", "bay2-cilo", "scada"]
        # (the scenario is over: its streams go silent and are lost as virtual time runs)
        # the test set's simulated frames, and the scenario's two forged trips (IEC 62351-6)
        assert st["lgos"][0]["refused"] == {
            "simulation": 16,
            "auth_unsigned": 1,
            "auth_bad_mac": 1,
        }
        assert set(st["inputs"]) == {"prot", "scada", "bay2-cilo"}
        text = goosectl("status", "--control", str(sock)).stdout
        assert text.startswith("mode on, simulation off; breaker breaker_failure")
        assert "Subscriptions (LGOS):" in text
        r = goosectl("mode", "test-blocked", "--simulation", "on", "--control", str(sock))
        assert json.loads(r.stdout) == {
            "ok": True,
            "mode": "test-blocked",
            "simulation": True,
            "changed": ["mode", "simulation"],
        }
        # no change asked: the current modes
        r = goosectl("mode", "--control", str(sock), check=False)
        assert json.loads(r.stdout)["changed"] == [] and r.returncode == 0
        bad = goosectl("mode", "sleepy", "--control", str(sock), check=False)
        assert bad.returncode == 2 and "invalid choice: 'sleepy'" in bad.stderr
    finally:
        demo.send_signal(signal.SIGINT)  # the demo stops serving and closes its journal
        # drain its pipes while it finishes: its report can fill a pipe nobody reads, and a
        # process blocked writing never exits
        demo.communicate(timeout=60)
    rows = sqlite3.connect(out / "journal.sqlite").execute(
        "SELECT event, source, target FROM journal WHERE machine = 'mode' ORDER BY seq"
    )
    # the demo's own test window, then the operator over the control socket
    assert list(rows) == [
        ("set_test", "on", "test"),
        ("set_on", "test", "on"),
        ("set_test_blocked", "on", "test_blocked"),
        ("sim_on", "test_blocked", "test_blocked"),
    ]


def test_mode_without_a_controller_says_so(tmp_path):
    r = goosectl("mode", "test", "--control", str(tmp_path / "none.sock"), check=False)
    assert r.returncode == 2 and "no controller is listening" in r.stderr
    r = goosectl("status", "--control", str(tmp_path / "none.sock"), check=False)
    assert r.returncode == 2 and "goosectl run" in r.stderr


def test_replay_json_shows_lgos_changes(tmp_path):
    goosectl("demo", "--in-memory", "--out", str(tmp_path / "d"))
    r = goosectl("replay", str(tmp_path / "d" / "scenario.pcap"), "--json", check=False)
    assert r.returncode == 1, r.stderr  # the scenario's faults are anomalies
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    lgos = [(x["stream"], x["St"], x["ErrSt"]) for x in lines if x.get("event") == "lgos"]
    # observer mode: every stream is a subscription; bay 2's is lost and comes back
    cilo = [x for x in lgos if x[0] == "BAY2LD0/LLN0$GO$cilo"]
    assert cilo == [
        ("BAY2LD0/LLN0$GO$cilo", True, "none"),
        ("BAY2LD0/LLN0$GO$cilo", False, "lost"),
        ("BAY2LD0/LLN0$GO$cilo", True, "none"),
    ]
    refused = [x for x in lines if "frame" in x and x.get("refused")]
    assert refused and {x["refused"] for x in refused} == {"simulation"}
    assert all(x["simulated"] for x in refused)


def test_replay_device_sim_in_each_mode(tmp_path):
    """The mode set on the command line, before the controller starts: test acts on the
    test-flagged trip, test-blocked withholds every command, off also publishes nothing."""
    goosectl("demo", "--in-memory", "--out", str(tmp_path / "d"))
    cap = str(tmp_path / "d" / "scenario.pcap")
    test = goosectl("replay", cap, "--device", "sim", "--mode", "test").stdout
    assert "4.500 s  device   TRIP sent (protection)" in test  # the Tr.q test trip acts
    blocked = goosectl("replay", cap, "--device", "sim", "--mode", "test-blocked").stdout
    assert "CLOSE sent" not in blocked and "TRIP sent" not in blocked
    assert "0.500 s  device   CLOSE withheld (request): mode test-blocked" in blocked
    off = goosectl("replay", cap, "--device", "sim", "--mode", "off").stdout
    assert "CLOSE sent" not in off and off.rstrip().endswith("frames in 414, out 0")  # 3 forged
