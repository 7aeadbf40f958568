"""Every session on the design's four layers (`controller/engine/layers.py`).

  Phase     requested -> operating -> ended, only forward; persisted: the authority
  Flow      the procedure's whitelisted moves (`Procedure.flow`): a move off it is refused
  Workflow  the procedure's steps and validated routes (`Procedure.table`, `{sid}/wf`)
  Host      idle -> running <-> paused -> completed: started when the session is
            accepted, paused while it waits for the operator, completed or aborted

The workflow is a machine on the service's scheduler (`{sid}/wf`); the phase, the flow
and the host are kept here, apart from the scheduler's machines: they have no timers and
no effects, and each of their steps is recorded in the service's journal, in the same
batch as the session steps that caused it. The session loop (`tables/session.yaml`)
runs the current step's tool; its transitions drive the layers here
(`SessionLayers.follow`, the scheduler's step hook). Only the phase layer is the
authority: after a restart the flow, the workflow and the host are rebuilt from it
(`rebuild`), whatever their own checkpoints say.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from goosectl.controller.agent.procedure import Procedure
from goosectl.controller.engine import Journal, Machine, RejectedEvent, Scheduler, Table
from goosectl.controller.engine.layers import STOPPED, host_spec, host_view, phase_spec
from goosectl.controller.engine.machine import Step

PHASES = ("requested", "operating", "ended")
PHASE_TABLE = Table.from_spec(phase_spec("agent-phase", PHASES))
HOST_TABLE = Table.from_spec(host_spec("agent-host"))
#: the session loop's states the layers follow (`service.SessionStates` has the same names,
#: checked against the table when it loads)
_RECEIVING, _PLANNING, _AWAITING = "receiving_input", "planning", "awaiting_confirmation"
_COMPLETED, _ABORTED, _IDLE = "completed", "aborted", "idle"


class FlowRefused(Exception):
    """A workflow move that the flow layer's whitelist does not have."""


def ids(sid: str) -> dict[str, str]:
    """The machine ids of a session's layers."""
    return {
        "phase": f"{sid}/phase",
        "flow": f"{sid}/flow",
        "workflow": f"{sid}/wf",
        "host": f"{sid}/host",
    }


class SessionLayers:
    """The layers of every session, beside the service's scheduler (its workflows)."""

    def __init__(self, scheduler: Scheduler, journal: Journal | None) -> None:
        self.scheduler = scheduler
        self.journal = journal
        #: the phase, flow and host machines of every session in memory, by id
        self.machines: dict[str, Machine] = {}
        #: the procedure each session's flow and workflow were built from
        self.procedures: dict[str, Procedure] = {}
        #: the last layer transitions the session loop asked for and a layer refused (see
        #: `_on_step`), and how many in all
        self.refused: deque[str] = deque(maxlen=64)
        self.refused_total = 0
        scheduler.on_step = self._on_step

    # -- building -------------------------------------------------------------------------

    def begin(self, sid: str, proc: Procedure, now_ns: int) -> None:
        """A new session: the phase starts at `requested`, the others are derived."""
        self.procedures[sid] = proc
        phase = PHASE_TABLE.new(ids(sid)["phase"])
        self._record(phase, phase.start(now_ns), now_ns)
        self.machines[phase.id] = phase
        self._derive_upper(sid, with_workflow=False)

    def redirect(self, sid: str, proc: Procedure, now_ns: int) -> None:
        """A new procedure for a running session: the phase keeps its place (it never
        goes back), the flow starts over at the new procedure's first step."""
        self.procedures[sid] = proc
        self._feed(ids(sid)["phase"], "flow_moved", now_ns, proc.table.initial)
        self._derive_upper(sid, with_workflow=False)

    def rebuild(self, sid: str, proc: Procedure, phase: Machine) -> None:
        """After a restart: the flow, the workflow and the host from the phase alone."""
        self.procedures[sid] = proc
        self.machines[phase.id] = phase
        self._derive_upper(sid, with_workflow=True)

    def _derive_upper(self, sid: str, with_workflow: bool) -> None:
        phase = self.phase(sid)
        proc = self.procedures[sid]
        step = phase.ctx["flow"] or proc.table.initial
        machines = self.machines
        machines[ids(sid)["flow"]] = _derived(proc.flow, sid, "flow", _flow_view(phase, step))
        machines[ids(sid)["host"]] = _derived(HOST_TABLE, sid, "host", host_view(phase))
        if with_workflow:
            self.scheduler.machines[ids(sid)["workflow"]] = _derived(proc.table, sid, "wf", step)

    def forget(self, sid: str) -> None:
        self.procedures.pop(sid, None)
        for layer, mid in ids(sid).items():
            if layer != "workflow":
                self.machines.pop(mid, None)

    def _feed(self, mid: str, event: str, now_ns: int, payload: Any = None) -> None:
        """One step of a layer machine, journaled (`RejectedEvent` when its table says no)."""
        machine = self.machines[mid]
        self._record(machine, machine.dispatch(event, now_ns, payload), now_ns)

    def _record(self, machine: Machine, step: Step, now_ns: int) -> None:
        if self.journal is not None:
            self.journal.record(machine, step, now_ns, self.scheduler.last_input)

    # -- views ----------------------------------------------------------------------------

    def phase(self, sid: str) -> Machine:
        return self.machines[ids(sid)["phase"]]

    def host(self, sid: str) -> str:
        return self.machines[ids(sid)["host"]].state

    def states(self, sid: str) -> dict[str, Any]:
        """What `goosectl agent status` shows of the layers."""
        phase = self.phase(sid)
        at = ids(sid)
        out: dict[str, Any] = {
            "phase": phase.state,
            "flow": self.machines[at["flow"]].state,
            "workflow": self.scheduler.machines[at["workflow"]].state,
            "host": self.host(sid),
        }
        out["aborted"] = phase.ctx["aborted"]
        out["refused_back"] = phase.ctx["refused_back"]
        return out

    # -- the flow -------------------------------------------------------------------------

    def move(self, sid: str, step: str, now_ns: int) -> None:
        """The workflow moved to `step`: the flow checks the move against its whitelist,
        then the phase records where the flow is. `FlowRefused` says why not."""
        flow = ids(sid)["flow"]
        before = self.machines[flow].state
        try:
            self._feed(flow, f"to:{step}", now_ns)
        except RejectedEvent:
            raise FlowRefused(
                f"step {before} -> {step} is not in the flow whitelist of procedure "
                f"{self.procedures[sid].name}"
            ) from None
        self._feed(ids(sid)["phase"], "flow_moved", now_ns, step)

    # -- the host, following the session loop --------------------------------------------

    def _on_step(self, machine: Machine, step: Step, now_ns: int) -> None:
        if "/" in machine.id or machine.id not in self.procedures:
            return
        for src, _event, dst in step.transitions:
            try:
                self.follow(machine.id, src, dst, now_ns)
            except RejectedEvent as exc:
                # a layer refusing what the loop did is a fault of this mapping, never of
                # the operator: kept in `refused`, the session goes on as journaled
                self.refused.append(f"{machine.id}: {src} -> {dst}: {exc}")
                self.refused_total += 1

    def follow(self, sid: str, src: str, dst: str, now_ns: int) -> None:
        """One transition of the session loop, as the layers see it."""
        if src == _RECEIVING and dst == _PLANNING:
            self._start(sid, now_ns)
        elif dst == _AWAITING:
            self._host(sid, "pause", "host_paused", now_ns)
        elif src == _AWAITING and dst not in (_ABORTED, _AWAITING):
            self._host(sid, "resume", "host_resumed", now_ns)
        if dst == _COMPLETED:
            self._end(sid, "complete", "advance", now_ns)
        elif dst == _ABORTED:
            self._end(sid, "abort", "host_aborted", now_ns)
        elif dst == _RECEIVING and src != _IDLE and self.phase(sid).state != PHASES[0]:
            # a new request for a session already operating: it goes on with the new
            # procedure, but its phase does not go back; the refusal is a journaled row
            self._feed(ids(sid)["phase"], "back", now_ns, PHASES[0])

    def _start(self, sid: str, now_ns: int) -> None:
        if self.host(sid) != "idle":
            return  # accepted again after a redirect: it is running already
        self._host(sid, "start", "host_started", now_ns)
        self._feed(ids(sid)["phase"], "advance", now_ns)

    def _host(self, sid: str, event: str, record: str, now_ns: int) -> None:
        self._feed(ids(sid)["host"], event, now_ns)
        self._feed(ids(sid)["phase"], record, now_ns)

    def _end(self, sid: str, host_event: str, phase_event: str, now_ns: int) -> None:
        host = self.host(sid)
        if host == "paused":  # the host ends only a running session
            self._host(sid, "resume", "host_resumed", now_ns)
        if host != "idle":  # a session that never started has nothing to end in the host
            self._feed(ids(sid)["host"], host_event, now_ns)
        self._feed(ids(sid)["phase"], phase_event, now_ns)
        self._feed(ids(sid)["flow"], "stop", now_ns)
        self.machines[ids(sid)["host"]] = _derived(
            HOST_TABLE, sid, "host", host_view(self.phase(sid))
        )


def _flow_view(phase: Machine, step: str) -> str:
    return STOPPED if phase.done else step


def _derived(table: Table, sid: str, layer: str, state: str) -> Machine:
    """An upper layer's machine at the state the authority says."""
    snap = {"machine": f"{sid}/{layer}", "table": table.name, "state": state, "context": {}}
    return Machine.restore(table, snap)


def legacy_phase(sid: str, loop: Machine, step: str) -> Machine:
    """The phase of a session journaled before the layers were (no phase checkpoint):
    made from its loop and its workflow's step, then the authority like any other."""
    state = loop.state
    if state in (_COMPLETED, _ABORTED):
        phase = PHASES[2]
    elif state in (_IDLE, _RECEIVING):
        phase = PHASES[0]
    else:
        phase = PHASES[1]
    ctx = {
        "flow": step,
        "started": phase != PHASES[0],
        "paused": state == _AWAITING,
        "aborted": state == _ABORTED,
        "refused_back": 0,
    }
    snap = {"machine": ids(sid)["phase"], "table": PHASE_TABLE.name, "state": phase, "context": ctx}
    return Machine.restore(PHASE_TABLE, snap)
