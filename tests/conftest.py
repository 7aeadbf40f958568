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
    """The fast tier draws fewer property examples (`tests/support/examples.py`); Ctrl-C
    as a terminal gives it.

    Tests stop children with SIGINT, as Ctrl-C does. A run started in the background by a
    shell without job control (`.ci/run &`) inherits SIGINT ignored, and an ignored signal
    stays ignored across exec: no child would ever see the interrupt (`journal --follow`
    ran on after its test, which waited for it in vain). A handled signal is reset to the
    default on exec, so handling it here gives every child the terminal's behaviour."""
    import os
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    from tests.support.examples import configure

    configure(config.getoption("markexpr") or "", os.environ)
