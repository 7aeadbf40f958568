"""An SCL file as the config, and YAML overlays on it: what SCL sets stays set, what the
overlay adds is added, every mistake names the file, the line, the key and the reason."""

from __future__ import annotations

import shutil

import pytest

from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.config.validate import ConfigError
from tests.support.peers import REPO, SCL
from tests.support.procs import goosectl

SCD = REPO / "examples" / "scl" / "bay1.scd"
OVERLAY = REPO / "examples" / "scl" / "bay1.yaml"


def test_the_demo_scd_as_config_reads_what_the_xml_says():
    cfg = load_config(SCD, ControllerConfig, "GCTL1")
    prot, cilo, scada = cfg.goose.subscriptions
    # PROT1's trip: on StationBus VLAN 00A and, through AP2 (ServerAt AP1), on
    # StationBusB VLAN 00B with the same MAC and APPID: one stream on two networks
    assert (prot.gocb_ref, prot.appid, prot.dst.hex(":")) == (
        "PROT1LD0/LLN0$GO$trip",
        0x1001,
        "01:0c:cd:01:00:01",
    )
    assert (prot.vlan, prot.ab.vlan_a, prot.ab.vlan_b, prot.ab.mode) == (10, 10, 11, "merge")
    assert prot.members == ("boolean", "bit-string/13") and prot.conf_rev == 1
    assert (prot.min_time_ms, prot.max_time_ms) == (4, 1000)
    assert prot.dat_set == "PROT1LD0/LLN0$dstrip" and prot.go_id is None
    assert cilo.ab is None and cilo.vlan is None and scada.members == ("boolean",)
    # GCTL1's own control blocks, on both subnetworks with one address each: both sides
    assert [(p.gocb_ref, p.appid, p.go_id, p.sides) for p in cfg.goose.publishers] == [
        ("GCTL1LD0/LLN0$GO$pos", 0x2001, "Q0Pos", "both"),
        ("GCTL1LD0/LLN0$GO$tripack", 0x2002, "Q0TripAck", "both"),
        ("GCTL1LD0/LLN0$GO$rbrf", 0x2003, "Q0Rbrf", "both"),
    ]
    assert cfg.goose.publishers[0].members == ("bit-string/2", "bit-string/13", "utc-time")
    # inputs from intAddr; Tr.q (member 1 of the trip) is the trip's quality
    got = [(i.stream, i.member, i.event, i.interlock) for i in cfg.inputs]
    assert got == [
        ("PROT1LD0/LLN0$GO$trip", 0, "protection_trip", None),
        ("BAY2LD0/LLN0$GO$cilo", 0, "interlock", "bay2"),
        ("SCADA1LD0/LLN0$GO$cmd", 0, "close_request", None),
    ]
    if "quality" in type(cfg.inputs[0]).model_fields:
        assert cfg.inputs[0].quality == 1
    # publications from the LN semantics of each published data set
    assert [(p.topic, list(p.members)) for p in cfg.publications] == [
        ("position", ["position", "quality", "t"]),
        ("trip_ack", ["trip", "now"]),
        ("bf_trip", ["bf_trip", "now"]),
    ]


def test_the_overlay_adds_names_device_and_initial_values_only():
    cfg = load_config(OVERLAY, ControllerConfig)
    assert [s.label for s in cfg.goose.subscriptions] == ["prot", "bay2-cilo", "scada"]
    assert cfg.goose.subscriptions[0].ab.vlan_b == 11  # still the SCL's
    pos = cfg.goose.publishers[0]
    assert pos.name == "xcbr-pos" and pos.initial[1]["value"] == "0100000000000"
    assert cfg.goose.interface_a == "eth0" and cfg.device.port == "sim"
    # replay and listen take the goose section of the same overlay
    assert load_config(OVERLAY, GooseConfig).subscriptions[0].label == "prot"


def overlay(tmp_path, text: str):
    shutil.copy(SCD, tmp_path / "bay1.scd")
    p = tmp_path / "o.yaml"
    p.write_text("scl: {file: bay1.scd, ied: GCTL1}\n" + text)
    return p


def test_an_overlay_may_not_change_what_the_scl_says(tmp_path):
    p = overlay(
        tmp_path,
        "goose:\n  subscriptions:\n    - gocb_ref: PROT1LD0/LLN0$GO$trip\n"
        "      appid: 0x1005\n      conf_rev: 7\n",
    )
    with pytest.raises(ConfigError) as exc:
        load_config(p, ControllerConfig)
    msg = str(exc.value)
    assert f"{p}:5: goose.subscriptions.0.appid: set by the SCL (4097)" in msg
    assert f"{p}:6: goose.subscriptions.0.conf_rev: set by the SCL (1)" in msg


def test_an_overlay_entry_for_a_stream_the_scl_does_not_have(tmp_path):
    p = overlay(tmp_path, "goose:\n  subscriptions:\n    - {gocb_ref: X/LLN0$GO$y, name: n}\n")
    with pytest.raises(
        ConfigError, match=r"o.yaml:4: goose.subscriptions.0: 'X/LLN0\$GO\$y' is not"
    ):
        load_config(p, ControllerConfig)


def test_an_overlay_error_the_model_finds_names_the_overlay_line(tmp_path):
    p = overlay(tmp_path, "logic:\n  breaker_failure_ms: -5\n")
    with pytest.raises(ConfigError, match=r"o.yaml:3: logic.breaker_failure_ms"):
        load_config(p, ControllerConfig)


def test_which_ied_and_wrong_ied(tmp_path):
    with pytest.raises(
        ConfigError, match=r"which IED\? give --ied NAME \(IEDs: PROT1, BAY2, SCADA1, GCTL1\)"
    ):
        load_config(SCD, ControllerConfig)
    with pytest.raises(ConfigError, match='no IED "GCTL9"'):
        load_config(SCD, ControllerConfig, "GCTL9")
    with pytest.raises(ConfigError, match="--ied is for SCL files"):
        load_config(REPO / "examples" / "controller" / "bay1.yaml", ControllerConfig, "GCTL1")
    # an SCL file that is not XML: the reader's error, with the line
    bad = tmp_path / "bad.cid"
    bad.write_text("<SCL>\n<IED>\n")
    with pytest.raises(ConfigError, match=r"bad.cid:3: not well-formed XML"):
        load_config(bad, ControllerConfig, "X")


def test_a_file_with_one_ied_needs_no_ied(tmp_path):
    cfg = load_config(SCL / "LaterBindingGOOSE2007B4.scd", GooseConfig, "GOOSE_Subscriber")
    [sub] = cfg.subscriptions
    assert (sub.appid, sub.members) == (
        2,
        ("integer", "bit-string/13", "boolean", "boolean", "boolean"),
    )


def test_cli_errors_exit_2_naming_the_ieds():
    r = goosectl("demo", "--in-memory", "--config", str(SCD), check=False)
    assert r.returncode == 2
    assert "which IED? give --ied NAME (IEDs: PROT1, BAY2, SCADA1, GCTL1)" in r.stderr


def _secured_scd(tmp_path, value: str):
    """The demo SCD with the protection trip's GSEControl declaring securityEnable."""
    text = SCD.read_text()
    marker = '<GSEControl name="trip"'
    assert marker in text
    path = tmp_path / "secured.scd"
    path.write_text(text.replace(marker, f'{marker} securityEnable="{value}"', 1))
    return path


@pytest.mark.parametrize(
    ("value", "auth"),
    [("Signature", "required"), ("SignatureAndEncryption", "required"), ("None", "off")],
)
def test_security_enable_sets_the_subscription_policy(tmp_path, value, auth):
    cfg = load_config(_secured_scd(tmp_path, value), ControllerConfig, "GCTL1")
    prot, cilo, _ = cfg.goose.subscriptions
    assert prot.auth == auth
    assert cilo.auth == "off"  # no securityEnable: the overlay decides, default off


def test_an_overlay_may_not_weaken_what_the_scl_says(tmp_path):
    scd = _secured_scd(tmp_path, "Signature")
    overlay = tmp_path / "bay.yaml"
    overlay.write_text(
        f"scl: {{file: {scd}, ied: GCTL1}}\ngoose:\n  subscriptions:\n"
        "    - {gocb_ref: 'PROT1LD0/LLN0$GO$trip', auth: 'off'}\n"
        "    - {gocb_ref: 'BAY2LD0/LLN0$GO$cilo', auth: required}\n"
    )
    with pytest.raises(ConfigError, match=r"subscriptions\.0\.auth: set by the SCL"):
        load_config(overlay, ControllerConfig)
