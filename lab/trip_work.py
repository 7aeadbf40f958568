"""The trip path's work, counted instead of timed: CPU instructions of one trip call (trip
frame bytes in -> TRIP bytes for the device and the trip-acknowledged frame built), by
valgrind's callgrind.

Why: on a shared host a 10 % change to the trip path hides in the timing noise (the same
code's in-process p50 moved between 88 and 165 us from one run to the next on 1 Dec 2026,
its wire p50 between 367 and 467 us from one day to the next); an instruction count is the
same on every run to within about 1 %, so it judges a change to the hot path where the
clock cannot. It is not a latency: the same instructions take several times as long on
cold caches (README, performance).

How: the `lab.latency.TripBench` bay (virtual wire, the breaker re-closed between trips,
no journal), each measured call made from inside libc's `qsort` through a ctypes callback,
and callgrind collecting only inside `qsort_r`, where `qsort` compares (`--toggle-collect`):
a libc symbol is there on any interpreter, stripped or not. A second run brackets a call
that does nothing the same way; the difference per call is the trip's. PYTHONHASHSEED is
fixed so dict and set layouts, and with them the count, repeat.

`python -m goosectl.lab.trip_work N` prints instructions per trip (valgrind must be installed).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from goosectl.controller.config.keys import KeyFile

#: the libc function every measured call is made from (`qsort`, which sorts in `qsort_r`:
#: callgrind's bracket is the inner one, which it attributes the comparison to)
BRACKET = "qsort_r"
_COLLECTED = re.compile(r"Collected\s*:\s*([\d,]+)")
#: the key id of a signed count's trip stream
SIGNED_KEY_ID = 7


class TripWorkError(RuntimeError):
    """valgrind is missing or counted nothing (what and why in the message)."""


@dataclass(frozen=True)
class TripWork:
    trips: int
    #: instructions of one trip call, the bracket's own subtracted
    per_trip: int
    #: instructions of the bracket around a call that does nothing
    bracket: int
    python: str

    def as_dict(self) -> dict[str, object]:
        return {
            "trips": self.trips,
            "per_trip": self.per_trip,
            "bracket": self.bracket,
            "python": self.python,
        }


def bracketed(libc: ctypes.CDLL) -> Callable[[Callable[[], object]], None]:
    """`call(fn)`: run `fn` from inside libc's sort (two elements: one comparison)."""
    cmp_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    job: list[Callable[[], object]] = []

    def compare(_a: object, _b: object) -> int:
        job[0]()
        return 0

    callback = cmp_type(compare)
    pair = (ctypes.c_int * 2)(0, 0)
    size = ctypes.sizeof(ctypes.c_int)
    qsort = libc.qsort

    def call(fn: Callable[[], object]) -> None:
        job[:] = [fn]
        qsort(pair, 2, size, callback)

    return call


def signed_keys() -> KeyFile:
    """The key file of a signed count (`--signed`): the trip stream's HMAC-SHA256-128 key,
    in force for the whole run (a fixed secret: only the work is counted)."""
    from goosectl.controller.config.keys import Key, KeyFile
    from goosectl.protocols.goose.security import ALGORITHMS, MacKey

    key = MacKey(SIGNED_KEY_ID, ALGORITHMS["hmac-sha256-128"], bytes(range(1, 33)))
    return KeyFile("trip_work", {SIGNED_KEY_ID: Key(key, 0, 1 << 62)}, 0)


def child(trips: int, noop: bool, reflex: bool = False, signed: bool = False) -> None:
    """The process valgrind runs: `trips` trips (after 3 unbracketed ones: the path's first
    calls, imports and specialisation, unseen), each bracketed, or a bracketed no-op
    beside each unbracketed trip. `reflex`: the bracketed call is the reflex's (its match
    and outputs, `TripBench(reflex=True)`), the engine's call after it unbracketed.
    `signed`: the trip stream signed (IEC 62351-6, `auth: required`, `signed_keys`)."""
    from goosectl.lab.latency import TripBench

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    call = bracketed(libc)

    def beside(trip: Callable[[], object]) -> None:
        call(lambda: None)
        trip()

    keys = signed_keys() if signed else None
    bench = TripBench(reflex=reflex, keys=keys, key_id=SIGNED_KEY_ID if signed else None)
    try:
        bench.sample(trips, warmup=3, around=beside if noop else call)
    finally:
        bench.close()


def callgrind_count(module: str, args: list[str], python: str = sys.executable) -> int:
    """Instructions callgrind counts inside `BRACKET` while `python -m module *args` runs
    (a child that brackets its calls, as `--child` here does)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise TripWorkError("valgrind is not installed (Debian package valgrind)")
    argv = [
        valgrind, "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={BRACKET}",
        "--callgrind-out-file=/dev/null", python, "-m", module, *args,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    res = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    m = _COLLECTED.search(res.stderr)
    if res.returncode != 0 or m is None:
        tail = "\n".join(res.stderr.strip().splitlines()[-15:])
        raise TripWorkError(f"callgrind run of {args} failed (exit {res.returncode}): {tail}")
    return int(m.group(1).replace(",", ""))


def _collected(
    trips: int, noop: bool, python: str, reflex: bool = False, signed: bool = False
) -> int:
    flags = [f for f, on in (("--noop", noop), ("--reflex", reflex), ("--signed", signed)) if on]
    n = callgrind_count("goosectl.lab.trip_work", ["--child", str(trips), *flags], python)
    if n == 0:
        raise TripWorkError(f"callgrind collected nothing inside {BRACKET} (libc without it?)")
    return n


def measure(
    trips: int = 10, python: str = sys.executable, reflex: bool = False, signed: bool = False
) -> TripWork:
    """Instructions per trip call, from two callgrind runs of `trips` calls each; with
    `reflex`, of the reflex's call (frame -> TRIP bytes and ack frame, the engine after);
    with `signed`, of a trip stream signed with HMAC-SHA256-128 (`auth: required`)."""
    full = _collected(trips, False, python, reflex, signed)
    empty = _collected(trips, True, python, reflex, signed)
    version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return TripWork(trips, (full - empty) // trips, empty // trips, version)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m goosectl.lab.trip_work", description=__doc__)
    p.add_argument("trips", type=int, nargs="?", default=10)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--noop", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--reflex", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--signed", action="store_true", help="the trip stream signed (HMAC)")
    p.add_argument("--only", choices=("engine", "reflex"), help="count one path (both by default)")
    args = p.parse_args(argv)
    if args.child:
        child(args.trips, args.noop, args.reflex, args.signed)
        return 0
    paths = [args.only] if args.only else ["engine", "reflex"]
    try:
        counted = [
            (name, measure(args.trips, reflex=name == "reflex", signed=args.signed))
            for name in paths
        ]
    except TripWorkError as exc:
        print(f"trip_work: {exc}", file=sys.stderr)
        return 2
    for name, work in counted:
        print(
            f"{name}: {work.per_trip:,} instructions per trip call (bracket "
            f"{work.bracket:,}; {work.trips} trips; CPython {work.python})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
