"""Guards, actions and the router named by the subscriber tables in `tables/`."""

from __future__ import annotations

from controller.engine.effects import StartTimer
from controller.engine.registry import Registry
from controller.goose.classify import QUALITIES, REARMS_TAL, Verdict, judge
from controller.goose.effects import FrameClassified, StreamState
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
    """Remember what the verdict says the stream now is; report the frame; re-arm TAL."""
    frame = ev.payload
    v: Verdict = frame.verdict
    hdr = frame.hdr
    now = ev.time_ns
    tal_ns = hdr.time_allowed_to_live * NS_PER_MS
    report = FrameClassified(
        ctx["stream"],
        frame.side,
        v.cls,
        v.flags,
        v.quality,
        v.deliver,
        hdr.st_num,
        hdr.sq_num,
        frame.values if v.deliver else None,
        ctx["data"] if v.deliver else None,
    )
    cls = v.cls
    if cls == "out_of_order":
        # Follow the publisher's sqNum from here: a device that restarts its sqNum without
        # a new stNum (the GE F650 in iti_GOOSE.pcap) is reported once, not for ever.
        return [{"sq": hdr.sq_num}, report]
    if cls not in REARMS_TAL:
        return report
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
    return [update, report, StartTimer("tal", tal_ns, "tal_expired")]


@REGISTRY.action
def mark_lost(ctx, ev):
    return {"alive": False}


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
