"""The repository's Python files, each read and parsed once per test run.

Several checks walk every file of the product (the import table, the no-I/O rule, the
function lengths, the names the code reads from the tables, the references in docstrings):
they share one parse of each file instead of parsing the tree once each. A file written
since it was read (another size or modification time) is read again, so a test that writes
its own file in a temporary folder sees what it wrote.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def text(path: Path) -> str:
    """The file's text (UTF-8)."""
    return _read(*_key(path))[0]


def tree(path: Path) -> ast.Module:
    """The file's syntax tree (shared: the checks only read it)."""
    return _read(*_key(path))[1]


def _key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return str(path), st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=4096)
def _read(path: str, _mtime_ns: int, _size: int) -> tuple[str, ast.Module]:
    source = Path(path).read_text(encoding="utf-8")
    return source, ast.parse(source, path)
