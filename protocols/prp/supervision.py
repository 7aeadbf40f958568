"""PRP supervision frames (IEC 62439-3 Clause 4, PRP-1): bytes only.

Every doubly attached node sends one on each LAN every LifeCheckInterval (2 s), so its
peers can keep a node table and tell a LAN that went quiet. Layout (after the Ethernet
header, which goes to ``01:15:4E:00:01:XX`` from the node's MAC, optionally tagged, with
EtherType 0x88FB): ``SupPath(4) = 0 | SupVersion(12) = 1``, ``SupSequenceNumber(16)``,
TLV1 (type 20 when the node discards duplicates, 21 when it accepts them; length 6; the
node's MAC), optionally TLV2 (type 30, a RedBox's MAC), TLV0 (type 0, length 0), padding
to 60 octets (64 tagged), then the trailer (`protocols.prp.rct`), whose LSDUsize is 52.

A frame is taken as supervision only when every part checks (the receiver rules of
RedBox implementations): EtherType, version, TLV1 type and length with a unicast MAC,
TLV2 if present, TLV0 present; `parse_supervision` returns why not otherwise.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from goosectl.protocols.prp.rct import add_rct, tagged

ETHERTYPE = 0x88FB
DST_PREFIX = bytes.fromhex("01154e0001")
VERSION = 1
TLV_DD = 20  # duplicate discard
TLV_DA = 21  # duplicate accept
TLV_HSR = 23
TLV_REDBOX = 30
TLV_END = 0
#: LifeCheckInterval, NodeForgetTime (IEC 62439-3 Table 8)
LIFE_CHECK_NS = 2_000_000_000
NODE_FORGET_NS = 60_000_000_000


class Supervision(NamedTuple):
    """A supervision frame's content."""

    src: bytes
    seq: int  # SupSequenceNumber
    mac: bytes  # TLV1's MAC: the node's
    discard: bool  # TLV 20 (True) or 21
    redbox: bytes | None = None
    version: int = VERSION


def destination(last: int = 0) -> bytes:
    """The multicast destination ``01:15:4E:00:01:XX``."""
    if not 0 <= last <= 0xFF:
        raise ValueError(f"supervision address byte {last} is not 0..255")
    return DST_PREFIX + bytes((last,))


def build_supervision(
    mac: bytes,
    sup_seq: int,
    rct_seq: int,
    lan: int,
    *,
    discard: bool = True,
    vlan_tci: int | None = None,
    dst_last: int = 0,
) -> bytes:
    """One supervision frame for LAN ``lan``, trailer included."""
    if len(mac) != 6:
        raise ValueError("a MAC address is 6 octets")
    head = destination(dst_last) + mac
    if vlan_tci is not None:
        head += struct.pack(">HH", 0x8100, vlan_tci)
    body = struct.pack(">HHH", ETHERTYPE, VERSION, sup_seq & 0xFFFF)
    body += bytes((TLV_DD if discard else TLV_DA, 6)) + mac + bytes((TLV_END, 0))
    return add_rct(head + body, rct_seq, lan)


def parse_supervision(frame: bytes) -> Supervision | str | None:
    """The supervision content, a reason (str) when it is a supervision frame that does
    not check, or None when it is not one at all (other EtherType or destination)."""
    off = 16 if tagged(frame) else 12
    if len(frame) < off + 2 or frame[off : off + 2] != b"\x88\xfb":
        return None
    if frame[:5] != DST_PREFIX:
        return "EtherType 0x88FB to a destination outside 01:15:4E:00:01:XX"
    p = off + 2
    if len(frame) < p + 4 + 8 + 2:
        return f"too short ({len(frame)} octets)"
    path_ver, seq = struct.unpack_from(">HH", frame, p)
    if path_ver >> 12 != 0 or path_ver & 0x0FFF != VERSION:
        return f"SupPath/SupVersion {path_ver:#06x} is not PRP-1 (0, 1)"
    p += 4
    t, n = frame[p], frame[p + 1]
    if t not in (TLV_DD, TLV_DA) or n != 6:
        return f"TLV1 type {t} length {n} (want 20 or 21, length 6)"
    mac = frame[p + 2 : p + 8]
    if mac[0] & 1:
        return "TLV1's MAC is not a unicast address"
    p += 8
    redbox = None
    if frame[p] == TLV_REDBOX:
        if frame[p + 1] != 6 or len(frame) < p + 10:
            return "TLV2 (RedBox) length is not 6"
        redbox = frame[p + 2 : p + 8]
        p += 8
    if len(frame) < p + 2 or frame[p] != TLV_END or frame[p + 1] != 0:
        return "no TLV0 after the node's TLVs"
    return Supervision(frame[6:12], seq, mac, t == TLV_DD, redbox)
