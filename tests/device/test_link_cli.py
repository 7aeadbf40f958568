"""The device link as an operator meets it through `goosectl run`: a controller replacing
another on a running simulator, and a device that has died.

Real processes: `goosectl sim --pty` and `goosectl run --no-network`. What is judged is
what the operator reads on stderr (alarms, log lines) and what the device counted.
"""

from __future__ import annotations

import re

from tests.support.procs import Sim, start_run, wait_running


def _run_for(port: str, state, seconds: float) -> str:
    """`goosectl run` on `port` for `seconds`; its stderr (it must exit 0)."""
    proc = start_run(port, "--state", str(state), "--duration", str(seconds))
    try:
        wait_running(proc)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    return err


def test_a_controller_with_a_new_state_folder_resynchronises_with_a_running_device(tmp_path):
    with Sim("--pty", link=tmp_path / "dev.pty") as sim:
        first = _run_for(sim.port, tmp_path / "first", 4)
        assert "link=up" in first
        second = _run_for(sim.port, tmp_path / "second", 3)
    # the device's newest command is far above the new controller's seq 1: the link says it
    # moved its counter, once, and never went down over it
    lines = [x for x in second.splitlines() if "sequence" in x and "device link" in x]
    assert len(lines) == 1, second
    assert re.search(r"device link: command sequence resynchronised", lines[0]), lines
    assert "alarm device_link" not in second, second
    assert "link=up" in second


def test_a_dead_device_is_one_alarm_for_the_whole_outage(tmp_path):
    # a board that stops answering at once: the port opens, nothing ever answers
    with Sim("--pty", "--stall", link=tmp_path / "dev.pty") as sim:
        err = _run_for(sim.port, tmp_path / "state", 8)
    raised = [x for x in err.splitlines() if re.search(r"alarm device_link\b(?!: cleared)", x)]
    cleared = [x for x in err.splitlines() if "alarm device_link: cleared" in x]
    assert len(raised) == 1 and not cleared, err
