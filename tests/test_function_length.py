"""No product function of 60 lines or more: a function a reader can hold on one screen.

A long function does several jobs under one name, and the next maintainer has to read all
of it to change one. The product is the four folders installed under the one import name;
tests and benchmarks are not walked. A function's length is its `def` line to its last line
(decorators aside, nested functions counted in their parent and on their own).

There is no exemption list: a function that needs to be long (a table, a parser) is
written as data applied by a small function instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import sources

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("controller", "protocols", "firmware_sim", "lab")
#: a function this long or longer fails the test
LIMIT = 60


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int, int]]:
    """(qualified name, first line, length) of every function under `tree`, nested too."""
    found: list[tuple[str, int, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            end = node.end_lineno or node.lineno
            found.append((name, node.lineno, end - node.lineno + 1))
            found += _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.stmt | ast.excepthandler | ast.match_case):
            found += _functions(node, prefix)  # a def sits only in statements' bodies
    return found


def long_functions(root: Path = ROOT) -> dict[str, str]:
    """`file:qualname` -> `file:line` and length, for every product function of LIMIT+ lines."""
    long: dict[str, str] = {}
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = sources.tree(path)
            for name, line, length in _functions(tree):
                if length >= LIMIT:
                    long[f"{rel}:{name}"] = f"{rel}:{line} {name}: {length} lines"
    return long


def test_no_product_function_is_60_lines_or_more() -> None:
    found = long_functions()
    over = sorted(found.values())
    assert not over, f"functions of {LIMIT} lines or more (split them):\n" + "\n".join(over)


@pytest.mark.parametrize("lines", [LIMIT - 1, LIMIT])
def test_a_long_function_is_reported_with_file_line_and_length(lines: int, tmp_path: Path) -> None:
    (tmp_path / "lab").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(lines - 1))
    (tmp_path / "lab" / "m.py").write_text("class C:\n    def f(self):\n" + _indent(body))
    found = long_functions(tmp_path)
    if lines < LIMIT:
        assert found == {}
    else:
        assert found == {"lab/m.py:C.f": f"lab/m.py:2 C.f: {LIMIT} lines"}


def _indent(body: str) -> str:
    """The method body one level deeper than a function's."""
    return "".join("    " + line + "\n" for line in body.splitlines())
