"""The local control socket: JSON lines over a Unix socket, served by the controller's loop.

`goosectl agent ...` connects, sends one request per line, reads one reply per line. The
server is non-blocking and lives in the same selectors loop as the sockets and the serial
port (`LiveGoose.add_reader`), so a request is handled between two frames, never during one.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Handler = Callable[[dict[str, Any], int], dict[str, Any]]
MAX_LINE = 1 << 16


def default_path() -> Path:
    env = os.environ.get("GOOSECTL_CONTROL")
    if env:
        return Path(env)
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"goosectl-{os.getuid()}.sock"


class ControlUnavailable(Exception):
    """Nothing is listening on the control socket."""


class ControlServer:
    def __init__(
        self, path: Path, handler: Handler, clock: Callable[[], int] = time.monotonic_ns
    ) -> None:
        self.path = Path(path)
        self.handler = handler
        self.clock = clock
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a stale socket of a controller that died
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.clients: dict[int, tuple[socket.socket, bytearray]] = {}
        self._add: Callable[[int, Callable[[], None]], None] | None = None
        self._remove: Callable[[int], None] | None = None

    def attach(self, add_reader, remove_reader) -> None:
        """Serve from a selectors loop (`LiveGoose.add_reader` / `remove_reader`)."""
        self._add, self._remove = add_reader, remove_reader
        add_reader(self.sock.fileno(), self._accept)

    def _accept(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        fd = conn.fileno()
        self.clients[fd] = (conn, bytearray())
        if self._add is not None:
            self._add(fd, lambda fd=fd: self._read(fd))

    def _read(self, fd: int) -> None:
        conn, buf = self.clients[fd]
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(fd)
            return
        buf.extend(data)
        if len(buf) > MAX_LINE:
            self._reply(conn, {"ok": False, "error": "request line too long"})
            self._drop(fd)
            return
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            self._reply(conn, self.answer(line))

    def answer(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as exc:
            return {"ok": False, "error": f"bad request: {exc}"}
        try:
            return self.handler(req, self.clock())
        except Exception as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def _reply(self, conn: socket.socket, obj: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            conn.setblocking(True)
            conn.sendall(json.dumps(obj, default=str).encode() + b"\n")
            conn.setblocking(False)

    def _drop(self, fd: int) -> None:
        conn, _ = self.clients.pop(fd)
        if self._remove is not None:
            self._remove(fd)
        conn.close()

    def close(self) -> None:
        for fd in list(self.clients):
            self._drop(fd)
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def request(path: Path, obj: dict[str, Any], timeout_s: float = 10.0) -> dict[str, Any]:
    """One request to a running controller; ControlUnavailable if none listens."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        s.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise ControlUnavailable(f"no controller is listening on {path}") from exc
    try:
        s.sendall(json.dumps(obj).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise ControlUnavailable(f"the controller on {path} closed the connection")
            buf += chunk
        return json.loads(buf)
    finally:
        s.close()
