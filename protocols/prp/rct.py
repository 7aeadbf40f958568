"""The PRP Redundancy Control Trailer (IEC 62439-3 Clause 4, PRP-1): bytes only.

A doubly attached node sends every frame on LAN A and LAN B with six octets at its very
end, before the FCS: ``SeqNr(16) | LanId(4) | LSDUsize(12) | PRPsuffix(16) = 0x88FB``,
big-endian. LanId is 0xA on LAN A and 0xB on LAN B. LSDUsize counts the octets after
the Ethernet header (destination, source, EtherType; an 802.1Q tag is not counted) up to
and including the trailer, so a switch that strips the tag leaves it right. A short frame
is padded to 60 octets (64 tagged), both without FCS, before the trailer is appended.

Why every field is checked before a frame is called PRP: the trailer sits after the
payload, where any frame may happen to carry 0x88FB (a GOOSE allData ending in those two
octets, Ethernet padding of some other protocol). Only a frame whose suffix, LanId and
LSDUsize all check is PRP; anything else is a SAN frame, left untouched. A frame that has
the suffix but fails another check is reported (`check_rct` says why), for the MIB's
error counter.

The trailer is found from the end of the frame, never from a payload's own length
field; ``payload_end`` (where a payload that states its length ends, e.g. GOOSE's Length)
lets the caller refuse a trailer that would lie inside the payload.
"""

from __future__ import annotations

from typing import NamedTuple

SUFFIX = 0x88FB
LAN_A = 0xA
LAN_B = 0xB
LAN_IDS = {"A": LAN_A, "B": LAN_B}
LAN_NAMES = {LAN_A: "A", LAN_B: "B"}
RCT_LEN = 6
ETH_HLEN = 14
VLAN_LEN = 4
#: shortest frame without FCS before the trailer is appended (untagged, tagged)
MIN_UNTAGGED = 60
MIN_TAGGED = 64
SEQ_MOD = 1 << 16
_VLAN_TPIDS = (0x8100, 0x88A8)


class Rct(NamedTuple):
    """A trailer's fields: ``seq`` 0..65535, ``lan`` 0xA or 0xB, ``lsdu_size`` 0..4095."""

    seq: int
    lan: int
    lsdu_size: int

    @property
    def lan_name(self) -> str:
        return LAN_NAMES.get(self.lan, f"{self.lan:#x}")


def tagged(frame: bytes | bytearray | memoryview) -> bool:
    """True when the frame's bytes carry an inline 802.1Q/802.1ad tag."""
    return len(frame) >= 18 and ((frame[12] << 8) | frame[13]) in _VLAN_TPIDS


def lsdu_size(frame_len: int, is_tagged: bool) -> int:
    """LSDUsize of a frame of ``frame_len`` octets (without FCS, trailer included)."""
    return frame_len - ETH_HLEN - (VLAN_LEN if is_tagged else 0)


def read_rct(frame: bytes | bytearray | memoryview) -> Rct | None:
    """The last six octets as a trailer when they end with the suffix (unchecked
    otherwise); None when the suffix is not there or the frame is too short."""
    n = len(frame)
    if n < ETH_HLEN + RCT_LEN or frame[n - 2] != 0x88 or frame[n - 1] != 0xFB:
        return None
    word = (frame[n - 4] << 8) | frame[n - 3]
    return Rct((frame[n - 6] << 8) | frame[n - 5], word >> 12, word & 0x0FFF)


def check_rct(
    frame: bytes | bytearray | memoryview, rct: Rct, payload_end: int | None = None
) -> str | None:
    """Why a trailer read by `read_rct` is not a PRP trailer, or None when every field
    checks: LanId A or B, LSDUsize equal to the frame's, and (``payload_end``) not
    inside the payload."""
    if rct.lan not in LAN_NAMES:
        return f"LanId {rct.lan:#x} is neither A (0xa) nor B (0xb)"
    want = lsdu_size(len(frame), tagged(frame))
    if rct.lsdu_size != want:
        return f"LSDUsize {rct.lsdu_size}, the frame's is {want}"
    if payload_end is not None and len(frame) - RCT_LEN < payload_end:
        return "the trailer would lie inside the payload"
    return None


def parse_rct(frame: bytes | bytearray | memoryview, payload_end: int | None = None) -> Rct | None:
    """The frame's PRP trailer when every field checks, else None (a SAN frame)."""
    rct = read_rct(frame)
    if rct is None or check_rct(frame, rct, payload_end) is not None:
        return None
    return rct


def strip_rct(frame: bytes) -> bytes:
    """The frame without its last six octets (call only for a checked trailer); the
    padding before the trailer stays, as the payload's own length says where it ends."""
    return frame[:-RCT_LEN]


def pad(frame: bytes) -> bytes:
    """Padded to the minimum size (60 octets, 64 tagged) the trailer is appended to."""
    need = (MIN_TAGGED if tagged(frame) else MIN_UNTAGGED) - len(frame)
    return frame + bytes(need) if need > 0 else frame


def encode_rct(seq: int, lan: int, size: int) -> bytes:
    if not 0 <= seq < SEQ_MOD:
        raise ValueError(f"SeqNr {seq} is not 0..65535")
    if lan not in LAN_NAMES:
        raise ValueError(f"LanId {lan:#x} is neither 0xa nor 0xb")
    if not 0 <= size <= 0x0FFF:
        raise ValueError(f"LSDUsize {size} does not fit 12 bits")
    return bytes(
        (seq >> 8, seq & 0xFF, (lan << 4) | (size >> 8), size & 0xFF, SUFFIX >> 8, SUFFIX & 0xFF)
    )


def add_rct(frame: bytes, seq: int, lan: int) -> bytes:
    """``frame`` padded and with its trailer appended (SeqNr ``seq``, LanId ``lan``)."""
    body = pad(frame)
    return body + encode_rct(seq, lan, lsdu_size(len(body) + RCT_LEN, tagged(body)))


def next_seq(seq: int) -> int:
    """The SeqNr after ``seq`` (wraps from 65535 to 0)."""
    return (seq + 1) % SEQ_MOD
