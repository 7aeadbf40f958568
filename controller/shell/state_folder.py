"""The state folder: where a controller keeps its journals, and what it resumes from.

An agent journal in it is resumed at start, and an in-flight step of it may act on the
breaker, so the folder is as trusted as the controller itself. Another user who can write
into it (a folder created under umask 000 is 0777) could plant a journal and have its
steps executed; a folder owned by another user is theirs to change. Both are refused,
naming the folder, before anything in it is opened. A folder goosectl creates is 0700
whatever the umask (the mode is set after the mkdir, which the umask filters).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class StateFolderError(Exception):
    """The state folder cannot be trusted or made: says which and why (an exit 2)."""


def prepare_state_folder(path: Path) -> None:
    """Create `path` (0700, parents as the umask says) or check the existing one: a real
    folder (not a symbolic link), owned by this user, writable by no one else."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StateFolderError(f"state folder {path}: cannot create it: {exc.strerror}") from exc
    else:
        os.chmod(path, 0o700, follow_symlinks=False)  # the umask took bits from the mkdir
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise StateFolderError(f"state folder {path}: {exc.strerror}") from exc
    why = _untrusted(st)
    if why:
        raise StateFolderError(f"state folder {path}: {why}: refusing to use it")


def _untrusted(st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by this controller's user (uid {os.geteuid()})"
    mode = stat.S_IMODE(st.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"writable by {'others' if mode & stat.S_IWOTH else 'its group'} "
            f"(mode {mode:04o}): chmod go-w it, or use a new folder"
        )
    return None
