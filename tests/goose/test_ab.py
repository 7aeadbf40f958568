"""A/B networks on the virtual clock: first copy wins, sides supervised, failover."""

from __future__ import annotations

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.goose.hub import GooseHub

from .helpers import DST, GOCB, MS, UTC0, bools, frames, publisher, states, verdicts


def ab_subscriber(**ab) -> GooseHub:
    return GooseHub(
        GooseConfig.model_validate(
            {
                "subscriptions": [
                    {"gocb_ref": GOCB, "appid": 0x1010, "dst": DST, "ab": ab or {"mode": "merge"}}
                ]
            }
        )
    )


class ABWire:
    def __init__(self, sub: GooseHub, a_first: bool = True) -> None:
        self.pub = publisher(sides="both")
        self.sub = sub
        self.up = {"A": True, "B": True}
        self.order = ("A", "B") if a_first else ("B", "A")
        self.log: list = []
        self.now = 0
        self._deliver(self.pub.start(0, UTC0))

    def _deliver(self, effects) -> None:
        for f in frames(effects):
            for side in self.order:
                if self.up[side] and side in f.sides:
                    self.log += self.sub.frame(f.data, side, self.now)

    def run_until(self, t: int) -> None:
        while True:
            cands = [x for x in (self.pub.next_deadline(), self.sub.next_deadline()) if x]
            d = min([*cands, t])
            if d >= t:
                break
            self.now = d
            self.log += self.sub.advance(d)
            self._deliver(self.pub.advance(d))
        self.now = t
        self.log += self.sub.advance(t)

    def publish(self, *values) -> None:
        self._deliver(self.pub.publish(GOCB, bools(*values), self.now, UTC0 + self.now))

    def delivered_states(self) -> list[int]:
        return [v.st_num for v in verdicts(self.log) if v.deliver]


def test_both_sides_up_each_state_delivered_exactly_once():
    w = ABWire(ab_subscriber())
    for i in range(5):
        w.run_until((i + 1) * 50 * MS)
        w.publish(bool(i % 2), True)
    w.run_until(400 * MS)
    assert w.delivered_states() == [1, 2, 3, 4, 5, 6]
    dups = [v for v in verdicts(w.log) if v.cls == "duplicate"]
    judged = [v for v in verdicts(w.log) if v.cls != "duplicate"]
    assert len(dups) == len(judged)  # every frame arrived twice; the second copy discarded
    assert all(v.side == "B" for v in dups)


def test_side_a_down_mid_burst_no_state_lost_and_loss_reported_within_tal():
    w = ABWire(ab_subscriber())
    w.run_until(1500 * MS)  # heartbeat: TAL 2000 ms
    w.publish(True, False)
    w.run_until(w.now + 5 * MS)  # in the burst
    w.up["A"] = False
    down_at = w.now
    w.publish(True, True)  # a state change while A is down
    w.run_until(down_at + 3000 * MS)
    assert w.delivered_states() == [1, 2, 3]
    lost = [e for e in w.log if getattr(e, "state", None) == "lost"]
    assert [e.side for e in lost] == ["A"]
    # reported no later than the TAL announced by A's last frame (at most 2 x the gap)
    assert ("-", "lost") not in states(w.log)  # the stream itself never went lost
    w.up["A"] = True
    w.log.clear()
    w.run_until(w.now + 1100 * MS)
    assert ("A", "valid") in states(w.log)  # recovery reported


def test_loss_reported_within_tal_time():
    w = ABWire(ab_subscriber())
    w.run_until(1500 * MS)
    w.up["A"] = False
    cut = w.now
    w.log.clear()
    w.run_until(cut + 2100 * MS)
    # A's last frame (at 1024 ms) announced TAL 2000 ms -> lost at 3024 ms
    sub_m = w.sub.scheduler.machines
    side_a = next(m for k, m in sub_m.items() if k.endswith("#A"))
    assert side_a.state == "lost"
    assert ("A", "lost") in states(w.log)


def test_preferred_mode_failover_and_manual_failback():
    sub = ab_subscriber(mode="preferred", failback="manual")
    w = ABWire(sub, a_first=False)  # B's copies arrive first, but A is preferred
    w.run_until(100 * MS)
    assert all(v.side == "A" for v in verdicts(w.log) if v.cls not in ("duplicate",))
    w.up["A"] = False
    w.run_until(4000 * MS)
    assert ("B", "active") in states(w.log)
    w.publish(True, True)
    w.run_until(4100 * MS)
    assert w.delivered_states()[-1] == 2  # delivered from B while A is away
    w.up["A"] = True
    w.log.clear()
    w.run_until(6000 * MS)
    assert ("A", "valid") in states(w.log) and ("A", "active") not in states(w.log)
    sid = next(iter(sub.bank.by_id))
    sub.bank.failback(sid, w.now)
    assert ("A", "active") in states(sub.drain())


def test_two_networks_each_second_copy_is_a_duplicate_whatever_the_batch_order():
    """`listen --iface-b` without A/B configured: the two sockets are
    read batch by batch, so A's n and n+1 can come before B's n and n+1. On one stream
    machine B's n was `out_of_order`, the machine followed its sqNum, and B's n+1 was a
    second `retransmission` (14 times in 6 runs). Receiving on two networks merges."""
    from .helpers import raw_frame

    seq = [raw_frame(5, k) for k in range(4)]
    order = [(seq[0], "A"), (seq[0], "B"), (seq[1], "A"), (seq[2], "A"), (seq[1], "B"),
             (seq[2], "B"), (seq[3], "B"), (seq[3], "A")]  # fmt: skip

    def classes_of(hub: GooseHub) -> list[tuple[int, str, str]]:
        out = []
        for i, (buf, side) in enumerate(order):
            out += hub.frame(buf, side, i * MS)
        return [(v.sq_num, v.side, v.cls) for v in verdicts(out)]

    one = GooseHub()
    assert classes_of(one).count((2, "B", "retransmission")) == 1  # the race, on one machine
    merged = GooseHub()
    merged.bank.merge_sides()  # what LiveGoose does with two interfaces
    got = classes_of(merged)
    assert got == [
        (0, "A", "first"),
        (0, "B", "duplicate"),
        (1, "A", "retransmission"),
        (2, "A", "retransmission"),
        (1, "B", "duplicate"),
        (2, "B", "duplicate"),
        (3, "B", "retransmission"),
        (3, "A", "duplicate"),
    ]
