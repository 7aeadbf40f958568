"""A controller descheduled while its device answers: `goosectl run` stopped (SIGSTOP) for
longer than every answer timeout of the link, the device's answer waiting in the pty when
it runs again (SIGCONT), as on a busy host or a VM whose vCPU was stolen.

Real processes: `goosectl sim --pty` and `goosectl run` on a veth pair in a namespace the
test makes. The keep-alive PING is put in flight deterministically: the simulator is
stopped first, so the controller's PING waits in the pty; then the controller is stopped
and the simulator resumed, so the device answers while the controller cannot read. What
is judged is what the operator reads on stderr: the device link alarm and the status
line's `link=`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from goosectl.lab.netns import netlab
from tests.support.peers import REPO, require_root
from tests.support.procs import Sim

#: the link's timing for these runs: 2.5 s for an answer, one retry, so the whole answer
#: budget of a PING (5 s) passes while the controller is stopped; the PING itself comes
#: after a second of quiet (the link's idle_ms)
TIMING = {"response_timeout_ms": 2500, "max_retries": 1}
#: from stopping the device to stopping the controller: the PING is sent by then (after at
#: most the idle second) and its first timeout (2.5 s after it) has not come
PING_SENT_S = 1.5
#: from stopping the device to resuming the controller: past the PING's last timeout
STOPPED_UNTIL_S = 6.5
#: how long the resumed controller is watched
WATCH_S = 2.5


class Controller:
    """`goosectl run` in a namespace on one end of a veth pair; stderr read by a thread."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def mark(self) -> int:
        with self._lock:
            return len(self.lines)

    def since(self, mark: int) -> list[str]:
        with self._lock:
            return self.lines[mark:]

    def wait_for(self, text: str, timeout_s: float = 30.0) -> None:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if any(text in x for x in self.since(0)):
                return
            assert self.proc.poll() is None, "\n".join(self.lines)
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} from the controller:\n" + "\n".join(self.lines))

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self._reader.join(10)
        return "\n".join(self.lines)


@contextmanager
def bay(tmp_path: Path) -> Iterator[tuple[Sim, Controller]]:
    """The simulator on a pty and the controller on a veth pair in a fresh namespace, the
    link up; both stopped (and resumed first, if stopped) when the block ends."""
    require_root()
    cfg = yaml.safe_load((REPO / "examples" / "controller" / "bay1.yaml").read_text())
    cfg["device"].update(TIMING)
    (tmp_path / "bay.yaml").write_text(yaml.safe_dump(cfg))
    with netlab() as lab, Sim("--pty", link=tmp_path / "dev.pty") as sim:
        ns, peer = lab.namespace(), lab.namespace()
        lab.veth(ns, peer, a="rx0", b="tx0")
        argv = [
            sys.executable, "-u", "-m", "goosectl", "run", "--config", str(tmp_path / "bay.yaml"),
            "--iface", "rx0", "--port", sim.port, "--state", str(tmp_path / "state"),
            "--control", str(tmp_path / "ctl.sock"), "--no-reflex",
        ]  # fmt: skip
        proc = ns.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ctl = Controller(proc)
        try:
            ctl.wait_for("link=up")
            yield sim, ctl
        finally:
            os.kill(sim.pid, signal.SIGCONT)
            ctl.stop()


def _starve(sim: Sim, ctl: Controller, *, device_answers: bool) -> list[str]:
    """Stop the device, let the controller send its PING, stop the controller, let the
    device answer it (or not: `device_answers`), resume the controller after every timeout
    of that PING; what the controller said afterwards."""
    t0 = time.monotonic()
    os.kill(sim.pid, signal.SIGSTOP)
    time.sleep(PING_SENT_S)
    ctl.signal(signal.SIGSTOP)
    if device_answers:
        os.kill(sim.pid, signal.SIGCONT)
    time.sleep(STOPPED_UNTIL_S - (time.monotonic() - t0))
    mark = ctl.mark()
    ctl.signal(signal.SIGCONT)
    time.sleep(WATCH_S)
    os.kill(sim.pid, signal.SIGCONT)
    return ctl.since(mark)


def _link_alarms(lines: list[str]) -> list[str]:
    return [x for x in lines if "alarm device_link" in x and "cleared" not in x]


def test_a_device_that_answered_while_the_controller_was_stopped_stays_up(tmp_path):
    with bay(tmp_path) as (sim, ctl):
        after = _starve(sim, ctl, device_answers=True)
    status = [x for x in after if "link=" in x]
    assert status, after
    assert not _link_alarms(after), "\n".join(after)
    assert all("link=up" in x for x in status), "\n".join(status)


def test_a_device_that_did_not_answer_is_down_once_the_controller_runs_again(tmp_path):
    with bay(tmp_path) as (sim, ctl):
        after = _starve(sim, ctl, device_answers=False)
    assert _link_alarms(after), "\n".join(after)
