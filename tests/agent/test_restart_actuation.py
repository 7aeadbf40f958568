"""A command whose answer was never seen, across a controller restart.

Real processes: `goosectl sim --pty` and `goosectl run --no-network` with the agent and a
state folder. A CLOSE never reaches the breaker (the simulator is stopped before it
reads it, then power-cycled) while the controller is SIGKILLed with the session waiting
for it. The restarted controller must not send the CLOSE again: it reads the device,
sees the breaker open, fails the step with `controller_restarted` and tells the session.
The device's own counters are the judge.

Also here: a restored session's first device command re-checks its guards (a close
against an interlock with no data is refused), and the state folder's ownership and
mode. The age limit is tested in process (tests/agent/test_resume_age.py): the clock
across the restart is the test's there.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from goosectl.controller.shell.control import ControlUnavailable, request
from tests.support.procs import Sim, sim_counts, start_run, wait_running

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534

CLOSE_ONLY = """
name: close_only
params: {bay: {type: int}}
equipment: ["bay{bay}"]
start: close_breaker
steps:
  close_breaker: {tool: device, args: {command: close}, timeout_ms: 60000,
                  retry: {count: 3, backoff_ms: 100}, next: report}
  report: {tool: note, args: {text: "bay {bay} closed"}}
"""

TRIP_ONLY = """
name: trip_only
params: {bay: {type: int}}
equipment: ["bay{bay}"]
start: open_breaker
steps:
  open_breaker: {tool: device, args: {command: trip}, timeout_ms: 60000, next: report}
  report: {tool: note, args: {text: "bay {bay} open"}}
"""

WAIT_THEN_CLOSE = """
name: wait_then_close
params: {bay: {type: int}}
equipment: ["bay{bay}"]
start: settle
steps:
  settle: {tool: delay, args: {ms: 3000}, timeout_ms: 60000, next: close_breaker}
  close_breaker: {tool: device, args: {command: close}, timeout_ms: 60000, next: report}
  report: {tool: note, args: {text: "bay {bay} closed"}}
"""


class Rig:
    def __init__(self, tmp: Path, extra_config: str = "") -> None:
        self.tmp = tmp
        (tmp / "procedures").mkdir()
        (tmp / "procedures" / "close_only.yaml").write_text(CLOSE_ONLY)
        (tmp / "procedures" / "wait_then_close.yaml").write_text(WAIT_THEN_CLOSE)
        (tmp / "procedures" / "trip_only.yaml").write_text(TRIP_ONLY)
        cfg = (REPO / "examples" / "controller" / "bay1.yaml").read_text()
        # the device is stopped while a command waits: the link must not give up on it
        # (and fail the step) before the controller is killed
        cfg = cfg.replace("  port: sim\n", "  port: sim\n  response_timeout_ms: 10000\n")
        (tmp / "bay.yaml").write_text(cfg + extra_config)
        self.sock = tmp / "ctl.sock"
        self.sim = Sim("--pty", "--spring-ms", "100", link=tmp / "dev.pty")
        self.ctl: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        self.err = self.tmp / f"run{self.runs}.err"
        self.ctl = start_run(
            self.sim.port,
            "--config", str(self.tmp / "bay.yaml"),
            "--state", str(self.tmp / "state"),
            "--procedures", str(self.tmp / "procedures"),
            "--control", str(self.sock),
            stderr=self.err.open("w"),
        )  # fmt: skip
        wait_running(self.ctl, self.err)

    def kill(self) -> None:
        assert self.ctl is not None
        self.ctl.kill()
        self.ctl.communicate(timeout=30)
        self.ctl = None

    def ask(self, obj: dict) -> dict:
        end = time.monotonic() + 20
        while True:
            try:
                return request(self.sock, obj)
            except ControlUnavailable:
                assert time.monotonic() < end, "the control socket never answered"
                time.sleep(0.05)

    def wait(self, sid: str, pred, timeout: float = 30.0) -> dict:
        end = time.monotonic() + timeout
        st: dict = {}
        while time.monotonic() < end:
            st = self.ask({"op": "status", "session": sid})
            if st.get("ok") and pred(st["status"]):
                return st["status"]
            time.sleep(0.02)
        raise AssertionError(f"session {sid} never got there: {st}")

    def close(self) -> tuple[dict, dict]:
        if self.ctl is not None:
            self.ctl.send_signal(signal.SIGTERM)
            self.ctl.communicate(timeout=30)
        return sim_counts(self.sim.stop(timeout_s=10))


def _lose_it(rig: Rig) -> None:
    """The command never reaches the breaker: the stopped board (which read nothing of it)
    is power-cycled, a new one answering on the same path, its breaker open."""
    rig.sim.proc.kill()
    rig.sim.proc.communicate(timeout=20)
    rig.sim = Sim("--pty", "--spring-ms", "100", link=rig.tmp / "dev.pty")


def test_a_close_lost_on_the_line_before_a_restart_is_failed_not_resent(tmp_path):
    rig = Rig(tmp_path)
    try:
        rig.start()
        rig.ask({"op": "list"})  # serving, and the link is up by the first status line
        time.sleep(1.5)
        os.kill(rig.sim.pid, signal.SIGSTOP)  # the device reads nothing from here
        r = rig.ask({"op": "run", "procedure": "close_only", "params": {"bay": "1"}})
        assert r["ok"], r
        sid = r["session"]
        rig.wait(sid, lambda s: s["state"] == "waiting_for_tool" and s["step"] == "close_breaker")
        time.sleep(0.2)  # its bytes are written, checkpointed (inflight), unanswered
        rig.kill()
        _lose_it(rig)
        rig.start()
        final = rig.wait(sid, lambda s: s["state"] in ("completed", "aborted"))
        assert final["outcome"] == "failed", final
        assert "controller_restarted" in final["text"], final
        # told once, not retried: one failed attempt after the restart
        fails = [x for x in final["results"] if not x["ok"]]
        assert len(fails) == 1 and "controller_restarted" in fails[0]["error"], final
    finally:
        operations, executed = rig.close()
    assert executed.get("CLOSE", 0) == 0, executed
    assert operations.get("close", 0) == 0, operations


def test_a_restored_close_rechecks_the_interlock(tmp_path):
    """The session is killed while waiting before its close; restarted, the close step
    runs after the restart and is refused: interlock bay2 has no data (no network)."""
    rig = Rig(tmp_path)
    try:
        rig.start()
        r = rig.ask({"op": "run", "procedure": "wait_then_close", "params": {"bay": "1"}})
        assert r["ok"], r
        sid = r["session"]
        rig.wait(sid, lambda s: s["step"] == "settle" and s["state"] == "waiting_for_tool")
        rig.kill()
        rig.start()
        final = rig.wait(sid, lambda s: s["state"] in ("completed", "aborted"))
        assert final["outcome"] == "failed", final
        assert "controller_restarted" in final["text"] and "interlock" in final["text"], final
    finally:
        _operations, executed = rig.close()
    assert executed.get("CLOSE", 0) == 0, executed


# -- the state folder -------------------------------------------------------------------


def _run_state(tmp: Path, state: Path, **popen) -> subprocess.CompletedProcess:
    with Sim("--pty", link=tmp / "dev.pty") as sim:
        proc = start_run(sim.port, "--state", str(state), "--duration", "1", **popen)
        out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_the_state_folder_is_created_private_whatever_the_umask(tmp_path):
    state = tmp_path / "new" / "state"
    done = _run_state(tmp_path, state, preexec_fn=lambda: os.umask(0))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_a_state_folder_writable_by_others_is_refused_naming_it(tmp_path):
    state = tmp_path / "open"
    state.mkdir()
    os.chmod(state, 0o777)
    done = _run_state(tmp_path, state)
    assert done.returncode == 2, done.stderr
    assert str(state) in done.stderr and "writable" in done.stderr, done.stderr
    assert not (state / "agent.sqlite").exists()


def test_a_state_folder_of_another_user_is_refused_naming_it(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a folder another user owns")
    state = tmp_path / "theirs"
    state.mkdir(mode=0o700)
    os.chown(state, NOBODY, NOBODY)
    done = _run_state(tmp_path, state)
    assert done.returncode == 2, done.stderr
    assert str(state) in done.stderr and "owned by uid 65534" in done.stderr, done.stderr
