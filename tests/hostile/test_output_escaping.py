"""Control characters in a frame's strings. `goosectl decode` printed an
mMSString raw, so one frame could forge whole output lines (or repaint the terminal with
ESC sequences). Text outputs now escape them; JSON output was already escaped by json.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from goosectl.controller.cli import main as goosectl
from goosectl.controller.display import printable
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.report.goose_report import Reporter
from goosectl.protocols.ethernet.pcap import PcapWriter, read_capture
from goosectl.protocols.goose import Boolean, GooseFrame, MmsString, encode_frame
from tests.hostile.frames import BASE

#: a second "frame line" inside a string, then ESC (clear screen), CR and a bidi override
FORGED = (
    "ok\n     2     0.000001 00:00:00:00:00:01 -> 01:0c:cd:01:00:00 GOOSE forged\x1b[2J\r\u202e"
)


def _capture(tmp_path: Path) -> Path:
    frame = GooseFrame(
        **{
            **{k: getattr(BASE, k) for k in BASE.__dataclass_fields__},
            "all_data": (Boolean(True), MmsString(FORGED)),
        }
    )
    path = tmp_path / "forged.pcap"
    with PcapWriter(path) as w:
        w.write(encode_frame(frame), 1_700_000_000_000_000_000)
    return path


def test_printable_escapes_controls_and_its_own_escape_character():
    assert printable("plain text, Schütz offen") == "plain text, Schütz offen"
    assert printable("a\nb\r\tc\x1b[2J\x00\x7f\x85") == "a\\nb\\r\\tc\\x1b[2J\\x00\\x7f\\x85"
    assert printable("\u202egnp.exe \u2028") == "\\u202egnp.exe \\u2028"
    assert printable("C:\\x1b") == "C:\\\\x1b"  # a literal backslash cannot fake an escape


def test_decode_prints_one_line_per_frame_with_the_string_escaped(tmp_path, capsys):
    path = _capture(tmp_path)
    assert goosectl(["decode", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "\r" not in out and "\x1b" not in out
    assert "\u202e" not in out
    assert "ok\\n     2     0.000001" in out and "forged\\x1b[2J\\r\\u202e" in out


def test_decode_json_keeps_the_exact_string(tmp_path, capsys):
    path = _capture(tmp_path)
    assert goosectl(["decode", str(path), "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "\x1b" not in out
    assert json.loads(out)["allData"][1] == {"type": "mMSString", "value": FORGED}


def test_listen_and_replay_text_is_one_line_per_event(tmp_path):
    path = _capture(tmp_path)
    hub = GooseHub()
    out = io.StringIO()
    reporter = Reporter(hub, False, out)
    for cap in read_capture(path):
        reporter.frame(cap.number, cap.ts_ns, cap.data, None, hub.frame(cap.data, "A", cap.ts_ns))
    reporter.summary()
    text = out.getvalue()
    assert "\x1b" not in text and "\r" not in text
    assert text.splitlines()[0].startswith("     1 ")
    assert not any(line.lstrip().startswith("2 ") for line in text.splitlines())
