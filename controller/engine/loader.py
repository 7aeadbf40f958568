"""Read a table file (YAML, TOML or JSON) into a validated `MachineSpec`, keeping line numbers.

Pydantic reports errors by key path; people fix files by line. YAML is composed once to a
node tree so every key path maps to its line; TOML and JSON errors carry the key path.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from controller.engine.findings import Finding, TableError
from controller.engine.spec import MachineSpec

PathKey = tuple[str | int, ...]
LineOf = Callable[[PathKey], int | None]


def yaml_lines(text: str) -> dict[PathKey, int]:
    lines: dict[PathKey, int] = {}

    def walk(node: yaml.Node, path: PathKey) -> None:
        lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                k = key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
                lines[(*path, k)] = key.start_mark.line + 1
                walk(value, (*path, k))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i))

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is not None:
        walk(root, ())
    return lines


def line_resolver(lines: dict[PathKey, int]) -> LineOf:
    """The line of a path, or of its nearest ancestor that has one."""

    def line_of(path: PathKey) -> int | None:
        p = tuple(path)
        while p:
            if p in lines:
                return lines[p]
            p = p[:-1]
        return lines.get(())

    return line_of


def parse_document(text: str, source: str, suffix: str) -> tuple[dict[str, Any], LineOf]:
    """Parse YAML/TOML/JSON text (by suffix); syntax errors become a TableError with a line."""
    try:
        if suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
            lines = yaml_lines(text)
        elif suffix == ".toml":
            data, lines = tomllib.loads(text), {}
        elif suffix == ".json":
            data, lines = json.loads(text), {}
        else:
            raise TableError(
                [
                    Finding(
                        source, None, source, "unknown format: use .yaml, .toml or .json", "format"
                    )
                ]
            )
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise TableError([Finding(source, line, "syntax", str(exc), "syntax")]) from exc
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise TableError([Finding(source, line, "syntax", str(exc), "syntax")]) from exc
    if not isinstance(data, dict):
        raise TableError(
            [Finding(source, 1, "document", "the top level must be a mapping", "structure")]
        )
    return data, line_resolver(lines)


def read_document(path: Path) -> tuple[dict[str, Any], LineOf]:
    """Read and parse a table, config or procedure file (format by its suffix)."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TableError(
            [Finding(source, None, path.name, exc.strerror or str(exc), "io")]
        ) from exc
    return parse_document(text, source, path.suffix.lower())


def validation_findings(exc: ValidationError, source: str, line_of: LineOf) -> list[Finding]:
    """Pydantic's errors as findings: key path, line, reason. Tables, configs and
    procedures all report through this."""
    findings = []
    for err in exc.errors():
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and "[" in x))
        item = ".".join(str(x) for x in loc) or "(top level)"
        findings.append(Finding(source, line_of(loc), item, err["msg"], "structure"))
    return findings


def spec_from_data(data: dict[str, Any], source: str, line_of: LineOf) -> MachineSpec:
    try:
        return MachineSpec.model_validate(data)
    except ValidationError as exc:
        raise TableError(validation_findings(exc, source, line_of)) from exc


def load_spec(path: str | Path) -> tuple[MachineSpec, LineOf]:
    p = Path(path)
    data, line_of = read_document(p)
    return spec_from_data(data, str(p), line_of), line_of
