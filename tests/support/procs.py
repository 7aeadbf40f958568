"""goosectl's processes, started for a test the way an operator starts them: a command run
to completion (`goosectl(...)`), the breaker simulator (`goosectl sim`) and the controller
without networks (`goosectl run --no-network`).

One place for what every such test repeated: the interpreter and module to run, the
working folder, the pipes, the first line that says the process is ready (the simulator's
port, the controller's `running` event), and a stop that drains the pipes (a writer blocked
on a full pipe never exits).
"""

from __future__ import annotations

import ast
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.peers import REPO


def goosectl_argv(*args: str) -> list[str]:
    """The command line of `goosectl ARGS` from this checkout (`python -m goosectl`)."""
    return [sys.executable, "-m", "goosectl", *args]


def goosectl(
    *args: str,
    check: bool = True,
    timeout: float = 300,
    prefix: tuple[str, ...] = (),
    **run: Any,
) -> subprocess.CompletedProcess:
    """`goosectl ARGS` from this checkout, run to completion, its output captured (text
    unless `text=False`), in the checkout unless `cwd` is given. `prefix` runs it under
    another command (one that drops capabilities); `run` goes to subprocess.run (`env`,
    `input`, `preexec_fn`). With `check`, an exit status other than 0 fails the test
    with the command line, the status, stdout and stderr: the failure says why."""
    run.setdefault("cwd", REPO)
    run.setdefault("text", True)
    argv = [*prefix, *goosectl_argv(*args)]
    done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False, **run)
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, argv))}\nexited {done.returncode}"
            f"\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
    return done


class Sim:
    """`goosectl sim ARGS` (`--pty`, `--tcp ...`, faults) as its own process; `port` is the
    first line it prints: the pty's path or the socket URL a controller opens. `link`
    names the stable symlink to the pty (`--link`). `stop()` returns its stderr, where its
    counters are (`operations={...} executed={...}`)."""

    def __init__(self, *args: str, link: Path | None = None) -> None:
        argv = goosectl_argv("sim", *args, *(["--link", str(link)] if link else []))
        self.proc = subprocess.Popen(
            argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None  # piped above
        self.port = self.proc.stdout.readline().strip()
        assert self.port, f"the simulator did not start: {self.proc.stderr.read()}"
        self.err = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout_s: float = 20.0) -> str:
        """SIGTERM (unless it ended already), its pipes drained; its stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, self.err = self.proc.communicate(timeout=timeout_s)
        return self.err

    def __enter__(self) -> Sim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sim_counts(stderr: str) -> tuple[dict[str, int], dict[str, int]]:
    """(operations, executed commands) as the simulator counted them: its last stderr
    line, ``... operations={'close': 1} executed={'CLOSE': 1, ...}``. The device's own
    counters, so a test asserts what was operated, not what the controller believes."""
    stats = stderr.strip().splitlines()[-1]
    found = {key: re.search(rf"{key}=(\{{[^}}]*\}})", stats) for key in ("operations", "executed")}
    missing = [key for key, m in found.items() if m is None]
    assert not missing, f"no {missing} in the simulator's last line: {stats!r}"
    operations, executed = (ast.literal_eval(m.group(1)) for m in found.values() if m)
    return operations, executed


def start_run(
    port: str,
    *args: str,
    prefix: tuple[str, ...] = (),
    stderr: Any = subprocess.PIPE,
    **popen: Any,
) -> subprocess.Popen:
    """`goosectl run --no-network --port PORT ARGS` as its own process (stdout piped, stderr
    piped unless given: a file, DEVNULL). `prefix` runs it under another command (e.g.
    one that drops capabilities); `popen` goes to Popen (`env`, `preexec_fn`)."""
    argv = [*prefix, *goosectl_argv("run", "--no-network", "--port", port, *args)]
    return subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=stderr, text=True, **popen
    )


def start_agent_bay(folder: Path, port: str, sock: Path) -> subprocess.Popen:
    """`goosectl run` of the bay in `folder` (its bay.yaml, its state and procedures
    folders) on PORT with its own control socket, returned once it says it is running: the
    controller the agent's restart tests kill and start again on the same state."""
    proc = start_run(
        port, "--quiet", "--config", str(folder / "bay.yaml"), "--state", str(folder / "state"),
        "--procedures", str(folder / "procedures"), "--control", str(sock),
    )  # fmt: skip
    wait_running(proc)
    return proc


def wait_running(proc: subprocess.Popen, stderr: Path | None = None) -> dict[str, Any]:
    """The controller's first stdout line, which must be its `running` event (else the
    test fails with that line and the controller's stderr: its pipe, or the file
    `stderr` it was given)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if '"running"' not in line:
        if stderr is not None:
            said = stderr.read_text()
        else:
            said = proc.stderr.read() if proc.stderr is not None else ""
        raise AssertionError(line + said)
    return json.loads(line)
