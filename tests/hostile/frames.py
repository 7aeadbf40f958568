"""Hostile inputs built from canonical ones: frames whose header field content is exactly
what an attack tool writes (goosePdu and Length fixed around it), and pcapng captures with
any timestamps (an `if_tsoffset` puts them before 1970 or after 2106)."""

from __future__ import annotations

import struct

from goosectl.protocols.goose import Boolean, GooseFrame, Unsigned, UtcTime, encode_frame
from goosectl.protocols.goose.ber import encode_length, read_length

GOCB = "IED1LD0/LLN0$GO$gcb"
BASE = GooseFrame(
    gocb_ref=GOCB,
    dat_set="IED1LD0/LLN0$ds",
    go_id="IED1",
    all_data=(Boolean(True), Unsigned(5)),
    st_num=3,
    sq_num=7,
    conf_rev=1,
    time_allowed_to_live=2000,
    t=UtcTime(1_700_000_000),
    appid=0x3001,
    src=bytes.fromhex("001122334455"),
)

#: goosePdu tags of the unsigned header fields
TAG = {"timeAllowedtoLive": 0x81, "stNum": 0x85, "sqNum": 0x86, "confRev": 0x88}


def with_content(raw: bytes, **contents: bytes) -> bytes:
    """`raw` (an untagged canonical frame) with the named fields' content replaced."""
    want = {TAG[name]: value for name, value in contents.items()}
    off = 14
    pos = off + 8
    assert raw[pos] == 0x61
    pdu_len, pos = read_length(raw, pos + 1, len(raw))
    end = pos + pdu_len
    body = b""
    while pos < end:
        tag = raw[pos]
        ln, start = read_length(raw, pos + 1, end)
        content = want.pop(tag, raw[start : start + ln])
        body += bytes((tag,)) + encode_length(len(content)) + content
        pos = start + ln
    assert not want, f"fields not found: {want}"
    pdu = b"\x61" + encode_length(len(body)) + body
    return raw[: off + 2] + (8 + len(pdu)).to_bytes(2, "big") + raw[off + 4 : off + 8] + pdu


def hostile(frame: GooseFrame = BASE, **contents: bytes) -> bytes:
    return with_content(encode_frame(frame), **contents)


def pcapng(records: list[tuple[int, bytes]], tsoffset_s: int = 0) -> bytes:
    """A little-endian pcapng: one Ethernet interface with nanosecond timestamps and
    `if_tsoffset` seconds (negative: times before 1970), one EPB per (ts_ns, frame);
    ts_ns is the 64-bit unsigned count the EPB carries."""

    def block(btype: int, body: bytes) -> bytes:
        body += bytes(-len(body) % 4)
        n = len(body) + 12
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)

    def opt(code: int, value: bytes) -> bytes:
        return struct.pack("<HH", code, len(value)) + value + bytes(-len(value) % 4)

    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    opts = opt(9, b"\x09") + opt(14, struct.pack("<q", tsoffset_s)) + opt(0, b"")
    out += block(1, struct.pack("<HHI", 1, 0, 65535) + opts)
    for ts, data in records:
        hi, lo = ts >> 32, ts & 0xFFFFFFFF
        out += block(6, struct.pack("<IIIII", 0, hi, lo, len(data), len(data)) + data)
    return out
