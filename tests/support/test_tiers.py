"""The tiers are read from what a test reaches: a test that needs root is never `unit`."""

from __future__ import annotations

import subprocess
import sys

from tests.support.peers import REPO


def collected(marker: str, path: str) -> set[str]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            marker,
            path,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return {line for line in out.splitlines() if "::" in line}


def test_a_namespace_test_is_root_and_not_unit() -> None:
    root = collected("root", "tests/ethernet/test_rawsock.py")
    unit = collected("unit", "tests/ethernet/test_rawsock.py")
    assert root and not root & unit


def test_a_pure_test_is_unit() -> None:
    unit = collected("unit", "tests/engine/test_dispatch.py")
    everything = collected("", "tests/engine/test_dispatch.py")
    assert unit and unit == everything


def test_a_test_that_starts_a_process_is_not_unit() -> None:
    unit = collected("unit", "tests/cli/test_errors.py")
    assert "tests/cli/test_errors.py::test_version" not in unit  # goosectl as a process
    assert any("test_every_mistake_is_one_line_and_exit_2" in t for t in unit)  # in process


def test_a_module_marked_root_is_never_unit() -> None:
    """`pytestmark = pytest.mark.root` outranks the reading: its helper here is imported
    inside the test (`tests.support.netns.live_on_veth`), which the reading follows too."""
    unit = collected("unit", "tests/goose/test_live.py")
    root = collected("root", "tests/goose/test_live.py")
    frame_test = "test_a_frame_that_breaks_a_machine_is_reported_and_the_loop_goes_on"
    assert any(frame_test in t for t in root)
    assert not unit & root


def test_the_fast_tier_draws_a_quarter_of_the_examples_and_the_full_run_all() -> None:
    from hypothesis import settings

    from tests.support import examples

    was = examples._full
    try:
        examples.configure("unit", {})
        assert (examples.examples(300), examples.examples(40)) == (75, examples.FLOOR)
        assert settings.default.max_examples == examples.FLOOR
        examples.configure("unit", {"GOOSECTL_EXAMPLES": "full"})
        assert examples.examples(300) == 300
        examples.configure("", {})
        assert examples.examples(300) == 300 and settings.default.max_examples == 100
    finally:
        examples.configure("" if was else "unit", {})
