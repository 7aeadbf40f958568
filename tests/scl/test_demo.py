"""`goosectl demo` driven from the SCD that describes its substation (examples/scl)."""

from __future__ import annotations

from tests.support.peers import REPO
from tests.support.procs import goosectl


def demo(tmp_path, name: str, *args: str) -> list[str]:
    r = goosectl("demo", "--in-memory", "--out", str(tmp_path / name), *args)
    return [x for x in r.stdout.splitlines() if " s  " in x or x.startswith("Frames in")]


def test_the_scd_with_its_overlay_runs_the_demo_exactly_as_the_packaged_config(tmp_path):
    packaged = demo(tmp_path, "default")
    from_scl = demo(tmp_path, "scl", "--config", str(REPO / "examples" / "scl" / "bay1.yaml"))
    assert len(packaged) > 40
    assert from_scl == packaged


def test_the_scd_alone_runs_the_demo_with_the_streams_named_by_gocbref(tmp_path):
    lines = demo(
        tmp_path, "scd", "--config", str(REPO / "examples" / "scl" / "bay1.scd"), "--ied", "GCTL1"
    )
    text = "\n".join(lines)
    for line in [
        "6.000 s  device   TRIP sent (protection)",
        "9.000 s  device   TRIP sent (protection)",  # network B (the SCD's 2nd subnetwork)
        "goose    PROT1LD0/LLN0$GO$trip side A lost",
        "12.500 s  notice   close_refused: interlock bay2 blocked",
        "15.150 s  device   TRIP sent (re-trip)",
    ]:
        assert line in text, line
    assert "unmatched" not in text
