"""PRP on a live controller: goosectl as the node's LRE on interfaces A and B (`--prp
native`), or on the kernel's PRP device (`--prp kernel`).

Native: the pure LRE (`controller.prp.Lre`) sits between `LiveGoose`'s sockets and the
hub. Each received GOOSE frame passes `receive` first: a valid trailer is stripped and a
duplicate dropped there, so the hub sees each frame once, as the kernel's PRP device would
give it; a frame without a trailer (a SAN's) goes up as it came, to the GOOSE-level A/B
merge. Each frame sent gets its trailer in `outgoing`, per side: the same SeqNr on A and
B (the frame is encoded once; the two copies differ in the LanId nibble). Supervision
frames come on a socket of their own per side (EtherType 0x88FB, the supervision group
joined) and go out every LifeCheckInterval from `round`, which also ages the tables and
reports the LRE's alarms (crossed cable, a DANP silent on one LAN) through `on_alarm`.

Kernel: nothing to do per frame (the device adds and strips the trailers and discards the
duplicates); `check_kernel_device` makes sure the interface is one.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from goosectl.controller.config.prp import PrpCfg
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.prp import Alarm, Lre, LreConfig
from goosectl.controller.prp.lre import Port
from goosectl.controller.shell.goose_live import LiveGoose
from goosectl.protocols.ethernet.rawsock import RawSocket, RawSocketError
from goosectl.protocols.prp import ETHERTYPE, LAN_IDS, Rct, destination, parse_rct

#: how many sent frames keep their pair of trailed copies (a side held by a full queue
#: and sent later still gets the SeqNr its other copy went out with)
_PAIRS = 64
#: how far behind the clock the duplicate table's aging may stay when no frame comes
ROUND_LAG_NS = 2_000_000_000


class PrpLive:
    """The native LRE of a `LiveGoose`; `attach` installs it."""

    def __init__(self, live: LiveGoose, cfg: PrpCfg) -> None:
        self.live = live
        self.cfg = cfg
        mac = live.src_mac or bytes(6)
        tci = None if cfg.supervision_vlan is None else (7 << 13) | cfg.supervision_vlan
        self.lre = Lre(
            LreConfig(
                mac=mac,
                discard=cfg.duplicate == "discard",
                silent_ns=cfg.silent_ms * 1_000_000,
                supervision_last=cfg.supervision_address,
                vlan_tci=tci,
            )
        )
        self.sides = {sock: side for side, sock in live.socks.items()}
        #: the frame last received and its side, as it came (trailer on), for the reports
        self.last: bytes | None = None
        self.last_side: str | None = None
        self.alarms: list[Alarm] = []
        self.on_alarm: Callable[[Alarm], None] | None = None
        self._pairs: OrderedDict[int, tuple[SendFrame, bytes, bytes]] = OrderedDict()
        self.sup_socks: dict[str, RawSocket] = {}
        group = destination(cfg.supervision_address)
        try:
            for side, sock in live.socks.items():
                s = RawSocket(sock.iface, groups=[group], ethertype=ETHERTYPE, timestamps=False)
                self.sup_socks[side] = s
                live.add_reader(s.fileno(), self._reader(side), "goose", f"prp supervision {side}")
        except BaseException:
            self.close()
            raise
        self.send_errors = 0
        #: what the live loop calls for every frame received: the frame for the hub, or
        #: None (a duplicate, counted by the LRE); the LRE's own hot path, no wrapper
        self.receive: Callable[[bytes, Port, int], bytes | None] = self.lre.deliver
        self.lre.on_alarm = self._alarm

    # -- the hooks LiveGoose calls ---------------------------------------------------------

    def track(self) -> None:
        """Keep the frame last received and its side (`last_trailer`, for `listen`'s
        frame lines): `receive` becomes a wrapper of the LRE's hot path. Not for `run`,
        whose frames go up through the bare hot path."""
        deliver = self.lre.deliver

        def receive(frame: bytes, side: Port, now_ns: int) -> bytes | None:
            self.last = frame
            self.last_side = side
            return deliver(frame, side, now_ns)

        self.receive = receive

    def last_trailer(self) -> tuple[Rct, bool] | None:
        """The trailer of the frame last received and whether its LanId was the other
        LAN's (for the reports; computed only when asked)."""
        if self.last is None:
            return None
        rct = parse_rct(self.last)
        if rct is None:
            return None
        return rct, rct.lan != LAN_IDS.get(self.last_side or "", rct.lan)

    def outgoing(self, e: SendFrame, sock: RawSocket) -> bytes:
        """The bytes of ``e`` for the side of ``sock``: one SeqNr for both copies."""
        key = id(e)
        pair = self._pairs.get(key)
        if pair is None or pair[0] is not e:
            a, b = self.lre.send(e.data)
            pair = (e, a, b)
            self._pairs[key] = pair
            if len(self._pairs) > _PAIRS:
                self._pairs.popitem(last=False)
        return pair[1] if self.sides.get(sock) == "A" else pair[2]

    def round(self, now_ns: int) -> None:
        """Once a loop round: the duplicate table aged (off the per-frame path: a compare
        until an entry is due), supervision frames when due, the node table, alarms. The
        table ages by the frames' own (kernel) time, the last one's, so a loop running
        behind the wire does not forget a frame whose other copy waits in the other ring;
        by the clock less ``ROUND_LAG_NS`` when that is later (no frames for a while)."""
        self.lre.age(max(self.lre.last_ns, now_ns - ROUND_LAG_NS))
        due = self.lre.next_deadline()
        if due is None or now_ns >= due:
            for side, frame in self.lre.supervision(now_ns):
                sock = self.live.socks.get(side)
                if sock is None or side in self.live.down:
                    continue
                try:
                    sock.send(frame)
                except (RawSocketError, OSError):
                    self.send_errors += 1
            for alarm in self.lre.tick(now_ns):
                self._alarm(alarm)

    # -- the rest --------------------------------------------------------------------------

    def _reader(self, side: str) -> Callable[[], None]:
        return lambda: self._supervision_in(side)

    def _supervision_in(self, side: str) -> None:
        sock = self.sup_socks[side]
        try:
            batch = sock.recv_batch(64)
        except RawSocketError:
            return
        now = time.monotonic_ns()
        for rx in batch:
            self.lre.receive(rx.frame, "A" if side == "A" else "B", now)
        for alarm in self.lre.pending:
            self._alarm(alarm)
        self.lre.pending.clear()

    def _alarm(self, alarm: Alarm) -> None:
        self.alarms.append(alarm)
        if len(self.alarms) > 1000:
            del self.alarms[:500]
        if self.on_alarm is not None:
            self.on_alarm(alarm)

    def status(self) -> dict[str, Any]:
        """What `status` and the reports show: mode, counters, node table, alarms."""
        return {
            "mode": "native",
            "duplicate": self.cfg.duplicate,
            "counters": self.lre.counters(),
            "nodes": self.lre.node_table(),
            "supervision_errors": self.lre.supervision_errors,
            "evicted": self.lre.evicted,
            "last_error": self.lre.last_error,
            "alarms": [alarm_json(a) for a in self.alarms[-20:]],
        }

    def close(self) -> None:
        for s in self.sup_socks.values():
            with contextlib.suppress(KeyError, ValueError):
                self.live.remove_reader(s.fileno())
            s.close()
        self.sup_socks = {}


def alarm_json(a: Alarm) -> dict[str, Any]:
    return {"event": "prp_alarm", "kind": a.kind, "port": a.port,
            "mac": ":".join(f"{b:02x}" for b in a.mac), "text": a.text}  # fmt: skip


def check_kernel_device(iface: str) -> str | None:
    """None when ``iface`` is a kernel PRP device (hsr link, protocol 1), else why not."""
    try:
        out = subprocess.run(
            ["ip", "-d", "-j", "link", "show", "dev", iface],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot ask `ip` about {iface}: {exc}"
    try:
        info = json.loads(out.stdout or "[]")[0].get("linkinfo", {})
    except (ValueError, IndexError, AttributeError):
        return f"{iface}: no such interface"
    if info.get("info_kind") != "hsr" or info.get("info_data", {}).get("proto") not in (1, "1"):
        return (
            f"{iface} is not a kernel PRP device; create one with `ip link add prp0 type hsr "
            f"slave1 A slave2 B supervision 0 proto 1` (Linux 5.9 or later, CONFIG_HSR)"
        )
    return None


def attach(live: LiveGoose, cfg: PrpCfg) -> PrpLive | None:
    """Install the native LRE on ``live`` (``cfg.mode`` native), or nothing."""
    if cfg.mode != "native":
        return None
    prp = PrpLive(live, cfg)
    live.prp = prp
    live.hub.bank.merge_sides(False)  # the LRE keeps the first copy; GOOSE sees one LAN
    live.on_round.append(prp.round)
    reflex = getattr(live.hub, "reflex", None)  # a bay's (`BayGooseCore`), or none
    if reflex is not None:
        # the trip reflex judges a trailed trip frame before the LRE does its bookkeeping
        # (`LiveReflex.before_trailed`, docs/reflex.md)
        reflex.first_copy = prp.lre.first_copy
        live.before_lre = reflex.before_trailed
    return prp
