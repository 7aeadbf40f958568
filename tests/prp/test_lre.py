"""The LRE (pure): duplicate discard from an independent sender's scenarios, every
state delivered exactly once, the MIB counters equal to what was sent; the kernel's
KUnit cases; bounded memory; the node table and its alarms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.controller.prp import Lre, LreConfig
from goosectl.protocols.goose import parse_header
from tests.support.examples import examples
from tests.support.prp_sender import LAN_ID, SRC, Scenario, goose, trailer

MS = 1_000_000


def run(sc: Scenario, hot: bool = False) -> tuple[Lre, list[int], list]:
    """Every arrival through `receive` (the whole verdict) or, ``hot``, `deliver` (the
    live loop's path: the frame or None, alarms in ``pending``)."""
    lre = Lre()
    delivered, alarms = [], []
    for a in sc.arrivals:
        if hot:
            got = lre.deliver(a.frame, a.port, a.ns)
        else:
            v = lre.receive(a.frame, a.port, a.ns)
            got = v.frame
            if v.alarm is not None:
                assert v.alarm in lre.pending
        if got is not None:
            delivered.append(parse_header(got).st_num)
    alarms += lre.pending
    lre.settle()
    return lre, delivered, alarms


def counters(lre: Lre) -> dict[str, int]:
    c = lre.counters()
    return {k: v for k, v in c.items() if not k.startswith(("lreCntTx", "lreCntErrors")) and
            k != "lreCntNodes"}  # fmt: skip


@pytest.mark.parametrize(
    "faults",
    [
        {},
        {"loss_b": 0.2},
        {"loss_b": 0.8},
        {"cut_b_at": 90},
        {"reorder_b": 0.3},
        {"triples": 0.3},
        {"loss_b": 0.2, "reorder_b": 0.2, "triples": 0.2},
        {"vlan": True, "loss_b": 0.2},
    ],
    ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "clean",
)
@pytest.mark.parametrize("hot", [False, True], ids=["receive", "deliver"])
def test_every_state_once_and_the_counters_equal_what_was_sent(faults, hot) -> None:
    sc = Scenario().build(**faults)
    lre, delivered, alarms = run(sc, hot)
    assert sorted(delivered) == list(range(1, 201))
    assert len(delivered) == 200  # exactly once: no state lost, none twice
    assert counters(lre) == sc.expected()
    assert lre.counts["lreCntErrorsA"] == lre.counts["lreCntErrorsB"] == 0
    assert not alarms


@pytest.mark.parametrize("hot", [False, True], ids=["receive", "deliver"])
def test_a_crossed_cable_is_counted_delivered_once_and_alarmed(hot) -> None:
    sc = Scenario().build(wrong_lan_b=True, loss_b=0.1)
    lre, delivered, alarms = run(sc, hot)
    assert sorted(delivered) == list(range(1, 201))
    assert counters(lre) == sc.expected()
    assert lre.counts["lreCntErrWrongLanB"] == sum(1 for a in sc.arrivals if a.port == "B")
    (alarm,) = alarms  # once, not per frame
    assert alarm.kind == "crossed_cable" and alarm.port == "B"
    assert "crossed" in alarm.text and "port B" in alarm.text


def test_a_lost_copy_on_the_other_lan_is_delivered_from_a_late_one() -> None:
    """B arrives first and lossy (the drop-window failure): every A frame B lost must
    still go up."""
    sc = Scenario(seed=7).build(loss_b=0.5, b_delay_ns=-MS // 2)
    _, delivered, _ = run(sc)
    assert sorted(delivered) == list(range(1, 201))


# -- the kernel's KUnit cases (net/hsr/prp_dup_discard_test.c), by their names ----------


def feed(lre: Lre, seq: int, port: str, ns: int, src: bytes = SRC) -> bool:
    f = trailer(goose(1, seq % 100, src=src), seq, LAN_ID[port])
    return lre.deliver(f, port, ns) is not None


def test_kunit_forward_in_sync_and_drop_duplicate() -> None:
    lre = Lre()
    assert feed(lre, 100, "A", 0) and not feed(lre, 100, "B", 1)
    assert feed(lre, 101, "B", 2) and not feed(lre, 101, "A", 3)


def test_kunit_entry_forget_time() -> None:
    lre = Lre()
    assert feed(lre, 5, "A", 0)
    assert not feed(lre, 5, "B", 399 * MS)
    assert feed(lre, 6, "A", 400 * MS)
    assert feed(lre, 5, "B", 801 * MS)  # forgotten: a late copy errs towards accepting


def test_kunit_out_of_sequence_and_lan_b_late() -> None:
    lre = Lre()
    for s in (10, 11, 12):
        assert feed(lre, s, "A", s)
    assert feed(lre, 8, "A", 20)  # an old SeqNr never seen: accepted
    assert not feed(lre, 8, "B", 21)
    for s in (10, 11, 12):  # B two and more frames behind
        assert not feed(lre, s, "B", 30 + s)


def test_two_sources_with_the_same_seqnr_are_not_confused() -> None:
    lre = Lre()
    other = bytes.fromhex("020000bb0002")
    assert feed(lre, 7, "A", 0) and feed(lre, 7, "A", 1, src=other)
    assert not feed(lre, 7, "B", 2) and not feed(lre, 7, "B", 3, src=other)


def test_a_flood_of_spoofed_sources_stays_bounded_and_drops_nothing_legitimate() -> None:
    lre = Lre(LreConfig(max_entries=4_096))
    for i in range(10_000):
        src = bytes.fromhex("02") + i.to_bytes(5, "big")
        assert feed(lre, i % 65_536, "A", i, src=src)
    assert len(lre.table) <= 4_096 and lre.evicted == 10_000 - 4_096
    assert feed(lre, 42, "A", 20_000) and not feed(lre, 42, "B", 20_001)


def test_frames_that_are_not_prp_are_left_alone_and_bad_trailers_counted() -> None:
    lre = Lre()
    plain = goose(1, 0)
    assert lre.receive(plain, "A", 0).frame == plain  # SAN
    good = trailer(goose(2, 0), 9, LAN_ID["A"])
    bad_size = good[:-4] + bytes([good[-4] & 0xF0, 10]) + good[-2:]
    bad_lan = good[:-4] + bytes([(good[-4] & 0x0F) | 0xC0, good[-3]]) + good[-2:]
    prp0 = goose(3, 0) + bytes.fromhex("0009a034")  # a 4-octet PRP-0 trailer: not PRP-1
    for f in (bad_size, bad_lan, prp0):
        v = lre.receive(f, "A", 1)
        assert v.frame == f and v.rct is None
    assert lre.counts["lreCntErrorsA"] == 2 and lre.counts["lreCntRxA"] == 0


def test_send_one_seqnr_on_both_lans_and_wrap() -> None:
    lre = Lre()
    lre.seq = 65_535
    a, b = lre.send(goose(1, 0))
    assert a[:-4] == b[:-4] and a[-2:] == b[-2:] == b"\x88\xfb"
    assert a[-6:-4] == b[-6:-4] == b"\xff\xff"
    assert a[-4] >> 4 == 0xA and b[-4] >> 4 == 0xB
    a2, _ = lre.send(goose(1, 1))
    assert a2[-6:-4] == b"\x00\x00"
    # an independent reading of the LSDUsize
    assert ((a[-4] & 0x0F) << 8 | a[-3]) == len(a) - 14


def test_supervision_node_table_and_a_silent_lan() -> None:
    """Another DANP's supervision (from `Lre.supervision`) fills the table as DANP; when
    LAN B goes quiet past 3 s the alarm names it, and again when it is back."""
    peer = Lre(LreConfig(mac=bytes.fromhex("020000cc0003")))
    me = Lre(LreConfig(mac=bytes.fromhex("020000dd0004")))
    t = 0
    for _ in range(3):
        for port, frame in peer.supervision(t):
            v = me.receive(frame, port, t)
            assert v.supervision and v.frame is None
        assert me.tick(t) == []
        t += 2_000 * MS
    (node,) = me.node_table()
    assert node["type"] == "DANP" and node["supervision"]
    assert node["mac"] == "02:00:00:cc:00:03" and me.counters()["lreCntNodes"] == 1
    alarms = []
    for _ in range(3):  # only A from now on
        frames = dict(peer.supervision(t))
        me.receive(frames["A"], "A", t)
        alarms += me.tick(t)
        t += 2_000 * MS
    (silent,) = alarms
    assert silent.kind == "lan_silent" and silent.port == "B"
    frames = dict(peer.supervision(t))
    me.receive(frames["B"], "B", t)
    assert [a.kind for a in me.tick(t)] == ["lan_back"]
    # quiet on both LANs: the node has gone, no LAN is blamed; forgotten after 60 s
    assert me.tick(t + 10_000 * MS) == []
    assert me.tick(t + 61_000 * MS) == [] and me.counters()["lreCntNodes"] == 0


# -- the hot path is the verdict's compiled view ---------------------------------------

_SOURCES = (SRC, bytes.fromhex("020000bb0002"))


@st.composite
def arrivals(draw: st.DrawFn) -> list[tuple[str, bytes, int]]:
    """Frames as two LANs may bring them: copies of a few SeqNrs from two sources, right
    and wrong LanIds, a broken LSDUsize now and then, SAN frames, time moving on by
    nothing up to past EntryForgetTime (the aging and a late copy's renewal), and back
    a little (one ring's stamps older than the other's last)."""
    out, now = [], 10**12
    steps = [0, 1, 1_000, MS, 150 * MS, 399 * MS, 400 * MS, 700 * MS, -MS, -150 * MS]
    for _ in range(draw(st.integers(1, 60))):
        # back in time too: the kernel stamps of the two rings' batches interleave
        now += draw(st.sampled_from(steps))
        port = draw(st.sampled_from(["A", "B"]))
        seq = draw(st.integers(65_533, 65_538)) % 65_536
        src = draw(st.sampled_from(_SOURCES))
        kind = draw(st.sampled_from(["right", "right", "right", "wrong", "size", "san"]))
        g = goose(1 + seq % 7, 0, src=src, vlan=draw(st.booleans()))
        lan = LAN_ID[port] if kind != "wrong" else LAN_ID["B" if port == "A" else "A"]
        f = g if kind == "san" else trailer(g, seq, lan)
        if kind == "size":
            f = f[:-3] + bytes([f[-3] ^ 0x01]) + f[-2:]
        out.append((port, f, now))
    return out


@settings(max_examples=examples(120), deadline=None)
@given(arrivals(), st.booleans())
def test_deliver_is_receive_in_every_verdict_and_counter(frames, small) -> None:
    cfg = LreConfig(max_entries=3 if small else 65_536)  # small: the bound evicts too
    hot, full = Lre(cfg), Lre(cfg)
    for port, f, now in frames:
        assert hot.deliver(f, port, now) == full.receive(f, port, now).frame
        hot.age(now)  # the loop's round after a frame
        full.age(now)
    assert hot.pending == full.pending  # the same alarms, once each
    assert len(hot.table) <= cfg.max_entries
    hot.settle()
    full.settle()
    assert hot.counters() == full.counters()
