"""How a subscriber judges one frame against its stream: rules as data, one small function.

`classify` compares a frame's header with what the stream knew before and returns a
`Verdict`: the frame's class (exactly one), its flags (any number), the stream quality the
frame implies, and whether its data set is delivered to the application. The stream's state
machine (tables/stream.yaml) routes on the quality; nothing here keeps state.

Sequence rules (IEC 61850-8-1; replay rule after IEC 62351-6's liveness idea): while a stream
is alive stNum must advance, or stay equal with sqNum advancing. stNum wraps from 2**32-1 to
1 and sqNum from 2**32-1 to 1 (0 is only the first frame of a state). After TAL expiry any
state is accepted (`restart`), so a restarted publisher is not locked out.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocols.goose import data_shape

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
}

#: flag -> the quality it forces, strongest first (the first present flag wins)
FLAG_QUALITY: tuple[tuple[str, str], ...] = (
    ("confrev_mismatch", "config_mismatch"),
    ("shape_mismatch", "config_mismatch"),
    ("ndscom", "config_mismatch"),
    ("simulation", "simulated"),
    ("s_bit_mismatch", "questionable"),
    ("stale_time", "questionable"),
)

QUALITIES = ("valid", "questionable", "simulated", "config_mismatch")

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
    """-1, 0, 1 for sqNum going back, repeating or advancing; wrap 2**32-1 -> 1 advances."""
    if cur == prev:
        return 0, False
    if prev == U32 - 1 and cur == 1:
        return 1, True
    return (1 if cur > prev else -1), False


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


def judge(ctx, hdr, now_ns: int, values_of) -> tuple[Verdict, tuple | None]:
    """The full verdict on `hdr` (a `GooseHeader`) for a stream whose memory is `ctx`.

    `values_of(hdr)` decodes allData; it is called only for a frame whose data set is
    delivered (a new state, a first frame, a restart), so retransmissions decode nothing.
    Returns the verdict and the decoded values (None when not decoded).
    """
    first = ctx["st"] is None
    cls, wrapped = classify_sequence(
        first, ctx["alive"], ctx["st"] or 0, ctx["sq"] or 0, hdr.st_num, hdr.sq_num
    )
    flags: list[str] = []
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
    deliver, _ = CLASSES[cls]
    values = shape = None
    if deliver:
        same_data = not first and hdr.all_data == ctx["data"]
        if cls in ("new_state", "missed_states"):
            if same_data:
                flags.append("unchanged_data")
            if hdr.t.to_ns() <= ctx["t_ns"]:
                flags.append("stale_time")
        # a delivered state always carries its values (state changes are rare; the
        # retransmissions that make up the traffic never get here)
        values = values_of(hdr)
        shape = shape_of(values)
        if not shape_fits(ctx, hdr, shape):
            flags.append("shape_mismatch")
    rx = ctx["rx_ns"]
    if rx is not None and now_ns > rx + ctx["tal_ns"]:
        flags.append("tal_late")
    ftuple = tuple(flags)
    return Verdict(cls, ftuple, quality_of(cls, ftuple), deliver, deliver, shape), values
