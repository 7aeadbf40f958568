"""SPEC.md is what firmware is written from: its tables and examples must match the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from goosectl.protocols.serial import crc
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.framing import MAX_ENCODED, MAX_PAYLOAD, MAX_WIRE
from goosectl.protocols.serial.sequence import DEDUP_WINDOW, EVENT_QUEUE
from goosectl.protocols.serial.stream import frame

SPEC = (Path(m.__file__).parent / "SPEC.md").read_text(encoding="utf-8")


def test_every_message_row_matches_the_table() -> None:
    rows = re.findall(r"^\| 0x([0-9A-F]{2}) \| (\w+) \| (\d+) \|", SPEC, re.MULTILINE)
    documented = {int(code, 16): (name, int(length)) for code, name, length in rows}
    assert documented == {code: (s.name, s.size) for code, s in m.SPECS.items()}


def test_body_offsets_match_the_table() -> None:
    for spec in m.SPECS.values():
        row = re.search(rf"^\| 0x{spec.code:02X} \| {spec.name} \|.*$", SPEC, re.MULTILINE)
        assert row, spec.name
        for (name, code, _), off in zip(spec.fields, spec.offsets, strict=True):
            width = {"B": "u8", "H": "u16", "I": "u32"}[code]
            assert f"{off}: {width} {name}" in row.group(0), (spec.name, name)


def test_nack_reason_codes_match() -> None:
    rows = re.findall(r"^\| (\w+) \| 0x([0-9A-F]{2}) \|", SPEC, re.MULTILINE)
    assert {name: int(code, 16) for name, code in rows} == {r.name: int(r) for r in m.NackReason}


def test_config_parameters_match() -> None:
    rows = re.findall(
        r"^\| (\d) \| (\w+) \| [^|]+ \| (\d+) \| (\d+) \| (\d+) \|", SPEC, re.MULTILINE
    )
    documented = {int(i): (n, int(lo), int(hi), int(d)) for i, n, lo, hi, d in rows}
    assert documented == {
        int(p): (p.name, r.minimum, r.maximum, r.default) for p, r in m.CONFIG_PARAMS.items()
    }


def test_status_flag_bits_match() -> None:
    rows = re.findall(r"^\| (\d) \| ([A-Z_]+)", SPEC, re.MULTILINE)
    bits = {int(b): n for b, n in rows if n in m.StatusFlag.__members__}
    assert bits == {f.bit_length() - 1: f.name for f in m.StatusFlag}


def test_constants_are_the_documented_ones() -> None:
    assert f"**{MAX_PAYLOAD}** bytes (`MAX_PAYLOAD`)" in SPEC
    assert f"**{MAX_ENCODED}** bytes (`MAX_ENCODED`)" in SPEC
    assert f"**{MAX_WIRE}** bytes on the wire (`MAX_WIRE`)" in SPEC
    assert f"**0x{crc.CHECK:04X}**" in SPEC and crc.NAME in SPEC
    assert f"`DEDUP_WINDOW` (recommended {DEDUP_WINDOW}" in SPEC
    assert f"`EVENT_QUEUE` = {EVENT_QUEUE}" in SPEC


@pytest.mark.parametrize(
    "msg",
    [
        m.Trip(1),
        m.Ack(1, m.MsgType.TRIP, m.AckResult.STARTED, m.Dbpos.ON, 0x0203, 0, 0, 17, 1),
        m.PowerUp(1, 18, m.ResetCause.POWER_ON),
        m.EventAck(1, 2),
    ],
    ids=lambda x: type(x).__name__,
)
def test_worked_examples_are_what_the_code_emits(msg: m.Message) -> None:
    payload = m.encode_payload(msg).hex(" ")
    wire = frame(msg).hex(" ")
    assert f"payload  {payload}\nwire     {wire}\n" in SPEC
