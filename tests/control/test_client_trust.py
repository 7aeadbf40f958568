"""`goosectl agent` as a client: it talks only to a controller it can trust (a socket in a
folder of its own, root's or its group's, answered by its own uid, root or that folder's
owner, from the kernel's SO_PEERCRED), and every failure on its side (no answer in time,
an answer that is not JSON) is one line and exit 2, never a traceback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import goosectl
from .test_socket_place import NOBODY, require_root

#: A fake controller: answers every connection with `ok` (and so would be told anything).
FAKE = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.recv(65536)
    c.sendall(b'{"ok": true, "sessions": [], "procedures": ["fake"]}\\n')
    c.close()
"""


@pytest.fixture
def folder() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="goosectl-client-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def fake_controller(sock: Path, *prefix: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-c", FAKE, str(sock)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def agent_list(sock: Path) -> subprocess.CompletedProcess:
    return goosectl("agent", "--control", str(sock), "list", check=False)


def one_line_exit_2(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_a_fake_controller_in_someone_elses_folder_is_refused(folder: Path) -> None:
    require_root()
    planted = folder / "goosectl-0"
    planted.mkdir()
    sock = planted / "control.sock"
    proc = fake_controller(sock)
    os.chown(planted, NOBODY, NOBODY)  # as if nobody had made the folder first
    try:
        one_line_exit_2(agent_list(sock), f"control folder {planted}", f"uid {NOBODY}")
    finally:
        proc.kill()
        proc.wait()


def test_a_fake_controller_of_another_uid_in_a_shared_folder_is_refused(folder: Path) -> None:
    require_root()
    os.chmod(folder, 0o1777)  # like /tmp: anyone may create a socket there
    sock = folder / "control.sock"
    proc = fake_controller(sock, "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                           "--clear-groups")  # fmt: skip
    try:
        one_line_exit_2(agent_list(sock), f"answered by uid {NOBODY}", f"pid {proc.pid}")
    finally:
        proc.kill()
        proc.wait()


def serve_once(sock: Path, answer: bytes | None) -> threading.Thread:
    """A server of our own uid that takes one request and answers `answer` (None: never)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(sock))
    s.listen(1)

    def run() -> None:
        c, _ = s.accept()
        c.recv(65536)
        if answer is not None:
            c.sendall(answer)
        c.recv(1)  # until the client gives up
        c.close()
        s.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_malformed_answer_is_exit_2_with_a_line(folder: Path) -> None:
    sock = folder / "control.sock"
    serve_once(sock, b"this is not json\n")
    one_line_exit_2(agent_list(sock), str(sock), "not a JSON object")


def test_an_answer_that_never_comes_is_exit_2_with_a_line(folder: Path) -> None:
    sock = folder / "control.sock"
    serve_once(sock, None)
    one_line_exit_2(agent_list(sock), str(sock), "did not answer within")
