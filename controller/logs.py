"""Logging for the `goosectl` command: one logger per package, configured once, by the CLI.

What goes where: user output (tables, JSON lines, reports, the path a command prints for a
script to read) is printed to stdout by the commands and never passes through here.
Diagnostics (what the program noticed, fallbacks, progress, debug detail) are log records
on stderr, so `-q` silences them and `-v` adds detail without changing a byte of stdout.

Why the levels are set on the loggers and not only on the handler: a disabled call then
ends in `Logger.isEnabledFor`, one cached comparison, before a record is made or an
argument formatted. Calls pass their values as %-style arguments (`log.debug("%s", x)`,
never an f-string: ruff's G rules refuse those), and a loop that would build something
costly for a message asks `log.isEnabledFor(logging.DEBUG)` first.

Loggers are named after packages (`logging.getLogger(__package__)`), all under `goosectl`:
shown, and taken by `--debug`, without the prefix (`controller.commands`,
`controller.shell`, `protocols.ethernet` ...): `--debug NAME` turns on one subsystem.

Plain lines read ``goosectl: <message>``, as the command's messages always have (a debug
line also names its logger). `--log-json` makes every record one JSON object per line:
``{"time", "level", "logger", "message"}``.

What a live shell reports (`run`'s status line, an alarm raised or cleared, a limit crossed,
frames the kernel dropped, an error) is an *event*: a record made by `event`, which carries
a name and fields besides its message. Plain, it reads as it always has (the status line
bare, the rest ``goosectl: ...``); with --log-json its name and fields are keys of the
object (``{"level": "info", "logger": "controller.shell", "event": "status", "mode": ...}``),
so a collector reads the counters without parsing the text.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from collections.abc import Iterable
from typing import Any, Protocol, TextIO, cast

#: The top-level packages whose loggers follow -v/-q; other libraries stay at WARNING
#: (-vv: DEBUG too).
#: the root logger of every module (they are all under the one import name)
PACKAGES = ("goosectl",)
#: the folders a `--debug` name may start with, short for `goosectl.<folder>`
_FOLDERS = ("controller", "protocols", "firmware_sim", "lab")

#: -q/-v counted into one number: -qq and below show errors only (never less: an error is
#: the reason for an exit code and is always said).
LEVELS = {-2: logging.ERROR, -1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}


class StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is when a record comes (a test's capture, a
    redirect), or to the stream `route` gave it (`run`'s line pump, which never blocks)."""

    def __init__(self) -> None:
        super().__init__()
        self.target: TextIO | None = None

    @property
    def stream(self) -> TextIO:
        return self.target if self.target is not None else sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """StreamHandler's constructor assigns sys.stderr here: ignored, looked up later."""

    def handleError(self, record: logging.LogRecord) -> None:
        """stderr closed or gone (a reader that left): nothing left to say it on."""
        if isinstance(sys.exc_info()[1], (OSError, ValueError)):
            return
        super().handleError(record)


#: Events whose plain line is the message alone: the status line, read every second,
#: is a row of counters that a prefix would only push to the right.
BARE_EVENTS = frozenset({"status"})
#: Keys of a JSON record that an event's fields never replace.
RECORD_KEYS = ("time", "level", "logger", "event", "message", "exception")


def event(
    log: logging.Logger, level: int, name: str, msg: str, *args: object, **fields: Any
) -> None:
    """Log `msg % args` as the event `name` with `fields` (JSON-ready values). Nothing is
    made or formatted when `level` is off for `log`; a caller whose fields cost something
    to gather asks `log.isEnabledFor(level)` first (the status line does)."""
    if log.isEnabledFor(level):
        log.log(level, msg, *args, extra={"event": name, "fields": fields})


class PlainFormatter(logging.Formatter):
    """``goosectl: <message>``; a debug line also names its logger (the subsystem); the
    status line (`BARE_EVENTS`) is its message alone, as a person has always read it."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if getattr(record, "event", None) in BARE_EVENTS and not record.exc_info:
            return message
        if record.levelno <= logging.DEBUG:
            message = f"debug: {short_name(record.name)}: {message}"
        text = f"goosectl: {message}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a message's own line feeds are escaped);
    an event's name and fields are keys of it too (never replacing `RECORD_KEYS`)."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="microseconds"
            ),
            "level": record.levelname.lower(),
            "logger": short_name(record.name),
        }
        name = getattr(record, "event", None)
        if name is not None:
            obj["event"] = name
        obj["message"] = record.getMessage()
        if record.exc_info:
            obj["exception"] = self.formatException(record.exc_info)
        for key, value in getattr(record, "fields", {}).items():
            if key not in RECORD_KEYS:
                obj[key] = value
        return json.dumps(obj, default=str)


_handler = StderrHandler()
#: loggers given a level by `--debug` (put back to NOTSET by the next `configure`)
_debugged: set[str] = set()


def configure(verbosity: int = 0, json_lines: bool = False, debug: Iterable[str] = ()) -> None:
    """Set up logging for one command: `verbosity` is the count of -v minus the count of
    -q, `json_lines` is --log-json, `debug` names loggers (subsystems) to show at DEBUG.
    Called again, it replaces what it set before (tests run many commands in-process)."""
    level = LEVELS[max(-2, min(1, verbosity))]
    _handler.setFormatter(JsonFormatter() if json_lines else PlainFormatter())
    _handler.target = None
    root = logging.getLogger()
    if _handler not in root.handlers:
        root.addHandler(_handler)
    root.setLevel(logging.DEBUG if verbosity >= 2 else logging.WARNING)
    for name in _debugged:
        logging.getLogger(name).setLevel(logging.NOTSET)
    _debugged.clear()
    for name in PACKAGES:
        logging.getLogger(name).setLevel(level)
    for name in map(logger_name, debug):
        logging.getLogger(name).setLevel(logging.DEBUG)
        _debugged.add(name)


def short_name(name: str) -> str:
    """What a line shows of its logger: `controller.shell`, as the docs and the layer table
    name the subsystems (and as `--debug` takes them)."""
    return name.removeprefix("goosectl.")


def logger_name(name: str) -> str:
    """`--debug controller.shell` names `goosectl.controller.shell`: the folders' short names
    are what the docs and the layer table use."""
    return f"goosectl.{name}" if name.split(".")[0] in _FOLDERS else name


def structured() -> bool:
    """Is --log-json on? (Errors the CLI says itself are records then, not plain lines.)"""
    return isinstance(_handler.formatter, JsonFormatter)


class LineSink(Protocol):
    """Where text lines go: a stream, or `run`'s non-blocking line pump."""

    def write(self, text: str, /) -> object: ...
    def flush(self) -> object: ...


def route(stream: LineSink) -> None:
    """Send the log records to `stream` (`run`'s line pump: a record is formatted on the
    thread that logs it and queued, so a blocked stderr never stalls the loop). `unroute`
    before the stream closes."""
    # the handler only writes and flushes: a line pump serves as well as a TextIO
    _handler.target = cast(TextIO, stream)


def unroute() -> None:
    """Records go to sys.stderr again (the stream `route` was given is closing)."""
    _handler.target = None
