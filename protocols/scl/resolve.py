"""Cross references of an `SclDocument`, resolved into what goosectl works with.

- every GOOSE control block with its references (gocbRef, datSet), its address from the
  Communication section and its members, each with its MMS type;
- every IED's ExtRefs, bound to the control block and member they receive (bound with
  `srcCBName`, or, in Ed1 style, by finding the data in a GOOSE data set of the source
  IED), or kept as unbound / later-binding inputs;
- LGOS LNs with the control block their `GoCBRef` names.

References are built the standard way: `<IED><LDinst>/LLN0$GO$<cb>` (or `<ldName>/...`
when the LDevice has an ldName) and `<IED><LDinst>/LLN0$<dataset>`. A reference that
does not resolve is a finding naming the element; the rest is still resolved.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from goosectl.protocols.scl.errors import Findings, SclFinding
from goosectl.protocols.scl.model import (
    LN,
    AccessPoint,
    DataSet,
    ExtRef,
    Fcda,
    GseAddress,
    GseControl,
    Ied,
    LDevice,
    SclDocument,
)
from goosectl.protocols.scl.types import Typed, TypeResolver


@dataclass(slots=True, eq=False)
class Member:
    fcda: Fcda
    typed: Typed | None

    @property
    def ref(self) -> str:
        return self.fcda.ref

    @property
    def shape(self) -> object | None:
        return self.typed.shape if self.typed is not None else None


@dataclass(slots=True, eq=False)
class GoCB:
    """A GOOSE control block, resolved: what its frames must carry and where they go."""

    ied: Ied
    ap: AccessPoint
    ld: LDevice
    control: GseControl
    data_set: DataSet | None
    members: list[Member] | None
    addresses: list[GseAddress]

    @property
    def address(self) -> GseAddress | None:
        """Where it publishes; an IED with a second port (an access point with `ServerAt`)
        on another subnetwork has a second address for the same control block."""
        return self.addresses[0] if self.addresses else None

    @property
    def ld_ref(self) -> str:
        return self.ld.ld_name or f"{self.ied.name}{self.ld.inst}"

    @property
    def gocb_ref(self) -> str:
        return f"{self.ld_ref}/LLN0$GO${self.control.name}"

    @property
    def dat_set_ref(self) -> str | None:
        ds = self.control.dat_set
        return f"{self.ld_ref}/LLN0${ds}" if ds else None

    @property
    def name(self) -> str:
        return self.control.name

    @property
    def go_id(self) -> str | None:
        return self.control.go_id

    @property
    def conf_rev(self) -> int | None:
        return self.control.conf_rev

    @property
    def shape(self) -> tuple[object, ...] | None:
        """Member types in data_shape form; None without a data set or with an unresolved
        member."""
        if self.members is None or any(m.typed is None for m in self.members):
            return None
        return tuple(m.shape for m in self.members)


@dataclass(slots=True, eq=False)
class Binding:
    """A bound GOOSE ExtRef: which control block, which member (None for a control-block
    binding), and the path into that member when it is a structure (a DO-level FCDA)."""

    ext_ref: ExtRef
    ln: LN
    ld: LDevice
    gocb: GoCB
    member: int | None
    path: tuple[int, ...]


@dataclass(slots=True, eq=False)
class Lgos:
    ld: LDevice
    ln: LN
    setting: str | None
    gocb: GoCB | None


@dataclass(slots=True, eq=False)
class IedView:
    ied: Ied
    gocbs: list[GoCB] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    other_bound: list[ExtRef] = field(default_factory=list)
    unbound: list[tuple[LN, ExtRef]] = field(default_factory=list)
    lgos: list[Lgos] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.ied.name

    @property
    def subscribes(self) -> list[str]:
        """The gocbRefs this IED's bound GOOSE ExtRefs point to, sorted."""
        return sorted({b.gocb.gocb_ref for b in self.bindings})

    def subscribed_gocbs(self) -> list[GoCB]:
        """Control blocks received, in the order of their first ExtRef."""
        seen: dict[str, GoCB] = {}
        for b in self.bindings:
            seen.setdefault(b.gocb.gocb_ref, b.gocb)
        return list(seen.values())


@dataclass(slots=True, eq=False)
class Scl:
    """A resolved SCL file: `ieds` by name (document order) and every finding."""

    document: SclDocument
    ieds: dict[str, IedView]
    gocbs: dict[str, GoCB]
    findings: list[SclFinding]
    #: IEDs of the file read past (`parse_scl(ied=...)` keeps only what one IED needs)
    unread: frozenset[str] = frozenset()

    @property
    def source(self) -> str:
        return self.document.source

    def ied(self, name: str) -> IedView:
        try:
            return self.ieds[name]
        except KeyError:
            known = ", ".join(self.ieds) or "none"
            raise KeyError(f'{self.source}: no IED "{name}" (IEDs: {known})') from None


def _norm(s: str | None) -> str:
    return s or ""


class _Resolver:
    def __init__(
        self, doc: SclDocument, findings: Findings, unread: frozenset[str] = frozenset()
    ) -> None:
        self.doc = doc
        self.f = findings
        #: IEDs of the file that were read past (`parse_scl(ied=...)`)
        self.unread = unread
        self.types = TypeResolver(doc.templates, findings.add)
        self.ieds = {i.name: i for i in doc.ieds}
        #: (IED, access point, ...) -> the access point whose server it reaches (ServerAt)
        server_of = {
            (ied.name, ap.name): ap.server_at or ap.name
            for ied in doc.ieds
            for ap in ied.access_points
        }
        self.addresses: dict[tuple[str, str, str, str], list[GseAddress]] = {}
        for a in doc.gse:
            ap = server_of.get((a.ied_name, a.ap_name), a.ap_name)
            same = self.addresses.setdefault((a.ied_name, ap, a.ld_inst, a.cb_name), [])
            if any(x.subnetwork == a.subnetwork for x in same):
                self.f.add(a.node, "a second GSE address for the same control block (ignored)")
            else:
                same.append(a)
        #: (ied, ldInst, lnClass, prefix, lnInst, cbName) -> GoCB
        self.by_place: dict[tuple[str, str, str, str, str, str], GoCB] = {}
        self.by_ied: dict[str, list[GoCB]] = {}

    def run(self) -> Scl:
        views = {name: IedView(ied) for name, ied in self.ieds.items()}
        used: set[tuple[str, str, str, str]] = set()
        for ied in self.ieds.values():
            for ap in ied.access_points:
                for ld in ap.ldevices:
                    for ln in ld.lns:
                        for gc in ln.gse_controls:
                            gocb = self.gocb(ied, ap, ld, ln, gc)
                            if gocb.address is not None:
                                used.add((ied.name, ap.name, ld.inst, gc.name))
                            views[ied.name].gocbs.append(gocb)
                            self.by_ied.setdefault(ied.name, []).append(gocb)
                            place = (ied.name, ld.inst, ln.ln_class, ln.prefix, ln.inst, gc.name)
                            self.by_place[place] = gocb
        for key, addrs in self.addresses.items():
            if key not in used:
                addr = addrs[0]
                self.f.add(
                    addr.node,
                    f'no GSEControl "{addr.cb_name}" in LDevice "{addr.ld_inst}" of '
                    f'IED "{addr.ied_name}" access point "{addr.ap_name}"',
                )
        gocbs = {g.gocb_ref: g for gs in self.by_ied.values() for g in gs}
        for ied in self.ieds.values():
            view = views[ied.name]
            for _ap, ld, ln in _lns(ied):
                for e in ln.ext_refs:
                    self.ext_ref(view, ld, ln, e)
                if ln.ln_class == "LGOS":
                    view.lgos.append(self.lgos(ld, ln, gocbs))
        return Scl(self.doc, views, gocbs, self.f.items, self.unread)

    # -- control blocks ---------------------------------------------------------------------

    def gocb(self, ied: Ied, ap: AccessPoint, ld: LDevice, ln: LN, gc: GseControl) -> GoCB:
        if ln.ln_class != "LLN0":
            self.f.add(gc.node, "a GSEControl belongs in LN0")
        if gc.type == "GSSE":
            self.f.add(gc.node, "type GSSE (IEC 61850 Ed1 GSSE) is not GOOSE; read as GOOSE")
        ds = None
        members = None
        if gc.dat_set:
            ds = ln.data_sets.get(gc.dat_set)
            if ds is None:
                self.f.add(gc.node, f'datSet "{gc.dat_set}" not found')
            else:
                members = [Member(f, self.member_type(ied, f)) for f in ds.fcdas]
        if gc.conf_rev is None:
            self.f.add(gc.node, "confRev is missing")
        addresses = self.addresses.get((ied.name, ap.name, ld.inst, gc.name), [])
        return GoCB(ied, ap, ld, gc, ds, members, addresses)

    def member_type(self, ied: Ied, f: Fcda) -> Typed | None:
        found = ied.ldevice(f.ld_inst)
        if found is None:
            self.f.add(f.node, f'{f.ref}: LDevice "{f.ld_inst}" not found in IED "{ied.name}"')
            return None
        ln = found[1].find_ln(f.prefix, f.ln_class, f.ln_inst)
        if ln is None:
            self.f.add(f.node, f'{f.ref}: LN "{f.prefix}{f.ln_class}{f.ln_inst}" not found')
            return None
        return self.types.fcda(ln.ln_type, f, f.node)

    # -- inputs -------------------------------------------------------------------------

    def ext_ref(self, view: IedView, ld: LDevice, ln: LN, e: ExtRef) -> None:
        if not e.bound:
            view.unbound.append((ln, e))
            return
        if e.service_type not in (None, "GOOSE"):
            view.other_bound.append(e)
            return
        src = self.ieds.get(e.ied_name or "")
        if src is None:
            if e.ied_name not in self.unread:  # an IED of the file left unread is no error
                self.f.add(e.node, f'iedName "{e.ied_name}": no such IED in this file')
            view.other_bound.append(e)
            return
        if e.src_cb_name:
            place = (
                src.name,
                e.src_ld_inst or e.ld_inst or "",
                e.src_ln_class or "LLN0",
                _norm(e.src_prefix),
                _norm(e.src_ln_inst),
                e.src_cb_name,
            )
            gocb = self.by_place.get(place)
            if gocb is None:
                if e.service_type == "GOOSE":
                    self.f.add(
                        e.node,
                        f'srcCBName "{e.src_cb_name}": no GSEControl in IED "{src.name}" '
                        f'LDevice "{place[1]}" {place[3]}{place[2]}{place[4]}',
                    )
                view.other_bound.append(e)
                return
            if not e.do_name:
                view.bindings.append(Binding(e, ln, ld, gocb, None, ()))
                return
            hit = self._find_member(gocb, e)
            if hit is None:
                self.f.add(
                    e.node,
                    f'{e.data_ref} is not in data set "{gocb.control.dat_set}" of {gocb.gocb_ref}',
                )
                view.other_bound.append(e)
                return
            view.bindings.append(Binding(e, ln, ld, gocb, hit[0], hit[1]))
            return
        # Ed1 style: no control block named; the GOOSE data set that carries the data
        for gocb in self.by_ied.get(src.name, []):
            hit = self._find_member(gocb, e)
            if hit is not None:
                view.bindings.append(Binding(e, ln, ld, gocb, hit[0], hit[1]))
                return
        if e.service_type == "GOOSE":
            self.f.add(e.node, f"{e.data_ref} is in no GOOSE data set of IED {src.name}")
        view.other_bound.append(e)

    def _find_member(self, gocb: GoCB, e: ExtRef) -> tuple[int, tuple[int, ...]] | None:
        if gocb.members is None:
            return None
        want = e.parts
        for i, m in enumerate(gocb.members):
            f = m.fcda
            if (
                f.ld_inst != e.ld_inst
                or f.ln_class != e.ln_class
                or f.prefix != e.prefix
                or f.ln_inst != e.ln_inst
            ):
                continue
            have = f.parts
            if want[: len(have)] != have:
                continue
            rest = want[len(have) :]
            if not rest:
                return i, ()
            if m.typed is not None:
                path = m.typed.path_to(rest)
                if path is not None:
                    return i, path
        return None

    def lgos(self, ld: LDevice, ln: LN, gocbs: dict[str, GoCB]) -> Lgos:
        setting = ln.settings.get("GoCBRef.setSrcRef")
        if setting is None:
            return Lgos(ld, ln, None, None)
        text, node = setting
        ref = gocb_ref_mms(text)
        gocb = gocbs.get(ref)
        if gocb is None:
            self.f.add(node, f'GoCBRef.setSrcRef "{text}" names no GOOSE control block here')
        return Lgos(ld, ln, text, gocb)


def gocb_ref_mms(text: str) -> str:
    """`LD/LLN0.gcb` (object reference) or `LD/LLN0$GO$gcb` (MMS) -> the MMS form."""
    text = text.strip()
    if "$" in text:
        return text
    ld, _, rest = text.partition("/")
    ln, _, cb = rest.partition(".")
    return f"{ld}/{ln}$GO${cb}"


def _lns(ied: Ied) -> Iterator[tuple[AccessPoint, LDevice, LN]]:
    for ap in ied.access_points:
        for ld in ap.ldevices:
            for ln in ld.lns:
                yield ap, ld, ln


def resolve(doc: SclDocument, findings: Findings, unread: frozenset[str] = frozenset()) -> Scl:
    """`unread`: IEDs the file has but the reader read past: ExtRefs naming them are left
    unresolved without a finding (they are inputs of an IED nobody asked about)."""
    return _Resolver(doc, findings, unread).run()
