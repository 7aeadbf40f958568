"""The test tiers, read from what each test reaches: `unit`, `root`, `peer`.

A test is `root` when it (or a fixture it uses, or a helper of ours it calls) calls
`require_root` or builds network namespaces; `peer` when it reaches `require_tshark`,
`require_iec61850`, `require_binary` or `require_kernel_feature`; and `unit` when it needs
neither and starts no process of its own (no subprocess, pty or fork), is not `slow`, and
carries no `root` or `peer` mark of its module. So `pytest -m unit` is the fast loop a
developer runs between edits, and the markers are set by the same `require_*` calls that
decide whether a test runs, never by hand.

The reading is static: the source of the test function, of its fixtures, and of every
function of the tests' own packages those name (from the module's globals or from an
import inside the function), followed to a fixpoint. Each test file is parsed once and its
functions found by line, so the reading costs a fraction of the collection.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import sys
import textwrap
from pathlib import Path
from types import FunctionType
from typing import Any, NamedTuple

TESTS = Path(__file__).resolve().parent

SIGNS = {
    "root": re.compile(r"\brequire_root\(|\bNetLab\b|\bnetlab_fixture\(|ip netns"),
    "peer": re.compile(r"\brequire_(tshark|iec61850|binary|kernel_feature)\(|\bcapture_files\(\)"),
    "process": re.compile(
        r"\bsubprocess\b|\bPopen\b|\bopenpty\b|\bos\.fork\b|\bmultiprocessing\b"
        r"|\bpty\.|\bgoosectl\(|\bstart_run\(|\bSim\("
    ),
}
TIERS = ("unit", "root", "peer")


class Body(NamedTuple):
    """What the reading needs of one function or class: its source and the names it uses
    (`imported`: names it imports itself, with the module they come from)."""

    source: str
    names: frozenset[str]
    imported: tuple[tuple[str, str], ...]


@functools.cache
def _ours_file(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(TESTS)


def _ours(obj: Any) -> bool:
    try:
        return _ours_file(inspect.getsourcefile(obj) or "")
    except TypeError:
        return False


@functools.cache
def _file_index(filename: str) -> tuple[list[str], dict[int, ast.AST], dict[str, ast.AST]]:
    """The lines of one file, its functions by first line (decorators included, as
    `co_firstlineno` counts), and its top-level classes by name."""
    text = Path(filename).read_text(encoding="utf-8")
    tree = ast.parse(text, filename)
    by_line: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            by_line.setdefault(first, node)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    return text.splitlines(), by_line, classes


def _node(obj: Any) -> tuple[list[str], ast.AST] | None:
    """The parsed definition of `obj`, or None where it cannot be found by line."""
    try:
        if isinstance(obj, FunctionType):
            lines, by_line, _ = _file_index(obj.__code__.co_filename)
            node = by_line.get(obj.__code__.co_firstlineno)
        elif isinstance(obj, type) and "." not in obj.__qualname__:
            lines, _, classes = _file_index(inspect.getsourcefile(obj) or "")
            node = classes.get(obj.__name__)
        else:
            return None
    except (OSError, TypeError, SyntaxError, UnicodeDecodeError):
        return None
    return None if node is None else (lines, node)


@functools.cache
def _body(obj: Any) -> Body:
    found = _node(obj)
    if found is None:  # not found by line: read it as inspect sees it
        try:
            src = inspect.getsource(obj)
            node: ast.AST = ast.parse(textwrap.dedent(src))
        except (OSError, TypeError, SyntaxError):
            return Body("", frozenset(), ())
    else:
        lines, node = found
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        src = "\n".join(lines[first - 1 : node.end_lineno])
    names = frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    imported = tuple(
        (n.module, a.name)
        for n in ast.walk(node)
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
        for a in n.names
        if n.module.split(".")[0] == "tests"
    )
    return Body(src, names, imported)


def _targets(f: Any, body: Body) -> list[Any]:
    """The functions and classes of ours that `f` names."""
    out = []
    module = sys.modules.get(getattr(f, "__module__", ""), None)
    if module is not None:
        out += [getattr(module, name, None) for name in body.names]
    for mod, name in body.imported:
        try:
            out.append(getattr(importlib.import_module(mod), name, None))
        except ImportError:
            continue
    return [t for t in out if isinstance(t, FunctionType | type) and _ours(t)]


@functools.cache
def _signs_of(fn: Any) -> frozenset[str]:
    """The signs `fn` shows itself or through the functions of ours it names."""
    seen: set[int] = set()
    found: set[str] = set()
    stack = [fn]
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        body = _body(f)
        found |= {sign for sign, pattern in SIGNS.items() if pattern.search(body.source)}
        stack += _targets(f, body)
    return frozenset(found)


def classify(item: Any) -> set[str]:
    """The tier markers for one collected test item."""
    fns = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        for defs in info.name2fixturedefs.values():
            fns += [d.func for d in defs if _ours(d.func)]
    signs: set[str] = set()
    for fn in fns:
        if fn is not None:
            signs |= _signs_of(fn)
    marks = signs & {"root", "peer"}
    marked = {m.name for m in item.iter_markers() if m.name in ("root", "peer", "slow")}
    if not signs and not marked:
        marks.add("unit")
    return marks - marked
