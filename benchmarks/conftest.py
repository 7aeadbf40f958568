"""Shared benchmark machinery: per-call percentiles beside pytest-benchmark's means.

pytest-benchmark reports rounds; a controller's budget is about the tail, so every suite
also samples single calls with `perf_counter_ns`, keeps p50/p99/p99.9/max in
``benchmark.extra_info`` and in a session-wide table printed at the end, with ratios to a
baseline measured in the same run. `--short` (CI) shrinks the sample counts to seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.percentiles import RESULTS, format_table  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--short",
        action="store_true",
        default=False,
        help="CI mode: few samples, seconds per suite; budgets still enforced",
    )


@pytest.fixture(scope="session")
def short(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--short"))


@pytest.fixture(scope="session")
def samples(short: bool) -> int:
    """How many single calls to time per case."""
    return 20_000 if short else 200_000


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if RESULTS:
        terminalreporter.write_sep("=", "per-call percentiles (us) and ratios to baselines")
        terminalreporter.write_line(format_table())
