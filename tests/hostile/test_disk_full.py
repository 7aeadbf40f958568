"""Row 10 of the hostile-inputs issue: the disk fills up under a running controller.

Real processes and a real full disk: the breaker simulator on a pty, `goosectl run
--no-network` with the agent, its journals on a 2 MB tmpfs the test mounts (and always
unmounts), filled with a file until the kernel says ENOSPC, then emptied again. The
device's own counters say what was operated.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from goosectl.controller.shell.control import ControlUnavailable, request
from tests.support.procs import Sim, sim_counts, start_run, wait_running
from tests.support.smallfs import fill, small_tmpfs

REPO = Path(__file__).resolve().parents[2]

PROCEDURE = """
name: cycle
params: {bay: {type: int}}
equipment: ["bay{bay}"]
start: close_breaker
steps:
  close_breaker: {tool: device, args: {command: close}, timeout_ms: 4000, next: settle}
  settle: {tool: delay, args: {ms: 400}, next: open_breaker}   # past the anti-pump window
  open_breaker: {tool: device, args: {command: trip}, timeout_ms: 4000, next: verify_open}
  verify_open: {tool: wait_device, args: {position: "off"}, timeout_ms: 4000, next: report}
  report: {tool: note, args: {text: "bay {bay} cycled"}}
"""


class Rig:
    """The simulator and one controller at a time; stderr goes to a file on the real disk."""

    def __init__(self, tmp: Path, journal: Path | None, state: Path) -> None:
        self.tmp, self.journal, self.state = tmp, journal, state
        (tmp / "procedures").mkdir(exist_ok=True)
        (tmp / "procedures" / "cycle.yaml").write_text(PROCEDURE)
        cfg = (REPO / "examples" / "controller" / "bay1.yaml").read_text()
        (tmp / "bay.yaml").write_text(cfg)
        self.sock = tmp / "ctl.sock"
        self.sim = Sim("--pty", "--spring-ms", "100", link=tmp / "dev.pty")
        self.port = self.sim.port
        self.ctl: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        self.err = self.tmp / f"run{self.runs}.err"
        args = [
            "--config",
            str(self.tmp / "bay.yaml"),
            "--state",
            str(self.state),
            "--procedures",
            str(self.tmp / "procedures"),
            "--control",
            str(self.sock),
            "--journal-queue",
            "16",
        ]
        if self.journal is not None:
            args += ["--journal", str(self.journal)]
        self.ctl = start_run(self.port, *args, stderr=self.err.open("w"))
        wait_running(self.ctl, self.err)

    def stop(self) -> dict:
        """SIGTERM; the stop report."""
        assert self.ctl is not None
        self.ctl.send_signal(signal.SIGTERM)
        out, _ = self.ctl.communicate(timeout=30)
        assert self.ctl.returncode == 0, self.err.read_text()
        self.ctl = None
        return json.loads(out.strip().splitlines()[-1])

    def ask(self, obj: dict) -> dict:
        end = time.monotonic() + 10
        while True:
            try:
                return request(self.sock, obj)
            except ControlUnavailable:
                assert time.monotonic() < end, "the control socket never answered"
                time.sleep(0.05)

    def cycle(self) -> dict:
        """Run the procedure to its end; its final status."""
        r = self.ask({"op": "run", "procedure": "cycle", "params": {"bay": "1"}})
        assert r["ok"], r
        return self.wait(r["session"], lambda s: s["state"] in ("completed", "aborted"))

    def wait(self, sid: str, pred, timeout: float = 30.0) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            st = self.ask({"op": "status", "session": sid})
            if st.get("ok") and pred(st["status"]):
                return st["status"]
            time.sleep(0.02)
        raise AssertionError(f"session {sid} never got there: {st}")

    def stderr_shows(self, text: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while text not in self.err.read_text():
            assert self.ctl is not None and self.ctl.poll() is None, self.err.read_text()
            assert time.monotonic() < end, f"stderr never showed {text!r}:\n{self.err.read_text()}"
            time.sleep(0.05)

    def device_counts(self) -> tuple[dict, dict]:
        """Stop the simulator: (operations, executed commands) as the device counted them."""
        return sim_counts(self.sim.stop(timeout_s=10))

    def close(self) -> None:
        for p in (self.ctl, self.sim.proc):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def journal_events(path: Path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute(
            "SELECT seq, event, source, target, effects FROM journal WHERE machine = 'journal' "
            "ORDER BY seq"
        ).fetchall()
    finally:
        con.close()


def missing_seqs_are_all_named(path: Path) -> None:
    con = sqlite3.connect(path)
    seqs = [r[0] for r in con.execute("SELECT seq FROM journal ORDER BY seq")]
    con.close()
    present = set(seqs)
    ranges = [
        tuple(int(x) for x in source.removeprefix("seq ").split("-"))
        for _, event, source, _, _ in journal_events(path)
        if event == "rows_lost"
    ]
    silent = [
        s
        for s in range(1, seqs[-1] + 1)
        if s not in present and not any(a <= s <= b for a, b in ranges)
    ]
    assert not silent, f"rows missing with no rows_lost row naming them: {silent[:10]}"


def test_bay_journal_on_a_full_disk_control_continues_and_the_journal_resumes(tmp_path):
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        journal = disk / "bay.sqlite"
        rig = Rig(tmp_path, journal, tmp_path / "state")
        try:
            rig.start()
            assert rig.cycle()["outcome"] == "done"
            filler = fill(disk)
            # the controller keeps operating the breaker while its journal cannot commit
            second = rig.cycle()
            assert second["state"] == "completed" and second["outcome"] == "done", second
            rig.stderr_shows("alarm journal:")
            assert "database or disk is full" in rig.err.read_text()
            rig.stderr_shows("alarms[journal]")  # the status line
            assert rig.ask({"op": "list"})["ok"]
            filler.unlink()
            rig.stderr_shows("journal: commits resumed")
            third = rig.cycle()
            assert third["outcome"] == "done"
            report = rig.stop()
            operations, executed = rig.device_counts()
        finally:
            rig.close()
        assert operations == {"close": 3, "open": 3}, operations
        assert executed.get("CLOSE") == 3 and executed.get("TRIP") == 3, executed

        bay = report["journal"]["bay"]
        assert bay["errors"] >= 1 and bay["state"] == "ok" and bay["error"] is None
        events = journal_events(journal)
        kinds = [e[1] for e in events]
        assert "io_error" in kinds and "io_ok" in kinds
        assert kinds.index("io_error") < kinds.index("io_ok")
        assert "database or disk is full" in events[kinds.index("io_error")][4]
        lost = [e for e in events if e[1] == "rows_lost"]
        assert sum(int(e[3].split()[0]) for e in lost) == bay["lost_rows"]
        assert bay["lost_rows"] > 0, "the 16-row queue should have overflowed while full"
        missing_seqs_are_all_named(journal)


def test_agent_journal_on_a_full_disk_refuses_procedures_and_survives_a_restart(tmp_path):
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        state = disk / "state"
        rig = Rig(tmp_path, None, state)
        try:
            rig.start()
            assert rig.cycle()["outcome"] == "done"
            filler = fill(disk)
            # nothing that cannot be journaled operates: the request is refused, plainly
            refused = rig.ask({"op": "run", "procedure": "cycle", "params": {"bay": "1"}})
            assert not refused["ok"] and "database or disk is full" in refused["error"], refused
            rig.stderr_shows("alarm agent_journal:")
            assert rig.ask({"op": "list"})["ok"]  # the controller still answers

            # stopped and started again on the full disk: no traceback, the alarm again
            # (closing the journals gives their WAL files back: fill what they freed)
            rig.stop()
            topped = fill(disk, "filler2")
            rig.start()
            rig.stderr_shows("alarm agent_journal:")
            again = rig.ask({"op": "run", "procedure": "cycle", "params": {"bay": "1"}})
            assert not again["ok"] and "disk" in again["error"], again

            filler.unlink()
            topped.unlink()
            # the next request finds the disk back: journaled, run, completed
            assert rig.cycle()["outcome"] == "done"
            rig.stderr_shows("agent_journal: commits resumed")
            report = rig.stop()
            operations, executed = rig.device_counts()
        finally:
            rig.close()
        assert operations == {"close": 2, "open": 2}, operations  # the refused ones: none
        assert executed.get("CLOSE") == 2 and executed.get("TRIP") == 2, executed
        assert report["journal"]["agent"]["error"] is None

        con = sqlite3.connect(state / "agent.sqlite")
        own = [r[0] for r in con.execute("SELECT event FROM journal WHERE machine='journal'")]
        con.close()
        assert "io_error" in own and own[-1] == "io_ok", own
