"""`goosectl run --prp native` on two veth pairs (LAN A, LAN B; root), fed by the
independent PRP sender: the IEC 62439-3 MIB counters are where an operator looks for
them, in `goosectl status` (text, beside the LGOS table, and --json) while it runs and in
the `stopped` record when it ends, and they equal what was sent."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from goosectl.controller.config.bay import DEFAULT_CONFIG
from tests.support.procs import goosectl
from tests.support.prp_sender import DST, GOCB, Scenario, two_lans

pytestmark = pytest.mark.root

MIB = ("Rx", "ErrWrongLan", "Unique", "Duplicate", "Multi")


@pytest.fixture
def lans(netlab):
    with two_lans(netlab) as made:
        yield made


def bay_config(tmp_path: Path) -> Path:
    """The shipped bay config on ra/rb with native PRP and a subscription to the
    sender's stream (a frame of no subscription is dropped before the LRE)."""
    cfg = yaml.safe_load(Path(DEFAULT_CONFIG).read_text())
    goose = cfg["goose"]
    goose.update(interface_a="ra", interface_b="rb", prp="native")
    mac = ":".join(f"{b:02x}" for b in DST)
    goose["subscriptions"].append(
        {"name": "prp-ied", "gocb_ref": GOCB, "appid": 0x3000, "dst": mac,
         "members": ["boolean"]}
    )  # fmt: skip
    path = tmp_path / "bay.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def status(sock: Path, *json_flag: str) -> str:
    return goosectl("status", "--control", str(sock), *json_flag, timeout=60).stdout


def wait_rx(sock: Path, want: dict[str, int], timeout_s: float = 30.0) -> dict:
    """`status --json` once the LRE has taken every frame sent (its Rx counters)."""
    deadline = time.monotonic() + timeout_s
    while True:
        reply = json.loads(status(sock, "--json"))
        c = reply.get("prp", {}).get("counters", {})
        if all(c.get(k) == v for k, v in want.items()) or time.monotonic() > deadline:
            return reply
        time.sleep(0.2)


@pytest.mark.parametrize(
    "faults", [{"loss_b": 0.2, "triples": 0.2}, {"wrong_lan_b": True, "loss_b": 0.1}],
    ids=["loss,triples", "crossed"],
)  # fmt: skip
def test_status_and_the_stop_report_show_the_mib_counters(lans, tmp_path, faults) -> None:
    _, right, socks = lans
    ctl = tmp_path / "ctl.sock"
    proc = right.popen(
        [sys.executable, "-u", "-m", "goosectl", "run", "--config", str(bay_config(tmp_path)),
         "--port", "loop://", "--control", str(ctl), "--journal", str(tmp_path / "j.sqlite"),
         "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert '"running"' in line, line + proc.stderr.read()
        sc = Scenario().build(**faults)
        for a in sc.arrivals:
            socks[a.port].send(a.frame)
        want = sc.expected()
        rx = {k: want[k] for k in ("lreCntRxA", "lreCntRxB")}
        reply = wait_rx(ctl, rx)
        live = reply["prp"]["counters"]
        for p in "AB":
            assert live[f"lreCntRx{p}"] == want[f"lreCntRx{p}"], live
            assert live[f"lreCntErrWrongLan{p}"] == want[f"lreCntErrWrongLan{p}"], live
            assert live[f"lreCntErrors{p}"] == 0
            assert live[f"lreCntTx{p}"] >= 1  # its supervision and publications
        assert reply["prp"]["mode"] == "native" and "lreCntNodes" in live
        crossed = [a for a in reply["prp"]["alarms"] if a["kind"] == "crossed_cable"]
        assert len(crossed) == (1 if faults.get("wrong_lan_b") else 0), reply["prp"]["alarms"]
        text = status(ctl)
        lgos = text.index("Subscriptions (LGOS):")
        block = text.index("PRP (native LRE")
        assert block > lgos, text  # beside the LGOS table
        assert re.search(rf"LAN A: Tx=\d+ Rx={want['lreCntRxA']} ", text), text
        assert f"ErrWrongLan={want['lreCntErrWrongLanB']}" in text.split("LAN B:")[1], text
        if crossed:
            assert "!! crossed_cable: " in text and "likely crossed" in text, text
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    (stopped,) = [json.loads(x) for x in out.splitlines() if '"stopped"' in x]
    final = stopped["prp"]["counters"]
    # every entry aged out at the stop: Unique, Duplicate and Multi as the standard counts
    # (on the LAN whose copy was read first: summed over both)
    assert {k: final[k] for k in want if k.startswith(("lreCntRx", "lreCntErrWrong"))} == {
        k: v for k, v in want.items() if k.startswith(("lreCntRx", "lreCntErrWrong"))
    }
    for kind in ("Unique", "Duplicate", "Multi"):
        got = final[f"lreCnt{kind}A"] + final[f"lreCnt{kind}B"]
        assert got == want[f"lreCnt{kind}A"] + want[f"lreCnt{kind}B"], (kind, final, want)
