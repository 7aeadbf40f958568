"""Hostile frames built from canonical ones: a header field's content octets replaced by
exactly what an attack tool writes, the goosePdu and Length fixed around it."""

from __future__ import annotations

from protocols.goose import Boolean, GooseFrame, Unsigned, UtcTime, encode_frame
from protocols.goose.ber import encode_length, read_length

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
