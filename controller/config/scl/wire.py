"""The wire against the SCL (or a config's subscriptions): which streams match.

Pure: frames with their capture/receive times in, one verdict per stream out. Every
expected control block ends as `matched`, `mismatched` (each differing field named),
or `missing` (never seen); every stream seen that nothing expects is `unexpected`.
Streams are matched to control blocks by gocbRef; APPID, dst MAC, VLAN, confRev, datSet,
goID, member count and types are then compared, and retransmission intervals with the
SCL's MinTime (the longest first repetition after a change) and MaxTime (the longest
gap between frames of one state). A field the expectation does not state is not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from goosectl.controller.config.goose import GooseConfig
from goosectl.protocols.ethernet.mac import format_mac
from goosectl.protocols.goose import GooseError, Vlan, data_shape, parse_header
from goosectl.protocols.scl import Scl

#: Slack on MinTime/MaxTime: timestamps jitter and hosts are not hard real time.
INTERVAL_SLACK = (0.10, 2.0)  # 10 % and 2 ms


@dataclass(frozen=True, slots=True)
class Expected:
    """One control block the wire should carry, with what is known about it."""

    gocb_ref: str
    appid: int | None = None
    dst: bytes | None = None
    vlan_ids: frozenset[int] | None = None  # the VLANs it may come on (A/B: two)
    vlan_priority: int | None = None
    conf_rev: int | None = None
    dat_set: str | None = None
    go_id: str | None = None
    members: tuple | None = None
    min_time_ms: float | None = None
    max_time_ms: float | None = None
    on_wire: bool = True  # False: no address, so its absence is not a finding


def expected_from_scl(scl: Scl) -> list[Expected]:
    out = []
    for g in scl.gocbs.values():
        a = g.address
        out.append(
            Expected(
                gocb_ref=g.gocb_ref,
                appid=a.appid if a else None,
                dst=a.mac if a else None,
                vlan_ids=frozenset(x.vlan_id for x in g.addresses if x.vlan_id is not None) or None,
                vlan_priority=a.vlan_priority if a else None,
                conf_rev=g.conf_rev,
                dat_set=g.dat_set_ref,
                go_id=g.go_id,
                members=g.shape,
                min_time_ms=a.min_time_ms if a else None,
                max_time_ms=a.max_time_ms if a else None,
                on_wire=a is not None and a.appid is not None and a.mac is not None,
            )
        )
    return out


def expected_from_config(cfg: GooseConfig) -> list[Expected]:
    return [
        Expected(
            gocb_ref=s.gocb_ref,
            appid=s.appid,
            dst=s.dst,
            vlan_ids=_config_vlans(s),
            conf_rev=s.conf_rev,
            dat_set=s.dat_set,
            go_id=s.go_id,
            members=s.members,
            min_time_ms=s.min_time_ms,
            max_time_ms=s.max_time_ms,
        )
        for s in cfg.subscriptions
    ]


def _config_vlans(s) -> frozenset[int] | None:
    ids = {v for v in (s.vlan, *((s.ab.vlan_a, s.ab.vlan_b) if s.ab else ())) if v is not None}
    return frozenset(ids) or None


@dataclass(slots=True)
class Seen:
    """What one stream (gocbRef, APPID, dst) showed on the wire."""

    gocb_ref: str
    appid: int
    dst: bytes
    frames: int = 0
    values: dict[str, list] = field(default_factory=dict)
    last: tuple[int, int, int] | None = None  # (stNum, sqNum, ts_ns) of the last new copy
    changed: bool = False  # the last frame was a new state (sqNum 0 after another stNum)
    first_repeat_ms: float = 0.0  # longest first repetition after a state change
    gap_ms: float = 0.0  # longest gap between two frames of one state
    pairs: set[tuple[int, int]] = field(default_factory=set)
    last_all_data: bytes | None = None

    def note(self, name: str, value: Any) -> None:
        seen = self.values.setdefault(name, [])
        if value not in seen:
            seen.append(value)


@dataclass(frozen=True, slots=True)
class Difference:
    field: str
    expected: Any
    seen: list

    def text(self) -> str:
        if self.field == "memberTypes":
            return "member types: " + " | ".join(_types_diff(self.expected, t) for t in self.seen)
        seen, expected = _fmt(self.field, self.seen), _fmt(self.field, [self.expected])
        return f"{self.field} {seen} (expected {expected})"


@dataclass(frozen=True, slots=True)
class Verdict:
    status: str  # matched | mismatched | missing | unexpected
    gocb_ref: str
    appid: int | None
    dst: bytes | None
    frames: int
    differences: tuple[Difference, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "event": "wire_check",
            "status": self.status,
            "gocbRef": self.gocb_ref,
            "appid": self.appid,
            "dst": format_mac(self.dst) if self.dst is not None else None,
            "frames": self.frames,
            "differences": [
                {"field": d.field, "expected": _plain(d.expected), "seen": _plain(d.seen)}
                for d in self.differences
            ],
        }


def _plain(v: Any) -> Any:
    """JSON form: MACs as text, member types as `[structure, [...]]` lists."""
    if isinstance(v, bytes):
        return format_mac(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _fmt(name: str, values: list) -> str:
    def one(v: Any) -> str:
        if name in ("vlanId", "vlanPriority") and v is None:
            return "untagged"  # a frame without an 802.1Q tag, not a missing value
        if v is None:
            return "absent"  # an optional field (goID) the frame does not carry
        if isinstance(v, (list, tuple, frozenset, set)):  # the values the SCL allows
            return " or ".join(one(x) for x in sorted(v))
        if name == "appid" and isinstance(v, int):
            return f"0x{v:04x}"
        if isinstance(v, bytes):
            return format_mac(v)
        if name in ("minTime", "maxTime"):
            return f"{v:g} ms"
        return str(v)

    return ", ".join(one(v) for v in values)


class WireCheck:
    """Feed every frame with `frame()`; `verdicts()` at the end."""

    def __init__(self, expected: list[Expected]) -> None:
        self.expected = {e.gocb_ref: e for e in expected}
        self.seen: dict[tuple[str, int, bytes], Seen] = {}

    def frame(self, ts_ns: int, buf: bytes, vlan: Vlan | None = None) -> None:
        try:
            h = parse_header(buf, vlan=vlan)
        except GooseError:
            return  # malformed frames are the subscriber's report, not the SCL's
        key = (h.gocb_ref, h.appid, h.dst)
        s = self.seen.get(key)
        if s is None:
            s = self.seen[key] = Seen(h.gocb_ref, h.appid, h.dst)
        s.frames += 1
        s.note("vlanId", h.vlan.id if h.vlan is not None else None)
        s.note("vlanPriority", h.vlan.priority if h.vlan is not None else None)
        s.note("confRev", h.conf_rev)
        s.note("datSet", h.dat_set)
        s.note("goID", h.go_id)
        s.note("members", h.num_dat_set_entries)
        if h.all_data != s.last_all_data:
            s.last_all_data = h.all_data
            try:
                s.note("memberTypes", data_shape(h.decode_all_data()))
            except GooseError:
                s.note("memberTypes", "undecodable")
        pair = (h.st_num, h.sq_num)
        if pair in s.pairs:
            return  # the other network's copy (A/B): same frame, not a new interval
        if len(s.pairs) > 4096:
            s.pairs.clear()
        s.pairs.add(pair)
        if s.last is not None:
            st, sq, t = s.last
            dt_ms = (ts_ns - t) / 1e6
            if h.st_num == st and h.sq_num > sq:
                s.gap_ms = max(s.gap_ms, dt_ms)
                if s.changed:
                    s.first_repeat_ms = max(s.first_repeat_ms, dt_ms)
            s.changed = h.st_num != st
        s.last = (h.st_num, h.sq_num, ts_ns)

    def verdicts(self) -> list[Verdict]:
        out: list[Verdict] = []
        matched_refs = set()
        for s in self.seen.values():
            exp = self.expected.get(s.gocb_ref)
            if exp is None:
                out.append(Verdict("unexpected", s.gocb_ref, s.appid, s.dst, s.frames))
                continue
            matched_refs.add(s.gocb_ref)
            diffs = tuple(_compare(exp, s))
            out.append(
                Verdict(
                    "mismatched" if diffs else "matched",
                    s.gocb_ref,
                    s.appid,
                    s.dst,
                    s.frames,
                    diffs,
                )
            )
        for ref, exp in self.expected.items():
            if ref not in matched_refs and exp.on_wire:
                out.append(Verdict("missing", ref, exp.appid, exp.dst, 0))
        order = {"mismatched": 0, "missing": 1, "unexpected": 2, "matched": 3}
        out.sort(key=lambda v: (order[v.status], v.gocb_ref, v.appid or 0))
        return out


def _compare(e: Expected, s: Seen) -> list[Difference]:
    diffs = []

    def check(name: str, expected: Any, seen: list) -> None:
        if expected is not None and any(v != expected for v in seen):
            diffs.append(Difference(name, expected, seen))

    check("appid", e.appid, [s.appid])
    check("dst", e.dst, [s.dst])
    if e.vlan_ids is not None:
        # VLAN id 0 is a priority tag: an untagged frame carries the same (no VLAN)
        seen = [0 if v is None and 0 in e.vlan_ids else v for v in s.values["vlanId"]]
        if any(v not in e.vlan_ids for v in seen):
            want = sorted(e.vlan_ids)
            diffs.append(Difference("vlanId", want[0] if len(want) == 1 else want, seen))
    tagged = [v for v in s.values["vlanPriority"] if v is not None]
    check("vlanPriority", e.vlan_priority, tagged)
    check("confRev", e.conf_rev, s.values["confRev"])
    check("datSet", e.dat_set, s.values["datSet"])
    check("goID", e.go_id, s.values["goID"])
    if e.members is not None:
        check("members", len(e.members), s.values["members"])
        wrong = [t for t in s.values.get("memberTypes", []) if t != e.members]
        if wrong:
            diffs.append(Difference("memberTypes", e.members, wrong))
    rel, absolute = INTERVAL_SLACK
    if e.min_time_ms is not None and s.first_repeat_ms > e.min_time_ms * (1 + rel) + absolute:
        diffs.append(Difference("minTime", e.min_time_ms, [round(s.first_repeat_ms, 3)]))
    if e.max_time_ms is not None and s.gap_ms > e.max_time_ms * (1 + rel) + absolute:
        diffs.append(Difference("maxTime", e.max_time_ms, [round(s.gap_ms, 3)]))
    return diffs


def _type_text(shape: object) -> str:
    if isinstance(shape, tuple):
        return f"{shape[0]}{{{', '.join(_type_text(x) for x in shape[1])}}}"
    return str(shape)


def _types_text(shape: tuple) -> str:
    return "[" + ", ".join(_type_text(x) for x in shape) + "]"


def _types_diff(expected: tuple, seen: object) -> str:
    if not isinstance(seen, tuple):
        return str(seen)
    if len(seen) != len(expected):
        return f"{_types_text(seen)}, not {_types_text(expected)}"
    return "; ".join(
        f"member {i} is {_type_text(b)}, not {_type_text(a)}"
        for i, (a, b) in enumerate(zip(expected, seen, strict=True))
        if a != b
    )


def table(verdicts: list[Verdict], title: str) -> list[str]:
    """The end-of-run table, one row per stream."""
    counts = {
        k: sum(1 for v in verdicts if v.status == k)
        for k in ("matched", "mismatched", "missing", "unexpected")
    }
    head = ", ".join(f"{n} {k}" for k, n in counts.items())
    out = [f"{title}: {head}"]
    for v in verdicts:
        appid = f"0x{v.appid:04x}" if v.appid is not None else "-"
        dst = format_mac(v.dst) if v.dst is not None else "-"
        out.append(f"  {v.status:<10} {v.gocb_ref:<44} {appid:<7} {dst:<17} {v.frames:>6}")
        for d in v.differences:
            out.append(f"      {d.text()}")
    return out
