"""Hypothesis strategies for device-link messages, built from the message table itself.

Deriving them from `SPECS` means a row added to the table is covered by every property
test without anyone remembering to write a new strategy.
"""

from __future__ import annotations

from hypothesis import strategies as st

from goosectl.protocols.serial.messages import SPECS, Kind, Message, MessageSpec, MsgType

_INT_RANGE = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFFFFFF}
seqs = st.integers(min_value=0, max_value=0xFFFF)


def _field(code: str, allowed) -> st.SearchStrategy:
    if allowed is not None:
        return st.sampled_from(sorted(allowed.values(), key=int))
    return st.integers(min_value=0, max_value=_INT_RANGE[code])


# Bodies whose cross-field rule a random draw would rarely meet, built valid instead.
_u16 = st.integers(0, 0xFFFF)
_BODIES = {
    MsgType.SET_OUTPUT: st.tuples(_u16, _u16).map(lambda mv: (mv[0], mv[1] & mv[0])),
}


def message_of(spec: MessageSpec) -> st.SearchStrategy[Message]:
    bodies = _BODIES.get(spec.code)
    if bodies is None:
        bodies = st.tuples(*(_field(code, allowed) for _, code, allowed in spec.fields))
    for _, rule, _ in spec.constraints:  # cross-field rules of the table (SET_OUTPUT mask)
        bodies = bodies.filter(rule)
    return st.builds(lambda seq, vals: spec.cls(seq, *vals), seqs, bodies)


def messages(kinds: frozenset[Kind] | None = None) -> st.SearchStrategy[Message]:
    specs = [s for s in SPECS.values() if kinds is None or s.kind in kinds]
    return st.one_of(*(message_of(s) for s in specs))
