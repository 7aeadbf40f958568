"""Guards, actions and the router named by the subscriber tables in `tables/`."""

from __future__ import annotations

from controller.engine.effects import StartTimer
from controller.engine.registry import Registry
from controller.goose.classify import (
    QUALITIES,
    REARMS_TAL,
    Verdict,
    judge,
    shape_fits,
    shape_of,
)
from controller.goose.effects import FrameClassified, StreamState
from controller.goose.gate import refusal
from protocols.goose import GooseError

REGISTRY = Registry("goose-stream")

NS_PER_MS = 1_000_000
_MALFORMED = Verdict("malformed", (), "questionable", False, False)


def _values(hdr):
    return hdr.decode_all_data()


@REGISTRY.router(outcomes=QUALITIES, name="judge")
def judge_frame(ctx, ev):
    """Judge the frame once; the verdict rides on the payload to `accept`."""
    frame = ev.payload
    try:
        frame.verdict, frame.values = judge(ctx, frame.hdr, ev.time_ns, _values)
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
    tal_ns = hdr.time_allowed_to_live * NS_PER_MS
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
        try:
            values = hdr.decode_all_data()
        except GooseError:
            values = None
        if values is not None and shape_fits(ctx, hdr, shape_of(values)):
            deliver = True
        else:
            values, refused = None, "shape"
            frame.refused = refused
    report = FrameClassified(
        ctx["stream"],
        frame.side,
        cls,
        v.flags,
        v.quality,
        deliver,
        hdr.st_num,
        hdr.sq_num,
        values,
        ctx["data"] if deliver else None,
        refused,
    )
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
        return [{"sq": hdr.sq_num, **seen}, report]
    if cls not in REARMS_TAL:
        return [seen, report] if seen else report
    if v.advances:
        shape = ctx["shape"] or v.shape  # the first delivered state's shape is the stream's
        update = {
            "st": hdr.st_num,
            "sq": hdr.sq_num,
            "t_ns": hdr.t.to_ns(),
            "data": hdr.all_data,
            "shape": shape,
            "rx_ns": now,
            "tal_ns": tal_ns,
            "alive": True,
            "conf_rev": ctx["conf_rev"] if ctx["conf_rev"] is not None else hdr.conf_rev,
        }
    else:
        update = {"sq": hdr.sq_num, "rx_ns": now, "tal_ns": tal_ns}
    if seen:
        update.update(seen)
    return [update, report, StartTimer("tal", tal_ns, "tal_expired")]


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
    return {"alive": False, "gate_ok": False, "gate_err": "lost"}


@REGISTRY.action
def rearm_tal(ctx, ev):
    return StartTimer("tal", ev.payload.hdr.time_allowed_to_live * NS_PER_MS, "tal_expired")


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
