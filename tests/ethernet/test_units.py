"""Pure parts of the Ethernet layer: BPF assembly, VLAN tags, MAC parsing (no root needed)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goosectl.protocols.ethernet import bpf
from goosectl.protocols.ethernet.mac import MacError, format_mac, is_multicast, parse_mac
from goosectl.protocols.ethernet.rawsock import UnknownInterfaceError, interface_index
from goosectl.protocols.ethernet.ring import RingSpec, RingSpecError, mac_offset
from goosectl.protocols.ethernet.vlan import (
    TPID_STAG,
    VlanError,
    VlanTag,
    inline_tag,
    insert_tag,
    strip_tag,
)

FRAME = bytes.fromhex("010ccd01000102aabbccdd0188b8") + b"payload-bytes"


def test_assemble_packs_struct_sock_filter_and_resolves_labels() -> None:
    prog = [
        bpf.Insn(bpf.LD_H_ABS, 12),
        bpf.Insn(bpf.JEQ_K, 0x88B8, "yes", "no"),
        bpf.Label("yes"),
        bpf.Insn(bpf.RET_K, 0xFFFF),
        bpf.Label("no"),
        bpf.Insn(bpf.RET_K, 0),
    ]
    code = bpf.assemble(prog)
    assert [struct.unpack_from("=HBBI", code, i) for i in range(0, len(code), 8)] == [
        (0x28, 0, 0, 12),
        (0x15, 0, 1, 0x88B8),
        (0x06, 0, 0, 0xFFFF),
        (0x06, 0, 0, 0),
    ]


@pytest.mark.parametrize(
    ("prog", "message"),
    [
        ([bpf.Insn(bpf.JEQ_K, 1, "nowhere")], "unknown label 'nowhere'"),
        ([bpf.Label("a"), bpf.Label("a"), bpf.Insn(bpf.RET_K)], "defined twice"),
        ([], "1..4096 instructions"),
        (
            [
                bpf.Insn(bpf.JEQ_K, 1, "far"),
                *([bpf.Insn(bpf.RET_K)] * 300),
                bpf.Label("far"),
                bpf.Insn(bpf.RET_K),
            ],
            "classic BPF allows 0..255",
        ),
        ([bpf.Label("back"), bpf.Insn(bpf.RET_K), bpf.Insn(bpf.JEQ_K, 0, "back")], "is -2"),
    ],
)
def test_assemble_rejects_bad_programs(prog, message: str) -> None:
    with pytest.raises(bpf.BpfError, match=message):
        bpf.assemble(prog)


def test_goose_program_grows_with_groups_and_dedups() -> None:
    none = bpf.assemble(bpf.goose_program([]))
    two = bpf.assemble(bpf.goose_program(["01:0c:cd:01:00:01", "01-0C-CD-01-00-02"]))
    dup = bpf.assemble(bpf.goose_program(["01:0c:cd:01:00:01", bytes.fromhex("010ccd010001")]))
    assert len(two) - len(none) == 2 * 4 * 8
    assert len(dup) - len(none) == 4 * 8
    promisc = bpf.assemble(bpf.goose_program(["01:0c:cd:01:00:01"], promiscuous=True))
    assert len(promisc) < len(none)


@given(st.integers(0, 4095), st.integers(0, 7), st.integers(0, 1))
def test_tci_round_trip(vid: int, pcp: int, dei: int) -> None:
    tag = VlanTag(vid, pcp, dei)
    assert VlanTag.from_tci(tag.tci) == tag
    tagged = insert_tag(FRAME, tag)
    assert inline_tag(tagged) == tag
    assert strip_tag(tagged) == FRAME
    assert len(tagged) == len(FRAME) + 4


def test_tag_bytes_match_8021q_layout() -> None:
    assert insert_tag(FRAME, VlanTag(10, 4))[12:16] == bytes.fromhex("8100800a")
    assert insert_tag(FRAME, VlanTag(1, 0, 1, TPID_STAG))[12:16] == bytes.fromhex("88a81001")
    assert inline_tag(FRAME) is None and strip_tag(FRAME) == FRAME


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        (VlanTag(4096), "VLAN id 4096 out of range"),
        (VlanTag(1, 8), "priority 8 out of range"),
        (VlanTag(1, 0, 2), "DEI 2"),
    ],
)
def test_bad_tags_are_refused(tag: VlanTag, message: str) -> None:
    with pytest.raises(VlanError, match=message):
        insert_tag(FRAME, tag)


def test_insert_tag_needs_an_ethernet_header() -> None:
    with pytest.raises(VlanError, match="5 bytes is shorter than an Ethernet header"):
        insert_tag(b"short", VlanTag(1))
    with pytest.raises(VlanError, match="does not fit in 16 bits"):
        VlanTag.from_tci(0x10000)


@pytest.mark.parametrize(
    "text", ["01:0c:cd:01:00:01", "01-0C-CD-01-00-01", "010ccd010001", " 01:0C:cd:01:00:01 "]
)
def test_mac_spellings(text: str) -> None:
    assert parse_mac(text) == bytes.fromhex("010ccd010001")
    assert format_mac(parse_mac(text)) == "01:0c:cd:01:00:01"
    assert is_multicast(text)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("01:0c:cd:01:00", "not a MAC address"),
        ("01:0c-cd:01:00:01", "not a MAC address"),
        ("zz:0c:cd:01:00:01", "not a MAC address"),
        (b"\x01\x02", "must be 6 bytes, got 2"),
        (12, "must be text or bytes, got int"),
    ],
)
def test_bad_macs(value, message: str) -> None:
    with pytest.raises(MacError, match=message):
        parse_mac(value)


def test_unknown_interface_is_named_without_root() -> None:
    with pytest.raises(UnknownInterfaceError, match="no network interface named 'gctl-nope0'"):
        interface_index("gctl-nope0")
    for bad in ("", "x" * 16, "a/b"):
        with pytest.raises(UnknownInterfaceError, match="invalid interface name"):
            interface_index(bad)


# -- receive ring layouts (protocols/ethernet/ring.py) ------------------------------------


def test_default_rings_hold_ten_thousand_full_size_frames() -> None:
    v3, v2 = RingSpec(version=3).layout(), RingSpec(version=2).layout()
    # a full-size frame takes 1,600 bytes in a V3 block (82-byte header area, 16-aligned),
    # 1,584 in a V2 slot; V3 gets a quarter more blocks for blocks its timer hands over
    # part full, and all of that fits in three quarters of the ring (the kernel's flood
    # check drops frames past that point in a race with the timer)
    assert (mac_offset(3), mac_offset(2)) == (82, 66)
    per_block = (8192 - 48) // 1600
    assert v3.block_nr * 3 // 4 * per_block >= 10_000 * 1.25
    assert v2.frame_nr >= 10_000 and v2.frame_size == 1584
    for lay in (v3, v2):
        assert lay.block_size == 8192 and lay.frame_nr % lay.block_nr == 0


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"version": 1}, "version: 1 is not 2 or 3"),
        ({"frames": 0}, "frames: 0 is not between"),
        ({"frame_bytes": 20}, "frame_bytes: 20 is not between"),
        ({"block_bytes": 12288}, "block_bytes: 12288 is not a power of two"),
        ({"block_bytes": 4096, "frame_bytes": 9000}, "cannot hold one 9000-byte frame"),
        ({"retire_ms": 0}, "retire_ms: 0 is not between"),
    ],
)
def test_ring_spec_errors_name_the_field(kw: dict, message: str) -> None:
    with pytest.raises(RingSpecError, match=message):
        RingSpec(**kw)


def test_ring_config_errors_name_the_field_and_off_means_no_ring() -> None:
    from pydantic import ValidationError

    from goosectl.controller.config.goose import GooseConfig

    with pytest.raises(ValidationError, match="block_kib: 3 is not a power of two"):
        GooseConfig(rx_ring={"block_kib": 3})
    with pytest.raises(ValidationError, match="block_kib: 4 cannot hold one 9000-byte frame"):
        GooseConfig(rx_ring={"block_kib": 4, "frame_bytes": 9000})
    ring = GooseConfig(rx_ring={"frames": 500}).rx_ring
    assert ring.spec(3) == RingSpec(version=3, frames=500)
    assert ring.spec(2).version == 2  # the command's choice when unset
    assert GooseConfig(rx_ring={"version": 0}).rx_ring.spec(3) is None


def test_a_kernel_drop_is_a_timeline_line_and_an_anomaly() -> None:
    from goosectl.controller.goose.effects import RxDrops
    from goosectl.controller.report.bay_report import Timeline

    timeline = Timeline(0)
    timeline.add(1_500_000_000, RxDrops("A", "eth0", 12, 12, 100, 1, 88))
    timeline.add(2_000_000_000, RxDrops("A", "eth0", 3, 15, 103, 1, 88))
    assert timeline.lines() == [
        "    1.500 s  network  A (eth0): the kernel dropped 12 frame(s), 12 since start",
        "    2.000 s  network  A (eth0): the kernel dropped 3 frame(s), 15 since start",
    ]
    assert "  15 frame(s) dropped by the kernel on network A (eth0): receive ring full" in (
        timeline.anomalies()
    )
