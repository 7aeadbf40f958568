"""The design's four layers as tables on the one engine, and a stack that keeps them honest.

  Phase     only forward, in declared order; its last phase is final          (lowest)
  Flow      a whitelisted directed graph of steps; `stop` ends it from anywhere
  Workflow  nodes, plain edges and conditional routes (router outcomes == route keys)
  Host      idle -> running -> paused/completed; start while running and abort while not
            running are refused                                                 (highest)

Only the lowest layer is persisted. `LayerStack` keeps the Phase machine as the authority:
its context records where the flow is and whether the host is paused, and every upper
layer is rebuilt from it (`rebuild`), after a restart or whenever an upper view disagrees.
A completed phase forces the flow to stop. A request to move a phase back (`back`) is
refused by a row that records and counts it without moving, so the refusal is journaled.

The agent runs every session on these tables (`controller/agent/layers.py`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from goosectl.controller.engine.machine import Machine
from goosectl.controller.engine.spec import MachineSpec
from goosectl.controller.engine.table import Table

STOPPED = "stopped"


#: the phase layer's rows besides `advance`: (event, action, its args, whether the row
#: ends the phases). They record, in the persisted layer, what the upper layers are
#: rebuilt from; `back` is a request to move backwards, refused by recording it (and
#: counting it) without moving, so the refusal is journaled like any other step.
PHASE_RECORDS: tuple[tuple[str, str, dict[str, Any], bool], ...] = (
    ("flow_moved", "store", {"field": "flow"}, False),
    ("host_started", "set", {"started": True}, False),
    ("host_paused", "set", {"paused": True}, False),
    ("host_resumed", "set", {"paused": False}, False),
    ("host_aborted", "set", {"aborted": True}, True),
    ("back", "incr", {"field": "refused_back"}, False),
)

#: the phase layer's context: where the flow is, the host's flags, refusals counted
PHASE_CONTEXT: dict[str, Any] = {
    "flow": {"default": None},
    "started": {"default": False},
    "paused": {"default": False},
    "aborted": {"default": False},
    "refused_back": {"default": 0, "reducer": "sum"},
}


def _phase_row(
    live: list[str], final: str, record: tuple[str, str, dict[str, Any], bool]
) -> dict[str, Any]:
    event, action, args, ends = record
    row: dict[str, Any] = {"source": live, "event": event}
    row.update({"target": final} if ends else {"internal": True})
    row["actions"] = [{"name": action, "args": args}]
    return row


def phase_spec(name: str, phases: Sequence[str], version: str = "1") -> MachineSpec:
    """Forward-only phases. `advance` moves to the next one; nothing moves back.

    The records (`PHASE_RECORDS`) keep the flow position and the host's flags in the
    context, because this is the persisted layer the others are derived from."""
    if len(phases) < 2:
        raise ValueError("a phase table needs at least two phases")
    rows: list[dict[str, Any]] = [
        {"source": a, "event": "advance", "target": b} for a, b in itertools.pairwise(phases)
    ]
    rows += [_phase_row(list(phases[:-1]), phases[-1], r) for r in PHASE_RECORDS]
    return MachineSpec.model_validate(
        {
            "name": name,
            "version": version,
            "initial": phases[0],
            "states": list(phases),
            "final": [phases[-1]],
            "events": ["advance", *(r[0] for r in PHASE_RECORDS)],
            "transitions": rows,
            "context": PHASE_CONTEXT,
        }
    )


def flow_spec(
    name: str, nodes: Sequence[str], edges: Iterable[tuple[str, str]], version: str = "1"
) -> MachineSpec:
    """Whitelisted moves only: event `to:B` is accepted in A iff (A, B) is an edge."""
    edges = list(edges)
    targets = sorted({b for _, b in edges})
    rows: list[dict[str, Any]] = [{"source": a, "event": f"to:{b}", "target": b} for a, b in edges]
    rows.append({"source": "*", "event": "stop", "target": STOPPED})
    return MachineSpec.model_validate(
        {
            "name": name,
            "version": version,
            "initial": nodes[0],
            "states": [*nodes, STOPPED],
            "final": [STOPPED],
            "events": [*(f"to:{b}" for b in targets), "stop"],
            "transitions": rows,
        }
    )


def workflow_spec(
    name: str,
    nodes: Sequence[str],
    edges: Mapping[str, str],
    routes: Mapping[str, tuple[str, Mapping[str, str]]] | None = None,
    routers: Mapping[str, Sequence[str]] | None = None,
    final: Sequence[str] = (),
    version: str = "1",
) -> MachineSpec:
    """Nodes complete with `done`; a node leaves by its plain edge or by a router's outcome.

    `routes` maps a node to (router name, {outcome: next node}); `routers` declares each
    router's outcomes, which validation checks equal the route map's keys."""
    rows: list[dict[str, Any]] = [
        {"source": a, "event": "done", "target": b} for a, b in edges.items()
    ]
    for node, (router, route_map) in (routes or {}).items():
        rows.append({"source": node, "event": "done", "router": router, "routes": dict(route_map)})
    return MachineSpec.model_validate(
        {
            "name": name,
            "version": version,
            "initial": nodes[0],
            "states": list(nodes),
            "final": list(final),
            "events": ["done"],
            "transitions": rows,
            "routers": {k: {"outcomes": list(v)} for k, v in (routers or {}).items()},
        }
    )


HOST_STATES = ("idle", "running", "paused", "completed")


def host_spec(name: str = "host", version: str = "1") -> MachineSpec:
    return MachineSpec.model_validate(
        {
            "name": name,
            "version": version,
            "initial": "idle",
            "states": list(HOST_STATES),
            "final": ["completed"],
            "events": ["start", "pause", "resume", "complete", "abort"],
            "on_unhandled": "reject",
            "transitions": [
                {"source": "idle", "event": "start", "target": "running"},
                {"source": "running", "event": "pause", "target": "paused"},
                {"source": "paused", "event": "resume", "target": "running"},
                {"source": "running", "event": "complete", "target": "completed"},
                {"source": "running", "event": "abort", "target": "completed"},
            ],
        }
    )


def host_view(phase: Machine) -> str:
    """The host lifecycle as a function of the persisted phase layer."""
    ctx = phase.ctx
    if phase.done:
        return "completed"
    if not ctx["started"]:
        return "idle"
    return "paused" if ctx["paused"] else "running"


class LayerStack:
    """Phase (persisted) + Flow + Host, where Flow and Host are rebuilt from Phase."""

    def __init__(
        self, phase: Table, flow: Table, host: Table | None = None, stack_id: str = "stack"
    ) -> None:
        self.tables = {"phase": phase, "flow": flow, "host": host or Table.from_spec(host_spec())}
        self.id = stack_id
        self.phase = phase.new(f"{stack_id}/phase")
        self.phase.start(0)
        self.flow: Machine
        self.host: Machine
        self.rebuild()

    # -- derived views ------------------------------------------------------------------

    def _flow_view(self) -> str:
        if self.phase.done:
            return STOPPED
        return self.phase.ctx["flow"] or self.tables["flow"].initial

    def _derived(self, layer: str, state: str) -> Machine:
        table = self.tables[layer]
        return Machine.restore(
            table,
            {"machine": f"{self.id}/{layer}", "table": table.name, "state": state, "context": {}},
        )

    def rebuild(self) -> None:
        """Recompute the upper layers from the phase layer: the authority wins."""
        self.flow = self._derived("flow", self._flow_view())
        self.host = self._derived("host", host_view(self.phase))

    def consistent(self) -> bool:
        return self.flow.state == self._flow_view() and self.host.state == host_view(self.phase)

    # -- operations: each goes through the layer's own table, then into the authority ----

    def start(self, now_ns: int) -> None:
        self.host.dispatch("start", now_ns)
        self.phase.dispatch("host_started", now_ns)

    def pause(self, now_ns: int) -> None:
        self.host.dispatch("pause", now_ns)
        self.phase.dispatch("host_paused", now_ns)

    def resume(self, now_ns: int) -> None:
        self.host.dispatch("resume", now_ns)
        self.phase.dispatch("host_resumed", now_ns)

    def abort(self, now_ns: int) -> None:
        self.host.dispatch("abort", now_ns)
        self.phase.dispatch("host_aborted", now_ns)
        self.flow.dispatch("stop", now_ns)

    def move(self, node: str, now_ns: int) -> None:
        """Move the flow along a whitelisted edge (refused otherwise, and when not running)."""
        if self.host.state != "running":
            raise PermissionError(
                f"{self.id}: the flow moves only while running (host is {self.host.state})"
            )
        self.flow.dispatch(f"to:{node}", now_ns)
        self.phase.dispatch("flow_moved", now_ns, node)

    def advance(self, now_ns: int) -> None:
        self.phase.dispatch("advance", now_ns)
        if self.phase.done:  # phase complete forces the flow to stop
            self.flow.dispatch("stop", now_ns)
            self.host = self._derived("host", host_view(self.phase))

    def snapshot(self) -> dict[str, Any]:
        """Only the lowest layer is persisted."""
        return self.phase.snapshot()

    @classmethod
    def restore(
        cls, phase: Table, flow: Table, snap: dict[str, Any], host: Table | None = None
    ) -> LayerStack:
        stack = cls(phase, flow, host, snap["machine"].rsplit("/", 1)[0])
        stack.phase = Machine.restore(phase, snap)
        stack.rebuild()
        return stack
