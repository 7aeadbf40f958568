"""How many examples a property test draws: all of them in the full run, a quarter in the
developer's fast tier.

The full run (`python3 -m pytest`, what CI runs) draws the count each test's author set.
The fast tier (`pytest -m unit`, the loop run between edits) draws a quarter of it, at
least `FLOOR`, and a test without a count of its own draws `FLOOR`: Hypothesis's own advice
is a quick profile for development and a thorough one for CI, and most of the fast tier's
time was Hypothesis drawing, not the code under test. `GOOSECTL_EXAMPLES=full` draws the
full counts in the fast tier too. `configure` runs before collection (`tests/conftest.py`),
so the decorators read the choice as their modules are imported.
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import settings

#: the fewest examples a property draws in the fast tier
FLOOR = 25
_full = True


def examples(count: int) -> int:
    """The examples to draw for a property whose author asked for `count`."""
    return count if _full else max(FLOOR, count // 4)


def configure(markexpr: str, env: Mapping[str, str]) -> None:
    """Choose for this run: the fast tier is the `unit` marker alone."""
    global _full
    _full = markexpr.strip() != "unit" or env.get("GOOSECTL_EXAMPLES") == "full"
    settings.register_profile("fast-tier", max_examples=FLOOR)
    settings.load_profile("default" if _full else "fast-tier")
