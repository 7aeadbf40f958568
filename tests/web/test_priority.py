"""The processes beside the controller (`goosectl web`, `goosectl uplink`) run every thread
SCHED_IDLE by default, without the privilege to raise a priority, so the controller wins
every contention for a CPU; `--priority normal` leaves them as started (the default of
`goosectl fleet collect`, the central side). Read from /proc, as `chrt -p` would show."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.procs import REPO, goosectl_argv

#: no CAP_SYS_NICE: what an engineer's account has
UNPRIVILEGED = ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice"]
SCHED_OTHER, SCHED_IDLE = 0, 5


def _argv(which: str, tmp: Path) -> list[str]:
    if which == "web":
        return ["web", "--control", str(tmp / "none.sock"), "--bind", "127.0.0.1:0"]
    if which == "uplink":
        return ["uplink", "--state", str(tmp), "--control", str(tmp / "none.sock"),
                "--broker", "mqtt://127.0.0.1:1", "--site", "s", "--bay", "b"]  # fmt: skip
    return ["fleet", "collect", "--broker", "mqtt://127.0.0.1:1", "--db", str(tmp / "f.sqlite")]


def _policies(pid: int) -> set[int]:
    """The scheduling policy of each of the process's threads (stat field 41)."""
    out = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        out.add(int(stat.rpartition(")")[2].split()[38]))
    return out


@pytest.mark.parametrize("which", ["web", "uplink", "collect"])
@pytest.mark.parametrize("priority", ["idle", "normal"])
def test_a_sidecar_lowers_every_thread(which: str, priority: str, tmp_path: Path) -> None:
    prefix = UNPRIVILEGED if os.geteuid() == 0 else []
    extra = ["--priority", priority] if which == "collect" or priority == "normal" else []
    proc = subprocess.Popen(
        [*prefix, *goosectl_argv(*_argv(which, tmp_path), *extra)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline()
        time.sleep(1.0)  # its threads started (the uplink's and collector's links)
        assert proc.poll() is None, said + proc.stderr.read()
        policies = _policies(proc.pid)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    if priority == "idle":
        assert "SCHED_IDLE" in said, said
        assert policies == {SCHED_IDLE}, policies
    else:
        assert "normal CPU priority" in said, said
        assert policies == {SCHED_OTHER}, policies
