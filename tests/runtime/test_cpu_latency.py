"""`goosectl run --cpu-latency-us N`: the host's CPU wake-up latency limit (PM QoS) is held
at N while `run` lives and given back when it stops; a host without it is told why."""

from __future__ import annotations

import json

import pytest

from goosectl.controller.shell.realtime import CpuLatency, RealtimeError, cpu_latency_limit
from tests.support.peers import require_root
from tests.support.procs import Sim, start_run, wait_running


def test_cpu_latency_is_held_while_running_and_given_back(tmp_path):
    require_root()
    before = cpu_latency_limit()
    assert before > 0, "another process holds the limit at 0: nothing to observe"
    sim = Sim("--pty", link=tmp_path / "d.pty")
    ctl = start_run(
        sim.port, "--quiet", "--control", str(tmp_path / "ctl.sock"), "--duration", "20",
        "--cpu-latency-us", "0",
    )  # fmt: skip
    try:
        running = wait_running(ctl)
        assert "cpu wake-up latency 0 us" in json.dumps(running)
        assert cpu_latency_limit() == 0  # idle CPUs now poll instead of halting
    finally:
        ctl.terminate()
        ctl.communicate(timeout=20)
        sim.stop()
    assert ctl.returncode == 0
    assert cpu_latency_limit() == before


def test_cpu_latency_errors_name_the_device_and_the_range(tmp_path):
    missing = tmp_path / "cpu_dma_latency"
    with pytest.raises(RealtimeError, match=f"{missing} does not exist"):
        CpuLatency(0, device=missing)
    with pytest.raises(RealtimeError, match="not between 0 and"):
        CpuLatency(-1, device=missing)
