"""The acceptance, through the command line: the demo's own scenario capture
(`goosectl demo` writes it), its protection trip stream rewritten from 5 s on one field at
a time with the codec, replayed with `goosectl replay FILE --device sim`.

| the protection trip stream, from 5 s on, rewritten with | TRIPs |
| simulation TRUE and the S-bit (controller not in simulation) | 0 |
| Tr.q validity invalid / questionable / test bit (mode on) | 0 |
| confRev + 1 mid-stream / ndsCom TRUE | 0 |

Without bay 2's interlock stream no SCADA close is accepted; the capture as written still
trips and closes exactly as the demo's script says.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from goosectl.controller.goose.publisher import REPLAY_SRC
from goosectl.protocols.ethernet.pcap import read_capture
from goosectl.protocols.goose import parse_header
from tests.gates.rewrite import CILO_APPID, ROWS, frames_of, rewrite, without, write
from tests.support.procs import goosectl

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    goosectl("demo", "--in-memory", "--out", str(out / "d"))
    return out / "d" / "scenario.pcap"


def replay(path: Path, *extra: str) -> str:
    return goosectl("replay", str(path), "--device", "sim", *extra).stdout


def sent(report: str, command: str) -> list[float]:
    """Times (s) of the commands the report says went to the device."""
    return [
        float(m.group(1))
        for m in re.finditer(rf"^\s+(\d+\.\d+) s  device   {command} sent", report, re.M)
    ]


def test_the_scenario_as_written_trips_and_closes_as_its_script_says(scenario, tmp_path):
    out = tmp_path / "out.pcap"
    report = replay(scenario, "--out", str(out))
    assert sent(report, "TRIP") == [6.0, 9.0, 15.0]
    assert sent(report, "CLOSE") == [0.5, 7.0, 13.5]
    # the refusals the demo's script provokes, each with its reason
    assert "refused  prot~sim st=2 sq=0 first: simulation" in report
    assert "input    prot: invalid (q invalid) -> trip false (fail-safe)" in report
    assert "input    prot: invalid (q test) -> trip false (fail-safe)" in report
    assert "input    bay2-cilo: invalid (lost) -> close blocked" in report
    assert "notice   close_refused: interlock bay2 invalid (lost)" in report
    # the LGOS of every subscription, at the end
    assert re.search(r"^\s+prot\s+true\s+false\s+\d+\s+1\s+1\s+false\s+none\s+02:00", report, re.M)
    # published from a locally administered MAC, never 00:00:00:00:00:00
    srcs = {parse_header(f.data).src for f in read_capture(out)}
    assert srcs == {REPLAY_SRC}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_a_rewritten_protection_stream_never_trips(scenario, tmp_path, row):
    path = write(tmp_path / f"{row}.pcap", rewrite(frames_of(scenario), ROWS[row]))
    journal = tmp_path / "j.sqlite"
    report = replay(path, "--journal", str(journal))
    assert sent(report, "TRIP") == [], report
    # the closes before 5 s and between the trips that never came still happen
    assert sent(report, "CLOSE") == [0.5]
    # the refusal is named: in the LGOS (a stream rule) or at the input (its quality)
    expected = {
        "simulation": "input    prot: invalid (lost)",
        "confrev": "input    prot: invalid (confrev)",
        "ndscom": "input    prot: invalid (ndscom)",
        "q_invalid": "input    prot: invalid (q invalid)",
        "q_questionable": "input    prot: invalid (q questionable)",
        "q_test": "input    prot: invalid (q test)",
    }[row]
    assert expected in report
    # and journaled: the protection input's machine went invalid
    rows = sqlite3.connect(journal).execute(
        "SELECT event, source, target FROM journal WHERE machine = 'input:prot'"
    )
    assert ("invalid", "valid", "invalid") in set(rows)


def test_questionable_acts_where_the_input_accepts_it(scenario, tmp_path):
    cfg = tmp_path / "bay.yaml"
    text = (REPO / "controller" / "config" / "defaults" / "bay1.yaml").read_text()
    cfg.write_text(
        text.replace(
            "event: protection_trip,", "event: protection_trip, accept_questionable: true,"
        )
    )
    path = write(tmp_path / "q.pcap", rewrite(frames_of(scenario), ROWS["q_questionable"]))
    report = replay(path, "--config", str(cfg))
    assert sent(report, "TRIP") == [6.0, 9.0, 15.0]


def test_without_bay2s_interlock_stream_no_close_is_accepted(scenario, tmp_path):
    path = write(tmp_path / "nocilo.pcap", without(frames_of(scenario), CILO_APPID))
    report = replay(path)
    assert sent(report, "CLOSE") == []
    refused = [
        float(m.group(1))
        for m in re.finditer(
            r"^\s+(\d+\.\d+) s  notice   close_refused: interlock bay2 no data$",
            report,
            re.M,
        )
    ]
    # the three closes the script has accepted, and the two it refuses anyway
    assert refused == [0.5, 6.5, 7.0, 12.5, 13.5]
