"""Bursts of GOOSE frames into `goosectl listen` across a veth pair, and a line-rate sender.

Shared by tests/ethernet (the ring keeps every frame of a burst; drops are shown) and
benchmarks/test_burst_bench.py (x1, x10, sustained). Nothing here asserts a time: a
deadline only bounds a failing wait.

Why `sendmmsg` through ctypes: a Python loop of `socket.send` costs a system call and the
interpreter's overhead per frame; `sendmmsg` hands the kernel up to 1,024 prebuilt frames
in one call, so the sender, not Python, sets the pace (about 1 GbE line rate for
~300-byte GOOSE frames, measured and reported by the benchmark). The socket is a bound
`RawSocket`, so no destination address is needed per message.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goosectl.lab.netns import Namespace
from goosectl.protocols.ethernet.pcap import read_capture
from goosectl.protocols.ethernet.rawsock import RawSocket
from tests.support.lines import Lines
from tests.support.peers import CAPTURES

#: The ABB capture (PROVENANCE.md): 451 GOOSE frames of three publishers, VLAN 0 PCP 4.
ABB_CAPTURE = CAPTURES / "iti_Sample_File_GOOSE.pcap"


def capture_frames(path: Path = ABB_CAPTURE) -> list[bytes]:
    """Every frame of a capture, bytes as recorded (tags inline)."""
    return [f.data for f in read_capture(path)]


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_void_p),
        ("namelen", ctypes.c_uint32),
        ("iov", ctypes.POINTER(_IoVec)),
        ("iovlen", ctypes.c_size_t),
        ("control", ctypes.c_void_p),
        ("controllen", ctypes.c_size_t),
        ("flags", ctypes.c_int),
    ]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("hdr", _MsgHdr), ("len", ctypes.c_uint)]


_libc = ctypes.CDLL(None, use_errno=True)
_sendmmsg = _libc.sendmmsg
_sendmmsg.argtypes = [ctypes.c_int, ctypes.POINTER(_MMsgHdr), ctypes.c_uint, ctypes.c_int]
_sendmmsg.restype = ctypes.c_int


class MmsgSender:
    """Prebuilt frames sent with sendmmsg on a bound packet socket, in order, many a call."""

    def __init__(self, sock: RawSocket, frames: Sequence[bytes], batch: int = 1024) -> None:
        self.fd = sock.fileno()
        self.n = len(frames)
        self.batch = batch
        self._bufs = [ctypes.create_string_buffer(f, len(f)) for f in frames]
        self._iov = (_IoVec * self.n)()
        self._msgs = (_MMsgHdr * self.n)()
        for i, buf in enumerate(self._bufs):
            self._iov[i].base = ctypes.addressof(buf)
            self._iov[i].len = len(frames[i])
            self._msgs[i].hdr.iov = ctypes.pointer(self._iov[i])
            self._msgs[i].hdr.iovlen = 1
        self._base = ctypes.addressof(self._msgs)
        self.refused = 0

    def send_range(self, start: int, count: int) -> int:
        """Send frames start..start+count-1 (all of them: a refused call is retried)."""
        size = ctypes.sizeof(_MMsgHdr)
        done = 0
        while done < count:
            ptr = ctypes.cast(self._base + (start + done) * size, ctypes.POINTER(_MMsgHdr))
            got = _sendmmsg(self.fd, ptr, min(self.batch, count - done), 0)
            if got < 0:
                err = ctypes.get_errno()
                if err in (errno.EAGAIN, errno.ENOBUFS):
                    self.refused += 1
                    continue
                raise OSError(err, f"sendmmsg: {os.strerror(err)}")
            done += got
        return done

    def send_all(self) -> float:
        """Every frame back to back; returns the seconds it took."""
        t0 = time.perf_counter()
        self.send_range(0, self.n)
        return time.perf_counter() - t0

    def patch(self, index: int, offset: int, data: bytes) -> None:
        """Overwrite bytes of prebuilt frame ``index`` in place (a counter, between laps)."""
        ctypes.memmove(ctypes.addressof(self._bufs[index]) + offset, data, len(data))

    def send_paced(
        self,
        rate_fps: float,
        seconds: float,
        chunk: int = 100,
        before_chunk: Callable[[int, int, int], None] | None = None,
    ) -> tuple[int, float]:
        """``rate_fps`` frames a second for ``seconds``, cycling through the frames in
        chunks of ``chunk``; ``before_chunk(start, count, lap)`` may patch the frames of a
        chunk before it goes out (lap: how many times all frames were sent). Returns
        (frames sent, seconds taken)."""
        total = int(rate_fps * seconds)
        t0 = time.perf_counter()
        sent = 0
        while sent < total:
            due = t0 + sent / rate_fps
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            start = sent % self.n
            count = min(chunk, total - sent, self.n - start)
            if before_chunk is not None:
                before_chunk(start, count, sent // self.n)
            sent += self.send_range(start, count)
        return sent, time.perf_counter() - t0


def rss_kib(pid: int) -> int:
    """Resident set size of a process, from /proc (KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


@dataclass
class Listener:
    """`goosectl listen --json` in a namespace, read line by line; stop with SIGTERM."""

    proc: subprocess.Popen
    out: Lines
    lines: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, ns: Namespace, iface: str, *args: str) -> Listener:
        proc = ns.popen(
            [sys.executable, "-u", "-m", "goosectl", "listen", "--iface", iface, *args, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out = Lines(proc.stdout)
        out.wait_for_json(lambda x: x.get("event") == "listening", "listen to print `listening`")
        return cls(proc, out)

    def classified(self) -> int:
        """Frame lines printed so far (each carries the frame's class)."""
        return sum(1 for x in list(self.out.lines) if x.startswith('{"frame"'))

    def wait_quiet(self, expected: int, quiet_s: float = 1.0, timeout: float = 120.0) -> int:
        """Until ``expected`` frame lines were printed, or none came for ``quiet_s`` (the
        ring is empty: what is missing was dropped). Returns the count."""
        deadline = time.monotonic() + timeout
        last, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = self.classified()
            if n >= expected:
                return n
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since > quiet_s:
                return n
            time.sleep(0.05)
        return self.classified()

    def rss_kib(self) -> int:
        return rss_kib(self.proc.pid)

    def stop(self) -> list[dict[str, Any]]:
        """SIGTERM; every JSON line printed (frames, stats, anomalies, summary)."""
        self.proc.terminate()
        self.proc.wait(timeout=60)
        err = self.proc.stderr.read()
        self.lines = [json.loads(x) for x in self.out.all() if x.startswith("{")]
        (report,) = [x for x in self.lines if x.get("event") == "anomalies"]
        # exit 1 exactly when it found anomalies (a stream lost once the burst ended)
        assert self.proc.returncode == (1 if report["count"] else 0), err
        return self.lines

    def frames(self) -> list[dict[str, Any]]:
        return [x for x in self.lines if "frame" in x and "class" in x]

    def stats(self) -> list[dict[str, Any]]:
        return [x for x in self.lines if x.get("event") == "stats"]
