"""Sessions: confirmation gating, timeouts/retries/fallbacks, interruption, locks,
concurrency, hot reload, host lifecycle, validation of procedures on load."""

from __future__ import annotations

import pytest

from goosectl.controller.agent.effects import CancelTool
from goosectl.controller.agent.procedure import ProcedureError, load_procedure
from goosectl.controller.agent.service import ACTIVE, TABLE
from goosectl.controller.engine import Machine, Table
from goosectl.controller.shell.journal_store import open_journal

from .conftest import PROCEDURES


def test_isolate_with_confirmation_gating(rig):
    rig.close_breaker()
    r = rig.op(op="run", procedure="isolate", params={"bay": "1"})
    assert r["ok"] and r["session"] == "s1"
    rig.run(50)
    assert rig.state("s1") == "awaiting_confirmation" and rig.step("s1") == "open_breaker"
    rig.run(2000)  # nothing happens without the operator
    assert rig.executed("TRIP") == 0 and rig.state("s1") == "awaiting_confirmation"
    assert rig.bay.bay.state == "closed"
    assert rig.service.host_state() == "paused"
    for _ in range(3):
        assert rig.op(op="confirm", session="s1")["ok"]
        rig.run(300)
    st = rig.service.status("s1")
    assert st["state"] == "completed" and st["outcome"] == "done"
    assert [x["step"] for x in st["results"]] == [
        "check_interlocks",
        "open_breaker",
        "verify_open",
        "open_disconnector",
        "close_earth",
        "report",
    ]
    assert rig.executed("TRIP") == 1 and rig.executed("SET_OUTPUT") == 2
    assert rig.fw.stats.operations["open"] == 1 and rig.bay.bay.state == "open"
    assert rig.fw.status().outputs == 3
    assert rig.service.host_state() == "completed"


def test_deny_declines_without_actuating(rig):
    rig.op(op="run", procedure="isolate", params={"bay": 1})
    rig.run(10)
    assert rig.op(op="deny", session="s1")["ok"]
    rig.run(10)
    st = rig.service.status("s1")
    assert st["state"] == "completed" and st["outcome"] == "declined"
    assert rig.executed("TRIP") == 0


def test_stuck_breaker_retries_then_falls_back(rig):
    rig.close_breaker()
    rig.fw.inject("stuck", True, rig.now)
    rig.op(op="run", procedure="isolate", params={"bay": 1})
    rig.run(10)
    rig.op(op="confirm", session="s1")
    rig.run(3000)
    st = rig.service.status("s1")
    assert st["state"] == "completed" and st["outcome"] == "failed"
    assert st["step"] == "report_partial"
    attempts = [(x["step"], x["attempt"], x["ok"]) for x in st["results"]]
    assert attempts[1:4] == [
        ("open_breaker", 1, False),
        ("open_breaker", 2, False),
        ("open_breaker", 3, False),
    ]  # retry count 2
    assert rig.executed("SET_OUTPUT") == 0  # nothing else was operated: the safe state
    assert "NOT isolated" in st["text"]


def test_tool_timeout_when_the_device_never_answers(rig, folder):
    (folder / "slow.yaml").write_text("""
name: slow
start: wait
steps:
  wait: {tool: wait_device, args: {position: "on"}, timeout_ms: 100,
         retry: {count: 1, backoff_ms: 50}, next: ok, fallback: gave_up}
  ok: {tool: note, args: {text: closed}}
  gave_up: {tool: note, args: {text: "never closed"}, outcome: failed}
""")
    rig.op(op="run", procedure="slow", params={})
    rig.run(500)
    st = rig.service.status("s1")
    assert st["outcome"] == "failed" and st["text"] == "never closed"
    assert [x.get("error") for x in st["results"][:2]] == ["tool_timeout", "tool_timeout"]


def test_abort_cancels_the_running_tool_and_nothing_runs_after(rig, folder):
    (folder / "waiter.yaml").write_text("""
name: waiter
equipment: [bay1]
start: wait
steps:
  wait: {tool: wait_device, args: {position: "on"}, timeout_ms: 60000, next: close}
  close: {tool: device, args: {command: close}}
""")
    rig.op(op="run", procedure="waiter", params={})
    rig.run(10)
    assert rig.state("s1") == "waiting_for_tool"
    assert rig.op(op="abort", session="s1")["ok"]
    assert rig.state("s1") == "aborted"
    assert rig.host.tools.waits == {}
    rig.bay.close_request(rig.now)  # the position the aborted session waited for arrives
    rig.run(500)
    assert rig.state("s1") == "aborted" and rig.executed("CLOSE") == 1  # only the operator's
    assert "bay1" not in rig.service.locks


def test_every_non_final_state_accepts_abort_and_interrupt():
    """At the table: from every state where a session can be, abort ends it and a new
    request moves it to receiving_input, cancelling a tool that was running."""
    table = Table.load(TABLE)
    for state in sorted(ACTIVE | {"idle"}):
        for event, target in (("abort", "aborted"), ("interrupt", "receiving_input")):
            if state == "idle" and event == "interrupt":
                continue
            m = Machine.restore(
                table,
                {
                    "machine": "s",
                    "table": table.name,
                    "state": state,
                    "context": {"session": "s", "step": "x"},
                },
            )
            step = m.dispatch(event, 0, "new request" if event == "abort" else {"p": 1})
            assert m.state == target, (state, event)
            assert any(isinstance(e, CancelTool) for e in step.effects), (state, event)


def test_new_request_interrupts_a_session(rig):
    rig.op(op="run", procedure="isolate", params={"bay": 1})
    rig.run(10)
    r = rig.op(op="redirect", session="s1", procedure="close", params={"bay": 1})
    assert r["ok"]
    rig.run(10)
    st = rig.service.status("s1")
    assert st["procedure"] == "close" and st["state"] == "awaiting_confirmation"
    assert st["step"] == "close_breaker"


def test_locks_refuse_or_queue(rig):
    assert rig.op(op="run", procedure="isolate", params={"bay": 1})["ok"]
    rig.run(10)
    refused = rig.op(op="run", procedure="isolate", params={"bay": 1})
    assert not refused["ok"] and "bay1 is busy with session s1" in refused["error"]
    assert rig.op(op="run", procedure="isolate", params={"bay": 2})["ok"]  # other equipment
    queued = rig.op(op="run", procedure="close", params={"bay": 1})  # policy: queue
    assert queued["ok"] and queued["queued"]
    rig.run(10)
    assert rig.state(queued["session"]) == "receiving_input"
    rig.op(op="abort", session="s1")
    rig.run(10)
    assert rig.state(queued["session"]) == "awaiting_confirmation"


def test_100_concurrent_sessions_do_not_interfere(rig):
    sids = [rig.op(op="run", procedure="noop", params={"n": i})["session"] for i in range(100)]
    rig.run(1000)
    for i, sid in enumerate(sids):
        st = rig.service.status(sid)
        assert st["state"] == "completed", sid
        assert st["params"] == {"n": i}
        assert st["results"][0]["detail"] == f"start {i}" and st["text"] == f"done {i}"
    assert rig.service.locks == {}


def test_hot_reload_new_sessions_new_version_running_keep_theirs(rig, folder):
    rig.op(op="run", procedure="close", params={"bay": 1})
    rig.run(10)
    old = rig.service.status("s1")["version"]
    text = (
        (folder / "close.yaml").read_text().replace('"bay {bay} closed"', '"bay {bay} closed (v2)"')
    )
    (folder / "close.yaml").write_text(text.replace('version: "1"', 'version: "2"'))
    rig.op(op="run", procedure="close", params={"bay": 2})
    rig.run(10)
    new = rig.service.status("s2")["version"]
    assert old.startswith("1+") and new.startswith("2+")
    for sid in ("s1", "s2"):
        rig.op(op="confirm", session=sid)
        rig.run(300)
    assert rig.service.status("s1")["text"] == "bay 1 closed"
    assert rig.service.status("s2")["text"] == "bay 2 closed (v2)"


def test_journal_records_the_version_each_transition_used(folder):
    from goosectl.controller.engine import Journal

    from .conftest import Rig

    journal = Journal(None, durability="step")
    rig = Rig(folder, journal)
    rig.op(op="run", procedure="noop", params={"n": 1})
    rig.run(200)
    rows = [r for r in journal.rows() if r["machine"] == "s1/wf"]
    version = rig.service.status("s1")["version"]
    assert rows and {r["version"] for r in rows} == {version}


def test_router_outcomes_must_match_on_load(tmp_path):
    bad = (
        (PROCEDURES / "isolate.yaml")
        .read_text()
        .replace(
            "routes: {ok: open_breaker, blocked: report_blocked}",
            "routes: {ok: open_breaker, maybe: report_blocked}",
        )
    )
    p = tmp_path / "bad.yaml"
    p.write_text(bad)
    with pytest.raises(ProcedureError) as exc:
        load_procedure(p)
    (f,) = exc.value.findings
    assert f.code == "router_outcomes" and f.item == "check_interlocks"
    assert "missing from the route map: blocked" in f.reason and "never returns: maybe" in f.reason
    assert f.line is not None and str(p) in str(f)


def test_bad_parameters_and_unknown_procedures_are_refused(rig):
    assert (
        "parameter 'bay' is required" in rig.op(op="run", procedure="isolate", params={})["error"]
    )
    assert "is not int" in rig.op(op="run", procedure="isolate", params={"bay": "x"})["error"]
    assert "no procedure 'nope'" in rig.op(op="run", procedure="nope", params={})["error"]


def test_restore_brings_back_running_and_queued_sessions(folder, tmp_path):

    from .conftest import Rig

    path = tmp_path / "agent.sqlite"
    rig = Rig(folder, open_journal(path, durability="step"))
    rig.op(op="run", procedure="isolate", params={"bay": 1})
    queued = rig.op(op="run", procedure="close", params={"bay": 1})
    rig.run(10)
    assert queued["queued"] and rig.state("s1") == "awaiting_confirmation"
    # a new controller process on the same journal
    rig2 = Rig(folder, open_journal(path, durability="step"))
    assert rig2.host.restore(rig2.now) == 2
    assert rig2.state("s1") == "awaiting_confirmation" and rig2.state("s2") == "receiving_input"
    assert rig2.service.locks == {"bay1": "s1"}
    rig2.op(op="abort", session="s1")
    rig2.run(10)
    assert rig2.state("s2") == "awaiting_confirmation"  # the queued one got the bay
    assert rig2.op(op="run", procedure="noop", params={"n": 1})["session"] == "s3"
