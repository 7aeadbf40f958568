"""Load, no loss: N controllers' journals (50 by default) at 200 rows/s each, through
their uplinks (one `goosectl uplink` process each) and a real 3-node NATS cluster into
the collector's store: every (controller, seq) of every journal stored exactly once, no
gap, and the publish-to-stored latency reported (p50, p99).

The journals are written by the product's journal and its writer thread
(`tests/fleet/load_writers.py`), not by 50 full controllers, which do not fit on two
cores beside 50 uplinks and the cluster. GOOSECTL_FLEET_LOAD_S sets the duration (60 s in
CI; the benchmark's 5 minutes with 300), GOOSECTL_FLEET_LOAD_N the number of journals.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from goosectl.controller.fleet.store import Store
from tests.fleet.bays import spawn, start_collector, wait_until
from tests.fleet.brokers import NatsCluster
from tests.support.peers import REPO

SECONDS = float(os.environ.get("GOOSECTL_FLEET_LOAD_S", "60"))
N = int(os.environ.get("GOOSECTL_FLEET_LOAD_N", "50"))
RATE = 200.0


def percentile(values: list[int], p: float) -> int:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


@pytest.mark.slow
def test_every_row_of_every_journal_is_stored_exactly_once(
    nats: NatsCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "fleet.sqlite")
    collector = start_collector(
        nats.url("n3", "n2", "n1"), db, "collector-load", tmp_path / "collector.log"
    )
    uplinks = [
        spawn(
            "uplink",
            "--state",
            str(tmp_path / f"c{i:02d}"),
            "--control",
            str(tmp_path / "none.sock"),
            "--broker",
            nats.url(*(("n1", "n2", "n3")[i % 3 :] + ("n1", "n2", "n3")[: i % 3])),
            "--site",
            "load",
            "--bay",
            f"c{i:02d}",
            log=tmp_path / f"uplink{i:02d}.log",
        )
        for i in range(N)
    ]
    try:
        writers = subprocess.run(
            [sys.executable, "-m", "tests.fleet.load_writers", str(tmp_path), str(N),
             str(RATE), str(SECONDS)],
            cwd=REPO, capture_output=True, text=True, timeout=SECONDS + 300, check=True,
        )  # fmt: skip
        last = {
            f"load/{o['controller']}": o["seq"]
            for o in map(json.loads, writers.stdout.splitlines()[1:])
        }
        assert len(last) == N and min(last.values()) >= RATE * SECONDS * 0.5
        store = Store(db)

        def covered() -> bool:
            got = dict(store.query("SELECT controller, last_seq FROM fleet_bays"))
            return all(got.get(c, 0) >= s for c, s in last.items())

        wait_until(covered, 300, "every journal's last row stored", every_s=1.0)
        for c, top in last.items():
            count, lo, hi = store.query(
                "SELECT COUNT(*), MIN(seq), MAX(seq) FROM fleet_rows WHERE controller = ?",
                (c,),
            )[0]
            journal = sqlite3.connect(tmp_path / c.split("/")[1] / "bay.sqlite")
            own = journal.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM journal").fetchone()
            journal.close()
            if (count, lo, hi) != own:
                have = {
                    r[0]
                    for r in store.query("SELECT seq FROM fleet_rows WHERE controller = ?", (c,))
                }
                missing = sorted(set(range(1, top + 1)) - have)
                raise AssertionError(f"{c}: {count} rows, journal {own}; missing {missing[:20]}...")
            assert (count, lo, hi) == own == (top, 1, top), c  # each row once, none missing
        assert store.gaps() == []
        lat = [
            r[0]
            for r in store.query("SELECT stored_ns - sent_ns FROM fleet_rows WHERE sent_ns > 0")
        ]
        store.close()
        total = sum(last.values())
        with capsys.disabled():
            print(
                f"\nfleet load: {N} journals x {RATE:.0f} rows/s x {SECONDS:.0f} s: "
                f"{total} rows stored once each, 0 gaps; publish-to-stored "
                f"p50 {percentile(lat, 50) / 1e6:.1f} ms, p99 {percentile(lat, 99) / 1e6:.1f} ms"
            )
    finally:
        for p in [*uplinks, collector]:
            p.terminate()
        for p in [*uplinks, collector]:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
