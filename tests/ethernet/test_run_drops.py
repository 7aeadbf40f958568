"""`goosectl run`'s live shell (BayLive) with a receive ring too small for a burst (root):
the drop is counted in its status line, logged as a warning, kept in the journal,
and every frame sent is accounted for. The device is `loop://` (no device answers: the
network side is what is tested)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.goose import RxRingCfg
from goosectl.controller.config.load import load_config
from goosectl.controller.engine.journal import Journal
from goosectl.controller.logic.core import BayController
from goosectl.controller.shell.journal_store import open_journal
from goosectl.controller.shell.live_bay import BayLive
from goosectl.protocols.goose import GooseFrame, encode_frame
from tests.ethernet.burst import MmsgSender
from tests.gates.bay import wait_until
from tests.support.lines import Lines

pytestmark = pytest.mark.root

SUBSCRIBED = bytes.fromhex("010ccd010001")  # the default config's first subscription
#: its frames as far as the kernel filter compares them (dst, APPID, gocbRef TLV): the
#: burst's frames get through it, and what follows the gocbRef is each frame's label
PREFIX = encode_frame(
    GooseFrame(gocb_ref="PROT1LD0/LLN0$GO$trip", dat_set="x", all_data=(), appid=0x1001,
               dst=SUBSCRIBED, src=bytes.fromhex("02aabbccdd01"))
)[: 26 + len("PROT1LD0/LLN0$GO$trip")]  # fmt: skip


def frame(dst: bytes, label: bytes, *, size: int) -> bytes:
    """A frame of the subscribed stream the controller can only call malformed."""
    assert dst == SUBSCRIBED
    return PREFIX + label + bytes(size - len(PREFIX) - len(label))


def controller(journal: Journal, ring: RxRingCfg | None = None) -> BayController:
    cfg = load_config(DEFAULT_CONFIG, ControllerConfig)
    if ring is not None:
        goose = cfg.goose.model_copy(update={"rx_ring": ring})
        cfg = cfg.model_copy(update={"goose": goose})
    return BayController(cfg, time.monotonic_ns(), journal)


def test_run_counts_shows_and_journals_kernel_drops(wire, tmp_path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="goosectl.controller.shell")
    journal = open_journal(tmp_path / "bay.sqlite", durability="group")
    bay = controller(journal, RxRingCfg(frames=20, block_kib=4))
    with wire.right.entered():
        live = BayLive(bay, wire.veth.b, None, "loop://", status_every=False)
    assert live.live.rx_modes == {"A": "tpacket_v2"}  # run's ring: a wake-up per frame
    # a burst before the loop runs: the ring (20 slots) overflows
    burst = [frame(SUBSCRIBED, b"#%05d" % i, size=200) for i in range(1_000)]
    MmsgSender(wire.open("a", timestamps=False), burst).send_all()
    live.run(until_ns=time.monotonic_ns() + 1_000_000_000)  # > one link poll (200 ms)
    journal.flush()
    rx = live.live.rx_stats()
    drops = live.live.drops
    assert drops > 0 and rx["drops"] == drops
    assert rx["received"] + drops + rx["unread"] == 1_000 == rx["kernel_packets"]
    assert live.status.counts["rx.drops"] == drops
    assert f"drops={drops} " in live.status.line()
    said = [(r.levelno, getattr(r, "event", None), r.getMessage()) for r in caplog.records]
    assert any(
        level == logging.WARNING
        and event == "rx_drops"
        and f"network A ({wire.veth.b}): the kernel dropped {drops} frame(s)" in message
        for level, event, message in said
    ), said
    meta = journal.get_meta("rx_drops.A")
    assert meta["drops"] == drops and meta["iface"] == wire.veth.b
    journal.close()


def test_run_default_ring_keeps_a_burst(wire, tmp_path) -> None:
    journal = open_journal(tmp_path / "bay.sqlite", durability="group")
    bay = controller(journal)
    with wire.right.entered():
        live = BayLive(bay, wire.veth.b, None, "loop://", status_every=False)
    burst = [frame(SUBSCRIBED, b"#%05d" % i, size=200) for i in range(4_510)]
    MmsgSender(wire.open("a", timestamps=False), burst).send_all()
    # every frame is a new state (the engine's whole path): served until the ring is read
    # to its end, however long this host takes, not for a fixed second
    loop = threading.Thread(target=live.run)
    loop.start()
    wait_until("read the whole burst", lambda: live.live.frames >= 4_510, timeout=120)
    live.stop()
    loop.join(timeout=30)
    rx = live.live.rx_stats()
    assert (rx["received"], rx["drops"], rx["unread"]) == (4_510, 0, 0)
    assert live.live.frames == 4_510 and "drops=0 " in live.status.line()
    journal.close()


def run_a_burst_into_a_tiny_ring(wire, tmp_path, *extra: str) -> tuple[subprocess.Popen, Path]:
    """`goosectl run` on the right end of the wire with a 20-frame receive ring, once it
    is running, and a burst of 2,000 frames sent to it: its kernel must drop."""
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["goose"]["rx_ring"] = {"frames": 20, "block_kib": 4}
    cfg = tmp_path / "bay.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    state = tmp_path / "state"
    proc = wire.right.popen(
        [sys.executable, "-u", "-m", "goosectl", "run", "--config", str(cfg),
         "--iface", wire.veth.b, "--port", "loop://", "--state", str(state),
         "--control", str(tmp_path / "ctl.sock"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        running = json.loads(proc.stdout.readline())
        assert running["event"] == "running", proc.stderr.read()
        assert running["rx"] == {"A": "tpacket_v2"}
        burst = [frame(SUBSCRIBED, b"#%05d" % i, size=200) for i in range(2_000)]
        MmsgSender(wire.open("a", timestamps=False), burst).send_all()
    except BaseException:
        proc.kill()
        proc.communicate(timeout=60)
        raise
    return proc, state


def test_goosectl_run_reports_and_journals_drops(wire, tmp_path) -> None:
    """The command end to end: `goosectl run` with a tiny ring, a burst, then SIGTERM. Its
    stop report has the counters, its status line the drops and the alarm, its journal a
    `limit:rx_ring.A` row saying what was dropped."""
    proc, state = run_a_burst_into_a_tiny_ring(wire, tmp_path)
    try:
        # the status line (every second, on stderr) shows the drops and the alarm
        deadline = time.monotonic() + 30
        status = ""
        while "limit:rx_ring.A" not in status:
            assert time.monotonic() < deadline, status
            status = proc.stderr.readline()
        assert "drops=" in status and " drops=0 " not in status
    finally:
        proc.terminate()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    stopped = json.loads(out.splitlines()[-1])
    rx = stopped["rx"]
    assert rx["drops"] > 0 and rx["received"] + rx["drops"] + rx["unread"] == 2_000
    assert stopped["counters"]["rx.drops"] == rx["drops"]
    journal = open_journal(state / "bay.sqlite", durability="group")
    rows = list(journal.rows("limit:rx_ring.A"))
    journal.close()
    assert rows and rows[0]["event"] == "crossed"
    assert "the kernel dropped" in rows[0]["effects"] and wire.veth.b in rows[0]["effects"]


def test_goosectl_run_log_json_says_the_drop_as_json_records(wire, tmp_path) -> None:
    """`run --log-json`: the drop is a warning record with its numbers as fields (the
    limit `rx_ring.A` crossed), the status record carries the alarm and the count, and
    every line on stderr is one JSON object."""
    proc, _ = run_a_burst_into_a_tiny_ring(wire, tmp_path, "--log-json")
    err = Lines(proc.stderr)
    try:
        crossed = err.wait_for_json(
            lambda r: r.get("event") == "limit" and r.get("limit") == "rx_ring.A",
            "the drop's record",
        )
        assert (crossed["level"], crossed["active"]) == ("warning", True)
        assert crossed["logger"] == "controller.shell"  # shown without the goosectl prefix
        assert (crossed["side"], crossed["iface"]) == ("A", wire.veth.b)
        assert 0 < crossed["new"] <= crossed["drops"]
        assert crossed["message"].startswith(
            f"limit rx_ring.A: the kernel dropped {crossed['new']}"
        )
        status = err.wait_for_json(
            lambda r: r.get("event") == "status" and "limit:rx_ring.A" in r["alarms"],
            "a status record showing the alarm",
        )
        assert status["level"] == "info" and status["drops"] > 0
        assert f"drops={status['drops']} " in status["message"]
    finally:
        proc.terminate()
    assert proc.wait(timeout=60) == 0
    assert all(json.loads(line)["level"] for line in err.all())  # nothing but records
