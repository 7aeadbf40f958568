"""Actions of the publisher table: sequence numbers, schedule, sides. Numbers only: the
bytes are built by `Publisher` from a prebuilt template."""

from __future__ import annotations

from controller.engine.effects import StartTimer
from controller.engine.registry import Registry
from controller.goose.effects import PublisherSides, Transmit
from controller.goose.schedule import interval_ms, tal_ms
from protocols.goose import data_shape, encode_all_data

REGISTRY = Registry("goose-publisher")

NS_PER_MS = 1_000_000
U32_MAX = 0xFFFFFFFF


class PublishError(ValueError):
    """A publication the data set cannot carry (wrong member types or count)."""


def next_num(n: int) -> int:
    """stNum and sqNum wrap from 2**32-1 to 1: 0 is reserved for a state's first frame."""
    return 1 if n >= U32_MAX else n + 1


def active_sides(mode: str, up: dict) -> tuple[str, ...]:
    """The sides frames go out on: both -> every side that is up; A or B -> that side, or
    the other while it is down (failover; back automatically when it returns)."""
    if mode == "both":
        return tuple(s for s in ("A", "B") if up.get(s, False)) or ("A", "B")
    other = "B" if mode == "A" else "A"
    if up.get(mode, False) or not up.get(other, False):
        return (mode,)
    return (other,)


def _gap(ctx, k: int) -> float:
    return interval_ms(ctx["schedule"], k, ctx["min_ms"], ctx["max_ms"], ctx["burst"])


@REGISTRY.action
def new_state(ctx, ev):
    values, t_ns = ev.payload
    members = ctx["members"]
    if members is not None:
        shape = data_shape(values)
        if shape != tuple(members):
            raise PublishError(
                f"{ctx['gocb_ref']}: values do not match the data set: expected "
                f"{len(members)} members {list(members)}, got {len(shape)} {list(shape)}"
            )
    data = encode_all_data(values)
    st = next_num(ctx["st"])
    gap = _gap(ctx, 0)
    return [
        {"st": st, "sq": 0, "k": 0, "t_ns": t_ns, "data": data},
        None
        if ctx["muted"]
        else Transmit(
            st, 0, tal_ms(gap, ctx["tal_factor"]), t_ns, data, active_sides(ctx["mode"], ctx["up"])
        ),
        StartTimer("retransmit", int(gap * NS_PER_MS), "retransmit"),
    ]


@REGISTRY.guard
def still_bursting(ctx, ev):
    return _gap(ctx, ctx["k"] + 1) < ctx["max_ms"]


@REGISTRY.action
def repeat(ctx, ev):
    k = ctx["k"] + 1
    sq = next_num(ctx["sq"])
    gap = _gap(ctx, k)
    return [
        {"sq": sq, "k": k},
        None
        if ctx["muted"]
        else Transmit(
            ctx["st"],
            sq,
            tal_ms(gap, ctx["tal_factor"]),
            ctx["t_ns"],
            ctx["data"],
            active_sides(ctx["mode"], ctx["up"]),
        ),
        StartTimer("retransmit", int(gap * NS_PER_MS), "retransmit"),
    ]


def _side_change(ctx, side: str, is_up: bool, reason: str):
    up = {**ctx["up"], side: is_up}
    before, after = active_sides(ctx["mode"], ctx["up"]), active_sides(ctx["mode"], up)
    out: list = [{"up": up}]
    if before != after:
        out.append(PublisherSides(ctx["gocb_ref"], after, reason))
    return out


@REGISTRY.action
def side_down(ctx, ev):
    return _side_change(ctx, ev.payload, False, f"link {ev.payload} down")


@REGISTRY.action
def side_up(ctx, ev):
    return _side_change(ctx, ev.payload, True, f"link {ev.payload} up")
