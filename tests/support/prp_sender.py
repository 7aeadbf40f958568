"""An independent PRP sender for the tests, written from the standard's facts (IEC
62439-3 Clause 4, PRP-1), not from `protocols.prp`: the trailer is six octets at the end,
SeqNr(16) | LanId(4) | LSDUsize(12) | 0x88FB; LanId 0b1010 on LAN A, 0b1011 on LAN B;
LSDUsize counts from after the Ethernet header (an 802.1Q tag not counted) to the end of
the trailer; frames are padded to 60 octets (64 tagged) before it. A scenario is a list
of arrivals (time, port, frame), from a stream of GOOSE state changes and the faults
asked for: loss on one LAN, a cut, reordering, extra copies, wrong LanIds."""

from __future__ import annotations

import contextlib
import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose.data import Boolean
from goosectl.protocols.goose.frame import GooseFrame, encode_frame

LAN_ID = {"A": 0b1010, "B": 0b1011}
SRC = bytes.fromhex("020000aa0001")
DST = bytes.fromhex("010ccd010001")
GOCB = "PRPIED/LLN0$GO$gcb1"


def trailer(frame: bytes, seq: int, lan: int) -> bytes:
    is_tagged = frame[12:14] == b"\x81\x00"
    minimum = 64 if is_tagged else 60
    if len(frame) < minimum:
        frame = frame + b"\x00" * (minimum - len(frame))
    size = len(frame) + 6 - 14 - (4 if is_tagged else 0)
    return frame + struct.pack(">HHH", seq, (lan << 12) | size, 0x88FB)


def goose(st: int, sq: int, *, vlan: bool = False, src: bytes = SRC) -> bytes:
    from goosectl.protocols.goose.header import Vlan

    return encode_frame(
        GooseFrame(gocb_ref=GOCB, dat_set="PRPIED/LLN0$ds", go_id="prp",
                   all_data=(Boolean(st % 2 == 0),), st_num=st, sq_num=sq, dst=DST, src=src,
                   appid=0x3000, vlan=Vlan(0, 4) if vlan else None, time_allowed_to_live=2000)
    )  # fmt: skip


@dataclass
class Arrival:
    ns: int
    port: str
    frame: bytes
    seq: int
    lan: int


@dataclass
class Scenario:
    """Frames sent on both LANs, one SeqNr each (wrapping at 65535), then faults."""

    states: int = 200
    start_seq: int = 65_000
    gap_ns: int = 1_000_000
    seed: int = 1
    arrivals: list[Arrival] = field(default_factory=list)

    def build(
        self,
        *,
        loss_b: float = 0.0,
        cut_b_at: int | None = None,
        reorder_b: float = 0.0,
        triples: float = 0.0,
        wrong_lan_b: bool = False,
        b_delay_ns: int = 100_000,
        vlan: bool = False,
    ) -> Scenario:
        rng = random.Random(self.seed)
        for i in range(self.states):
            seq = (self.start_seq + i) % 65_536
            g = goose(i + 1, 0, vlan=vlan)
            t = i * self.gap_ns
            self.arrivals.append(Arrival(t, "A", trailer(g, seq, LAN_ID["A"]), seq, LAN_ID["A"]))
            lost = rng.random() < loss_b or (cut_b_at is not None and i >= cut_b_at)
            if not lost:
                lan = LAN_ID["A"] if wrong_lan_b else LAN_ID["B"]
                tb = t + b_delay_ns
                if rng.random() < reorder_b:
                    tb = t - self.gap_ns * 3 // 2  # ahead of A, and of the frame before
                self.arrivals.append(Arrival(tb, "B", trailer(g, seq, lan), seq, lan))
                if rng.random() < triples:
                    self.arrivals.append(Arrival(tb + 10, "B", trailer(g, seq, lan), seq, lan))
        self.arrivals.sort(key=lambda a: a.ns)
        return self

    def expected(self, forget_ns: int = 400_000_000) -> dict[str, int]:
        """The MIB counters a receiver following the standard ends with (all entries
        aged out): per SeqNr, the first copy's port and how many copies came."""
        counts = {f"lreCnt{k}{p}": 0 for k in ("Rx", "ErrWrongLan", "Unique", "Duplicate",
                                                 "Multi") for p in "AB"}  # fmt: skip
        first: dict[int, list] = {}
        for a in self.arrivals:
            counts[f"lreCntRx{a.port}"] += 1
            if a.lan != LAN_ID[a.port]:
                counts[f"lreCntErrWrongLan{a.port}"] += 1
            e = first.get(a.seq)
            if e is None or a.ns - e[1] >= forget_ns:
                first[a.seq] = [a.port, a.ns, 1]
            else:
                e[2] += 1
        for port, _, n in first.values():
            kind = "Unique" if n == 1 else "Duplicate" if n == 2 else "Multi"
            counts[f"lreCnt{kind}{port}"] += 1
        return counts


@contextlib.contextmanager
def two_lans(netlab: Any) -> Iterator[tuple[Any, Any, dict[str, RawSocket]]]:
    """LAN A and LAN B: two veth pairs between a sender namespace (ta, tb) and a receiver
    namespace (ra, rb), with the sender's raw sockets, closed at the end."""
    left, right = netlab.namespace(), netlab.namespace()
    netlab.veth(left, right, a="ta", b="ra")
    netlab.veth(left, right, a="tb", b="rb")
    with left.entered():
        socks = {"A": RawSocket("ta", timestamps=False), "B": RawSocket("tb", timestamps=False)}
    try:
        yield left, right, socks
    finally:
        for s in socks.values():
            s.close()
