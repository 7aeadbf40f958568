"""Rewrite the demo's scenario capture the way the issue's acceptance table does: the
protection trip stream from 5 s on, one field at a time, with the codec (decode, change,
encode), so every rewritten frame is a well-formed GOOSE frame."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from goosectl.protocols.ethernet.pcap import PcapWriter, read_capture
from goosectl.protocols.goose import BitString, GooseFrame, Quality, decode_frame, encode_frame

S = 1_000_000_000
PROT_APPID = 0x1001
CILO_APPID = 0x1002

Rewrite = Callable[[GooseFrame], GooseFrame]


def _quality(frame: GooseFrame, q: Quality) -> GooseFrame:
    data = list(frame.all_data)
    data[1] = q.to_bitstring()
    return dataclasses.replace(frame, all_data=tuple(data))


#: the rows of the acceptance table: name -> how a protection frame is rewritten
ROWS: dict[str, Rewrite] = {
    "simulation": lambda f: dataclasses.replace(f, simulation=True, reserved1=0x8000),
    "q_invalid": lambda f: _quality(f, Quality(validity="invalid")),
    "q_questionable": lambda f: _quality(f, Quality(validity="questionable")),
    "q_test": lambda f: _quality(f, Quality(test=True)),
    "confrev": lambda f: dataclasses.replace(f, conf_rev=f.conf_rev + 1),
    "ndscom": lambda f: dataclasses.replace(f, nds_com=True),
}


def frames_of(path: Path) -> list[tuple[int, bytes]]:
    return [(f.ts_ns, f.data) for f in read_capture(path)]


def rewrite(
    frames: list[tuple[int, bytes]], how: Rewrite, from_s: float = 5.0, appid: int = PROT_APPID
) -> list[tuple[int, bytes]]:
    """Every frame of stream `appid` at or after `from_s` (relative to the first frame)
    rewritten by `how`; the others unchanged."""
    t0 = frames[0][0]
    out = []
    for ts, data in frames:
        frame = decode_frame(data)
        if frame.appid == appid and ts - t0 >= from_s * S:
            data = encode_frame(how(frame))
        out.append((ts, data))
    return out


def without(frames: list[tuple[int, bytes]], appid: int) -> list[tuple[int, bytes]]:
    return [(ts, d) for ts, d in frames if decode_frame(d).appid != appid]


def write(path: Path, frames: list[tuple[int, bytes]]) -> Path:
    with PcapWriter(path) as w:
        for ts, data in frames:
            w.write(data, ts)
    return path


def bits(q: BitString) -> str:
    return q.bits
