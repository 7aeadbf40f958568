"""SIGKILL mid-procedure, restart: the layers are rebuilt from the persisted phase.

Real processes: `goosectl sim --pty` and `goosectl run --no-network` with the agent and a
state folder. One session is killed while a step runs (host running) and again while it
waits for confirmation (host paused); a second one waits for confirmation while the
controller is down longer than its confirmation may wait. After each restart the four
layers of every session are what they were before the kill; the first then goes on to
the end, each step run once, and the second is aborted by its expiry, as it would have
been without the restart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from goosectl.controller.shell.control import ControlUnavailable, request
from tests.agent.test_layers import DONE_LAYERS
from tests.support.procs import Sim, start_agent_bay

REPO = Path(__file__).resolve().parents[2]

# The delay is long enough to be killed in (its deadline is checkpointed, so it counts
# the downtime too); timeouts are hang guards on a loaded machine, not the subject.
PROCEDURE = """
name: steps
params: {bay: {type: int}}
equipment: ["bay{bay}"]
start: settle
steps:
  settle: {tool: delay, args: {ms: 4000}, timeout_ms: 60000, next: ask}
  ask: {tool: note, args: {text: "bay {bay}: go on"}, confirm: true, next: report}
  report: {tool: note, args: {text: "bay {bay} done"}}
"""

CONFIRM_TIMEOUT_S = 3


def ask(sock: Path, req: dict, timeout: float = 20.0) -> dict:
    end = time.monotonic() + timeout
    while True:
        try:
            return request(sock, req)
        except ControlUnavailable:
            assert time.monotonic() < end, f"no controller on {sock}"
            time.sleep(0.05)


def wait_for(sock: Path, sid: str, pred, timeout: float = 30.0) -> dict:
    end = time.monotonic() + timeout
    st: dict = {}
    while time.monotonic() < end:
        st = ask(sock, {"op": "status", "session": sid})
        if st.get("ok") and pred(st["status"]):
            return st["status"]
        time.sleep(0.02)
    raise AssertionError(f"session {sid} never reached the expected state: {st}")


def kill(ctl: subprocess.Popen) -> None:
    os.kill(ctl.pid, signal.SIGKILL)
    ctl.wait()
    ctl.communicate(timeout=10)


def layers(sock: Path, sid: str) -> dict:
    return ask(sock, {"op": "status", "session": sid})["status"]["layers"]


def write_config(tmp: Path, confirm_timeout_s: float) -> None:
    cfg = (REPO / "examples" / "controller" / "bay1.yaml").read_text()
    (tmp / "bay.yaml").write_text(cfg + f"agent:\n  confirm_timeout_s: {confirm_timeout_s}\n")


def test_after_sigkill_the_upper_layers_are_rebuilt_from_the_phase(tmp_path):
    (tmp_path / "procedures").mkdir()
    (tmp_path / "procedures" / "steps.yaml").write_text(PROCEDURE)
    write_config(tmp_path, 600)
    sock = tmp_path / "ctl.sock"
    sim = Sim("--pty", link=tmp_path / "dev.pty")
    ctl = start_agent_bay(tmp_path, sim.port, sock)
    try:
        r = ask(sock, {"op": "run", "procedure": "steps", "params": {"bay": "1"}})
        assert r["ok"], r
        # killed while a step runs: the host is running, the flow at the delay
        running = wait_for(sock, "s1", lambda s: s["state"] == "waiting_for_tool")
        before = running["layers"]
        assert (before["phase"], before["host"], before["flow"]) == (
            "operating",
            "running",
            "settle",
        )
        kill(ctl)
        ctl = start_agent_bay(tmp_path, sim.port, sock)
        assert layers(sock, "s1") == before

        # killed while it waits for the operator: paused, at the step that waits
        wait_for(sock, "s1", lambda s: s["state"] == "awaiting_confirmation", timeout=60)
        before = layers(sock, "s1")
        assert (before["host"], before["flow"], before["workflow"]) == ("paused", "ask", "ask")
        kill(ctl)
        ctl = start_agent_bay(tmp_path, sim.port, sock)
        assert layers(sock, "s1") == before
        assert ask(sock, {"op": "confirm", "session": "s1"})["ok"]
        done = wait_for(sock, "s1", lambda s: s["state"] in ("completed", "aborted"))
        assert done["outcome"] == "done" and done["text"] == "bay 1 done", done
        assert [x["step"] for x in done["results"]] == ["settle", "ask", "report"], done
        assert done["layers"] == DONE_LAYERS

        # a session whose confirmation may wait 2 s, and a controller down for longer:
        # after the restart it is aborted by its expiry, as it would have been
        ctl.send_signal(signal.SIGTERM)
        ctl.communicate(timeout=30)
        write_config(tmp_path, 2)
        ctl = start_agent_bay(tmp_path, sim.port, sock)
        assert ask(sock, {"op": "run", "procedure": "steps", "params": {"bay": "2"}})["ok"]
        wait_for(
            sock, "s2", lambda s: s["state"] in ("awaiting_confirmation", "aborted"), timeout=60
        )
        kill(ctl)
        time.sleep(2.5)
        ctl = start_agent_bay(tmp_path, sim.port, sock)
        ended = wait_for(sock, "s2", lambda s: s["state"] in ("completed", "aborted"))
        assert ended["state"] == "aborted" and [x["step"] for x in ended["results"]] == [
            "settle"
        ], ended
        assert ended["layers"] == {
            "phase": "ended",
            "flow": "stopped",
            "workflow": "ask",
            "host": "completed",
            "aborted": True,
            "refused_back": 0,
        }
        assert layers(sock, "s1") == done["layers"]  # the ended one, unchanged
    finally:
        ctl.send_signal(signal.SIGTERM)
        ctl.communicate(timeout=30)
        sim.stop(timeout_s=10)
