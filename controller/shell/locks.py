"""What one controller must own alone: its state folder and its control socket.

Two `goosectl run` on one state folder write one journal from two processes (integrity
errors, two sessions executing one step); on one control socket the second silently
steals it. Each is taken with an exclusive `flock` held for the life of the process: the
kernel drops it when the process dies, however it dies, so a lock is never stale. A lock
that is held is refused with the pid of its holder, read from /proc/locks (the kernel's
list), so the message names the other controller: ``state folder /x: in use by pid 4242``.
The serial device is locked where it is opened (`protocols.serial.port.open_serial`,
flock and TIOCEXCL on the port's own descriptor).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from pathlib import Path

from protocols.serial.port import lock_holder


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


def lock_file(path: Path, what: str, *, unlink: bool = False) -> Lock:
    """Create (0600) or open `path` and take its flock; LockError naming the holder if
    another process has it. The file must be ours (or root's) and not a symlink: a lock
    file planted by someone else is refused, not followed. `unlink`: remove it on release
    (a lock file next to a socket); a state folder's lock file stays."""
    path = Path(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise LockError(what, f"{path} is a symbolic link: refusing to follow it") from exc
            raise LockError(what, f"cannot open {path}: {exc.strerror}") from exc
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid not in (os.geteuid(), 0):
            os.close(fd)
            raise LockError(
                what, f"{path} is not a lock file of ours (owner uid {st.st_uid}): refusing it"
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            why = _in_use(path, fd)
            os.close(fd)
            raise LockError(what, f"{why} ({path} is locked)") from None
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)  # the previous holder removed it between our open and our flock
            continue
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return Lock(fd, path, what, unlink=unlink)
    raise LockError(what, f"{path} keeps being replaced while we lock it")
