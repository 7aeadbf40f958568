"""Actions of the publisher table: sequence numbers, schedule, rate limit, sides. Numbers
only: the bytes are built by `Publisher` from a prebuilt template."""

from __future__ import annotations

from bisect import bisect_right

from goosectl.controller.engine.effects import Alarm, Raise, StartTimer
from goosectl.controller.engine.registry import Registry
from goosectl.controller.goose.effects import PublisherSides, Transmit
from goosectl.controller.goose.schedule import interval_ms, tal_ms
from goosectl.protocols.goose import data_shape, encode_all_data

REGISTRY = Registry("goose-publisher")

NS_PER_MS = 1_000_000
U32_MAX = 0xFFFFFFFF


class PublishError(ValueError):
    """A publication the data set cannot carry (wrong member types or count)."""


def next_num(n: int) -> int:
    """stNum and sqNum wrap from 2**32-1 to 1: 0 is reserved for a state's first frame."""
    return 1 if n >= U32_MAX else n + 1


def skip_num(n: int, by: int) -> int:
    """`n` advanced `by` steps of `next_num` (1 .. 2**32-1, wrapping to 1)."""
    return (n - 1 + by) % U32_MAX + 1 if by > 0 else n


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


def _encode(ctx, values) -> bytes:
    """allData of `values`, checked against the data set first (nothing is held or sent
    that the data set cannot carry)."""
    members = ctx["members"]
    if members is not None:
        shape = data_shape(values)
        if shape != tuple(members):
            raise PublishError(
                f"{ctx['gocb_ref']}: values do not match the data set: expected "
                f"{len(members)} members {list(members)}, got {len(shape)} {list(shape)}"
            )
    return encode_all_data(values)


def _window_start(ctx, now: int) -> int:
    """Where in `sent` the new states of the last `window_ms` before `now` begin: `sent`
    is in sending order, so ascending, and the window is its tail, found by bisection."""
    return bisect_right(ctx["sent"], now - int(ctx["window_ms"] * NS_PER_MS))


def _window(ctx, now: int) -> tuple:
    """The times of the new states sent within the last `window_ms` before `now`."""
    return tuple(ctx["sent"][_window_start(ctx, now) :])


def _new_state(ctx, data: bytes, t_ns: int, now: int) -> list:
    st = next_num(ctx["st"])
    gap = _gap(ctx, 0)
    sent = (*_window(ctx, now), now)[-ctx["max_changes"] :]
    return [
        {"st": st, "sq": 0, "k": 0, "t_ns": t_ns, "data": data, "sent": sent, "pending": None},
        None
        if ctx["muted"]
        else Transmit(
            st, 0, tal_ms(gap, ctx["tal_factor"]), t_ns, data, active_sides(ctx["mode"], ctx["up"])
        ),
        StartTimer("retransmit", int(gap * NS_PER_MS), "retransmit"),
    ]


@REGISTRY.guard
def within_rate(ctx, ev) -> bool:
    """Fewer than `max_changes` new states within the last window: this one goes now."""
    return len(ctx["sent"]) - _window_start(ctx, ev.time_ns) < ctx["max_changes"]


@REGISTRY.action
def new_state(ctx, ev):
    values, t_ns = ev.payload
    return _new_state(ctx, _encode(ctx, values), t_ns, ev.time_ns)


@REGISTRY.action
def hold_back(ctx, ev) -> list:
    """Over the rate: keep only this latest change (the one held before is superseded) and
    publish it when the oldest new state leaves the window. The first crossing raises."""
    values, t_ns = ev.payload
    data = _encode(ctx, values)
    now = ev.time_ns
    oldest = _window(ctx, now)[0]
    wait = oldest + int(ctx["window_ms"] * NS_PER_MS) - now
    out: list = [
        {"pending": (data, t_ns), "coalesced": 1},
        StartTimer("release", wait, "release"),
    ]
    if not ctx["limited"]:
        out.append(Raise("rate_limited"))
    return out


@REGISTRY.guard
def holding(ctx, ev) -> bool:
    return ctx["pending"] is not None


@REGISTRY.action
def release(ctx, ev) -> list:
    """A slot is free: the change held back goes out as one new state. The limit is looked
    at again a window later: nothing held back by then, it clears."""
    data, t_ns = ctx["pending"]
    span = int(ctx["window_ms"] * NS_PER_MS)
    return [*_new_state(ctx, data, t_ns, ev.time_ns), StartTimer("release", span, "release")]


@REGISTRY.action
def quiet(ctx, ev) -> Raise | None:
    """A whole window since the last release with nothing held back."""
    return Raise("rate_ok") if ctx["limited"] else None


def _alarm_name(ctx) -> str:
    return f"publish_rate:{ctx['gocb_ref']}"


@REGISTRY.action
def rate_alarm(ctx, ev) -> list:
    detail = (
        f"more than {ctx['max_changes']} new states within {ctx['window_ms']:g} ms: "
        "changes held back, the latest published as the limit allows"
    )
    return [{"limited": True, "limit_crossings": 1}, Alarm(_alarm_name(ctx), True, detail)]


@REGISTRY.action
def rate_clear(ctx, ev) -> list:
    detail = f"{ctx['coalesced']} change(s) held back since start"
    return [{"limited": False}, Alarm(_alarm_name(ctx), False, detail)]


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


@REGISTRY.action
def skip_states(ctx, ev) -> list:
    """A test set's stNum jump (`goosectl publish --stnum-jump N`): the next new state
    carries the last stNum + N, so a subscriber sees N - 1 states missed."""
    return [{"st": skip_num(ctx["st"], int(ev.payload) - 1)}]
