"""The agent layer, pure: sessions as machines, equipment locks, checkpoints, restore.

Each request becomes a session: two machines on one scheduler — the agent loop
(tables/session.yaml) and the procedure's workflow (its compiled table) — journaled with
`step` durability: the service flushes after every input, so every transition it caused is
durable (atomically, both machines) before the runtime executes a single effect. After a
crash `restore` rebuilds every session at its exact step, re-arms its timers, re-takes its
locks and asks the runtime to re-run an in-flight tool in reconcile mode.

Inputs: request, confirm, deny, abort, tool_started/done/failed, advance(now).
Outputs (`take()`): RunTool, CancelTool, Respond, Notify.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from goosectl.controller.agent.effects import Plan, Respond, RunTool
from goosectl.controller.agent.layers import (
    PHASE_TABLE,
    FlowRefused,
    SessionLayers,
    legacy_phase,
)
from goosectl.controller.agent.layers import ids as layer_ids
from goosectl.controller.agent.planner import Planner
from goosectl.controller.agent.procedure import Procedure, fill, parse_procedure
from goosectl.controller.engine import Journal, Machine, Scheduler, Table
from goosectl.controller.engine.journal import JournalIOError
from goosectl.controller.engine.names import Fields, States
from goosectl.controller.engine.resources import shipped

TABLE = shipped("goosectl.controller.agent", "tables", "session.yaml")


class SessionStates(States):
    """The session loop's states the service compares against (checked when it loads)."""

    table = "agent-session"
    RECEIVING_INPUT = "receiving_input"
    PLANNING = "planning"
    WAITING_FOR_TOOL = "waiting_for_tool"
    TOOL_FAILED_RETRYABLE = "tool_failed_retryable"
    TOOL_FAILED_FATAL = "tool_failed_fatal"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    RESPONDING = "responding"
    COMPLETED = "completed"
    ABORTED = "aborted"


class SessionFields(Fields):
    """The session loop's context the service reads (status, restore)."""

    table = "agent-session"
    REQUEST = "request"
    ATTEMPT = "attempt"
    OUTCOME = "outcome"
    TEXT = "text"
    RESULTS = "results"


S = SessionStates
FINAL = frozenset({S.COMPLETED, S.ABORTED})
#: steps one input may cause among the sessions before the guard calls it a loop: every
#: open session (`max_open`) settling a tool result takes a few dozen; a procedure whose
#: steps hand over to each other without time passing is stopped in about a second
RUNAWAY_STEPS = 10_000
ACTIVE = frozenset(
    {
        S.RECEIVING_INPUT,
        S.PLANNING,
        S.WAITING_FOR_TOOL,
        S.TOOL_FAILED_RETRYABLE,
        S.TOOL_FAILED_FATAL,
        S.AWAITING_CONFIRMATION,
        S.RESPONDING,
    }
)


@dataclass
class Session:
    id: str
    procedure: Procedure
    params: dict[str, Any]
    equipment: list[str]
    responses: list[Respond] = field(default_factory=list)


class AgentService:
    def __init__(
        self,
        planner: Planner,
        journal: Journal | None = None,
        *,
        confirm_timeout_ms: float = 600_000,
        max_open: int = 64,
        keep_finished: int = 256,
    ) -> None:
        """`confirm_timeout_ms`: a session waiting for confirmation longer is aborted;
        `max_open`: sessions not yet ended; a request beyond it is refused (`limit`);
        `keep_finished`: ended sessions kept in memory (status, list), the oldest let go
        beyond it (their history stays in the journal), so memory and the cost of a
        `list` do not grow with every session ever run."""
        self.planner = planner
        self.confirm_timeout_ms = confirm_timeout_ms
        self.max_open = max_open
        #: sessions not yet ended (pruned as they end): what `max_open` counts
        self.open: set[str] = set()
        self.keep_finished = keep_finished
        #: ended sessions still in memory, oldest first
        self.finished: deque[str] = deque()
        self.table = Table.load(TABLE, names=(SessionStates, SessionFields))
        self.journal = journal
        self.scheduler = Scheduler(
            journal,
            {Plan: self._plan_effect, Respond: self._respond},
            default=self._output,
            limit=RUNAWAY_STEPS,
        )
        #: every session's four layers, on the same scheduler (see `controller/agent/layers.py`)
        self.layers = SessionLayers(self.scheduler, journal)
        #: workflow moves the flow whitelist refused (each ended its session)
        self.flow_refused = 0
        self.sessions: dict[str, Session] = {}
        self.locks: dict[str, str] = {}
        self.queued: deque[str] = deque()
        self.out: list[Any] = []
        self._plans: deque[Plan] = deque()
        self._responded: deque[str] = deque()
        self.count = 0
        if journal is not None:
            self.count = int(journal.get_meta("agent.sessions", 0))

    # -- plumbing -----------------------------------------------------------------------

    def _plan_effect(self, machine_id: str, e: Plan, now_ns: int) -> None:
        self._plans.append(e)

    def _respond(self, machine_id: str, e: Respond, now_ns: int) -> None:
        self.out.append(e)
        s = self.sessions.get(e.session)
        if s is not None:
            s.responses.append(e)
        if self.scheduler.machines[machine_id].state in (S.RESPONDING, S.TOOL_FAILED_FATAL):
            self._responded.append(e.session)

    def _output(self, machine_id: str, e: Any, now_ns: int) -> None:
        self.out.append(e)

    def _settle(self, now_ns: int) -> None:
        """Run what the last dispatch asked for, then make it all durable. One input: the
        scheduler's guard stays entered, so sessions that keep planning end in
        `RunawayError` naming their machines."""
        guard = self.scheduler.guard
        guard.enter()
        try:
            while self._plans or self._responded:
                while self._plans:
                    self._plan(self._plans.popleft(), now_ns)
                while self._responded:
                    self.scheduler.feed(self._responded.popleft(), "responded", now_ns)
        finally:
            guard.exit()
        self._release_finished(now_ns)
        if self.journal is not None:
            try:
                self.journal.flush(now_ns)
            except JournalIOError:
                # nothing operates before it is durable: the tools this input started are
                # held back (each times out and follows its retry policy); the journal keeps
                # the rows and commits them with the next input that finds the disk back
                self.out = [e for e in self.out if type(e) is not RunTool]

    def take(self) -> list[Any]:
        out, self.out = self.out, []
        return out

    def next_deadline(self) -> int | None:
        return self.scheduler.timers.next_deadline()

    def loop(self, sid: str) -> Machine:
        return self.scheduler.machines[sid]

    # -- the workflow ---------------------------------------------------------------------

    def _describe(self, s: Session, node: str) -> dict[str, Any]:
        step = s.procedure.step(node)
        args = fill(step.args, s.params)
        final = s.procedure.is_final(node)
        return {
            "id": node,
            "tool": step.tool,
            "args": args,
            "confirm": step.confirm,
            "timeout_ms": step.timeout_ms,
            "backoff_ms": step.retry.backoff_ms,
            "retries": step.retry.count,
            "fallback": step.fallback is not None,
            "final_outcome": step.outcome if final else None,
            "text": args.get("text", "") if step.tool == "note" else "",
        }

    def _plan(self, p: Plan, now_ns: int) -> None:
        s = self.sessions[p.session]
        wf = self.scheduler.machines[f"{p.session}/wf"]
        desc = None
        if p.outcome == "start":
            desc = self._describe(s, wf.state)
        else:
            event = "failed" if p.outcome == "failed" else "done"
            if event in wf.table.rows[wf.state]:
                self.scheduler.feed(wf.id, event, now_ns, p.outcome)
                try:
                    self.layers.move(p.session, wf.state, now_ns)
                except FlowRefused as exc:
                    self.flow_refused += 1
                    self.scheduler.feed(p.session, "abort", now_ns, str(exc))
                    return
                desc = self._describe(s, wf.state)
        self.scheduler.feed(p.session, "planned", now_ns, desc)

    # -- requests -------------------------------------------------------------------------

    def request(self, name: str, params: dict[str, Any], now_ns: int) -> dict[str, Any]:
        """Start a session; refused with a reason when the procedure, its parameters or the
        equipment (locked by another session, policy `refuse`) say no."""
        try:
            proc = self.planner.plan(name)
            bound = proc.bind(params)
        except (LookupError, ValueError) as exc:
            return {"ok": False, "error": str(exc)}
        equipment = proc.equipment(bound)
        refused = self._refusal(name, proc, equipment, now_ns)
        if refused is not None:
            return refused
        sid, queued = self._open_session(proc, bound, equipment, now_ns)
        if self.journal is not None and self.journal.alarm is not None:
            # it could not be made durable, so it operates nothing: the session ends here
            self.abort(sid, now_ns, "the agent journal cannot commit")
            return {
                "ok": False,
                "session": sid,
                "error": f"{self.journal.alarm}: the procedure was not started",
            }
        return {"ok": True, "session": sid, "version": proc.version, "queued": queued}

    def _refusal(
        self, name: str, proc: Procedure, equipment: list[str], now_ns: int
    ) -> dict[str, Any] | None:
        """Why a request cannot start a session now (the journal, the limit, a lock), or
        None; a refusal leaves nothing behind."""
        if self.journal is not None and self.journal.alarm is not None:
            try:
                self.journal.flush(now_ns)  # the disk may be back
            except JournalIOError as exc:
                return {
                    "ok": False,
                    "error": f"{exc.detail}: no procedure starts until the agent journal "
                    "can commit",
                }
        if len(self.open) >= self.max_open:
            return {
                "ok": False,
                "error": f"{len(self.open)} sessions are open, the limit "
                f"(agent.max_open_sessions): let one end, or confirm, deny or abort one",
                "limit": "agent.sessions",
            }
        busy = [(e, self.locks[e]) for e in equipment if e in self.locks]
        if busy and proc.spec.conflict == "refuse":
            e, other = busy[0]
            return {
                "ok": False,
                "error": f"{e} is busy with session {other} "
                f"({self.sessions[other].procedure.name}); procedure {name} refuses to wait",
            }
        if self.journal is not None:
            # the text is written before anything of the session exists: a disk that
            # refuses it leaves no half-made session behind (nothing in `sessions` without
            # its machines), and the next request, once the disk is back, starts clean
            try:
                self._keep_text(proc)
            except JournalIOError as exc:
                return {
                    "ok": False,
                    "error": f"{self.journal.path}: {exc.reason}: no procedure starts until the "
                    "agent journal can commit",
                }
        return None

    def _open_session(
        self, proc: Procedure, bound: dict[str, Any], equipment: list[str], now_ns: int
    ) -> tuple[str, bool]:
        """The session's machines (its loop, its workflow, its layers), its request, and
        its place: accepted, or queued behind a lock. Returns (id, queued)."""
        if self.journal is not None:
            self.journal.set_meta("agent.sessions", self.count + 1)
        self.count += 1
        sid = f"s{self.count}"
        self.sessions[sid] = Session(sid, proc, bound, equipment)
        self.open.add(sid)
        self.scheduler.start(
            self.table.new(sid, session=sid, confirm_timeout_ms=self.confirm_timeout_ms), now_ns
        )
        self.scheduler.start(proc.table.new(f"{sid}/wf"), now_ns)
        self.layers.begin(sid, proc, now_ns)
        self.scheduler.feed(sid, "request", now_ns, _request_payload(proc, bound, equipment))
        queued = any(e in self.locks for e in equipment)
        if queued:
            self.queued.append(sid)
        else:
            self._accept(sid, now_ns)
        self._settle(now_ns)
        return sid, queued

    def redirect(self, sid: str, name: str, params: dict[str, Any], now_ns: int):
        """A new request for a running session: its tool is cancelled and the session
        starts over with the new procedure (a fresh workflow), keeping its id."""
        if sid not in self.sessions:
            return {"ok": False, "error": f"no session {sid!r}"}
        if self.loop(sid).state in FINAL:
            return {"ok": False, "error": f"session {sid} has ended"}
        try:
            proc = self.planner.plan(name)
            bound = proc.bind(params)
        except (LookupError, ValueError) as exc:
            return {"ok": False, "error": str(exc)}
        if self.journal is not None:
            try:
                self._keep_text(proc)
            except JournalIOError as exc:
                return {"ok": False, "error": f"{self.journal.path}: {exc.reason}: not redirected"}
        old = self.sessions[sid]
        for e in old.equipment:
            if self.locks.get(e) == sid:
                del self.locks[e]
        equipment = proc.equipment(bound)
        self.sessions[sid] = Session(sid, proc, bound, equipment)
        self.scheduler.feed(sid, "interrupt", now_ns, _request_payload(proc, bound, equipment))
        self.scheduler.machines.pop(f"{sid}/wf", None)
        self.scheduler.timers.cancel_machine(f"{sid}/wf")
        self.scheduler.start(proc.table.new(f"{sid}/wf"), now_ns)
        self.layers.redirect(sid, proc, now_ns)
        if any(e in self.locks for e in equipment):
            self.queued.append(sid)
        else:
            self._accept(sid, now_ns)
        self._settle(now_ns)
        return {"ok": True, "session": sid, "version": proc.version}

    def _keep_text(self, proc: Procedure) -> None:
        """The exact text of every version a session ran: a restore parses it from here,
        whatever the file says by then."""
        assert self.journal is not None
        self.journal.keep_text(proc.version, proc.name, proc.text)

    def _accept(self, sid: str, now_ns: int) -> None:
        for e in self.sessions[sid].equipment:
            self.locks[e] = sid
        self.scheduler.feed(sid, "accepted", now_ns)

    def _release_finished(self, now_ns: int) -> None:
        ended = [sid for sid in self.open if self.loop(sid).state in FINAL]
        if ended:
            self.open.difference_update(ended)
            self.finished.extend(sorted(ended, key=_number))
        for e, sid in list(self.locks.items()):
            if self.loop(sid).state in FINAL:
                del self.locks[e]
        for sid in list(self.queued):
            s = self.sessions[sid]
            if self.loop(sid).state in FINAL:
                self.queued.remove(sid)
            elif not any(e in self.locks for e in s.equipment):
                self.queued.remove(sid)
                self._accept(sid, now_ns)
                self._settle(now_ns)
        while len(self.finished) > self.keep_finished:
            self._forget(self.finished.popleft())

    def _forget(self, sid: str) -> None:
        """Let an ended session go from memory; the journal keeps its history."""
        self.sessions.pop(sid, None)
        for mid in (sid, f"{sid}/wf"):
            self.scheduler.machines.pop(mid, None)
            self.scheduler.timers.cancel_machine(mid)
        self.layers.forget(sid)

    def known(self, sid: str) -> bool:
        """A session this service started, in memory or let go (see `keep_finished`)."""
        return sid in self.sessions or (sid[1:].isdigit() and 1 <= int(sid[1:]) <= self.count)

    def _input(self, sid: str, event: str, now_ns: int, payload: Any = None) -> dict[str, Any]:
        if sid not in self.sessions:
            return {"ok": False, "error": f"no session {sid!r}"}
        m = self.loop(sid)
        before = m.state
        step = self.scheduler.feed(sid, event, now_ns, payload)
        self._settle(now_ns)
        if step.ignored:
            return {"ok": False, "error": f"session {sid} is {before}: {event} does not apply"}
        return {"ok": True, "session": sid, "state": self.loop(sid).state}

    def confirm(self, sid: str, now_ns: int) -> dict[str, Any]:
        return self._input(sid, "confirm", now_ns)

    def deny(self, sid: str, now_ns: int) -> dict[str, Any]:
        return self._input(sid, "deny", now_ns)

    def abort(self, sid: str, now_ns: int, reason: str = "aborted by the operator"):
        if sid in self.queued:
            self.queued.remove(sid)
        return self._input(sid, "abort", now_ns, reason)

    def tool_started(self, sid: str, step: str, attempt: int, seq: int | None, now_ns: int):
        return self._input(
            sid, "tool_started", now_ns, {"step": step, "attempt": attempt, "seq": seq}
        )

    def tool_done(
        self, sid: str, step: str, attempt: int, now_ns: int, outcome: str = "ok", detail: str = ""
    ):
        return self._input(
            sid,
            "tool_done",
            now_ns,
            {"step": step, "attempt": attempt, "outcome": outcome, "detail": detail},
        )

    def tool_failed(
        self, sid: str, step: str, attempt: int, error: str, now_ns: int, final: bool = False
    ):
        """`final`: never retried (the step's fallback or the end), e.g. a close that a
        restart found not done: it must not run late."""
        payload = {"step": step, "attempt": attempt, "error": error}
        if final:
            payload["final"] = True
        return self._input(sid, "tool_failed", now_ns, payload)

    def advance(self, now_ns: int) -> None:
        if self.scheduler.advance(now_ns):
            self._settle(now_ns)

    # -- views ----------------------------------------------------------------------------

    def status(self, sid: str | None = None) -> Any:
        if sid is not None:
            if sid not in self.sessions:
                if self.known(sid):
                    raise KeyError(
                        f"session {sid} ended and is no longer kept in memory "
                        "(agent.keep_finished_sessions): `history` has it from the journal"
                    )
                raise KeyError(f"no session {sid!r}")
            s, m = self.sessions[sid], self.loop(sid)
            wf = self.scheduler.machines[f"{sid}/wf"]
            return {
                "session": sid,
                "procedure": s.procedure.name,
                "version": s.procedure.version,
                "params": s.params,
                "equipment": s.equipment,
                "state": m.state,
                "step": wf.state,
                "attempt": m.ctx[SessionFields.ATTEMPT],
                "outcome": m.ctx[SessionFields.OUTCOME],
                "text": m.ctx[SessionFields.TEXT],
                "results": list(m.ctx[SessionFields.RESULTS]),
                "host": self.layers.host(sid),
                "layers": self.layers.states(sid),
            }
        return [
            {
                "session": k,
                "procedure": s.procedure.name,
                "state": self.loop(k).state,
                "step": self.scheduler.machines[f"{k}/wf"].state,
                "host": self.layers.host(k),
            }
            for k, s in self.sessions.items()
        ]

    def host_state(self) -> str:
        """The controller's host lifecycle, from its sessions' host layers: paused when
        every session not ended waits for the operator."""
        hosts = [self.layers.host(k) for k in self.sessions]
        active = [h for h in hosts if h != "completed"]
        if not hosts:
            return "idle"
        if not active:
            return "completed"
        if all(h == "paused" for h in active):
            return "paused"
        return "running"

    def history(self, sid: str) -> list[dict[str, Any]]:
        if self.journal is None:
            return []
        return [r for r in self.journal.rows() if r["machine"] in (sid, f"{sid}/wf")]

    def layer_history(self, sid: str) -> list[dict[str, Any]]:
        """The journaled steps of a session's phase, flow and host layers."""
        if self.journal is None:
            return []
        mine = {mid for layer, mid in layer_ids(sid).items() if layer != "workflow"}
        return [r for r in self.journal.rows() if r["machine"] in mine]

    # -- after a crash --------------------------------------------------------------------

    def _rebuild_layers(self, sid: str, loop: Machine, proc: Procedure) -> None:
        """The phase from its checkpoint (the authority), the other layers from it; a
        session journaled before the layers gets a phase made from its loop and step."""
        assert self.journal is not None
        cp = self.journal.checkpoint(layer_ids(sid)["phase"])
        if cp is not None:
            phase = Machine.restore(PHASE_TABLE, cp["snapshot"])
        else:
            wf = self.journal.checkpoint(f"{sid}/wf")
            step = wf["snapshot"]["state"] if wf else proc.table.initial
            phase = legacy_phase(sid, loop, step)
        self.layers.rebuild(sid, proc, phase)

    def restore(self, now_ns: int) -> int:
        """Rebuild every journaled session; returns how many. In-flight tools come back as
        RunTool(reconcile=True) in `take()`."""
        if self.journal is None:
            return 0
        ids = [m for m in self.journal.checkpoints() if "/" not in m]
        texts = self.journal.texts()
        for sid in sorted(ids, key=lambda x: int(x[1:]) if x[1:].isdigit() else 0):
            loop, _ = self.scheduler.resume_or_start(self.table, sid, now_ns)
            req = loop.ctx[SessionFields.REQUEST]
            if req is None:
                continue
            proc = parse_procedure(
                texts[req["version"]],
                f"<journal {req['version']}>",
                tools=self.planner.tools,
                check_steps=False,
            )
            self._rebuild_layers(sid, loop, proc)
            self.sessions[sid] = Session(sid, proc, req["params"], req["equipment"])
            if loop.state not in FINAL:
                self.open.add(sid)
            if loop.state == S.RECEIVING_INPUT:
                self.queued.append(sid)  # it was waiting for its equipment: it still is
            elif loop.state in ACTIVE:
                for e in req["equipment"]:
                    self.locks.setdefault(e, sid)
            if loop.state == S.WAITING_FOR_TOOL:
                c = loop.ctx
                self.out.append(
                    RunTool(
                        sid,
                        c["step"],
                        c["attempt"],
                        c["tool"],
                        c["args"],
                        reconcile=True,
                        seq=c["inflight_seq"],
                    )
                )
        self.finished.extend(
            sorted((k for k in self.sessions if self.loop(k).state in FINAL), key=_number)
        )
        while len(self.finished) > self.keep_finished:
            self._forget(self.finished.popleft())
        return len(self.sessions)


def _request_payload(proc: Procedure, bound: dict[str, Any], equipment: list[str]) -> dict:
    """What the session loop stores of a request (and a restore reads back)."""
    return {
        "procedure": proc.name,
        "version": proc.version,
        "params": bound,
        "equipment": equipment,
    }


def _number(sid: str) -> int:
    return int(sid[1:]) if sid[1:].isdigit() else 0
