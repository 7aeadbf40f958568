"""The names the code reads from machines exist in the tables: every state a product
module compares a machine's `.state` with, and every context field it reads as
`ctx["name"]`, is a state or a field of one of the product's tables.

The tables are data and the code reads them by name: a state renamed in a YAML file, or
misspelt in Python, would otherwise fail only on the one path that compares it, at run
time. Here it fails when the suite loads the tables.
"""

from __future__ import annotations

import ast
from pathlib import Path

from goosectl.controller.engine import Table, layers
from tests.support import sources
from tests.support.peers import REPO

PRODUCT = ("controller", "firmware_sim")


def tables() -> list[Table]:
    """The product's tables: the YAML files, and the layer tables built in Python."""
    found = [
        Table.from_spec(layers.phase_spec("phase", ["a", "b"])),
        Table.from_spec(layers.host_spec()),
    ]
    for pkg in PRODUCT:
        for path in sorted((REPO / pkg).rglob("*.yaml")):
            if "tables" in path.parts or path.name in ("link.yaml", "commands.yaml"):
                found.append(Table.load(path))
    return found


def known() -> tuple[set[str], set[str]]:
    states: set[str] = set()
    fields: set[str] = set()
    for table in tables():
        states |= {s.name for s in table.spec.states}
        fields |= set(table.spec.context)
    return states, fields


def _literals(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [v for elt in node.elts for v in _literals(elt)]
    return []


def names_read(path: Path) -> list[tuple[int, str, str]]:
    """(line, "state" or "field", name) for each literal compared with `.state` or read
    from a `ctx[...]`."""
    out = []
    for node in ast.walk(sources.tree(path)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "state" for s in sides):
                for s in sides:
                    out += [(node.lineno, "state", v) for v in _literals(s)]
        elif isinstance(node, ast.Subscript):
            target = node.value
            is_ctx = isinstance(target, ast.Attribute) and target.attr == "ctx"
            is_ctx = is_ctx or (isinstance(target, ast.Name) and target.id == "ctx")
            if is_ctx:
                out += [(node.lineno, "field", v) for v in _literals(node.slice)]
    return out


def test_every_state_and_field_the_code_reads_is_in_a_table() -> None:
    states, fields = known()
    assert len(states) > 20 and len(fields) > 20  # the tables were found
    bad = []
    for pkg in PRODUCT:
        for path in sorted((REPO / pkg).rglob("*.py")):
            for line, kind, name in names_read(path):
                if name not in (states if kind == "state" else fields):
                    bad.append(f"{path.relative_to(REPO)}:{line}: {kind} {name!r} is in no table")
    assert not bad, "\n".join(bad)


def test_a_misspelt_state_is_found(tmp_path: Path) -> None:
    fake = tmp_path / "x.py"
    fake.write_text('if m.state == "clsoed" or m.ctx["vlaue"]:\n    pass\n')
    assert names_read(fake) == [(1, "state", "clsoed"), (1, "field", "vlaue")]
