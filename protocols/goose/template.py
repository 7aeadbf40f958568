"""Publisher fast path: a frame prebuilt once per control block, patched per send.

A retransmission changes only sqNum, timeAllowedtoLive and sometimes t; a new state also
changes stNum and allData. Everything else (MACs, VLAN, APPID, gocbRef, datSet, goID,
simulation, confRev, ndsCom, numDatSetEntries) is fixed by configuration, so it is
encoded once here and `build` only joins a handful of byte strings. The output is
byte-identical to `encode_frame` of the equivalent GooseFrame (tested).
"""

from __future__ import annotations

from goosectl.protocols.goose.ber import encode_length, encode_signed
from goosectl.protocols.goose.data import Data
from goosectl.protocols.goose.datacodec import encode_all_data
from goosectl.protocols.goose.errors import BadLength, BadValue, TypeMismatch
from goosectl.protocols.goose.frame import (
    GooseFrame,
    _u16,
    encode_pdu_fields,
    ethernet_header,
)
from goosectl.protocols.goose.utctime import UtcTime

_U32_MAX = 0xFFFFFFFF


def _int_tlv(tag: int, value: int, name: str) -> bytes:
    if type(value) is not int or not 0 <= value <= _U32_MAX:
        raise BadValue(f"{value!r} is not an integer in 0..2**32-1", path=name)
    if value < 0x80:
        return bytes((tag, 1, value))
    body = encode_signed(value)
    return bytes((tag, len(body))) + body


class FrameTemplate:
    """Prebuilt frame for one control block; `build` returns the bytes to send.

    ``config`` is a GooseFrame whose per-send fields (stNum, sqNum, TAL, t, allData) are
    ignored; its numDatSetEntries is what every built frame announces.
    """

    __slots__ = ("_eth", "_gocb", "_middle", "_reserved", "_sim", "_tail", "num_entries")

    def __init__(self, config: GooseFrame) -> None:
        if config.unknown or config.security or config.trailer:
            raise TypeMismatch("templates do not carry unknown fields, security or trailer")
        self._eth = ethernet_header(config)
        self._reserved = _u16(config.reserved1, "reserved1") + _u16(config.reserved2, "reserved2")
        self._gocb, self._middle, self._sim, self._tail = encode_pdu_fields(config)
        self.num_entries = config.num_dat_set_entries

    def build(
        self, st_num: int, sq_num: int, tal_ms: int, t: UtcTime, all_data_bytes: bytes
    ) -> bytes:
        """One frame. ``all_data_bytes`` is allData content (see `encode_values`)."""
        if type(t) is not UtcTime:
            raise TypeMismatch(f"t must be a UtcTime, got {type(t).__name__}", path="t")
        n = len(all_data_bytes)
        ad_head = bytes((0xAB, n)) if n < 0x80 else b"\xab" + encode_length(n)
        pdu = b"".join(
            (
                self._gocb,
                _int_tlv(0x81, tal_ms, "timeAllowedtoLive"),
                self._middle,
                b"\x84\x08",
                t.to_bytes(),
                _int_tlv(0x85, st_num, "stNum"),
                _int_tlv(0x86, sq_num, "sqNum"),
                self._sim,
                self._tail,
                ad_head,
            )
        )
        body_len = len(pdu) + n
        pdu_head = b"\x61" + encode_length(body_len)
        length = 8 + len(pdu_head) + body_len
        if length > 0xFFFF:
            raise BadLength(f"frame needs Length {length} > 65535", path="length")
        return b"".join(
            (self._eth, length.to_bytes(2, "big"), self._reserved, pdu_head, pdu, all_data_bytes)
        )

    @staticmethod
    def encode_values(values: tuple[Data, ...] | list[Data]) -> bytes:
        """allData content for `build`; encode once per state change, reuse per repeat."""
        return encode_all_data(values)
