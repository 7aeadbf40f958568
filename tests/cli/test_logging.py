"""Diagnostics through `logging` (issue 16): -v/-q/--debug on every command, --log-json on
`run`; stdout (what the command is for) never changes with them, and a disabled level
formats nothing.

The commands run as a user runs them (a subprocess: its own logging set-up, its own
stderr); the cost check runs in-process, on the loggers the CLI configured."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from controller import cli, logs
from tests.support.lines import Lines
from tests.support.peers import CAPTURES, REPO

CAP = CAPTURES / "iti_GOOSE.pcap"
TABLE = REPO / "examples" / "tables" / "breaker.yaml"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def goosectl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=120,
    )


@pytest.fixture(autouse=True)
def _plain_logging():
    """In-process commands of other tests expect the default set-up back."""
    yield
    logs.configure()


# -- -v and --debug: detail of one subsystem, stdout untouched -------------------------------


def test_v_shows_a_debug_line_of_the_commands_package_and_leaves_stdout_alone() -> None:
    plain = goosectl("decode", str(CAP))
    verbose = goosectl("decode", str(CAP), "-v")
    assert plain.returncode == verbose.returncode == 0
    assert verbose.stdout == plain.stdout and len(plain.stdout.splitlines()) == 8
    assert plain.stderr == ""
    assert (
        f"goosectl: debug: controller.commands: {CAP}: 8 GOOSE frame(s) shown, "
        "0 other frame(s) skipped"
    ) in verbose.stderr.splitlines()


def test_v_before_the_command_name_works_too() -> None:
    r = goosectl("-v", "decode", str(CAP))
    assert r.returncode == 0
    assert "goosectl: debug: controller.commands: " in r.stderr


def test_debug_names_one_subsystem_and_only_it_speaks() -> None:
    r = goosectl("decode", str(CAP), "--debug", "controller.commands")
    assert r.returncode == 0
    debug = [line for line in r.stderr.splitlines() if ": debug: " in line]
    assert debug and all(
        line.startswith("goosectl: debug: controller.commands: ") for line in debug
    )
    # -v also shows the CLI's own debug line (logger `controller`); --debug did not
    assert "goosectl: debug: controller: " in goosectl("decode", str(CAP), "-v").stderr


# -- -q: info hidden, warnings kept; -qq: errors only ----------------------------------------


def test_q_hides_an_info_note_but_keeps_the_output() -> None:
    shown = goosectl("table", "render", str(TABLE))  # piped: the info note says Mermaid
    quiet = goosectl("table", "render", str(TABLE), "-q")
    assert shown.returncode == quiet.returncode == 0
    assert "writing Mermaid (the default)" in shown.stderr
    assert quiet.stderr == ""
    assert quiet.stdout == shown.stdout and quiet.stdout.startswith("stateDiagram-v2")


def test_q_keeps_a_warning_and_qq_hides_it_but_never_an_error() -> None:
    note = "goosectl: no frame matched --appid 0x9999 (APPIDs seen: 0x0001)\n"
    assert goosectl("decode", str(CAP), "--appid", "0x9999", "-q").stderr == note
    assert goosectl("decode", str(CAP), "--appid", "0x9999", "-qq").stderr == ""
    missing = goosectl("decode", "/nonexistent.pcap", "-qqq")
    assert missing.returncode == 2
    (line,) = missing.stderr.splitlines()
    assert line.startswith("goosectl: cannot read capture: /nonexistent.pcap: ")


# -- --log-json: every stderr line of `run` is a record ---------------------------------------


def _records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]  # every line, or it raises


def test_log_json_makes_an_error_one_json_object(tmp_path) -> None:
    r = goosectl("run", "--log-json", "--config", str(tmp_path / "none.yaml"))
    assert r.returncode == 2 and r.stdout == ""
    (rec,) = _records(r.stderr)
    assert rec["level"] == "error" and rec["logger"] == "controller"
    assert rec["message"].startswith("bad config: ") and "none.yaml" in rec["message"]
    assert set(rec) == {"time", "level", "logger", "message"}


def test_run_with_log_json_writes_its_status_lines_as_records(tmp_path) -> None:
    """`run --no-network` on the simulator's pty for 2.5 s: the status line every second
    arrives as JSON records on stderr; stdout keeps its running/stopped events."""
    sim = subprocess.Popen(
        [sys.executable, "-m", "controller", "sim", "--pty", "--duration", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=ENV,
        cwd=REPO,
    )
    try:
        pty = Lines(sim.stdout).wait_for(lambda line: line.startswith("/"), "the pty path", 60)
        r = goosectl(
            "run",
            "--no-network",
            "--log-json",
            "--port",
            pty,
            "--duration",
            "2.5",
            "--state",
            str(tmp_path / "state"),
            "--control",
            str(tmp_path / "ctl.sock"),
        )
    finally:
        sim.terminate()
        sim.communicate(timeout=30)
    assert r.returncode == 0, r.stderr
    events = [json.loads(line)["event"] for line in r.stdout.splitlines()]
    assert events == ["running", "stopped"]
    records = _records(r.stderr)
    status = [x for x in records if x["logger"] == "controller.shell" and x["level"] == "info"]
    assert len(status) >= 2, records  # one a second
    assert all("breaker" in x["message"] or "streams[" in x["message"] for x in status), status


# -- a disabled level costs no formatting ----------------------------------------------------


class Costly:
    """An argument that counts how often it is turned into text."""

    def __init__(self) -> None:
        self.formatted = 0

    def __str__(self) -> str:
        self.formatted += 1
        return "costly"


def test_a_disabled_debug_call_formats_nothing_and_makes_no_record(capsys) -> None:
    args = cli.build_parser().parse_args(["decode", str(CAP)])
    cli.setup_logging(args)  # what `goosectl decode X` sets up: INFO
    hot = logging.getLogger("controller.goose")
    made: list[logging.LogRecord] = []
    root = logging.getLogger()
    spy = logging.Handler()
    spy.emit = made.append  # type: ignore[method-assign]
    root.addHandler(spy)
    try:
        arg = Costly()
        assert not hot.isEnabledFor(logging.DEBUG)  # the one comparison a hot path pays
        hot.debug("frame %s", arg)
        assert arg.formatted == 0 and made == []

        cli.setup_logging(cli.build_parser().parse_args(["decode", str(CAP), "-v"]))
        assert hot.isEnabledFor(logging.DEBUG)
        hot.debug("frame %s", arg)
        assert arg.formatted >= 1 and len(made) == 1
        assert "goosectl: debug: controller.goose: frame costly" in capsys.readouterr().err
    finally:
        root.removeHandler(spy)
