"""Where the control socket lives and who may connect to it.

Whoever can connect can run and confirm procedures that operate a breaker, so the socket
is not left to the umask:

- its default place is a folder only the controller's user can enter:
  `$XDG_RUNTIME_DIR/goosectl`, else `/run/goosectl` for root, else `/tmp/goosectl-UID`,
  created 0700 (0710 with a group). An existing folder with another owner or looser
  permissions is refused, never used: in /tmp anyone could have made it first;
- the socket is created 0600 (0660 with `control.group`), under a umask that makes it so
  from the first instant, not chmod-ed after;
- every connection's peer is read from the kernel (SO_PEERCRED, SO_PEERGROUPS) and
  admitted only if it is the controller's own uid, root, or a member of the group;
- an existing file at the path is never deleted, except a socket of our own uid that
  nobody answers on (a controller that died); a live socket names its pid and is left
  alone. A lock file next to the socket (`control.sock.lock`) makes two controllers
  starting at once take turns.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import socket
import stat
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from goosectl.controller.shell.locks import Lock, LockError, lock_file

SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)
_CRED = struct.Struct("3i")


def runtime_dir() -> Path:
    """The per-user folder of the default socket (see the module docstring)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "goosectl"
    if os.geteuid() == 0:
        return Path("/run/goosectl")
    return Path(tempfile.gettempdir()) / f"goosectl-{os.geteuid()}"


def default_path() -> Path:
    """$GOOSECTL_CONTROL, else control.sock in `runtime_dir()`."""
    env = os.environ.get("GOOSECTL_CONTROL")
    if env:
        return Path(env)
    return runtime_dir() / "control.sock"


def group_id(name: str | None) -> int | None:
    if name is None:
        return None
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise LockError(f"control.group {name!r}", "no such group") from None


def private_dir(path: Path, gid: int | None = None) -> None:
    """Create `path` 0700 (0710 and group `gid`), or accept an existing one only if it is a
    real folder of ours that nobody else can write or enter (beyond the group)."""
    what = f"control folder {path}"
    mode = 0o710 if gid is not None else 0o700
    try:
        os.mkdir(path, mode)
        os.chmod(path, mode)  # the umask may have taken bits off
        if gid is not None:
            os.chown(path, -1, gid)
    except FileExistsError:
        pass
    except OSError as exc:
        raise LockError(what, f"cannot create it: {exc.strerror}") from exc
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise LockError(what, "exists and is not a folder (a link or a file): refusing it")
    if st.st_uid != os.geteuid():
        raise LockError(
            what,
            f"belongs to uid {st.st_uid}, not to us (uid {os.geteuid()}): refusing it "
            "(whoever made it could replace the socket)",
        )
    loose = stat.S_IMODE(st.st_mode) & ~mode
    if loose:
        raise LockError(
            what,
            f"mode {stat.S_IMODE(st.st_mode):04o} lets others in (expected {mode:04o}): "
            f"refusing it (chmod {mode:o} {path} if it is yours)",
        )


@dataclass(frozen=True, slots=True)
class Peer:
    pid: int
    uid: int
    gid: int
    #: every group of the peer: its primary and its supplementary groups
    groups: frozenset[int] = frozenset()

    def __str__(self) -> str:
        return f"uid={self.uid} gid={self.gid} pid={self.pid}"


def peer_of(conn: socket.socket) -> Peer:
    """The peer as the kernel saw it when it connected (SO_PEERCRED), with its groups."""
    pid, uid, gid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return Peer(pid, uid, gid, frozenset(peer_groups(conn, uid, gid)))


#: The largest option buffer Python's getsockopt takes: 256 groups.
_GROUPS_BUF = 1024


def peer_groups(conn: socket.socket, uid: int, gid: int) -> set[int]:
    """The peer's groups: SO_PEERGROUPS (the kernel's list, Linux 4.13+) read with a
    buffer Python accepts; for a peer in more groups than it holds (ERANGE), or a kernel
    without the option, the group database's list for the peer's uid (getgrouplist).
    Always with the primary group."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, _GROUPS_BUF)
        return {gid, *struct.unpack(f"{len(raw) // 4}I", raw[: len(raw) // 4 * 4])}
    except OSError:
        pass
    try:
        return {gid, *os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)}
    except (KeyError, OSError):
        return {gid}


def refusal(peer: Peer, gid: int | None) -> str | None:
    """None if the peer may talk to the controller, else why not."""
    me = os.geteuid()
    if peer.uid in (me, 0):
        return None
    if gid is not None and gid in peer.groups:
        return None
    who = ["root"] if me == 0 else [f"uid {me}", "root"]
    if gid is not None:
        who.append(f"group {_group_name(gid)}")
    return f"uid {peer.uid} may not use this controller (only {', '.join(who)})"


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def answering_pid(path: Path, timeout_s: float = 1.0) -> int | None:
    """The pid of the process listening on the socket at `path`, 0 if one listens but its
    pid is unknown, None if nobody answers (a stale socket)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        s.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return None
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT, errno.EACCES):
            return None  # EACCES: not ours to probe; its owner decides (see `_clear`)
        return 0  # e.g. EAGAIN: a full backlog is somebody listening
    else:
        try:
            return peer_of(s).pid
        except OSError:
            return 0
    finally:
        s.close()


def claim(path: Path, gid: int | None = None, backlog: int = 64) -> tuple[socket.socket, Lock]:
    """Take the control socket at `path`: its folder checked (the default one created
    private), its lock held, a stale socket of ours replaced, anything else refused."""
    path = Path(path)
    what = f"control socket {path}"
    if path.parent == runtime_dir():
        private_dir(path.parent, gid)
    lock = lock_file(path.with_name(path.name + ".lock"), what, unlink=True)
    try:
        _clear(path, what)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # 0600 from the first instant
        try:
            sock.bind(str(path))
        except OSError as exc:
            sock.close()
            raise LockError(what, f"cannot bind: {exc.strerror}") from exc
        finally:
            os.umask(old)
        if gid is not None:
            os.chown(path, -1, gid)
            os.chmod(path, 0o660)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        lock.release()
        raise
    return sock, lock


def _clear(path: Path, what: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise LockError(what, "exists and is not a socket: refusing to replace it")
    pid = answering_pid(path)
    if pid is not None:
        raise LockError(what, f"in use by pid {pid}" if pid else "in use by another process")
    if st.st_uid != os.geteuid():
        raise LockError(what, f"a stale socket of uid {st.st_uid}, not ours: refusing to remove it")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a controller of ours died here; nobody answers on it
