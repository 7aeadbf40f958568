"""The receive ring on a real veth pair between two namespaces the test creates (root).

A burst is sent with nobody reading, then read: what the ring holds, the tags and times it
reports, what the kernel says it dropped when the ring is too small, and the fallback to
recvmsg when the kernel refuses the ring.
"""

from __future__ import annotations

import resource
import selectors
import subprocess
import sys
import time

import pytest

from goosectl.protocols.ethernet.rawsock import LinkDownError, RawSocket
from goosectl.protocols.ethernet.ring import RingSpec
from goosectl.protocols.ethernet.vlan import TPID_STAG, VlanTag, insert_tag
from tests.ethernet.burst import MmsgSender
from tests.ethernet.frames import GROUP_A, GROUP_B, frame, read_until

pytestmark = pytest.mark.root

V3 = RingSpec(version=3)
V2 = RingSpec(version=2)
RINGS = [pytest.param(V3, id="tpacket_v3"), pytest.param(V2, id="tpacket_v2")]


def numbered(n: int, size: int = 300) -> list[bytes]:
    """``n`` frames to GROUP_A whose label is their number (``#00042``)."""
    return [frame(GROUP_A, b"#%05d" % i, size=size) for i in range(n)]


def numbers(got) -> list[int]:
    return [int(rx.frame[23:28]) for rx in got if rx.frame[22:23] == b"#"]


def drain(sock: RawSocket) -> list:
    """Everything the socket holds now (the burst was sent before: no waiting needed)."""
    out: list = []
    while batch := sock.recv_batch(512):
        out += batch
    return out


@pytest.mark.parametrize("spec", RINGS)
def test_ring_holds_a_whole_burst_sent_while_nobody_reads(wire, spec: RingSpec) -> None:
    tx = wire.open("a", timestamps=False)
    rx = wire.open("b", groups=[GROUP_A], ring=spec)
    assert rx.rx_mode == f"tpacket_v{spec.version}" and rx.ring_error is None
    sent = numbered(4_510)
    MmsgSender(tx, sent).send_all()  # back to back; the reader has not read one yet
    got = drain(rx)
    assert numbers(got) == list(range(4_510))
    assert [g.frame for g in got] == sent
    k = rx.kernel_stats()
    assert (k.packets, k.drops, k.freeze) == (4_510, 0, 0)
    assert rx.stats.received == 4_510


def test_default_ring_holds_ten_thousand_full_size_frames(wire) -> None:
    tx = wire.open("a", timestamps=False)
    rx = wire.open("b", groups=[GROUP_A], ring=V3)
    sent = [frame(GROUP_A, b"#%05d" % i, size=1514) for i in range(10_000)]
    MmsgSender(tx, sent).send_all()
    got = drain(rx)
    assert numbers(got) == list(range(10_000))
    assert rx.kernel_stats().drops == 0


def test_plain_socket_loses_the_same_burst_but_counts_every_drop(wire) -> None:
    """The old receive path: the receive buffer overflows. Nothing is lost silently:
    frames read + the kernel's drops = frames sent."""
    tx = wire.open("a", timestamps=False)
    rx = wire.open("b", groups=[GROUP_A])
    assert rx.rx_mode == "recvmsg"
    MmsgSender(tx, numbered(4_510)).send_all()
    got = drain(rx)
    k = rx.kernel_stats()
    assert k.drops > 0
    assert len(got) + k.drops == 4_510 == k.packets
    assert numbers(got) == sorted(numbers(got))


@pytest.mark.parametrize("spec", RINGS)
def test_tiny_ring_drops_are_flagged_and_counted(wire, spec: RingSpec) -> None:
    tx = wire.open("a", timestamps=False)
    tiny = RingSpec(version=spec.version, frames=20, block_bytes=4096)
    rx = wire.open("b", groups=[GROUP_A], ring=tiny)
    MmsgSender(tx, numbered(1_000)).send_all()
    got = drain(rx)
    assert not rx.drops_pending  # nothing was written after the drops: nothing flagged yet
    tx.send(frame(GROUP_A, b"after"))
    got += read_until(rx, b"after")
    # the first frame after a loss carries the kernel's flag: the reader knows in band
    assert rx.drops_pending
    k = rx.kernel_stats()
    assert not rx.drops_pending
    assert k.drops > 0 and len(got) + k.drops == 1_001 == k.packets
    assert numbers(got) == sorted(numbers(got))
    if spec.version == 3:
        assert k.freeze >= 1  # every block was the reader's: the kernel stopped filling
    # counters are summed across reads (the kernel resets its own when read)
    tx.send(frame(GROUP_A, b"more"))
    read_until(rx, b"more")
    assert rx.kernel_stats() == k._replace(packets=k.packets + 1)
    assert not rx.drops_pending


@pytest.mark.parametrize("spec", RINGS)
@pytest.mark.parametrize(
    "tag",
    [
        VlanTag(vid=10, pcp=4),
        VlanTag(vid=0, pcp=4),  # priority-tagged (the ABB capture): still a tag
        VlanTag(vid=4094, pcp=7, dei=1),
        VlanTag(vid=20, pcp=3, tpid=TPID_STAG),
    ],
    ids=str,
)
def test_stripped_vlan_tag_reaches_the_reader(wire, spec: RingSpec, tag: VlanTag) -> None:
    tx, rx = wire.open("a"), wire.open("b", groups=[GROUP_A], ring=spec)
    untagged = frame(GROUP_A, b"tagged")
    tx.send(insert_tag(untagged, tag))
    tx.send(frame(GROUP_A, b"untagged"))
    got = read_until(rx, b"untagged")
    plain = frame(GROUP_A, b"untagged")
    assert [(g.frame, g.vlan) for g in got] == [(untagged, tag), (plain, None)]


@pytest.mark.parametrize("spec", RINGS)
def test_ring_reports_kernel_time_or_none(wire, spec: RingSpec) -> None:
    tx = wire.open("a")
    with_ts = wire.open("b", groups=[GROUP_A], ring=spec)
    without = wire.open("b", groups=[GROUP_A], ring=spec, timestamps=False)
    before = time.time_ns()
    tx.send(frame(GROUP_A, b"when"))
    (got,) = read_until(with_ts, b"when")
    after = time.time_ns()
    assert got.ts_ns is not None and before <= got.ts_ns <= after
    (plain,) = read_until(without, b"when")
    assert plain.ts_ns is None


@pytest.mark.parametrize("spec", RINGS)
def test_ring_keeps_the_filter_groups_and_own_frames_out(wire, spec: RingSpec) -> None:
    tx = wire.open("a", ring=spec, promiscuous=True)
    rx = wire.open("b", groups=[GROUP_A], ring=spec)
    tx.send(frame(GROUP_B, b"not-joined"))
    tx.send(frame(GROUP_A, b"ipv4", ethertype=0x0800))
    tx.send(frame(GROUP_A, b"wanted"))
    assert [g.frame[22:28] for g in read_until(rx, b"wanted")] == [b"wanted"]
    rx.send(frame(GROUP_A, b"back"))
    # the sender's own frames never come back through its ring
    assert [g.frame[22:26] for g in read_until(tx, b"back")] == [b"back"]


@pytest.mark.parametrize("spec", RINGS)
def test_ring_socket_reports_link_down(wire, spec: RingSpec) -> None:
    rx = wire.open("b", groups=[GROUP_A], ring=spec)
    wire.veth.set("b", False)
    # the loop learns of it as with a plain socket: readable, and the read says why
    with selectors.DefaultSelector() as sel:
        sel.register(rx, selectors.EVENT_READ)
        assert sel.select(5.0)
    with pytest.raises(LinkDownError, match=r"receive on 'wb'.*down"):
        rx.recv_batch()


_NO_MAP = """
import resource, select, sys
from goosectl.protocols.ethernet.rawsock import RawSocket, RingSpec
# leave room for Python, not for a 16 MiB ring: mmap() of the ring fails with ENOMEM
size = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + 8 * 2**20, size + 8 * 2**20))
sock = RawSocket('wb', groups=['01:0c:cd:01:00:01'], ring=RingSpec(version=3))
print(sock.rx_mode, '|', sock.ring_error, flush=True)
sys.stdin.readline()
select.select([sock], [], [], 10)
got = sock.recv_batch()
print(len(got), got[0].frame[22:27] if got else None, flush=True)
"""


def test_refused_ring_falls_back_to_recvmsg_and_says_why(wire) -> None:
    assert resource.RLIMIT_AS  # the child limits its address space below the ring's size
    pipe = subprocess.PIPE
    proc = wire.right.popen(
        [sys.executable, "-c", _NO_MAP], stdin=pipe, stdout=pipe, stderr=pipe, text=True
    )
    try:
        mode, why = proc.stdout.readline().strip().split(" | ")
        assert mode == "recvmsg", proc.stderr.read()
        assert "cannot map a" in why and "receive ring" in why
        tx = wire.open("a")
        tx.send(frame(GROUP_A, b"falls"))
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "1 b'falls'"
    finally:
        proc.kill()
        proc.wait()
