"""The JSON form of Data values and frames (what `goosectl decode --json` prints and what
configs / `goosectl publish --values` accept).

Every element is ``{"type": <Data choice name>, "value": ...}``; floats add ``"bits"``.
The value encodings are one table (`_TO` / `_FROM`), keyed by type name. Non-finite
floats are the strings "NaN", "Infinity", "-Infinity" so the output stays strict JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from goosectl.protocols.goose.data import (
    Array,
    Bcd,
    BinaryTime,
    BitString,
    Boolean,
    BooleanArray,
    Data,
    FloatingPoint,
    Integer,
    MmsString,
    ObjId,
    OctetString,
    Real,
    Structure,
    Unsigned,
    VisibleString,
)
from goosectl.protocols.goose.errors import BadValue, GooseError, TypeMismatch
from goosectl.protocols.goose.utctime import UtcTime

if TYPE_CHECKING:  # frame.py imports this module
    from goosectl.protocols.goose.frame import GooseFrame

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _float_out(x: float) -> float | str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _float_in(x: object) -> float:
    if isinstance(x, str) and x in _NONFINITE:
        return _NONFINITE[x]
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeMismatch(f"expected a number or NaN/Infinity/-Infinity, got {x!r}")
    return float(x)


def utc_to_json(t: UtcTime) -> dict[str, Any]:
    return {"iso": t.iso(), "seconds": t.seconds, "fraction": t.fraction, "quality": t.quality}


def utc_from_json(obj: object) -> UtcTime:
    if not isinstance(obj, dict):
        raise TypeMismatch(f"utc-time must be an object, got {obj!r}")
    if "seconds" in obj:
        seconds, fraction, quality = obj["seconds"], obj.get("fraction", 0), obj.get("quality", 0)
        for part, v in (("seconds", seconds), ("fraction", fraction), ("quality", quality)):
            if type(v) is not int:
                raise TypeMismatch(f"utc-time {part} must be an integer, got {v!r}")
        t = UtcTime(seconds, fraction, quality)
    elif "iso" in obj:
        import datetime as dt

        text = str(obj["iso"]).rstrip("Z")
        head, _, frac = text.partition(".")
        try:
            base = dt.datetime.fromisoformat(head).replace(tzinfo=dt.UTC)
        except ValueError as exc:
            raise BadValue(f"bad ISO time {obj['iso']!r}: {exc}") from None
        if frac and not frac.isdigit():
            raise BadValue(f"bad fraction in ISO time {obj['iso']!r}")
        ns = int((frac + "000000000")[:9]) if frac else 0
        t = UtcTime.from_ns(int(base.timestamp()) * 1_000_000_000 + ns, obj.get("quality", 0))
    else:
        raise TypeMismatch("utc-time needs 'seconds' (and 'fraction', 'quality') or 'iso'")
    t.to_bytes()  # range check now, not at publish time
    return t


def _int_in(v: object) -> int:
    if type(v) is not int:
        raise TypeMismatch(f"expected an integer, got {v!r}")
    return v


def _str_in(v: object) -> str:
    if not isinstance(v, str):
        raise TypeMismatch(f"expected a string, got {v!r}")
    return v


def _bits_in(cls: type[BitString]) -> Callable[[object], BitString]:
    def conv(v: object) -> BitString:
        return cls.from_bits(_str_in(v)) if cls is BitString else cls(*_raw_bits(_str_in(v)))

    return conv


def _raw_bits(bits: str) -> tuple[bytes, int]:
    b = BitString.from_bits(bits)
    return b.data, b.unused


def _hex_in(v: object) -> bytes:
    try:
        return bytes.fromhex(_str_in(v))
    except ValueError:
        raise BadValue(f"octet-string must be hex, got {v!r}") from None


def _objid_in(v: object) -> ObjId:
    text = _str_in(v)
    try:
        return ObjId(tuple(int(p) for p in text.split(".")))
    except ValueError:
        raise BadValue(f"objId must be dotted integers, got {v!r}") from None


def _binary_time_in(v: object) -> BinaryTime:
    if not isinstance(v, dict) or "ms" not in v:
        raise TypeMismatch(f"binary-time must be {{'ms', 'days'}}, got {v!r}")
    days = v.get("days")
    return BinaryTime(_int_in(v["ms"]), None if days is None else _int_in(days))


def _seq_in(name: str) -> Callable[[object], tuple[Data, ...]]:
    def conv(v: object) -> tuple[Data, ...]:
        if not isinstance(v, list):
            raise TypeMismatch(f"{name} value must be a list, got {v!r}")
        out = []
        for i, item in enumerate(v):
            try:
                out.append(from_json(item))
            except GooseError as exc:
                raise exc.prefix_path(f"{name}[{i}]") from None
        return tuple(out)

    return conv


#: type name -> Data value -> JSON value
_TO: dict[str, Callable[[Any], Any]] = {
    "array": lambda d: [to_json(x) for x in d.items],
    "structure": lambda d: [to_json(x) for x in d.items],
    "boolean": lambda d: bool(d.value),
    "bit-string": lambda d: d.bits,
    "booleanArray": lambda d: d.bits,
    "integer": lambda d: d.value,
    "unsigned": lambda d: d.value,
    "bcd": lambda d: d.value,
    "floating-point": lambda d: _float_out(d.value),
    "real": lambda d: _float_out(d.value),
    "octet-string": lambda d: d.value.hex(),
    "visible-string": lambda d: d.value,
    "mMSString": lambda d: d.value,
    "binary-time": lambda d: {"ms": d.ms, "days": d.days},
    "objId": lambda d: d.dotted(),
    "utc-time": utc_to_json,
}

#: type name -> JSON value -> Data value
_FROM: dict[str, Callable[[Any], Data]] = {
    "array": lambda v: Array(_seq_in("array")(v)),
    "structure": lambda v: Structure(_seq_in("structure")(v)),
    "boolean": lambda v: Boolean(v) if isinstance(v, bool) else _fail("true or false", v),
    "bit-string": _bits_in(BitString),
    "booleanArray": _bits_in(BooleanArray),
    "integer": lambda v: Integer(_int_in(v)),
    "unsigned": lambda v: Unsigned(_int_in(v)),
    "bcd": lambda v: Bcd(_int_in(v)),
    "real": lambda v: Real(_float_in(v)),
    "octet-string": lambda v: OctetString(_hex_in(v)),
    "visible-string": lambda v: VisibleString(_str_in(v)),
    "mMSString": lambda v: MmsString(_str_in(v)),
    "binary-time": _binary_time_in,
    "objId": _objid_in,
    "utc-time": utc_from_json,
}


def _fail(what: str, v: object) -> Data:
    raise TypeMismatch(f"expected {what}, got {v!r}")


def to_json(data: Data) -> dict[str, Any]:
    """One Data value -> ``{"type", "value"}`` (+ ``"bits"`` for floating-point)."""
    name = getattr(type(data), "type_name", None)
    conv = _TO.get(name) if isinstance(name, str) else None
    if conv is None:
        raise TypeMismatch(f"{type(data).__name__} is not a Data value")
    out: dict[str, Any] = {"type": name, "value": conv(data)}
    if name == "floating-point":
        out["bits"] = data.bits  # type: ignore[union-attr]
    return out


def from_json(obj: object) -> Data:
    """``{"type", "value"}`` -> Data value; wrong shapes raise TypeMismatch / BadValue."""
    if not isinstance(obj, dict) or "type" not in obj or "value" not in obj:
        raise TypeMismatch(f"a Data element is {{'type', 'value'}}, got {obj!r}")
    name = obj["type"]
    if name == "floating-point":
        bits = obj.get("bits", 32)
        value = _float_in(obj["value"])
        if bits == 32:
            return FloatingPoint.f32(value)
        if bits == 64:
            return FloatingPoint.f64(value)
        raise BadValue(f"floating-point bits must be 32 or 64, got {bits!r}")
    conv = _FROM.get(name) if isinstance(name, str) else None
    if conv is None:
        known = sorted([*_FROM, "floating-point"])
        raise TypeMismatch(f"unknown Data type {name!r}; known: {known}")
    return conv(obj["value"])


def all_data_to_json(values: tuple[Data, ...] | list[Data]) -> list[dict[str, Any]]:
    return [to_json(v) for v in values]


def all_data_from_json(obj: object) -> tuple[Data, ...]:
    """A JSON list of Data elements (e.g. ``--values``) -> allData tuple; paths in errors."""
    return _seq_in("allData")(obj)


def frame_to_json(
    frame: GooseFrame, *, number: int | None = None, time: float | None = None
) -> dict[str, Any]:
    """A GooseFrame -> the `goosectl decode --json` object (keys in the documented order).

    ``nonCanonical`` (after allData) lists the unsigned header fields that arrived as
    negative BER INTEGERs and were read as unsigned; absent for a canonical frame."""
    from goosectl.protocols.goose.frame import mac_str  # import cycle

    vlan = frame.vlan
    obj: dict[str, Any] = {
        "frame": number,
        "time": time,
        "src": mac_str(frame.src),
        "dst": mac_str(frame.dst),
        "vlan": None if vlan is None else {"id": vlan.id, "priority": vlan.priority},
        "appid": frame.appid,
        "simulated": frame.simulated,
        "gocbRef": frame.gocb_ref,
        "timeAllowedtoLive": frame.time_allowed_to_live,
        "datSet": frame.dat_set,
        "goID": frame.go_id,
        "t": utc_to_json(frame.t),
        "stNum": frame.st_num,
        "sqNum": frame.sq_num,
        "simulation": frame.simulation,
        "confRev": frame.conf_rev,
        "ndsCom": frame.nds_com,
        "numDatSetEntries": frame.num_dat_set_entries,
        "allData": all_data_to_json(frame.all_data),
    }
    if frame.non_canonical:  # only then, so canonical frames print as they always did
        obj["nonCanonical"] = list(frame.non_canonical)
    return obj
