"""The PRP link redundancy entity: what a doubly attached node does between its two LAN
ports and its upper layer (IEC 62439-3 Clause 4), as a pure object: frames and the
current time in, verdicts, frames to send and alarms out. No clock, no I/O.

Receive. A frame whose trailer checks in every field (`protocols.prp.parse_rct`) is PRP:
its trailer is stripped and (source MAC, SeqNr) looked up in the duplicate table. The
first copy is delivered; any later copy within EntryForgetTime (400 ms) is dropped, the
third as well as the second (the entry is kept, not removed, on a match). Why a table of
seen (MAC, SeqNr) and not the 2010 edition's "drop window": a window opened over
SeqNrs a lossy LAN never delivered drops their only copies from the good LAN; the
standard since 2012 asks for an algorithm that "never rejects a legitimate frame", and a
table of what was actually seen can only err towards accepting: an entry aged out or
evicted (the table is bounded, oldest out first) lets a late copy through, never
the other way round. A frame whose LanId names the other LAN is counted (ErrWrongLan) and
alarmed once per source and port as a likely crossed cable, and otherwise handled like
any other: delivered when it is the first copy, dropped when it is not (a crossed cable
must not double every frame up the stack).
Anything else is a SAN frame, delivered as it is (the GOOSE-level A/B merge sees it).

Counters (the MIB's names, per port): Tx, Rx (frames with a valid trailer), ErrWrongLan,
Errors (a PRP suffix with another field wrong), and when an entry leaves the table,
Unique (no copy followed), Duplicate (one) or Multi (more), on the port of its first copy.
`settle` ages out every entry, for a final report.

Send. One SeqNr counter for the node (PRP-1): `send` gives the frame for LAN A and the
frame for LAN B, the same bytes and SeqNr but the LanId, one encode, wrapping 65535 -> 0.

Supervision. `supervision(now)` gives a frame for each LAN every LifeCheckInterval
(2 s); received ones fill the node table (MAC, last seen on A and on B, DANP / SAN-A /
SAN-B), nodes are forgotten after NodeForgetTime (60 s), and `tick` alarms a DANP silent
on one LAN longer than ``silent_ns`` (default 3 s), and again when it is heard back.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from protocols.ethernet.mac import format_mac
from protocols.prp import (
    LAN_A,
    LAN_B,
    RCT_LEN,
    Rct,
    add_rct,
    build_supervision,
    check_rct,
    next_seq,
    parse_supervision,
    read_rct,
)

ENTRY_FORGET_NS = 400_000_000
LIFE_CHECK_NS = 2_000_000_000
NODE_FORGET_NS = 60_000_000_000
SILENT_NS = 3_000_000_000
#: the duplicate table's bound: 400 ms of a 1 GbE LAN of minimum frames is far more, but a
#: GOOSE bus carries a few thousand frames a second; past it the oldest entry goes first
MAX_ENTRIES = 65_536
MAX_NODES = 4_096
#: a PRP frame's LanId for each port
LAN_OF = {"A": LAN_A, "B": LAN_B}

COUNTERS = (
    "lreCntTxA", "lreCntTxB", "lreCntRxA", "lreCntRxB", "lreCntErrWrongLanA",
    "lreCntErrWrongLanB", "lreCntErrorsA", "lreCntErrorsB", "lreCntUniqueA", "lreCntUniqueB",
    "lreCntDuplicateA", "lreCntDuplicateB", "lreCntMultiA", "lreCntMultiB",
)  # fmt: skip

Port = Literal["A", "B"]


class Alarm(NamedTuple):
    """Something a network engineer must see: ``kind`` is ``crossed_cable``,
    ``lan_silent`` or ``lan_back``."""

    kind: str
    port: str
    mac: bytes
    text: str


class RxVerdict(NamedTuple):
    """What became of one received frame: ``frame`` is what goes up (trailer stripped)
    or None (a duplicate dropped, a supervision frame taken); ``rct`` the trailer."""

    frame: bytes | None
    rct: Rct | None
    duplicate: bool = False
    wrong_lan: bool = False
    supervision: bool = False
    alarm: Alarm | None = None


@dataclass
class Node:
    """One remote node of the node table (lreNodesTable)."""

    mac: bytes
    seen_a: int | None = None
    seen_b: int | None = None
    supervised: bool = False
    silent: str | None = None  # the port alarmed silent, until heard again

    @property
    def kind(self) -> str:
        """DANP (heard on both LANs), SAN-A or SAN-B (on one only)."""
        if self.seen_a is not None and self.seen_b is not None:
            return "DANP"
        return "SAN-A" if self.seen_a is not None else "SAN-B"

    def last_seen(self) -> int:
        return max(x for x in (self.seen_a, self.seen_b) if x is not None)


@dataclass(frozen=True)
class LreConfig:
    mac: bytes = bytes(6)
    discard: bool = True
    entry_forget_ns: int = ENTRY_FORGET_NS
    max_entries: int = MAX_ENTRIES
    life_check_ns: int = LIFE_CHECK_NS
    node_forget_ns: int = NODE_FORGET_NS
    silent_ns: int = SILENT_NS
    max_nodes: int = MAX_NODES
    supervision_last: int = 0  # XX of 01:15:4E:00:01:XX
    vlan_tci: int | None = None  # supervision frames tagged with this TCI


@dataclass
class Lre:
    """The node's LRE; `receive` per frame, `send` per frame out, `tick` now and then."""

    cfg: LreConfig = field(default_factory=LreConfig)
    seq: int = 0
    sup_seq: int = 0
    next_supervision: int | None = None
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    #: (source MAC, SeqNr) -> [port of the first copy, its time, copies seen]
    table: dict[tuple[bytes, int], list] = field(default_factory=dict)
    _order: deque[tuple[int, tuple[bytes, int]]] = field(default_factory=deque)
    #: the node table, least recently heard first (the one evicted when it is full)
    nodes: OrderedDict[bytes, Node] = field(default_factory=OrderedDict)
    #: sources alarmed for a crossed cable, per port (until a right LanId is seen)
    crossed: set[tuple[str, bytes]] = field(default_factory=set)
    supervision_errors: int = 0
    evicted: int = 0
    last_error: str | None = None

    # -- receive ---------------------------------------------------------------------------

    def receive(self, frame: bytes, port: Port, now_ns: int) -> RxVerdict:
        """One frame as it arrived on ``port`` (the kernel's tag already out of its bytes,
        or inline: both give the right LSDUsize)."""
        rct = read_rct(frame)
        if rct is None:
            if len(frame) > 13 and frame[12] == 0x88 and frame[13] == 0xFB:
                return self._supervision(frame, port, now_ns, None)
            return RxVerdict(frame, None)
        why = check_rct(frame, rct)
        counts = self.counts
        if why is not None:
            counts["lreCntErrors" + port] += 1
            self.last_error = f"port {port}: {why}"
            return RxVerdict(frame, None)
        counts["lreCntRx" + port] += 1
        src = frame[6:12]
        self._seen(src, port, now_ns)
        alarm = None
        wrong = rct.lan != LAN_OF[port]
        if wrong:
            counts["lreCntErrWrongLan" + port] += 1
            if (port, src) not in self.crossed:
                self.crossed.add((port, src))
                other = "B" if port == "A" else "A"
                alarm = Alarm(
                    "crossed_cable", port, src,
                    f"frames of {format_mac(src)} with LanId {other} arrive on port {port}: "
                    f"the LAN A and LAN B cables are likely crossed",
                )  # fmt: skip
        elif self.crossed:
            self.crossed.discard((port, src))
        if (frame[12] == 0x88 and frame[13] == 0xFB) or (
            frame[12] == 0x81 and frame[16] == 0x88 and frame[17] == 0xFB
        ):
            return self._supervision(frame, port, now_ns, rct)
        if not self.cfg.discard:
            return RxVerdict(frame[:-RCT_LEN], rct, wrong_lan=wrong, alarm=alarm)
        if self._order and self._order[0][0] <= now_ns - self.cfg.entry_forget_ns:
            self.age(now_ns)
        key = (src, rct.seq)
        entry = self.table.get(key)
        if entry is not None:
            entry[2] += 1
            return RxVerdict(None, rct, duplicate=True, wrong_lan=wrong, alarm=alarm)
        self.table[key] = [port, now_ns, 1]
        self._order.append((now_ns, key))
        if len(self.table) > self.cfg.max_entries:
            self._expire(self._order.popleft()[1])
            self.evicted += 1
        return RxVerdict(frame[:-RCT_LEN], rct, wrong_lan=wrong, alarm=alarm)

    def _expire(self, key: tuple[bytes, int]) -> None:
        entry = self.table.pop(key, None)
        if entry is None:
            return
        copies = entry[2]
        kind = "Unique" if copies == 1 else "Duplicate" if copies == 2 else "Multi"
        self.counts[f"lreCnt{kind}{entry[0]}"] += 1

    def age(self, now_ns: int) -> None:
        """Forget the entries older than EntryForgetTime (counting each)."""
        limit = now_ns - self.cfg.entry_forget_ns
        order = self._order
        while order and order[0][0] <= limit:
            self._expire(order.popleft()[1])

    def settle(self) -> None:
        """Every entry out of the table and counted, as if its time had run out."""
        while self._order:
            self._expire(self._order.popleft()[1])

    def _seen(self, mac: bytes, port: str, now_ns: int) -> Node:
        nodes = self.nodes
        node = nodes.get(mac)
        if node is None:
            if len(nodes) >= self.cfg.max_nodes:
                nodes.popitem(last=False)
            node = nodes[mac] = Node(mac)
        else:
            nodes.move_to_end(mac)
        if port == "A":
            node.seen_a = now_ns
        else:
            node.seen_b = now_ns
        return node

    def _supervision(self, frame: bytes, port: Port, now_ns: int, rct: Rct | None) -> RxVerdict:
        sup = parse_supervision(frame)
        if not isinstance(sup, tuple):
            self.supervision_errors += 1
            self.last_error = f"port {port}: supervision frame: {sup}"
            return RxVerdict(None, rct, supervision=True)
        if sup.mac != self.cfg.mac:
            self._seen(sup.mac, port, now_ns).supervised = True
        return RxVerdict(None, rct, supervision=True)

    # -- send ------------------------------------------------------------------------------

    def send(self, frame: bytes) -> tuple[bytes, bytes]:
        """The frame for LAN A and for LAN B: one SeqNr, the same bytes but the LanId."""
        a = add_rct(frame, self.seq, LAN_A)
        self.seq = next_seq(self.seq)
        b = a[:-4] + bytes((a[-4] ^ ((LAN_A ^ LAN_B) << 4),)) + a[-3:]
        self.counts["lreCntTxA"] += 1
        self.counts["lreCntTxB"] += 1
        return a, b

    def supervision(self, now_ns: int) -> list[tuple[str, bytes]]:
        """The supervision frames due by ``now_ns`` (one per LAN), or none."""
        due = self.next_supervision
        if due is not None and now_ns < due:
            return []
        self.next_supervision = now_ns + self.cfg.life_check_ns
        cfg = self.cfg
        out = []
        for port, lan in (("A", LAN_A), ("B", LAN_B)):
            out.append(
                (port, build_supervision(cfg.mac, self.sup_seq, self.seq, lan,
                                         discard=cfg.discard, vlan_tci=cfg.vlan_tci,
                                         dst_last=cfg.supervision_last))
            )  # fmt: skip
        self.counts["lreCntTxA"] += 1
        self.counts["lreCntTxB"] += 1
        self.seq = next_seq(self.seq)
        self.sup_seq = (self.sup_seq + 1) & 0xFFFF
        return out

    # -- time ------------------------------------------------------------------------------

    def tick(self, now_ns: int) -> list[Alarm]:
        """Age the duplicate table and the node table; alarm silent LANs of DANPs."""
        self.age(now_ns)
        out: list[Alarm] = []
        cfg = self.cfg
        for mac, node in list(self.nodes.items()):
            if now_ns - node.last_seen() > cfg.node_forget_ns:
                del self.nodes[mac]
                continue
            if node.kind != "DANP":
                continue
            assert node.seen_a is not None and node.seen_b is not None
            # one LAN quiet while the other is not: a node quiet on both has gone (or
            # stopped sending), which is not a LAN's fault
            quiet_a = now_ns - node.seen_a > cfg.silent_ns
            quiet_b = now_ns - node.seen_b > cfg.silent_ns
            silent = "A" if quiet_a and not quiet_b else "B" if quiet_b and not quiet_a else None
            if quiet_a and quiet_b:
                silent = node.silent  # unchanged until it is heard again
            if silent != node.silent:
                if silent is not None:
                    s = (now_ns - (node.seen_a if silent == "A" else node.seen_b)) / 1e9
                    text = f"{format_mac(mac)} (DANP) silent on LAN {silent} for {s:.1f} s"
                    out.append(Alarm("lan_silent", silent, mac, text))
                else:
                    text = f"{format_mac(mac)} (DANP) heard again on LAN {node.silent}"
                    out.append(Alarm("lan_back", node.silent or "", mac, text))
                node.silent = silent
        return out

    def next_deadline(self) -> int | None:
        return self.next_supervision

    # -- what a person reads ---------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        """The MIB counters and lreCntNodes."""
        return {**self.counts, "lreCntNodes": len(self.nodes)}

    def node_table(self) -> list[dict[str, object]]:
        return [
            {"mac": format_mac(n.mac), "type": n.kind, "seen_a_ns": n.seen_a,
             "seen_b_ns": n.seen_b, "supervision": n.supervised}
            for n in self.nodes.values()
        ]  # fmt: skip
