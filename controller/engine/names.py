"""Names a machine's code reads from its table, checked when the table loads.

Code that compares a machine's state, or reads another machine's context, names what it
reads once, as the constants of a `States` or `Fields` class bound to the table by name,
and uses the constants instead of string literals:

    class LinkStates(States):
        table = "link"
        UP = "up"
        DEGRADED = "degraded"

    if core.state in (LinkStates.UP, LinkStates.DEGRADED): ...

The module that loads the table hands the classes to `Table.load(path, names=(...))`,
which checks every constant against the table: a state the table does not have, or a
context field it does not declare, fails the load (`TableError`, code `unknown_name`,
naming the class, the constant and what the table has), not one path at run time. A
misspelt constant (`LinkStates.UPP`) is caught by the type checker. So a renamed state in
the YAML fails where it is loaded, and every reader of it is found by its constant.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from goosectl.controller.engine.findings import Finding

if TYPE_CHECKING:
    from goosectl.controller.engine.spec import MachineSpec


class TableNames:
    """Constants naming what code reads from the table called `table` (UPPER_CASE class
    attributes holding the names as written in the table)."""

    #: the table's `name:`
    table: ClassVar[str]
    #: what the constants name ("state" or "context field"), for the finding
    kind: ClassVar[str] = "name"

    @classmethod
    def declared(cls) -> dict[str, str]:
        """Constant -> the name it holds (this class's and its bases' below TableNames)."""
        out: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if attr.isupper() and isinstance(value, str):
                    out[attr] = value
        return out

    @classmethod
    def known(cls, spec: MachineSpec) -> set[str]:
        """The names of this kind the table declares."""
        raise NotImplementedError

    @classmethod
    def findings(cls, spec: MachineSpec, source: str) -> list[Finding]:
        where = f"{cls.__module__}.{cls.__qualname__}"
        if spec.name != cls.table:
            reason = f"{where} names table {cls.table!r}, handed table {spec.name!r}"
            return [Finding(source, None, cls.table, reason, "unknown_name")]
        known = cls.known(spec)
        return [
            Finding(
                source,
                None,
                name,
                f"{where}.{attr} names {cls.kind} {name!r}, which table {spec.name!r} does "
                f"not have (it has: {', '.join(sorted(known))})",
                "unknown_name",
            )
            for attr, name in cls.declared().items()
            if name not in known
        ]


class States(TableNames):
    """States of the table the code compares a machine's `state` against."""

    kind = "state"

    @classmethod
    def known(cls, spec: MachineSpec) -> set[str]:
        return {s.name for s in spec.states}


class Fields(TableNames):
    """Context fields of the table read from outside its own actions and guards (by
    another machine, the core that drives it, a view)."""

    kind = "context field"

    @classmethod
    def known(cls, spec: MachineSpec) -> set[str]:
        return set(spec.context)


def check_names(spec: MachineSpec, names: Iterable[type[TableNames]], source: str) -> list[Finding]:
    """Every constant of `names` that the table does not have, as findings."""
    return [f for n in names for f in n.findings(spec, source)]
