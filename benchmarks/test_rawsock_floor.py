"""Raw-socket floor across a veth pair: one-way in one thread, and echo round trip.

Why two numbers: the one-way send->read in a single thread is the kernel's own cost (two
syscalls, the veth hop, one epoll wake-up of a thread that is already running); the echo
round trip adds a second process that must be woken and scheduled, which is what every
wire-to-wire measurement pays. Later wire benchmarks use the round trip as their floor.

Needs root (namespaces, raw sockets); skips without it (fails in CI, see peers.py).
"""

from __future__ import annotations

from benchmarks.percentiles import RESULTS, ratio, summarise
from goosectl.lab.netns import netlab
from goosectl.lab.wire_floor import OneWay, WireFloor
from tests.support.peers import require_root

GROUP = "wire-floor"
HARD_LIMIT_US = 4_000.0


def _n(short: bool) -> int:
    return 2_000 if short else 20_000


def test_veth_one_way_same_thread(benchmark, short: bool) -> None:
    require_root()
    with netlab() as lab:
        one_way = OneWay(lab)
        try:
            times = one_way.sample(_n(short))
            result = summarise("veth_one_way_same_thread", GROUP, times)
            benchmark.extra_info.update(result.as_dict())
            benchmark.pedantic(one_way.once_ns, rounds=500 if short else 5_000, iterations=1)
        finally:
            one_way.close()


def test_veth_echo_round_trip(benchmark, short: bool) -> None:
    require_root()
    with WireFloor() as floor:
        times = floor.sample(_n(short))
        result = summarise("veth_echo_round_trip", GROUP, times)
        baseline = RESULTS.get(f"{GROUP}/veth_one_way_same_thread")
        if baseline is not None:
            ratio(result, baseline)
        benchmark.extra_info.update(result.as_dict())
        benchmark.pedantic(floor.roundtrip_ns, rounds=500 if short else 5_000, iterations=1)
    # The product's hard limit for wire in -> wire out is 4 ms; a floor above it means this
    # machine cannot show the budget at all, whatever the controller does.
    assert result.p99 < HARD_LIMIT_US, f"wire floor p99 {result.p99:.0f} us"
