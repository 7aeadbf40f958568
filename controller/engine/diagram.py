"""Draw a table as Mermaid (stateDiagram-v2) or Graphviz dot, straight from the spec."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from goosectl.controller.engine.spec import MachineSpec, TransitionSpec
from goosectl.controller.engine.validate import expand_sources


def _label(t: TransitionSpec, outcome: str | None = None) -> str:
    parts = [t.event]
    if t.guard is not None:
        parts.append(f"[{t.guard.label()}]")
    if outcome is not None and t.router is not None:
        parts.append(f"{t.router.name}={outcome}")
    if t.actions:
        parts.append("/ " + ", ".join(a.label() for a in t.actions))
    return " ".join(parts)


def _edges(spec: MachineSpec) -> Iterator[tuple[str, str, str]]:
    for t in spec.transitions:
        for src in expand_sources(spec, t.sources()):
            target = t.target_from(src)
            targets = [(None, target)] if target else list((t.routes or {}).items())
            for outcome, dst in targets:
                yield src, dst, _label(t, outcome)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def mermaid(spec: MachineSpec) -> str:
    lines = ["stateDiagram-v2", f"    %% {spec.name} v{spec.version}"]
    for s in spec.states:
        if _safe(s.name) != s.name:
            lines.append(f'    state "{s.name}" as {_safe(s.name)}')
    lines.append(f"    [*] --> {_safe(spec.initial)}")
    for src, dst, label in _edges(spec):
        lines.append(f"    {_safe(src)} --> {_safe(dst)}: {label.replace(':', ' ')}")
    for tm in spec.timers:
        lines.append(f"    note right of {_safe(tm.state)}: after {tm.after_ms} ms -> {tm.event}")
    for f in spec.final:
        lines.append(f"    {_safe(f)} --> [*]")
    return "\n".join(lines) + "\n"


def dot(spec: MachineSpec) -> str:
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [
        f"digraph {q(spec.name)} {{",
        "    rankdir=LR;",
        "    node [shape=box, style=rounded];",
        "    __start [shape=point];",
        f"    __start -> {q(spec.initial)};",
    ]
    for f in spec.final:
        lines.append(f"    {q(f)} [peripheries=2];")
    for src, dst, label in _edges(spec):
        lines.append(f"    {q(src)} -> {q(dst)} [label={q(label)}];")
    for tm in spec.timers:
        lines.append(
            f"    {q(tm.state)} -> {q(tm.state)} "
            f"[style=dashed, label={q(f'after {tm.after_ms} ms: {tm.event}')}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


FORMATS: dict[str, Callable[[MachineSpec], str]] = {"mermaid": mermaid, "dot": dot}
