"""The small things that told a user the tool was not finished, each checked as
the user meets it: the render format, effects in `table run`, a filter that matches
nothing, a notice's text, the demo's latency note, and UTC in the journal."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time

import pytest

from goosectl.controller import cli
from goosectl.controller.demo.offline import latency_note
from goosectl.controller.engine import Scheduler, Table
from goosectl.controller.engine.effects import Notify
from goosectl.controller.report.bay_report import Timeline
from goosectl.controller.shell.journal_writer import LiveJournals
from tests.support.peers import CAPTURES, REPO, require_binary
from tests.support.procs import goosectl

CAP = CAPTURES / "iti_GOOSE.pcap"
TABLE = REPO / "examples" / "tables" / "breaker.yaml"
EVENTS = REPO / "examples" / "tables" / "breaker-events.jsonl"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_render_piped_says_it_writes_mermaid_and_how_to_get_dot(tmp_path) -> None:
    done = goosectl("table", "render", str(TABLE), check=False, env=ENV, cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("stateDiagram-v2")
    assert done.stderr == (
        "goosectl: table render: writing Mermaid (the default); "
        "for Graphviz (`| dot -Tsvg`) use --format dot\n"
    )


def test_render_format_dot_is_what_graphviz_reads(tmp_path) -> None:
    dot = require_binary("dot", "graphviz")
    argv = ("table", "render", str(TABLE), "--format", "dot")
    render = goosectl(*argv, check=False, env=ENV, cwd=tmp_path, text=False)  # bytes, for dot
    assert render.returncode == 0 and render.stderr == b""
    svg = subprocess.run([dot, "-Tsvg"], input=render.stdout, capture_output=True)
    assert svg.returncode == 0 and b"<svg" in svg.stdout


def test_render_a_procedure_draws_its_workflow(capsys) -> None:
    proc = REPO / "examples" / "procedures" / "isolate.yaml"
    assert cli.main(["table", "render", str(proc), "--format", "mermaid"]) == 0
    out = capsys.readouterr().out
    assert "check_interlocks --> open_breaker" in out.replace(": ok", "")


def test_table_run_prints_the_effects_themselves(capsys) -> None:
    assert cli.main(["table", "run", str(TABLE), "--events", str(EVENTS)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    first = rows[0]
    assert first["event"] == "trip"
    assert first["effects"] == [
        {
            "type": "StartTimer",
            "name": "opening:op_timeout",
            "after_ns": 150_000_000,
            "event": "op_timeout",
            "payload": None,
        }
    ]
    assert len(first["effects_digest"]) == 16  # what the journal keeps
    opened = rows[1]
    assert {"type": "Notify", "topic": "opened", "data": None} in opened["effects"]


@pytest.mark.parametrize("command", ["decode", "replay"])
def test_a_filter_that_matches_nothing_says_so(capsys, command) -> None:
    assert cli.main([command, str(CAP), "--appid", "0x9999"]) == 0
    err = capsys.readouterr().err
    assert err == "goosectl: no frame matched --appid 0x9999 (APPIDs seen: 0x0001)\n"


@pytest.mark.parametrize("command", ["decode", "replay"])
def test_a_filter_that_matches_says_nothing_more(capsys, command) -> None:
    # replay: 1, the F650's sqNum reset is an anomaly
    assert cli.main([command, str(CAP), "--appid", "1"]) == (1 if command == "replay" else 0)
    assert capsys.readouterr().err == ""


def test_a_notice_prints_its_reasons_not_a_tuple() -> None:
    tl = Timeline(0)
    tl.add(1_500_000_000, Notify("close_refused", ("interlock bay2 blocked", "spring")))
    tl.add(2_000_000_000, Notify("opened"))
    assert [line.strip() for line in tl.lines()] == [
        "1.500 s  notice   close_refused: interlock bay2 blocked; spring",
        "2.000 s  notice   opened",
    ]


def test_the_demo_explains_a_p99_above_4_ms_that_was_waiting_for_a_cpu() -> None:
    wall = {"n": 411, "p50": 40.0, "p99": 8600.0}
    cpu = {"n": 411, "p50": 40.0, "p99": 330.0}
    note = latency_note(
        {
            "frame in -> effects out (every frame)": wall,
            "every frame, CPU time of the thread": cpu,
        }
    )
    text = " ".join(note)
    assert "wall-clock p99 8.6 ms is above the 4 ms limit" in text
    assert "CPU time of the same frames has p99 0.33 ms: the process waited for a CPU" in text
    quiet = {**wall, "p99": 900.0}
    assert latency_note({"frame in -> effects out (every frame)": quiet}) == []


def _utc_rows(path) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        sql = "SELECT seq, time_ns, utc_ns, utc FROM journal_utc ORDER BY seq"
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_a_live_journal_maps_monotonic_times_to_utc_also_after_a_restart(tmp_path) -> None:
    """`goosectl run`'s journals: rows carry monotonic time; the journal_utc view gives UTC,
    using the anchor of the run that wrote each row (a resumed journal gets its own)."""
    table = Table.load(TABLE)
    bay = tmp_path / "bay.sqlite"
    anchors = []
    for run in range(2):
        journals = LiveJournals(bay, tmp_path / "agent.sqlite")
        scheduler = Scheduler(journals.bay)
        mid = f"b{run}"
        now = time.monotonic_ns()
        scheduler.start(table.new(mid), now)
        scheduler.feed(mid, "trip", now + 1_000_000)
        scheduler.feed(mid, "open_confirmed", now + 33_000_000)
        journals.close()
        con = sqlite3.connect(bay)
        anchors = con.execute("SELECT key, value FROM meta WHERE key LIKE 'clock@%'").fetchall()
        con.close()
    assert [k for k, _ in anchors] == ["clock@1", "clock@3"]
    rows = _utc_rows(bay)
    assert [r[0] for r in rows] == [1, 2, 3, 4]
    for (_seq, time_ns, utc_ns, utc), (_key, value) in zip(
        rows, [anchors[0], anchors[0], anchors[1], anchors[1]], strict=True
    ):
        a = json.loads(value)
        assert a["clock"] == "monotonic"
        assert utc_ns == a["utc_ns"] + time_ns - a["time_ns"]
        assert utc.endswith("Z") and utc[:19] == time.strftime(
            "%Y-%m-%dT%H:%M:%S", time.gmtime(utc_ns // 1_000_000_000)
        )


def test_a_replay_journal_s_times_are_capture_time_in_utc(tmp_path) -> None:
    journal = tmp_path / "j.sqlite"
    assert cli.main(["replay", str(CAP), "--journal", str(journal), "--quiet"]) == 1  # F650
    rows = _utc_rows(journal)
    assert rows and all(r[1] == r[2] for r in rows)
    assert rows[0][3].startswith("2008-07-15T")  # the capture's own date


@pytest.fixture(autouse=True)
def _clean_tempdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield
    shutil.rmtree(tmp_path, ignore_errors=True)
