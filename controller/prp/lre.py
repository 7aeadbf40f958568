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

from goosectl.protocols.ethernet.mac import format_mac
from goosectl.protocols.prp import (
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
from goosectl.protocols.prp.rct import ETH_HLEN

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

#: the counter an entry leaving the table adds to, by the port of its first copy and its
#: copies (1: Unique, 2: Duplicate, 3 or more: Multi)
_VERDICT = {
    p: ("", f"lreCntUnique{p}", f"lreCntDuplicate{p}", f"lreCntMulti{p}") for p in ("A", "B")
}

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
    _counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    #: lreCntRxA/B, kept apart from the other counters: the hot path adds to them
    _rx: dict[str, int] = field(default_factory=lambda: {"A": 0, "B": 0})
    #: per port, frame length -> the last four octets a PRP frame of that length ends with
    _tails: dict[str, dict[int, bytes]] = field(default_factory=lambda: {"A": {}, "B": {}})
    _next_age: int = 0
    #: alarms raised by `receive` not yet taken (the shell reports and clears them)
    pending: list[Alarm] = field(default_factory=list)
    #: SeqNr (2 octets) + source MAC (6) -> one int: the first copy's time << 3, 4 if it
    #: came on B, and the copies seen (1, 2, 3 for three or more). Ints and bytes only,
    #: so the garbage collector never walks the table
    table: dict[bytes, int] = field(default_factory=dict)
    #: the table's keys in the order they came (oldest first): the aging order
    _order: deque[bytes] = field(default_factory=deque)
    #: the node table, least recently heard first (the one evicted when it is full)
    nodes: OrderedDict[bytes, Node] = field(default_factory=OrderedDict)
    #: sources alarmed for a crossed cable, per port (until a right LanId is seen)
    crossed: set[tuple[str, bytes]] = field(default_factory=set)
    supervision_errors: int = 0
    evicted: int = 0
    last_error: str | None = None
    _fast: bool = True

    def __post_init__(self) -> None:
        self.forget_ns = self.cfg.entry_forget_ns
        self.max_entries = self.cfg.max_entries
        self._refresh()

    @property
    def counts(self) -> dict[str, int]:
        """The MIB counters (a copy)."""
        return {**self._counts, "lreCntRxA": self._rx["A"], "lreCntRxB": self._rx["B"]}

    # -- receive ---------------------------------------------------------------------------

    def deliver(self, frame: bytes, port: Port, now_ns: int) -> bytes | None:
        """The hot path: what goes up for one received frame (trailer stripped), or None
        (a duplicate dropped, a supervision frame taken); alarms wait in ``pending``.

        The common frame (untagged bytes, a trailer whose LanId is this port's and whose
        LSDUsize is the frame's, discard on, no crossed cable watched) costs one compare
        of its last four octets with the ones a frame of its length must end with
        (cached per length and port), one dictionary lookup of (SeqNr, source MAC),
        and for a first copy its entry; the table is aged only when its oldest entry
        is due. Everything else takes `receive`, which says why."""
        n = len(frame)
        tail = self._tails[port].get(n)
        if tail is None:
            tail = self._tail(port, n)
        if frame.endswith(tail) and frame[13] != 0xFB and self._fast:
            self._rx[port] += 1
            key = frame[n - 6 : n - 4] + frame[6:12]
            table = self.table
            entry = table.get(key)
            if entry is not None:
                if entry & 3 != 3:
                    table[key] = entry + 1
                return None
            table[key] = (now_ns << 3) | (5 if port == "B" else 1)
            self._order.append(key)
            if now_ns >= self._next_age or len(table) > self.max_entries:
                self._maintain(now_ns)
            return frame[:-RCT_LEN]
        return self.receive(frame, port, now_ns).frame

    def _tail(self, port: Port, n: int) -> bytes:
        """The last four octets a PRP frame of ``n`` octets (no inline tag) received on
        ``port`` ends with; for a length no trailer can have, a value longer than the
        frame (never matched)."""
        size = n - ETH_HLEN
        if RCT_LEN <= size <= 0x0FFF:
            tail = ((LAN_OF[port] << 12) | size).to_bytes(2, "big") + b"\x88\xfb"
        else:
            tail = bytes(n + 1)
        if len(self._tails[port]) < 8192:
            self._tails[port][n] = tail
        return tail

    def _maintain(self, now_ns: int) -> None:
        """Forget the entries past EntryForgetTime and any beyond the bound (each
        counted), note when the next one is due. One loop, no call per entry: in a steady
        stream every first copy retires one entry."""
        order, table, counts = self._order, self.table, self._counts
        limit = now_ns - self.forget_ns
        bound = self.max_entries
        while order:
            entry = table[order[0]]
            t = entry >> 3
            if t > limit and len(table) <= bound:
                break
            del table[order.popleft()]
            counts[_VERDICT["B" if entry & 4 else "A"][entry & 3]] += 1
            if t > limit:
                self.evicted += 1
        self._next_age = (
            (table[order[0]] >> 3) + self.forget_ns if order else now_ns + self.forget_ns
        )

    @property
    def fast(self) -> bool:
        """True while `deliver` may take its short way: discard on, no crossed cable
        being watched (a right LanId then clears it)."""
        return self._fast

    def _refresh(self) -> None:
        self._fast = self.cfg.discard and not self.crossed

    def receive(self, frame: bytes, port: Port, now_ns: int) -> RxVerdict:
        """One frame as it arrived on ``port`` (the kernel's tag already out of its bytes,
        or inline: both give the right LSDUsize), with everything known about it."""
        rct = read_rct(frame)
        if rct is None:
            if len(frame) > 13 and frame[12] == 0x88 and frame[13] == 0xFB:
                return self._supervision(frame, port, now_ns, None)
            return RxVerdict(frame, None)
        why = check_rct(frame, rct)
        counts = self._counts
        if why is not None:
            counts["lreCntErrors" + port] += 1
            self.last_error = f"port {port}: {why}"
            return RxVerdict(frame, None)
        self._rx[port] += 1
        src = frame[6:12]
        alarm = None
        wrong = rct.lan != LAN_OF[port]
        if wrong:
            counts["lreCntErrWrongLan" + port] += 1
            if (port, src) not in self.crossed:
                self.crossed.add((port, src))
                self._refresh()
                other = "B" if port == "A" else "A"
                alarm = Alarm(
                    "crossed_cable", port, src,
                    f"frames of {format_mac(src)} with LanId {other} arrive on port {port}: "
                    f"the LAN A and LAN B cables are likely crossed",
                )  # fmt: skip
                self.pending.append(alarm)
        elif self.crossed:
            self.crossed.discard((port, src))
            self._refresh()
        if (frame[12] == 0x88 and frame[13] == 0xFB) or (
            frame[12] == 0x81 and frame[16] == 0x88 and frame[17] == 0xFB
        ):
            return self._supervision(frame, port, now_ns, rct)
        if not self.cfg.discard:
            return RxVerdict(frame[:-RCT_LEN], rct, wrong_lan=wrong, alarm=alarm)
        n = len(frame)
        key = frame[n - 6 : n - 4] + src
        entry = self.table.get(key)
        if entry is not None:
            if entry & 3 != 3:
                self.table[key] = entry + 1
            return RxVerdict(None, rct, duplicate=True, wrong_lan=wrong, alarm=alarm)
        self.table[key] = (now_ns << 3) | (5 if port == "B" else 1)
        self._order.append(key)
        if now_ns >= self._next_age or len(self.table) > self.max_entries:
            self._maintain(now_ns)
        return RxVerdict(frame[:-RCT_LEN], rct, wrong_lan=wrong, alarm=alarm)

    def _expire(self, key: bytes) -> None:
        entry = self.table.pop(key, None)
        if entry is not None:
            self._counts[_VERDICT["B" if entry & 4 else "A"][entry & 3]] += 1

    def age(self, now_ns: int) -> None:
        """Forget the entries older than EntryForgetTime (counting each)."""
        self._maintain(now_ns)

    def settle(self) -> None:
        """Every entry out of the table and counted, as if its time had run out."""
        while self._order:
            self._expire(self._order.popleft())

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
        counts = self._counts
        counts["lreCntTxA"] += 1
        counts["lreCntTxB"] += 1
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
        self._counts["lreCntTxA"] += 1
        self._counts["lreCntTxB"] += 1
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
