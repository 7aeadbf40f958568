"""A disk that fills up, for real: a small tmpfs the test mounts and always unmounts.

`fill` writes a file until the kernel says ENOSPC; deleting it gives the space back.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.peers import _require


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    """Mount a tmpfs of `size` on `path` (created), yield it, unmount it whatever happens."""
    _require(os.geteuid() == 0, "needs root to mount a small tmpfs (a disk that fills up)")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        done = subprocess.run(["umount", str(path)], capture_output=True)
        if done.returncode != 0:  # still open somewhere (a process the test failed to stop)
            subprocess.run(["umount", "-l", str(path)], check=True, capture_output=True)


def fill(folder: Path, name: str = "filler") -> Path:
    """Write zeros into `folder/name` until the filesystem is full; returns the file."""
    path = folder / name
    chunk = b"\0" * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    return path


def free_bytes(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize
