"""Who may hold and operate the control socket: a client that trickles bytes is as idle as
a silent one; a member by a supplementary group is admitted (SO_PEERGROUPS read right); a
session is confirmed only by the uid that started it or a `control.supervisor_group`
member. Real controller, real `nobody` through setpriv, the `goosectl agent` CLI."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import connect, goosectl
from .test_socket_place import NOBODY, require_root

USERS = 100  # the `users` group: nobody is put in it as a supplementary group only


def test_a_slow_loris_client_is_closed_after_the_idle_timeout(controllers) -> None:
    ctl = controllers({"control": {"idle_timeout_s": 2}})
    s = connect(ctl.sock)
    s.settimeout(0.2)
    s.sendall(b'{"op": ')
    closed = None
    start = time.monotonic()
    while time.monotonic() - start < 12:
        try:
            s.sendall(b" ")  # a byte every 0.5 s: never a whole request
        except OSError:
            closed = "send failed"
            break
        try:
            got = s.recv(65536)
        except TimeoutError:
            got = None
        if got is not None:
            closed = got.decode()
            break
        time.sleep(0.3)
    assert closed is not None, "a client trickling bytes kept its connection"
    assert "idle for 2 s" in closed or closed in ("", "send failed")
    assert ctl.stop()["control"]["control.idle"] == 1


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder others may pass through (0711) for a socket the `users` group may use."""
    d = Path(tempfile.mkdtemp(prefix="goosectl-who-"))
    os.chmod(d, 0o711)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def as_member(sock: Path, *agent: str) -> tuple[int, dict]:
    """`goosectl agent ARGS` as nobody, a member of `users` by a supplementary group only."""
    prefix = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={USERS}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    done = goosectl("agent", "--control", str(sock), *agent, prefix=prefix, check=False,
                    env=env | {"HOME": "/tmp"})  # fmt: skip
    if done.returncode == 2:  # a refusal: one line on stderr, nothing on stdout
        assert done.stdout == "" and done.stderr.startswith("goosectl: agent "), done
        return 2, {"ok": False, "error": done.stderr.split(": ", 2)[2].strip()}
    assert done.returncode == 0, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_supplementary_member_is_admitted_but_confirms_only_its_own_sessions(
    controllers, shared
) -> None:
    require_root()
    ctl = controllers({"control": {"group": "users"}}, control=shared / "ctl.sock")
    root_session = ctl.request({"op": "run", "procedure": "hold", "params": {"n": 1}})
    assert root_session["ok"], root_session
    code, listed = as_member(ctl.sock, "list")
    assert code == 0 and listed["ok"], listed
    code, refused = as_member(ctl.sock, "confirm", root_session["session"])
    assert code == 2 and refused["error"].startswith(
        f"permission denied: session {root_session['session']} was started by uid 0"
    ), refused
    status = ctl.request({"op": "status", "session": root_session["session"]})
    assert "waiting" in json.dumps(status), status  # still waiting for its owner
    code, mine = as_member(ctl.sock, "run", "hold", "n=2")
    assert code == 0 and mine["ok"], mine
    code, confirmed = as_member(ctl.sock, "confirm", mine["session"])
    assert code == 0 and confirmed["ok"], confirmed
    ctl.stop()


def test_a_supervisor_group_member_may_confirm_anyones_session(controllers, shared) -> None:
    require_root()
    limits = {"control": {"group": "users", "supervisor_group": "users"}}
    ctl = controllers(limits, control=shared / "ctl.sock")
    root_session = ctl.request({"op": "run", "procedure": "hold", "params": {"n": 1}})
    code, confirmed = as_member(ctl.sock, "confirm", root_session["session"])
    assert code == 0 and confirmed["ok"], confirmed
    ctl.stop()
