"""The slim XML tree -> `SclDocument`: IEDs, LDevices, LNs, data sets, GoCBs, ExtRefs,
LGOS settings, the Communication section's GSE addresses and the DataTypeTemplates.

Values are parsed as SCL writes them: APPID and VLAN-ID in hexadecimal, VLAN-PRIORITY in
decimal, MAC-Address as six hex octets joined by '-', MinTime/MaxTime as a number with a
unit (s) and a multiplier (m by default). A value that does not parse is a finding and is
left out; the element and the rest of the file are still read.
"""

from __future__ import annotations

import re

from goosectl.protocols.scl.errors import Findings
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
    Templates,
    TypeDef,
    TypeItem,
)
from goosectl.protocols.scl.xmltree import Node

#: the start of the finding for a second IED of a name already used: a config refuses the
#: file on it (which IED `--ied` means would be a guess)
SECOND_IED = "a second IED named"
_MAC = re.compile(r"^[0-9A-Fa-f]{2}([-:][0-9A-Fa-f]{2}){5}$")
#: Unit multipliers of a duration (SCL's tUnitMultiplierEnum), as factors of a second.
MULTIPLIER = {"": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9, "k": 1e3, "c": 1e-2, "d": 1e-1}


def read_document(root: Node, source: str, findings: Findings) -> SclDocument:
    r = _Reader(findings)
    ieds = [r.ied(n) for n in root.findall("IED")]
    seen: dict[str, Ied] = {}
    for ied in ieds:
        if ied.name in seen:
            first = seen[ied.name].node.line
            findings.add(ied.node, f'{SECOND_IED} "{ied.name}" (the first is on line {first})')
        else:
            seen[ied.name] = ied
    gse = [
        addr
        for comm in root.findall("Communication")
        for sub in comm.findall("SubNetwork")
        for cap in sub.findall("ConnectedAP")
        for addr in r.gse(sub, cap)
    ]
    templates = Templates()
    for dtt in root.findall("DataTypeTemplates"):
        r.templates(dtt, templates)
    return SclDocument(
        source=source,
        version=root.get("version"),
        revision=root.get("revision"),
        release=root.get("release"),
        ieds=list(seen.values()),
        gse=gse,
        templates=templates,
    )


class _Reader:
    def __init__(self, findings: Findings) -> None:
        self.f = findings

    # -- values -----------------------------------------------------------------------------

    def _int(self, node: Node, attr: str, lo: int = 0, hi: int = 0xFFFFFFFF) -> int | None:
        text = node.get(attr)
        if text is None:
            return None
        try:
            value = int(text.strip())
        except ValueError:
            self.f.add(node, f'{attr} "{text}" is not a number')
            return None
        if not lo <= value <= hi:
            self.f.add(node, f"{attr} {value} is outside {lo}..{hi}")
            return None
        return value

    def _required(self, node: Node, attr: str) -> str:
        value = node.get(attr)
        if not value:
            self.f.add(node, f"{attr} is missing")
            return ""
        return value

    # -- IED ------------------------------------------------------------------------------

    def ied(self, node: Node) -> Ied:
        return Ied(
            name=self._required(node, "name"),
            desc=node.get("desc"),
            manufacturer=node.get("manufacturer"),
            access_points=[self.access_point(ap) for ap in node.findall("AccessPoint")],
            node=node,
        )

    def access_point(self, node: Node) -> AccessPoint:
        lds = [
            self.ldevice(ld)
            for server in node.findall("Server")
            for ld in server.findall("LDevice")
        ]
        at = node.find("ServerAt")
        server_at = at.get("apName") if at is not None else None
        return AccessPoint(self._required(node, "name"), lds, node, server_at or None)

    def ldevice(self, node: Node) -> LDevice:
        lns = [self.ln(n) for n in node.children if n.tag in ("LN0", "LN")]
        return LDevice(self._required(node, "inst"), node.get("ldName") or None, lns, node)

    def ln(self, node: Node) -> LN:
        a = node.attrib  # (the hot path of a large file: one LN per few hundred bytes)
        ln = LN(
            a.get("prefix") or "",
            a.get("lnClass") or self._required(node, "lnClass"),
            a.get("inst") or "",
            a.get("lnType"),
            {},
            [],
            [],
            {},
            node,
        )
        if not ln.ln_type:
            self.f.add(node, "lnType is missing")
        for child in node.children:
            tag = child.tag
            if tag == "DataSet":
                ds = self.data_set(child)
                if ds.name in ln.data_sets:
                    self.f.add(child, f'a second DataSet named "{ds.name}" (the first is read)')
                else:
                    ln.data_sets[ds.name] = ds
            elif tag == "GSEControl":
                ln.gse_controls.append(self.gse_control(child))
            elif tag == "Inputs":
                ln.ext_refs.extend(self.ext_ref(e) for e in child.findall("ExtRef"))
            elif tag == "DOI":
                self._settings(child, child.get("name") or "", ln.settings)
        return ln

    def _settings(self, node: Node, path: str, out: dict[str, tuple[str, Node]]) -> None:
        for child in node.children:
            name = f"{path}.{child.get('name') or ''}"
            if child.tag == "SDI":
                self._settings(child, name, out)
            elif child.tag == "DAI":
                val = child.find("Val")
                if val is not None and val.text is not None:
                    out[name] = (val.text, val)

    def data_set(self, node: Node) -> DataSet:
        fcdas = []
        for f in node.findall("FCDA"):
            fcdas.append(
                Fcda(
                    ld_inst=self._required(f, "ldInst"),
                    prefix=f.get("prefix") or "",
                    ln_class=self._required(f, "lnClass"),
                    ln_inst=f.get("lnInst") or "",
                    do_name=self._required(f, "doName"),
                    da_name=f.get("daName") or None,
                    fc=self._required(f, "fc"),
                    ix=self._int(f, "ix"),
                    node=f,
                )
            )
        return DataSet(self._required(node, "name"), fcdas, node)

    def gse_control(self, node: Node) -> GseControl:
        return GseControl(
            name=self._required(node, "name"),
            go_id=node.get("appID"),
            conf_rev=self._int(node, "confRev"),
            dat_set=node.get("datSet") or None,
            type=node.get("type") or "GOOSE",
            subscribers=[n.text for n in node.findall("IEDName") if n.text],
            node=node,
            security_enable=node.get("securityEnable") or None,
        )

    def ext_ref(self, node: Node) -> ExtRef:
        g = node.get
        return ExtRef(
            ied_name=g("iedName") or None,
            ld_inst=g("ldInst") or None,
            prefix=g("prefix") or "",
            ln_class=g("lnClass") or None,
            ln_inst=g("lnInst") or "",
            do_name=g("doName") or None,
            da_name=g("daName") or None,
            int_addr=g("intAddr") or None,
            desc=g("desc") or None,
            service_type=g("serviceType") or None,
            src_ld_inst=g("srcLDInst") or None,
            src_prefix=g("srcPrefix") or "",
            src_ln_class=g("srcLNClass") or None,
            src_ln_inst=g("srcLNInst") or "",
            src_cb_name=g("srcCBName") or None,
            p_ln=g("pLN") or None,
            p_do=g("pDO") or None,
            p_da=g("pDA") or None,
            p_serv_t=g("pServT") or None,
            node=node,
        )

    # -- Communication ----------------------------------------------------------------------

    def gse(self, sub: Node, cap: Node) -> list[GseAddress]:
        out = []
        for g in cap.findall("GSE"):
            params = {}
            address = g.find("Address")
            for p in address.findall("P") if address is not None else ():
                params[p.get("type") or ""] = p
            out.append(
                GseAddress(
                    subnetwork=sub.get("name"),
                    ied_name=self._required(cap, "iedName"),
                    ap_name=self._required(cap, "apName"),
                    ld_inst=self._required(g, "ldInst"),
                    cb_name=self._required(g, "cbName"),
                    mac=self._mac(params.get("MAC-Address")),
                    appid=self._hex(params.get("APPID"), 0xFFFF),
                    vlan_id=self._hex(params.get("VLAN-ID"), 0xFFF),
                    vlan_priority=self._priority(params.get("VLAN-PRIORITY")),
                    min_time_ms=self._duration(g.find("MinTime")),
                    max_time_ms=self._duration(g.find("MaxTime")),
                    node=g,
                )
            )
        return out

    def _mac(self, p: Node | None) -> bytes | None:
        if p is None:
            return None
        text = p.text or ""
        if not _MAC.match(text):
            self.f.add(p, f'MAC-Address "{text}" is not six hex octets like 01-0C-CD-01-00-01')
            return None
        return bytes(int(x, 16) for x in re.split("[-:]", text))

    def _hex(self, p: Node | None, hi: int) -> int | None:
        if p is None:
            return None
        text = p.text or ""
        try:
            value = int(text, 16)
        except ValueError:
            self.f.add(p, f'{p.get("type")} "{text}" is not hexadecimal')
            return None
        if not 0 <= value <= hi:
            self.f.add(p, f'{p.get("type")} "{text}" is above 0x{hi:X}')
            return None
        return value

    def _priority(self, p: Node | None) -> int | None:
        if p is None:
            return None
        text = p.text or ""
        if not (text.isdigit() and int(text) <= 7):
            self.f.add(p, f'VLAN-PRIORITY "{text}" is not 0..7')
            return None
        return int(text)

    def _duration(self, node: Node | None) -> float | None:
        if node is None:
            return None
        text = node.text or ""
        unit = node.get("unit", "s")
        mult = node.get("multiplier", "m")
        try:
            value = float(text)
        except ValueError:
            self.f.add(node, f'"{text}" is not a number')
            return None
        if unit != "s" or mult not in MULTIPLIER:
            self.f.add(node, f'unit "{mult}{unit}" is not a time (use unit="s" multiplier="m")')
            return None
        ms = value * MULTIPLIER[mult] * 1000.0
        return float(round(ms, 9))

    # -- DataTypeTemplates --------------------------------------------------------------------

    def templates(self, node: Node, out: Templates) -> None:
        tables = {
            "LNodeType": (out.lnode_types, ("DO",)),
            "DOType": (out.do_types, ("SDO", "DA")),
            "DAType": (out.da_types, ("BDA",)),
        }
        for child in node.children:
            if child.tag not in tables:
                continue
            table, kinds = tables[child.tag]
            tid = self._required(child, "id")
            if tid in table:
                self.f.add(child, f'a second {child.tag} with id "{tid}" (the first is read)')
                continue
            items = [
                TypeItem(
                    kind=i.tag,
                    name=self._required(i, "name"),
                    type=i.get("type"),
                    btype=i.get("bType"),
                    fc=i.get("fc"),
                    count=self._int(i, "count") or 0,
                    node=i,
                )
                for i in child.children
                if i.tag in kinds
            ]
            table[tid] = TypeDef(tid, items, child, child.get("lnClass"))
