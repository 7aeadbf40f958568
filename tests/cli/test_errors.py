"""Errors, never tracebacks: every command with the mistakes users make.

Each mistake must give one line, ``goosectl: <what>: <why>``, naming the file, key or
interface and the reason, and exit 2 (1 for `check` commands that found findings); an
internal error a short message, the path of a saved traceback and exit 70; a reader that
closes the pipe early ends the run quietly with 141 (README: Errors and exit codes).

Most cases call `controller.cli.main` in process (the same entry point as the console
script, and fast); what needs a process of its own runs `python -m goosectl`: pipes, a
folder root cannot write, two demos at once.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from goosectl.controller import cli
from tests.support.peers import CAPTURES, REPO, _require
from tests.support.procs import goosectl

CAP = CAPTURES / "iti_GOOSE.pcap"
BIG_CAP = CAPTURES / "iti_Sample_File_GOOSE.pcap"  # ~190 kB of decode output
TABLE = REPO / "examples" / "tables" / "breaker.yaml"
EVENTS = REPO / "examples" / "tables" / "breaker-events.jsonl"
PROCEDURE = REPO / "examples" / "procedures" / "isolate.yaml"


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A working folder with the files the mistakes need."""
    (tmp_path / "badkey.yaml").write_text("goose:\n  subscriptions: []\n  subscribtions: []\n")
    (tmp_path / "text.txt").write_text("just some notes\n")
    (tmp_path / "a_file").write_text("x\n")
    (tmp_path / "folder").mkdir()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "journal.sqlite").write_text("")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@dataclass(frozen=True)
class Mistake:
    name: str
    argv: list[str]
    message: str  # regex the one line after "goosectl: " must match
    code: int = 2


ROOT = os.geteuid() == 0
NO_IFACE = r"no network interface named 'nosuch0'" if ROOT else r"root|CAP_NET_RAW"

MISTAKES = [
    # -- a missing file
    Mistake("decode", ["decode", "missing.pcap"], r"missing\.pcap: .*No such file or directory"),
    Mistake("replay", ["replay", "missing.pcap"], r"missing\.pcap: .*No such file or directory"),
    Mistake(
        "replay --config",
        ["replay", str(CAP), "--config", "missing.yaml"],
        r"bad config: missing\.yaml: .*No such file or directory",
    ),
    Mistake("table check", ["table", "check", "missing.yaml"], r"missing\.yaml: No such file"),
    Mistake("table render", ["table", "render", "missing.yaml"], r"missing\.yaml: No such file"),
    Mistake(
        "table run --events",
        ["table", "run", str(TABLE), "--events", "missing.jsonl"],
        r"missing\.jsonl: cannot read events: No such file",
    ),
    Mistake("config check", ["config", "check", "missing.yaml"], r"missing\.yaml: No such file"),
    Mistake(
        "demo --config",
        ["demo", "--in-memory", "--config", "missing.yaml"],
        r"bad config: missing\.yaml: .*No such file",
    ),
    Mistake(
        "run --config",
        ["run", "--config", "missing.yaml", "--no-network"],
        r"bad config: missing\.yaml: .*No such file",
    ),
    Mistake(
        "listen --config",
        ["listen", "--iface", "lo", "--config", "missing.yaml"],
        r"bad config: missing\.yaml: .*No such file",
    ),
    Mistake("scl show", ["scl", "show", "missing.scd"], r"missing\.scd: No such file"),
    Mistake("sim --port", ["sim", "--port", "missing-tty"], r"--port missing-tty: no such"),
    Mistake(
        "agent", ["agent", "--control", "missing.sock", "list"], r"missing\.sock.*goosectl run"
    ),
    Mistake("status", ["status", "--control", "missing.sock"], r"missing\.sock.*goosectl run"),
    Mistake("mode", ["mode", "--control", "missing.sock"], r"missing\.sock.*goosectl run"),
    # -- a folder where a file belongs
    Mistake("decode a folder", ["decode", "folder"], r"folder: .*Is a directory"),
    Mistake("replay a folder", ["replay", "folder"], r"folder: .*Is a directory"),
    Mistake("table check a folder", ["table", "check", "folder"], r"folder: is a folder"),
    Mistake("config check a folder", ["config", "check", "folder"], r"folder: is a folder"),
    # -- an existing file or folder where a new one belongs
    Mistake(
        "demo --out FILE", ["demo", "--out", "a_file"], r"--out a_file: exists and is not a folder"
    ),
    Mistake(
        "demo --out used folder",
        ["demo", "--out", "busy"],
        r"--out busy: already holds journal\.sqlite: each demo needs a new or empty folder",
    ),
    Mistake(
        "demo --out under a missing folder",
        ["demo", "--in-memory", "--out", "typo/deeper/run1"],
        r"--out typo/deeper/run1: its parent folder typo/deeper does not exist",
    ),
    # -- an option that does not apply
    Mistake(
        "replay --device sim --speed",
        ["replay", str(CAP), "--device", "sim", "--speed", "2"],
        r"--speed: replay --device sim runs in virtual time only",
    ),
    # -- the wrong type of file
    Mistake("decode a YAML", ["decode", str(TABLE)], r"breaker\.yaml: .*neither pcap nor pcapng"),
    Mistake("replay a YAML", ["replay", str(TABLE)], r"breaker\.yaml: .*neither pcap nor pcapng"),
    Mistake("table check a pcap", ["table", "check", str(CAP)], r"iti_GOOSE\.pcap: a packet capt"),
    Mistake("config check a pcap", ["config", "check", str(CAP)], r"iti_GOOSE\.pcap: a packet"),
    Mistake("config check text", ["config", "check", "text.txt"], r"text\.txt: not a YAML"),
    Mistake(
        "replay --config a pcap",
        ["replay", str(CAP), "--config", str(CAP)],
        r"bad config: .*iti_GOOSE\.pcap:1: .*not UTF-8",
    ),
    Mistake(
        "demo --config a pcap",
        ["demo", "--in-memory", "--config", str(CAP)],
        r"bad config: .*iti_GOOSE\.pcap:1: .*not UTF-8",
    ),
    Mistake(
        "table run --events a pcap",
        ["table", "run", str(TABLE), "--events", str(CAP)],
        r"iti_GOOSE\.pcap: not an events file",
    ),
    Mistake(
        "table run --journal a text file",
        ["table", "run", str(TABLE), "--events", str(EVENTS), "--journal", "text.txt"],
        r"--journal text\.txt: file is not a database",
    ),
    Mistake(
        "table run a procedure",
        ["table", "run", str(PROCEDURE), "--events", str(EVENTS)],
        r"isolate\.yaml: a procedure: it runs on a controller",
    ),
    Mistake("scl show a YAML", ["scl", "show", str(TABLE)], r"breaker\.yaml:1: not well-formed"),
    # -- the wrong interface
    Mistake("listen --iface", ["listen", "--iface", "nosuch0"], NO_IFACE),
    Mistake(
        "publish --iface",
        [
            "publish",
            "--iface",
            "nosuch0",
            "--gocbref",
            "IED1LD0/LLN0$GO$gcb1",
            "--appid",
            "0x1000",
            "--dst",
            "01:0c:cd:01:00:01",
            "--values",
            '[{"type":"boolean","value":true}]',
        ],
        NO_IFACE,
    ),
    Mistake(
        "run --iface",
        ["run", "--iface", "nosuch0", "--port", "/dev/null", "--control", "ctl.sock"],
        NO_IFACE,
    ),
    # -- a bad config key
    Mistake(
        "replay --config bad key",
        ["replay", str(CAP), "--config", "badkey.yaml"],
        r"bad config: badkey\.yaml:3: goose\.subscribtions: Extra inputs are not permitted",
    ),
    Mistake(
        "run --config bad key",
        ["run", "--config", "badkey.yaml", "--no-network"],
        r"bad config: badkey\.yaml:3: goose\.subscribtions: Extra inputs",
    ),
    Mistake(
        "demo --config bad key",
        ["demo", "--in-memory", "--config", "badkey.yaml"],
        r"bad config: badkey\.yaml:3: goose\.subscribtions: Extra inputs",
    ),
    Mistake(
        "listen --config bad key",
        ["listen", "--iface", "lo", "--config", "badkey.yaml"],
        r"bad config: badkey\.yaml:3: goose\.subscribtions: Extra inputs",
    ),
    Mistake(
        "config check bad key",
        ["config", "check", "badkey.yaml"],
        r"badkey\.yaml: config: 1 finding\(s\)",
        code=1,
    ),
]


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_every_mistake_is_one_line_and_exit_2(world, capsys, mistake: Mistake) -> None:
    before = sorted(p.name for p in world.iterdir())
    code = cli.main(mistake.argv)
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("goosectl: ")]
    assert code == mistake.code, err
    assert "Traceback" not in err
    assert len(said) == 1, err
    assert re.search(mistake.message, said[0][len("goosectl: ") :]), said[0]
    assert sorted(p.name for p in world.iterdir()) == before  # a mistake leaves nothing behind


def test_config_check_lists_each_finding_with_file_line_and_key(world, capsys) -> None:
    assert cli.main(["config", "check", "badkey.yaml"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "badkey.yaml:3: goose.subscribtions: Extra inputs are not permitted"


def test_a_usage_mistake_is_argparse_s_two_lines_and_exit_2(world, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["decode"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "usage: goosectl decode" in err
    assert "the following arguments are required: file" in err


# ------------------------------------------------------------------ internal errors


def test_an_internal_error_saves_the_traceback_privately_and_exits_70(
    world, capsys, monkeypatch
) -> None:
    from goosectl.controller.commands import decode

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(decode, "run", broken)
    monkeypatch.setenv("XDG_STATE_HOME", str(world / "state"))
    assert cli.main(["decode", str(CAP)]) == cli.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert lines[0] == "goosectl: internal error: ZeroDivisionError: a bug"
    path = Path(re.search(r"the traceback is in (\S+)", lines[1]).group(1))
    assert path.parent == world / "state" / "goosectl"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "Traceback" in text and "ZeroDivisionError: a bug" in text and "def broken" not in err


def test_a_state_folder_that_is_a_symlink_is_not_written_through(
    world, capsys, monkeypatch
) -> None:
    """The state folder is someone else's symlink: the traceback goes to a new private file
    in the temporary folder instead, never through the link."""
    from goosectl.controller.commands import decode

    elsewhere = world / "elsewhere"
    elsewhere.mkdir()
    (world / "state").mkdir()
    (world / "state" / "goosectl").symlink_to(elsewhere)
    tmp = world / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(decode, "run", lambda args: 1 / 0)
    monkeypatch.setenv("XDG_STATE_HOME", str(world / "state"))
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    assert cli.main(["decode", str(CAP)]) == 70
    path = Path(re.search(r"the traceback is in (\S+)", capsys.readouterr().err).group(1))
    assert path.parent == tmp and path.name.startswith("goosectl-crash-")
    assert list(elsewhere.iterdir()) == []


def test_a_broken_pipe_that_is_not_stdout_is_an_error_not_silence(world, capsys, monkeypatch):
    """A socket whose peer went away (a controller that died mid-request) is reported;
    only stdout's or stderr's reader leaving ends a run quietly."""
    import errno

    from goosectl.controller.commands import status

    def peer_gone(args):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(status, "run", peer_gone)
    assert cli.main(["status"]) == 2
    assert capsys.readouterr().err == "goosectl: Broken pipe (the other end went away)\n"


# ------------------------------------------------------------------ separate processes


def run(*args, cwd: Path, prefix: tuple[str, ...] = (), timeout: float = 300):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return goosectl(*map(str, args), check=False, timeout=timeout, prefix=prefix, cwd=cwd, env=env)


def test_version(tmp_path) -> None:
    done = run("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert re.fullmatch(r"goosectl \d+\.\d+\.\d+.*\n", done.stdout)


TOGGLE = """\
name: toggle
version: "1"
initial: a
states: [a, b]
events: [flip]
transitions:
  - {source: a, event: flip, target: b}
  - {source: b, event: flip, target: a}
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", str(BIG_CAP)],
        ["replay", str(CAP), "--loop", "300"],
        ["table", "run", "toggle.yaml", "--events", "flips.jsonl"],
    ],
    ids=["decode", "replay", "table run"],
)
def test_a_pipe_closed_early_ends_quietly_with_141(tmp_path, argv) -> None:
    """`goosectl X | head -1`: the reader takes one line and leaves; the rest of the output
    (well beyond a pipe's 64 kB buffer) meets a closed pipe."""
    (tmp_path / "toggle.yaml").write_text(TOGGLE)
    (tmp_path / "flips.jsonl").write_text(
        "".join(f'{{"time_ms": {i}, "event": "flip"}}\n' for i in range(5000))
    )
    with open(tmp_path / "stderr", "w+b") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "goosectl", *argv],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=err,
        )
        first = proc.stdout.readline()
        proc.stdout.close()
        code = proc.wait(timeout=300)
        err.seek(0)
        said = err.read().decode()
    assert first
    assert code == cli.EXIT_PIPE, said
    assert said == ""


def _unwritable(folder: Path) -> tuple[str, ...]:
    """A folder this test's goosectl cannot write, for real: owned by nobody, mode 0755, and
    (as root) run without the capabilities that let root write anyway."""
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return ()
    setpriv = shutil.which("setpriv")
    _require(setpriv is not None, "needs setpriv (util-linux) to drop root's capabilities")
    os.chown(folder, 65534, 65534)
    caps = "-dac_override,-dac_read_search,-fowner"
    return (setpriv or "setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}")


def test_demo_in_a_folder_it_cannot_write(tmp_path) -> None:
    """The issue's PermissionError: `goosectl demo` where it cannot create its folder."""
    folder = tmp_path / "locked"
    prefix = _unwritable(folder)
    done = run("demo", "--in-memory", cwd=folder, prefix=prefix)
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(
        r"goosectl: cannot create the demo's folder .*/locked/goosectl-demo-\d{8}-\d{6}: "
        r"Permission denied \(--out DIR writes elsewhere\)\n",
        done.stderr,
    )
    assert list(folder.iterdir()) == []


def test_replay_journal_in_a_folder_it_cannot_write(tmp_path) -> None:
    folder = tmp_path / "locked"
    prefix = _unwritable(folder)
    done = run("replay", CAP, "--journal", folder / "j.sqlite", cwd=tmp_path, prefix=prefix)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert re.fullmatch(r"goosectl: journal .*/locked/j\.sqlite: unable to open .*", line)


@pytest.fixture
def read_only_mount(tmp_path):
    """A read-only tmpfs the test mounts and always unmounts (root: EROFS is real)."""
    _require(os.geteuid() == 0, "needs root to mount a read-only tmpfs")
    path = tmp_path / "ro"
    path.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)],
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True, capture_output=True)


def test_demo_on_a_read_only_mount(read_only_mount) -> None:
    done = run("demo", "--in-memory", "--out", read_only_mount / "out", cwd=read_only_mount)
    assert done.returncode == 2, done.stderr
    assert re.fullmatch(
        r"goosectl: cannot create the demo's folder .*/ro/out: Read-only file system\n",
        done.stderr,
    )


def _rows(journal: Path) -> list[tuple]:
    con = sqlite3.connect(journal)
    try:
        return con.execute("SELECT seq, time_ns, machine, event, target FROM journal").fetchall()
    finally:
        con.close()


def test_two_demos_started_in_the_same_second_never_share_a_folder(tmp_path) -> None:
    """The folder names of this minute are taken already, so both demos fall back to the
    next free name at once, racing for it: each must still get its own folder and journal,
    complete, and the same as the other's (the demo is deterministic)."""
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    taken = set()
    for s in range(-2, 90):
        name = f"goosectl-demo-{(now + dt.timedelta(seconds=s)).strftime('%Y%m%d-%H%M%S')}"
        (tmp_path / name).mkdir()
        taken.add(name)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "goosectl", "demo", "--in-memory"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert "Traceback" not in err
    folders = [re.search(r"writing to (\S+)/", out).group(1) for out, _ in outs]
    assert folders[0] != folders[1]
    assert not taken & set(folders)
    journals = [_rows(tmp_path / f / "journal.sqlite") for f in folders]
    assert len(journals[0]) > 500
    assert journals[0] == journals[1]


def test_bench_live_as_a_user_is_refused_before_anything_is_measured(tmp_path) -> None:
    """`bench --live` needs root; as a user it used to measure the in-process trips and
    the pty floor first, and only then refuse: the refusal is the one thing said."""
    setpriv = shutil.which("setpriv")
    _require(setpriv is not None, "needs setpriv (util-linux) to run as another user")
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        prefix = (setpriv or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    tmp_path.chmod(0o777)
    done = run("bench", "--live", "--samples", "200", cwd=tmp_path, prefix=prefix)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "goosectl: --live needs root (network namespaces, raw sockets)\n"
    assert list(tmp_path.iterdir()) == []  # no histogram, no table
