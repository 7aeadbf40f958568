"""Where the control socket lives, who may use it, and what is never
deleted. A real controller, real sockets, and a real other user (`nobody`, in a forked
child that gives up root) as the one who should not get in."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import goosectl, read_line

NOBODY = 65534


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user (nobody)")


def as_nobody(path: Path, line: bytes = b'{"op": "list"}\n', group: int = NOBODY) -> str:
    """Connect to `path` as uid nobody (gid `group`) and send `line`; what happened."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: another user from here on
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(group)
            os.setuid(NOBODY)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            try:
                s.connect(str(path))
            except OSError as exc:
                out = f"connect: {exc.strerror}"
            else:
                with contextlib.suppress(OSError):
                    s.sendall(line)
                try:
                    out = json.dumps(read_line(s))
                except OSError as exc:
                    out = f"read: {exc}"
            os.write(w, out.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read().decode()
    os.waitpid(pid, 0)
    return got


@pytest.fixture
def xdg() -> Iterator[dict[str, str]]:
    """An $XDG_RUNTIME_DIR that other users may pass through (0711, like /run/user/UID's
    parent), so what keeps them out is the controller's own folder, not pytest's."""
    run = Path(tempfile.mkdtemp(prefix="goosectl-xdg-"))
    os.chmod(run, 0o711)
    try:
        yield {"XDG_RUNTIME_DIR": str(run), "GOOSECTL_CONTROL": ""}
    finally:
        shutil.rmtree(run, ignore_errors=True)


# -- row 5 -----------------------------------------------------------------------------------


def test_row5_default_socket_is_private_even_with_umask_000(controllers, xdg):
    require_root()
    env = xdg
    ctl = controllers(control=False, env=env, preexec_fn=lambda: os.umask(0))
    folder = Path(env["XDG_RUNTIME_DIR"]) / "goosectl"
    assert ctl.sock == folder / "control.sock"
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(ctl.sock).st_mode) == 0o600
    # `goosectl agent` finds it by the same rule
    r = goosectl("agent", "list", env={**os.environ, **env}, check=False)
    assert r.returncode == 0 and json.loads(r.stdout)["ok"], r.stderr
    # nobody cannot even reach it
    assert as_nobody(ctl.sock) == "connect: Permission denied"
    # and if an admin opens it all up, the peer check still says no, and it is journaled
    os.chmod(folder, 0o777)
    os.chmod(ctl.sock, 0o777)
    refused = json.loads(as_nobody(ctl.sock, b'{"op": "confirm", "session": "s1"}\n'))
    assert refused == {
        "ok": False,
        "error": f"permission denied: uid {NOBODY} may not use this controller (only root)",
    }
    # its own user still gets in, once the folder is private again: a client refuses to
    # talk through a folder anyone could have put a socket in
    os.chmod(folder, 0o700)
    assert ctl.request({"op": "list"})["ok"]
    report = ctl.stop()
    assert report["control"]["control.peer"] == 1
    assert report["control"]["requests.answered"] == 2  # goosectl agent list, and ours
    peer_rows = ctl.journal("limit:control.peer")
    assert f"uid={NOBODY} gid={NOBODY}" in peer_rows[0][4]
    asked = [r[4] for r in ctl.journal("control")]
    assert any(f"uid=0 gid=0 pid={os.getpid()} op='list' ok" == d for d in asked), asked


def test_row5_a_configured_group_may_use_the_socket(controllers, xdg):
    require_root()
    ctl = controllers({"control": {"group": "nogroup"}}, control=False, env=xdg)
    folder = ctl.sock.parent
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o710
    assert os.stat(folder).st_gid == NOBODY
    assert stat.S_IMODE(os.stat(ctl.sock).st_mode) == 0o660
    answer = json.loads(as_nobody(ctl.sock))
    assert answer["ok"] and "hello" in answer["procedures"]
    ctl.stop()
    asked = [r[4] for r in ctl.journal("control")]
    assert any(d.startswith(f"uid={NOBODY} gid={NOBODY} pid=") for d in asked), asked


def test_row5_a_runtime_folder_made_by_someone_else_is_refused(controllers, xdg):
    require_root()
    env = xdg
    squat = Path(env["XDG_RUNTIME_DIR"]) / "goosectl"
    squat.mkdir()
    os.chown(squat, NOBODY, NOBODY)
    ctl = controllers(control=False, env=env, expect_running=False)
    assert ctl.proc.wait(60) == 2
    ctl.err.wait_for(
        lambda x: (
            x == f"goosectl: control folder {squat}: belongs to uid {NOBODY}, not to us (uid 0): "
            "refusing it (whoever made it could replace the socket)"
        ),
        "the refusal",
    )
    os.chown(squat, 0, 0)
    os.chmod(squat, 0o777)
    ctl = controllers(control=False, env=env, expect_running=False)
    assert ctl.proc.wait(60) == 2
    ctl.err.wait_for(lambda x: "mode 0777 lets others in (expected 0700)" in x, "the refusal")
    assert list(squat.iterdir()) == []  # nothing was created in it


# -- row 6 -----------------------------------------------------------------------------------


def test_row6_an_existing_file_is_never_deleted(controllers, tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("do not delete\n")
    inode = precious.stat().st_ino
    ctl = controllers(control=precious, expect_running=False)
    assert ctl.proc.wait(60) == 2
    ctl.err.wait_for(
        lambda x: (
            x == f"goosectl: control socket {precious}: exists and is not a socket: "
            "refusing to replace it"
        ),
        "the refusal",
    )
    assert precious.read_text() == "do not delete\n" and precious.stat().st_ino == inode


def test_row6_a_stale_socket_of_ours_is_replaced_others_are_not(controllers, tmp_path):
    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(stale))
    s.close()  # a controller that died: the file stays, nobody answers
    ctl = controllers(control=stale)
    assert ctl.request({"op": "list"})["ok"]
    ctl.stop()
    assert not stale.exists()  # removed at stop: it was ours

    if os.geteuid() == 0:
        theirs = tmp_path / "theirs.sock"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(theirs))
        s.close()
        os.chown(theirs, NOBODY, NOBODY)
        other = controllers(control=theirs, name="other", expect_running=False)
        assert other.proc.wait(60) == 2
        other.err.wait_for(
            lambda x: f"a stale socket of uid {NOBODY}, not ours: refusing to remove it" in x,
            "the refusal",
        )
        assert theirs.exists()

    live = tmp_path / "live.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(live))
    listener.listen(1)  # somebody answers here (this test process)
    try:
        busy = controllers(control=live, name="busy", expect_running=False)
        assert busy.proc.wait(60) == 2
        busy.err.wait_for(
            lambda x: x == f"goosectl: control socket {live}: in use by pid {os.getpid()}",
            "the refusal naming our pid",
        )
        assert live.exists()
    finally:
        listener.close()
