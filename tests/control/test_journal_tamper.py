"""A journal changed behind a running controller (a row deleted or rewritten with sqlite3,
the file cut to 0 bytes) is an alarm at the controller's next commit, naming the file,
never `commits resumed`; and `goosectl journal verify` names the first bad row."""

from __future__ import annotations

import os
import sqlite3
import time

from tests.control.conftest import goosectl


def first_control_row(db: sqlite3.Connection) -> tuple[int] | None:
    """The seq of the first committed `control` row (a request answered), if any."""
    row = db.execute("SELECT MIN(seq) FROM journal WHERE machine = 'control'").fetchone()
    return None if row[0] is None else (row[0],)


def _alarm(c, what: str) -> str:
    return c.err.wait_for(
        lambda x: "alarm journal" in x and "changed behind the controller" in x, what, 30
    )


def test_a_row_deleted_while_running_is_an_alarm_and_fails_verify(controllers):
    c = controllers(name="tamper")
    for n in (1, 2):
        assert c.request({"op": "run", "procedure": "hello", "params": {"n": n}})["ok"]
    journal = c.state / "bay.sqlite"
    db = sqlite3.connect(journal)
    end = time.monotonic() + 30
    while not (victim := first_control_row(db)) and time.monotonic() < end:
        time.sleep(0.05)  # the writer commits within milliseconds
    with db:
        assert db.execute("DELETE FROM journal WHERE seq = ?", victim).rowcount == 1
    db.close()
    assert c.request({"op": "run", "procedure": "hello", "params": {"n": 3}})["ok"]
    line = _alarm(c, "the alarm for the deleted row")
    assert str(journal) in line
    c.stop()
    done = goosectl("journal", "verify", str(journal), check=False)
    assert done.returncode == 1 and "does not follow the row before it" in done.stdout


def test_a_journal_cut_to_zero_bytes_while_running_is_an_alarm(controllers):
    c = controllers(name="cut")
    assert c.request({"op": "run", "procedure": "hello", "params": {"n": 1}})["ok"]
    journal = c.state / "bay.sqlite"
    c.request({"op": "controller"})
    os.truncate(journal, 0)
    assert c.request({"op": "run", "procedure": "hello", "params": {"n": 2}})["ok"]
    _alarm(c, "the alarm for the cut file")
    assert "commits resumed" not in "\n".join(c.err.lines)
    report = c.stop()
    assert "changed behind the controller" in str(report["journal"]["bay"])


def test_rows_cut_while_no_controller_ran_are_an_alarm_at_the_next_start(controllers):
    first = controllers(name="before")
    assert first.request({"op": "run", "procedure": "hello", "params": {"n": 1}})["ok"]
    first.stop()
    journal = first.state / "bay.sqlite"
    db = sqlite3.connect(journal)
    with db:
        db.execute("DELETE FROM journal WHERE seq > (SELECT MAX(seq) - 3 FROM journal)")
    db.close()
    again = controllers(name="after", state=first.state)
    assert again.request({"op": "run", "procedure": "hello", "params": {"n": 2}})["ok"]
    line = again.err.wait_for(
        lambda x: "alarm journal" in x and "changed while no controller ran" in x,
        "the alarm for the rows cut meanwhile",
        30,
    )
    assert str(journal) in line
    again.stop()
