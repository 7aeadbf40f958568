"""Load, no loss: N controllers' journals (50 by default) at 200 rows/s each, through
their uplinks (one `goosectl uplink` process each) and a real 3-node NATS cluster into
the collector's store: every (controller, seq) of every journal stored exactly once, no
gap, and the publish-to-stored latency reported (p50, p99).

The run itself is `tests/fleet/load.py`; the 5-minute benchmark with its budgets is
`benchmarks/test_fleet_bench.py`. GOOSECTL_FLEET_LOAD_S sets the duration here (60 s),
GOOSECTL_FLEET_LOAD_N the number of journals.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fleet.brokers import NatsCluster
from tests.fleet.load import percentile, run_load

SECONDS = float(os.environ.get("GOOSECTL_FLEET_LOAD_S", "60"))
N = int(os.environ.get("GOOSECTL_FLEET_LOAD_N", "50"))
RATE = 200.0


@pytest.mark.slow
def test_every_row_of_every_journal_is_stored_exactly_once(
    nats: NatsCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_load(nats, tmp_path, N, RATE, SECONDS)  # asserts each row once, no gap
    lat = run.latencies_ns
    assert len(lat) == run.total
    with capsys.disabled():
        print(
            f"\nfleet load: {N} journals x {RATE:.0f} rows/s x {SECONDS:.0f} s: "
            f"{run.total} rows stored once each, 0 gaps; publish-to-stored "
            f"p50 {percentile(lat, 50) / 1e6:.1f} ms, p99 {percentile(lat, 99) / 1e6:.1f} ms"
        )
