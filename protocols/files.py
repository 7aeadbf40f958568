"""Creating a file without writing through a link: the one way goosectl makes a file.

Whoever can write to a folder we write into (a shared /tmp, a folder given with `--out`)
can plant a symbolic link, or a hard link to someone else's file, at the name we are about
to create; a plain `open(path, "w")` by root then truncates and overwrites the link's
target. Every file goosectl creates therefore goes through `create_file` (a new file:
O_CREAT|O_EXCL, which never follows a link and fails on anything already there) or
`own_file` (a file that may exist already, e.g. a journal that is resumed: O_NOFOLLOW, and
accepted only if it is a regular file of ours or root's with no other hard link).

It lives in `protocols` because the pcap writer, below everything else, needs it too.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO, TextIO


class UnsafeFile(OSError):
    """A file we were to create or open is a link, someone else's, or not a regular file:
    the message names the path and why it is refused."""


def create_file(path: str | os.PathLike[str], mode: int = 0o644) -> int:
    """A new file at `path` (O_EXCL|O_NOFOLLOW, `mode` less the umask), its descriptor.

    FileExistsError if anything is at `path` already: a file, a dangling or live symbolic
    link, a folder. The caller says what that means for its user (a new name, exit 2)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(path, flags, mode)


def open_new(path: str | os.PathLike[str], mode: int = 0o644) -> BinaryIO:
    """`create_file` as a binary file object (closed by the caller)."""
    return os.fdopen(create_file(path, mode), "wb")


def write_new(path: str | os.PathLike[str], text: str, mode: int = 0o644) -> None:
    """Write `text` to a new file at `path` (see `create_file`)."""
    fh: TextIO
    with os.fdopen(create_file(path, mode), "w", encoding="utf-8") as fh:
        fh.write(text)


def own_file(path: str | os.PathLike[str], mode: int = 0o600) -> int:
    """Open `path` read-write, creating it (`mode`) if it is missing, never through a link.

    A file that exists must be a regular file (not a link: O_NOFOLLOW), owned by this user
    or root, with a single name (a hard link planted to someone else's file would make us
    write theirs); else `UnsafeFile` naming it. Nothing of a refused file is changed."""
    fd = open_nofollow(path, mode)
    why = refusal(os.fstat(fd))
    if why is not None:
        os.close(fd)
        raise UnsafeFile(errno.EPERM, f"{path} {why}: refusing it")
    return fd


def open_nofollow(path: str | os.PathLike[str], mode: int = 0o600) -> int:
    """O_RDWR|O_CREAT|O_NOFOLLOW: `UnsafeFile` for a symbolic link (a dangling one too:
    root must not create the file it points to)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(
                errno.ELOOP, f"{path} is a symbolic link: refusing to follow it"
            ) from None
        raise


def refusal(st: os.stat_result) -> str | None:
    """Why an opened file is not one we may write (see `own_file`), or None."""
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid not in (os.geteuid(), 0):
        return f"belongs to uid {st.st_uid}, not to us"
    if st.st_nlink > 1:
        return f"has {st.st_nlink} hard links (another name could be someone else's file)"
    return None
