"""One load run for the fleet's load test and its benchmark: N journals at R rows/s each
for S seconds (`tests/fleet/load_writers.py`), one `goosectl uplink` process each over a
real 3-node NATS cluster, one collector; then every (controller, seq) of every journal
checked in the central store (exactly once, no gap) and the publish-to-stored latency of
every row read back.

The journals are written by the product's journal and its writer thread, not by N full
controllers, which do not fit on two cores beside N uplinks and the cluster.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from goosectl.controller.fleet.store import Store
from tests.fleet.bays import spawn, start_collector, wait_until
from tests.fleet.brokers import NatsCluster
from tests.support.peers import REPO

NODES = ("n1", "n2", "n3")


@dataclass
class LoadRun:
    """What one run stored: rows per controller; every row's publish-to-stored time (the
    uplink's publish to the collector's commit) and journaled-to-stored time (the row's
    own UTC to the commit: the uplink's reading and batching too), in ns; and the last
    row's journaled-to-stored time, how far behind the store was when the load ended."""

    n: int
    rate: float
    seconds: float
    rows: dict[str, int]
    latencies_ns: list[int]
    journaled_ns: list[int]
    catch_up_s: float

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def run_load(
    nats: NatsCluster,
    root: Path,
    n: int,
    rate: float,
    seconds: float,
    site: str = "load",
    collector_priority: str = "normal",
) -> LoadRun:
    """Run the load and check the store; raises AssertionError naming a controller's
    missing rows, a duplicate or a gap."""
    root.mkdir(parents=True, exist_ok=True)
    db = str(root / "fleet.sqlite")
    collector = start_collector(
        nats.url("n3", "n2", "n1"), db, f"collector-{site}", root / "collector.log",
        collector_priority,
    )  # fmt: skip
    writers = _writers(root, n, rate, seconds)
    uplinks = [_uplink(nats, root, site, i) for i in range(n)]
    try:
        # rows flow once every uplink is connected (its birth stored): the latencies are
        # the fleet's in service, not 50 processes starting on two cores
        _wait_births(db, site, n)
        last = _written(writers, seconds)
        assert len(last) == n and min(last.values()) >= rate * seconds * 0.5, last
        store = Store(db)
        try:
            wait_until(lambda: _covered(store, site, last), 300, "every journal's last row stored")
            for c, top in last.items():
                _check(store, root, f"{site}/{c}", top)
            assert store.gaps() == []
            rows = store.query("SELECT stored_ns - sent_ns, stored_ns - utc_ns FROM fleet_rows")
            ((catch_up,),) = store.query(
                "SELECT stored_ns - utc_ns FROM fleet_rows ORDER BY utc_ns DESC LIMIT 1"
            )
        finally:
            store.close()
        return LoadRun(
            n, rate, seconds, last, [r[0] for r in rows], [r[1] for r in rows], catch_up / 1e9
        )
    finally:
        if writers.poll() is None:  # an error before they were told to write
            writers.kill()
            writers.communicate()
        _stop([*uplinks, collector])


def percentile(values: list[int], p: float) -> int:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def _uplink(nats: NatsCluster, root: Path, site: str, i: int) -> subprocess.Popen:
    """Controller i's uplink; the first broker rotates over the nodes."""
    order = NODES[i % 3 :] + NODES[: i % 3]
    return spawn(
        "uplink", "--state", str(root / f"c{i:02d}"), "--control", str(root / "none.sock"),
        "--broker", nats.url(*order), "--site", site, "--bay", f"c{i:02d}",
        log=root / f"uplink{i:02d}.log",
    )  # fmt: skip


def _writers(root: Path, n: int, rate: float, seconds: float) -> subprocess.Popen:
    """The journal writers, started and waited for until every journal exists: the uplinks
    start after that, and the writers write once told to (`_written`)."""
    writers = subprocess.Popen(
        [sys.executable, "-m", "tests.fleet.load_writers", str(root), str(n), str(rate),
         str(seconds)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert writers.stdout is not None
    line = writers.stdout.readline()
    if line.strip() != "ready":
        writers.kill()
        raise AssertionError(f"the journal writers did not start: {line}{writers.stderr.read()}")
    return writers


def _written(writers: subprocess.Popen, seconds: float) -> dict[str, int]:
    """Tell the writers to write; the journals' last seqs once they stop. The writers stop
    on time, but their last commits wait for the CPU: on a loaded host closing 50 journals
    took minutes."""
    try:
        out, err = writers.communicate("go\n", timeout=2 * seconds + 600)
    finally:
        if writers.poll() is None:
            writers.kill()
    assert writers.returncode == 0, f"the journal writers failed: {err}"
    return {o["controller"]: o["seq"] for o in map(json.loads, out.splitlines())}


def _wait_births(db: str, site: str, n: int) -> None:
    """Until the store holds the birth of each of the `n` uplinks of `site`."""
    store = Store(db)
    try:
        wait_until(
            lambda: (
                store.query(
                    "SELECT COUNT(*) FROM fleet_bays WHERE site = ? AND birth_ns IS NOT NULL",
                    (site,),
                )[0][0]
                >= n
            ),
            300,
            "every uplink's birth stored",
        )
    finally:
        store.close()


def _covered(store: Store, site: str, last: dict[str, int]) -> bool:
    got = dict(store.query("SELECT controller, last_seq FROM fleet_bays"))
    return all(got.get(f"{site}/{c}", 0) >= s for c, s in last.items())


def _check(store: Store, root: Path, controller: str, top: int) -> None:
    """The controller's central rows are its journal's: each once, none missing."""
    count, lo, hi = store.query(
        "SELECT COUNT(*), MIN(seq), MAX(seq) FROM fleet_rows WHERE controller = ?",
        (controller,),
    )[0]
    journal = sqlite3.connect(root / controller.split("/")[1] / "bay.sqlite")
    own = journal.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM journal").fetchone()
    journal.close()
    if (count, lo, hi) != own:
        have = {
            r[0]
            for r in store.query("SELECT seq FROM fleet_rows WHERE controller = ?", (controller,))
        }
        missing = sorted(set(range(1, top + 1)) - have)
        raise AssertionError(f"{controller}: {count} rows, journal {own}; missing {missing[:20]}")
    # the primary key makes a duplicate impossible; count == top with 1..top is every row once
    assert (count, lo, hi) == own == (top, 1, top), (controller, count, lo, hi, own)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
