"""Actions of the LGOS table (tables/lgos.yaml) and the LGOS view built from it.

The LGOS machine of a subscription holds what the receive rules decided (St, ErrSt, SimSt,
the expected source); the view adds the stream machines' numbers (LastStNum, ConfRevNum,
RxConfRevNum, NdsCom) at the moment it is built, so those need no dispatch per frame.
"""

from __future__ import annotations

from goosectl.controller.engine.effects import Alarm
from goosectl.controller.engine.registry import Registry
from goosectl.controller.goose.effects import LgosChanged
from goosectl.protocols.ethernet.mac import format_mac

REGISTRY = Registry("goose-lgos")


@REGISTRY.action
def changed(ctx, ev):
    return LgosChanged(ctx["stream"])


@REGISTRY.action
def refuse(ctx, ev):
    """The event is the rule that refused the stream's data: it becomes ErrSt."""
    return {"err": ev.name}


@REGISTRY.action
def learn_source(ctx, ev):
    """The first source MAC seen for the real (or the simulated) stream is the expected one,
    never silently: whoever spoke first may not be the publisher, so it is an alarm (it
    stays until the source is configured), and a second source is a conflict, not a
    lock-out of the first (`subscriber.py`)."""
    simulated, mac, subscribed = ev.payload
    learned = {"sim_src" if simulated else "src": mac}
    if not subscribed:
        return learned  # observer mode: supervised and shown, never acted on
    detail = f"learned {format_mac(mac)} (no src configured: configure it to check it)"
    name = f"goose_source:{ctx['stream']}{'~sim' if simulated else ''}"
    return [learned, Alarm(name, True, detail)]
