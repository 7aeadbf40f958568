"""Read a table, config or procedure file (YAML, TOML or JSON), keeping line numbers.

Pydantic reports errors by key path; people fix files by line. YAML is composed once to a
node tree so every key path maps to its line; TOML and JSON errors carry the key path.

Every document is parsed under `LoaderLimits`, because these files arrive from people and
from a hot-reloaded folder: a 417-byte YAML anchor bomb expands to gigabytes and a deeply
nested `[[[[` overflows the parser's recursion. The YAML composer counts aliases and
nesting as it goes; the composed graph is then sized as if every alias were expanded
(shared nodes are measured once, so measuring costs what the text costs) before anything
walks or validates it. Crossing a limit is a finding with code ``limit`` naming the file,
the line, the limit and its value; nothing else escapes as an exception.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from goosectl.controller.engine.findings import Finding, TableError
from goosectl.controller.engine.spec import MachineSpec


@dataclass(frozen=True, slots=True)
class LoaderLimits:
    """What one document may cost. Real tables, configs and procedures are a few KB with
    no aliases and a nesting depth under 10; the defaults leave ample room for that."""

    #: size of the file (or text) in bytes
    max_bytes: int = 1 << 20
    #: YAML alias uses (`*name`) in one document
    max_aliases: int = 100
    #: nesting of mappings and sequences, counted after aliases are expanded
    max_depth: int = 64
    #: mappings, sequences and scalars after aliases are expanded
    max_nodes: int = 200_000


DEFAULT_LIMITS = LoaderLimits()


class _LimitError(Exception):
    def __init__(self, limit: str, value: int, detail: str, line: int | None) -> None:
        super().__init__(detail)
        self.limit, self.value, self.detail, self.line = limit, value, detail, line


def _limit_finding(source: str, exc: _LimitError) -> Finding:
    return Finding(
        source, exc.line, exc.limit, f"{exc.detail} (limit {exc.limit}={exc.value})", "limit"
    )


class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader that stops composing at too many aliases or too deep a nesting."""

    def __init__(self, text: str, limits: LoaderLimits) -> None:
        super().__init__(text)
        self.limits = limits
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > self.limits.max_aliases:
                # types-PyYAML leaves Parser.peek_event unannotated
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _LimitError(
                    "max_aliases",
                    self.limits.max_aliases,
                    f"more than {self.limits.max_aliases} YAML aliases",
                    mark.line + 1,
                )
            return super().compose_node(parent, index)
        self.depth += 1
        try:
            if self.depth > self.limits.max_depth:
                # types-PyYAML leaves Parser.peek_event unannotated
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _LimitError(
                    "max_depth",
                    self.limits.max_depth,
                    f"nesting deeper than {self.limits.max_depth} levels",
                    mark.line + 1,
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _measure_nodes(root: yaml.Node, limits: LoaderLimits) -> None:
    """Size and depth of the node graph as if every alias were expanded, without expanding
    it: each distinct node is measured once (iteratively, so depth costs no recursion).
    A node that contains itself (a recursive alias) is refused: nothing here needs one."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            on_path.discard(key)
            line = node.start_mark.line + 1
            if size[key] > limits.max_nodes:
                raise _LimitError(
                    "max_nodes",
                    limits.max_nodes,
                    f"expands to {size[key]:,} nodes once aliases are resolved",
                    line,
                )
            if depth[key] > limits.max_depth:
                raise _LimitError(
                    "max_depth",
                    limits.max_depth,
                    f"nests {depth[key]} levels deep once aliases are resolved",
                    line,
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise _LimitError(
                "max_depth",
                limits.max_depth,
                "a YAML alias refers to a node that contains it (infinitely deep)",
                node.start_mark.line + 1,
            )
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _measure_data(data: Any, limits: LoaderLimits) -> None:
    """Size and depth of parsed JSON/TOML data (a tree: no aliases), iteratively."""
    count = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, level = stack.pop()
        count += 1
        if count > limits.max_nodes:
            raise _LimitError(
                "max_nodes", limits.max_nodes, f"more than {limits.max_nodes:,} values", None
            )
        if level > limits.max_depth:
            raise _LimitError(
                "max_depth", limits.max_depth, f"nesting deeper than {limits.max_depth}", None
            )
        if isinstance(value, dict):
            stack.extend((v, level + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, level + 1) for v in value)


PathKey = tuple[str | int, ...]
LineOf = Callable[[PathKey], int | None]


def yaml_lines(root: yaml.Node | None) -> dict[PathKey, int]:
    """key path -> line for every node of a composed (and measured) YAML document."""
    lines: dict[PathKey, int] = {}
    stack: list[tuple[yaml.Node, PathKey]] = [] if root is None else [(root, ())]
    while stack:
        node, path = stack.pop()
        lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                k = key.value if isinstance(key, yaml.ScalarNode) else str(key.value)
                lines[(*path, k)] = key.start_mark.line + 1
                stack.append((value, (*path, k)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in enumerate(node.value))
    return lines


def _parse_yaml(text: str, limits: LoaderLimits) -> tuple[Any, dict[PathKey, int]]:
    loader = _LimitedLoader(text, limits)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, {}
        _measure_nodes(root, limits)
        return loader.construct_document(root), yaml_lines(root)
    finally:
        loader.dispose()


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


def parse_document(
    text: str, source: str, suffix: str, limits: LoaderLimits = DEFAULT_LIMITS
) -> tuple[dict[str, Any], LineOf]:
    """Parse YAML/TOML/JSON text (by suffix) under `limits`; syntax errors and crossed
    limits become a TableError with a line."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise TableError([_limit_finding(source, _too_big(size, limits))])
    try:
        if suffix in (".yaml", ".yml"):
            data, lines = _parse_yaml(text, limits)
        elif suffix == ".toml":
            data, lines = tomllib.loads(text), {}
            _measure_data(data, limits)
        elif suffix == ".json":
            data, lines = json.loads(text), {}
            _measure_data(data, limits)
        else:
            raise TableError(
                [
                    Finding(
                        source, None, source, "unknown format: use .yaml, .toml or .json", "format"
                    )
                ]
            )
    except _LimitError as exc:
        raise TableError([_limit_finding(source, exc)]) from None
    except RecursionError:
        # the TOML and JSON parsers recurse per nesting level; the text is under
        # max_bytes, so only nesting can get here
        too_deep = _LimitError(
            "max_depth", limits.max_depth, f"nesting deeper than {limits.max_depth}", None
        )
        raise TableError([_limit_finding(source, too_deep)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise TableError([Finding(source, line, "syntax", str(exc), "syntax")]) from exc
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise TableError([Finding(source, line, "syntax", str(exc), "syntax")]) from exc
    except ValueError as exc:  # e.g. an integer literal beyond Python's 4300-digit cap
        raise TableError([Finding(source, None, "syntax", str(exc), "syntax")]) from exc
    if not isinstance(data, dict):
        raise TableError(
            [Finding(source, 1, "document", "the top level must be a mapping", "structure")]
        )
    return data, line_resolver(lines)


def _too_big(size: int, limits: LoaderLimits) -> _LimitError:
    return _LimitError(
        "max_bytes", limits.max_bytes, f"document of {size:,} bytes or more is too large", None
    )


def read_text(
    path: Path, limits: LoaderLimits = DEFAULT_LIMITS, *, regular_only: bool = False
) -> str:
    """A document's text, reading at most `limits.max_bytes` (a FIFO or /dev/zero cannot
    make this read forever); unreadable or non-UTF-8 files are a TableError.
    `regular_only`: what a running loop reads (the procedures folder): only a regular
    file, opened without blocking, so a FIFO there waits for no writer."""
    source = str(path)
    flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_NONBLOCK | os.O_NOCTTY if regular_only else 0)
    try:
        with os.fdopen(os.open(path, flags), "rb") as fh:
            if regular_only and not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                reason = "not a regular file: only regular files are read here"
                raise TableError([Finding(source, None, path.name, reason, "io")])
            raw = fh.read(limits.max_bytes + 1)
    except OSError as exc:
        raise TableError(
            [Finding(source, None, path.name, exc.strerror or str(exc), "io")]
        ) from exc
    if len(raw) > limits.max_bytes:
        raise TableError([_limit_finding(source, _too_big(len(raw), limits))])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        reason = f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start}"
        raise TableError([Finding(source, line, path.name, reason, "encoding")]) from None


def read_document(
    path: Path, limits: LoaderLimits = DEFAULT_LIMITS
) -> tuple[dict[str, Any], LineOf]:
    """Read and parse a table, config or procedure file (format by its suffix)."""
    text = read_text(path, limits)
    return parse_document(text, str(path), path.suffix.lower(), limits)


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


def load_spec(
    path: str | Path, limits: LoaderLimits = DEFAULT_LIMITS
) -> tuple[MachineSpec, LineOf]:
    p = Path(path)
    data, line_of = read_document(p, limits)
    return spec_from_data(data, str(p), line_of), line_of
