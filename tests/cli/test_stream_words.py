"""A stream's state and a member's quality are told apart by their words: a stream whose
sequence gives reason for doubt is `suspect` (replay's frame and event lines, its JSON,
the journal), and `questionable` is only ever IEC 61850 validity (`q`), the word
`accept_questionable` waives."""

from __future__ import annotations

import json
import sqlite3

from goosectl.controller.goose.classify import QUALITIES
from tests.support.peers import CAPTURES
from tests.support.procs import goosectl

#: the GE F650's sqNum falls back to 1 in one state: frame 4 is out of order
F650 = CAPTURES / "iti_GOOSE.pcap"


def test_an_out_of_order_frame_makes_its_stream_suspect_in_every_output(tmp_path) -> None:
    journal = tmp_path / "j.sqlite"
    text = goosectl("replay", str(F650), "--journal", str(journal), check=False)
    assert text.returncode == 1, text.stderr  # the out-of-order frame is an anomaly
    fourth = text.stdout.splitlines()[5]
    assert fourth.split()[0] == "4" and fourth.split()[-3:] == ["out_of_order", "suspect", "-"]
    assert "#4 stream GEDeviceF650/LLN0$GO$gcb01 appid 0x0001 side -: suspect\n" in text.stdout
    lines = goosectl("replay", str(F650), "--json", check=False).stdout.splitlines()
    states = [r.get("stream_state") for r in map(json.loads, lines) if "frame" in r]
    assert states[3] == "suspect" and "questionable" not in states
    con = sqlite3.connect(journal)
    rows = con.execute(
        "SELECT seq, event, source, target FROM journal WHERE table_name = 'goose-stream' "
        "AND (source = 'suspect' OR target = 'suspect') ORDER BY seq"
    ).fetchall()
    con.close()
    assert [r[1:] for r in rows] == [("frame", "valid", "suspect"), ("frame", "suspect", "valid")]
    assert "questionable" not in text.stdout + "\n".join(lines)


def test_the_stream_states_do_not_borrow_a_quality_word() -> None:
    assert QUALITIES == ("valid", "suspect", "simulated", "config_mismatch", "lost")
    assert "questionable" not in QUALITIES
