"""A supervisory procedure: a workflow table in a file, validated on load.

Steps are nodes, each a call of a declared tool (`controller/agent/tools.py`) whose
arguments are checked against the tool's model on load: an unknown tool, a missing or
misspelt argument, or a `{placeholder}` that names no parameter is a finding with the file,
line, step and field, never a KeyError in a running session. A step leaves by its plain
edge (`next`), by a conditional route (`routes: {outcome: step}`, whose keys must equal
the outcomes its tool declares), or by its `fallback` when it fails for good. The graph is
compiled into an engine workflow table, so the engine's own validation applies: unknown
steps, unreachable steps, and router outcomes that are not exactly the route map's keys
are reported with the file, line and item.

Parameters are substituted into strings (`"bay{bay}"`) when a session is planned; the
procedure's version is its declared `version` plus the hash of its text, recorded in the
journal with every session transition.
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from goosectl.controller.agent.tools import TOOLS, ToolSet
from goosectl.controller.engine import Registry, Table, TableError
from goosectl.controller.engine.findings import Finding
from goosectl.controller.engine.layers import flow_spec, workflow_spec
from goosectl.controller.engine.loader import (
    DEFAULT_LIMITS,
    LoaderLimits,
    parse_document,
    read_text,
    validation_findings,
)
from goosectl.controller.engine.spec import MachineSpec


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetryCfg(_Cfg):
    count: int = Field(default=0, ge=0, le=20)
    backoff_ms: float = Field(default=100, ge=0)


class StepSpec(_Cfg):
    tool: str = Field(description="a declared tool (controller/agent/tools.py)")
    args: dict[str, Any] = Field(
        default_factory=dict, description="checked against the tool's argument model on load"
    )
    confirm: bool = Field(default=False, description="dangerous: wait for the operator")
    timeout_ms: float = Field(default=2000, gt=0)
    retry: RetryCfg = Field(default_factory=RetryCfg)
    next: str | None = None
    routes: dict[str, str] | None = None
    fallback: str | None = None
    outcome: Literal["done", "failed"] = Field(
        default="done", description="for a final step: how the procedure ended"
    )


class ParamSpec(_Cfg):
    type: Literal["int", "str", "bool"] = "str"
    required: bool = True
    default: Any = None


class ProcedureSpec(_Cfg):
    name: str
    version: str = "1"
    description: str = ""
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    equipment: list[str] = Field(default_factory=list, description="locks, e.g. bay{bay}")
    conflict: Literal["refuse", "queue"] = "refuse"
    start: str
    steps: dict[str, StepSpec]


class ProcedureError(Exception):
    """A procedure file that cannot be used; `findings` has every problem."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        super().__init__("\n".join(str(f) for f in findings))


@dataclass(frozen=True)
class Procedure:
    spec: ProcedureSpec
    table: Table  # the workflow: nodes = steps, `done` routes by outcome, `failed` -> fallback
    version: str  # declared version + text hash: what the journal records
    text: str
    source: str
    flow: Table  # the flow layer's whitelist: every move a step may make, and no other

    @property
    def name(self) -> str:
        return self.spec.name

    def step(self, step_id: str) -> StepSpec:
        return self.spec.steps[step_id]

    def is_final(self, step_id: str) -> bool:
        s = self.spec.steps[step_id]
        return s.next is None and s.routes is None

    def bind(self, params: dict[str, Any]) -> dict[str, Any]:
        """Check and complete a request's parameters; ValueError says which and why."""
        out: dict[str, Any] = {}
        for name, p in self.spec.params.items():
            if name not in params:
                if p.required:
                    raise ValueError(f"{self.name}: parameter {name!r} is required")
                out[name] = p.default
                continue
            raw = params[name]
            try:
                out[name] = PARAM_TYPES[p.type](raw)
            except (TypeError, ValueError):
                raise ValueError(f"{self.name}: parameter {name}={raw!r} is not {p.type}") from None
        unknown = sorted(set(params) - set(self.spec.params))
        if unknown:
            raise ValueError(f"{self.name}: unknown parameter(s) {', '.join(unknown)}")
        return out

    def equipment(self, params: dict[str, Any]) -> list[str]:
        return [e.format(**params) for e in self.spec.equipment]


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if str(v).lower() in ("1", "true", "yes", "on"):
        return True
    if str(v).lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(v)


#: a procedure parameter's declared type -> how a request's text becomes it
PARAM_TYPES: dict[str, Callable[[Any], Any]] = {"int": int, "str": str, "bool": _bool}


def fill(value: Any, params: dict[str, Any]) -> Any:
    """Substitute parameters into every string of a step's args."""
    if isinstance(value, str):
        return value.format(**params)
    if isinstance(value, dict):
        return {k: fill(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, params) for v in value]
    return value


def placeholders(value: Any) -> Iterator[str]:
    """The parameter names `fill` will look up in every string of `value` (ValueError for
    a string that is not a format string, e.g. a lone `{`)."""
    if isinstance(value, str):
        for _, name, _, _ in string.Formatter().parse(value):
            if name is not None:
                yield name.split(".", 1)[0].split("[", 1)[0]
    elif isinstance(value, dict):
        for v in value.values():
            yield from placeholders(v)
    elif isinstance(value, list):
        for v in value:
            yield from placeholders(v)


def step_findings(spec: ProcedureSpec, tools: ToolSet, source: str, line_of=None) -> list[Finding]:
    """Every step against its tool: the tool is declared, its arguments fit the tool's
    model, and each `{placeholder}` (in args and equipment) names a parameter."""
    out: list[Finding] = []

    def at(path: tuple, item: str, reason: str, code: str) -> None:
        out.append(Finding(source, line_of(path) if line_of else None, item, reason, code))

    known = ", ".join(sorted(tools))
    for sid, s in spec.steps.items():
        where = ("steps", sid)
        if s.tool not in tools:
            at(
                (*where, "tool"),
                f"steps.{sid}.tool",
                f"unknown tool {s.tool!r}; known: {known}",
                "unknown_tool",
            )
            continue
        for loc, msg in tools.problems(s.tool, s.args):
            path = (*where, "args", *loc)
            at(
                path,
                ".".join(str(x) for x in ("steps", sid, "args", *loc)),
                f"{msg} (tool {s.tool})",
                "tool_args",
            )
        _check_placeholders(spec, s.args, (*where, "args"), at)
    for i, e in enumerate(spec.equipment):
        _check_placeholders(spec, e, ("equipment", i), at)
    return out


def _check_placeholders(spec: ProcedureSpec, value: Any, path: tuple, at) -> None:
    if isinstance(value, dict):  # down to the field, so the finding names it
        for k, v in value.items():
            _check_placeholders(spec, v, (*path, k), at)
        return
    item = ".".join(str(x) for x in path)
    try:
        names = sorted(set(placeholders(value)))
    except ValueError as exc:
        at(
            path,
            item,
            f"not a valid text template: {exc} (write a brace as {{{{ or }}}})",
            "placeholder",
        )
        return
    unknown = [n for n in names if n not in spec.params]
    if unknown:
        declared = ", ".join(spec.params) or "none"
        at(
            path,
            item,
            f"placeholder {{{unknown[0]}}} names no parameter (parameters: {declared})",
            "placeholder",
        )


def _router_registry(spec: ProcedureSpec) -> Registry:
    reg = Registry(f"procedure:{spec.name}")
    for sid, step in spec.steps.items():
        if step.routes is not None:
            # outcomes are declared in the table (routers:), checked once, reported once
            reg.router(outcomes=(), name=sid)(lambda ctx, ev: ev.payload)
    return reg


def _finding(source: str, line_of, path: tuple, item: str, reason: str, code: str) -> Finding:
    return Finding(source, line_of(path) if line_of else None, item, reason, code)


def _structure_findings(spec: ProcedureSpec, source: str, line_of) -> list[Finding]:
    """What the engine cannot see in the graph: a step with two ways out."""
    return [
        _finding(
            source,
            line_of,
            ("steps", sid),
            sid,
            "a step has `next` or `routes`, not both",
            "structure",
        )
        for sid, s in spec.steps.items()
        if s.next is not None and s.routes is not None
    ]


def _workflow_data(
    spec: ProcedureSpec, tools: ToolSet, nodes: list[str], version: str
) -> dict[str, Any]:
    """The workflow table as data: `done` by the plain edge or the step's routes (whose
    router declares its tool's outcomes), `failed` to the fallback."""
    wf = workflow_spec(
        f"procedure:{spec.name}",
        nodes,
        {sid: s.next for sid, s in spec.steps.items() if s.next is not None},
        {sid: (sid, s.routes) for sid, s in spec.steps.items() if s.routes is not None},
        {
            # an unknown tool is already a finding: its routes are taken as they are
            sid: tools[s.tool].outcomes if s.tool in tools else tuple(s.routes)
            for sid, s in spec.steps.items()
            if s.routes is not None
        },
        final=[sid for sid, s in spec.steps.items() if s.next is None and s.routes is None],
        version=version,
    )
    data = wf.model_dump(by_alias=True)
    data["events"] = [*data["events"], "failed"]
    data["on_unhandled"] = "reject"
    for sid, s in spec.steps.items():
        if s.fallback is not None:
            data["transitions"].append({"source": sid, "event": "failed", "target": s.fallback})
    return data


def _workflow_lines(data: dict[str, Any], nodes: list[str], line_of):
    """Workflow table paths mapped back to the procedure file: steps.<node>."""

    def wf_line(path: tuple) -> int | None:
        if line_of is None:
            return None
        if len(path) >= 2 and path[0] == "transitions":
            i = path[1]
            if isinstance(i, int) and i < len(data["transitions"]):
                src = data["transitions"][i]["source"]
                return line_of(("steps", src if isinstance(src, str) else src[0]))
        if len(path) >= 2 and path[0] == "states" and isinstance(path[1], int):
            return line_of(("steps", nodes[path[1]]))
        return line_of(("steps",))

    return wf_line


def flow_edges(spec: ProcedureSpec) -> list[tuple[str, str]]:
    """The whitelist of the flow layer: every move a step may make (its `next`, each
    route, its `fallback`), and no other."""
    edges: set[tuple[str, str]] = set()
    for sid, s in spec.steps.items():
        targets = [s.next, s.fallback, *(s.routes or {}).values()]
        edges.update((sid, t) for t in targets if t is not None)
    return sorted(edges)


def compile_procedure(
    spec: ProcedureSpec,
    text: str,
    source: str,
    line_of=None,
    tools: ToolSet = TOOLS,
    check_steps: bool = True,
) -> Procedure:
    """The workflow table of a procedure, validated by the engine, its steps by their tools
    (`check_steps=False`: the workflow only, see `parse_procedure`), and its flow
    whitelist."""
    findings = step_findings(spec, tools, source, line_of) if check_steps else []
    findings += _structure_findings(spec, source, line_of)
    if spec.start not in spec.steps:
        findings.append(
            _finding(
                source,
                line_of,
                ("start",),
                spec.start,
                "start step is not one of the steps",
                "unknown_state",
            )
        )
        raise ProcedureError(findings)
    # the version every journaled transition records: declared version + text hash
    version = f"{spec.version}+{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    nodes = [spec.start, *[s for s in spec.steps if s != spec.start]]
    data = _workflow_data(spec, tools, nodes, version)
    try:
        table = Table.from_spec(
            MachineSpec.model_validate(data),
            [_router_registry(spec)],
            source,
            _workflow_lines(data, nodes, line_of),
        )
        flow = Table.from_spec(
            flow_spec(f"flow:{spec.name}", nodes, flow_edges(spec), version), source=source
        )
    except TableError as exc:
        findings.extend(exc.findings)
    if findings:
        raise ProcedureError(findings)
    return Procedure(spec, table, version, text, source, flow)


def parse_procedure(
    text: str,
    source: str,
    limits: LoaderLimits = DEFAULT_LIMITS,
    tools: ToolSet = TOOLS,
    check_steps: bool = True,
) -> Procedure:
    """A procedure from its text. `check_steps=False` is for a restore: a text the journal
    accepted once is rebuilt even if today's tools check its arguments more strictly (or
    no longer know a tool); the tool runner checks each step's arguments again when it
    runs, and a bad one fails that step with the reason (retry, fallback), never the
    restart of the whole agent."""
    try:
        data, line_of = parse_document(text, source, ".yaml", limits)
        spec = ProcedureSpec.model_validate(data)
    except TableError as exc:
        raise ProcedureError(exc.findings) from exc
    except ValidationError as exc:
        raise ProcedureError(validation_findings(exc, source, line_of)) from exc
    return compile_procedure(spec, text, source, line_of, tools, check_steps)


def load_procedure(
    path: str | Path,
    limits: LoaderLimits = DEFAULT_LIMITS,
    tools: ToolSet = TOOLS,
    *,
    regular_only: bool = False,
) -> Procedure:
    """`regular_only`: a hot reload inside the running loop (see `read_text`)."""
    p = Path(path)
    try:
        text = read_text(p, limits, regular_only=regular_only)
    except TableError as exc:
        raise ProcedureError(exc.findings) from exc
    return parse_procedure(text, str(p), limits, tools)
