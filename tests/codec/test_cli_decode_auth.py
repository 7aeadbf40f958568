"""`goosectl decode --keys`: each frame's IEC 62351-6 verdict, in JSON and in the table;
a bad key file stops the command with the file and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goosectl.controller.cli import main as goosectl
from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose.security import ALGORITHMS, PROFILES, MacKey, sign
from tests.codec.test_cli_decode import _frame
from tests.goose.keyfiles import S, write_keys

T = 1_700_000_000 * S
SECRET = bytes(range(32))


@pytest.fixture
def signed_capture(tmp_path: Path) -> tuple[Path, Path]:
    keys = write_keys(
        tmp_path,
        [
            {"key_id": 7, "algorithm": "hmac-sha256-256", "secret": SECRET,
             "not_before": T - 3600 * S, "not_after": T + 3600 * S},
        ],
    )  # fmt: skip
    good = MacKey(7, ALGORITHMS["hmac-sha256-256"], SECRET)
    wrong = MacKey(7, ALGORITHMS["hmac-sha256-256"], bytes(32))
    unknown = MacKey(8, ALGORITHMS["hmac-sha256-256"], SECRET)
    p = PROFILES["length-crc"]
    frames = [
        sign(_frame(st_num=1), good, p),
        _frame(st_num=2),
        sign(_frame(st_num=3), wrong, p),
        sign(_frame(st_num=4), unknown, p),
        sign(_frame(st_num=5), good, p)[:-3],
    ]
    path = tmp_path / "signed.pcap"
    with PcapWriter(path) as w:
        for i, f in enumerate(frames):
            w.write(f, T + i * 1_000_000)
    return path, keys


def test_decode_json_shows_each_frames_verdict(signed_capture, capsys) -> None:
    path, keys = signed_capture
    assert goosectl(["decode", str(path), "--json", "--keys", str(keys)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["stNum"], x["auth"]) for x in lines] == [
        (1, {"status": "verified", "key_id": 7, "algorithm": "hmac-sha256-256"}),
        (2, {"status": "unsigned"}),
        (3, {"status": "refused", "reason": "bad_mac", "key_id": 7,
             "algorithm": "hmac-sha256-256"}),
        (4, {"status": "refused", "reason": "unknown_key", "key_id": 8}),
        (5, {"status": "refused", "reason": "bad_extension"}),
    ]  # fmt: skip


def test_decode_table_shows_the_verdict(signed_capture, capsys) -> None:
    path, keys = signed_capture
    assert goosectl(["decode", str(path), "--keys", str(keys)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("auth=verified(key 7, hmac-sha256-256)")
    assert out[2].endswith("auth=bad_mac")


def test_without_keys_no_verdict(signed_capture, capsys) -> None:
    path, _ = signed_capture
    assert goosectl(["decode", str(path), "--json"]) == 0
    assert all("auth" not in json.loads(x) for x in capsys.readouterr().out.splitlines())


def test_a_bad_key_file_names_file_and_reason(signed_capture, capsys, tmp_path) -> None:
    path, keys = signed_capture
    (tmp_path / "k7.hex").chmod(0o644)
    assert goosectl(["decode", str(path), "--keys", str(keys)]) == 2
    err = capsys.readouterr().err
    assert "k7.hex" in err and "0644" in err


def test_replay_json_reports_the_verdict_and_refuses_bad_frames(signed_capture, capsys) -> None:
    """Observed streams with --keys: a signed frame must verify, unsigned ones are shown;
    the refused forgeries are anomalies, so the replay exits 1 and names them."""
    path, keys = signed_capture
    assert goosectl(["replay", str(path), "--json", "--keys", str(keys)]) == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    (anomalies,) = [x for x in lines if x.get("event") == "anomalies"]
    assert "auth_refused" in json.dumps(anomalies), anomalies
    frames = [x for x in lines if "frame" in x and "stNum" in x]
    assert [(x["stNum"], x["auth"]["status"], x["class"]) for x in frames] == [
        (1, "verified", "first"),
        (2, "unsigned", "new_state"),
        (3, "refused", "auth_refused"),
        (4, "refused", "auth_refused"),
        (5, "refused", "auth_refused"),
    ]
