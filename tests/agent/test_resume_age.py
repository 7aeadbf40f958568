"""A restored session's first device command has an age limit (`agent.resume_max_age_s`).

In process, on a virtual clock, with the real board's firmware and a real agent journal:
a controller sends a TRIP for a session and dies before the board reads it; a second
controller restores the journal later. Within the limit the TRIP (the safe direction) is
asked again and runs; past it the step fails with `controller_restarted`, saying how old
it is, and nothing reaches the board.
"""

from __future__ import annotations

from pathlib import Path

from goosectl.controller.agent.host import AgentBay
from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.service import AgentService
from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.engine import Journal
from goosectl.controller.logic.core import BayController
from goosectl.controller.replay.virtual_wire import VirtualWire
from goosectl.controller.shell.journal_store import open_journal
from goosectl.firmware_sim.core import Firmware

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "controller" / "bay1.yaml"
S = 1_000_000_000
TRIP_ONLY = """
name: trip_only
params: {bay: {type: int}}
equipment: ["bay{bay}"]
start: open_breaker
steps:
  open_breaker: {tool: device, args: {command: trip}, timeout_ms: 60000, next: report}
  report: {tool: note, args: {text: "bay {bay} open"}}
"""


def _controller(tmp: Path, now: int, max_age_s: float) -> tuple[AgentBay, Journal]:
    journal = open_journal(tmp / "agent.sqlite", durability="step")
    service = AgentService(FolderPlanner(tmp / "procedures"), journal)
    bay = BayController(load_config(CONFIG, ControllerConfig), now, None)
    bay.start(now)
    return AgentBay(bay, service, resume_max_age_s=max_age_s), journal


def _restart_after(tmp: Path, seconds: float, max_age_s: float) -> tuple[dict, int]:
    (tmp / "procedures").mkdir()
    (tmp / "procedures" / "trip_only.yaml").write_text(TRIP_ONLY)
    fw = Firmware(now_ns=0, config={"breaker": {"anti_pump": 0}})
    first, journal = _controller(tmp, 0, max_age_s)
    wire = VirtualWire(first, fw, start_ns=0)
    first.opened(0)
    wire.run_until(1 * S)
    first.bay.link.send_command("close", wire.now_ns)
    wire.run_until(2 * S)
    assert fw.machine("breaker").state == "closed"
    r = first.handle({"op": "run", "procedure": "trip_only", "params": {"bay": "1"}}, 2 * S)
    assert r["ok"], r
    # the TRIP's bytes are written, never delivered: this controller dies here
    assert first.service.status("s1")["state"] == "waiting_for_tool"
    journal.close()
    later = 2 * S + int(seconds * S)
    second, journal = _controller(tmp, later, max_age_s)
    assert second.restore(later) == 1
    wire = VirtualWire(second, fw, start_ns=later)
    second.opened(later)
    wire.run_until(later + 5 * S)
    status = second.service.status("s1")
    journal.close()
    return status, fw.stats.executed["TRIP"]


def test_within_the_age_limit_the_restored_trip_is_asked_again(tmp_path):
    status, trips = _restart_after(tmp_path, 2, max_age_s=30)
    assert status["state"] == "completed" and status["outcome"] == "done", status
    assert trips == 1


def test_past_the_age_limit_the_restored_trip_fails_and_nothing_is_sent(tmp_path):
    status, trips = _restart_after(tmp_path, 2, max_age_s=0.5)
    assert status["outcome"] == "failed", status
    assert "controller_restarted" in status["text"] and "2.0 s old" in status["text"], status
    assert trips == 0
