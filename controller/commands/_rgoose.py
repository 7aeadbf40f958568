"""R-GOOSE in captures, for `decode` and `replay`: the UDP frames (port 102) of a pcap
expanded into the Layer-2 frames their SPDUs carry, so both commands read them as they read
Ethernet GOOSE (`controller/goose/rgoose.py` judges the SPDUs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from goosectl.controller.config.keys import KeyFile
from goosectl.controller.goose.auth import Verdict
from goosectl.controller.goose.rgoose import judge_spdu, source_mac, spdu_datagram
from goosectl.protocols.ethernet.pcap import LINKTYPE_ETHERNET, CapturedFrame
from goosectl.protocols.goose import GooseError, is_goose
from goosectl.protocols.rgoose import BadSpdu
from goosectl.protocols.rgoose.spdu import frame_of_apdu

#: the destination MAC shown for a frame made from an APDU (R-GOOSE has none)
DST = bytes.fromhex("010ccd010000")


class Unit(NamedTuple):
    """One GOOSE frame to show: a captured one, or one an SPDU carried (`rgoose` holds the
    SPDU's facts, `verdict` its auth verdict), or an SPDU that could not be read (`error`)."""

    number: int
    ts_ns: int
    data: bytes
    linktype: int
    rgoose: dict[str, Any] | None = None
    verdict: Verdict | None = None
    error: GooseError | None = None


def units(captures: Iterator[CapturedFrame], keys: KeyFile | None) -> Iterator[Unit]:
    """Every captured frame, the R-GOOSE ones replaced by the frames their SPDUs carry
    (judged with `keys` at the capture's UTC); an SPDU that is malformed, or encrypted
    under a key not at hand, is one `error` unit whose offset is the frame's."""
    for cap in captures:
        d = None
        if cap.linktype == LINKTYPE_ETHERNET and not is_goose(cap.data):
            d = spdu_datagram(cap.data)
        if d is None:
            yield Unit(cap.number, cap.ts_ns, cap.data, cap.linktype)
            continue
        try:
            verdict, spdu, apdus = judge_spdu(d.payload, keys, cap.ts_ns)
        except BadSpdu as exc:
            where = None if exc.offset is None else exc.offset + d.offset
            err = BadSpdu(f"R-GOOSE: {exc.reason}", offset=where, path=exc.path)
            yield Unit(cap.number, cap.ts_ns, cap.data, cap.linktype, error=err)
            continue
        assert spdu is not None
        info = {
            "src": d.src,
            "dst": d.dst,
            "spdu_number": spdu.spdu_number,
            "key_id": spdu.key_id,
        }
        if not apdus:
            err = BadSpdu(
                f"R-GOOSE: encrypted SPDU (KeyID {spdu.key_id}) and no key decrypts it"
                f" ({verdict.reason})",
                offset=d.offset,
                path="payload",
            )
            yield Unit(cap.number, cap.ts_ns, cap.data, cap.linktype, info, verdict, err)
            continue
        for a in apdus:
            frame = frame_of_apdu(a, DST, source_mac(d.src))
            yield Unit(cap.number, cap.ts_ns, frame, cap.linktype, info, verdict)
