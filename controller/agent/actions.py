"""Guards, actions and routers of the agent-session table."""

from __future__ import annotations

from goosectl.controller.agent.effects import CancelTool, Plan, Respond, RunTool
from goosectl.controller.engine.effects import Notify
from goosectl.controller.engine.registry import Registry

REGISTRY = Registry("agent-session")


@REGISTRY.action
def store_request(ctx, ev):
    return {"request": ev.payload, "step": None, "attempt": 0, "inflight_seq": None}


@REGISTRY.action
def store_text(ctx, ev):
    return {"text": str(ev.payload or "")}


@REGISTRY.action(factory=True)
def plan(outcome: str):
    def action(ctx, ev):
        return Plan(ctx["session"], outcome)

    return action


@REGISTRY.router(outcomes=())
def gate(ctx, ev):
    step = ev.payload
    if step is None:
        return "finish"
    return "confirm" if step["confirm"] else "run"


@REGISTRY.action
def take_step(ctx, ev):
    step = ev.payload
    if step is None:
        return None
    return {
        "step": step["id"],
        "tool": step["tool"],
        "args": step["args"],
        "confirm_needed": step["confirm"],
        "timeout_ms": step["timeout_ms"],
        "backoff_ms": step["backoff_ms"],
        "retries_left": step["retries"],
        "fallback": step["fallback"],
        "attempt": 1,
        "inflight_seq": None,
        "step_ns": ev.time_ns,
        "outcome": step.get("final_outcome"),
        "text": step.get("text", ctx["text"]),
    }


@REGISTRY.action
def run_tool(ctx, ev):
    """Entry of waiting_for_tool: start the step's tool (a restore re-runs it reconciling)."""
    return RunTool(
        ctx["session"],
        ctx["step"],
        ctx["attempt"],
        ctx["tool"],
        ctx["args"],
        seq=ctx["inflight_seq"],
    )


@REGISTRY.action
def ask_confirmation(ctx, ev):
    return Notify(
        "confirm",
        {"session": ctx["session"], "step": ctx["step"], "tool": ctx["tool"], "args": ctx["args"]},
    )


@REGISTRY.guard
def current(ctx, ev):
    """A tool's report counts only for the step and attempt now running."""
    p = ev.payload
    return p.get("step") == ctx["step"] and p.get("attempt") == ctx["attempt"]


@REGISTRY.action
def store_seq(ctx, ev):
    return {"inflight_seq": ev.payload.get("seq")}


@REGISTRY.action
def record_done(ctx, ev):
    p = ev.payload
    return [
        {
            "results": {
                "step": ctx["step"],
                "attempt": ctx["attempt"],
                "ok": True,
                "outcome": p.get("outcome", "ok"),
                "detail": p.get("detail", ""),
            },
            "inflight_seq": None,
        },
        Plan(ctx["session"], p.get("outcome", "ok")),
    ]


def failure_route(ctx, ev) -> str:
    """After a failure: retry while retries are left, else the fallback, else fatal. A
    failure the tool calls final (a command that must not run late, after a restart) is
    never retried: the fallback or the end."""
    final = isinstance(ev.payload, dict) and ev.payload.get("final")
    if ctx["retries_left"] > 0 and not final:
        return "retry"
    return "fallback" if ctx["fallback"] else "fatal"


@REGISTRY.router(outcomes=())
def on_failure(ctx, ev):
    return failure_route(ctx, ev)


@REGISTRY.action
def record_failure(ctx, ev):
    p = ev.payload if isinstance(ev.payload, dict) else {}
    error = p.get("error") or ev.name  # tool_timeout carries no payload
    route = failure_route(ctx, ev)
    out: list = [
        {
            "results": {
                "step": ctx["step"],
                "attempt": ctx["attempt"],
                "ok": False,
                "error": error,
            },
            "inflight_seq": None,
            "text": f"step {ctx['step']} failed: {error}",
        }
    ]
    if route == "retry":
        out.append({"retries_left": ctx["retries_left"] - 1})
    elif route == "fallback":
        out.append(Plan(ctx["session"], "failed"))
    return out


@REGISTRY.action
def next_attempt(ctx, ev):
    return {"attempt": ctx["attempt"] + 1, "step_ns": ev.time_ns}


@REGISTRY.action
def mark_step_time(ctx, ev):
    """A confirmation starts the step's clock again: its age counts from the operator's yes."""
    return {"step_ns": ev.time_ns}


@REGISTRY.action
def cancel_tool(ctx, ev):
    if ctx["step"] is None:
        return None
    return CancelTool(ctx["session"], ctx["step"], ev.name)


@REGISTRY.action
def declined(ctx, ev):
    return {"text": f"step {ctx['step']} declined by the operator", "outcome": "declined"}


@REGISTRY.action
def expired(ctx, ev):
    """No confirmation in time: the session is aborted, and the shell counts it."""
    text = f"step {ctx['step']} not confirmed within {ctx['confirm_timeout_ms'] / 1000:g} s"
    return [
        {"text": text},
        Notify("expired", {"session": ctx["session"], "step": ctx["step"], "text": text}),
    ]


@REGISTRY.action(factory=True)
def respond(outcome: str):
    """Tell the operator how it ended; a final step's own outcome wins over `done`."""

    def action(ctx, ev):
        final = ctx["outcome"] if outcome == "done" and ctx["outcome"] else outcome
        return [{"outcome": final}, Respond(ctx["session"], final, ctx["text"])]

    return action
