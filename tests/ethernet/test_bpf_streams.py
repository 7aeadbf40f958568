"""The kernel filter by stream: only frames of a subscribed (destination, APPID, gocbRef)
are let in, untagged or behind a tag, whatever the goosePdu's length form.

Judged two ways: the pure-Python interpreter (`bpf.run`) against the rule written out
plainly here, over generated streams and frames; and the real kernel on a veth pair,
whose verdicts are the interpreter's on the same frames.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.protocols.ethernet import bpf
from goosectl.protocols.ethernet.bpf import StreamMatch
from goosectl.protocols.ethernet.vlan import TPID_STAG, VlanTag, insert_tag
from goosectl.protocols.goose import Boolean, GooseFrame, OctetString, encode_frame
from tests.ethernet.frames import read_until
from tests.support.examples import examples

DSTS = [bytes.fromhex("010ccd010001"), bytes.fromhex("010ccd010002")]
APPIDS = [0x1001, 0x3001]
REFS = ["IED1LD0/LLN0$GO$trip", "IED1LD0/LLN0$GO$tris", "IED2LD0/LLN0$GO$trip", "X" * 140]
MARK = b"MARK"


def goose(dst: bytes, appid: int, ref: str, pad: int = 0, label: bytes = b"") -> bytes:
    """A frame of that stream; `pad` octets of data move the goosePdu's length form
    (short, 0x81, 0x82)."""
    return encode_frame(
        GooseFrame(
            gocb_ref=ref,
            dat_set="IED1LD0/LLN0$ds",
            all_data=(Boolean(True), OctetString(label + bytes(pad))),
            appid=appid,
            dst=dst,
            src=bytes.fromhex("02aabbccdd01"),
        )
    )


def tlv_end(frame: bytes) -> int:
    """Where the gocbRef TLV of an untagged frame ends (what the filter must read)."""
    n = frame[23]
    p = 24 if n < 0x80 else 24 + (n & 0x7F)
    return p + len(bpf.gocb_tlv(_ref_of(frame)))


def _ref_of(frame: bytes) -> str:
    n = frame[23]
    p = 24 if n < 0x80 else 24 + (n & 0x7F)
    size = frame[p + 1]
    if size < 0x80:
        return frame[p + 2 : p + 2 + size].decode()
    return frame[p + 3 : p + 3 + frame[p + 2]].decode()


keys = st.tuples(st.sampled_from(DSTS), st.sampled_from(APPIDS), st.sampled_from(REFS))


@settings(max_examples=examples(300), deadline=None)
@given(
    wanted=st.lists(keys, min_size=1, max_size=4),
    bare=st.lists(st.sampled_from(DSTS), max_size=1),
    key=keys,
    pad=st.sampled_from([0, 100, 300]),
    tagged=st.booleans(),
    cut=st.integers(0, 400) | st.none(),
)
def test_the_program_lets_in_exactly_the_subscribed_streams(
    wanted, bare, key, pad, tagged, cut
) -> None:
    streams = [StreamMatch(*w) for w in wanted]
    code = bpf.assemble(bpf.goose_program([*bare, *(w[0] for w in wanted)], streams=streams))
    frame = goose(*key, pad=pad)
    end = tlv_end(frame)
    if cut is not None:
        frame = frame[:cut]
    # a tag the kernel left inline (the inner one of two): everything 4 octets on
    seen = insert_tag(frame, VlanTag(10, 4)) if tagged and len(frame) >= 14 else frame
    if key[0] in bare and key[0] not in {w[0] for w in wanted}:
        expected = len(frame) >= 14  # a group no stream names: dst and EtherType suffice
    else:
        expected = key in wanted and (cut is None or cut >= end)
    got = bpf.run(code, seen).accept
    assert bool(got) == expected, (key, wanted, bare, pad, tagged, cut)


def test_a_stream_without_appid_or_gocbref_is_matched_by_what_it_names() -> None:
    code = bpf.assemble(bpf.goose_program(DSTS[:1], streams=[StreamMatch(DSTS[0], None, REFS[0])]))
    assert bpf.run(code, goose(DSTS[0], 0x4444, REFS[0])).accept
    assert not bpf.run(code, goose(DSTS[0], 0x4444, REFS[1])).accept
    code = bpf.assemble(bpf.goose_program(DSTS[:1], streams=[StreamMatch(DSTS[0], 0x1001)]))
    assert bpf.run(code, goose(DSTS[0], 0x1001, REFS[2])).accept
    assert not bpf.run(code, goose(DSTS[0], 0x1002, REFS[2])).accept


def test_outgoing_other_ethertypes_and_odd_lengths_are_dropped() -> None:
    code = bpf.assemble(bpf.goose_program(DSTS, streams=[StreamMatch(DSTS[0], 0x1001, REFS[0])]))
    good = goose(DSTS[0], 0x1001, REFS[0])
    assert bpf.run(code, good).accept
    assert not bpf.run(code, good, pkttype=bpf.PACKET_OUTGOING).accept
    assert not bpf.run(code, good[:12] + b"\x08\x00" + good[14:]).accept
    # goosePdu length 0x85 (five length octets): no publisher sends it, nothing to find
    assert not bpf.run(code, good[:23] + b"\x85" + good[24:]).accept
    # not a goosePdu tag where it must be
    assert not bpf.run(code, good[:22] + b"\x62" + good[23:]).accept


def test_a_rejected_frame_costs_a_few_dozen_instructions() -> None:
    streams = [StreamMatch(DSTS[0], 0x1001, REFS[0])]
    code = bpf.assemble(bpf.goose_program(DSTS[:1], streams=streams))
    foreign = bpf.run(code, goose(DSTS[0], 0x1001, f"FLOOD{1:05d}LD0/LLN0$GO$trip"))
    other_appid = bpf.run(code, goose(DSTS[0], 0x1002, REFS[0]))
    assert not foreign.accept and not other_appid.accept
    assert other_appid.steps < foreign.steps <= 40


def test_too_many_streams_for_one_program_is_said_by_the_assembler() -> None:
    many = [StreamMatch(DSTS[0], 0x1001, f"IED{i:04d}LD0/LLN0$GO$" + "x" * 60) for i in range(300)]
    with pytest.raises(bpf.BpfError, match=r"1\.\.4096 instructions"):
        bpf.assemble(bpf.goose_program(DSTS[:1], streams=many))


@pytest.mark.root
def test_the_kernel_drops_foreign_streams_and_agrees_with_the_interpreter(wire) -> None:
    streams = [StreamMatch(DSTS[0], 0x1001, REFS[0]), StreamMatch(DSTS[1], 0x3001, REFS[3])]
    tx = wire.open("a")
    rx = wire.open("b", groups=DSTS, streams=streams)
    assert rx.filter_level == "stream"
    code = bpf.assemble(bpf.goose_program(DSTS, streams=streams))
    sent: dict[bytes, bytes] = {}
    for dst in DSTS:
        for appid in APPIDS:
            for ref in REFS:
                for pad in (0, 100, 300):
                    for tag in (None, VlanTag(10, 4), VlanTag(20, 3, tpid=TPID_STAG)):
                        label = b"L%05d" % len(sent)
                        f = goose(dst, appid, ref, pad, label)
                        tx.send(f if tag is None else insert_tag(f, tag))
                        sent[label] = f  # as the filter sees it: the kernel strips the tag
    tx.send(goose(DSTS[0], 0x1001, REFS[0], label=MARK))
    got = read_until(rx, MARK)
    arrived = {label for label in sent if any(label in g.frame for g in got)}
    expected = {label for label, f in sent.items() if bpf.run(code, f).accept}
    assert arrived == expected
    assert len(expected) == 2 * 3 * 3  # the two streams, each length form and tag
    assert rx.kernel_stats().packets == len(expected) + 1  # + the marker; the rest never queued


@settings(max_examples=examples(150), deadline=None)
@given(wanted=st.lists(keys, min_size=1, max_size=3, unique=True), key=keys, tagged=st.booleans())
def test_the_kernel_filter_is_the_banks_decision_compiled(wanted, key, tagged) -> None:
    """The filter is a fast path of the subscriber bank's own decision: it lets a frame in
    exactly when the bank would take it for a subscription (anything but `unmatched`)."""
    from goosectl.controller.config.goose import GooseConfig
    from goosectl.controller.goose.hub import GooseHub

    subs = [{"gocb_ref": r, "appid": a, "dst": d.hex(":")} for d, a, r in wanted]
    hub = GooseHub(GooseConfig.model_validate({"subscriptions": subs}))
    streams = [StreamMatch(s.dst, s.appid, s.gocb_ref) for s in hub.bank.subs.values()]
    code = bpf.assemble(bpf.goose_program({s.dst for s in streams}, streams=streams))
    frame = goose(*key, pad=100)
    seen = insert_tag(frame, VlanTag(10, 4)) if tagged else frame
    _, _, status = hub.bank.on_frame(seen, "A", 0)
    assert bool(bpf.run(code, seen).accept) == (status != "unmatched"), (key, wanted, status)
