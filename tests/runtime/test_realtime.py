"""`goosectl run --realtime`: the kernel really schedules it FIFO with its memory locked,
and a host that refuses says which capability is missing (exit 2), never half-applies."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.peers import require_binary, require_root
from tests.support.procs import Sim, start_run, wait_running


def _run(tmp_path: Path, port: str, *extra: str, prefix: tuple[str, ...] = ()):
    return start_run(
        port,
        "--quiet",
        "--control",
        str(tmp_path / "ctl.sock"),
        "--duration",
        "20",
        *extra,
        prefix=prefix,
    )


def test_realtime_runs_fifo_with_memory_locked_on_its_cpu(tmp_path):
    require_root()
    sim = Sim("--pty", link=tmp_path / "d.pty")
    cpu = max(os.sched_getaffinity(0))
    ctl = _run(tmp_path, sim.port, "--realtime", "--rt-priority", "20", "--cpu", str(cpu))
    try:
        line = json.dumps(wait_running(ctl))
        assert f"cpu {cpu}" in line and "SCHED_FIFO 20" in line and "memory locked" in line
        assert os.sched_getscheduler(ctl.pid) == os.SCHED_FIFO
        assert os.sched_getparam(ctl.pid).sched_priority == 20
        assert os.sched_getaffinity(ctl.pid) == {cpu}
        # its helper threads (output pump, journal writer) one priority below the loop: a
        # helper holding the GIL is never preempted by a normal task while the loop waits
        helpers = [int(t) for t in os.listdir(f"/proc/{ctl.pid}/task") if int(t) != ctl.pid]
        assert helpers, "the output pump's thread at least"
        assert {
            (os.sched_getscheduler(t), os.sched_getparam(t).sched_priority) for t in helpers
        } == {(os.SCHED_FIFO, 19)}
        status = Path(f"/proc/{ctl.pid}/status").read_text()
        locked_kb = int(next(x for x in status.splitlines() if x.startswith("VmLck")).split()[1])
        assert locked_kb > 10_000, status  # the interpreter and its heap, not a few pages
    finally:
        ctl.terminate()
        ctl.communicate(timeout=20)
        sim.stop()


def test_realtime_refused_names_the_missing_capability(tmp_path):
    require_root()
    setpriv = require_binary("setpriv", "util-linux")
    sim = Sim("--pty", link=tmp_path / "d.pty")
    try:
        for drop, why in (
            ("-sys_nice,-ipc_lock", ("CAP_IPC_LOCK", "RLIMIT_MEMLOCK")),  # mlockall first
            ("-sys_nice", ("CAP_SYS_NICE",)),
        ):
            prefix = (setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}")
            ctl = _run(tmp_path, sim.port, "--realtime", prefix=prefix)
            out, err = ctl.communicate(timeout=60)
            assert ctl.returncode == 2, (out, err)
            assert "--realtime" in err and "Traceback" not in err, err
            assert any(w in err for w in why), err
    finally:
        sim.stop()
