"""The maps of the controller config, applied: GOOSE members -> bay inputs -> bay events,
and bay -> published members.

An input reads its member and, when the mapping names one, the member holding its quality
(`quality: Tr.q`). Quality rules (IEC 61850-7-3 q, as data below): validity invalid never
acts, questionable acts only where the input says `accept_questionable: true`, the test bit
acts only while the controller's own mode is test. The input machines (tables/input.yaml)
hold what acts: the value, or the declared fail-safe value; the edges a bay event needs
("turned true") are taken between those, so a value that comes back after lost or refused
data counts from the fail-safe value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from goosectl.controller.config.bay import ControllerConfig, InputMap, PublicationMap
from goosectl.controller.goose.effects import StreamState
from goosectl.controller.logic.effects import InputChanged
from goosectl.protocols.goose import (
    BitString,
    Boolean,
    Data,
    Dbpos,
    Quality,
    UtcTime,
    to_json,
)

#: Quality validity (its first two bits: good, invalid, reserved, questionable) -> why the
#: value may not act (None: it may). Questionable is waived per input.
VALIDITY_REFUSAL: tuple[str | None, ...] = (None, "q invalid", "q invalid", "q questionable")
#: Quality's test bit (bit 11): octet 1, mask 0x10
TEST_OCTET, TEST_MASK = 1, 0x10
QUALITY_BITS = 13
#: an interlock's state before the first valid value of its input
NO_DATA = "no data"
#: input event -> does it take values from a stream in conflict (two sequences or sources
#: on it: a forgery, or two publishers)? A protection trip does, from either sequence: a
#: forged frame must not suppress a genuine trip (the alarm says a trip may be forged);
#: a close request and an interlock go to their fail-safe value (blocked): a permissive
#: is never taken from a stream that cannot be told from a forgery.
CONFLICT_DELIVERS: dict[str, bool] = {
    "protection_trip": True,
    "close_request": False,
    "interlock": False,
}
CONFLICT = "conflict"


def member_value(values: tuple[Data, ...], index: int, path: Sequence[int]) -> Any:
    """A member as a plain value: bool, a Dbpos name for 2-bit strings, else its JSON."""
    v: Any = _member(values, index, path)
    if type(v) is Boolean:
        return v.value
    if type(v) is BitString and len(v.bits) == 2:
        return Dbpos.from_bitstring(v).name.lower()
    return to_json(v)["value"]


def _member(values: tuple[Data, ...], index: int, path: Sequence[int]) -> Any:
    v: Any = values[index]
    for i in path:
        v = v.items[i] if hasattr(v, "items") else v.values[i]
    return v


def quality_refusal(q: Any, accept_questionable: bool, test_mode: bool) -> str | None:
    """Why a value with quality `q` (a 13-bit BitString) may not act, or None."""
    if type(q) is not BitString or len(q) < QUALITY_BITS:
        return "q unreadable"
    data = q.data
    why = VALIDITY_REFUSAL[data[0] >> 6]
    if why is not None and not (accept_questionable and why == "q questionable"):
        return why
    if data[TEST_OCTET] & TEST_MASK and not test_mode:
        return "q test"
    return None


class Rule:
    """One input, compiled from its `InputMap` for the frame path."""

    __slots__ = (
        "accept_questionable",
        "event",
        "failsafe",
        "index",
        "interlock",
        "machine_id",
        "map",
        "name",
        "path",
        "permit_when",
        "q_index",
        "q_path",
        "stream",
        "when",
    )

    def __init__(self, config: ControllerConfig, i: int) -> None:
        inp: InputMap = config.inputs[i]
        self.map = inp
        self.name = config.input_name(i)
        self.machine_id = f"input:{self.name}"
        self.stream = inp.stream
        self.event = inp.event
        self.when = inp.when
        self.index = config.member_index(inp)
        self.path = tuple(inp.path)
        self.q_index = config.member_index(inp, inp.quality) if inp.quality is not None else None
        self.q_path = tuple(inp.quality_path)
        self.accept_questionable = inp.accept_questionable
        self.failsafe = inp.failsafe_value
        self.interlock = inp.interlock
        self.permit_when = tuple(inp.permit_when)

    def read(self, values: tuple[Data, ...], test_mode: bool) -> tuple[bool, Any]:
        """(True, value) if the member may act, else (False, why not)."""
        try:
            if self.q_index is not None:
                q = (
                    values[self.q_index]
                    if not self.q_path
                    else _member(values, self.q_index, self.q_path)
                )
                why = quality_refusal(q, self.accept_questionable, test_mode)
                if why is not None:
                    return False, why
            return True, member_value(values, self.index, self.path)
        except (IndexError, AttributeError, TypeError):
            return False, "no such member"


class Inputs:
    """The inputs of the bay, by stream, and the bay events their changes mean."""

    def __init__(self, config: ControllerConfig, names_of: Callable[[str], tuple[str, ...]]):
        """`names_of(stream id)` gives the names a stream answers to (label, gocbRef)."""
        self.names_of = names_of
        self.all = [Rule(config, i) for i in range(len(config.inputs))]
        self.by_name = {r.name: r for r in self.all}
        self.interlocks: dict[str, list[str]] = {}
        for r in self.all:
            if r.interlock is not None:
                self.interlocks.setdefault(r.stream, []).append(r.interlock)
        self._by_stream: dict[str, list[Rule]] = {}

    def rules_for(self, stream_id: str) -> list[Rule]:
        """The inputs a stream feeds (its simulated twin feeds the same ones)."""
        rules = self._by_stream.get(stream_id)
        if rules is None:
            names = self.names_of(stream_id)
            rules = [r for r in self.all if r.stream in names]
            if names:
                self._by_stream[stream_id] = rules
        return rules

    def bay_events(self, change: InputChanged) -> list[tuple[str, Any]]:
        """What an input becoming valid or invalid means for the bay."""
        rule = self.by_name[change.input]
        if rule.event == "interlock" and not change.valid:
            return [("interlock", {rule.interlock: f"invalid ({change.reason})"})]
        return self.edge_events(rule, change.previous, change.value)

    @staticmethod
    def edge_events(rule: Rule, old: Any, cur: Any) -> list[tuple[str, Any]]:
        """What a valid input's value means for the bay: an interlock's state, or the edge
        of a trip or close request (between the values that acted: a fail-safe one too)."""
        if rule.event == "interlock":
            return [
                ("interlock", {rule.interlock: "permit" if cur in rule.permit_when else "blocked"})
            ]
        if _edge(rule.when, old, cur):
            return [(rule.event, {"stream": rule.stream, "value": cur})]
        return []

    def stream_events(self, report: StreamState, names: tuple[str, ...]) -> list[tuple[str, Any]]:
        """A subscribed stream's loss and recovery, for the bay's alarms."""
        if report.side != "-" or not names:
            return []  # one side of an A/B pair, or a simulated stream: not the subscription
        interlocks = [i for n in names for i in self.interlocks.get(n, ())]
        payload = {"stream": names[0], "interlocks": interlocks}
        if report.state == "lost":
            return [("stream_lost", payload)]
        if report.state == "valid":
            return [("stream_valid", payload)]
        return []


def reason_of(err: str) -> str:
    """An LGOS ErrSt code as an input's reason, as the timeline shows it (`invalid (lost)`,
    `invalid (no data)`); `gate.ERR_TEXT` has the sentence."""
    return err.replace("_", " ")


def _edge(when: str, old: Any, cur: Any) -> bool:
    if when == "rising":
        return cur is True and old is not True
    if when == "falling":
        return cur is False and old is True
    return cur != old


def publication_values(
    pub: PublicationMap, bay_state: str, ctx: Any, utc_ns: int, test: bool = False
) -> tuple[Data, ...]:
    """The data set to publish for `pub`, from the bay's state and context now; `test`
    (the controller's mode is test or test-blocked) sets the quality's test bit."""
    position = ctx["position"]
    link_ok = ctx["link_state"] in ("up", "degraded")
    out: list[Data] = []
    for src in pub.members:
        if src == "position":
            out.append(Dbpos[(position or "intermediate").upper()].to_bitstring())
        elif src == "quality":
            bad = position is None or position == "bad" or not link_ok
            out.append(Quality(validity="invalid" if bad else "good", test=test).to_bitstring())
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
