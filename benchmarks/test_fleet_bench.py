"""The fleet under load: 50 controllers' journals x 200 rows/s through their uplinks and a
real 3-node NATS cluster into the collector's store, for 5 minutes (`--short`: 20 s of
load, 200,000 rows asked, ~2,000 a controller; starting the cluster and 50 uplink
processes comes on top): the p99 rests on ~200,000 rows, the baseline's (10 s) on 2,000. A
collector slower than the 10,000 rows/s asked leaves a backlog that grows with the run, so
half of the former 40 s shows it at about half the size in the catch-up time: the budget
stays, and the full run (5 minutes) is the one that judges a slow leak.

Asserted outright (no budget, a correctness property): every (controller, seq) of every
journal is in the central store exactly once, no gap. Measured: every row's
publish-to-stored time (the uplink's publish to the collector's commit, both UTC on this
machine), p50 and p99, beside the same pipeline carrying one controller at 200 rows/s,
measured in the same run on the same cluster: the ratio is what 50 controllers cost over
one. Also reported: journaled-to-stored (the row's own UTC to the commit, the uplink's
reading and batching included). The journals are the product's journal and writer
thread (`tests/fleet/load.py`).

Budgets, each asserted (unmet: XFAIL with the numbers, `benchmarks/percentiles.py`):
publish-to-stored p99 under `BUDGET_P99_MS`; the last row journaled is stored within
`BUDGET_CATCH_UP_S` (the collector keeps up, not a queue that only grows); the load's p50
at most `BUDGET_P50_RATIO` times the baseline's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.percentiles import check_budget, ratio, summarise
from tests.fleet.brokers import NatsCluster, running_cluster
from tests.fleet.load import run_load

GROUP = "fleet: publish-to-stored (journal row -> central store)"
N = 50
RATE = 200.0
#: publish-to-stored p99 of 50 x 200 rows/s, the 3 nodes, 50 uplinks and the collector on
#: the same machine
BUDGET_P99_MS = 2_000.0
#: the last row journaled, from its UTC to its commit in the store
BUDGET_CATCH_UP_S = 10.0
#: the load's p50 over one controller's (the same pipeline, the same run)
BUDGET_P50_RATIO = 20.0


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    with running_cluster(tmp_path_factory.mktemp("nats")) as cluster:
        yield cluster


def test_fifty_controllers_every_row_once_and_publish_to_stored(
    benchmark,
    nats: NatsCluster,
    tmp_path: Path,
    short: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seconds = 20.0 if short else 300.0
    # the baseline first: one controller, the same cluster, uplink and collector
    one = run_load(nats, tmp_path / "one", 1, RATE, 10.0 if short else 30.0, site="one")
    load = run_load(nats, tmp_path / "fleet", N, RATE, seconds, site="fleet")
    for run in (one, load):  # every row once, no gap: run_load asserted it; and timed
        assert len(run.latencies_ns) == run.total >= 1000

    base = summarise(f"1 controller x {RATE:.0f} rows/s", GROUP, one.latencies_ns)
    res = summarise(f"{N} controllers x {RATE:.0f} rows/s", GROUP, load.latencies_ns)
    ratio(res, base)
    e2e_base = summarise("1 controller, journaled-to-stored", GROUP, one.journaled_ns)
    e2e = summarise(f"{N} controllers, journaled-to-stored", GROUP, load.journaled_ns)
    ratio(e2e, e2e_base)
    benchmark.extra_info.update(
        {
            "baseline": base.as_dict(),
            "load": res.as_dict(),
            "baseline_journaled_to_stored": e2e_base.as_dict(),
            "load_journaled_to_stored": e2e.as_dict(),
            "rows": load.total,
            "seconds": seconds,
            "catch_up_s": round(load.catch_up_s, 2),
            "baseline_catch_up_s": round(one.catch_up_s, 2),
        }
    )
    benchmark.pedantic(lambda: None, rounds=1)
    with capsys.disabled():
        print(
            f"\nfleet: {N} x {RATE:.0f} rows/s x {seconds:.0f} s: {load.total} rows, each stored "
            f"once, 0 gaps; publish-to-stored p50 {res.p50 / 1000:.1f} ms, p99 "
            f"{res.p99 / 1000:.1f} ms (1 controller: p50 {base.p50 / 1000:.1f} ms, p99 "
            f"{base.p99 / 1000:.1f} ms); journaled-to-stored p50 {e2e.p50 / 1000:.1f} ms, "
            f"p99 {e2e.p99 / 1000:.1f} ms (1 controller: {e2e_base.p50 / 1000:.1f}, "
            f"{e2e_base.p99 / 1000:.1f} ms); the last row stored {load.catch_up_s:.2f} s after "
            "it was journaled"
        )
    numbers = (
        f"{load.total} rows ({load.total / (N * RATE * seconds):.0%} of the rate asked); "
        f"p99 {res.p99 / 1000:.0f} ms (budget {BUDGET_P99_MS:.0f}), the last row stored "
        f"{load.catch_up_s:.2f} s after it was journaled (budget {BUDGET_CATCH_UP_S:.0f}), p50 "
        f"{res.p50 / 1000:.0f} ms = {res.p50 / max(base.p50, 1e-9):.1f}x one controller's "
        f"{base.p50 / 1000:.0f} ms (budget {BUDGET_P50_RATIO:.0f}x)"
    )
    check_budget(
        res.p99 / 1000 < BUDGET_P99_MS
        and load.catch_up_s < BUDGET_CATCH_UP_S
        and res.p50 <= BUDGET_P50_RATIO * base.p50,
        numbers,
    )
