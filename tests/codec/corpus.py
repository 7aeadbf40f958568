"""Frames built with our own encoder that together cover every Data choice and header
variant; the tshark oracle, the round-trip tests and the benchmarks all use them."""

from __future__ import annotations

from goosectl.protocols.goose import (
    Array,
    Bcd,
    BinaryTime,
    BitString,
    Boolean,
    BooleanArray,
    Dbpos,
    FloatingPoint,
    GooseFrame,
    Integer,
    MmsString,
    ObjId,
    OctetString,
    Quality,
    Real,
    Structure,
    Unsigned,
    UtcTime,
    VisibleString,
    Vlan,
    mac,
)

T0 = UtcTime(1_700_000_000, 0x123456, 0x0A)


def flat16() -> tuple:
    """The benchmark's data set (a): 16 entries, booleans, Quality, float32, utc-time."""
    q = Quality(validity="questionable", details=frozenset({"oldData"})).to_bitstring()
    out = []
    for i in range(4):
        out += [
            Boolean(i % 2 == 0),
            q if i % 2 else Quality().to_bitstring(),
            FloatingPoint.f32(230.5 + i),
            UtcTime(1_700_000_000 + i, 0x100000 * i, 0x0A),
        ]
    return tuple(out)


def every_choice() -> tuple:
    """One or more values of every Data choice, nested structures and arrays included."""
    return (
        Boolean(True),
        Boolean(False),
        Boolean(True, 0xFF),
        BitString.from_bits("0110100000011"),
        Dbpos.ON.to_bitstring(),
        BitString.from_bits(""),
        Integer(-1),
        Integer(127),
        Integer(-129),
        Integer(2**40),
        Unsigned(0),
        Unsigned(255),
        Unsigned(2**32 - 1),
        FloatingPoint.f32(-1.25),
        FloatingPoint.f64(3.141592653589793),
        Real(0.0),
        Real(1000.125),  # Wireshark 4.0 asserts on 1-octet REAL mantissas (asn1.c:232)
        Real(-1024.75),
        OctetString(bytes.fromhex("00ff10aa")),
        OctetString(b""),
        VisibleString("IED1/LLN0.Mod"),
        BinaryTime(3_600_000),
        BinaryTime(43_200_000, 14_000),
        Bcd(1234),
        BooleanArray(b"\xb0", 4),
        ObjId((1, 0, 8802, 1, 1, 2)),
        MmsString("Schütz Ω"),
        UtcTime(1_600_000_000, 0x800000, 0x8A),
        Structure(
            (
                Boolean(True),
                Structure((Integer(5), BitString.from_bits("0000000000000"), T0)),
                Array((Integer(1), Integer(2), Integer(3))),
            )
        ),
        Array((Structure((Boolean(False), Unsigned(7))), Structure((Boolean(True), Unsigned(8))))),
        Array(()),
    )


def corpus_frames() -> list[GooseFrame]:
    """Frames for the tshark oracle: untagged, tagged, S-bit, goID absent, long lengths."""
    base = {
        "dst": mac("01:0c:cd:01:00:10"),
        "src": mac("00:1b:2c:3d:4e:5f"),
        "appid": 0x1001,
        "gocb_ref": "IED1LD0/LLN0$GO$gcb01",
        "dat_set": "IED1LD0/LLN0$DS01",
        "t": T0,
    }
    frames = [
        GooseFrame(**base, go_id="IED1_GO1", all_data=every_choice(), vlan=Vlan(100, 5)),
        GooseFrame(**base, all_data=flat16(), st_num=70_000, sq_num=2**32 - 1, conf_rev=3),
        GooseFrame(
            **base,
            go_id="sim",
            all_data=flat16()[:4],
            reserved1=0x8000,
            simulation=True,
            nds_com=True,
            time_allowed_to_live=40_000,
            vlan=Vlan(0, 4),
        ),
        GooseFrame(
            **base,
            go_id="big",
            all_data=tuple(Integer(i * 1000) for i in range(60)),
            st_num=2**31,
        ),
    ]
    return frames
