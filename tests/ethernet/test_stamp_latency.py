"""`run`'s stop report times each frame that made it send from the kernel's receive stamp,
so a slow answer is told apart from a controller that was woken late: the stamp-to-sent
time of a frame is never shorter than its handling time, and frames that send nothing are
not counted."""

from __future__ import annotations

import time

from controller.goose.effects import SendFrame
from controller.goose.hub import GooseHub
from tests.goose.helpers import raw_frame
from tests.support.peers import require_root


class Echo(GooseHub):
    """Answers every second frame with a frame of its own (bytes are irrelevant here)."""

    def frame(self, buf, side, now_ns, vlan=None):
        out = super().frame(buf, side, now_ns, vlan)
        self.n = getattr(self, "n", 0) + 1
        if self.n % 2 == 0:
            out = [*out, SendFrame("echo", ("A",), bytes(buf))]
        return out


def test_stamp_to_sent_counts_only_frames_that_sent_and_includes_the_handling():
    require_root()
    from controller.shell.goose_live import LiveGoose
    from lab.netns import netlab
    from protocols.ethernet.rawsock import RawSocket

    with netlab() as lab:
        a, b = lab.namespace(), lab.namespace()
        lab.veth(a, b, a="tx0", b="rx0")
        with b.entered():
            live = LiveGoose(Echo(), "rx0", promiscuous=True)
        with a.entered():
            tx = RawSocket("tx0", timestamps=False)
        seen: list = []

        def on_frame(n, ts, buf, v, out) -> None:
            seen.append(n)
            if len(seen) == 6:
                live.stop()

        try:
            for sq in range(6):
                tx.send(raw_frame(1, sq))
            live.run(on_frame=on_frame, until_ns=time.monotonic_ns() + 30_000_000_000)
        finally:
            tx.close()
            live.close()
    assert len(seen) == 6 and live.sent == 3
    stamps = list(live.stamp_latencies)
    assert len(stamps) == 3
    # each answered frame: stamp -> sent covers its own handling (and its wait before it)
    handled = sorted(live.latencies)[-3:]
    assert all(s > 0 for s in stamps) and min(stamps) >= min(handled)
