"""`goosectl decode`: table and JSON output, filters, error lines that do not stop the
run, non-GOOSE frames skipped, format detected by magic number, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goosectl.controller.cli import main as goosectl
from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose import (
    Boolean,
    GooseFrame,
    Integer,
    Structure,
    UtcTime,
    Vlan,
    encode_frame,
)
from tests.support import procs


def _frame(**kw) -> bytes:
    base = {
        "gocb_ref": "IED1LD0/LLN0$GO$gcb01",
        "dat_set": "IED1LD0/LLN0$DS01",
        "all_data": (Boolean(True), Structure((Integer(5),))),
        "t": UtcTime(1_700_000_000, 0x800000, 0x0A),
        "appid": 0x1001,
    }
    return encode_frame(GooseFrame(**{**base, **kw}))


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    bad = bytearray(_frame(st_num=3))
    i = bad.rindex(bytes.fromhex("850105"))
    bad[i + 1] = 0x09  # allData[1].structure[0] claims 9 octets
    arp = bytes.fromhex("ffffffffffff0011223344550806") + bytes(28)
    frames = [
        _frame(st_num=1),
        arp,
        _frame(st_num=2, vlan=Vlan(10, 4), appid=0x2002, gocb_ref="Other/LLN0$GO$x"),
        bytes(bad),
        _frame(st_num=4, reserved1=0x8000),
    ]
    path = tmp_path / "cap.dat"
    with PcapWriter(path) as w:
        for n, data in enumerate(frames):
            w.write(data, 1_700_000_000_000_000_000 + n * 250_000_000)
    return path


def test_json_lines(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert goosectl(["decode", str(capture), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["frame"] for x in lines] == [1, 3, 4, 5]  # ARP (frame 2) skipped
    first = lines[0]
    assert first["time"] == 1_700_000_000.0 and first["vlan"] is None
    assert first["allData"] == [
        {"type": "boolean", "value": True},
        {"type": "structure", "value": [{"type": "integer", "value": 5}]},
    ]
    assert first["t"] == {"iso": "2023-11-14T22:13:20.500000000Z", "seconds": 1_700_000_000,
                          "fraction": 0x800000, "quality": 10}  # fmt: skip
    assert lines[1]["vlan"] == {"id": 10, "priority": 4} and lines[1]["appid"] == 0x2002
    err = lines[2]
    assert err["path"] == "allData[1].structure[0]" and err["kind"] == "truncated"
    assert isinstance(err["offset"], int) and "frame" in err
    assert lines[3]["simulated"] is True and lines[3]["stNum"] == 4


def test_table_and_filters(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert goosectl(["decode", str(capture)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4
    assert "appid=0x1001" in out[0] and "stNum=1" in out[0] and "data=[TRUE, {5}]" in out[0]
    assert "vlan=10/4" in out[1]
    assert "error:" in out[2] and "allData[1].structure[0]" in out[2] and out[2].split()[0] == "4"
    assert goosectl(["decode", str(capture), "--appid", "0x2002"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert goosectl(["decode", str(capture), "--gocbref", "Other/LLN0$GO$x", "--json"]) == 0
    (only,) = capsys.readouterr().out.splitlines()
    assert json.loads(only)["frame"] == 3


def test_unreadable_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture at all")
    assert goosectl(["decode", str(junk)]) == 2
    assert "neither pcap nor pcapng" in capsys.readouterr().err
    assert goosectl(["decode", str(tmp_path / "missing.pcap")]) == 2


def test_truncated_file_prints_frames_then_exits_2(capture: Path) -> None:
    cut = capture.with_suffix(".cut")
    cut.write_bytes(capture.read_bytes()[:-5])
    run = procs.goosectl("decode", str(cut), check=False, timeout=60)
    assert run.returncode == 2
    assert len(run.stdout.splitlines()) == 3 and "cut short" in run.stderr


def test_bad_appid_argument(capture: Path) -> None:
    with pytest.raises(SystemExit) as err:
        goosectl(["decode", str(capture), "--appid", "zz"])
    assert err.value.code == 2
