"""Agent layer: step overhead (dispatch + synchronous checkpoint) and sessions per second.

A step is one tool result taken in: the session's loop and workflow machines move (three
dispatches) and the journal commits them (`step` durability: synchronous=FULL, one
transaction) before the next tool may run. Measured with the journal on a file, and in
memory (no checkpoint) as the baseline. Sessions/s: a no-op procedure (one note step)
started and completed, tools answered inline.
"""

from __future__ import annotations

import statistics
import time

import pytest

from benchmarks.percentiles import ratio, sample_calls
from goosectl.controller.agent.effects import RunTool
from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.service import AgentService
from goosectl.controller.shell.journal_store import open_journal


def procedure(folder, steps: int) -> None:
    body = "".join(
        f"  s{i}: {{tool: note, args: {{text: step {i}}}, next: s{i + 1}}}\n" for i in range(steps)
    )
    body += f"  s{steps}: {{tool: note, args: {{text: done}}}}\n"
    (folder / "chain.yaml").write_text("name: chain\nstart: s0\nsteps:\n" + body)
    (folder / "noop.yaml").write_text(
        "name: noop\nstart: a\nsteps:\n  a: {tool: note, args: {text: ok}}\n"
    )


def service(folder, journal_path):
    journal = open_journal(journal_path, durability="step") if journal_path else None
    return AgentService(FolderPlanner(folder), journal)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_agent_step_overhead(benchmark, tmp_path, short, store):
    n = 300 if short else 3000
    procedure(tmp_path, n + 50)
    svc = service(tmp_path, tmp_path / "a.sqlite" if store == "sqlite" else None)
    clock = [0]
    sid = svc.request("chain", {}, 0)["session"]
    pending: list[RunTool] = [e for e in svc.take() if type(e) is RunTool]

    def one() -> None:
        e = pending.pop()
        clock[0] += 1000
        svc.tool_done(sid, e.step, e.attempt, clock[0], "ok")
        pending.extend(x for x in svc.take() if type(x) is RunTool)

    res = sample_calls(one, n, name=f"step ({store})", group="agent-step", warmup=20)
    benchmark.extra_info.update(res.as_dict())
    benchmark.pedantic(lambda: None, rounds=1)
    if store == "sqlite":
        from benchmarks.percentiles import RESULTS

        base = RESULTS.get("agent-step/step (memory)")
        if base is not None:
            ratio(res, base)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_sessions_per_second(benchmark, tmp_path, short, store):
    procedure(tmp_path, 1)
    svc = service(tmp_path, tmp_path / "s.sqlite" if store == "sqlite" else None)
    n = 200 if short else 2000
    rates = []
    t = 0
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            t += 1000
            sid = svc.request("noop", {}, t)["session"]
            for e in svc.take():
                if type(e) is RunTool:
                    svc.tool_done(sid, e.step, e.attempt, t, "ok")
            assert svc.loop(sid).state == "completed"
        rates.append(n / (time.perf_counter() - t0))
    med = statistics.median(rates)
    benchmark.extra_info.update({"sessions_per_s": round(med), "runs": [round(r) for r in rates]})
    print(f"\nsessions/s ({store}): median {med:.0f} of {[round(r) for r in rates]}")
    benchmark.pedantic(lambda: None, rounds=1)
