"""Safe XML -> a slim element tree of the SCL parts goosectl reads, with exact line numbers.

Parser: defusedxml's `DefusedXMLParser` (xml.etree's expat parser with DTDs, entity
declarations and external references refused), so no entity expansion, no external
entities and no network. Our element handlers run on its expat parser, which gives the
exact line of each start tag, which is what error messages need (lxml keeps lines in 16
bits and only approximates them past line 65,535; a 50 MB SCD has a million lines).

Only the elements the reader uses become nodes (`SKIP` subtrees are never built: vendor
`Private` data, the single-line diagram, services, report/log/SV controls, instance
values outside LGOS), and only SCL-namespace elements and unqualified attributes are kept:
vendor namespaces are read past, not into. A 50 MB SCD therefore costs a few hundred
bytes per kept element, not a DOM.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO
from xml.parsers.expat import XMLParserType

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser, ParseError

from goosectl.protocols.scl.errors import SclError

SCL_NS = "http://www.iec.ch/61850/2003/SCL"
_NS_PREFIX = SCL_NS + "}"  # expat joins namespace and local name with "}"
CHUNK = 1 << 20

#: Subtrees the reader never looks at: their elements are parsed (XML must be well formed)
#: but no node is built for them or anything inside.
SKIP = frozenset(
    {
        "Private",
        "Substation",
        "Line",
        "Process",
        "Services",
        "History",
        "Text",
        "ReportControl",
        "LogControl",
        "SettingControl",
        "SampledValueControl",
        "Log",
        "LNode",
        "EnumType",
        "PhysConn",
        "BitRate",
        "KDC",
        "Authentication",
        "SMV",
    }
)
#: Elements that belong to one IED, by the attribute that names it: read past for an IED
#: that is not kept (`parse_tree(ieds=...)`).
_PER_IED = {"IED": "name", "ConnectedAP": "iedName"}
#: Elements whose text content the reader uses.
TEXT = frozenset({"P", "MinTime", "MaxTime", "Val", "IEDName"})
#: Instance data (DOI/SDI/DAI) is kept only inside these LN classes (LGOS: GoCBRef).
DOI_KEPT_IN = frozenset({"LGOS"})

#: The attributes that name an element among its siblings, for element paths in messages.
KEYS: dict[str, tuple[str, ...]] = {
    "IED": ("name",),
    "AccessPoint": ("name",),
    "LDevice": ("inst",),
    "LN": ("prefix", "lnClass", "inst"),
    "DataSet": ("name",),
    "GSEControl": ("name",),
    "SubNetwork": ("name",),
    "ConnectedAP": ("iedName", "apName"),
    "GSE": ("ldInst", "cbName"),
    "LNodeType": ("id",),
    "DOType": ("id",),
    "DAType": ("id",),
    "DO": ("name",),
    "SDO": ("name",),
    "DA": ("name",),
    "BDA": ("name",),
    "DOI": ("name",),
    "SDI": ("name",),
    "DAI": ("name",),
    "P": ("type",),
}


class Node:
    """One kept SCL element: local tag name, unqualified attributes, children, line."""

    __slots__ = ("attrib", "children", "line", "parent", "tag", "text")

    def __init__(self, tag: str, attrib: dict[str, str], line: int, parent: Node | None) -> None:
        self.tag = tag
        self.attrib = attrib
        self.line = line
        self.parent = parent
        self.children: list[Node] = []
        self.text: str | None = None

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.attrib.get(key, default)

    def find(self, tag: str) -> Node | None:
        for c in self.children:
            if c.tag == tag:
                return c
        return None

    def findall(self, tag: str) -> Iterable[Node]:
        return (c for c in self.children if c.tag == tag)

    @property
    def path(self) -> str:
        """`IED[@name=P1]/AccessPoint[@name=AP1]/Server/.../FCDA[3]` (the root is left out)."""
        parts = []
        node: Node | None = self
        while node is not None and node.parent is not None:
            parts.append(node._step())
            node = node.parent
        return "/".join(reversed(parts))

    def _step(self) -> str:
        keys = KEYS.get(self.tag)
        if keys:
            named = "".join(f"[@{k}={self.attrib[k]}]" for k in keys if self.attrib.get(k))
            if named:
                return self.tag + named
        assert self.parent is not None
        same = [c for c in self.parent.children if c.tag == self.tag]
        if len(same) == 1:
            return self.tag
        return f"{self.tag}[{same.index(self) + 1}]"


class _Builder:
    """Expat handlers: build `Node`s for kept SCL elements, count their way past the rest.

    Installed straight on the expat parser that defusedxml configured (its DTD, entity and
    external-reference guards stay in place), with expat's raw arguments: a tag is
    `namespace}local` and attributes come as a flat [name, value, ...] list. This skips
    xml.etree's per-element name fixing, which costs a third of the parse.
    """

    def __init__(self, expat: XMLParserType, ieds: frozenset[str] | None = None) -> None:
        self.expat = expat
        self.stack: list[Node] = []
        self.root: Node | None = None
        self.skip = 0
        self.text: list[str] | None = None
        #: the IEDs to keep (None: all); the others' IED and ConnectedAP subtrees are read
        #: past like `SKIP`, so memory follows what is kept, not the file
        self.ieds = ieds
        #: the name of every IED in the document, kept or not, in order
        self.names: list[str] = []

    def start(self, tag: str, attrs: list[str]) -> None:
        if tag.startswith(_NS_PREFIX):
            local = tag[len(_NS_PREFIX) :]
        elif "}" not in tag:
            local = tag  # an unqualified SCL file (some old tools write no namespace)
        else:
            self._skip_subtree()  # a vendor namespace: read past it
            return
        stack = self.stack
        parent = stack[-1] if stack else None
        if local in SKIP or (
            local == "DOI" and (parent is None or parent.attrib.get("lnClass") not in DOI_KEPT_IN)
        ):
            self._skip_subtree()
            return
        if local in _PER_IED and self._other_ied(local, attrs):
            self._skip_subtree()
            return
        attrib = {}
        for i in range(0, len(attrs), 2):
            name = attrs[i]
            if "}" not in name:
                attrib[name] = attrs[i + 1]
        node = Node(local, attrib, self.expat.CurrentLineNumber, parent)
        if parent is None:
            self.root = node
        else:
            parent.children.append(node)
        stack.append(node)
        if local in TEXT:
            self.text = []
            self.expat.CharacterDataHandler = self.text.append

    def end(self, tag: str) -> None:
        node = self.stack.pop()
        if self.text is not None:
            node.text = "".join(self.text).strip()
            self.text = None
            self.expat.CharacterDataHandler = None

    def _other_ied(self, local: str, attrs: list[str]) -> bool:
        """Is this an IED (or a ConnectedAP of one) that is not to be kept?"""
        key = _PER_IED[local]
        name = next((attrs[i + 1] for i in range(0, len(attrs), 2) if attrs[i] == key), "")
        if local == "IED":
            self.names.append(name)
        return self.ieds is not None and name not in self.ieds

    # A skipped subtree swaps in two minimal handlers until it closes: most elements of
    # a large SCD (instance values, vendor data) cost one counter step each way.

    def _skip_subtree(self) -> None:
        self.skip = 1
        self.expat.StartElementHandler = self._skip_start
        self.expat.EndElementHandler = self._skip_end

    def _skip_start(self, tag: str, attrs: list[str]) -> None:
        self.skip += 1

    def _skip_end(self, tag: str) -> None:
        self.skip -= 1
        if not self.skip:
            self.expat.StartElementHandler = self.start
            self.expat.EndElementHandler = self.end


class _NoTree:
    """xml.etree's parser wants a target to close; the nodes are built by `_Builder`."""

    def close(self) -> None:
        return None


def parse_tree(stream: BinaryIO, source: str, ieds: frozenset[str] | None = None) -> Node:
    """Parse an SCL document from a binary stream; raises `SclError` naming file and line.

    `ieds`: keep only these IEDs (their `IED` and `ConnectedAP` elements; everything else
    as usual)."""
    return parse_tree_names(stream, source, ieds)[0]


def parse_tree_names(
    stream: BinaryIO, source: str, ieds: frozenset[str] | None = None
) -> tuple[Node, list[str]]:
    """`parse_tree`, and the name of every IED in the document (kept or not)."""
    parser = DefusedXMLParser(
        target=_NoTree(), forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    expat = parser.parser  # the expat parser under xml.etree's XMLParser (as defusedxml uses)
    builder = _Builder(expat, ieds)
    expat.StartElementHandler = builder.start
    expat.EndElementHandler = builder.end
    expat.CharacterDataHandler = None  # text is collected only inside TEXT elements
    expat.DefaultHandlerExpand = None  # (xml.etree's is for its doctype() API: not used)
    try:
        while chunk := stream.read(CHUNK):
            parser.feed(chunk)
        parser.close()
        root = builder.root
    except ParseError as exc:
        line = exc.position[0] if exc.position else None
        raise SclError(source, line, f"not well-formed XML: {exc.msg}") from None
    except DefusedXmlException as exc:
        raise SclError(
            source,
            expat.CurrentLineNumber,
            f"refused: {type(exc).__name__} ({exc}); SCL needs no DTD or entities, "
            "and they are not expanded, for safety",
        ) from None
    if root is None or root.tag != "SCL":
        found = root.tag if root is not None else "a root element outside the SCL namespace"
        raise SclError(source, 1, f"not an SCL file: the root element is {found}, not SCL")
    return root, builder.names
