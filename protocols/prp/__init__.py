"""PRP (IEC 62439-3 Clause 4, PRP-1) as bytes: the Redundancy Control Trailer and the
supervision frame. No I/O, no state: the duplicate discard, the node table and the
counters are `controller.prp`."""

from goosectl.protocols.prp.rct import (
    LAN_A,
    LAN_B,
    LAN_IDS,
    LAN_NAMES,
    RCT_LEN,
    SUFFIX,
    Rct,
    add_rct,
    check_rct,
    encode_rct,
    lsdu_size,
    next_seq,
    pad,
    parse_rct,
    read_rct,
    strip_rct,
    tagged,
)
from goosectl.protocols.prp.supervision import (
    ETHERTYPE,
    Supervision,
    build_supervision,
    destination,
    parse_supervision,
)

__all__ = [
    "ETHERTYPE",
    "LAN_A",
    "LAN_B",
    "LAN_IDS",
    "LAN_NAMES",
    "RCT_LEN",
    "SUFFIX",
    "Rct",
    "Supervision",
    "add_rct",
    "build_supervision",
    "check_rct",
    "destination",
    "encode_rct",
    "lsdu_size",
    "next_seq",
    "pad",
    "parse_rct",
    "parse_supervision",
    "read_rct",
    "strip_rct",
    "tagged",
]
