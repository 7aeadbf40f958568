"""Diagnostics through `logging`: -v/-q/--debug on every command, --log-json on
`run`; stdout (what the command is for) never changes with them, and a disabled level
formats nothing.

The commands run as a user runs them (a subprocess: its own logging set-up, its own
stderr); the cost check runs in-process, on the loggers the CLI configured."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
from functools import partial

import pytest

from goosectl.controller import cli, logs
from tests.support import procs
from tests.support.lines import Lines
from tests.support.peers import CAPTURES, REPO
from tests.support.procs import Sim, start_run, wait_running

CAP = CAPTURES / "iti_GOOSE.pcap"
TABLE = REPO / "examples" / "tables" / "breaker.yaml"
BAY = REPO / "examples" / "controller" / "bay1.yaml"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


goosectl = partial(procs.goosectl, env=ENV, timeout=120)


@pytest.fixture(autouse=True)
def _plain_logging():
    """In-process commands of other tests expect the default set-up back."""
    yield
    logs.configure()


# -- -v and --debug: detail of one subsystem, stdout untouched -------------------------------


def test_v_shows_a_debug_line_of_the_commands_package_and_leaves_stdout_alone() -> None:
    plain = goosectl("decode", str(CAP), check=False)
    verbose = goosectl("decode", str(CAP), "-v", check=False)
    assert plain.returncode == verbose.returncode == 0
    assert verbose.stdout == plain.stdout and len(plain.stdout.splitlines()) == 8
    assert plain.stderr == ""
    assert (
        f"goosectl: debug: controller.commands: {CAP}: 8 GOOSE frame(s) shown, "
        "0 other frame(s) skipped"
    ) in verbose.stderr.splitlines()


def test_v_before_the_command_name_works_too() -> None:
    r = goosectl("-v", "decode", str(CAP), check=False)
    assert r.returncode == 0
    assert "goosectl: debug: controller.commands: " in r.stderr


def test_debug_names_one_subsystem_and_only_it_speaks() -> None:
    r = goosectl("decode", str(CAP), "--debug", "controller.commands", check=False)
    assert r.returncode == 0
    debug = [line for line in r.stderr.splitlines() if ": debug: " in line]
    assert debug and all(
        line.startswith("goosectl: debug: controller.commands: ") for line in debug
    )
    # -v also shows the CLI's own debug line (logger `controller`); --debug did not
    assert "goosectl: debug: controller: " in goosectl("decode", str(CAP), "-v").stderr


# -- -q: info hidden, warnings kept; -qq: errors only ----------------------------------------


def test_q_hides_an_info_note_but_keeps_the_output() -> None:
    shown = goosectl("table", "render", str(TABLE), check=False)  # piped: the note says Mermaid
    quiet = goosectl("table", "render", str(TABLE), "-q", check=False)
    assert shown.returncode == quiet.returncode == 0
    assert "writing Mermaid (the default)" in shown.stderr
    assert quiet.stderr == ""
    assert quiet.stdout == shown.stdout and quiet.stdout.startswith("stateDiagram-v2")


def test_q_keeps_a_warning_and_qq_hides_it_but_never_an_error() -> None:
    note = "goosectl: no frame matched --appid 0x9999 (APPIDs seen: 0x0001)\n"
    assert goosectl("decode", str(CAP), "--appid", "0x9999", "-q").stderr == note
    assert goosectl("decode", str(CAP), "--appid", "0x9999", "-qq").stderr == ""
    missing = goosectl("decode", "/nonexistent.pcap", "-qqq", check=False)
    assert missing.returncode == 2
    (line,) = missing.stderr.splitlines()
    assert line.startswith("goosectl: cannot read capture: /nonexistent.pcap: ")


# -- --log-json: every stderr line of `run` is a record ---------------------------------------


def _records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]  # every line, or it raises


def test_log_json_makes_an_error_one_json_object(tmp_path) -> None:
    r = goosectl("run", "--log-json", "--config", str(tmp_path / "none.yaml"), check=False)
    assert r.returncode == 2 and r.stdout == ""
    (rec,) = _records(r.stderr)
    assert rec["level"] == "error" and rec["logger"] == "controller"
    assert rec["message"].startswith("bad config: ") and "none.yaml" in rec["message"]
    assert set(rec) == {"time", "level", "logger", "message"}


@pytest.fixture
def sim(tmp_path):
    with Sim("--pty", "--duration", "60", link=tmp_path / "device.pty") as s:
        yield s


def run_for(tmp_path, port: str, seconds: str, *extra: str) -> subprocess.Popen:
    """`run --no-network` on the simulator's pty for `seconds`, its own state and socket."""
    return start_run(
        port,
        "--duration",
        seconds,
        "--state",
        str(tmp_path / "state"),
        "--control",
        str(tmp_path / "ctl.sock"),
        *extra,
    )


def test_run_with_log_json_writes_its_status_lines_as_records(tmp_path, sim) -> None:
    """`run --no-network` on the simulator's pty for 2.5 s: the status line every second
    arrives as JSON records on stderr, its values as fields; stdout keeps its
    running/stopped events."""
    out, err = run_for(tmp_path, sim.port, "2.5", "--log-json").communicate(timeout=120)
    events = [json.loads(line)["event"] for line in out.splitlines()]
    assert events == ["running", "stopped"], err
    records = _records(err)
    status = [x for x in records if x.get("event") == "status"]
    assert len(status) >= 2, records  # one a second
    assert all("breaker" in x["message"] or "streams[" in x["message"] for x in status), status
    last = status[-1]
    assert last["event"] == "status", last
    assert f"breaker={last['breaker']} " in last["message"]
    assert f"link={last['link']} " in last["message"]
    assert isinstance(last["counts"], dict) and last["alarms"] == []


def test_q_silences_runs_status_line(tmp_path, sim) -> None:
    """The status line is an info record: `run` shows one a second, `run -q` none (and
    with --log-json -q, no status record), and stdout is the same events either way."""
    shown = run_for(tmp_path, sim.port, "2.2").communicate(timeout=120)
    quiet = run_for(tmp_path, sim.port, "2.2", "-q").communicate(timeout=120)
    quiet_json = run_for(tmp_path, sim.port, "2.2", "-q", "--log-json").communicate(timeout=120)
    for out, _ in (shown, quiet, quiet_json):
        assert [json.loads(x)["event"] for x in out.splitlines()] == ["running", "stopped"]
    assert len([x for x in shown[1].splitlines() if x.startswith("mode=")]) >= 2, shown[1]
    assert not [x for x in quiet[1].splitlines() if "breaker=" in x], quiet[1]
    assert not [x for x in _records(quiet_json[1]) if x.get("event") == "status"], quiet_json[1]


def test_run_log_json_says_a_limit_alarm_raised_and_cleared(tmp_path, sim) -> None:
    """A request nested too deep crosses the control.depth limit: with --log-json its alarm
    is a warning record naming the limit, with the detail as a field, and its all-clear
    (after `control.alarm_quiet_s`) an info record; the status record lists the alarm
    while it is up."""
    cfg = tmp_path / "bay.yaml"
    cfg.write_text(BAY.read_text() + "\ncontrol: {alarm_quiet_s: 1.5}\n")
    proc = run_for(tmp_path, sim.port, "30", "--log-json", "--config", str(cfg))
    err = Lines(proc.stderr)
    try:
        running = wait_running(proc)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(running["control"])
            s.sendall(b"[" * 100 + b"\n")
            assert b"nested deeper than 16" in s.recv(65536)
        raised = err.wait_for_json(lambda r: r.get("event") == "limit", "the alarm's record")
        assert (raised["level"], raised["logger"]) == ("warning", "controller.shell")
        assert (raised["limit"], raised["active"]) == ("control.depth", True)
        assert "nested deeper than 16" in raised["detail"]
        assert raised["message"] == f"limit control.depth: {raised['detail']}"
        up = err.wait_for_json(
            lambda r: r.get("event") == "status" and "limit:control.depth" in r["alarms"],
            "a status record with the alarm up",
        )
        assert "alarms[limit:control.depth]" in up["message"]
        cleared = err.wait_for_json(lambda r: r.get("event") == "limit", "the all-clear")
        assert (cleared["level"], cleared["limit"], cleared["active"]) == (
            "info",
            "control.depth",
            False,
        )
        assert cleared["count"] == 1
    finally:
        proc.terminate()
    assert proc.wait(timeout=60) == 0
    assert _records("\n".join(err.all()))  # every line a record


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


def _mode(tmp_path, *args: str) -> None:
    done = goosectl("mode", *args, "--control", str(tmp_path / "ctl.sock"), check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "log-json"])
def test_run_tells_what_it_does_as_timeline_records(tmp_path, sim, as_json) -> None:
    """`run` says on stderr what the demo's timeline says (here: a mode change), as log
    records: plain ``goosectl: mode ...`` lines, or `timeline` JSON objects; Ctrl-C
    (SIGINT) ends it with 130."""
    proc = run_for(tmp_path, sim.port, "60", *(["--log-json"] if as_json else []))
    err = Lines(proc.stderr)
    try:
        wait_running(proc)
        _mode(tmp_path, "test")
        if as_json:
            rec = err.wait_for_json(
                lambda r: r.get("event") == "timeline" and "mode" in r["message"],
                "the mode change's record",
            )
            assert rec["level"] == "info" and rec["what"] == "ModeChanged", rec
            assert rec["message"] == "mode     test, simulation off (control socket)", rec
        else:
            err.wait_for(
                lambda line: line == "goosectl: mode     test, simulation off (control socket)",
                "the mode change's line",
            )
    finally:
        proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    # before the device's first report the status line says so, never "pos=None"
    assert not [x for x in err.all() if "pos=None" in x]
