"""Data set member types: an FCDA resolved through the DataTypeTemplates to the exact MMS
shape its frames carry, in the form `protocols.goose.data_shape` gives for decoded values.

Leaves are MMS type names, with the size where it is part of the type (`bit-string/13`,
`floating-point/32`); constructed types are `("structure", (members...))` and
`("array", (element,) * count)`. A DO-level FCDA is the structure of the DO's attributes
(and sub-DOs) with that FC, in template order (IEC 61850-8-1, 8.1.3.4). The table below is
IEC 61850-8-1's mapping of the basic types; Enum is an MMS integer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from goosectl.protocols.scl.model import Fcda, Templates, TypeDef, TypeItem
from goosectl.protocols.scl.xmltree import Node

#: bType -> MMS shape (IEC 61850-8-1 Table 14 / 7-2 basic types).
LEAF: dict[str, object] = {
    "BOOLEAN": "boolean",
    "INT8": "integer",
    "INT16": "integer",
    "INT24": "integer",
    "INT32": "integer",
    "INT64": "integer",
    "INT128": "integer",
    "INT8U": "unsigned",
    "INT16U": "unsigned",
    "INT24U": "unsigned",
    "INT32U": "unsigned",
    "FLOAT32": "floating-point/32",
    "FLOAT64": "floating-point/64",
    "Enum": "integer",
    "Dbpos": "bit-string/2",
    "Tcmd": "bit-string/2",
    "Check": "bit-string/2",
    "Quality": "bit-string/13",
    "Timestamp": "utc-time",
    "EntryTime": "binary-time",
    "TrgOps": "bit-string/6",
    "OptFlds": "bit-string/10",
    "SvOptFlds": "bit-string/5",
    "LogOptFlds": "bit-string/2",
    "VisString32": "visible-string",
    "VisString64": "visible-string",
    "VisString65": "visible-string",
    "VisString129": "visible-string",
    "VisString255": "visible-string",
    "ObjRef": "visible-string",
    "Currency": "visible-string",
    "Octet64": "octet-string",
    "EntryID": "octet-string",
    "Unicode255": "mMSString",
    "PhyComAddr": ("structure", ("octet-string", "unsigned", "unsigned", "unsigned")),
}
#: Deepest nesting of DOs, SDOs, DAs and BDAs followed (a cycle in the templates stops here).
MAX_DEPTH = 16


@dataclass(frozen=True, slots=True)
class Typed:
    """A shape plus, for structures, the member names (to find a DA inside a DO-level FCDA)."""

    shape: object
    fields: tuple[tuple[str, Typed], ...] = ()

    def path_to(self, names: tuple[str, ...]) -> tuple[int, ...] | None:
        """Indexes into nested structures for a DA path below this one, or None."""
        node, path = self, []
        for name in names:
            for i, (n, t) in enumerate(node.fields):
                if n == name:
                    path.append(i)
                    node = t
                    break
            else:
                return None
        return tuple(path)


def _array(t: Typed, count: int) -> Typed:
    return Typed(("array", (t.shape,) * count), ()) if count > 0 else t


class TypeResolver:
    """Resolves FCDAs against one file's templates; problems go to `finding(node, msg)`."""

    def __init__(self, templates: Templates, finding: Callable[[Node, str], None]) -> None:
        self.t = templates
        self.finding = finding
        self._struct: dict[str, Typed | None] = {}
        self._do_fc: dict[tuple[str, str], Typed | None] = {}

    def fcda(self, ln_type: str | None, fcda: Fcda, at: Node) -> Typed | None:
        """The type of one data-set entry of an LN of type `ln_type`."""
        lnt = self.t.lnode_types.get(ln_type or "")
        if lnt is None:
            self.finding(at, f'lnType "{ln_type}" of {fcda.ref} is not in DataTypeTemplates')
            return None
        do_names = fcda.do_name.split(".")
        item = lnt.item(do_names[0], ("DO",))
        where = f'LNodeType "{lnt.id}"'
        for name in do_names[1:]:
            dot = self._dotype(item, where, at, fcda.ref) if item else None
            if dot is None:
                item = None
                break
            where = f'DOType "{dot.id}"'
            item = dot.item(name, ("SDO",))
        if item is None:
            self.finding(at, f'{fcda.ref}: DO "{fcda.do_name}" is not in {where}')
            return None
        dot = self._dotype(item, where, at, fcda.ref)
        if dot is None:
            return None
        if fcda.da_name is None:
            typed = self._do_with_fc(dot, fcda.fc, 0)
            if typed is None or not typed.fields:
                self.finding(
                    at, f'{fcda.ref}: DOType "{dot.id}" has no attribute with fc {fcda.fc}'
                )
                return None
            typed = _array(typed, item.count)
        else:
            da_names = fcda.da_name.split(".")
            da = dot.item(da_names[0], ("DA",))
            if da is None:
                self.finding(at, f'{fcda.ref}: DA "{da_names[0]}" is not in DOType "{dot.id}"')
                return None
            if da.fc != fcda.fc:
                self.finding(at, f'{fcda.ref}: DA "{da.name}" has fc {da.fc}, not {fcda.fc}')
                return None
            for name in da_names[1:]:
                dat = self.t.da_types.get(da.type or "") if da.btype == "Struct" else None
                if dat is None:
                    self.finding(at, f'{fcda.ref}: "{da.name}" is not a structure with "{name}"')
                    return None
                bda = dat.item(name, ("BDA",))
                if bda is None:
                    self.finding(at, f'{fcda.ref}: BDA "{name}" is not in DAType "{dat.id}"')
                    return None
                da = bda
            typed = self._da(da, at, 0)
        if typed is not None and fcda.ix is not None:
            shape = typed.shape
            if isinstance(shape, tuple) and shape[0] == "array" and shape[1]:
                typed = Typed(shape[1][0])
            else:
                self.finding(at, f"{fcda.ref}: ix={fcda.ix} but the data is not an array")
        return typed

    def _dotype(self, item: TypeItem, where: str, at: Node, ref: str) -> TypeDef | None:
        dot = self.t.do_types.get(item.type or "")
        if dot is None:
            self.finding(
                at,
                f'{ref}: DOType "{item.type}" of {item.name} ({where}) is not in DataTypeTemplates',
            )
        return dot

    def _do_with_fc(self, dot: TypeDef, fc: str, depth: int) -> Typed | None:
        key = (dot.id, fc)
        if key in self._do_fc:
            return self._do_fc[key]
        if depth > MAX_DEPTH:
            self.finding(dot.node, f"nesting deeper than {MAX_DEPTH} (a cycle in the templates?)")
            return None
        fields: list[tuple[str, Typed]] = []
        for it in dot.items:
            if it.kind == "DA" and it.fc == fc:
                t = self._da(it, it.node, depth + 1)
            elif it.kind == "SDO":
                sub = self.t.do_types.get(it.type or "")
                if sub is None:
                    self.finding(it.node, f'DOType "{it.type}" is not in DataTypeTemplates')
                    continue
                t = self._do_with_fc(sub, fc, depth + 1)
                if t is not None and not t.fields:
                    continue
                t = _array(t, it.count) if t is not None else None
            else:
                continue
            if t is None:
                self._do_fc[key] = None
                return None
            fields.append((it.name, t))
        typed = Typed(("structure", tuple(t.shape for _, t in fields)), tuple(fields))
        self._do_fc[key] = typed
        return typed

    def _da(self, it: TypeItem, at: Node, depth: int) -> Typed | None:
        btype = it.btype or ""
        if btype == "Struct":
            t = self._struct_type(it.type or "", it.node, depth)
        elif btype in LEAF:
            t = Typed(LEAF[btype])
        else:
            self.finding(it.node, f'bType "{btype}" of {it.name} is not a known basic type')
            return None
        return _array(t, it.count) if t is not None else None

    def _struct_type(self, type_id: str, at: Node, depth: int) -> Typed | None:
        if type_id in self._struct:
            return self._struct[type_id]
        dat = self.t.da_types.get(type_id)
        if dat is None:
            self.finding(at, f'DAType "{type_id}" is not in DataTypeTemplates')
            return None
        if depth > MAX_DEPTH:
            self.finding(dat.node, f"nesting deeper than {MAX_DEPTH} (a cycle in the templates?)")
            return None
        fields = []
        for b in dat.items:
            t = self._da(b, b.node, depth + 1)
            if t is None:
                self._struct[type_id] = None
                return None
            fields.append((b.name, t))
        typed = Typed(("structure", tuple(t.shape for _, t in fields)), tuple(fields))
        self._struct[type_id] = typed
        return typed
