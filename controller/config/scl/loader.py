"""One IED of an SCL file -> the controller config; a YAML overlay adds what SCL cannot say.

The SCL is the source of truth for what it describes:

- `goose.subscriptions`: the control blocks the IED's bound GOOSE ExtRefs point to:
  gocbRef, dst MAC, APPID, VLAN id, datSet, confRev, member types, MinTime/MaxTime;
- `goose.publishers`: the IED's own GSEControls with an address and a data set (initial
  values: every member zero);
- `inputs`: ExtRefs whose `intAddr` (or `desc`) names a controller input:
  `protection_trip`, `close_request`, `interlock:<name>`, optionally `@rising`,
  `@falling` or `@change`;
- `publications`: a published data set whose members all have a known meaning in one
  topic (`PUBLISHED`: XCBR.Pos -> position, PTRC.Tr -> trip_ack, RBRF.OpEx -> bf_trip);
- `member_names`: each subscription's member references, as `scl show` prints them.

goID is left to the wire check (`--scl`): it is a label, not part of a stream's identity,
and the subscriber keys streams on (dst, APPID, gocbRef). Unbound and later-binding
ExtRefs, and what could not be configured, come back as notes (comments in `scl config`).

An overlay is a YAML/TOML/JSON config with `scl: {file: X.scd, ied: NAME}`: its other keys
(device, logic, interfaces, journal, A/B, names, initial values, sides ...) are added to
what the SCL gives. An overlay entry for a subscription or publisher names it by gocb_ref
(or name) and may not change a field the SCL sets.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from goosectl.controller.config.bay import InputMap
from goosectl.controller.config.validate import ConfigError, validate_data
from goosectl.controller.engine.loader import LineOf
from goosectl.protocols.ethernet.mac import format_mac
from goosectl.protocols.goose import (
    Array,
    BinaryTime,
    BitString,
    Boolean,
    FloatingPoint,
    Integer,
    MmsString,
    OctetString,
    Structure,
    Unsigned,
    UtcTime,
    VisibleString,
    to_json,
)
from goosectl.protocols.scl import Binding, GoCB, IedView, Scl, SclError, load_scl
from goosectl.protocols.scl.reader import SECOND_IED

log = logging.getLogger(__package__)

M = TypeVar("M", bound=BaseModel)

INPUT_EVENTS = ("protection_trip", "close_request", "interlock")
EDGES = ("rising", "falling", "change")
#: (LN class, DO, DA) of a published member -> (publication topic, member source).
PUBLISHED: dict[tuple[str, str, str], tuple[str, str]] = {
    ("XCBR", "Pos", "stVal"): ("position", "position"),
    ("XCBR", "Pos", "q"): ("position", "quality"),
    ("XCBR", "Pos", "t"): ("position", "t"),
    ("PTRC", "Tr", "general"): ("trip_ack", "trip"),
    ("PTRC", "Tr", "t"): ("trip_ack", "now"),
    ("RBRF", "OpEx", "general"): ("bf_trip", "bf_trip"),
    ("RBRF", "OpEx", "t"): ("bf_trip", "now"),
}
#: Fields the SCL sets; an overlay may not change them.
SCL_FIELDS = {
    "subscriptions": frozenset(
        {
            "gocb_ref",
            "appid",
            "dst",
            "dat_set",
            "conf_rev",
            "vlan",
            "members",
            "min_time_ms",
            "max_time_ms",
        }
    ),
    "publishers": frozenset(
        {
            "gocb_ref",
            "dat_set",
            "go_id",
            "conf_rev",
            "appid",
            "dst",
            "vlan",
            "members",
            "min_time_ms",
            "max_time_ms",
        }
    ),
}


#: `GSEControl@securityEnable` -> a subscription's `auth` (IEC 62351-6): a signed stream
#: is required to verify; where the SCL says nothing, the overlay decides
SECURITY_ENABLE = {"None": "off", "Signature": "required", "SignatureAndEncryption": "required"}


class SclConfigError(Exception):
    """The SCL or the overlay cannot make a config; the message names file, line, field."""


# -- zero values ---------------------------------------------------------------------------

_ZERO = {
    "boolean": lambda: Boolean(False),
    "integer": lambda: Integer(0),
    "unsigned": lambda: Unsigned(0),
    "utc-time": lambda: UtcTime(0, 0, 0),
    "binary-time": lambda: BinaryTime(0, 0),
    "visible-string": lambda: VisibleString(""),
    "octet-string": lambda: OctetString(b""),
    "mMSString": lambda: MmsString(""),
}


def zero_value(shape: object):
    """The all-zero value of a member type: false, 0, empty, bits 0, time 0."""
    if isinstance(shape, tuple):
        kind, items = shape
        values = tuple(zero_value(s) for s in items)
        return Structure(values) if kind == "structure" else Array(values)
    name, _, size = str(shape).partition("/")
    if name == "bit-string":
        return BitString.from_bits("0" * int(size))
    if name == "floating-point":
        return FloatingPoint.f64(0.0) if size == "64" else FloatingPoint.f32(0.0)
    return _ZERO[name]()


def initial_json(shape: object) -> dict[str, Any]:
    """A member's zero value in the JSON form configs take (a time as seconds/fraction)."""
    obj = to_json(zero_value(shape))
    if obj["type"] == "utc-time":
        obj["value"].pop("iso", None)
    return obj


def shape_json(shape: object) -> Any:
    """A member type in config/JSON form: leaves as strings, `[structure, [...]]`."""
    if isinstance(shape, tuple):
        return [shape[0], [shape_json(s) for s in shape[1]]]
    return shape


def _ms(x: float | None) -> int | float | None:
    return None if x is None else (int(x) if float(x).is_integer() else x)


# -- SCL -> config data ------------------------------------------------------------------


def pick_ied(scl: Scl, ied: str | None) -> IedView:
    if ied is None:
        if len(scl.ieds) == 1:
            return next(iter(scl.ieds.values()))
        names = ", ".join(scl.ieds) or "none"
        raise SclConfigError(f"{scl.source}: which IED? give --ied NAME (IEDs: {names})")
    try:
        return scl.ied(ied)
    except KeyError as exc:
        raise SclConfigError(exc.args[0]) from None


def subscription(g: GoCB) -> dict[str, Any]:
    a = g.address
    assert a is not None and a.mac is not None and a.appid is not None
    out: dict[str, Any] = {"gocb_ref": g.gocb_ref, "appid": a.appid, "dst": format_mac(a.mac)}
    if g.dat_set_ref:
        out["dat_set"] = g.dat_set_ref
    if g.conf_rev is not None:
        out["conf_rev"] = g.conf_rev
    security = SECURITY_ENABLE.get(g.control.security_enable or "")
    if security is not None:
        out["auth"] = security
    if a.vlan_id:
        out["vlan"] = a.vlan_id
    if g.shape is not None:
        out["members"] = [shape_json(s) for s in g.shape]
    if a.min_time_ms is not None:
        out["min_time_ms"] = _ms(a.min_time_ms)
    if a.max_time_ms is not None:
        out["max_time_ms"] = _ms(a.max_time_ms)
    second = _second(g)
    if second is not None:
        # the same stream on a second subnetwork: received on both networks (A/B)
        out["ab"] = {"mode": "merge"}
        if second.vlan_id is not None and a.vlan_id is not None and second.vlan_id != a.vlan_id:
            out["ab"] |= {"vlan_a": a.vlan_id, "vlan_b": second.vlan_id}
    return out


def _second(g: GoCB):
    """The address of the same stream on a second subnetwork (same MAC and APPID)."""
    a = g.address
    for b in g.addresses[1:]:
        if a is not None and b.mac == a.mac and b.appid == a.appid:
            return b
    return None


def publisher(g: GoCB) -> dict[str, Any]:
    a = g.address
    assert a is not None and a.mac is not None and a.appid is not None and g.shape is not None
    out: dict[str, Any] = {
        "gocb_ref": g.gocb_ref,
        "dat_set": g.dat_set_ref,
        "go_id": g.go_id,
        "conf_rev": g.conf_rev if g.conf_rev is not None else 1,
        "appid": a.appid,
        "dst": format_mac(a.mac),
    }
    if a.vlan_id is not None or a.vlan_priority is not None:
        out["vlan"] = {
            "id": a.vlan_id or 0,
            "priority": 4 if a.vlan_priority is None else a.vlan_priority,
        }
    out["members"] = [shape_json(s) for s in g.shape]
    out["initial"] = [initial_json(s) for s in g.shape]
    second = _second(g)
    if second is not None and second.vlan_id == a.vlan_id:
        out["sides"] = "both"  # the same frames on two subnetworks: interfaces A and B
    if a.min_time_ms is not None:
        out["min_time_ms"] = _ms(a.min_time_ms)
    if a.max_time_ms is not None:
        out["max_time_ms"] = _ms(a.max_time_ms)
    return out


def _unusable(g: GoCB) -> str | None:
    a = g.address
    if a is None:
        return "has no GSE address in the Communication section"
    if a.mac is None or a.appid is None:
        return "has no MAC-Address or APPID in its GSE address"
    return None


def parse_input(text: str | None) -> dict[str, Any] | None:
    """`protection_trip`, `close_request@falling`, `interlock:bay2` -> InputMap fields."""
    if not text:
        return None
    head, _, edge = text.strip().partition("@")
    event, _, name = head.partition(":")
    if event not in INPUT_EVENTS or (edge and edge not in EDGES):
        return None
    if (event == "interlock") != bool(name):
        return None
    out: dict[str, Any] = {"event": event}
    if name:
        out["interlock"] = name
    if edge:
        out["when"] = edge
    return out


def quality_of(b: Binding) -> dict[str, Any]:
    """Where the bound member's quality is in the same data set: the `q` of the same DO,
    beside it in a DO-level member or as its own member. Empty if the data set has none
    (or the config has no quality field)."""
    if "quality" not in InputMap.model_fields or b.member is None or not b.gocb.members:
        return {}
    m = b.gocb.members[b.member]
    if b.path and m.typed is not None:
        outer = m.typed
        for i in b.path[:-1]:
            outer = outer.fields[i][1]
        q = outer.path_to(("q",))
        if q is not None:
            return {"quality": b.member, "quality_path": [*b.path[:-1], *q]}
    f = m.fcda
    want = (f.ld_inst, f.prefix, f.ln_class, f.ln_inst, f.do_name, "q")
    for i, other in enumerate(b.gocb.members):
        o = other.fcda
        if (o.ld_inst, o.prefix, o.ln_class, o.ln_inst, o.do_name, o.da_name) == want:
            return {"quality": i}
    return {}


def publication(g: GoCB) -> dict[str, Any] | None:
    """A publication mapping when every member has a known meaning, all in one topic."""
    if not g.members:
        return None
    hits = []
    for m in g.members:
        f = m.fcda
        do, _, da = (f"{f.do_name}.{f.da_name or ''}").partition(".")
        hits.append(PUBLISHED.get((f.ln_class, do, da)))
    known = [h for h in hits if h is not None]
    if len(known) != len(hits) or len({h[0] for h in known}) != 1:
        return None
    return {
        "topic": known[0][0],
        "gocb_ref": g.gocb_ref,
        "members": [h[1] for h in known],
    }


def config_data(scl: Scl, ied: str | None) -> tuple[dict[str, Any], list[str]]:
    """The controller config of one IED as plain data, and notes on what it leaves out."""
    view = pick_ied(scl, ied)
    notes: list[str] = []
    subs, names = _subscriptions(view, notes)
    pubs, publications = _publishers(view, notes)
    inputs = _inputs(view, names, notes)
    data = {
        "goose": {"subscriptions": subs, "publishers": pubs},
        "inputs": inputs,
        "publications": publications,
        "member_names": names,
    }
    return data, notes


def _subscriptions(
    view: IedView, notes: list[str]
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """The IED's usable subscriptions, and the member names of each stream by gocbRef;
    what is left out or unchecked goes to `notes`."""
    subs, names = [], {}
    for g in view.subscribed_gocbs():
        why = _unusable(g)
        if why:
            notes.append(f"not subscribed: {g.gocb_ref} {why}")
            continue
        subs.append(subscription(g))
        if g.members is not None:
            names[g.gocb_ref] = [m.ref for m in g.members]
        if g.shape is None:
            notes.append(f"{g.gocb_ref}: member types unknown (see the findings); not checked")
    return subs, names


def _publishers(
    view: IedView, notes: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The IED's publishable GoCBs, and the publication mapping of those whose members
    all have a known meaning; what is left out goes to `notes`."""
    pubs, publications = [], []
    for g in view.gocbs:
        why = _unusable(g) or (
            "has no data set"
            if g.members is None
            else ("has members of unknown type" if g.shape is None else None)
        )
        if why:
            notes.append(f"not published: {g.gocb_ref} {why}")
            continue
        pubs.append(publisher(g))
        if len(g.addresses) > 1 and "sides" not in pubs[-1]:
            notes.append(
                f"{g.gocb_ref}: published on {len(g.addresses)} subnetworks with different "
                "addresses; only the first is configured (add a publisher per copy in an overlay)"
            )
        p = publication(g)
        if p is not None:
            publications.append(p)
        else:
            refs = ", ".join(m.ref for m in g.members or [])
            notes.append(
                f"{g.gocb_ref}: no publication mapping (members {refs}); add one in an overlay"
            )
    return pubs, publications


def _inputs(view: IedView, names: dict[str, list[str]], notes: list[str]) -> list[dict[str, Any]]:
    """The inputs bound to a member of a subscribed stream; the bindings without one and
    the unbound inputs go to `notes`."""
    inputs = []
    for b in view.bindings:
        mapped = parse_input(b.ext_ref.int_addr) or parse_input(b.ext_ref.desc)
        if mapped is None:
            continue
        if b.member is None or b.gocb.gocb_ref not in names:
            notes.append(f"input {mapped['event']} bound to {b.gocb.gocb_ref} without a member")
            continue
        entry = {"stream": b.gocb.gocb_ref, "member": b.member, "path": list(b.path)} | mapped
        inputs.append(entry | quality_of(b))
    for ln, e in view.unbound:
        what = f"later binding, {e.restriction}" if e.restriction else "unbound"
        label = e.int_addr or e.desc or "(no intAddr)"
        notes.append(f"input {label} at {ln.name} ({what}): bind it in the SCL")
    return inputs


# -- loading ---------------------------------------------------------------------------


def read_scl(path: Path, ied: str | None = None) -> Scl:
    """The SCL file a config is built from (`ied`: only what that IED needs,
    `protocols.scl.parse_scl`); two IEDs of one name are an error naming both lines,
    since `--ied NAME` would pick one of them by a rule the user never sees."""
    try:
        scl = load_scl(path, ied)
    except SclError as exc:
        raise SclConfigError(str(exc)) from exc
    for f in scl.findings:
        if f.message.startswith(SECOND_IED):
            raise SclConfigError(
                f"{f.source}:{f.line}: {f.message}: IED names must be unique in an SCL file"
            )
    return scl


def warn_no_inputs(scl: Scl, view: IedView) -> None:
    """A warning when the chosen IED subscribes to nothing: a controller (or listener)
    built from it has no inputs, which is nearly always the wrong `--ied`. It names the
    IED's role (its description) and the IEDs that do subscribe."""
    if view.bindings:
        return
    role = f" ({view.ied.desc})" if view.ied.desc else ""
    others = ", ".join(n for n, v in scl.ieds.items() if v.bindings) or "none"
    tail = f"IEDs that subscribe: {others}"
    if scl.unread:  # read for this IED alone: the others' subscriptions were never built
        tail = (
            f"the file was read for {view.name} alone, its other IEDs "
            f"({', '.join(sorted(scl.unread))}) not: `goosectl scl show` tells which subscribe"
        )
    log.warning(
        "%s: IED %s%s subscribes to no GOOSE stream: the config has no subscriptions and "
        "no inputs (%s)",
        scl.source,
        view.name,
        role,
        tail,
    )


def validate(model: type[M], data: dict[str, Any], source: str, line_of: LineOf | None) -> M:
    part = data if "goose" in model.model_fields else data.get("goose", {})
    try:
        return validate_data(model, part, source, line_of or (lambda _p: None))
    except ConfigError as exc:
        raise SclConfigError(str(exc)) from exc


def load_scl_config(path: Path, model: type[M], ied: str | None) -> M:
    """An SCL file used directly as `--config` with `--ied NAME`."""
    scl = read_scl(path, ied)
    data, _notes = config_data(scl, ied)
    view = pick_ied(scl, ied)
    warn_no_inputs(scl, view)
    return validate(model, data, f"{path} (IED {view.name})", None)


def load_overlay(
    path: Path, overlay: dict[str, Any], line_of: LineOf, model: type[M], ied: str | None
) -> M:
    """A config file with `scl: {file, ied}`: the SCL's config plus the overlay's additions."""
    ref = overlay.get("scl")
    src = str(path)
    if not isinstance(ref, dict) or not isinstance(ref.get("file"), str):
        raise SclConfigError(
            f"{src}:{line_of(('scl',))}: scl: write `scl: {{file: X.scd, ied: NAME}}`"
        )
    unknown = set(ref) - {"file", "ied"}
    if unknown:
        raise SclConfigError(f"{src}:{line_of(('scl',))}: scl: unknown keys {sorted(unknown)}")
    scl_path = (
        (path.parent / ref["file"]).resolve()
        if not Path(ref["file"]).is_absolute()
        else Path(ref["file"])
    )
    scl = read_scl(scl_path, ied or ref.get("ied"))
    base, _notes = config_data(scl, ied or ref.get("ied"))
    rest = {k: v for k, v in overlay.items() if k != "scl"}
    if "goose" not in model.model_fields and "goose" not in rest:
        # a GooseConfig overlay (replay, listen): its keys are the goose section's; a
        # controller overlay (with `goose:`) gives replay and listen its goose section
        rest = {"goose": rest}
        base_line_of = line_of
        line_of = lambda p: base_line_of(p[1:] if p and p[0] == "goose" else p)  # noqa: E731
    errors: list[str] = []
    merged = merge(base, rest, src, line_of, errors)
    if errors:
        raise SclConfigError("\n".join(errors))
    return validate(model, merged, src, line_of)


def merge(
    base: dict[str, Any], overlay: dict[str, Any], src: str, line_of: LineOf, errors: list[str]
) -> dict[str, Any]:
    """The overlay's additions on the SCL's config; changes to SCL fields are errors."""
    out = dict(base)
    for key, value in overlay.items():
        if key == "goose" and isinstance(value, dict):
            goose = dict(base["goose"])
            for gk, gv in value.items():
                if gk in SCL_FIELDS and isinstance(gv, list):
                    goose[gk] = _merge_streams(gk, base["goose"][gk], gv, src, line_of, errors)
                else:
                    goose[gk] = gv
            out["goose"] = goose
        elif key == "inputs" and isinstance(value, list):
            out["inputs"] = base["inputs"] + value
        elif key == "publications" and isinstance(value, list):
            mine = {p.get("gocb_ref") for p in value if isinstance(p, dict)}
            out["publications"] = [
                p for p in base["publications"] if p["gocb_ref"] not in mine
            ] + value
        elif key == "member_names" and isinstance(value, dict):
            for stream in value:
                if stream in base["member_names"]:
                    errors.append(
                        f"{src}:{line_of(('member_names', stream))}: member_names.{stream}: "
                        "set by the SCL (the FCDA references)"
                    )
            out["member_names"] = base["member_names"] | value
        else:
            out[key] = value
    return _by_name(base, out)


def _by_name(base: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Streams the overlay names are called by their name in the SCL's inputs and member
    names too (reports name inputs after their stream)."""
    names = {s["gocb_ref"]: s["name"] for s in out["goose"]["subscriptions"] if s.get("name")}
    if not names:
        return out
    n = len(base["inputs"])
    out["inputs"] = [
        i | {"stream": names.get(i["stream"], i["stream"])} for i in out["inputs"][:n]
    ] + out["inputs"][n:]
    out["member_names"] = {
        (names[k] if k in names and k in base["member_names"] else k): v
        for k, v in out["member_names"].items()
    }
    return out


def _merge_streams(
    kind: str,
    base: list[dict[str, Any]],
    overlay: list[Any],
    src: str,
    line_of: LineOf,
    errors: list[str],
) -> list[dict[str, Any]]:
    merged = [dict(x) for x in base]
    by_ref = {x["gocb_ref"]: x for x in merged}
    for i, entry in enumerate(overlay):
        where = f"{src}:{line_of(('goose', kind, i))}: goose.{kind}.{i}"
        if not isinstance(entry, dict):
            errors.append(f"{where}: expected a mapping")
            continue
        target = by_ref.get(entry.get("gocb_ref", "")) or next(
            (x for x in merged if entry.get("name") and x.get("name") == entry.get("name")), None
        )
        if target is None:
            known = ", ".join(by_ref) or "none"
            errors.append(
                f"{where}: {entry.get('gocb_ref') or entry.get('name')!r} is not one of the "
                f"IED's {kind} in the SCL (those are: {known})"
            )
            continue
        for k, v in entry.items():
            if k == "gocb_ref":
                continue
            if k in SCL_FIELDS[kind] or (k == "auth" and "auth" in target):
                errors.append(
                    f"{src}:{line_of(('goose', kind, i, k))}: goose.{kind}.{i}.{k}: set by the "
                    f"SCL ({target.get(k)!r}); an overlay only adds what SCL cannot say"
                )
                continue
            target[k] = v
    return merged
