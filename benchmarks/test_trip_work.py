"""The trip path's work, counted (lab.trip_work: callgrind instructions of one trip call).

Timing on this shared host cannot see a 5-10 % change to the trip path (its in-process p50
moves by half from one run to the next); the instruction count repeats exactly. So the
count is held to a ceiling: at most 5 % above the count recorded here for the interpreter
it was recorded on, and a change that makes the trip path lighter lowers the record in the
same commit (it is a ratchet, not a target). On another interpreter the count is reported
only: CPython's own instruction counts differ between builds.
"""

from __future__ import annotations

import platform

from goosectl.lab.trip_work import measure
from tests.support.peers import require_binary

#: CPython version -> instructions of one trip call, as recorded (the commit that set it)
RECORDED = {
    # 1 Dec 2026: replace-only context merges, data_shape by map, the rate window by
    # bisection, Event tuples built in C, the commit reusing the action's view, a stream's
    # memory cut lazily (687,187 before them); the bracket made through TripBench.sample
    "3.11.7": 618_464,
}
#: how far above the record a change may take the trip path before the budget fails
CEILING = 1.05


def test_trip_path_instructions(benchmark):
    require_binary("valgrind", "valgrind")
    work = measure(trips=10)
    benchmark.extra_info.update(work.as_dict())
    benchmark.pedantic(lambda: None, rounds=1)
    # a trip decodes a frame, runs seven machine steps, encodes a command and a frame:
    # a count far below that measured the bracket, not the trip
    assert work.per_trip > 100_000, work
    assert work.python == platform.python_version()
    recorded = RECORDED.get(work.python)
    record = f"recorded {recorded:,}" if recorded else "no record for this interpreter"
    numbers = f"trip call: {work.per_trip:,} instructions (CPython {work.python}); {record}"
    print(numbers)
    if recorded is not None:
        # deterministic: no host to blame, so a plain assert, not a budget XFAIL
        assert work.per_trip <= recorded * CEILING, f"{numbers}: over x{CEILING}"
