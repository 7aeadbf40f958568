"""The test tiers, read from what each test reaches: `unit`, `root`, `peer`.

A test is `root` when it (or a fixture it uses, or a helper of ours it calls) calls
`require_root` or builds network namespaces; `peer` when it reaches `require_tshark`,
`require_iec61850`, `require_binary` or `require_kernel_feature`; and `unit` when it needs
neither and starts no process of its own (no subprocess, pty or fork), and is not `slow`.
So `pytest -m unit` is the fast loop a developer runs between edits, and the markers are
set by the same `require_*` calls that decide whether a test runs, never by hand.

The reading is static: the source of the test function, of its fixtures, and of every
function of the tests' own packages those name, followed to a fixpoint.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import sys
from pathlib import Path
from types import FunctionType
from typing import Any

TESTS = Path(__file__).resolve().parent

SIGNS = {
    "root": re.compile(r"\brequire_root\(|\bNetLab\b|\bnetlab_fixture\(|ip netns"),
    "peer": re.compile(r"\brequire_(tshark|iec61850|binary|kernel_feature)\(|\bcapture_files\(\)"),
    "process": re.compile(
        r"\bsubprocess\b|\bPopen\b|\bopenpty\b|\bos\.fork\b|\bmultiprocessing\b"
        r"|\bpty\.|\bgoosectl\(|\bstart_run\(|\bSim\("
    ),
}


def _ours(obj: Any) -> bool:
    try:
        return Path(inspect.getsourcefile(obj) or "").resolve().is_relative_to(TESTS)
    except TypeError:
        return False


@functools.cache
def _source(fn: Any) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


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
        src = _source(f)
        found |= {sign for sign, pattern in SIGNS.items() if pattern.search(src)}
        module = sys.modules.get(getattr(f, "__module__", ""), None)
        if module is None:
            continue
        try:
            names = {n.id for n in ast.walk(ast.parse(_dedent(src))) if isinstance(n, ast.Name)}
        except SyntaxError:
            names = set()
        for name in names:
            target = getattr(module, name, None)
            if isinstance(target, FunctionType | type) and _ours(target):
                stack.append(target)
    return frozenset(found)


def _dedent(src: str) -> str:
    import textwrap

    return textwrap.dedent(src)


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
    if not signs and item.get_closest_marker("slow") is None:
        marks.add("unit")
    return marks
