"""The serial port's lock as an unprivileged operator meets it.

A controller that stopped (or was killed) must not leave the simulator's pty refused to
the next controller ("Device or resource busy" until the simulator restarts), and a port
that really is held is refused naming the process that holds it. Real processes, a real
other user (`nobody`, through setpriv): root may open an exclusive tty anyway, which is
why the problem never showed in root's own tests.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.peers import REPO
from tests.support.procs import goosectl_argv, wait_running

NOBODY = 65534


@pytest.fixture
def unprivileged() -> Iterator[tuple[tuple[str, ...], Path]]:
    """(the command prefix that runs as nobody, a folder nobody owns)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run processes as another user (nobody)")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    folder = Path(tempfile.mkdtemp(prefix="goosectl-busy-"))
    os.chown(folder, NOBODY, NOBODY)
    try:
        yield (setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"), folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _sim(prefix: tuple[str, ...], folder: Path) -> subprocess.Popen:
    argv = [*prefix, *goosectl_argv("sim", "--pty", "--link", str(folder / "dev.pty"))]
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip(), "the simulator did not start"
    return proc


def _run(prefix: tuple[str, ...], folder: Path, name: str, *args: str) -> subprocess.Popen:
    argv = [
        *prefix,
        *goosectl_argv(
            "run", "--no-network", "--port", str(folder / "dev.pty"),
            "--state", str(folder / name), "--control", str(folder / f"{name}.sock"), *args,
        ),
    ]  # fmt: skip
    return subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_second_run_after_the_first_stopped_opens_the_port(unprivileged):
    prefix, folder = unprivileged
    sim = _sim(prefix, folder)
    try:
        for name in ("first", "second"):
            ctl = _run(prefix, folder, name, "--duration", "2")
            _out, err = ctl.communicate(timeout=120)
            assert ctl.returncode == 0, err
            # the link came up: the timeline says so the moment it does (a status line is
            # once a second, and on a loaded host the last one may still say degraded)
            assert "busy" not in err and "link_state up" in err, err
    finally:
        sim.terminate()
        sim.communicate(timeout=20)


def test_a_second_run_after_the_first_was_killed_opens_the_port(unprivileged):
    prefix, folder = unprivileged
    sim = _sim(prefix, folder)
    try:
        first = _run(prefix, folder, "first")
        wait_running(first)
        first.kill()
        first.communicate(timeout=20)
        ctl = _run(prefix, folder, "second", "--duration", "2")
        _out, err = ctl.communicate(timeout=120)
        assert ctl.returncode == 0, err
        assert "link=up" in err, err
    finally:
        sim.terminate()
        sim.communicate(timeout=20)


HOLDER = """
import fcntl, os, sys, termios, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY)
fcntl.ioctl(fd, termios.TIOCEXCL)
print("held", flush=True)
time.sleep(120)
"""


def test_a_port_held_by_another_program_is_refused_naming_its_pid(unprivileged):
    """A terminal program (no flock, only TIOCEXCL) holds the port: the refusal names it."""
    prefix, folder = unprivileged
    sim = _sim(prefix, folder)
    argv = [*prefix, sys.executable, "-c", HOLDER, str(folder / "dev.pty")]
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        ctl = _run(prefix, folder, "second", "--duration", "2")
        _out, err = ctl.communicate(timeout=120)
        assert ctl.returncode == 2, err
        assert re.search(rf"in use by (pid|process) {holder.pid}\b", err), err
    finally:
        holder.kill()
        holder.communicate(timeout=20)
        sim.terminate()
        sim.communicate(timeout=20)
