"""The agent layer must never take protection down with it.

Real processes: the breaker simulator on a pty and `goosectl run --no-network` with the
agent, its control socket and a state folder. What must hold: an agent run refused on a
full disk leaves nothing behind (no phantom session, later requests work once the disk
is back, device events after it do not kill the controller); a FIFO named like a
procedure never blocks the loop; and an error inside the agent layer alarms and turns the
agent off while the device link and the logic keep acting.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from goosectl.controller.agent.host import AgentBay
from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.service import AgentService
from goosectl.controller.agent.tool_runs import RUNS, Implementations
from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.demo.scenario import S, build
from goosectl.controller.logic.core import BayController
from goosectl.controller.replay.bay_replay import BayReplay
from goosectl.controller.shell.control import ControlUnavailable, request
from goosectl.firmware_sim.core import Firmware
from tests.hostile.test_disk_full import Rig
from tests.support.procs import Sim, start_run, wait_running
from tests.support.smallfs import fill, small_tmpfs

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "controller" / "bay1.yaml"


def test_a_run_refused_on_a_full_disk_leaves_no_phantom_session(tmp_path):
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        rig = Rig(tmp_path, None, disk / "state")
        try:
            rig.start()
            filler = fill(disk)
            refused = rig.ask({"op": "run", "procedure": "cycle", "params": {"bay": "1"}})
            assert not refused["ok"], refused
            listed = rig.ask({"op": "list"})
            assert listed["ok"], listed
            open_ = [s for s in listed["sessions"] if s["state"] not in ("completed", "aborted")]
            assert not open_, listed  # nothing half-made is left holding the bay
            filler.unlink()
            # the disk is back: the next request is journaled, runs and completes
            final = rig.cycle()
            assert final["outcome"] == "done", final
            # and the device's events after it are handled, not fatal
            assert rig.ctl is not None and rig.ctl.poll() is None, rig.err.read_text()
            assert "internal error" not in rig.err.read_text()
            rig.stop()
            operations, _executed = rig.device_counts()
        finally:
            rig.close()
    assert operations == {"close": 1, "open": 1}, operations


def test_a_fifo_in_the_procedures_folder_never_blocks_the_loop(tmp_path):
    rig = Rig(tmp_path, None, tmp_path / "state")
    try:
        os.mkfifo(tmp_path / "procedures" / "trap.yaml")
        rig.start()
        # the controller answers and runs procedures while the FIFO sits there unopened
        # by any writer (opening it for reading would block until one comes)
        for _ in range(3):
            assert rig.ask({"op": "list"})["ok"]
            time.sleep(0.5)
        final = rig.cycle()
        assert final["outcome"] == "done", final
        listed = rig.ask({"op": "list"})
        assert "trap" not in listed["procedures"], listed
        rig.stop()
    finally:
        rig.close()


NOTE_PROCEDURE = """
name: say
params: {bay: {type: int}}
equipment: ["bay{bay}"]
start: hello
steps:
  hello: {tool: note, args: {text: "hello bay {bay}"}}
"""


def test_an_error_inside_a_tool_turns_off_the_agent_and_trips_still_act(tmp_path):
    """The demo's scenario (protection trips over GOOSE, the real board's firmware on the
    same virtual clock) with the agent attached; a tool raises inside the agent at 1 s,
    before the first trip at 6 s. The agent layer goes off with one fault; every trip of
    the scenario still reaches the breaker, as it does with no agent at all."""
    (tmp_path / "procedures").mkdir()
    (tmp_path / "procedures" / "say.yaml").write_text(NOTE_PROCEDURE)

    def boom(scheduler, e, args, now_ns):
        raise RuntimeError("injected fault in the note tool")

    def trips(with_fault: bool) -> tuple[int, AgentBay, list]:
        scn = build()
        t0 = scn.frames[0][0]
        bay = BayController(load_config(CONFIG, ControllerConfig), t0, None)
        runs = RUNS.merged(Implementations({"note": boom}))
        host = AgentBay(bay, AgentService(FolderPlanner(tmp_path / "procedures")), runs)
        faults: list = []
        host.on_fault = lambda why, exc: faults.append((why, exc))
        fw = Firmware(now_ns=t0)
        replay = BayReplay(bay, fw, None, None, endpoint=host)
        ask = {"op": "run", "procedure": "say", "params": {"bay": "1"}}
        actions = replay.inject(scn.faults)
        if with_fault:
            actions.append((t0 + 1 * S, lambda now: faults.append(host.handle(ask, now))))
        replay.run(scn.frames, actions, scn.end_ns)
        return fw.stats.executed["TRIP"], host, faults

    baseline, _, _ = trips(with_fault=False)
    executed, host, faults = trips(with_fault=True)
    assert baseline >= 2  # the scenario trips more than once
    assert executed == baseline, (executed, baseline)
    assert host.fault is not None and "injected fault" in host.fault
    why, exc = faults[0]
    assert isinstance(exc, RuntimeError) and "injected fault" in why
    # the request was taken (its tool failed after); the agent stays off, saying why
    assert faults[1]["ok"] is True, faults
    later = host.handle({"op": "list"}, 0)
    assert not later["ok"] and "agent layer is off" in later["error"]


SITECUSTOMIZE = """
# injected into `goosectl run` for the test: the note tool raises inside the agent layer
from goosectl.controller.agent import tool_runs


def boom(scheduler, e, args, now_ns):
    raise RuntimeError("injected fault in the note tool")


tool_runs.RUNS.fns["note"] = boom
"""


def test_run_survives_an_error_inside_the_agent_with_one_alarm(tmp_path):
    """Through `goosectl run`: the agent layer's error is one alarm and a traceback on
    stderr; the controller keeps running its device link; agent requests are refused
    with the reason; it stops cleanly."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "procedures").mkdir()
    (tmp_path / "procedures" / "say.yaml").write_text(NOTE_PROCEDURE)
    sock = tmp_path / "ctl.sock"
    err = tmp_path / "run.err"
    env = {**os.environ, "PYTHONPATH": f"{inject}{os.pathsep}{REPO}"}
    with Sim("--pty", link=tmp_path / "dev.pty") as sim:
        ctl = start_run(
            sim.port,
            "--state", str(tmp_path / "state"),
            "--procedures", str(tmp_path / "procedures"),
            "--control", str(sock),
            stderr=err.open("w"),
            env=env,
        )  # fmt: skip
        try:
            wait_running(ctl, err)
            asked = _ask(sock, {"op": "run", "procedure": "say", "params": {"bay": "1"}})
            assert asked["ok"], asked
            _wait_for(lambda: "alarm agent" in err.read_text(), err)
            refused = _ask(sock, {"op": "list"})
            assert not refused["ok"] and "agent layer is off" in refused["error"], refused
            # the device link lives on: status lines after the fault still show it up
            mark = len(err.read_text())
            _wait_for(lambda: "link=up" in err.read_text()[mark:], err)
            assert ctl.poll() is None, err.read_text()
        finally:
            ctl.send_signal(signal.SIGTERM)
            ctl.communicate(timeout=30)
    text = err.read_text()
    assert ctl.returncode == 0, text
    assert text.count("alarm agent:") == 1, text
    assert "injected fault in the note tool" in text  # the traceback, for a bug report
    assert "goosectl: internal error" not in text  # the crash handler never ran


def _ask(sock: Path, obj: dict) -> dict:
    end = time.monotonic() + 20
    while True:
        try:
            return request(sock, obj)
        except ControlUnavailable:
            assert time.monotonic() < end, "the control socket never answered"
            time.sleep(0.05)


def _wait_for(pred, err: Path, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, err.read_text()
        time.sleep(0.05)


REPORTS_FAULT = """
# injected into `goosectl run` for the test: the status line raises while it is made
from goosectl.controller.shell import live_bay


def boom(self, fields):
    raise RuntimeError("injected fault in the status line")


live_bay.Status.line = boom
"""

CLOSE_NOW = """
name: close_now
params: {bay: {type: int}}
equipment: ["bay{bay}"]
start: close_breaker
steps:
  close_breaker: {tool: device, args: {command: close}, timeout_ms: 20000}
"""


def test_run_survives_an_error_in_its_reports_and_still_operates(tmp_path):
    """The status line raises: one `reports` alarm and its traceback; the controller goes
    on, and a close asked for after it reaches the breaker."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(REPORTS_FAULT)
    (tmp_path / "procedures").mkdir()
    (tmp_path / "procedures" / "close_now.yaml").write_text(CLOSE_NOW)
    sock = tmp_path / "ctl.sock"
    err = tmp_path / "run.err"
    env = {**os.environ, "PYTHONPATH": f"{inject}{os.pathsep}{REPO}"}
    with Sim("--pty", link=tmp_path / "dev.pty") as sim:
        ctl = start_run(
            sim.port,
            "--state", str(tmp_path / "state"),
            "--procedures", str(tmp_path / "procedures"),
            "--control", str(sock),
            stderr=err.open("w"),
            env=env,
        )  # fmt: skip
        try:
            wait_running(ctl, err)
            _wait_for(lambda: "alarm reports" in err.read_text(), err)
            time.sleep(1.0)  # the link comes up behind the broken status line
            asked = _ask(sock, {"op": "run", "procedure": "close_now", "params": {"bay": "1"}})
            assert asked["ok"], asked
            sid = asked["session"]
            end = time.monotonic() + 30
            while _ask(sock, {"op": "status", "session": sid})["status"]["state"] != "completed":
                assert time.monotonic() < end, err.read_text()
                time.sleep(0.05)
        finally:
            ctl.send_signal(signal.SIGTERM)
            ctl.communicate(timeout=30)
        counts = sim.stop()
    text = err.read_text()
    assert ctl.returncode == 0, text
    assert text.count("alarm reports") == 1, text
    assert "injected fault in the status line" in text
    assert "'CLOSE': 1" in counts.strip().splitlines()[-1], counts
