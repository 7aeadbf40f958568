"""Helpers for engine tests: write a table file and load it, collecting findings."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from goosectl.controller.engine import Table, TableError


@pytest.fixture
def table_file(tmp_path: Path):
    def write(text: str, name: str = "t.yaml") -> Path:
        p = tmp_path / name
        p.write_text(textwrap.dedent(text))
        return p

    return write


def findings(path: Path, registries=()) -> list:
    try:
        Table.load(path, registries)
    except TableError as exc:
        return exc.findings
    return []


BASE = """
name: t
initial: a
states: [a, b, c]
final: [c]
events: [go, stop]
transitions:
  - {source: a, event: go, target: b}
  - {source: b, event: stop, target: c}
"""
