"""Where the simulated board's UART goes: a new pty, an existing tty, or a TCP port.

Each transport gives the shell a file descriptor to wait on, non-blocking `read`/`write`
and `disconnect` (the cable is pulled, then plugged back). A pty is re-created on
disconnect; a stable symlink points at the current slave so a controller can reopen
the same path, as it would reopen /dev/ttyUSB0 after a USB re-enumeration.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import tempfile

from goosectl.protocols.serial.port import PtyPair, open_pty_pair, open_serial

WRITE_WAIT_S = 0.1


class PtyTransport:
    """The board on a new pty; `path` is a symlink to the current slave."""

    def __init__(self, link_path: str | None = None) -> None:
        if link_path is None:
            fd, link_path = tempfile.mkstemp(prefix="goosectl-sim-", suffix=".pty")
            os.close(fd)
        self.path = link_path
        self.dropped = 0
        self.pair: PtyPair = self._new()

    def _new(self) -> PtyPair:
        pair = open_pty_pair()
        os.set_blocking(pair.master_fd, False)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.symlink(pair.slave_path, tmp)
        os.replace(tmp, self.path)  # atomic: a reader never sees a missing path
        return pair

    def fileno(self) -> int:
        return self.pair.master_fd

    def read(self) -> bytes:
        try:
            return os.read(self.pair.master_fd, 4096)
        except BlockingIOError:
            return b""
        except OSError as exc:
            if exc.errno == errno.EIO:  # no slave open: nothing to read yet
                return b""
            raise

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.pair.master_fd, view)
            except BlockingIOError:
                # pty buffer full: wait a little for the reader, then drop what is left,
                # as a UART whose receiver is not listening loses its bytes
                _, ready, _ = select.select([], [self.pair.master_fd], [], WRITE_WAIT_S)
                if not ready:
                    self.dropped += len(view)
                    return
                continue
            view = view[n:]

    def disconnect(self) -> None:
        """Close this pty (the controller's reads fail) and offer a fresh one at `path`."""
        old = self.pair
        self.pair = self._new()
        old.close()

    def close(self) -> None:
        self.pair.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class SerialTransport:
    """The board on an existing tty (or any pyserial URL)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ser = open_serial(url, timeout=0)

    def fileno(self) -> int:
        return self.ser.fileno()

    def read(self) -> bytes:
        return self.ser.read(4096)

    def write(self, data: bytes) -> None:
        self.ser.write(data)

    def disconnect(self) -> None:
        self.ser.close()
        self.ser = open_serial(self.url, timeout=0)

    def close(self) -> None:
        self.ser.close()


class TcpTransport:
    """The board behind a TCP port, for pyserial's ``socket://HOST:PORT``; one client."""

    def __init__(self, host: str, port: int) -> None:
        self.listener = socket.create_server((host, port), reuse_port=False)
        self.listener.setblocking(False)
        self.address = self.listener.getsockname()[:2]
        self.client: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"socket://{self.address[0]}:{self.address[1]}"

    def fileno(self) -> int:
        return (self.client or self.listener).fileno()

    def read(self) -> bytes:
        if self.client is None:
            try:
                self.client, _ = self.listener.accept()
            except BlockingIOError:
                return b""
            self.client.setblocking(False)
            self.client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            data = self.client.recv(4096)
        except BlockingIOError:
            return b""
        except OSError:
            data = b""
        if not data:
            self._drop()
        return data

    def write(self, data: bytes) -> None:
        if self.client is None:
            return  # nobody listening: bytes on an unplugged line are lost
        try:
            self.client.sendall(data)
        except OSError:
            self._drop()

    def _drop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def disconnect(self) -> None:
        self._drop()

    def close(self) -> None:
        self._drop()
        self.listener.close()
