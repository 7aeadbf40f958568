"""The bay controller end to end on the virtual clock: GOOSE in, device over the link, GOOSE
out. The scenario is built by goosectl's own publishers (controller/demo/scenario.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.config.validate import ConfigError
from goosectl.controller.demo.scenario import EPOCH, S, build
from goosectl.controller.engine.effects import Alarm, Notify
from goosectl.controller.goose.effects import StreamState
from goosectl.controller.logic.core import BayController, BayStep
from goosectl.controller.logic.effects import DeviceCommand
from goosectl.controller.replay.bay_replay import BayReplay
from goosectl.controller.shell.journal_store import open_journal
from goosectl.firmware_sim.core import Firmware
from goosectl.protocols.ethernet.pcap import read_capture
from goosectl.protocols.goose import decode_frame

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "controller" / "bay1.yaml"  # a link to the packaged default


def run(tmp_path: Path, scn=None, name: str = "run"):
    cfg = load_config(CONFIG, ControllerConfig)
    scn = scn or build()
    t0 = scn.frames[0][0]
    journal = open_journal(tmp_path / f"{name}.sqlite", durability="group")
    bay = BayController(cfg, t0, journal)
    reports: list = []
    replay = BayReplay(
        bay,
        Firmware(now_ns=t0),
        tmp_path / f"{name}.pcap",
        lambda t, r: reports.append((t - EPOCH, r)),
    )
    replay.run(scn.frames, replay.inject(scn.faults), scn.end_ns)
    replay.close()
    return bay, reports, tmp_path / f"{name}.pcap", journal


def at(reports, kind, **match):
    return [
        (t, r)
        for t, r in reports
        if isinstance(r, kind) and all(getattr(r, k) == v for k, v in match.items())
    ]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return run(tmp_path_factory.mktemp("bay"))


def test_trip_opens_breaker_and_is_acknowledged(scenario):
    _, reports, out, _ = scenario
    trips = at(reports, DeviceCommand, command="trip", reason="protection")
    assert [round(t / S, 3) for t, _ in trips] == [6.0, 9.0, 15.0]
    opened = [
        t
        for t, r in reports
        if isinstance(r, BayStep) and ("tripping", "position", "open") in r.transitions
    ]
    assert [round(t / S, 3) for t in opened] == [6.03, 9.03]  # 30 ms operating time
    frames = [decode_frame(f.data) for f in read_capture(out)]
    acks = [f for f in frames if f.gocb_ref.endswith("tripack") and f.sq_num == 0]
    assert [f.all_data[0].value for f in acks][1:] == [True, True, True]


def test_position_published_at_once_as_new_states(scenario):
    from goosectl.controller.link.effects import LinkEvent
    from goosectl.protocols.goose import Dbpos

    _, reports, out, _ = scenario
    changes = [
        (t, r.get("position"))
        for t, r in reports
        if isinstance(r, LinkEvent) and r.kind == "position_changed"
    ]
    pos = [(f.ts_ns - EPOCH, decode_frame(f.data)) for f in read_capture(out)]
    pos = [
        (t, Dbpos.from_bitstring(fr.all_data[0]).name, fr.st_num)
        for t, fr in pos
        if fr.gocb_ref.endswith("$pos") and fr.sq_num == 0
    ]
    # first the initial state, then the device's position at link-up (open) ...
    assert [p[1] for p in pos[:2]] == ["INTERMEDIATE", "OFF"]
    # ... then every change the device reported, published at the same virtual instant
    assert [(t, name) for t, name, _ in pos[2:]] == changes
    assert [c[1] for c in changes[:4]] == ["INTERMEDIATE", "ON", "INTERMEDIATE", "OFF"]
    assert [st for *_, st in pos] == list(range(1, len(pos) + 1))


def test_stuck_mechanism_gives_breaker_failure_rbrf_and_retrip(scenario):
    bay, reports, out, _ = scenario
    assert bay.bay.state == "breaker_failure"
    bf = [
        t
        for t, r in reports
        if isinstance(r, BayStep) and ("tripping", "bf_timeout", "breaker_failure") in r.transitions
    ]
    assert [round(t / S, 3) for t in bf] == [15.15]  # breaker_failure_ms = 150
    retrip = at(reports, DeviceCommand, command="trip", reason="re-trip")
    assert [round(t / S, 3) for t, _ in retrip] == [15.15]
    rbrf = [decode_frame(f.data) for f in read_capture(out)]
    rbrf = [f for f in rbrf if f.gocb_ref.endswith("rbrf") and f.all_data[0].value]
    assert rbrf and rbrf[0].sq_num == 0
    assert at(reports, Alarm, name="breaker_failure", active=True)


def test_interlock_blocks_a_close(scenario):
    _, reports, _, _ = scenario
    refused = [
        (round(t / S, 3), r.data)
        for t, r in reports
        if isinstance(r, Notify) and r.topic == "close_refused"
    ]
    # at 6.5 s bay 2's stream is lost (silent since 3.9 s): its interlock fell back to
    # fail-safe; at 12.5 s bay 2 withdrew its enable
    assert refused == [
        (6.5, ("interlock bay2 invalid (lost)",)),
        (12.5, ("interlock bay2 blocked",)),
    ]
    closes = at(reports, DeviceCommand, command="close")
    assert [round(t / S, 3) for t, _ in closes] == [0.5, 7.0, 13.5]


def test_network_a_outage_loses_no_trip(scenario):
    _, reports, _, _ = scenario
    side_a = [(round(t / S, 1), r.state) for t, r in at(reports, StreamState, side="A")]
    assert side_a[0] == (0.0, "valid")
    lost = [t for t, s in side_a if s == "lost"]
    assert lost and 8.0 < lost[0] <= 10.0  # within A's TAL (2 s) of its last frame
    assert any(s == "valid" and t >= 11.0 for t, s in side_a)  # recovery reported
    # the protection stream itself never was lost (bay 2's was: the scenario silences it)
    assert [
        r.stream.split("@")[0] for _, r in at(reports, StreamState, side="-", state="lost")
    ] == ["bay2-cilo"]
    # the trip at 9.0 s came only on B and still opened the breaker
    assert [round(t / S, 3) for t, _ in at(reports, DeviceCommand, reason="protection")][1] == 9.0


def test_replay_is_deterministic(tmp_path):
    a = run(tmp_path, name="a")
    b = run(tmp_path, name="b")
    ja = [tuple(r.values()) for r in a[3].rows()]
    jb = [tuple(r.values()) for r in b[3].rows()]
    assert ja == jb and len(ja) > 100
    assert a[2].read_bytes() == b[2].read_bytes()


def test_lost_interlock_stream_blocks_close_and_alarms(tmp_path):
    scn = build(duration_s=17.0)
    # bay 2 falls silent after 2 s: its TAL (2 s after the last heartbeat) expires
    cilo = [(t, d) for t, d in scn.frames]
    from goosectl.protocols.goose import parse_header

    scn.frames = [
        (t, d) for t, d in cilo if not (parse_header(d).appid == 0x1002 and t > EPOCH + 2 * S)
    ]
    bay, reports, _, _ = run(tmp_path, scn, "lost")
    assert at(reports, Alarm, name="stream_lost:bay2-cilo", active=True)
    refused = [r.data for _, r in reports if isinstance(r, Notify) and r.topic == "close_refused"]
    assert ("interlock bay2 invalid (lost)",) in refused
    assert bay.bay.ctx["interlocks"]["bay2"] == "invalid (lost)"


def test_bad_config_names_file_key_and_reason(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        CONFIG.read_text().replace("{stream: scada, member: 0", "{stream: nosuch, member: 0")
    )
    with pytest.raises(ConfigError) as exc:
        load_config(bad, ControllerConfig)
    msg = str(exc.value)
    assert str(bad) in msg and "inputs[1].stream: 'nosuch' is not a subscription" in msg
