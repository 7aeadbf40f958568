"""`run`'s stop report times each frame that made it send from the kernel's receive stamp,
so a slow answer is told apart from a controller that was woken late: the stamp-to-sent
time of a frame is never shorter than its handling time, and frames that send nothing are
not counted."""

from __future__ import annotations

from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.goose.hub import GooseHub
from tests.goose.helpers import raw_frame
from tests.support.netns import live_on_veth


class Echo(GooseHub):
    """Answers every second frame with a frame of its own (bytes are irrelevant here)."""

    def frame(self, buf, side, now_ns, vlan=None):
        out = super().frame(buf, side, now_ns, vlan)
        self.n = getattr(self, "n", 0) + 1
        if self.n % 2 == 0:
            out = [*out, SendFrame("echo", ("A",), bytes(buf))]
        return out


def test_stamp_to_sent_counts_only_frames_that_sent_and_includes_the_handling():
    live, seen = live_on_veth(Echo(), [raw_frame(1, sq) for sq in range(6)], 6)
    assert len(seen) == 6 and live.sent == 3
    stamps = list(live.stamp_latencies)
    assert len(stamps) == 3
    # each answered frame: stamp -> sent covers its own handling (and its wait before it)
    handled = sorted(live.latencies)[-3:]
    assert all(s > 0 for s in stamps) and min(stamps) >= min(handled)
