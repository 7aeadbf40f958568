"""What one controller must own alone: its state folder, its journal, its control socket.

Two `goosectl run` on one state folder write one journal from two processes (integrity
errors, two sessions executing one step); on one control socket the second silently
steals it. Each is taken with an exclusive `flock` held for the life of the process: the
kernel drops it when the process dies, however it dies, so a lock is never stale. A lock
that is held is refused with the pid of its holder, read from /proc/locks (the kernel's
list), so the message names the other controller: ``state folder /x: in use by pid 4242``.
The serial device is locked where it is opened (`protocols.serial.port.open_serial`,
flock and, except on a pty, TIOCEXCL on the port's own descriptor).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
from pathlib import Path

from goosectl.protocols.files import UnsafeFile, open_nofollow, refusal
from goosectl.protocols.serial.port import lock_holder


class LockError(Exception):
    """Something this controller needs is held by another process: says what and who."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")
        self.what = what
        self.why = why


class Lock:
    """An exclusive flock on an open file, held until `release` (or the process ends)."""

    def __init__(self, fd: int, path: Path, what: str, unlink: bool = False) -> None:
        self.fd: int | None = fd
        self.path = path
        self.what = what
        self._unlink = unlink

    def release(self) -> None:
        if self.fd is None:
            return
        if self._unlink:
            # unlinked while still held: a process that opened the old file re-checks the
            # inode after its flock and starts over (see `lock_file`)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        os.close(self.fd)
        self.fd = None


def _in_use(path: Path, fd: int | None = None) -> str:
    pid = lock_holder(path)
    if pid is None and fd is not None:
        with contextlib.suppress(OSError, ValueError):
            pid = int(os.pread(fd, 32, 0).split()[0])
    return f"in use by pid {pid}" if pid else "in use by another process"


#: What a lock file of ours holds: the holder's pid and a newline (nothing else).
_PID_LINE = re.compile(rb"\d{0,20}\n?")


def lock_file(path: Path, what: str, *, unlink: bool = False) -> Lock:
    """Create (0600) or open `path` and take its flock; LockError naming the holder if
    another process has it. The file must be ours (or root's), not a symlink, and hold
    nothing but a pid (what we write into it): a file planted there, or someone's own file
    that happens to have the name, is refused, never followed, truncated or deleted.
    `unlink`: remove it on release (a lock file next to a socket); a state folder's lock
    file stays."""
    path = Path(path)
    for _ in range(100):
        try:
            fd = open_nofollow(path)
        except UnsafeFile as exc:
            raise LockError(what, exc.strerror or str(exc)) from exc
        except OSError as exc:
            raise LockError(what, f"cannot open {path}: {exc.strerror}") from exc
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid not in (os.geteuid(), 0):
            os.close(fd)
            raise LockError(
                what, f"{path} is not a lock file of ours (owner uid {st.st_uid}): refusing it"
            )
        if _PID_LINE.fullmatch(os.pread(fd, 64, 0)) is None:
            os.close(fd)
            raise LockError(
                what, f"{path} holds something other than a pid: not a lock file, left alone"
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            why = _in_use(path, fd)
            os.close(fd)
            raise LockError(what, f"{why} ({path} is locked)") from None
        if not _same(path, st):
            os.close(fd)  # the previous holder removed it between our open and our flock
            continue
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return Lock(fd, path, what, unlink=unlink)
    raise LockError(what, f"{path} keeps being replaced while we lock it")


def lock_journal(path: Path, what: str) -> Lock:
    """Take the flock of the journal file itself, so a journal is held by its identity
    (device, inode), whatever name or hard link reached it: a second controller given
    the same file (`--journal S1/bay.sqlite` beside state folder S1, a link to it) is
    refused naming the holder. Created (0600) if missing, never through a symbolic link
    (a dangling one must not make root create its target). SQLite's own locks are POSIX
    record locks, which a flock does not touch. The file's bytes are never written here."""
    path = Path(path)
    try:
        fd = open_nofollow(path)
    except UnsafeFile as exc:
        raise LockError(what, exc.strerror or str(exc)) from exc
    except OSError as exc:
        raise LockError(what, f"cannot open {path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        why = _in_use(path)
        os.close(fd)
        raise LockError(what, f"{why} (the file is locked)") from None
    why_not = refusal(os.fstat(fd))
    if why_not is not None:
        os.close(fd)
        raise LockError(what, f"{path} {why_not}: refusing it")
    return Lock(fd, path, what)


def _same(path: Path, st: os.stat_result) -> bool:
    """Is `path` still the file `st` describes (not removed or replaced meanwhile)?"""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)
