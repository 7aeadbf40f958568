"""A finding: one problem in a table, located well enough for a person to fix it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Finding:
    source: str  # file path, or the table name for tables built in Python
    line: int | None
    item: str  # the offending item as written: a state, an event, an action name ...
    reason: str
    code: str  # stable identifier of the kind of finding, for tests and tooling

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: [{self.code}] {self.item}: {self.reason}"


class TableError(Exception):
    """A table failed to load or validate; `findings` holds every problem, not just the first."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        super().__init__("\n".join(str(f) for f in findings))
