"""Generated SCDs: member types against the hand-written table, and a round trip.

Hypothesis draws IEDs with random GoCBs (data sets of every kind of member, addresses,
VLANs, confRev, ldName) and a subscriber IED with ExtRefs to random members (bound by
srcCBName or, Ed1 style, by data only). The publishers' config from `scl config` of each
publishing IED makes real frames; the subscriber's config from the same SCD must accept
every one of them as its stream (no unmatched frame, no config mismatch), and the wire
check against the SCD must call every stream matched.
"""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.scl.loader import config_data
from goosectl.controller.config.scl.wire import WireCheck, expected_from_scl
from goosectl.controller.goose.effects import FrameClassified, SendFrame
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.goose import data_shape, decode_frame
from goosectl.protocols.scl import parse_scl
from tests.scl.scdgen import KINDS, GenGoCB, GenIed, GenSub, scd_text
from tests.support.examples import examples

T0 = 1_800_000_000 * 1_000_000_000


@st.composite
def stations(draw):
    n_pub = draw(st.integers(1, 3))
    ieds, appid = [], 0x100
    for i in range(n_pub):
        gocbs = []
        for k in range(draw(st.integers(1, 3))):
            appid += 1
            vlan = draw(st.none() | st.integers(1, 4094))
            gocbs.append(
                GenGoCB(
                    name=f"g{k}",
                    members=draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=8)),
                    appid=appid,
                    mac=f"01:0c:cd:01:{appid >> 8:02x}:{appid & 0xFF:02x}",
                    conf_rev=draw(st.integers(0, 2**32 - 1)),
                    go_id=draw(st.none() | st.text("abcXYZ_09", min_size=1, max_size=12)),
                    vlan=vlan,
                    priority=draw(st.none() | st.integers(0, 7)) if vlan else None,
                    min_ms=draw(st.sampled_from([2, 4, 10])),
                    max_ms=draw(st.sampled_from([1000, 2000])),
                )
            )
        ld_name = draw(st.none() | st.just(f"BAY{i}CTL"))
        ieds.append(GenIed(name=f"P{i}", ld_name=ld_name, gocbs=gocbs))
    subs = []
    for ied in ieds:
        for k, g in enumerate(ied.gocbs):
            if draw(st.booleans()):
                j = draw(st.integers(0, len(g.members) - 1))
                subs.append(GenSub(ied.name, k, j, ed1=draw(st.booleans())))
    if not subs:
        subs.append(GenSub(ieds[0].name, 0, 0))
    ieds.append(GenIed(name="SUB", subs=subs))
    return ieds


def frames_of(cfg: GooseConfig) -> list[bytes]:
    hub = GooseHub(cfg)
    out = hub.start(T0, T0)
    t = T0
    for _ in range(3):  # the first state plus two retransmissions
        t = hub.next_deadline()
        out += hub.advance(t)
    return [e.data for e in out if type(e) is SendFrame]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stations())
def test_generated_scd_round_trips_into_configs_that_accept_our_frames(ieds):
    scl = parse_scl(io.BytesIO(scd_text(ieds).encode()), "gen.scd")
    assert scl.findings == []
    # member types: exactly the hand-written table's, member by member
    for ied in ieds:
        for k, g in enumerate(ied.gocbs):
            gocb = scl.gocbs[ied.gocb_ref(k)]
            assert gocb.shape == tuple(KINDS[m][3] for m in g.members)
            assert gocb.conf_rev == g.conf_rev and gocb.go_id == g.go_id
    sub_data, _ = config_data(scl, "SUB")
    sub_cfg = GooseConfig.model_validate(sub_data["goose"])
    expected_refs = {ieds_by(ieds)[s.ied].gocb_ref(s.gocb) for s in ieds[-1].subs}
    assert {s.gocb_ref for s in sub_cfg.subscriptions} == expected_refs
    subscriber = GooseHub(sub_cfg)
    check = WireCheck(expected_from_scl(scl))
    seen = set()
    for ied in ieds[:-1]:
        pub_data, _ = config_data(scl, ied.name)
        for n, frame in enumerate(frames_of(GooseConfig.model_validate(pub_data["goose"]))):
            f = decode_frame(frame)
            # the frame carries what the SCD says, in the types the SCD gives
            gocb = scl.gocbs[f.gocb_ref]
            assert data_shape(f.all_data) == gocb.shape
            check.frame(T0 + n * 1_000_000, frame)
            if f.gocb_ref not in expected_refs:
                continue
            [v] = [e for e in subscriber.frame(frame, "A", T0) if type(e) is FrameClassified]
            assert v.cls not in ("unmatched", "malformed", "config_mismatch"), (f.gocb_ref, v)
            assert not {"confrev_mismatch", "shape_mismatch"} & set(v.flags), v
            seen.add(f.gocb_ref)
    assert seen == expected_refs
    assert {v.status for v in check.verdicts()} == {"matched"}


def ieds_by(ieds):
    return {i.name: i for i in ieds}


def test_every_kind_resolves_to_its_hand_written_type():
    members = sorted(KINDS)
    gen = [GenIed(name="P", gocbs=[GenGoCB("g", members, 0x10, "01:0c:cd:01:00:10")])]
    scl = parse_scl(io.BytesIO(scd_text(gen).encode()), "gen.scd")
    assert scl.findings == []
    [g] = scl.ied("P").gocbs
    assert [(m.ref.split(".", 1)[1], m.shape) for m in g.members] == [
        (f"{KINDS[k][0]}{'.' + KINDS[k][1] if KINDS[k][1] else ''}[{KINDS[k][2]}]", KINDS[k][3])
        for k in members
    ]


def test_an_extref_into_a_do_level_member_gets_the_path_and_its_quality():
    # "sps" is Ind[ST] as one structure (stVal, q, t): an ExtRef to Ind.stVal is member 0
    # at path [0], and its quality is the same member at path [1]
    gen = [
        GenIed(name="P", gocbs=[GenGoCB("g", ["bool", "sps"], 0x10, "01:0c:cd:01:00:10")]),
        GenIed(name="S", subs=[GenSub("P", 0, 1, int_addr="protection_trip")]),
    ]
    scl = parse_scl(io.BytesIO(scd_text(gen).encode()), "gen.scd")
    [b] = scl.ied("S").bindings
    assert (b.member, b.path) == (1, ())  # the ExtRef names the DO itself: the whole member
    data, _ = config_data(scl, "S")
    assert data["inputs"][0]["member"] == 1 and data["inputs"][0]["path"] == []
