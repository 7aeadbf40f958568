"""Guards, actions and the router named by the subscriber tables in `tables/`."""

from __future__ import annotations

from goosectl.controller.engine.effects import Alarm, Raise, StartTimer
from goosectl.controller.engine.registry import Registry
from goosectl.controller.goose.classify import (
    QUALITIES,
    REARMS_TAL,
    Verdict,
    is_jump,
    judge,
    shape_fits,
    shape_of,
)
from goosectl.controller.goose.effects import FrameClassified, StreamState
from goosectl.controller.goose.gate import refusal
from goosectl.protocols.goose import GooseError

REGISTRY = Registry("goose-stream")

NS_PER_MS = 1_000_000
_MALFORMED = Verdict("malformed", (), "suspect", False, False)


def _values(hdr):
    return hdr.decode_all_data()


def bounded_tal_ns(ctx, tal_ms: int) -> int:
    """The TAL a stream is supervised with: the frame's, at most the stream's limit (the
    subscription's MaxTime x the configured factor, and the absolute cap; 0: none), so a
    forged TAL of days cannot keep a silent stream alive."""
    tal_ns = tal_ms * NS_PER_MS
    limit = ctx["tal_limit_ns"]
    return limit if limit and tal_ns > limit else tal_ns


def conflict_alarm_name(ctx) -> str:
    return f"goose_conflict:{ctx['stream']}"


@REGISTRY.router(outcomes=QUALITIES, name="judge")
def judge_frame(ctx, ev):
    """Judge the frame once; the verdict rides on the payload to `accept`."""
    frame = ev.payload
    try:
        frame.verdict, frame.values = judge(ctx, frame.hdr, ev.time_ns, _values, frame.foreign)
    except GooseError:
        frame.verdict, frame.values = _MALFORMED, None
    return frame.verdict.quality


@REGISTRY.action
def accept(ctx, ev):
    """Remember what the verdict says the stream now is; apply the receive rules; report the
    frame; re-arm TAL.

    The rules (`gate.refusal`) need the subscription's simulation switch, which the bank
    leaves on the payload (`frame.gate`). A frame that passes them after refused ones
    revives the subscription: a plain retransmission then delivers the state it repeats."""
    frame = ev.payload
    v: Verdict = frame.verdict
    hdr = frame.hdr
    now = ev.time_ns
    tal_ns = bounded_tal_ns(ctx, hdr.time_allowed_to_live)
    cls = v.cls
    gate = frame.gate  # (simulation mode, switched to the simulated stream)
    # a flagless real frame of an unswitched subscription passes without looking further
    refused = (
        refusal(v.flags, ctx["simulated"], gate[0], gate[1])
        if v.flags or gate[1] or ctx["simulated"]
        else None
    )
    frame.refused = refused
    deliver = v.deliver and refused is None
    values = frame.values if deliver else None
    if refused is None and not ctx["gate_ok"] and cls == "retransmission":
        deliver, values, refused = _revive(ctx, hdr, deliver)
        frame.refused = refused
    report = FrameClassified(ctx["stream"], frame.side, cls, v.flags, v.quality, deliver,
                             hdr.st_num, hdr.sq_num, values, ctx["data"] if deliver else None,
                             refused)  # fmt: skip
    # the values act again once a frame passed the rules and delivered a state
    ok = refused is None and (deliver or ctx["gate_ok"])
    seen: dict = {}
    if ok != ctx["gate_ok"] or (refused is not None and refused != ctx["gate_err"]):
        seen = {"gate_ok": ok, "gate_err": refused}
    if hdr.conf_rev != ctx["rx_conf_rev"]:
        seen["rx_conf_rev"] = hdr.conf_rev
    if hdr.nds_com != ctx["nds_com"]:
        seen["nds_com"] = hdr.nds_com
    if cls == "out_of_order":
        # Follow the publisher's sqNum from here: a device that restarts its sqNum without
        # a new stNum (the GE F650 in iti_GOOSE.pcap) is reported once, not for ever.
        return [{"alt_sq" if v.alt else "sq": hdr.sq_num, **seen}, report]
    if cls not in REARMS_TAL:
        return [seen, report] if seen else report
    flags = v.flags
    out: list = [report, StartTimer("tal", tal_ns, "tal_expired")]
    move = _move_alt if v.alt else _move_main
    update = move(ctx, v, hdr, now, tal_ns)
    if refused is not None and "t_ns" in update:
        # a state the rules refused is followed (stNum) but its `t` is no reference: a
        # frame that failed the checks must not make the genuine next state look stale
        del update["t_ns"]
    if flags:
        out += _conflict_alarms(flags, hdr, update)
    if seen:
        update.update(seen)
    return [update, *out]


def _revive(ctx, hdr, deliver: bool) -> tuple[bool, object, str | None]:
    """A retransmission passing the rules after refused frames: it delivers the state it
    repeats if its values decode and fit the stream's shape, else it is refused ("shape",
    `deliver` left as it was). Returns (deliver, values, refused)."""
    try:
        values = hdr.decode_all_data()
    except GooseError:
        values = None
    if values is not None and shape_fits(ctx, hdr, shape_of(values)):
        return True, values, None
    return deliver, None, "shape"


def _conflict_alarms(flags, hdr, update: dict) -> list:
    """Two sequences (or two sources) seen: the stream's conflict noted in `update` and
    alarmed; a conflict that cleared: its end alarmed. Nothing for other flags."""
    if "two_sequences" in flags or "two_sources" in flags:
        update["conflict"] = True
        update["alt_by_source"] = "two_sources" in flags
        why = (
            "a second source MAC"
            if "two_sources" in flags
            else "stNum jumped, then the sequence before the jump continued"
        )
        return [Raise("conflict", f"{why}: stNum {hdr.st_num} sqNum {hdr.sq_num}")]
    if "conflict_cleared" in flags:
        return [Raise("conflict_over", f"one sequence silent past its TAL; stNum {hdr.st_num}")]
    return []


def _move_main(ctx, v: Verdict, hdr, now: int, tal_ns: int) -> dict:
    """What a frame of the stream's (main) sequence moves; an advance remembers the state
    before it, the sequence a second publisher would continue. A jump from a jump
    (`jumped`: nothing continued the first yet) keeps the state before the first, so a
    run of stNum-mutated copies cannot push the genuine state out of that memory."""
    if "two_sequences" in v.flags:
        return _swap(ctx, v, hdr, now, tal_ns)
    if v.advances:
        jump = is_jump(v.cls, hdr, ctx)
        keep = jump and ctx["jumped"]
        update = {
            "st": hdr.st_num,
            "sq": hdr.sq_num,
            "t_ns": hdr.t.to_ns(),
            "data": hdr.all_data,
            "shape": ctx["shape"] or v.shape,  # the first delivered state's shape is the stream's
            "rx_ns": now,
            "tal_ns": tal_ns,
            "alive": True,
            "conf_rev": ctx["conf_rev"] if ctx["conf_rev"] is not None else hdr.conf_rev,
            "jumped": jump,
        }
        if not keep:
            update.update(prev_st=ctx["st"], prev_sq=ctx["sq"], prev_t_ns=ctx["t_ns"], jump_ns=now)
    else:
        update = {"sq": hdr.sq_num, "rx_ns": now, "tal_ns": tal_ns}
        if v.cls == "retransmission" and ctx["jumped"]:
            update["jumped"] = False  # the jump was continued: a state of its own now
    if "conflict_cleared" in v.flags:
        update.update(NO_CONFLICT)
    return update


def _swap(ctx, v: Verdict, hdr, now: int, tal_ns: int) -> dict:
    """The frame opening a conflict continues the state before the jump: that sequence
    stays the stream's own, and the jump becomes the other one (`alt_*`)."""
    advances = v.advances
    return {
        "st": hdr.st_num if advances else ctx["prev_st"],
        "sq": hdr.sq_num,
        "t_ns": hdr.t.to_ns() if advances else ctx["prev_t_ns"],
        "data": hdr.all_data,
        "rx_ns": now,
        "tal_ns": tal_ns,
        "jumped": False,
        "alt_st": ctx["st"],
        "alt_sq": ctx["sq"],
        "alt_t_ns": ctx["t_ns"],
        "alt_rx_ns": ctx["rx_ns"],
        "alt_tal_ns": ctx["tal_ns"],
    }


def _move_alt(ctx, v: Verdict, hdr, now: int, tal_ns: int) -> dict:
    """What a frame of the other sequence of a conflict moves; when the stream's own
    sequence has gone silent past its TAL, this one becomes the stream's."""
    opening = not ctx["conflict"]
    t_ns = hdr.t.to_ns() if v.advances else ctx["prev_t_ns" if opening else "alt_t_ns"]
    if "conflict_cleared" in v.flags:
        update = {"st": hdr.st_num, "sq": hdr.sq_num, "t_ns": t_ns, "rx_ns": now,
                  "tal_ns": tal_ns, "alive": True, "prev_st": None, **NO_CONFLICT}  # fmt: skip
    else:
        update = {"alt_st": hdr.st_num, "alt_sq": hdr.sq_num, "alt_t_ns": t_ns,
                  "alt_rx_ns": now, "alt_tal_ns": tal_ns}  # fmt: skip
    if v.advances:
        update["data"] = hdr.all_data
        update["shape"] = ctx["shape"] or v.shape
    return update


#: a stream's memory of a conflict, cleared
NO_CONFLICT = {
    "conflict": False,
    "alt_by_source": False,
    "alt_st": None,
    "alt_sq": None,
    "alt_t_ns": 0,
    "alt_rx_ns": 0,
    "alt_tal_ns": 0,
}


@REGISTRY.action
def conflict_alarm(ctx, ev) -> Alarm:
    """Two sequences (or two sources) on one stream: an operator must know, at once."""
    return Alarm(conflict_alarm_name(ctx), True, ev.payload)


@REGISTRY.action
def conflict_over(ctx, ev) -> Alarm:
    return Alarm(conflict_alarm_name(ctx), False, ev.payload)


@REGISTRY.action
def fold_repeats(ctx, ev):
    """What the fast-pathed retransmissions since the last dispatch moved: the payload is
    (sqNum, receive time, TAL in ns) of the last one (None: there were none)."""
    p = ev.payload
    if p is None:
        return None
    return {"sq": p[0], "rx_ns": p[1], "tal_ns": p[2]}


@REGISTRY.action
def mark_lost(ctx, ev):
    lost = {"alive": False, "gate_ok": False, "gate_err": "lost"}
    if ctx["conflict"]:
        return [lost | NO_CONFLICT, Alarm(conflict_alarm_name(ctx), False, "stream lost")]
    return lost


@REGISTRY.action
def rearm_tal(ctx, ev):
    return StartTimer(
        "tal", bounded_tal_ns(ctx, ev.payload.hdr.time_allowed_to_live), "tal_expired"
    )


@REGISTRY.action(factory=True)
def report(state: str):
    def action(ctx, ev):
        return StreamState(ctx["stream"], ctx["side"], state)

    return action


@REGISTRY.action(factory=True)
def report_active(side: str):
    def action(ctx, ev):
        return StreamState(ctx["stream"], side, "active")

    return action
