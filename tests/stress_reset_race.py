"""Stress run for the device-link reset race: not part of the suite.

Runs the two tests that CI saw fail on one reboot handled twice, each `--runs` times (50 by
default), while one CPU hog per core competes for the processor, and prints the failures:

    python3 tests/stress_reset_race.py [--runs 50] [--hogs N]

Exit status 0 only when every run passed. Each run is a fresh pytest process, so nothing
warm carries over from one run to the next.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = (
    "tests/device/test_link_pty.py::"
    "test_every_command_and_event_end_to_end_over_a_pty_with_the_sim_in_a_thread",
    "tests/agent/test_crash.py::test_sigkill_at_several_points_every_actuation_exactly_once",
)


def _hog(stop) -> None:
    while not stop.is_set():
        for _ in range(100_000):
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--hogs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=_hog, args=(stop,)) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    failures: dict[str, list[str]] = {t: [] for t in TESTS}
    started = time.monotonic()
    try:
        for i in range(args.runs):
            for test in TESTS:
                r = subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                )
                if r.returncode != 0:
                    tail = "\n".join(r.stdout.splitlines()[-15:])
                    failures[test].append(f"run {i + 1}:\n{tail}")
            done = i + 1
            bad = sum(len(f) for f in failures.values())
            print(f"{done}/{args.runs} rounds, {bad} failures", flush=True)
    finally:
        stop.set()
        for h in hogs:
            h.join()
    elapsed = time.monotonic() - started
    print(f"\n{args.runs} runs of each test with {args.hogs} CPU hogs in {elapsed:.0f} s")
    for test, failed in failures.items():
        print(f"  {len(failed)} failed: {test}")
        for f in failed:
            print(f)
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
