"""The wire-trip lab for the benchmarks, with a reader that loses no frame.

`controller.runtime.wire_latency.WireTrip.pump_until` reads a batch of frames and returns
at the first that matches, dropping the rest of that batch. When the peer (this process)
is late to read (a loaded or shared machine), the trip-ack and the breaker's position
change a few ms later arrive in one batch: the position frame (sqNum 0) is dropped with
the batch, only its retransmissions follow, and the sample fails with "the controller
did not answer in time" (seen under CPU hogs at the 1st-10th trip, and in busy CI runs).
This subclass keeps the frames after a match for the next wait; the timestamps are the
same kernel receive stamps. To be folded into WireTrip (its owner is told); until then the
benchmarks use this one.

`peer_fifo`: the peer stands for another device (the protection IED on its own hardware),
not for one more task on the controller's host. Its send time is taken in Python just
before the send, so a peer preempted there (by CPU hogs, or by other work on a shared
machine) adds its own wait to the trip: measured under a CPU hog per core, `run
--realtime` max 18 ms with an ordinary peer, 0.98 ms with a SCHED_FIFO one, same minute.
Run as SCHED_FIFO 40 (below `run --realtime`'s 50) it sends when it means to.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Iterator

from controller.runtime.wire_latency import WireTrip as _WireTrip
from protocols.goose import parse_header

#: the peer's priority: above normal tasks (hogs, the simulator), below `run --realtime` (50).
PEER_FIFO_PRIORITY = 40


@contextlib.contextmanager
def peer_fifo(priority: int = PEER_FIFO_PRIORITY) -> Iterator[None]:
    """This process (the peer) SCHED_FIFO for the block; its policy restored after."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    try:
        yield
    finally:
        os.sched_setscheduler(0, policy, param)


class WireTrip(_WireTrip):
    def pump_until(self, want, timeout_s: float):
        """Serve the peer's heartbeats and read frames until `want(header)`; (header, t).
        Frames read past the match stay queued for the next call."""
        pending = self.__dict__.setdefault("_pending", deque())
        end = time.monotonic() + timeout_s
        while True:
            while pending:
                rx = pending.popleft()
                try:
                    h = parse_header(rx.frame)
                except Exception:
                    continue
                if h.gocb_ref.startswith("GCTL") and h.sq_num == 0 and want(h):
                    return h, rx.ts_ns or time.time_ns()
            if time.monotonic() >= end:
                raise TimeoutError("the controller did not answer in time")
            d = self.hub.next_deadline()
            now = time.monotonic_ns()
            if d is not None and d <= now:
                self._send(self.hub.advance(now))
                d = self.hub.next_deadline()
            wait = 0.05 if d is None else max(0.0, min(0.05, (d - time.monotonic_ns()) / 1e9))
            if self.sel.select(wait):
                pending.extend(self.sock.recv_batch())
