"""IPv4/UDP in Ethernet, as far as R-GOOSE in a capture needs: find the datagram a frame
carries (`datagram`) and build one (`frame`, for the pcaps goosectl writes and tests).

Bytes only. IPv6 and fragmented datagrams are not read (`datagram` returns None for them,
like for any frame that is not IPv4/UDP): an SPDU fits one unfragmented datagram.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

ETH_IPV4: Final = 0x0800
ETH_VLAN: Final = 0x8100
PROTO_UDP: Final = 17


@dataclass(frozen=True, slots=True)
class Datagram:
    """One UDP datagram: addresses (dotted quads), ports, payload and its offset in the
    frame (so errors in the payload can name the frame's offset)."""

    src: str
    dst: str
    sport: int
    dport: int
    payload: bytes
    offset: int


def _quad(b: bytes) -> str:
    return ".".join(str(x) for x in b)


def datagram(buf: bytes) -> Datagram | None:
    """The UDP datagram in an Ethernet frame (802.1Q tag allowed), or None when the frame
    is not unfragmented IPv4/UDP or is cut short."""
    off = 12
    if len(buf) >= 18 and int.from_bytes(buf[12:14], "big") == ETH_VLAN:
        off = 16
    if len(buf) < off + 2 + 20 or int.from_bytes(buf[off : off + 2], "big") != ETH_IPV4:
        return None
    ip = off + 2
    ihl = (buf[ip] & 0x0F) * 4
    if buf[ip] >> 4 != 4 or ihl < 20 or buf[ip + 9] != PROTO_UDP:
        return None
    if int.from_bytes(buf[ip + 6 : ip + 8], "big") & 0x3FFF:  # MF flag or an offset
        return None
    total = int.from_bytes(buf[ip + 2 : ip + 4], "big")
    udp = ip + ihl
    if total < ihl + 8 or ip + total > len(buf):
        return None
    ulen = int.from_bytes(buf[udp + 4 : udp + 6], "big")
    if ulen < 8 or udp + ulen > ip + total:
        return None
    return Datagram(
        _quad(buf[ip + 12 : ip + 16]),
        _quad(buf[ip + 16 : ip + 20]),
        int.from_bytes(buf[udp : udp + 2], "big"),
        int.from_bytes(buf[udp + 2 : udp + 4], "big"),
        buf[udp + 8 : udp + ulen],
        udp + 8,
    )


def _checksum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(int.from_bytes(b[i : i + 2], "big") for i in range(0, len(b), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(
    payload: bytes,
    *,
    src: str,
    dst: str,
    sport: int,
    dport: int,
    src_mac: bytes = b"\x02\0\0\0\0\x01",
    dst_mac: bytes = b"\x02\0\0\0\0\x02",
    ttl: int = 1,
) -> bytes:
    """An Ethernet/IPv4/UDP frame carrying `payload` (checksums filled in)."""
    s, d = bytes(int(x) for x in src.split(".")), bytes(int(x) for x in dst.split("."))
    ulen = 8 + len(payload)
    pseudo = s + d + bytes((0, PROTO_UDP)) + ulen.to_bytes(2, "big")
    udp = sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + ulen.to_bytes(2, "big")
    csum = _checksum(pseudo + udp + b"\0\0" + payload) or 0xFFFF
    ip = (
        bytes((0x45, 0))
        + (20 + ulen).to_bytes(2, "big")
        + b"\0\0\x40\0"
        + bytes((ttl, PROTO_UDP))
        + b"\0\0"
        + s
        + d
    )
    ip = ip[:10] + _checksum(ip).to_bytes(2, "big") + ip[12:]
    return (
        dst_mac
        + src_mac
        + ETH_IPV4.to_bytes(2, "big")
        + ip
        + udp
        + csum.to_bytes(2, "big")
        + payload
    )
