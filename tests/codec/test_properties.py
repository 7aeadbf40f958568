"""Hypothesis properties: decode(encode(m)) == m for generated messages, encoding is a
fixed point, the header parse agrees with the full decode, JSON round-trips, and random
bytes never raise outside the GooseError family."""

from __future__ import annotations

import contextlib
import math
import random
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goosectl.protocols.goose import (
    Array,
    Bcd,
    BinaryTime,
    BitString,
    Boolean,
    BooleanArray,
    FloatingPoint,
    GooseError,
    GooseFrame,
    Integer,
    MmsString,
    ObjId,
    OctetString,
    Real,
    Structure,
    Unsigned,
    UtcTime,
    VisibleString,
    Vlan,
    all_data_from_json,
    all_data_to_json,
    decode_all_data,
    decode_frame,
    encode_all_data,
    encode_frame,
    parse_header,
    utc_octets,
)
from tests.codec.corpus import corpus_frames
from tests.fuzz_codec import Stats, check_one, mutate, seeds
from tests.support.examples import examples

u32 = st.integers(0, 2**32 - 1)
visible = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=70)


def _bits(cls):
    return st.binary(max_size=4).flatmap(
        lambda d: st.integers(0, 7 if d else 0).map(lambda u: cls(d, u))
    )


utc = st.builds(UtcTime, u32, st.integers(0, 2**24 - 1), st.integers(0, 255))
leaves = st.one_of(
    st.booleans().map(Boolean),
    st.integers(1, 255).map(lambda o: Boolean(True, o)),
    _bits(BitString),
    _bits(BooleanArray),
    st.integers(-(2**63), 2**63 - 1).map(Integer),
    st.integers(0, 2**63 - 1).map(Unsigned),
    st.integers(0, 2**63 - 1).map(Bcd),
    st.binary(min_size=4, max_size=4).map(FloatingPoint),
    st.binary(min_size=8, max_size=8).map(FloatingPoint),
    st.floats(allow_nan=True, allow_infinity=True).map(Real),
    st.binary(max_size=20).map(OctetString),
    visible.map(VisibleString),
    st.text(max_size=20)
    .filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
    .map(MmsString),
    st.builds(BinaryTime, u32, st.none() | st.integers(0, 0xFFFF)),
    st.tuples(
        st.integers(0, 2), st.integers(0, 39), st.lists(st.integers(0, 2**40), max_size=4)
    ).map(lambda t: ObjId((t[0], t[1], *t[2]))),
    utc,
)
data = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5).map(lambda xs: Structure(tuple(xs))),
        st.lists(inner, max_size=5).map(lambda xs: Array(tuple(xs))),
    ),
    max_leaves=25,
)
frames = st.builds(
    GooseFrame,
    gocb_ref=visible,
    dat_set=visible,
    all_data=st.lists(data, max_size=12).map(tuple),
    time_allowed_to_live=u32,
    go_id=st.none() | visible,
    t=utc,
    st_num=u32,
    sq_num=u32,
    simulation=st.booleans(),
    conf_rev=u32,
    nds_com=st.booleans(),
    dst=st.binary(min_size=6, max_size=6),
    src=st.binary(min_size=6, max_size=6),
    vlan=st.none() | st.builds(Vlan, st.integers(0, 4095), st.integers(0, 7), st.integers(0, 1)),
    appid=st.integers(0, 0xFFFF),
    reserved1=st.integers(0, 0xFFFF),
    reserved2=st.integers(0, 0xFFFF),
    security=st.binary(max_size=8),
    trailer=st.binary(max_size=8),
)


@settings(max_examples=examples(300), deadline=None)
@given(frames)
def test_decode_encode_round_trip(frame: GooseFrame) -> None:
    raw = encode_frame(frame)
    back = decode_frame(raw)
    assert back == frame
    assert encode_frame(back) == raw
    head = parse_header(raw)
    assert head.decode_all_data() == frame.all_data
    assert (head.st_num, head.sq_num, head.gocb_ref, head.t) == (
        frame.st_num,
        frame.sq_num,
        frame.gocb_ref,
        frame.t,
    )


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(data, max_size=10).map(tuple))
def test_all_data_round_trip_and_json(values: tuple) -> None:
    raw = encode_all_data(values)
    assert decode_all_data(raw) == values
    via_json = all_data_from_json(all_data_to_json(values))
    # JSON keeps values, not wire details: padding bits of bit strings and NaN payloads
    assert encode_all_data(via_json) == encode_all_data(_canonical(values))


def _canonical(values: tuple) -> tuple:
    out = []
    for v in values:
        if type(v) in (Structure, Array):
            out.append(type(v)(_canonical(v.items)))
        elif type(v) in (BitString, BooleanArray):
            out.append(type(v)(*_bits_canon(v)))
        elif type(v) is FloatingPoint:
            fmt = ">f" if len(v.raw) == 4 else ">d"
            out.append(
                FloatingPoint(struct.pack(fmt, math.nan if math.isnan(v.value) else v.value))
            )
        elif type(v) is Boolean:
            out.append(Boolean(v.value))
        else:
            out.append(v)
    return tuple(out)


def _bits_canon(v: BitString) -> tuple[bytes, int]:
    b = BitString.from_bits(v.bits)
    return b.data, b.unused


@given(st.integers(min_value=-(10**9), max_value=(1 << 32) * 10**9 + 10**9))
def test_the_reflexs_time_octets_are_the_utc_times(ns: int) -> None:
    """`utc_octets` (the trip reflex's ack) writes what `UtcTime.from_ns` encodes, the
    fraction's rounding and its carry into the seconds included, and refuses what it
    refuses."""
    try:
        want: bytes | None = UtcTime.from_ns(ns).to_bytes()[:7]
    except GooseError:
        want = None
    if want is None:
        with contextlib.suppress(GooseError):
            utc_octets(ns)
            raise AssertionError(f"utc_octets({ns}) took a time UtcTime refuses")
    else:
        assert utc_octets(ns) == want
    for edge in (0, 999_999_999, 10**9 - 29, ((1 << 32) - 1) * 10**9):
        assert utc_octets(edge) == UtcTime.from_ns(edge).to_bytes()[:7]


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_only_raise_goose_errors(raw: bytes) -> None:
    for buf in (raw, bytes.fromhex("010ccd01000000112233445588b8") + raw):
        with contextlib.suppress(GooseError):
            decode_frame(buf)
        with contextlib.suppress(GooseError):
            decode_all_data(raw)


def test_short_mutation_fuzz_from_real_captures() -> None:
    """The long fuzzer's engine for a few seconds: nothing escapes the error family."""
    pool = seeds() + [encode_frame(f) for f in corpus_frames()]
    rng = random.Random(7)
    stats = Stats()
    for _ in range(3000):
        check_one(mutate(rng, pool), stats)
    assert stats.escaped == []
    assert stats.inputs == 3000 and stats.decoded > 0
    assert {"truncated", "bad-length", "bad-tag", "bad-value"} <= set(stats.outcomes)
