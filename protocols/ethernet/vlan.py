"""802.1Q tags as values: what a GOOSE subscriber needs to know about the VLAN a frame came on.

A packet socket on Linux usually never sees the tag bytes: the kernel moves the outer tag
into packet metadata before any packet socket runs (and `PACKET_AUXDATA` hands it back).
Captures and frames we build ourselves carry the tag inline. Both end up as the same
`VlanTag` value so the subscriber's VLAN filter and the A/B logic do not care where the
tag came from.
"""

from __future__ import annotations

from typing import NamedTuple

#: EtherTypes (TPIDs) that introduce a VLAN tag: C-tag (802.1Q) and S-tag (802.1ad).
TPID_CTAG = 0x8100
TPID_STAG = 0x88A8
VLAN_TPIDS: frozenset[int] = frozenset({TPID_CTAG, TPID_STAG})

_ETH_TYPE_OFFSET = 12
_TAG_LEN = 4


class VlanError(ValueError):
    """A VLAN field is out of range or a frame is too short to carry the tag asked for."""


class VlanTag(NamedTuple):
    """One VLAN tag. ``vid`` 0 with a priority is a priority-tagged frame (no VLAN)."""

    vid: int
    pcp: int = 0
    dei: int = 0
    tpid: int = TPID_CTAG

    @property
    def tci(self) -> int:
        """The 16-bit Tag Control Information: PCP(3) DEI(1) VID(12)."""
        return (self.pcp << 13) | (self.dei << 12) | self.vid

    @classmethod
    def from_tci(cls, tci: int, tpid: int = TPID_CTAG) -> VlanTag:
        """Split a TCI as the kernel reports it (tpacket_auxdata.tp_vlan_tci)."""
        if not 0 <= tci <= 0xFFFF:
            raise VlanError(f"TCI {tci:#x} does not fit in 16 bits")
        return cls(vid=tci & 0x0FFF, pcp=tci >> 13, dei=(tci >> 12) & 1, tpid=tpid)

    def validate(self) -> VlanTag:
        """Range-check every field; returns self so it chains."""
        if not 0 <= self.vid <= 0x0FFF:
            raise VlanError(f"VLAN id {self.vid} out of range 0..4095")
        if not 0 <= self.pcp <= 7:
            raise VlanError(f"VLAN priority {self.pcp} out of range 0..7")
        if self.dei not in (0, 1):
            raise VlanError(f"VLAN DEI {self.dei} must be 0 or 1")
        if not 0 <= self.tpid <= 0xFFFF:
            raise VlanError(f"TPID {self.tpid:#x} does not fit in 16 bits")
        return self


def insert_tag(frame: bytes, tag: VlanTag) -> bytes:
    """Return ``frame`` with ``tag`` inserted after the two MAC addresses.

    Used to send a tagged frame (a packet socket transmits the bytes as given) and to
    rebuild wire bytes from a frame whose tag the kernel stripped.
    """
    if len(frame) < _ETH_TYPE_OFFSET + 2:
        raise VlanError(f"frame of {len(frame)} bytes is shorter than an Ethernet header (14)")
    tag.validate()
    head = tag.tpid.to_bytes(2, "big") + tag.tci.to_bytes(2, "big")
    return frame[:_ETH_TYPE_OFFSET] + head + frame[_ETH_TYPE_OFFSET:]


def inline_tag(frame: bytes) -> VlanTag | None:
    """The outer tag still present in the frame's bytes, or None if it is untagged."""
    if len(frame) < _ETH_TYPE_OFFSET + _TAG_LEN + 2:
        return None
    tpid = (frame[12] << 8) | frame[13]
    if tpid not in VLAN_TPIDS:
        return None
    return VlanTag.from_tci((frame[14] << 8) | frame[15], tpid)


def strip_tag(frame: bytes) -> bytes:
    """Return the frame without its outer inline tag (unchanged if untagged)."""
    if inline_tag(frame) is None:
        return frame
    return frame[:_ETH_TYPE_OFFSET] + frame[_ETH_TYPE_OFFSET + _TAG_LEN :]
