"""Thin I/O helpers for the shell: a raw pty pair and pyserial ports by path or URL.

This is the only module of protocols/serial that touches the operating system. It
decides nothing about the protocol; it only hands the runtime (and the simulator and the
tests) a byte pipe: a pty pair stands in for a USB-serial cable, and pyserial's
`serial_for_url` gives the same `Serial` interface over a path, `socket://host:port`
or `loop://`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import termios
import tty
from dataclasses import dataclass, field
from pathlib import Path

import serial

DEFAULT_BAUD = 115_200


class PortError(OSError):
    """A serial port that could not be opened or set up, with the path and the reason."""


@dataclass
class PtyPair:
    """Both ends of a pseudo-terminal in raw mode; `slave_path` is what a Serial opens."""

    master_fd: int
    slave_fd: int
    slave_path: str
    closed: bool = field(default=False)

    def close(self) -> None:
        """Close both descriptors (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for fd in (self.master_fd, self.slave_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> PtyPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_pty_pair() -> PtyPair:
    """A new pty pair, slave in raw mode so no byte (0x00, 0x03, 0x11, CR) is interpreted.

    Raw mode matters: a cooked tty would turn 0x0D into 0x0A, swallow XON/XOFF and
    buffer until newline, silently corrupting COBS frames.
    """
    try:
        master_fd, slave_fd = os.openpty()
    except OSError as exc:
        raise PortError(exc.errno, f"cannot allocate a pty pair: {exc.strerror}") from exc
    try:
        tty.setraw(slave_fd)
        path = os.ttyname(slave_fd)
    except OSError as exc:
        os.close(master_fd)
        os.close(slave_fd)
        raise PortError(exc.errno, f"cannot set the new pty to raw mode: {exc.strerror}") from exc
    return PtyPair(master_fd, slave_fd, path)


def open_serial(
    url: str,
    *,
    baudrate: int = DEFAULT_BAUD,
    timeout: float | None = 0.0,
    write_timeout: float | None = None,
    exclusive: bool = False,
) -> serial.SerialBase:
    """Open a device path (``/dev/ttyUSB0``, a pty slave) or a pyserial URL.

    URLs: ``loop://`` (bytes written come back), ``socket://host:port`` (TCP, e.g. to a
    simulator or ser2net), ``rfc2217://...``. 8N1, no flow control: the link protocol
    carries its own framing and never relies on XON/XOFF (0x11/0x13 are data bytes).
    ``timeout=0`` makes reads non-blocking, as an event loop wants; ``write_timeout=0``
    makes writes take what the port accepts now. ``exclusive`` locks a device path
    (``flock`` and ``TIOCEXCL``): a second controller on the same board is refused with
    the pid that holds it, instead of both interleaving commands (NACK storms).
    """
    if not url:
        raise PortError(0, "no serial port given (expected a device path or a URL like loop://)")
    device = "://" not in url
    try:
        port = serial.serial_for_url(
            url,
            baudrate=baudrate,
            bytesize=serial.EIGHTBITS,
            parity=serial.PARITY_NONE,
            stopbits=serial.STOPBITS_ONE,
            timeout=timeout,
            write_timeout=write_timeout,
            xonxoff=False,
            rtscts=False,
            dsrdtr=False,
            **({"exclusive": True} if exclusive and device else {}),
        )
    except (serial.SerialException, ValueError) as exc:
        holder = port_holder(url) if exclusive and device else None
        if holder is not None:
            raise PortError(
                errno.EBUSY, f"serial port {url!r} is in use by process {holder}"
            ) from exc
        code = getattr(exc, "errno", None) or 0
        reason = os.strerror(code) if code else str(exc)
        raise PortError(code, f"cannot open serial port {url!r}: {reason}") from exc
    if exclusive and device and not _pty_slave(port.fileno()):
        # a lock only other lockers see; TIOCEXCL also refuses plain opens (not root's).
        # Not on a pty: its other end (the simulator) keeps the slave open, so the tty is
        # never closed for the last time and the exclusive bit outlives the controller
        # that set it, even one that was killed: every later controller of an
        # unprivileged user would be refused "busy" until the simulator restarts. The
        # flock, which the kernel drops with its holder, is the lock there.
        with contextlib.suppress(OSError, AttributeError):
            fcntl.ioctl(port.fileno(), termios.TIOCEXCL)
    return port


#: character-device majors of Unix98 pty slaves (/dev/pts/N), Documentation/admin-guide/devices.txt
_PTY_SLAVE_MAJORS = range(136, 144)


def _pty_slave(fd: int) -> bool:
    try:
        st = os.fstat(fd)
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) in _PTY_SLAVE_MAJORS


def port_holder(path: str | os.PathLike[str]) -> int | None:
    """The pid of a process that holds the serial port `path`: the holder of its flock
    (another goosectl), else a process of ours with it open (a terminal program that set
    TIOCEXCL takes no flock); None when none can be seen."""
    holder = lock_holder(path)
    return holder if holder is not None else _opener(path)


def _opener(path: str | os.PathLike[str]) -> int | None:
    """A process other than this one with the character device `path` open (from
    /proc/PID/fd; other users' processes cannot be read, and are skipped). The process
    holding a pty's master (the simulator keeps its slave open too) is its owner, not a
    holder."""
    try:
        rdev = os.stat(path).st_rdev
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    major = os.major(rdev)
    pty_index = (major - 136) * 256 + os.minor(rdev) if major in _PTY_SLAVE_MAJORS else None
    me = os.getpid()
    for pid in sorted(pids):
        if pid == me:
            continue
        opens, owns = _fds_of(pid, rdev, pty_index)
        if opens and not owns:
            return pid
    return None


def _fds_of(pid: int, rdev: int, pty_index: int | None) -> tuple[bool, bool]:
    """(has the device `rdev` open, holds the master of pty `pty_index`)."""
    opens = owns = False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False, False
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if not stat.S_ISCHR(st.st_mode):
            continue
        if st.st_rdev == rdev:
            opens = True
        elif pty_index is not None and os.major(st.st_rdev) == 5 and os.minor(st.st_rdev) == 2:
            owns = owns or _ptmx_index(pid, fd) == pty_index
    return opens, owns


def _ptmx_index(pid: int, fd: str) -> int | None:
    """The pty index of a /dev/ptmx descriptor (its fdinfo's `tty-index`)."""
    try:
        info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
    except OSError:
        return None
    for line in info.splitlines():
        if line.startswith("tty-index:"):
            with contextlib.suppress(ValueError):
                return int(line.split(":", 1)[1])
    return None


def lock_holder(path: str | os.PathLike[str]) -> int | None:
    """The pid holding a lock on `path` (from /proc/locks), or None: so a refusal can
    name the other process instead of saying only "busy"."""
    try:
        st = os.stat(path)
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    found: dict[str, int] = {}
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (blocked waiters have "->")
        if len(fields) >= 6 and "->" not in fields and fields[5] == want:
            with contextlib.suppress(ValueError):
                found.setdefault(fields[1], int(fields[4]))
    # a flock first: an SQLite file's POSIX locks may be held by a mere reader
    return found.get("FLOCK", next(iter(found.values()), None))
