"""Sessions waiting for a confirmation expire, and only so many may be open.

On the virtual clock (the service, the bay and the firmware, no wall time) for the rules,
and once on a real controller for what an operator sees: the refusal, the expiry, the
counts in the stop report and the alarm on stderr."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from goosectl.controller.agent.host import AgentBay
from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.service import AgentService
from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.engine import Journal
from goosectl.controller.logic.core import BayController
from goosectl.controller.replay.virtual_wire import VirtualWire
from goosectl.controller.shell.journal_store import open_journal
from goosectl.firmware_sim.core import Firmware
from tests.agent.conftest import NOOP, PROCEDURES

MS = 1_000_000


def rig(
    confirm_ms: float = 600_000,
    max_open: int = 64,
    keep: int = 256,
    folder: Path = PROCEDURES,
    journal: Journal | None = None,
) -> tuple[AgentBay, VirtualWire]:
    bay = BayController(load_config(DEFAULT_CONFIG, ControllerConfig), 0)
    service = AgentService(
        FolderPlanner(folder),
        journal,
        confirm_timeout_ms=confirm_ms,
        max_open=max_open,
        keep_finished=keep,
    )
    host = AgentBay(bay, service)
    wire = VirtualWire(host, Firmware(now_ns=0))
    bay.start(0)
    host.opened(0)
    wire.run_until(100 * MS)
    return host, wire


def test_a_session_nobody_confirms_is_aborted_after_the_expiry():
    host, wire = rig(confirm_ms=60_000, max_open=8)
    expired = []
    host.on_notify = lambda n, now: n.topic == "expired" and expired.append((n.data, now))
    sid = host.handle({"op": "run", "procedure": "isolate", "params": {"bay": 1}}, wire.now_ns)[
        "session"
    ]
    wire.run_for(59_000 * MS)
    assert host.service.status(sid)["state"] == "awaiting_confirmation"
    wire.run_for(2_000 * MS)
    st = host.service.status(sid)
    assert st["state"] == "aborted" and st["outcome"] == "aborted"
    assert st["text"] == "step open_breaker not confirmed within 60 s"
    assert [d["session"] for d, _ in expired] == [sid]
    assert host.service.locks == {}  # its equipment is free again
    late = host.handle({"op": "confirm", "session": sid}, wire.now_ns)
    assert not late["ok"] and "aborted" in late["error"]


def test_open_sessions_are_capped_and_the_refusal_names_the_limit():
    host, wire = rig(confirm_ms=600_000, max_open=3)
    runs = [
        host.handle({"op": "run", "procedure": "isolate", "params": {"bay": b}}, wire.now_ns)
        for b in (1, 2, 3, 4)
    ]
    assert [r["ok"] for r in runs] == [True, True, True, False]
    assert runs[3]["limit"] == "agent.sessions"
    assert runs[3]["error"] == (
        "3 sessions are open, the limit (agent.max_open_sessions): let one end, "
        "or confirm, deny or abort one"
    )
    host.handle({"op": "abort", "session": runs[0]["session"]}, wire.now_ns)
    again = host.handle({"op": "run", "procedure": "isolate", "params": {"bay": 4}}, wire.now_ns)
    assert again["ok"]


def test_ended_sessions_beyond_the_kept_number_leave_memory_not_the_journal(tmp_path):
    folder = tmp_path / "procedures"
    shutil.copytree(PROCEDURES, folder)
    (folder / "noop.yaml").write_text(NOOP)
    journal = open_journal(tmp_path / "agent.sqlite", durability="step")
    host, wire = rig(keep=10, folder=folder, journal=journal)
    for i in range(300):
        assert host.handle({"op": "run", "procedure": "noop", "params": {"n": i}}, wire.now_ns)[
            "ok"
        ]
        wire.run_for(5 * MS)
    listed = host.handle({"op": "list"}, wire.now_ns)["sessions"]
    assert [s["session"] for s in listed] == [f"s{i}" for i in range(291, 301)]
    assert len(host.service.scheduler.machines) == 20  # loop + workflow of each kept one
    old = host.handle({"op": "status", "session": "s1"}, wire.now_ns)
    assert not old["ok"] and "no longer kept in memory" in old["error"]
    history = host.handle({"op": "history", "session": "s1"}, wire.now_ns)["history"]
    assert history[0]["event"] == "request" and history[-1]["target"] == "completed"
    assert "no session 's301'" in host.handle({"op": "history", "session": "s301"}, 0)["error"]
    journal.close()


def test_a_real_controller_expires_and_caps_sessions(controllers):
    ctl = controllers({"agent": {"confirm_timeout_s": 1, "max_open_sessions": 2}})
    a, b, c = (
        ctl.request({"op": "run", "procedure": "hold", "params": {"n": n}}) for n in (1, 2, 3)
    )
    assert a["ok"] and b["ok"] and not c["ok"] and c["limit"] == "agent.sessions"
    ctl.err.wait_for(lambda x: x.startswith("goosectl: limit agent.sessions: "), "the alarm")
    ctl.err.wait_for(
        lambda x: x == "goosectl: limit agent.confirm_timeout: step ask not confirmed within 1 s",
        "the expiry",
    )
    end = time.monotonic() + 30
    while ctl.request({"op": "status"})["host"] != "completed":
        assert time.monotonic() < end
        time.sleep(0.05)
    statuses = ctl.request({"op": "list"})["sessions"]
    assert [s["state"] for s in statuses] == ["aborted", "aborted"]
    assert ctl.request({"op": "run", "procedure": "hold", "params": {"n": 3}})["ok"]
    report = ctl.stop()["control"]
    assert report["agent.sessions"] == 1 and report["agent.confirm_timeout"] == 2
    rows = ctl.journal("limit:agent.")
    assert rows[0][:4] == ("limit:agent.sessions", "crossed", "ok", "exceeded")
