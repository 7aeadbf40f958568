"""The receive rules on the shared captures (real IEDs: GE F650, SEL 351/2411, ABB): no
genuine frame is refused, and a wrong expectation (confRev, source), a simulated copy or
ndsCom made with the codec is refused with its reason."""

from __future__ import annotations

import dataclasses

import pytest

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.goose.effects import FrameClassified
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.replay.goose_replay import capture_frames
from goosectl.protocols.goose import decode_frame, encode_frame
from tests.support.peers import CAPTURES, capture_files

SAMPLE = CAPTURES / "iti_Sample_File_GOOSE.pcap"
Q05 = {"gocb_ref": "AA1C1Q05A1LD0/LLN0$GO$gcb_A", "appid": "0x3001", "dst": "01:0c:cd:01:00:00"}


def replay(frames, config: GooseConfig | None = None, simulation: bool = False):
    hub = GooseHub(config, simulation=simulation)
    verdicts: list[FrameClassified] = []
    started = False
    for _, ts, data in frames:
        if not started:
            hub.start(ts, ts)
            started = True
        hub.advance(ts)
        verdicts += [e for e in hub.frame(data, "A", ts) if type(e) is FrameClassified]
    return hub, verdicts


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.pcap*")), ids=lambda p: p.name)
def test_no_genuine_frame_of_a_real_ied_is_refused(path):
    capture_files()
    hub, verdicts = replay(capture_frames(path))
    assert verdicts and not [v for v in verdicts if v.refused is not None]
    views = hub.lgos()
    assert views and all(v.st and v.err == "none" and v.src for v in views)


def sub(**kw) -> GooseConfig:
    return GooseConfig.model_validate({"subscriptions": [Q05 | kw]})


def test_a_confrev_other_than_the_configured_one_is_refused():
    capture_files()
    hub, verdicts = replay(capture_frames(SAMPLE), sub(conf_rev=4))
    mine = [v for v in verdicts if v.stream.startswith("AA1C1Q05")]
    assert mine and {v.refused for v in mine} == {"confrev"}
    (view,) = hub.lgos()
    assert (view.st, view.err, view.conf_rev, view.rx_conf_rev) == (False, "confrev", 4, 5)
    hub, verdicts = replay(capture_frames(SAMPLE), sub(conf_rev=5))
    assert hub.lgos()[0].st and not [v for v in verdicts if v.refused]


def test_a_source_other_than_the_configured_one_is_foreign():
    capture_files()
    hub, verdicts = replay(capture_frames(SAMPLE), sub(src="0a:bb:fe:10:c9:99"))
    assert {v.cls for v in verdicts if v.stream} == {"foreign_source"}
    (view,) = hub.lgos()
    assert not view.st and view.err == "no_data"
    assert dict(view.refused)["foreign_source"] == len([v for v in verdicts if v.stream])


def rewritten(path, **fields):
    for number, ts, data in capture_frames(path):
        yield number, ts, encode_frame(dataclasses.replace(decode_frame(data), **fields))


def test_a_real_stream_made_simulated_is_refused_unless_in_simulation_mode():
    capture_files()
    frames = list(rewritten(SAMPLE, simulation=True, reserved1=0x8000))
    hub, verdicts = replay(frames, sub())
    assert {v.refused for v in verdicts if v.stream} == {"simulation"}
    assert not hub.lgos()[0].st
    hub, verdicts = replay(frames, sub(), simulation=True)
    view = hub.lgos()[0]
    assert view.st and view.sim_st and not [v for v in verdicts if v.refused]


def test_ndscom_on_a_real_stream_is_refused():
    capture_files()
    hub, verdicts = replay(rewritten(SAMPLE, nds_com=True), sub())
    assert {v.refused for v in verdicts if v.stream} == {"ndscom"}
    view = hub.lgos()[0]
    assert (view.st, view.err, view.nds_com) == (False, "ndscom", True)
