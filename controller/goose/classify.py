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
  configured skew, or a restart that repeats a state already seen or carries an earlier
  one, is `stale`: counted, never delivered, never remembered. Equal `t` is normal (coarse
  IED clocks). A restarted controller judges a stream's first frame the same way against
  the last state its journal recalls (`ref_*`): a frame recorded before the restart and
  sent again is `stale` too (flag `stale_recalled`).
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
    "missed_states": (True, "suspect"),
    "retransmission": (False, "valid"),
    "duplicate": (False, "valid"),
    "out_of_order": (False, "suspect"),
    "replay": (False, "suspect"),
    "restart": (True, "valid"),
    # a new state or restart that `t` (or an already seen (stNum, sqNum)) shows is old
    "stale": (False, "suspect"),
}

#: flag -> the quality it forces, strongest first (the first present flag wins)
FLAG_QUALITY: tuple[tuple[str, str], ...] = (
    ("confrev_mismatch", "config_mismatch"),
    ("shape_mismatch", "config_mismatch"),
    ("ndscom", "config_mismatch"),
    ("simulation", "simulated"),
    ("s_bit_mismatch", "suspect"),
    ("conflict", "suspect"),
)

#: qualities a verdict can imply (`lost`: a stale frame of a stream that is lost stays lost)
QUALITIES = ("valid", "suspect", "simulated", "config_mismatch", "lost")

#: classes that continue a sequence (the pre-jump one, or the other of a conflict)
CONTINUES = frozenset({"new_state", "missed_states", "retransmission", "duplicate"})
#: a frame of the pre-jump sequence arriving this soon after the jump may be one sent before
#: it and delayed (the other network of an A/B pair): not yet proof of a second publisher
REORDER_NS = 2_000_000

#: classes whose frame carries a state the stream did not have: each is checked for being old
STATE_CHANGES = frozenset({"first", "new_state", "missed_states", "restart"})

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
    """A state change that is old. A new state: its `t` older than its sequence's last `t`
    by more than the skew. A restart (the stream's TAL ran out): older than the state the
    stream last had (`_old`). The first frame of a stream the controller knew before it
    restarted: older than what its journal recalled of that stream (`ref_*`,
    `SubscriberBank.recall`), so an authentic frame recorded before the restart and sent
    again now is not taken for the stream's current state."""
    if cls == "first":  # (a second source's first frame is judged as its own sequence)
        ref_st = ctx["ref_st"]
        return (
            ref_st is not None
            and ctx["st"] is None
            and _old(ref_st, ctx["ref_sq"], ctx["ref_t_ns"], ctx["ref_data"], hdr, ctx["skew_ns"])
        )
    if cls == "restart":
        return _old(ctx["st"], ctx["sq"], ctx["t_ns"], ctx["data"], hdr, ctx["skew_ns"])
    ref = ctx["alt_t_ns" if alt else "t_ns"]
    return bool(ref) and hdr.t.to_ns() < ref - ctx["skew_ns"] and _trusted(hdr)


def _trusted(hdr) -> bool:
    return not hdr.t.quality & UNTRUSTED_CLOCK


def _old(ref_st: int, ref_sq: int, ref_t: int, ref_data, hdr, skew: int) -> bool:
    """A frame judged against a state the stream had (stNum, sqNum, `t`, data), when
    nothing of the sequence in between is known (after TAL expiry, after a restart):

    - its `t` older than the state's by more than the skew (a trustworthy clock);
    - a copy of that state (the same stNum and data) whose sqNum is not after the state's
      and whose `t` is not newer: the state itself, sent again;
    - a stNum before the state's (or the same stNum with other data) whose `t` is not
      after the state's (a trustworthy clock): an earlier state. A publisher that restarted
      begins again at a low stNum, and with a `t` after its last state, since its restart
      took time: the skew that coarse clocks need between two states sent a few ms apart
      is not needed here, and granting it would let a state of the last skew's width
      through (a trip that lasted less than it, replayed after its clearing). A publisher
      that sends no `t` at all (0) is not judged by it."""
    t = hdr.t.to_ns()
    trusted = _trusted(hdr)
    if ref_t and t < ref_t - skew and trusted:
        return True
    d = st_delta(ref_st, hdr.st_num)[0]
    if d == 0 and hdr.all_data == ref_data:
        return sq_order(ref_sq, hdr.sq_num)[0] <= 0 and t <= ref_t + skew
    return d <= 0 and trusted and bool(ref_t) and t <= ref_t


def is_jump(cls: str, hdr, ctx) -> bool:
    """A state change its own publisher would not send next: stNum skipping states, or a
    new stNum with the data and `t` of the stream's last state. A stNum-mutated copy of
    the genuine frame is always one of these (it carries that frame's data and `t`); a
    genuine publisher sends one only after frames were lost."""
    if cls == "missed_states":
        return True
    return cls == "new_state" and hdr.all_data == ctx["data"] and hdr.t.to_ns() <= ctx["t_ns"]


def _next_of(cls: str, hdr, ctx) -> bool:
    """The frame is what the sequence's own publisher sends next: a retransmission, or a
    new state that is not a jump (a mutated copy must never pass for it)."""
    return cls == "retransmission" or (cls == "new_state" and not is_jump(cls, hdr, ctx))


def _sequence(ctx, hdr, now_ns: int, foreign: bool, flags: list[str]) -> tuple[str, bool, bool]:
    """(class, wrapped, alt): which sequence the frame continues, and how. Opens a conflict
    (flags `two_sequences` or `two_sources`, and `conflict`) at the first frame proving one.

    Two sequences (a stNum jump, then the sequence before it continued): the one that
    continues the state before the jump stays the stream's own (alt False), the jump is
    the other. While in conflict the stream's own sequence is never moved by a jump: a
    jump neither sequence continues replaces the other one, so a flood of stNum-mutated
    copies of the genuine frame lands there and the genuine state changes still arrive
    as new states of the stream's own sequence."""
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
        if cls not in CONTINUES or is_jump(cls, hdr, ctx):
            other = classify_sequence(False, True, ctx["alt_st"], ctx["alt_sq"], st, sq)
            if other[0] in CONTINUES:
                return other[0], other[1], True
            if cls in ("new_state", "missed_states"):
                return cls, wrapped, True  # a jump: the other sequence from now on
        return cls, wrapped, False
    if foreign and not first:
        flags += ("two_sources", "conflict")
        return "first", False, True
    cls, wrapped = classify_sequence(first, ctx["alive"], ctx["st"] or 0, ctx["sq"] or 0, st, sq)
    prev = ctx["prev_st"]
    if cls == "replay" and prev is not None and now_ns - ctx["jump_ns"] > REORDER_NS:
        other = classify_sequence(False, True, prev, ctx["prev_sq"], st, sq)
        if _next_of(other[0], hdr, ctx):
            flags += ("two_sequences", "conflict")
            return other[0], other[1], False
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
    # opening a conflict, the frame's reference `t` is the state's before the jump (alt's)
    opening = "two_sequences" in flags
    if cls in STATE_CHANGES and _stale(ctx, hdr, cls, alt or opening):
        flags.append("stale_recalled" if cls == "first" else "stale_time")
        cls = "stale"
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
