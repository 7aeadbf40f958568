"""The controller through its command line: the demo, replay with the simulator, errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support.procs import goosectl

REPO = Path(__file__).resolve().parents[2]


def test_demo_over_a_real_pty_yields_the_scenario(tmp_path):
    out = tmp_path / "demo"
    r = goosectl("demo", "--out", str(out))
    report = r.stdout
    assert f"writing to {out}/" in report
    # progress on stderr, naming the scenario's steps
    assert "protection trip (stuck breaker)" in r.stderr and "100.0%" in r.stderr
    expected = [
        "6.000 s  bay      protection_trip: closed -> tripping",
        "6.000 s  device   TRIP sent (protection)",
        "6.000 s  goose    published trip_ack",
        "6.030 s  bay      position: tripping -> open",
        "9.000 s  device   TRIP sent (protection)",  # network A was down: no trip lost
        "goose    prot side A lost",
        "12.500 s  notice   close_refused: interlock bay2 blocked",
        "15.150 s  bay      bf_timeout: tripping -> breaker_failure",
        "15.150 s  goose    published bf_trip",
        "15.150 s  device   TRIP sent (re-trip)",
        # the operator's procedure: confirmation, retries, then the fallback
        "16.000 s  agent    s1 asks to confirm open_breaker",
        "agent    s1 runs open_breaker (device {'command': 'trip'}, attempt 3)",
        "agent    s1 ended failed: bay 1 NOT isolated",
    ]
    for line in expected:
        assert line in report, line
    assert "final bay state: breaker_failure" in report
    for name in ("scenario.pcap", "output.pcap", "journal.sqlite", "agent.sqlite", "report.txt"):
        assert (out / name).stat().st_size > 0, name
    rows = (
        sqlite3.connect(out / "journal.sqlite")
        .execute("SELECT count(*) FROM journal WHERE machine = 'bay'")
        .fetchone()[0]
    )
    assert rows > 20


def test_replay_with_device_sim_is_deterministic(tmp_path):
    goosectl("demo", "--in-memory", "--out", str(tmp_path / "d"))
    cap = tmp_path / "d" / "scenario.pcap"
    runs = []
    for k in range(2):
        j, o = tmp_path / f"j{k}.sqlite", tmp_path / f"o{k}.pcap"
        goosectl("replay", str(cap), "--device", "sim", "--journal", str(j), "--out", str(o))
        con = sqlite3.connect(j)
        runs.append((list(con.execute("SELECT * FROM journal ORDER BY seq")), o.read_bytes()))
        con.close()
    assert runs[0] == runs[1]
    assert len(runs[0][0]) > 100


def test_bad_controller_config_exits_2_with_file_key_reason(tmp_path):
    bad = tmp_path / "bay.yaml"
    text = (REPO / "examples" / "controller" / "bay1.yaml").read_text()
    bad.write_text(text.replace("breaker_failure_ms: 150", "breaker_failure_ms: -5"))
    r = goosectl(
        "demo", "--in-memory", "--config", str(bad), "--out", str(tmp_path / "x"), check=False
    )
    assert r.returncode == 2
    assert str(bad) in r.stderr and "logic.breaker_failure_ms" in r.stderr
    assert "greater than 0" in r.stderr


def test_bench_in_process_prints_table_and_writes_histogram(tmp_path):
    import json
    import xml.etree.ElementTree as ET

    svg = tmp_path / "lat.svg"
    # the verdict is a measurement of this host at this moment: a unit test asserts that
    # it is given and that the exit status says the same, never which one it is
    r = goosectl("bench", "--samples", "60", "--out", str(svg), check=False)
    assert "in process: trip frame -> TRIP bytes" in r.stdout, r.stderr
    verdict = {"yes": 0, "NO": 1}
    said = r.stdout.split("within the 4 ms hard limit at p99: ")[1].split()[0]
    assert r.returncode == verdict[said], (r.returncode, r.stdout, r.stderr)
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg") and len(root) > 10
    table = json.loads(svg.with_suffix(".json").read_text())
    assert table["in process: trip frame -> TRIP bytes"]["n"] == 60


def test_demo_live_with_libiec61850_as_the_protection_ied(tmp_path):
    from tests.support.peers import require_iec61850, require_root

    require_root()
    require_iec61850()
    r = goosectl("demo", "--live", "--out", str(tmp_path / "live"))
    out = r.stdout
    assert "bay      protection_trip: closed -> tripping" in out
    assert "bay      position: tripping -> open" in out
    assert "bay      bf_timeout: tripping -> breaker_failure" in out
    assert "goose    published bf_trip" in out
    assert "final bay state: breaker_failure" in out
