"""The raw-socket wire floor: how long a frame takes to cross a veth pair and come back.

Why a floor: the product budget "frame on wire in -> frame on wire out <= 1 ms" includes
time no controller code can remove (two kernel crossings, the veth hop, waking a process
from epoll). Later wire-latency benchmarks subtract or divide by this number, so they
report what the controller adds, not what the kernel costs.

`WireFloor` builds two namespaces joined by a veth pair, opens a RawSocket on our end
(in this process, via setns) and starts an echo peer on the other end (a separate Python
process, as a real peer would be). `roundtrip_ns()` sends one frame and waits, through a
selector like the runtime's loop, for the echoed copy. Run the peer alone with
`python -m goosectl.lab.wire_floor echo --iface X --group 01:0c:cd:01:00:01`.
"""

from __future__ import annotations

import argparse
import selectors
import sys
import time
from collections.abc import Sequence

from goosectl.lab.netns import NetLab
from goosectl.protocols.ethernet.rawsock import RawSocket

GROUP = bytes.fromhex("010ccd0100ff")
SRC = bytes.fromhex("02000000b001")


def probe_frame(seq: int, size: int = 128) -> bytes:
    """A GOOSE-typed frame carrying ``seq`` at a fixed offset, padded to ``size`` bytes."""
    head = GROUP + SRC + b"\x88\xb8" + b"\x00\x01" + size.to_bytes(2, "big") + bytes(4)
    body = seq.to_bytes(8, "big")
    return head + body + bytes(max(0, size - len(head) - len(body)))


_SEQ_AT = 22


class WireFloor:
    """A veth pair between two fresh namespaces with an echo peer; always cleaned up."""

    def __init__(self, *, frame_size: int = 128) -> None:
        self.frame_size = frame_size
        self.lab = NetLab()
        self._seq = 0
        try:
            ours, theirs = self.lab.namespace(), self.lab.namespace()
            self.lab.veth(ours, theirs, a="floor0", b="echo0")
            self.peer = theirs.python_module(
                "goosectl.lab.wire_floor",
                "echo",
                "--iface",
                "echo0",
                "--group",
                GROUP.hex(":"),
            )
            out, err = self.peer.stdout, self.peer.stderr
            assert out is not None and err is not None  # python_module pipes both
            line = out.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"echo peer did not start: {line!r} {err.read()}")
            with ours.entered():
                self.sock = RawSocket("floor0", groups=[GROUP], timestamps=False)
            self.selector = selectors.DefaultSelector()
            self.selector.register(self.sock, selectors.EVENT_READ)
        except BaseException:
            self.lab.close()
            raise

    def roundtrip_ns(self) -> int:
        """Send one probe and wait for its echo; perf_counter_ns from send to echo read."""
        self._seq += 1
        seq = self._seq
        frame = probe_frame(seq, self.frame_size)
        clock = time.perf_counter_ns
        sock = self.sock
        t0 = clock()
        sock.send(frame)
        while True:
            if not self.selector.select(2.0):
                raise TimeoutError(f"echo of probe {seq} did not come back within 2 s")
            rx = sock.recv_frame()
            if rx is not None and int.from_bytes(rx.frame[_SEQ_AT : _SEQ_AT + 8], "big") == seq:
                return clock() - t0

    def sample(self, n: int, warmup: int = 200, quiet_s: float = 0.0) -> list[int]:
        """``n`` round trips (after ``warmup``), each timed alone; ``quiet_s`` asleep before
        each timed one (the quiet a measured trip comes after: both ends then wake as the
        controller does, from an idle CPU and caches others used meanwhile)."""
        for _ in range(warmup):
            self.roundtrip_ns()
        out = []
        for _ in range(n):
            if quiet_s:
                time.sleep(quiet_s)
            out.append(self.roundtrip_ns())
        return out

    def close(self) -> None:
        try:
            self.selector.close()
            self.sock.close()
        finally:
            self.lab.close()

    def __enter__(self) -> WireFloor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OneWay:
    """Baseline without a peer process: send on one end, read on the other, same thread."""

    def __init__(self, lab: NetLab, frame_size: int = 128) -> None:
        a, b = lab.namespace(), lab.namespace()
        lab.veth(a, b, a="ow0", b="ow1")
        with a.entered():
            self.tx = RawSocket("ow0", timestamps=False)
        with b.entered():
            self.rx = RawSocket("ow1", groups=[GROUP], timestamps=False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.rx, selectors.EVENT_READ)
        self.frame = probe_frame(0, frame_size)

    def once_ns(self) -> int:
        """Send one probe and read it on the other end; perf_counter_ns for both."""
        clock = time.perf_counter_ns
        t0 = clock()
        self.tx.send(self.frame)
        while self.rx.recv_frame() is None:
            if not self.selector.select(2.0):
                raise TimeoutError("one-way probe lost")
        return clock() - t0

    def sample(self, n: int, warmup: int = 200) -> list[int]:
        for _ in range(warmup):
            self.once_ns()
        return [self.once_ns() for _ in range(n)]

    def close(self) -> None:
        self.selector.close()
        self.tx.close()
        self.rx.close()


def _echo(iface: str, group: str) -> int:
    """Reflect every frame for ``group`` back unchanged, blocking in poll between frames."""
    sock = RawSocket(iface, groups=[group], timestamps=False)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        sel.select()
        for rx in sock.recv_batch():
            sock.send(rx.frame)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m goosectl.lab.wire_floor")
    sub = parser.add_subparsers(dest="command", required=True)
    echo = sub.add_parser("echo", help="reflect frames for a group (run inside a namespace)")
    echo.add_argument("--iface", required=True)
    echo.add_argument("--group", required=True)
    args = parser.parse_args(argv)
    try:
        return _echo(args.iface, args.group)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
