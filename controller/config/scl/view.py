"""What `goosectl scl show` prints: per IED its GoCBs and what it subscribes to.

JSON (`--json`): one object `{"ieds": [{"name", "gocbs": [...], "subscribes": [...]}]}`
with each GoCB as `gocb_json` gives it; text: the same, for people, plus inputs that are
not bound and LGOS settings.
"""

from __future__ import annotations

from typing import Any

from goosectl.controller.config.scl.loader import shape_json
from goosectl.protocols.ethernet.mac import format_mac
from goosectl.protocols.scl import GoCB, IedView, Scl


def _num(x: float | None) -> int | float | None:
    return None if x is None else (int(x) if float(x).is_integer() else x)


def gocb_json(g: GoCB) -> dict[str, Any]:
    a = g.address
    return {
        "gocbRef": g.gocb_ref,
        "datSet": g.dat_set_ref,
        "goID": g.go_id,
        "confRev": g.conf_rev,
        "appid": a.appid if a else None,
        "dst": format_mac(a.mac) if a and a.mac else None,
        "vlanId": a.vlan_id if a else None,
        "vlanPriority": a.vlan_priority if a else None,
        "minTime": _num(a.min_time_ms) if a else None,
        "maxTime": _num(a.max_time_ms) if a else None,
        "members": [
            {"ref": m.ref, "type": shape_json(m.shape) if m.shape is not None else None}
            for m in g.members or []
        ],
    }


def ied_json(v: IedView) -> dict[str, Any]:
    return {
        "name": v.name,
        "gocbs": [gocb_json(g) for g in v.gocbs],
        "subscribes": v.subscribes,
    }


def show_json(scl: Scl, ied: str | None = None) -> dict[str, Any]:
    views = [scl.ied(ied)] if ied else list(scl.ieds.values())
    return {"ieds": [ied_json(v) for v in views]}


def _type_text(shape: object) -> str:
    if shape is None:
        return "?"
    if isinstance(shape, tuple):
        return f"{shape[0]}{{{', '.join(_type_text(s) for s in shape[1])}}}"
    return str(shape)


def _addr_text(g: GoCB) -> str:
    a = g.address
    if a is None:
        return "no GSE address"
    parts = [
        f"appid 0x{a.appid:04x}" if a.appid is not None else "appid ?",
        f"dst {format_mac(a.mac)}" if a.mac else "dst ?",
    ]
    if a.vlan_id is not None or a.vlan_priority is not None:
        parts.append(
            f"vlan {a.vlan_id if a.vlan_id is not None else '-'}"
            f"/prio {a.vlan_priority if a.vlan_priority is not None else '-'}"
        )
    if a.min_time_ms is not None or a.max_time_ms is not None:
        parts.append(f"min/max {_num(a.min_time_ms)}/{_num(a.max_time_ms)} ms")
    return "  ".join(parts)


def show_text(scl: Scl, ied: str | None = None) -> list[str]:
    doc = scl.document
    edition = " ".join(x for x in (doc.version, doc.revision, doc.release) if x) or "2003"
    out = [f"{scl.source}: SCL {edition}, {len(scl.ieds)} IEDs, {len(scl.gocbs)} GoCBs"]
    views = [scl.ied(ied)] if ied else list(scl.ieds.values())
    for v in views:
        out.append("")
        out.append(f"IED {v.name}" + (f" ({v.ied.manufacturer})" if v.ied.manufacturer else ""))
        if v.gocbs:
            out.append("  publishes:")
        for g in v.gocbs:
            out.append(f"    {g.gocb_ref}  confRev {g.conf_rev}  goID {g.go_id}")
            out.append(f"      {_addr_text(g)}")
            if g.members is None:
                out.append("      no data set")
            else:
                out.append(f"      datSet {g.dat_set_ref} ({len(g.members)} members)")
                for i, m in enumerate(g.members):
                    out.append(f"        {i:>3} {m.ref:<50} {_type_text(m.shape)}")
        subs = v.subscribed_gocbs()
        if subs:
            out.append("  subscribes:")
        for g in subs:
            out.append(f"    {g.gocb_ref}  ({_addr_text(g)})")
            for b in (b for b in v.bindings if b.gocb is g):
                e = b.ext_ref
                member = "control block" if b.member is None else f"member {b.member}"
                if b.path:
                    member += f" {list(b.path)}"
                label = f"  intAddr {e.int_addr}" if e.int_addr else ""
                out.append(f"      {b.ld.inst}/{b.ln.name} <- {member}{label}")
        if v.unbound:
            out.append("  inputs not bound:")
        for ln, e in v.unbound:
            what = f"later binding: {e.restriction}" if e.restriction else "unbound"
            out.append(f"    {ln.name} {e.int_addr or e.desc or '(no intAddr)'}  ({what})")
        for lg in v.lgos:
            target = lg.gocb.gocb_ref if lg.gocb else "(not in this file)"
            out.append(f"  LGOS {lg.ld.inst}/{lg.ln.name}: GoCBRef {lg.setting or '-'} -> {target}")
    return out
