"""Test-wide configuration: make the repository importable without installation."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_collection_modifyitems(config, items):
    """Mark every test with its tier (`tests/tiers.py`): unit, root, peer."""
    import pytest

    from tests.tiers import classify

    for item in items:
        for mark in classify(item):
            item.add_marker(getattr(pytest.mark, mark))


def pytest_configure(config):
    """The fast tier draws fewer property examples (`tests/support/examples.py`)."""
    import os

    from tests.support.examples import configure

    configure(config.getoption("markexpr") or "", os.environ)
