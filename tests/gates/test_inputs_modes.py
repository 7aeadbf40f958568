"""Inputs through their quality and fail-safe values, and the controller's modes, on the
bay controller with the demo's substation around it (tests/gates/bay.py)."""

from __future__ import annotations

import pytest

from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.config.validate import ConfigError
from goosectl.controller.demo.scenario import CILO
from goosectl.controller.engine import Journal
from goosectl.controller.logic.core import BayController
from goosectl.protocols.goose import Dbpos, Quality

from .bay import Bay, config

INVALID = Quality(validity="invalid")
QUESTIONABLE = Quality(validity="questionable")
TEST = Quality(test=True)


def closed_bay(cfg=None, journal=None) -> Bay:
    b = Bay(cfg, journal)
    b.close()
    b.run(200)
    assert b.state == "closed", b.reports
    return b


def test_before_any_interlock_data_no_close_is_permitted():
    """The interlock starts as `no data` (fail-safe: blocked), not as permitted."""
    bay = BayController(config(), 0)
    assert bay.bay.ctx["interlocks"] == {"bay2": "no data"}
    assert bay.input_machines["bay2-cilo"].state == "no_data"
    assert bay.input_machines["bay2-cilo"].ctx["value"] is False  # its fail-safe value
    bay.close_request(0)
    refused = [r.data for r in bay.take_reports() if getattr(r, "topic", "") == "close_refused"]
    assert refused and "interlock bay2 no data" in refused[-1]
    b = Bay()  # bay 2 publishes at start: permitted once its first frame arrived
    assert b.bay.bay.ctx["interlocks"] == {"bay2": "permit"}


def test_a_lost_interlock_blocks_until_its_stream_delivers_again():
    b = Bay()
    b.ieds.scheduler.feed(f"pub:{CILO}", "mute", b.now)  # bay 2 falls silent
    b.run(2500)  # bay 2 silent beyond its TAL
    assert b.bay.bay.ctx["interlocks"]["bay2"] == "invalid (lost)"
    changes = b.input_changes("bay2-cilo")
    assert (changes[-1].valid, changes[-1].reason, changes[-1].consequence) == (
        False,
        "lost",
        "close blocked",
    )
    b.close()
    assert b.commands("close") == []
    b.ieds.scheduler.feed(f"pub:{CILO}", "unmute", b.now)
    b.cilo(True)
    b.close()
    b.run(200)
    assert b.commands("close") == ["close"] and b.state == "closed"


@pytest.mark.parametrize(
    ("q", "reason"),
    [(INVALID, "q invalid"), (QUESTIONABLE, "q questionable"), (TEST, "q test")],
)
def test_a_trip_whose_quality_refuses_it_never_trips(q, reason):
    b = closed_bay()
    b.trip(True, q)
    b.run(200)
    assert b.commands("trip") == [] and b.state == "closed"
    last = b.input_changes("prot")[-1]
    assert (last.valid, last.value, last.reason) == (False, False, reason)
    # a good trip after it trips: the edge counts from the fail-safe value
    b.trip(True)
    assert b.commands("trip") == ["trip"]


def test_questionable_acts_where_the_input_accepts_it():
    b = closed_bay(config(inputs={0: {"accept_questionable": True}}))
    b.trip(True, QUESTIONABLE)
    assert b.commands("trip") == ["trip"]


def test_test_mode_acts_on_test_flagged_data_and_publishes_the_test_bit():
    b = closed_bay()
    b.trip(True, TEST)
    assert b.commands("trip") == []  # mode on: refused
    b.trip(False)
    b.set_mode("test")
    pos = b.published("$pos")[-1]
    assert Quality.from_bitstring(pos.all_data[1]).test  # republished with q.test
    b.trip(True, TEST)
    assert b.commands("trip") == ["trip"]  # test mode: acts, the device is operated
    b.run(200)
    assert b.state == "open"
    b.set_mode("on")
    assert not Quality.from_bitstring(b.published("$pos")[-1].all_data[1]).test


def test_entering_test_mode_rereads_a_held_test_flagged_value():
    b = closed_bay()
    b.trip(True, TEST)
    assert b.commands("trip") == []
    b.set_mode("test")  # the same frame's value now acts: rising from fail-safe false
    assert b.commands("trip") == ["trip"]


def test_test_blocked_runs_the_logic_but_withholds_every_command():
    j = Journal()
    b = closed_bay(journal=j)
    b.set_mode("test-blocked")
    b.trip(True)
    assert b.commands("trip") == []
    assert [(w.command, w.reason, w.mode) for w in b.withheld()] == [
        ("trip", "protection", "test-blocked")
    ]
    assert b.state == "tripping"  # the logic ran ...
    b.run(100)
    assert Dbpos(b.bay.link.view["position"]) is Dbpos.ON  # ... the breaker never moved
    j.flush()
    rows = [(r["event"], r["source"]) for r in j.rows("mode")]
    assert ("set_test_blocked", "on") in rows and ("withhold", "test_blocked") in rows


def test_off_publishes_nothing_and_commands_nothing():
    b = closed_bay()
    b.set_mode("off")
    b.sent.clear()
    b.run(3000)  # three heartbeats' worth
    assert b.sent == []
    b.trip(True)
    assert b.commands("trip") == [] and [w.command for w in b.withheld()] == ["trip"]
    b.set_mode("on")
    assert {decode.gocb_ref.rsplit("$", 1)[1] for decode in b.published("")} >= {"pos"}


def test_mode_and_simulation_changes_are_journaled_with_who_asked():
    j = Journal()
    b = Bay(journal=j)
    b.bay.set_mode("test", b.now, "operator")
    b.bay.set_simulation(True, b.now, "operator")
    assert not b.bay.set_mode("test", b.now)  # no change: nothing journaled
    b.bay.set_mode("on", b.now, "operator")
    j.flush()
    rows = [(r["event"], r["source"], r["target"]) for r in j.rows("mode")]
    assert rows == [
        ("set_test", "on", "test"),
        ("sim_on", "test", "test"),
        ("set_on", "test", "on"),
    ]
    with pytest.raises(ValueError, match="unknown mode 'bogus'"):
        b.bay.set_mode("bogus", b.now)


def test_every_input_validity_change_is_journaled():
    j = Journal()
    b = closed_bay(journal=j)
    b.trip(True, INVALID)
    b.trip(False)
    j.flush()
    rows = [(r["event"], r["source"], r["target"]) for r in j.rows("input:prot")]
    assert rows == [
        ("valid", "no_data", "valid"),
        ("invalid", "valid", "invalid"),
        ("valid", "invalid", "valid"),
    ]


def test_config_mode_and_yaml_booleans(tmp_path):
    text = DEFAULT_CONFIG.read_text()
    p = tmp_path / "bay.yaml"
    p.write_text(text.replace('mode: "on"', "mode: on"))  # YAML 1.1 reads a bare on as true
    assert load_config(p, ControllerConfig).logic.mode == "on"
    p.write_text(text.replace('mode: "on"', "mode: test/blocked"))
    assert load_config(p, ControllerConfig).logic.mode == "test-blocked"
    p.write_text(text.replace('mode: "on"', "mode: sleepy"))
    with pytest.raises(ConfigError) as exc:
        load_config(p, ControllerConfig)
    assert str(p) in str(exc.value) and "logic.mode" in str(exc.value)


def test_config_refuses_a_failsafe_that_would_permit_and_an_unknown_quality_member(tmp_path):
    text = DEFAULT_CONFIG.read_text()
    p = tmp_path / "bay.yaml"
    p.write_text(
        text.replace(
            "permit_when: [true],\n     failsafe: false",
            "permit_when: [true],\n     failsafe: true",
        )
    )
    with pytest.raises(ConfigError) as exc:
        load_config(p, ControllerConfig)
    msg = str(exc.value)
    assert str(p) in msg and "inputs.2" in msg and "would permit a close" in msg
    p.write_text(text.replace("quality: Tr.q", "quality: Tr.qq"))
    with pytest.raises(ConfigError) as exc:
        load_config(p, ControllerConfig)
    assert "inputs[0].quality: 'Tr.qq' is not in member_names['prot']" in str(exc.value)


def test_a_controller_configured_in_test_mode_starts_in_it():
    b = Bay(config(logic={"mode": "test"}))
    assert b.bay.mode_name == "test"
    # the position it publishes (once the device reported it) carries the test bit
    pos = b.published("$pos")[-1]
    assert pos.st_num > 1 and Quality.from_bitstring(pos.all_data[1]).test


def test_an_agent_device_command_is_withheld_too(tmp_path):
    """test-blocked and off keep every command from the device, the agent's included."""
    from goosectl.controller.agent.host import AgentBay
    from goosectl.controller.agent.planner import FolderPlanner
    from goosectl.controller.agent.service import AgentService
    from goosectl.controller.logic.effects import CommandWithheld
    from goosectl.controller.replay.virtual_wire import VirtualWire
    from goosectl.firmware_sim.core import Firmware

    (tmp_path / "poke.yaml").write_text(
        "name: poke\nstart: trip\nsteps:\n"
        "  trip: {tool: device, args: {command: trip}, timeout_ms: 200}\n"
    )
    bay = BayController(config(), 0)
    host = AgentBay(bay, AgentService(FolderPlanner(tmp_path)))
    fw = Firmware(now_ns=0)
    wire = VirtualWire(host, fw)
    bay.start(0)
    host.opened(0)
    wire.run_until(100 * 1_000_000)
    bay.set_mode("test-blocked", wire.now_ns)
    assert host.handle({"op": "run", "procedure": "poke", "params": {}}, wire.now_ns)["ok"]
    wire.run_until(wire.now_ns + 500 * 1_000_000)
    st = host.service.status("s1")
    assert st["outcome"] == "failed" and "trip withheld: mode test-blocked" in str(st)
    withheld = [r for r in bay.take_reports() if type(r) is CommandWithheld]
    assert [(w.command, w.mode) for w in withheld] == [("trip", "test-blocked")]
    assert fw.stats.operations.get("open", 0) == 0
