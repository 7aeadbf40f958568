"""Wait for a line a child process prints (its readiness signal) instead of sleeping.

A blocking `readline` has no deadline and a sleep guesses how long start-up takes; a
thread that reads every line of the pipe lets a test wait for the line that proves the
child is ready (`listening`, `ready`, a first frame classified), with a deadline that only
bounds a failing test, and still hands over every line for the assertions afterwards.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import IO, Any


class Lines:
    """Every line of one text pipe, collected by a daemon thread as the child writes it."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._cursor = 0  # wait_for looks only at lines after the previous match
        self._eof = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait_for(
        self, match: Callable[[str], bool], what: str, timeout: float = 30.0, anywhere: bool = False
    ) -> str:
        """The first line after the previous match (any line with `anywhere`, which then
        leaves the position alone) for which `match` is true; fails if the pipe ends or the
        deadline passes first (the deadline bounds a failing test, it is not measured)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            seen = 0 if anywhere else self._cursor
            while True:
                for i in range(seen, len(self.lines)):
                    if match(self.lines[i]):
                        if not anywhere:
                            self._cursor = i + 1
                        return self.lines[i]
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    ended = "the output ended" if self._eof else f"none within {timeout:g} s"
                    raise AssertionError(f"waiting for {what}: {ended}; got {self.lines!r}")
                self._cond.wait(left)

    def wait_for_json(
        self,
        match: Callable[[dict[str, Any]], bool],
        what: str,
        timeout: float = 30.0,
        anywhere: bool = False,
    ) -> dict[str, Any]:
        """Like `wait_for`, for a child printing JSON lines; other lines never match."""
        line = self.wait_for(
            lambda s: _is_json(s) and match(json.loads(s)), what, timeout, anywhere
        )
        return json.loads(line)

    def all(self, timeout: float = 60.0) -> list[str]:
        """Every line, once the child has closed the pipe (normally: it exited)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the pipe stayed open; got {self.lines!r}"
        return list(self.lines)


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
