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

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
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


@cache
def _tails(port: str) -> dict[bytes, int]:
    """Every last four octets a valid trailer on `port` can end a frame with (LanId and
    LSDUsize, then the suffix), each with the frame length it implies: the short way's
    table, built once per process (an LRE opens and closes it on every crossed cable)."""
    lan = LAN_OF[port] << 12
    return {
        ((lan | size) << 16 | 0x88FB).to_bytes(4, "big"): size + ETH_HLEN
        for size in range(RCT_LEN, 0x1000)
    }


#: the counter an entry leaving the table adds to, by its low three bits: the port of its
#: first copy (4: B) and its copies (1: Unique, 2: Duplicate, 3 or more: Multi)
_TALLY = {
    base + copies: f"lreCnt{kind}{port}"
    for port, base in (("A", 0), ("B", 4))
    for copies, kind in ((1, "Unique"), (2, "Duplicate"), (3, "Multi"))
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
    #: lreCntRxA, lreCntRxB of the frames `receive` took (the hot path keeps its own)
    _rx: list[int] = field(default_factory=lambda: [0, 0])
    #: Unique/Duplicate/Multi by an entry's low three bits (4: first copy on B; 1, 2, 3
    #: copies): one list index when an entry leaves, the names only when asked
    _tally: list[int] = field(default_factory=lambda: [0] * 8)
    #: per port, the last four octets of a PRP frame of this port's LanId -> the length
    #: of the untagged frame they belong to; empty while the short way is closed
    _sizes: dict[str, dict[bytes, int]] = field(default_factory=lambda: {"A": {}, "B": {}})
    _next_age: int = 0
    #: alarms raised by `receive` not yet taken (the shell reports and clears them)
    pending: list[Alarm] = field(default_factory=list)
    #: SeqNr (2 octets) + source MAC (6) -> one int: the first copy's time << 3, 4 if it
    #: came on B, and the copies seen (1, 2, 3 for three or more). Ints and bytes only,
    #: so the garbage collector never walks the table. Its insertion order is the aging
    #: order (a dict keeps it; an entry renewed is taken out and put back at the end)
    table: dict[bytes, int] = field(default_factory=dict)
    #: the node table, least recently heard first (the one evicted when it is full)
    nodes: OrderedDict[bytes, Node] = field(default_factory=OrderedDict)
    #: sources alarmed for a crossed cable, per port (until a right LanId is seen)
    crossed: set[tuple[str, bytes]] = field(default_factory=set)
    supervision_errors: int = 0
    evicted: int = 0
    last_error: str | None = None
    #: called with each alarm the slow path raises (None: they wait in ``pending``)
    on_alarm: Callable[[Alarm], None] | None = None
    #: [0]: True while `deliver` may take its short way
    _fast: list[bool] = field(default_factory=lambda: [False])
    #: [0]: the time of the frame last received (its kernel stamp in the live loop)
    _last: list[int] = field(default_factory=lambda: [0])
    deliver: Callable[[bytes, Port, int], bytes | None] = field(init=False, repr=False)
    #: True if `deliver` would hand the frame up now as a first copy by its short way;
    #: reads only (`_first_copy`), for a judge that must act before the bookkeeping
    first_copy: Callable[[bytes, int], bool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.forget_ns = self.cfg.entry_forget_ns
        self.max_entries = self.cfg.max_entries
        self.deliver, self._hot_rx = self._hot_path()
        self.first_copy = self._first_copy()
        self._refresh()

    @property
    def counts(self) -> dict[str, int]:
        """The MIB counters (a copy)."""
        a, b = self._hot_rx()
        out = {**self._counts, "lreCntRxA": self._rx[0] + a, "lreCntRxB": self._rx[1] + b}
        for i, name in _TALLY.items():
            out[name] = self._tally[i]
        return out

    # -- receive ---------------------------------------------------------------------------

    def _hot_path(
        self,
    ) -> tuple[Callable[[bytes, Port, int], bytes | None], Callable[[], tuple[int, int]]]:
        """`deliver`, the hot path: what goes up for one received frame (trailer stripped),
        or None (a duplicate dropped, a supervision frame taken); and what reads its Rx
        counters. A closure, so that what it uses is in cells, not looked up on ``self``
        per frame, and its counters are ints in cells, not items of a list.

        The common frame (untagged bytes, a trailer whose LanId is this port's and whose
        LSDUsize is the frame's, discard on, no crossed cable watched) costs one
        dictionary lookup of its last four octets (they give the length a frame ending
        so must have), one of (SeqNr, source MAC), and for a first copy its entry. The
        table is not aged here (`age`, once a loop round, does it): an entry met past
        EntryForgetTime ages the table first, so a late copy is a new frame to the
        microsecond, and a full table gives up its oldest entry. Everything else takes
        `receive`, which says why; its alarms go to ``on_alarm``. (Each step is the
        cheapest CPython 3.11 has for it, counted by callgrind: `lab.prp_work`.)"""
        table, last, lre = self.table, self._last, self
        sizes_a, sizes_b = self._sizes["A"], self._sizes["B"]
        forget, bound = self.forget_ns, self.max_entries
        rx_a = rx_b = 0

        def deliver(frame: bytes, port: Port, now_ns: int) -> bytes | None:
            nonlocal rx_a, rx_b
            last[0] = now_ns
            if port == "A":
                if sizes_a.get(frame[-4:]) != len(frame) or frame[13] == 0xFB:
                    return lre._slow(frame, port, now_ns)
                rx_a += 1
                mark = 1
            else:
                if sizes_b.get(frame[-4:]) != len(frame) or frame[13] == 0xFB:
                    return lre._slow(frame, port, now_ns)
                rx_b += 1
                mark = 5
            key = frame[-6:-4] + frame[6:12]
            if key in table:
                entry = table[key]
                if now_ns - (entry >> 3) < forget:
                    if entry & 3 != 3:
                        table[key] = entry + 1
                    return None
                lre._renew(key, now_ns)
            table[key] = (now_ns << 3) | mark
            if len(table) > bound:
                lre._maintain(now_ns)
            return frame[:-6]  # RCT_LEN

        def received() -> tuple[int, int]:
            return rx_a, rx_b

        return deliver, received

    def _first_copy(self) -> Callable[[bytes, int], bool]:
        """`first_copy`: `deliver`'s verdict on a frame whose trailer the caller has
        checked (LanId the port's, LSDUsize the frame's, the suffix: what the tail table
        holds) and which is no supervision frame, without `deliver`'s bookkeeping. True
        exactly when `deliver`, called next with that frame and time, takes its short way
        (open: discard on, no crossed cable watched) and hands the frame up as a first copy
        (no entry of its (SeqNr, source MAC), or one past EntryForgetTime). Why: the trip
        reflex fires on a trailed trip frame before the LRE counts it
        (`Arming.match_trailed`, `controller/shell/reflex_live.py`); a frame this says no
        to (a copy it would drop, the short way closed) takes `deliver` and the engine as
        any other. The trailer is not looked up again: the caller's compare of its four
        octets is that check, and each lookup here costs about as much as the rest."""
        table, fast = self.table, self._fast
        forget = self.forget_ns

        def first_copy(frame: bytes, now_ns: int) -> bool:
            if not fast[0]:
                return False
            entry = table.get(frame[-6:-4] + frame[6:12])
            return entry is None or now_ns - (entry >> 3) >= forget

        return first_copy

    def _renew(self, key: bytes, now_ns: int) -> None:
        """An entry met past its time: the table aged (it and every older one out and
        counted), and it too should the clock have gone back."""
        self._maintain(now_ns)
        self._expire(key)

    def _slow(self, frame: bytes, port: Port, now_ns: int) -> bytes | None:
        """`receive`'s frame, its alarms to ``on_alarm`` when there is one."""
        out = self.receive(frame, port, now_ns).frame
        if self.pending and self.on_alarm is not None:
            for alarm in self.pending:
                self.on_alarm(alarm)
            self.pending.clear()
        return out

    def _maintain(self, now_ns: int) -> None:
        """Forget the entries past EntryForgetTime and any beyond the bound (each
        counted), note when the next one is due. One pass from the oldest (the table's
        insertion order), then the deletions: in a steady stream every first copy
        retires one entry."""
        table, tally = self.table, self._tally
        limit = now_ns - self.forget_ns
        over = len(table) - self.max_entries
        gone: list[bytes] = []
        evicted = 0
        nxt = None
        for key, entry in table.items():
            t = entry >> 3
            if t > limit:
                if over <= 0:
                    nxt = t
                    break
                evicted += 1
            gone.append(key)
            tally[entry & 7] += 1
            over -= 1
        for key in gone:
            del table[key]
        self.evicted += evicted
        self._next_age = (nxt if nxt is not None else now_ns) + self.forget_ns

    @property
    def fast(self) -> bool:
        """True while `deliver` may take its short way: discard on, no crossed cable
        being watched (a right LanId then clears it)."""
        return self._fast[0]

    def _refresh(self) -> None:
        """Open or close the short way: its tail table filled (every LSDUsize a trailer
        can have, per port) or emptied, so `deliver` needs no flag of its own."""
        fast = self.cfg.discard and not self.crossed
        if fast == self._fast[0]:
            return
        self._fast[0] = fast
        for port, sizes in self._sizes.items():
            sizes.clear()
            if fast:
                sizes.update(_tails(port))

    def receive(self, frame: bytes, port: Port, now_ns: int) -> RxVerdict:
        """One frame as it arrived on ``port`` (the kernel's tag already out of its bytes,
        or inline: both give the right LSDUsize), with everything known about it."""
        self._last[0] = now_ns
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
        self._rx[0 if port == "A" else 1] += 1
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
        if entry is not None and now_ns - (entry >> 3) < self.forget_ns:
            if entry & 3 != 3:
                self.table[key] = entry + 1
            return RxVerdict(None, rct, duplicate=True, wrong_lan=wrong, alarm=alarm)
        if entry is not None:
            self._renew(key, now_ns)
        self.table[key] = (now_ns << 3) | (5 if port == "B" else 1)
        if len(self.table) > self.max_entries:
            self._maintain(now_ns)
        return RxVerdict(frame[:-RCT_LEN], rct, wrong_lan=wrong, alarm=alarm)

    def _expire(self, key: bytes) -> None:
        entry = self.table.pop(key, None)
        if entry is not None:
            self._tally[entry & 7] += 1

    @property
    def last_ns(self) -> int:
        """The time of the frame last received (0: none yet)."""
        return self._last[0]

    def age(self, now_ns: int) -> None:
        """Forget the entries older than EntryForgetTime (counting each): once a loop
        round, off the per-frame path; nothing to do (one compare) until one is due."""
        if now_ns >= self._next_age:
            self._maintain(now_ns)

    def settle(self) -> None:
        """Every entry out of the table and counted, as if its time had run out."""
        for entry in self.table.values():
            self._tally[entry & 7] += 1
        self.table.clear()

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
