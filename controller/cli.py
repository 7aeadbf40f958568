"""The `goosectl` command: discovers subcommand modules in `controller.commands`.

Exit codes are shared by every subcommand:

  0    success
  1    the checked thing has findings (e.g. `table check`, `config check`)
  2    a user mistake or the environment: a missing, unreadable or wrong file, a folder
       that cannot be written, a bad config, an interface that does not exist, no root.
       One line (or one per finding): ``goosectl: <what>: <why>``.
  70   an internal error, i.e. a bug (EX_SOFTWARE): a short message and the path of the
       saved traceback, never the traceback itself.
  130  interrupted (Ctrl-C)
  141  the reader of stdout went away (`goosectl replay X | head -1`): nothing is printed,
       and the code is the one a shell reports for a program killed by SIGPIPE (128 + 13),
       as `cat` or `git log` give, so a script with `set -o pipefail` sees what it would
       see with any other filter. Only stdout and stderr count: a broken pipe on a socket
       is an error like any other.

Every error a command does not handle itself is sorted here, in one place: `main`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import errno
import importlib
import logging
import os
import pkgutil
import select
import stat
import sys
import tempfile
import traceback
import weakref
from pathlib import Path

from goosectl.controller import __version__, commands, logs
from goosectl.controller.errors import (  # noqa: F401 (re-exported)
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PIPE,
    EXIT_USAGE,
    CommandError,
)

#: OSErrors that describe the user's files, folders, devices or permissions, not a bug.
USER_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.EACCES,
        errno.EPERM,
        errno.EEXIST,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.ENOTEMPTY,
        errno.EROFS,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.ENODEV,
        errno.ENXIO,
        errno.EBUSY,
        errno.ETXTBSY,
        errno.EADDRINUSE,
        errno.EADDRNOTAVAIL,
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.EIO,
    }
)

#: What SQLite says about a file that is not a usable journal (the user's file, not a bug).
SQLITE_USER_ERRORS = (
    "file is not a database",
    "unable to open database file",
    "attempt to write a readonly database",
    "database is locked",
    "database or disk is full",
    "disk i/o error",
)


log = logging.getLogger(__package__)


def version() -> str:
    """goosectl's version: `controller.__version__`, the one source pyproject reads too."""
    return __version__


#: the parsers `add_log_args` already gave -v/-q (a command that gives -q a meaning of its
#: own calls it first, with that meaning; `build_parser` then skips it)
_logged: weakref.WeakSet[argparse.ArgumentParser] = weakref.WeakSet()


def add_log_args(parser: argparse.ArgumentParser, quiet: str | None = None) -> None:
    """-v/-q and --debug, on every parser of the command line (the top level, each
    command, each subcommand), so `goosectl -v decode X` and `goosectl decode X -v` both
    work. `quiet`: what -q also means for this command (e.g. `run`: no status line).
    Defaults are suppressed so a subcommand's parser never overwrites a value given
    before it; `main` fills them in."""
    if parser in _logged:
        return
    _logged.add(parser)
    group = parser.add_argument_group("diagnostics (stderr; stdout is unchanged)")
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="more detail: debug lines of goosectl's packages (-vv: of libraries too)",
    )
    help_q = "fewer messages: warnings and errors only (-qq: errors only)"
    group.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=argparse.SUPPRESS,
        help=f"{quiet}; {help_q}" if quiet else help_q,
    )
    group.add_argument(
        "--debug",
        action="append",
        metavar="LOGGER",
        default=argparse.SUPPRESS,
        help="debug lines of one subsystem only, e.g. goosectl.controller.commands (repeatable)",
    )


def _add_log_args_everywhere(parser: argparse.ArgumentParser) -> None:
    add_log_args(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _add_log_args_everywhere(child)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goosectl",
        description="IEC 61850 GOOSE-style event-driven controller",
        epilog="exit codes: 0 ok, 1 findings, 2 bad input or environment, "
        "70 internal error (traceback saved), 141 stdout closed early",
    )
    parser.add_argument("--version", action="version", version=f"goosectl {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    _add_log_args_everywhere(parser)
    return parser


def setup_logging(args: argparse.Namespace) -> None:
    """Logging for this command, from -v/-q/--debug/--log-json (see `controller.logs`);
    `args.verbose`/`args.quiet` are counts afterwards (0 when not given)."""
    args.verbose = getattr(args, "verbose", 0)
    args.quiet = getattr(args, "quiet", 0)
    logs.configure(
        args.verbose - args.quiet,
        json_lines=getattr(args, "log_json", False),
        debug=getattr(args, "debug", ()),
    )


def main(argv: list[str] | None = None) -> int:
    args = None
    logs.configure()  # errors before the command's own settings are plain lines
    try:
        args = build_parser().parse_args(argv)
        setup_logging(args)
        log.debug("goosectl %s: %s", __version__, args.command)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that left shows here, not at interpreter exit
        return code
    except CommandError as exc:
        return _say(str(exc), exc.code)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError as exc:
        if _stdio_gone():
            return _quiet_pipe()
        # a socket or a pipe of ours whose other end went away: the environment, not a bug
        return _say(f"{_os_message(exc)} (the other end went away)", EXIT_USAGE)
    except Exception as exc:
        try:
            message = user_message(exc, args)
        except Exception:  # the sorting itself failed (a broken install): a bug, say so
            message = None
        if message is not None:
            return _say(message, EXIT_USAGE)
        if isinstance(exc, OSError) and _stdio_gone():
            return _quiet_pipe()  # e.g. EPIPE wrapped by a library
        return _internal(sys.exc_info())


def user_message(exc: BaseException, args: argparse.Namespace | None = None) -> str | None:
    """What to tell the user when `exc` is their mistake or their environment's, or None
    when it is a bug. The message says what (a file, a key) and why."""
    import sqlite3

    from goosectl.controller.agent.procedure import ProcedureError
    from goosectl.controller.config.validate import ConfigError
    from goosectl.controller.engine import TableError
    from goosectl.controller.engine.journal import JournalIOError, JournalRefused
    from goosectl.protocols.serial.port import PortError

    if isinstance(exc, (TableError, ProcedureError)):
        return "\n".join(str(f) for f in exc.findings)
    if isinstance(exc, (ConfigError, JournalIOError, JournalRefused, PortError)):
        return str(exc)
    if isinstance(exc, OSError) and (exc.errno in USER_ERRNOS):
        where = _output_arg(args) if exc.filename is None and exc.errno in FULL_ERRNOS else None
        return f"{where}: {_os_message(exc)}" if where else _os_message(exc)
    if isinstance(exc, UnicodeDecodeError):
        what = getattr(args, "file", None)
        return f"{what or 'input'}: not a text file ({exc.reason} at byte {exc.start})"
    if isinstance(exc, sqlite3.DatabaseError) and str(exc).lower() in SQLITE_USER_ERRORS:
        where = _journal_arg(args)
        return f"{where}: {exc} (SQLite)" if where else f"journal: {exc} (SQLite)"
    return None


def _os_message(exc: OSError) -> str:
    why = exc.strerror or os.strerror(exc.errno or 0)
    if exc.errno in (errno.EACCES, errno.EPERM) and os.geteuid() == 0:
        why += " (even for root: a read-only mount, or capabilities dropped?)"
    if exc.filename is None:
        return why
    where = os.fsdecode(exc.filename)
    if exc.filename2 is not None:
        where += f" -> {os.fsdecode(exc.filename2)}"
    return f"{where}: {why}"


#: a write refused for want of space: the error carries no file name (a write has none),
#: so the message names what the command was writing to
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def _output_arg(args: argparse.Namespace | None) -> str | None:
    """The place the command writes to, as the user gave it (`--out`, `--journal`,
    `--state`), to name it in a full-disk error."""
    for key in ("out", "journal", "state"):
        value = getattr(args, key, None)
        if value is not None:
            return f"--{key} {value}"
    return None


def _journal_arg(args: argparse.Namespace | None) -> str | None:
    """The journal the command was given, to name it in a SQLite error."""
    for key in ("journal", "state"):
        value = getattr(args, key, None)
        if value is not None:
            return f"--{key} {value}"
    return None


def _say(message: str, code: int) -> int:
    """Print a user error: one line per line of the message. A header ending in ':' with a
    single line under it (``bad config:`` + one finding) is one line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()] or ["error"]
    if len(lines) == 2 and lines[0].endswith(":"):
        lines = [f"{lines[0]} {lines[1]}"]
    if logs.structured():  # --log-json: stderr holds records only, errors included
        for line in lines:
            log.error("%s", line)
        return code
    try:
        for line in lines:
            print(f"goosectl: {line}", file=sys.stderr)
    except BrokenPipeError:
        return _quiet_pipe()
    return code


def _stdio_gone() -> bool:
    """Is stdout's (or stderr's) reader gone? A pipe whose read end is closed polls as
    POLLERR on the write end; a file, a tty or a live pipe does not."""
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        try:
            p = select.poll()
            p.register(fd, select.POLLOUT)
            for _, events in p.poll(0):
                if events & select.POLLERR:
                    return True
        except (OSError, ValueError):
            continue
    return False


def _quiet_pipe() -> int:
    """End quietly: point stdout at /dev/null so the interpreter's last flush of what is
    still buffered does not raise again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return EXIT_PIPE


def _internal(info) -> int:
    text = "".join(traceback.format_exception(*info))
    exc = info[1]
    path = save_traceback(text)
    where = f"the traceback is in {path}" if path else "the traceback could not be saved"
    if logs.structured():
        log.critical(
            "internal error: %s: %s; a bug in goosectl, not in your input; %s",
            type(exc).__name__,
            exc,
            where,
        )
        return EXIT_INTERNAL
    with contextlib.suppress(OSError):
        print(
            f"goosectl: internal error: {type(exc).__name__}: {exc}".rstrip(": ")
            + "\ngoosectl: this is a bug in goosectl, not in your input; "
            + where
            + " (please attach it to a bug report)",
            file=sys.stderr,
        )
    return EXIT_INTERNAL


def crash_dirs() -> list[Path]:
    """Where tracebacks go: $XDG_STATE_HOME/goosectl (default ~/.local/state/goosectl),
    else the temporary folder."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return [Path(state) / "goosectl", Path(tempfile.gettempdir())]


def _private_dir(path: Path) -> bool:
    """Create `path` for this user only, or accept it if it already is: a real folder
    (not a symlink), ours, writable by nobody else."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISDIR(st.st_mode)
        and st.st_uid == os.geteuid()
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def save_traceback(text: str) -> str | None:
    """Write `text` to a new file nobody else can read (mkstemp: O_EXCL, mode 0600, a
    random name, so no symlink or existing file is ever written through)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    state, tmp = crash_dirs()
    for folder, prefix in ((state, f"crash-{stamp}-"), (tmp, f"goosectl-crash-{stamp}-")):
        if folder is state and not _private_dir(folder):
            continue
        try:
            fd, path = tempfile.mkstemp(prefix=prefix, suffix=".txt", dir=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(f"goosectl {version()}\nargv: {sys.argv!r}\n\n{text}")
        except OSError:
            continue
        return path
    return None


if __name__ == "__main__":
    # run as a script: use the package's own module, whose CommandError the commands raise
    from goosectl.controller.cli import main as _main

    sys.exit(_main())
