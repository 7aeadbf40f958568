"""Report output off the live loop: lines written to a queue, a thread writes them out.

The status line, alarms and errors `goosectl run` says are log records on stderr. A
terminal that is scrolled back, a pipe nobody reads or a slow log collector makes `write`
block, and the loop with it. `LinePump` has the two methods the log handler calls
(`write`, `flush`; `controller.logs.route` points the handler at it): a record, formatted
on the thread that logged it, is appended to a bounded queue (no system call while the
thread is busy); beyond `max_lines` lines are dropped and counted (`dropped`, in the stop
report), never waited for.

The thread is woken when the loop is done with its round (`kick`, the loop's idle work,
once `defer_for` names the loop's thread), not at each line the loop logs while it handles
a frame: a thread woken mid-input asks for the GIL and takes it from the loop within the
switch interval, and if it is preempted while it holds it the loop waits for the host to
run it again. Lines from any other thread wake it at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from typing import TextIO


class LinePump:
    def __init__(self, stream: TextIO, max_lines: int = 1000) -> None:
        self.stream = stream
        self.max_lines = max_lines
        self._q: deque[str] = deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.written = 0
        self.dropped = 0
        self.errors = 0
        #: the thread whose lines wait for its `kick` (the live loop's), None: none do
        self._defer_for: int | None = None
        self._thread = threading.Thread(target=self._run, name="output-pump", daemon=True)
        self._thread.start()

    def defer_to(self, idle: list) -> None:
        """The calling thread's lines wait for its idle work (`idle`, the loop's list), which
        from now on wakes the pump once a round if lines wait."""
        self._defer_for = threading.get_ident()
        idle.append(self.kick)

    def kick(self, _now: int = 0) -> None:
        if self._q:
            self._wake.set()

    def write(self, text: str) -> int:
        if len(self._q) >= self.max_lines:
            self.dropped += 1
            return 0
        self._q.append(text)
        if threading.get_ident() != self._defer_for:
            self._wake.set()
        return len(text)

    def flush(self) -> None:
        """Nothing to do here: the thread flushes after each batch of lines."""

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while self._q:
                text = self._q.popleft()
                try:
                    self.stream.write(text)
                    self.written += 1
                except (OSError, ValueError):
                    self.errors += 1
            with contextlib.suppress(OSError, ValueError):
                self.stream.flush()
            if self._stop.is_set() and not self._q:
                return

    def close(self, timeout_s: float = 2.0) -> None:
        """Write what is queued (waiting up to `timeout_s` for a stream that blocks)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout_s)

    def status(self) -> dict[str, int]:
        return {"written": self.written, "dropped": self.dropped, "errors": self.errors}
