"""The benchmarks' witness of the host's own scheduling latency (`lab.host_latency`):
cyclictest beside a benchmark, one FIFO 99 thread per CPU, summarised when the block ends,
without touching the host's CPU wake-up latency setting that the benchmark measures under."""

from __future__ import annotations

import os
import time

import pytest

import goosectl.lab.host_latency as host_latency
from goosectl.controller.shell.realtime import cpu_latency_limit
from goosectl.lab.host_latency import HostLatency, HostLatencyError
from tests.support.peers import require_binary, require_root


def test_the_witness_reports_every_cpu_and_leaves_the_wakeup_setting_alone():
    require_root()
    require_binary("cyclictest", "rt-tests")
    before = cpu_latency_limit()
    with HostLatency(interval_us=1000) as witness:
        time.sleep(1.0)
        during = cpu_latency_limit()
    assert during == before, "cyclictest must not hold /dev/cpu_dma_latency (--laptop)"
    res = witness.result
    assert res is not None
    assert len(res.per_cpu) == len(os.sched_getaffinity(0))
    for wakeups, avg, worst in res.per_cpu:
        assert wakeups >= 200  # ~1,000 in 1 s: each thread ran the whole block
        assert 0 <= avg <= worst
    assert res.max_us == max(w for _, _, w in res.per_cpu)
    assert res.as_dict()["max_us"] == res.max_us


def test_a_missing_cyclictest_is_named_with_its_package(monkeypatch):
    monkeypatch.setattr(host_latency.shutil, "which", lambda name: None)
    with pytest.raises(HostLatencyError, match="rt-tests"), HostLatency():
        pass


def test_the_blocks_own_error_wins_over_the_witness():
    require_root()
    require_binary("cyclictest", "rt-tests")
    with pytest.raises(KeyError), HostLatency() as witness:
        raise KeyError("the benchmark failed")
    assert witness.result is None
