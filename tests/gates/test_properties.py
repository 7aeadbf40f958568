"""Hypothesis over the receive rules: whatever mix of frames arrives, no refused frame ever
changes an input, and no TRIP ever comes from data a rule refuses.

Each example is a run of protection trip frames into the bay controller: each frame with
its own value, Tr.q (good, invalid, questionable, test), confRev, ndsCom, shape, source,
simulation flags, and a gap that may exceed its timeAllowedToLive; the controller in mode
on or test, simulation mode on or off, questionable accepted or not. The oracle here is the
rules as the issue states them, written independently of controller/goose/gate.py.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goosectl.controller.goose.effects import FrameClassified
from goosectl.controller.logic.core import BayController
from goosectl.controller.logic.effects import DeviceCommand
from goosectl.protocols.goose import (
    BitString,
    Boolean,
    GooseFrame,
    Quality,
    UtcTime,
    Vlan,
    encode_frame,
)
from tests.support.examples import examples

from .bay import config

MS = 1_000_000
IED = bytes.fromhex("020000001001")
OTHER = bytes.fromhex("020000001002")
TEST_SET = bytes.fromhex("0200000099ee")
QUALITIES = {
    "good": Quality(),
    "invalid": Quality(validity="invalid"),
    "questionable": Quality(validity="questionable"),
    "test": Quality(test=True),
}

frames_st = st.fixed_dictionaries(
    {
        "new_state": st.booleans(),
        "value": st.booleans(),
        "q": st.sampled_from(sorted(QUALITIES)),
        "conf_rev": st.sampled_from([1, 1, 1, 2]),
        "nds_com": st.sampled_from([False, False, False, True]),
        "sim": st.sampled_from(["no", "no", "no", "both", "s_bit", "field"]),
        "foreign": st.sampled_from([False, False, False, False, True]),
        "extra_member": st.sampled_from([False, False, False, False, True]),
        "gap_ms": st.sampled_from([1, 5, 50, 400, 2500]),
    }
)


def build(f: dict, st_num: int, sq_num: int, t_ns: int) -> bytes:
    simulation = f["sim"] in ("both", "field")
    s_bit = f["sim"] in ("both", "s_bit")
    data = [Boolean(f["value"]), QUALITIES[f["q"]].to_bitstring()]
    if f["extra_member"]:
        data.append(BitString.from_bits("0000000000000"))
    return encode_frame(
        GooseFrame(
            gocb_ref="PROT1LD0/LLN0$GO$trip",
            dat_set="PROT1LD0/LLN0$dstrip",
            all_data=tuple(data),
            time_allowed_to_live=2000,
            t=UtcTime.from_ns(t_ns),
            st_num=st_num,
            sq_num=sq_num,
            simulation=simulation,
            conf_rev=f["conf_rev"],
            nds_com=f["nds_com"],
            dst=bytes.fromhex("010ccd010001"),
            src=TEST_SET if f["sim"] != "no" else (OTHER if f["foreign"] else IED),
            vlan=Vlan(10, 6),
            appid=0x1001,
            reserved1=0x8000 if s_bit else 0,
        )
    )


def stream_refuses(f: dict, sim_mode: bool, switched: bool) -> bool:
    """The subscription's rules, as the issue states them (confRev configured as 1, the
    shape as configured, the source as configured, simulation per LPHD.Sim)."""
    simulated = f["sim"] != "no"
    return (
        f["conf_rev"] != 1
        or f["nds_com"]
        or f["extra_member"]
        or (f["foreign"] and not simulated)
        or (simulated and not sim_mode)
        or (not simulated and switched)
    )


def quality_refuses(f: dict, test_mode: bool, accept_q: bool) -> bool:
    q = f["q"]
    return (
        q == "invalid" or (q == "questionable" and not accept_q) or (q == "test" and not test_mode)
    )


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    frames=st.lists(frames_st, min_size=1, max_size=25),
    test_mode=st.booleans(),
    sim_mode=st.booleans(),
    accept_q=st.booleans(),
)
def test_no_refused_frame_ever_changes_an_input(frames, test_mode, sim_mode, accept_q):
    cfg = config(inputs={0: {"accept_questionable": accept_q}})
    subs = [
        s.model_copy(update={"conf_rev": 1, "src": IED}) if s.name == "prot" else s
        for s in cfg.goose.subscriptions
    ]
    cfg = cfg.model_copy(update={"goose": cfg.goose.model_copy(update={"subscriptions": subs})})
    t = 0
    bay = BayController(cfg, t)
    bay.start(t)
    if test_mode:
        bay.set_mode("test", t)
    if sim_mode:
        bay.set_simulation(True, t)
    prot = bay.input_machines["prot"]
    numbers = {"real": [0, 0], "sim": [0, 0], "foreign": [0, 0]}
    switched = False
    for f in frames:
        t += f["gap_ms"] * MS
        bay.advance(t)  # a TAL that expired in the gap does so before the frame
        kind = "sim" if f["sim"] != "no" else ("foreign" if f["foreign"] else "real")
        n = numbers[kind]
        if f["new_state"] or n[0] == 0:
            n[0], n[1] = n[0] + 1, 0
        else:
            n[1] += 1
        before = (prot.state, prot.ctx["value"])
        bay.take_reports()
        bay.frame(build(f, n[0], n[1], t), "A", t)
        reports = bay.take_reports()
        after = (prot.state, prot.ctx["value"])
        refused = stream_refuses(f, sim_mode, switched)
        verdict = next(r for r in reports if type(r) is FrameClassified)
        trips = [r for r in reports if type(r) is DeviceCommand and r.command == "trip"]
        if refused:
            # the rules refused it: the frame's values never reach the input
            assert not verdict.deliver, (f, verdict)
            assert after in (before, ("invalid", False)), (f, before, after)
            assert not trips
        elif verdict.deliver and quality_refuses(f, test_mode, accept_q):
            assert after == ("invalid", False), (f, after)
            assert not trips
        elif verdict.deliver:
            assert after == ("valid", f["value"]), (f, after)
        if trips:
            assert f["value"] and not refused and not quality_refuses(f, test_mode, accept_q)
        if kind == "sim" and sim_mode and not refused and verdict.deliver:
            switched = True
        assert bay.hub.lgos()[0].sim_st == switched
