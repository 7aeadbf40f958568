"""What can go wrong reading SCL: a fatal error (no usable document) or a finding (one
broken element or reference; the rest of the file is still read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # xmltree imports this module
    from goosectl.protocols.scl.xmltree import Node


class SclError(Exception):
    """The file cannot be read as SCL at all: unreadable, not XML, refused, not SCL."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message
        super().__init__(f"{source}:{line}: {message}" if line else f"{source}: {message}")


@dataclass(frozen=True, slots=True)
class SclFinding:
    """One problem in an otherwise readable file: where (file, line, element path) and why."""

    source: str
    line: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class Findings:
    """Collects findings for one file, each once, in the order they were found."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[SclFinding] = []
        self._seen: set[tuple[int | None, str, str]] = set()

    def add(self, node: Node | None, message: str) -> None:
        """`node` gives the line and element path; None when there is no element to name."""
        line = node.line if node is not None else None
        path = node.path if node is not None else ""
        key = (line, path, message)
        if key not in self._seen:
            self._seen.add(key)
            self.items.append(SclFinding(self.source, line, path, message))
