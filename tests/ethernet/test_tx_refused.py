"""Sends the kernel refuses (its queue full) are counted and retried, never a link down.

The queue is made to fill for real: a token-bucket qdisc (`tc ... tbf`) on the sender's
veth end holds a few frames and drops the rest (ENOBUFS), and a tiny SO_SNDBUF makes the
socket itself refuse (EAGAIN) while the qdisc holds its frames. Needs root and `tc`.
"""

from __future__ import annotations

import errno
import selectors
import time

import pytest

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.shell.goose_live import LiveGoose
from goosectl.protocols.ethernet.rawsock import RawSocket, TxQueueFullError
from tests.ethernet.frames import GROUP_A, frame
from tests.support.peers import require_binary

pytestmark = pytest.mark.root


def throttle(wire, rate: str = "2mbit") -> None:
    """A qdisc on the sender's end that holds ~3 KB and sends at ``rate``."""
    tc = require_binary("tc", "iproute2")
    wire.left.run([tc, "qdisc", "add", "dev", wire.veth.a, "root", "tbf", "rate", rate,
                   "burst", "3000", "limit", "3000"])  # fmt: skip


def read_all(sock: RawSocket, last: bytes, timeout: float = 20.0) -> list[bytes]:
    """Frames until one containing ``last`` (the deadline only bounds a failing test)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        while not any(last in f for f in got):
            assert time.monotonic() < deadline, f"{last!r} never arrived; got {len(got)}"
            if sel.select(0.5):
                got += [rx.frame for rx in sock.recv_batch()]
    return got


def label(f: bytes) -> bytes:
    return f[22:28]


@pytest.mark.parametrize(
    ("sndbuf", "code"), [(None, errno.ENOBUFS), (4096, errno.EAGAIN)], ids=["qdisc", "sndbuf"]
)
def test_a_full_queue_is_refused_not_a_link_down(wire, sndbuf, code) -> None:
    throttle(wire)
    tx = wire.open("a", timestamps=False, sndbuf=sndbuf)
    refused: list[TxQueueFullError] = []
    for i in range(200):
        try:
            tx.send(frame(GROUP_A, b"#%05d" % i, size=300))
        except TxQueueFullError as exc:
            refused.append(exc)
    assert refused, "the queue never filled"
    assert {e.errno for e in refused} == {code}
    assert "frame not sent" in str(refused[0]) and "'wa'" in str(refused[0])
    assert tx.stats.sent == 200 - len(refused)


def numbered_sends(n: int, *, same_publisher: bool) -> list[SendFrame]:
    return [
        SendFrame(
            "G" if same_publisher else f"G{i}", ("A",), frame(GROUP_A, b"#%05d" % i, size=300)
        )
        for i in range(n)
    ]


def open_live(wire) -> LiveGoose:
    with wire.left.entered():
        return LiveGoose(GooseHub(GooseConfig()), wire.veth.a, promiscuous=False)


def run_until_sent(live: LiveGoose) -> None:
    """The live loop, stopped once nothing is held (or after 20 s: a failing test)."""
    live.on_round.append(lambda _now: live.stop() if live.tx_held == 0 else None)
    live.run(until_ns=time.monotonic_ns() + 20_000_000_000, start=False)
    assert live.tx_held == 0


def test_refused_frames_are_held_and_sent_in_order_by_the_loop(wire) -> None:
    throttle(wire)
    live = open_live(wire)
    rx = wire.open("b", groups=[GROUP_A])
    try:
        sends = numbered_sends(100, same_publisher=False)
        live.execute(sends, time.monotonic_ns())
        assert live.tx_refused >= 1
        assert live.down == set()  # a full queue is not a dead link
        held = live.tx_held
        assert held > 0 and live.sent + held == 100
        # the loop retries on its own, within its schedule, until everything is out
        run_until_sent(live)
        got = read_all(rx, b"#00099")
    finally:
        live.close()
    assert [label(f) for f in got] == [b"#%05d" % i for i in range(100)]
    assert live.sent == 100 and live.tx_superseded == 0 and live.tx_held == 0
    assert live.send_errors == 0 and live.down == set()


def test_a_newer_frame_of_the_same_publisher_replaces_the_held_one(wire) -> None:
    throttle(wire)
    live = open_live(wire)
    rx = wire.open("b", groups=[GROUP_A])
    try:
        for send in numbered_sends(100, same_publisher=True):
            live.execute([send], time.monotonic_ns())
        assert live.tx_refused >= 1 and live.tx_superseded >= 1
        assert live.tx_held == 1  # only the newest state waits
        run_until_sent(live)
        got = read_all(rx, b"#00099")
    finally:
        live.close()
    seq = [int(label(f)[1:]) for f in got]
    assert seq == sorted(set(seq)) and seq[-1] == 99  # in order, the last state arrived
    assert live.sent + live.tx_superseded == 100 == len(seq) + live.tx_superseded
