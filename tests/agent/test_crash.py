"""SIGKILL in the middle of a procedure, restart, and every actuation happened at most once,
exactly as the session reports it.

Real processes: the breaker simulator on a pty (its line delays each direction by 150 ms,
so a command is in flight for a while), and `goosectl run --no-network` with the agent
and a state folder. The controller is killed with SIGKILL at several points, including
between "command sent" and "acknowledged", and started again on the same state; the
device's own counters are the judge.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from goosectl.controller.shell.control import ControlUnavailable, request
from tests.support.procs import Sim, sim_counts, start_agent_bay

REPO = Path(__file__).resolve().parents[2]

# Step timeouts are hang guards, not the subject: a step's deadline is checkpointed, so it
# counts the restart too, and a controller restarted on a loaded machine (the stress run
# has a CPU hog on every core) can take seconds to import before it serves again.
PROCEDURE = """
name: cycle
params: {bay: {type: int}}
equipment: ["bay{bay}"]
start: close_breaker
steps:
  close_breaker: {tool: device, args: {command: close}, timeout_ms: 20000, next: settle}
  settle: {tool: delay, args: {ms: 400}, next: open_breaker}   # past the anti-pump window
  open_breaker: {tool: device, args: {command: trip}, timeout_ms: 20000, next: verify_open}
  verify_open: {tool: wait_device, args: {position: "off"}, timeout_ms: 20000,
                next: open_disconnector}
  open_disconnector: {tool: device, args: {command: set_output, mask: 1, values: 1},
                      timeout_ms: 20000, next: close_earth}
  close_earth: {tool: device, args: {command: set_output, mask: 2, values: 2},
                timeout_ms: 20000, next: report}
  report: {tool: note, args: {text: "bay {bay} cycled and isolated"}}
"""


def wait_for(sock: Path, sid: str, pred, timeout: float = 20.0) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            st = request(sock, {"op": "status", "session": sid})
        except ControlUnavailable:
            time.sleep(0.02)
            continue
        if st.get("ok") and pred(st["status"]):
            return st["status"]
        time.sleep(0.01)
    raise AssertionError(f"session {sid} never reached the expected state: {st}")


def test_sigkill_at_several_points_every_actuation_exactly_once(tmp_path):
    (tmp_path / "procedures").mkdir()
    (tmp_path / "procedures" / "cycle.yaml").write_text(PROCEDURE)
    cfg = (REPO / "examples" / "controller" / "bay1.yaml").read_text()
    (tmp_path / "bay.yaml").write_text(
        cfg.replace("  port: sim\n", "  port: sim\n  response_timeout_ms: 1000\n")
    )
    sock = tmp_path / "ctl.sock"
    sim = Sim("--pty", "--delay", "150", "--spring-ms", "100", link=tmp_path / "dev.pty")
    ctl = start_agent_bay(tmp_path, sim.port, sock)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                r = request(sock, {"op": "run", "procedure": "cycle", "params": {"bay": "1"}})
                break
            except ControlUnavailable:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert r["ok"], r
        sid = r["session"]
        kills = []
        for step in ("close_breaker", "open_breaker", "open_disconnector", "close_earth"):
            # "command sent, not yet acknowledged": the tool started, the device is slow
            status = wait_for(
                sock,
                sid,
                lambda s, step=step: (
                    (s["step"] == step and s["state"] == "waiting_for_tool")
                    or s["state"] in ("completed", "aborted")
                ),
            )
            if status["state"] in ("completed", "aborted"):
                break  # a close or output the restart found not done ended it (below)
            time.sleep(0.05)
            os.kill(ctl.pid, signal.SIGKILL)
            ctl.wait()
            kills.append(step)
            ctl = start_agent_bay(tmp_path, sim.port, sock)
        final = wait_for(sock, sid, lambda s: s["state"] in ("completed", "aborted"))
    finally:
        ctl.send_signal(signal.SIGTERM)
        ctl.communicate(timeout=30)  # drain its pipes: a writer blocked on one never exits
        err = sim.stop(timeout_s=10)
    operations, executed = sim_counts(err)
    stats = err.strip().splitlines()[-1]
    # what the device executed is exactly what the session says was done, never more: a
    # close or an output whose bytes had not left when the controller died is not sent
    # again after the restart (it fails, controller_restarted); one that had left ran once
    done = {r["step"] for r in final["results"] if r["ok"]}
    expect = {
        "CLOSE": int("close_breaker" in done),
        "TRIP": int("open_breaker" in done),
        "SET_OUTPUT": len(done & {"open_disconnector", "close_earth"}),
    }
    assert {k: executed.get(k, 0) for k in expect} == expect, (stats, final)
    if final["outcome"] == "done":
        assert final["text"] == "bay 1 cycled and isolated"
        assert kills == ["close_breaker", "open_breaker", "open_disconnector", "close_earth"]
        assert operations == {"close": 1, "open": 1}, stats
    else:
        assert "controller_restarted" in final["text"], final
