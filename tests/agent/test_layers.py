"""Every session runs on the four layers: what an operator sees of each one's rule.

Phase: only forward (a redirect does not take it back; the refusal is journaled). Flow:
a workflow move off the procedure's whitelist ends the session with the reason. Workflow:
a route that does not match its tool's outcomes keeps the procedure from running. Host:
started, paused while a step waits for confirmation, completed or aborted, in `status`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.procedure import Procedure, flow_edges
from goosectl.controller.engine import Journal, Table
from goosectl.controller.engine.layers import flow_spec

from .conftest import Rig

SLOW = """
name: slow
params: {n: {type: int}}
equipment: ["unit{n}"]
start: first
steps:
  first: {tool: note, args: {text: "start {n}"}, next: wait}
  wait: {tool: delay, args: {ms: 100}, next: done}
  done: {tool: note, args: {text: "done {n}"}}
"""

#: the layers of a session that ran its procedure to the end
DONE_LAYERS = {
    "phase": "ended",
    "flow": "stopped",
    "workflow": "report",
    "host": "completed",
    "aborted": False,
    "refused_back": 0,
}


def layers(rig: Rig, sid: str) -> dict:
    return rig.op(op="status", session=sid)["status"]["layers"]


def test_host_starts_pauses_completes_and_aborts_each_session(rig):
    rig.close_breaker()
    assert rig.op(op="run", procedure="isolate", params={"bay": 1})["ok"]
    rig.run(10)
    st = rig.op(op="status", session="s1")
    # the first dangerous step waits for the operator: the host is paused
    assert st["status"]["host"] == "paused" and st["host"] == "paused"
    assert layers(rig, "s1")["phase"] == "operating"
    assert layers(rig, "s1")["flow"] == layers(rig, "s1")["workflow"] == "open_breaker"
    rig.op(op="confirm", session="s1")
    assert rig.op(op="status", session="s1")["status"]["host"] == "running"
    for _ in range(3):  # the breaker opens; the disconnector and earth wait in turn
        rig.run(700)
        rig.op(op="confirm", session="s1")
    rig.run(700)
    done = rig.op(op="status", session="s1")["status"]
    assert done["state"] == "completed" and done["outcome"] == "done", done
    assert done["layers"] == DONE_LAYERS
    assert rig.op(op="run", procedure="isolate", params={"bay": 1})["session"] == "s2"
    rig.run(10)
    rig.op(op="abort", session="s2")
    aborted = rig.op(op="status", session="s2")["status"]
    assert aborted["state"] == "aborted" and aborted["host"] == "completed"
    assert aborted["layers"]["aborted"] and aborted["layers"]["phase"] == "ended"
    assert rig.op(op="list")["host"] == "completed"
    assert rig.service.layers.refused_total == 0  # every loop move had its layer move


def test_a_queued_session_has_not_started_and_an_abort_ends_it_without_running(rig):
    rig.op(op="run", procedure="isolate", params={"bay": 1})
    queued = rig.op(op="run", procedure="close", params={"bay": 1})
    rig.run(10)
    assert queued["queued"]
    listed = {s["session"]: s["host"] for s in rig.op(op="list")["sessions"]}
    assert listed == {"s1": "paused", "s2": "idle"}
    assert layers(rig, "s2")["phase"] == "requested"
    rig.op(op="abort", session="s2")
    st = rig.op(op="status", session="s2")["status"]
    assert st["host"] == "completed" and st["layers"]["aborted"] and st["results"] == []
    assert rig.op(op="status", session="s1")["status"]["host"] == "paused"


def test_a_phase_never_moves_back_the_attempt_is_journaled_the_session_goes_on(folder):
    (folder / "slow.yaml").write_text(SLOW)
    journal = Journal(None, durability="step")
    rig = Rig(folder, journal)
    rig.op(op="run", procedure="slow", params={"n": 1})
    rig.run(10)
    assert layers(rig, "s1")["phase"] == "operating"
    # a new request for the running session sends its loop back to receiving_input; the
    # phase stays where it is and records the refusal
    r = rig.op(op="redirect", session="s1", procedure="slow", params={"n": 2})
    assert r["ok"], r
    now = layers(rig, "s1")
    assert now["phase"] == "operating" and now["refused_back"] == 1 and now["flow"] == "wait"
    back = [r for r in rig.service.layer_history("s1") if r["event"] == "back"]
    assert [(r["source"], r["target"]) for r in back] == [("operating", "operating")]
    rig.run(200)
    st = rig.op(op="status", session="s1")["status"]
    assert st["state"] == "completed" and st["text"] == "done 2", st
    assert st["layers"]["phase"] == "ended" and not st["layers"]["aborted"]
    assert rig.service.layers.refused_total == 0


class NarrowFlow(FolderPlanner):
    """Serves `noop` with a flow whitelist that lacks the move from `wait` to `done`
    (`done` stays reachable, from `first`, so the table is valid)."""

    def plan(self, name: str) -> Procedure:
        proc = super().plan(name)
        edges = [e for e in flow_edges(proc.spec) if e != ("wait", "done")]
        nodes = [proc.table.initial, *(s for s in proc.spec.steps if s != proc.table.initial)]
        narrow = flow_spec(f"flow:{proc.name}", nodes, [*edges, ("first", "done")], "narrow")
        return dataclasses.replace(proc, flow=Table.from_spec(narrow))


def test_a_workflow_move_off_the_flow_whitelist_is_refused_and_ends_the_session(folder):
    rig = Rig(folder)
    rig.service.planner = NarrowFlow(folder)
    rig.op(op="run", procedure="noop", params={"n": 1})
    rig.run(200)
    st = rig.op(op="status", session="s1")["status"]
    assert st["state"] == "aborted", st
    assert "wait -> done is not in the flow whitelist of procedure noop" in st["text"]
    assert st["layers"]["flow"] == "stopped" and st["layers"]["aborted"]
    assert rig.service.flow_refused == 1 and rig.host.fault is None
    # nothing else is broken: a procedure whose moves are all whitelisted runs on
    rig.service.planner = FolderPlanner(folder)
    rig.op(op="run", procedure="noop", params={"n": 2})
    rig.run(200)
    assert rig.op(op="status", session="s2")["status"]["text"] == "done 2"


def test_a_route_not_validated_is_refused_and_the_other_procedures_run(folder: Path, rig):
    text = (folder / "isolate.yaml").read_text()
    bad = text.replace("name: isolate", "name: unrouted").replace(
        "routes: {ok: open_breaker, blocked: report_blocked}",
        "routes: {ok: open_breaker, maybe: report_blocked}",
    )
    (folder / "unrouted.yaml").write_text(bad)
    r = rig.op(op="run", procedure="unrouted", params={"bay": 1})
    assert not r["ok"] and "router_outcomes" in r["error"] and "blocked" in r["error"], r
    assert "s1" not in rig.service.sessions
    assert rig.op(op="run", procedure="noop", params={"n": 1})["session"] == "s1"


def test_at_every_point_of_a_procedure_a_restore_rebuilds_the_same_layers(folder, tmp_path):
    from goosectl.controller.shell.journal_store import open_journal

    path = tmp_path / "agent.sqlite"
    rig = Rig(folder, open_journal(path, durability="step"))
    rig.close_breaker()
    rig.op(op="run", procedure="isolate", params={"bay": 1})
    rig.op(op="run", procedure="close", params={"bay": 1})  # queued behind it
    seen: list[dict] = []
    for _ in range(400):  # 4 s of virtual time in 10 ms steps, both sessions to their end
        rig.run(10)
        now = {sid: layers(rig, sid) for sid in ("s1", "s2")}
        if not seen or now != seen[-1]:
            seen.append(now)
            # a new controller on the same journal, restored and only looked at (it runs
            # nothing, so the first one's journal stays the only writer): every layer as
            # it was
            journal = open_journal(path, durability="step")
            other = Rig(folder, journal)
            assert other.host.restore(other.now) == 2
            assert {sid: other.service.layers.states(sid) for sid in ("s1", "s2")} == now
            journal.close()
        for sid in ("s1", "s2"):
            if rig.state(sid) == "awaiting_confirmation":
                rig.op(op="confirm", session=sid)
    flows = [x["s1"]["flow"] for x in seen]
    assert flows[0] == "open_breaker" and flows[-1] == "stopped", flows
    # each step that waits for the operator was seen (the others pass within 10 ms)
    assert {"open_disconnector", "close_earth"} <= set(flows), flows
    hosts = {(x["s2"]["phase"], x["s2"]["host"]) for x in seen}
    # the queued one waited unstarted, then ran (its close is blocked: the earth is closed)
    assert {("requested", "idle"), ("ended", "completed")} <= hosts
    assert rig.service.layers.refused_total == 0


def test_a_journal_from_before_the_layers_restores_with_a_phase_made_from_the_loop(
    folder, tmp_path
):
    import sqlite3

    from goosectl.controller.shell.journal_store import open_journal

    path = tmp_path / "agent.sqlite"
    journal = open_journal(path, durability="step")
    rig = Rig(folder, journal)
    rig.close_breaker()
    rig.op(op="run", procedure="isolate", params={"bay": 1})
    rig.run(10)
    rig.op(op="confirm", session="s1")
    rig.run(700)  # the breaker is open; the disconnector waits for the operator
    before = layers(rig, "s1")
    journal.close()
    # what an older controller left: the session's loop and workflow, no layers
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM checkpoint WHERE machine LIKE 's1/%' AND machine != 's1/wf'")
    again = open_journal(path, durability="step")
    other = Rig(folder, again)
    assert other.host.restore(other.now) == 1
    assert (
        other.service.layers.states("s1")
        == before
        == {
            "phase": "operating",
            "flow": "open_disconnector",
            "workflow": "open_disconnector",
            "host": "paused",
            "aborted": False,
            "refused_back": 0,
        }
    )
    other.op(op="confirm", session="s1")
    other.run(700)
    assert other.op(op="status", session="s1")["status"]["layers"]["flow"] == "close_earth"
    again.close()
