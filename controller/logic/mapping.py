"""The maps of the controller config, applied: GOOSE members -> bay events, bay -> members.

Pure functions of what they are given; the edge detection ("turned true") compares the
delivered state with the previous state's allData carried by the verdict, so nothing here
remembers anything.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from controller.goose.effects import FrameClassified, StreamState
from controller.logic.config import ControllerConfig, InputMap, PublicationMap
from protocols.goose import (
    BitString,
    Boolean,
    Data,
    Dbpos,
    Quality,
    UtcTime,
    decode_all_data,
    to_json,
)


def member_value(values: tuple[Data, ...], index: int, path: list[int]) -> Any:
    """A member as a plain value: bool, a Dbpos name for 2-bit strings, else its JSON."""
    v: Any = values[index]
    for i in path:
        v = v.items[i] if hasattr(v, "items") else v.values[i]
    if type(v) is Boolean:
        return v.value
    if type(v) is BitString and len(v.bits) == 2:
        return Dbpos.from_bitstring(v).name.lower()
    return to_json(v)["value"]


class Inputs:
    """Which bay events a delivered GOOSE state or a stream's quality change means."""

    def __init__(self, config: ControllerConfig, stream_names: dict[str, tuple[str, str]]):
        # stream id -> (label, gocb_ref), filled as streams appear
        self.stream_names = stream_names
        self.rules: dict[str, list[tuple[InputMap, int]]] = defaultdict(list)
        self.interlocks: dict[str, list[str]] = defaultdict(list)
        for rule in config.inputs:
            self.rules[rule.stream].append((rule, config.member_index(rule)))
            if rule.interlock is not None:
                self.interlocks[rule.stream].append(rule.interlock)

    def _names(self, stream_id: str) -> tuple[str, ...]:
        return self.stream_names.get(stream_id, ())

    def frame_events(self, report: FrameClassified) -> list[tuple[str, Any]]:
        if not report.deliver or report.values is None:
            return []
        rules = [r for n in self._names(report.stream) for r in self.rules.get(n, ())]
        if not rules:
            return []
        prev = decode_all_data(report.previous) if report.previous else None
        out: list[tuple[str, Any]] = []
        for rule, index in rules:
            try:
                cur = member_value(report.values, index, rule.path)
                old = member_value(prev, index, rule.path) if prev is not None else None
            except (IndexError, AttributeError):
                out.append(("input_error", f"{rule.stream}[{index}]{rule.path}: no such member"))
                continue
            if rule.event == "interlock":
                state = "permit" if cur in rule.permit_when else "blocked"
                out.append(("interlock", {rule.interlock: state}))
            elif _edge(rule.when, old, cur):
                out.append((rule.event, {"stream": rule.stream, "value": cur}))
        return out

    def stream_events(self, report: StreamState) -> list[tuple[str, Any]]:
        if report.side not in ("-",):
            return []  # one side of an A/B pair: the stream itself is still supervised
        names = self._names(report.stream)
        if not names:
            return []
        interlocks = [i for n in names for i in self.interlocks.get(n, ())]
        payload = {"stream": names[0], "interlocks": interlocks}
        if report.state == "lost":
            return [("stream_lost", payload)]
        if report.state == "valid":
            return [("stream_valid", payload)]
        return []


def _edge(when: str, old: Any, cur: Any) -> bool:
    if when == "rising":
        return cur is True and old is not True
    if when == "falling":
        return cur is False and old is True
    return cur != old


def publication_values(
    pub: PublicationMap, bay_state: str, ctx: Any, utc_ns: int
) -> tuple[Data, ...]:
    """The data set to publish for `pub`, from the bay's state and context now."""
    position = ctx["position"]
    link_ok = ctx["link_state"] in ("up", "degraded")
    out: list[Data] = []
    for src in pub.members:
        if src == "position":
            out.append(Dbpos[(position or "intermediate").upper()].to_bitstring())
        elif src == "quality":
            if position is None or position == "bad" or not link_ok:
                out.append(Quality(validity="invalid").to_bitstring())
            else:
                out.append(Quality().to_bitstring())
        elif src == "t":
            out.append(UtcTime.from_ns(ctx["position_t_ns"] or utc_ns))
        elif src == "now":
            out.append(UtcTime.from_ns(utc_ns))
        elif src == "trip":
            out.append(Boolean(bay_state in ("tripping", "breaker_failure", "open")))
        elif src == "bf_trip":
            out.append(Boolean(bay_state == "breaker_failure"))
        else:
            out.append(Boolean(src == "true"))
    return tuple(out)
