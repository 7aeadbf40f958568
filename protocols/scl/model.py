"""The typed SCL model: what an SCL file says, element by element, with where it says it.

Plain data read from the XML (protocols/scl/reader.py); cross references between the
parts (a GSEControl's data set, an FCDA's type, an ExtRef's control block) are resolved
in protocols/scl/resolve.py. Every object keeps its `node`, so any finding about it can
name the file line and the element path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from goosectl.protocols.scl.xmltree import Node


@dataclass(slots=True, eq=False)
class Fcda:
    """One data-set entry: functionally constrained data (a DO) or attribute (a DA)."""

    ld_inst: str
    prefix: str
    ln_class: str
    ln_inst: str
    do_name: str
    da_name: str | None
    fc: str
    ix: int | None
    node: Node

    @property
    def ref(self) -> str:
        """`<LDinst>/<prefix><LNclass><inst>.<DO>.<DA>[<FC>]`."""
        da = f".{self.da_name}" if self.da_name else ""
        ln = f"{self.prefix}{self.ln_class}{self.ln_inst}"
        return f"{self.ld_inst}/{ln}.{self.do_name}{da}[{self.fc}]"

    @property
    def parts(self) -> tuple[str, ...]:
        """DO, SDO and DA/BDA names in order (`Pos.stVal` -> ("Pos", "stVal"))."""
        names = self.do_name.split(".")
        if self.da_name:
            names += self.da_name.split(".")
        return tuple(names)


@dataclass(slots=True, eq=False)
class DataSet:
    name: str
    fcdas: list[Fcda]
    node: Node


@dataclass(slots=True, eq=False)
class GseControl:
    """A GOOSE control block as declared in LN0 (`appID` is the goID string)."""

    name: str
    go_id: str | None
    conf_rev: int | None
    dat_set: str | None
    type: str
    subscribers: list[str]
    node: Node
    #: `securityEnable` as written (None, Signature, SignatureAndEncryption), None if absent
    security_enable: str | None = None


@dataclass(slots=True, eq=False)
class ExtRef:
    """An input: bound (iedName and data named), later-binding (restrictions only), or a
    placeholder. Attributes are as written; absent ones are None."""

    ied_name: str | None
    ld_inst: str | None
    prefix: str
    ln_class: str | None
    ln_inst: str
    do_name: str | None
    da_name: str | None
    int_addr: str | None
    desc: str | None
    service_type: str | None
    src_ld_inst: str | None
    src_prefix: str
    src_ln_class: str | None
    src_ln_inst: str
    src_cb_name: str | None
    p_ln: str | None
    p_do: str | None
    p_da: str | None
    p_serv_t: str | None
    node: Node

    @property
    def bound(self) -> bool:
        return bool(self.ied_name)

    @property
    def parts(self) -> tuple[str, ...]:
        names = self.do_name.split(".") if self.do_name else []
        if self.da_name:
            names += self.da_name.split(".")
        return tuple(names)

    @property
    def data_ref(self) -> str:
        """`<iedName> <LDinst>/<prefix><LNclass><inst>.<DO>.<DA>` of the bound data."""
        da = f".{self.da_name}" if self.da_name else ""
        do = f".{self.do_name}" if self.do_name else ""
        return (
            f"{self.ied_name} {self.ld_inst}/{self.prefix}{self.ln_class or ''}"
            f"{self.ln_inst}{do}{da}"
        )

    @property
    def restriction(self) -> str:
        """The later-binding restriction, e.g. `pLN=CSWI pDO=Pos pDA=q pServT=GOOSE`."""
        pairs = (
            ("pLN", self.p_ln),
            ("pDO", self.p_do),
            ("pDA", self.p_da),
            ("pServT", self.p_serv_t),
        )
        return " ".join(f"{k}={v}" for k, v in pairs if v)


@dataclass(slots=True, eq=False)
class LN:
    """LN0 or an LN. `settings` holds instance values (`DOI.SDI.DAI` -> text), kept for
    LGOS only."""

    prefix: str
    ln_class: str
    inst: str
    ln_type: str | None
    data_sets: dict[str, DataSet]
    gse_controls: list[GseControl]
    ext_refs: list[ExtRef]
    settings: dict[str, tuple[str, Node]]
    node: Node

    @property
    def name(self) -> str:
        return f"{self.prefix}{self.ln_class}{self.inst}"


@dataclass(slots=True, eq=False)
class LDevice:
    inst: str
    ld_name: str | None
    lns: list[LN]
    node: Node

    @property
    def ln0(self) -> LN | None:
        return next((ln for ln in self.lns if ln.ln_class == "LLN0"), None)

    def find_ln(self, prefix: str, ln_class: str, inst: str) -> LN | None:
        if ln_class == "LLN0":
            return self.ln0
        for ln in self.lns:
            if ln.ln_class == ln_class and ln.prefix == prefix and ln.inst == inst:
                return ln
        return None


@dataclass(slots=True, eq=False)
class AccessPoint:
    """`server_at`: the access point whose server this one also reaches (`ServerAt`), e.g.
    a second network port of the same IED."""

    name: str
    ldevices: list[LDevice]
    node: Node
    server_at: str | None = None


@dataclass(slots=True, eq=False)
class Ied:
    name: str
    desc: str | None
    manufacturer: str | None
    access_points: list[AccessPoint]
    node: Node

    def ldevice(self, inst: str) -> tuple[AccessPoint, LDevice] | None:
        for ap in self.access_points:
            for ld in ap.ldevices:
                if ld.inst == inst:
                    return ap, ld
        return None


@dataclass(slots=True, eq=False)
class GseAddress:
    """A GSE element of the Communication section: where a control block publishes."""

    subnetwork: str | None
    ied_name: str
    ap_name: str
    ld_inst: str
    cb_name: str
    mac: bytes | None
    appid: int | None
    vlan_id: int | None
    vlan_priority: int | None
    min_time_ms: float | None
    max_time_ms: float | None
    node: Node


@dataclass(slots=True, eq=False)
class TypeItem:
    """A DO (in an LNodeType), SDO or DA (in a DOType) or BDA (in a DAType)."""

    kind: str
    name: str
    type: str | None
    btype: str | None
    fc: str | None
    count: int
    node: Node


@dataclass(slots=True, eq=False)
class TypeDef:
    id: str
    items: list[TypeItem]
    node: Node
    ln_class: str | None = None

    def item(self, name: str, kinds: tuple[str, ...]) -> TypeItem | None:
        for it in self.items:
            if it.name == name and it.kind in kinds:
                return it
        return None


@dataclass(slots=True, eq=False)
class Templates:
    lnode_types: dict[str, TypeDef] = field(default_factory=dict)
    do_types: dict[str, TypeDef] = field(default_factory=dict)
    da_types: dict[str, TypeDef] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class SclDocument:
    """Everything read from one file, before cross references are resolved."""

    source: str
    version: str | None
    revision: str | None
    release: str | None
    ieds: list[Ied]
    gse: list[GseAddress]
    templates: Templates
