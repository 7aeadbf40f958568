"""How a subscriber judges one frame against its stream: rules as data, one small function.

`classify` compares a frame's header with what the stream knew before and returns a
`Verdict`: the frame's class (exactly one), its flags (any number), the stream quality the
frame implies, and whether its data set is delivered to the application. The stream's state
machine (tables/stream.yaml) routes on the quality; nothing here keeps state.

Sequence rules (IEC 61850-8-1; replay rule after IEC 62351-6's liveness idea): while a stream
is alive stNum must advance, or stay equal with sqNum advancing, both in serial arithmetic:
stNum and sqNum wrap from 2**32-1 to 1 (0 is only the first frame of a state), and a step
of less than half the circle forward is an advance. After TAL expiry a state is accepted
(`restart`), so a restarted publisher is not locked out, unless its `t` says it is old.

What a frame says about itself is not trusted further than this (without IEC 62351-6 an
attacker on the LAN can write any field):

- `t`: a new state or restart whose `t` is older than the stream's last by more than the
  configured skew, or a restart that repeats a state already seen, is `stale`: counted,
  never delivered, never remembered. Equal `t` is normal (coarse IED clocks).
- Two sequences: after stNum jumped, a frame that continues the sequence before the jump
  (its stNum or sqNum forward of the pre-jump state) proves two publishers of one stream.
  From that frame on the stream is in `conflict`: each frame is judged against the
  sequence it continues, flagged `conflict`, and delivered as that sequence says, so a
  single forged jump suppresses nothing; the input policies (controller/logic) decide what
  a conflicted value may do. The same holds for a second source MAC of a learned stream.
  The conflict ends when one of the two sequences has been silent past its TAL.
"""

from __future__ import annotations

from dataclasses import dataclass

from goosectl.protocols.goose import data_shape

U32 = 1 << 32
HALF = 1 << 31

#: class -> (deliver the data set to the application?, quality when no flag says otherwise)
CLASSES: dict[str, tuple[bool, str]] = {
    "first": (True, "valid"),
    "new_state": (True, "valid"),
    "missed_states": (True, "questionable"),
    "retransmission": (False, "valid"),
    "duplicate": (False, "valid"),
    "out_of_order": (False, "questionable"),
    "replay": (False, "questionable"),
    "restart": (True, "valid"),
    # a new state or restart that `t` (or an already seen (stNum, sqNum)) shows is old
    "stale": (False, "questionable"),
}

#: flag -> the quality it forces, strongest first (the first present flag wins)
FLAG_QUALITY: tuple[tuple[str, str], ...] = (
    ("confrev_mismatch", "config_mismatch"),
    ("shape_mismatch", "config_mismatch"),
    ("ndscom", "config_mismatch"),
    ("simulation", "simulated"),
    ("s_bit_mismatch", "questionable"),
    ("conflict", "questionable"),
)

#: qualities a verdict can imply (`lost`: a stale frame of a stream that is lost stays lost)
QUALITIES = ("valid", "questionable", "simulated", "config_mismatch", "lost")

#: classes that continue a sequence (the pre-jump one, or the other of a conflict)
CONTINUES = frozenset({"new_state", "missed_states", "retransmission", "duplicate"})
#: a frame of the pre-jump sequence arriving this soon after the jump may be one sent before
#: it and delayed (the other network of an A/B pair): not yet proof of a second publisher
REORDER_NS = 2_000_000

_BY_SQ_ORDER = {1: "retransmission", 0: "duplicate", -1: "out_of_order"}

#: classes after which the stream's TAL timer is re-armed: a frame an attacker could have
#: replayed (an old stNum, or an older sqNum) must not keep a dead stream alive
REARMS_TAL = frozenset(
    {"first", "new_state", "missed_states", "retransmission", "duplicate", "restart"}
)


@dataclass(frozen=True, slots=True)
class Verdict:
    cls: str
    flags: tuple[str, ...]
    quality: str
    deliver: bool
    #: a state change that moves the stream's remembered state (stNum, data, t)
    advances: bool
    #: (number of entries, member types) of a delivered data set, computed once here
    shape: tuple | None = None
    #: the frame continues the other sequence of a conflict (or opens it)
    alt: bool = False


def st_delta(prev: int, cur: int) -> tuple[int, bool]:
    """Signed distance from prev to cur on the stNum circle that skips 0, and whether the
    step crossed the wrap. Distances beyond half the circle count as going back."""
    if cur == prev:
        return 0, False
    wrapped = False
    d = (cur - prev) % U32
    if d < HALF:
        if cur < prev:  # crossed 2**32-1 -> 1; 0 is not on the circle
            d -= 1
            wrapped = True
        return d, wrapped
    return d - U32, False


def sq_order(prev: int, cur: int) -> tuple[int, bool]:
    """-1, 0, 1 for sqNum going back, repeating or advancing, in serial arithmetic on the
    circle that skips 0 (2**32-1 -> 1 advances and is a wrap), and whether it wrapped."""
    d, wrapped = st_delta(prev, cur)
    return (d > 0) - (d < 0), wrapped


def classify_sequence(
    first: bool, alive: bool, prev_st: int, prev_sq: int, st: int, sq: int
) -> tuple[str, bool]:
    """(class, wrapped) from sequence numbers alone."""
    if first:
        return "first", False
    if not alive:
        return "restart", False
    d, wrapped = st_delta(prev_st, st)
    if d == 0:
        order, wrapped = sq_order(prev_sq, sq)
        return _BY_SQ_ORDER[order], wrapped
    if d == 1:
        return "new_state", wrapped
    if d > 1:
        return "missed_states", wrapped
    return "replay", False


def shape_of(values: tuple) -> tuple:
    """(number of entries, member types) of a decoded data set."""
    return (len(values), data_shape(values))


def shape_fits(ctx, hdr, shape: tuple) -> bool:
    """The data set has the announced entry count, the configured member types, and the
    shape the stream's first delivered state had."""
    expect = ctx["expect_shape"]
    return not (
        hdr.num_dat_set_entries != shape[0]
        or (expect is not None and tuple(expect) != shape[1])
        or (ctx["shape"] is not None and ctx["shape"] != shape)
    )


def quality_of(cls: str, flags: tuple[str, ...]) -> str:
    for flag, quality in FLAG_QUALITY:
        if flag in flags:
            return quality
    return CLASSES[cls][1]


#: `t` quality bits (IEC 61850-8-1 TimeQuality): ClockFailure, ClockNotSynchronized. A
#: publisher whose clock says either (a relay restarted before its clock synchronised) is
#: not judged by how old its `t` is
UNTRUSTED_CLOCK = 0x40 | 0x20


def _stale(ctx, hdr, cls: str, alt: bool) -> bool:
    """A new state or restart that is old: its `t` older than its sequence's last `t` by more
    than the skew, or (a restart) a copy of the last state the stream had: the same stNum
    and data, an sqNum not after the last, and a `t` not newer."""
    ref = ctx["alt_t_ns" if alt else "t_ns"]
    t = hdr.t.to_ns()
    skew = ctx["skew_ns"]
    if ref and t < ref - skew and not hdr.t.quality & UNTRUSTED_CLOCK:
        return True
    if cls != "restart" or hdr.st_num != ctx["st"] or hdr.all_data != ctx["data"]:
        return False
    return sq_order(ctx["sq"], hdr.sq_num)[0] <= 0 and t <= ref + skew


def _sequence(ctx, hdr, now_ns: int, foreign: bool, flags: list[str]) -> tuple[str, bool, bool]:
    """(class, wrapped, alt): which sequence the frame continues, and how. Opens a conflict
    (flags `two_sequences` or `two_sources`, and `conflict`) at the first frame proving one."""
    first = ctx["st"] is None
    st, sq = hdr.st_num, hdr.sq_num
    if ctx["conflict"]:
        if ctx["alt_by_source"]:
            if foreign:
                cls, wrapped = classify_sequence(False, True, ctx["alt_st"], ctx["alt_sq"], st, sq)
                return cls, wrapped, True
            cls, wrapped = classify_sequence(first, ctx["alive"], ctx["st"], ctx["sq"], st, sq)
            return cls, wrapped, False
        cls, wrapped = classify_sequence(first, ctx["alive"], ctx["st"], ctx["sq"], st, sq)
        if cls in ("replay", "out_of_order"):
            other = classify_sequence(False, True, ctx["alt_st"], ctx["alt_sq"], st, sq)
            if other[0] in CONTINUES:
                return other[0], other[1], True
        return cls, wrapped, False
    if foreign and not first:
        flags += ("two_sources", "conflict")
        return "first", False, True
    cls, wrapped = classify_sequence(first, ctx["alive"], ctx["st"] or 0, ctx["sq"] or 0, st, sq)
    prev = ctx["prev_st"]
    if cls == "replay" and prev is not None and now_ns - ctx["jump_ns"] > REORDER_NS:
        other = classify_sequence(False, True, prev, ctx["prev_sq"], st, sq)
        if other[0] in CONTINUES and other[0] != "duplicate":
            flags += ("two_sequences", "conflict")
            return other[0], other[1], True
    return cls, wrapped, False


def judge(ctx, hdr, now_ns: int, values_of, foreign: bool = False) -> tuple[Verdict, tuple | None]:
    """The full verdict on `hdr` (a `GooseHeader`) for a stream whose memory is `ctx`.

    `values_of(hdr)` decodes allData; it is called only for a frame whose data set is
    delivered (a new state, a first frame, a restart), so retransmissions decode nothing.
    `foreign`: the frame comes from another source MAC than the one the stream learned.
    Returns the verdict and the decoded values (None when not decoded).
    """
    flags: list[str] = []
    first = ctx["st"] is None
    cls, wrapped, alt = _sequence(ctx, hdr, now_ns, foreign, flags)
    if ctx["conflict"]:
        # the other sequence silent past its TAL: the conflict is over, this one remains
        other_rx, other_tal = (
            (ctx["rx_ns"], ctx["tal_ns"]) if alt else (ctx["alt_rx_ns"], ctx["alt_tal_ns"])
        )
        flags.append("conflict_cleared" if now_ns > other_rx + other_tal else "conflict")
    if wrapped:
        flags.append("wrap")
    expect_rev = ctx["expect_conf_rev"]
    if expect_rev is None:
        expect_rev = ctx["conf_rev"]
    if expect_rev is not None and hdr.conf_rev != expect_rev:
        flags.append("confrev_mismatch")
    if hdr.nds_com:
        flags.append("ndscom")
    if hdr.simulation:
        flags.append("simulation")
    if bool(hdr.reserved1 & 0x8000) != hdr.simulation:
        flags.append("s_bit_mismatch")
    if hdr.non_canonical:  # unsigned fields sent as negative INTEGERs: read, and shown
        flags.append("non_canonical")
    limit = ctx["tal_limit_ns"]
    if limit and hdr.time_allowed_to_live * 1_000_000 > limit:
        flags.append("tal_bounded")
    if cls in ("new_state", "missed_states", "restart") and _stale(ctx, hdr, cls, alt):
        cls = "stale"
        flags.append("stale_time")
    deliver, _ = CLASSES[cls]
    values = shape = None
    if deliver:
        same_data = not first and hdr.all_data == ctx["data"]
        if cls in ("new_state", "missed_states") and same_data:
            flags.append("unchanged_data")
        # a delivered state always carries its values (state changes are rare; the
        # retransmissions that make up the traffic never get here)
        values = values_of(hdr)
        shape = shape_of(values)
        if not shape_fits(ctx, hdr, shape):
            flags.append("shape_mismatch")
    rx = ctx["alt_rx_ns"] if alt and ctx["conflict"] else ctx["rx_ns"]
    tal = ctx["alt_tal_ns"] if alt and ctx["conflict"] else ctx["tal_ns"]
    if rx is not None and now_ns > rx + tal:
        flags.append("tal_late")
    ftuple = tuple(flags)
    quality = "lost" if cls == "stale" and not ctx["alive"] else quality_of(cls, ftuple)
    return Verdict(cls, ftuple, quality, deliver, deliver, shape, alt), values
