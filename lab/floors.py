"""The floors latency is reported against: what the machine costs before our code runs.

- pty round trip: bytes master -> slave -> master through the kernel's tty layer, no codec;
- raw-socket round trip across a veth pair with an echo peer: `wire_floor.WireFloor`.
"""

from __future__ import annotations

import gc
import os
import select
import time

from goosectl.protocols.serial.port import open_pty_pair


def read_exactly(fd: int, n: int, timeout_s: float = 2.0) -> bytes:
    out = b""
    while len(out) < n:
        r, _, _ = select.select([fd], [], [], timeout_s)
        if not r:
            raise TimeoutError(f"pty delivered {len(out)} of {n} bytes within {timeout_s} s")
        out += os.read(fd, n - len(out))
    return out


def pty_round_trips(nbytes: int, n: int, warmup: int = 200) -> list[int]:
    """`n` bare pty round trips of `nbytes` each way, each timed alone (ns, GC off)."""
    payload = bytes((i % 255) + 1 for i in range(nbytes))
    clock = time.perf_counter_ns
    out: list[int] = []
    with open_pty_pair() as pair:
        master, slave = pair.master_fd, pair.slave_fd
        gc_was = gc.isenabled()
        gc.disable()
        try:
            for i in range(warmup + n):
                t0 = clock()
                os.write(master, payload)
                read_exactly(slave, nbytes)
                os.write(slave, payload)
                read_exactly(master, nbytes)
                if i >= warmup:
                    out.append(clock() - t0)
        finally:
            if gc_was:
                gc.enable()
    return out
