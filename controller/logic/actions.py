"""Guards, actions and the router the bay table names."""

from __future__ import annotations

from typing import Any

from goosectl.controller.engine.effects import Alarm, Notify
from goosectl.controller.engine.registry import Ctx, Event, Registry
from goosectl.controller.logic.effects import DeviceCommand, PublishTopic

REGISTRY = Registry("bay")

#: Device alarms that block a close (IEC 61850 XCBR/SIMG: gas pressure low, spring fault).
CLOSE_BLOCKING_ALARMS = frozenset({"gas_pressure_low", "trip_circuit_fault", "anti_pump_lockout"})
_WHERE = {"on": "is_closed", "off": "is_open", "intermediate": "moving", "bad": "bad"}


@REGISTRY.router(outcomes=("is_closed", "is_open", "moving", "bad"))
def where(ctx, ev):
    return _WHERE[ev.payload["pos"]]


@REGISTRY.action
def store_position(ctx, ev):
    p = ev.payload
    if p["pos"] == ctx["position"]:
        return None
    return {"position": p["pos"], "position_t_ns": p.get("utc_ns", 0)}


@REGISTRY.action(factory=True)
def publish(topic: str):
    effect = PublishTopic(topic)
    return lambda ctx, ev: effect


@REGISTRY.action(factory=True)
def command(command: str, reason: str = ""):
    effect = DeviceCommand(command, reason)
    return lambda ctx, ev: effect


@REGISTRY.action(factory=True)
def alarm(name: str):
    def action(ctx, ev):
        return Alarm(name, True, f"in {ctx['position'] or 'unknown'} position")

    return action


def close_blockers(ctx) -> list[str]:
    """Why a close would be refused now (empty: permitted). Every interlock the config
    names is in `interlocks` from the start (`no data`): a close needs each one valid and
    permitting."""
    out = [f"interlock {n} {s}" for n, s in sorted(ctx["interlocks"].items()) if s != "permit"]
    if not ctx["spring_charged"]:
        out.append("spring not charged")
    out += [
        f"device alarm {n}"
        for n, on in sorted(ctx["device_alarms"].items())
        if on and n in CLOSE_BLOCKING_ALARMS
    ]
    if ctx["link_state"] not in ("up", "degraded"):
        out.append(f"device link {ctx['link_state']}")
    return out


@REGISTRY.guard
def close_permitted(ctx, ev):
    return not close_blockers(ctx)


@REGISTRY.action
def refuse_close(ctx, ev):
    reasons = close_blockers(ctx) or [f"breaker is {ctx['position'] or 'unknown'}, not open"]
    return [{"refused": "; ".join(reasons)}, Notify("close_refused", tuple(reasons))]


@REGISTRY.action
def store_interlock(ctx, ev):
    return {"interlocks": dict(ev.payload)}


@REGISTRY.action
def block_interlocks(ctx, ev):
    """TAL expired: an alarm. The interlocks fed by the stream are already blocked: their
    inputs fell back to fail-safe (`interlock` events, controller/logic/mapping.py)."""
    p = ev.payload
    return [
        {"lost_streams": {p["stream"]: True}},
        Alarm(f"stream_lost:{p['stream']}", True, ", ".join(p["interlocks"])),
    ]


@REGISTRY.action
def stream_back(ctx, ev):
    # interlocks stay blocked until their inputs are valid again (an `interlock` event)
    stream = ev.payload["stream"]
    if not ctx["lost_streams"].get(stream):
        return None
    return [{"lost_streams": {stream: False}}, Alarm(f"stream_lost:{stream}", False)]


@REGISTRY.action
def store_spring(ctx, ev):
    return {"spring_charged": bool(ev.payload)}


@REGISTRY.action
def store_device_alarm(ctx, ev):
    name, active = ev.payload["name"], bool(ev.payload["active"])
    return [{"device_alarms": {name: active}}, Alarm(f"device:{name}", active)]


@REGISTRY.action
def store_link(ctx: Ctx, ev: Event) -> list[Any]:
    """One device_link alarm per outage: raised when the link goes down, cleared only when
    it is up again. A dead device is reopened and tried again and again (down, connecting,
    down ...); each try is not a recovery, so the alarm does not clear and rise with it."""
    state = ev.payload
    out: list[Any] = [{"link_state": state}]
    if state == "down" and not ctx["link_alarm"]:
        out += [{"link_alarm": True}, Alarm("device_link", True, state)]
    elif state in ("up", "degraded") and ctx["link_alarm"]:
        out += [{"link_alarm": False}, Alarm("device_link", False, state)]
    return out


@REGISTRY.action
def note_link_resync(ctx: Ctx, ev: Event) -> list[Any]:
    """The link found its command counter behind the device's and moved it (a controller
    that replaced another): journaled by this transition, logged by the shell."""
    return [{"link_resyncs": 1}, Notify("link_resync", dict(ev.payload))]
