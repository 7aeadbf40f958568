"""The receive rules per subscription (controller/goose/gate.py) and the LGOS view, on the
virtual clock: frames the codec builds, one rule at a time."""

from __future__ import annotations

import pytest

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.engine import Journal
from goosectl.controller.goose.effects import FrameClassified, LgosView
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.goose import Boolean, GooseFrame, UtcTime, encode_frame

MS = 1_000_000
GOCB = "IED1LD0/LLN0$GO$trip"
DST = bytes.fromhex("010ccd010010")
IED = bytes.fromhex("020000000001")
OTHER = bytes.fromhex("020000000002")
TEST_SET = bytes.fromhex("0200000000ee")


def frame(
    st: int,
    sq: int,
    value: bool = False,
    *,
    src: bytes = IED,
    conf_rev: int = 1,
    nds_com: bool = False,
    simulation: bool = False,
    s_bit: bool | None = None,
    members: int = 1,
    tal: int = 1000,
    t_s: int | None = None,
) -> bytes:
    s_bit = simulation if s_bit is None else s_bit
    return encode_frame(
        GooseFrame(
            gocb_ref=GOCB,
            dat_set="IED1LD0/LLN0$ds",
            all_data=tuple(Boolean(value) for _ in range(members)),
            time_allowed_to_live=tal,
            t=UtcTime(1_750_000_000 + st if t_s is None else t_s, 0, 0x0A),
            st_num=st,
            sq_num=sq,
            simulation=simulation,
            conf_rev=conf_rev,
            nds_com=nds_com,
            dst=DST,
            src=src,
            appid=0x1010,
            reserved1=0x8000 if s_bit else 0,
        )
    )


def hub(journal: Journal | None = None, simulation: bool = False, **sub) -> GooseHub:
    base = {"gocb_ref": GOCB, "appid": 0x1010, "dst": "01:0c:cd:01:00:10", "members": ["boolean"]}
    base.update(sub)
    cfg = GooseConfig.model_validate({"subscriptions": [base]})
    return GooseHub(cfg, journal, simulation=simulation)


class Feed:
    """Frames in at 1 ms steps; keeps every verdict and every LGOS view."""

    def __init__(self, h: GooseHub) -> None:
        self.h, self.t = h, 0
        self.verdicts: list[FrameClassified] = []
        self.views: list[LgosView] = []

    def __call__(self, *bufs: bytes, gap_ms: int = 1) -> list[FrameClassified]:
        got = []
        for buf in bufs:
            self.t += gap_ms * MS
            out = self.h.frame(buf, "A", self.t)
            got += [e for e in out if type(e) is FrameClassified]
            self.views += [e for e in out if type(e) is LgosView]
        self.verdicts += got
        return got

    def advance(self, ms: int) -> None:
        self.t += ms * MS
        self.views += [e for e in self.h.advance(self.t) if type(e) is LgosView]

    @property
    def lgos(self) -> LgosView:
        return self.h.lgos()[0]


def delivered(verdicts) -> list[tuple[int, bool]]:
    return [(v.st_num, v.values[0].value) for v in verdicts if v.deliver]


def test_a_valid_stream_delivers_its_states_and_says_so_in_lgos():
    f = Feed(hub())
    f(frame(1, 0), frame(1, 1), frame(2, 0, True))
    assert delivered(f.verdicts) == [(1, False), (2, True)]
    v = f.lgos
    assert (v.st, v.sim_st, v.err, v.last_st_num, v.conf_rev, v.rx_conf_rev) == (
        True, False, "none", 2, 1, 1,
    )  # fmt: skip
    assert (v.nds_com, v.src) == (False, "02:00:00:00:00:01")
    assert [x.st for x in f.views] == [True]  # one change: waiting -> valid


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (dict(conf_rev=2), "confrev"),
        (dict(nds_com=True), "ndscom"),
        (dict(members=2), "shape"),
    ],
)
def test_a_refused_rule_stops_the_values_and_a_good_frame_revives_them(bad, code):
    f = Feed(hub())
    f(frame(1, 0), frame(1, 1))
    refused = f(frame(2, 0, True, **bad), frame(2, 1, True, **bad))
    assert [(v.deliver, v.refused) for v in refused] == [(False, code), (False, code)]
    assert (f.lgos.st, f.lgos.err) == (False, code)
    assert dict(f.lgos.refused) == {code: 2}
    # the publisher fixes itself: its next state acts again
    back = f(frame(3, 0, False))
    assert delivered(back) == [(3, False)] and f.lgos.st
    assert [(x.st, x.err) for x in f.views] == [(True, "none"), (False, code), (True, "none")]


def test_after_a_refusal_a_plain_retransmission_delivers_the_state_it_repeats():
    """confRev back to the expected one without a new state: the heartbeat revives."""
    f = Feed(hub(conf_rev=1))
    f(frame(1, 0, True, conf_rev=9))
    assert not f.lgos.st and f.lgos.err == "confrev" and f.lgos.rx_conf_rev == 9
    got = f(frame(1, 1, True, conf_rev=1))
    assert [(v.cls, v.deliver, v.values[0].value) for v in got] == [("retransmission", True, True)]
    assert f.lgos.st and f.lgos.rx_conf_rev == 1


def test_expected_confrev_is_the_configured_one_else_the_first_seen():
    f = Feed(hub())
    f(frame(1, 0, conf_rev=7))
    assert f.lgos.st and f.lgos.conf_rev == 7  # learned
    assert [v.refused for v in f(frame(2, 0, True, conf_rev=8))] == ["confrev"]
    f = Feed(hub(conf_rev=8))
    assert [v.refused for v in f(frame(1, 0, conf_rev=7))] == ["confrev"]
    assert (f.lgos.conf_rev, f.lgos.rx_conf_rev) == (8, 7)


def test_a_second_source_of_a_learned_gocbref_is_a_conflict_never_a_lockout():
    """No source configured: the first one seen is learned (with an alarm), and frames from
    a second one are a sequence of their own, a conflict (a flood from another
    MAC before the IED made the attacker's MAC the expected one and locked the IED out)."""
    f = Feed(hub())
    f(frame(1, 0))
    foreign = f(frame(7, 0, True, src=OTHER), frame(7, 1, True, src=OTHER))
    assert [(v.cls, v.flags[:2], v.deliver) for v in foreign] == [
        ("first", ("two_sources", "conflict"), True),
        ("retransmission", ("conflict",), False),
    ]
    # the genuine stream goes on, judged against its own sequence: never refused
    assert [(v.cls, v.deliver, v.flags[0]) for v in f(frame(1, 1), frame(2, 0, True))] == [
        ("retransmission", False, "conflict"),
        ("new_state", True, "conflict"),
    ]
    assert not f.lgos.st and f.lgos.err == "conflict" and f.lgos.src == "02:00:00:00:00:01"


def test_a_configured_source_is_the_only_one_accepted():
    f = Feed(hub(src="02:00:00:00:00:02"))
    assert [v.cls for v in f(frame(1, 0))] == ["foreign_source"]
    assert not f.lgos.st and f.lgos.err == "no_data"
    assert delivered(f(frame(1, 0, src=OTHER))) == [(1, False)]


def test_simulated_frames_never_act_while_simulation_mode_is_off():
    f = Feed(hub())
    f(frame(1, 0))
    for kw in (dict(simulation=True), dict(simulation=False, s_bit=True)):
        got = f(frame(5, 0, True, src=TEST_SET, **kw))
        assert [(v.deliver, v.refused) for v in got] == [(False, "simulation")]
    # the real stream is undisturbed: its own numbers, still valid
    assert delivered(f(frame(2, 0, True))) == [(2, True)]
    assert f.lgos.st and not f.lgos.sim_st and dict(f.lgos.refused) == {"simulation": 2}


def test_simulation_mode_switches_a_subscription_to_its_simulated_stream_and_back():
    h = hub(simulation=True)
    f = Feed(h)
    assert delivered(f(frame(1, 0))) == [(1, False)]  # real frames act until ...
    got = f(frame(40, 0, True, src=TEST_SET, simulation=True))  # ... the first simulated one
    assert delivered(got) == [(40, True)] and f.lgos.sim_st and f.lgos.st
    assert f.lgos.src == "02:00:00:00:00:ee" and f.lgos.last_st_num == 40
    real = f(frame(2, 0, False))
    assert [(v.deliver, v.refused) for v in real] == [(False, "sim_switch")]
    assert f.lgos.st  # the simulated stream it takes is valid
    assert delivered(f(frame(41, 0, False, src=TEST_SET, simulation=True))) == [(41, False)]
    # simulation off: simulated frames are refused, the real stream acts again from its
    # next frame (here a plain retransmission of its current state)
    f.views.clear()
    f.h.set_simulation(False, f.t)
    f.views += [x for x in f.h.drain() if type(x) is LgosView]
    assert not f.lgos.st and not f.lgos.sim_st and f.lgos.err == "no_data"
    assert [v.refused for v in f(frame(41, 1, src=TEST_SET, simulation=True))] == ["simulation"]
    assert delivered(f(frame(2, 1, False))) == [(2, False)] and f.lgos.st


def test_tal_expiry_makes_the_subscription_invalid_until_the_stream_restarts():
    f = Feed(hub())
    f(frame(1, 0, tal=100))
    f.advance(101)
    assert (f.lgos.st, f.lgos.err) == (False, "lost")
    # the publisher restarted: stNum 1 again, a `t` after its last state's
    restarted = frame(1, 0, True, tal=100, t_s=1_750_000_100)
    assert delivered(f(restarted, gap_ms=500)) == [(1, True)]
    assert f.lgos.st


def test_every_lgos_change_is_journaled():
    j = Journal()
    f = Feed(hub(journal=j))
    f(frame(1, 0), frame(2, 0, conf_rev=3), frame(3, 0))
    j.flush()
    lgos = [
        (r["event"], r["source"], r["target"]) for r in j.rows() if r["machine"].startswith("lgos:")
    ]
    assert lgos == [
        ("source", "waiting", "waiting"),
        ("ok", "waiting", "valid"),
        ("confrev", "valid", "invalid"),
        ("ok", "invalid", "valid"),
    ]
