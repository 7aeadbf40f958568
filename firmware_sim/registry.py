"""Guards and actions of the board's tables (`registry: firmware_sim.registry`).

Each function is small and returns values (context updates, effects); the tables say
when they run. Codes come from the wire schema in `protocols.serial.messages`, so the
firmware and the codec can never disagree about a number.
"""

from __future__ import annotations

from typing import Any

from goosectl.controller.engine.effects import Raise
from goosectl.controller.engine.registry import Registry
from goosectl.firmware_sim.effects import (
    AfterAnswer,
    Emit,
    Execute,
    Operated,
    Reboot,
    Respond,
    Signal,
    Transmit,
)
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.sequence import DEDUP_WINDOW, seq_newer
from goosectl.protocols.serial.stream import frame

REGISTRY = Registry("firmware_sim")
NS_PER_MS = 1_000_000

# ------------------------------------------------------------------ generic answers


@REGISTRY.action(factory=True)
def ack(result: str):
    """ACK the command being executed with `result` (an AckResult name)."""
    effect = Respond(result=int(m.AckResult[result]))
    return lambda ctx, ev: effect


@REGISTRY.action(factory=True)
def nack(reason: str, detail: int = 0):
    """NACK the command being executed: nothing was actuated."""
    effect = Respond(reason=int(m.NackReason[reason]), detail=detail)
    return lambda ctx, ev: effect


@REGISTRY.action(factory=True)
def signal(target: str, event: str):
    """Poke another machine of the board (delivered after this step)."""
    effect = Signal(target, event)
    return lambda ctx, ev: effect


@REGISTRY.action(factory=True)
def after_answer(target: str, event: str):
    """Poke another machine once the command's answer (and its snapshot) is built."""
    effect = AfterAnswer(target, event)
    return lambda ctx, ev: effect


@REGISTRY.action
def apply_updates(ctx, ev) -> dict:
    """Take a dict payload of context updates (a CONFIGURE routed to this machine)."""
    return dict(ev.payload)


def _emit(kind: str, **fields: Any) -> Emit:
    return Emit(kind, tuple(fields.items()))


# ------------------------------------------------------------------ breaker


@REGISTRY.guard
def trip_circuit_broken(ctx, ev) -> bool:
    return bool(ctx["tcs_enabled"]) and not ctx["tcs_ok"]


@REGISTRY.guard
def locked_out(ctx, ev) -> bool:
    return bool(ctx["lockout"])


@REGISTRY.guard
def alarm_blocks_close(ctx, ev) -> bool:
    return bool(ctx["gas_low"]) and bool(ctx["alarm_blocks_close"])


@REGISTRY.guard
def spring_discharged(ctx, ev) -> bool:
    return not ctx["spring_charged"]


@REGISTRY.guard
def stuck(ctx, ev) -> bool:
    return bool(ctx["stuck"])


@REGISTRY.action
def nack_position_bad(ctx, ev) -> Respond:
    return Respond(reason=int(m.NackReason.POSITION_BAD), detail=int(ctx["position"]))


def _begin(ctx, ev, cause: m.PositionCause) -> list:
    """Coil energised: contacts leave their end position unless the mechanism is stuck."""
    updates = {"started_ns": ev.time_ns, "previous_position": ctx["position"]}
    out: list = [updates]
    if not ctx["stuck"]:
        updates["position"] = int(m.Dbpos.INTERMEDIATE)
        out.append(
            _emit(
                "PositionChange",
                position=m.Dbpos.INTERMEDIATE,
                previous=m.Dbpos(ctx["position"]),
                cause=cause,
                operate_ms=0,
            )
        )
    return out


@REGISTRY.action
def anti_pump_on_trip(ctx, ev) -> list | None:
    """A trip while the close is still held (SPEC 5.1: less than anti_pump_window_ms after
    the breaker reached ON) latches the lockout; the alarm goes before the trip's events."""
    if ctx["anti_pump"] and ctx["recent_close"] and not ctx["lockout"]:
        return [{"lockout": True}, _emit("Alarm", alarm=m.AlarmId.ANTI_PUMP_LOCKOUT, active=True)]
    return None


@REGISTRY.action
def begin_trip(ctx, ev) -> list:
    return _begin(ctx, ev, m.PositionCause.TRIP_COMMAND)


@REGISTRY.action
def begin_close(ctx, ev) -> list:
    out = _begin(ctx, ev, m.PositionCause.CLOSE_COMMAND)
    if not ctx["stuck"]:  # the spring drives the close: released only if the mechanism moves
        out += [{"spring_charged": False}, Signal("spring", "discharge")]
    return out


@REGISTRY.action(factory=True)
def finish(position: str, cause: str):
    """End position reached: report it with the time from coil energised to contacts made."""
    pos, why = m.Dbpos[position], m.PositionCause[cause]
    direction = "open" if pos is m.Dbpos.OFF else "close"

    def action(ctx, ev) -> list:
        operate_ms = min(0xFFFF, (ev.time_ns - ctx["started_ns"]) // NS_PER_MS)
        return [
            {"position": int(pos)},
            _emit(
                "PositionChange",
                position=pos,
                previous=m.Dbpos(ctx["position"]),
                cause=why,
                operate_ms=operate_ms,
            ),
            Operated(direction),
        ]

    return action


@REGISTRY.action
def mechanism_timeout(ctx, ev) -> list:
    """No end position within operating time + margin: coil off, latch the alarm, and put
    the contacts back where they were (they never left, or fell back)."""
    out: list = [{"mech_alarm": True, "position": ctx["previous_position"]}]
    if ctx["position"] != ctx["previous_position"]:
        out.append(
            _emit(
                "PositionChange",
                position=m.Dbpos(ctx["previous_position"]),
                previous=m.Dbpos(ctx["position"]),
                cause=m.PositionCause.DISCREPANCY,
                operate_ms=0,
            )
        )
    out.append(_emit("Alarm", alarm=m.AlarmId.MECHANISM_TIMEOUT, active=True))
    return out


@REGISTRY.action
def clear_latched(ctx, ev) -> list:
    out: list = [{"lockout": False, "mech_alarm": False}]
    if ctx["lockout"]:
        out.append(_emit("Alarm", alarm=m.AlarmId.ANTI_PUMP_LOCKOUT, active=False))
    if ctx["mech_alarm"]:
        out.append(_emit("Alarm", alarm=m.AlarmId.MECHANISM_TIMEOUT, active=False))
    return out


@REGISTRY.action
def configure_breaker(ctx, ev) -> dict:
    """Apply settings and keep the supervision times = operating time + margin."""
    new = {**ctx, **ev.payload}
    return {
        **ev.payload,
        "open_supervision_ms": new["open_time_ms"] + new["margin_ms"],
        "close_supervision_ms": new["close_time_ms"] + new["margin_ms"],
    }


@REGISTRY.action
def gas_change(ctx, ev) -> list | None:
    low = bool(ev.payload)
    if low == ctx["gas_low"]:
        return None
    return [{"gas_low": low}, _emit("Alarm", alarm=m.AlarmId.GAS_PRESSURE_LOW, active=low)]


@REGISTRY.action
def trip_circuit_change(ctx, ev) -> list | None:
    ok = bool(ev.payload)
    if ok == ctx["tcs_ok"]:
        return None
    return [{"tcs_ok": ok}, _emit("Alarm", alarm=m.AlarmId.TRIP_CIRCUIT_FAULT, active=not ok)]


@REGISTRY.action
def contacts_bad(ctx, ev) -> list:
    return [
        {"position": int(m.Dbpos.BAD), "previous_position": ctx["position"]},
        _emit(
            "PositionChange",
            position=m.Dbpos.BAD,
            previous=m.Dbpos(ctx["position"]),
            cause=m.PositionCause.DISCREPANCY,
            operate_ms=0,
        ),
        _emit("Alarm", alarm=m.AlarmId.POSITION_BAD, active=True),
    ]


@REGISTRY.action
def contacts_ok(ctx, ev) -> list:
    closed = isinstance(ev.payload, dict) and bool(ev.payload.get("closed"))
    pos = m.Dbpos.ON if closed else m.Dbpos.OFF
    return [
        {"position": int(pos)},
        _emit(
            "PositionChange",
            position=pos,
            previous=m.Dbpos.BAD,
            cause=m.PositionCause.EXTERNAL,
            operate_ms=0,
        ),
        _emit("Alarm", alarm=m.AlarmId.POSITION_BAD, active=False),
    ]


# ------------------------------------------------------------------ spring


@REGISTRY.action(factory=True)
def spring_edge(charged: bool):
    effects = [_emit("SpringCharged", charged=charged), Signal("breaker", "spring", charged)]
    return lambda ctx, ev: effects


# ------------------------------------------------------------------ digital I/O


@REGISTRY.guard
def values_outside_mask(ctx, ev) -> bool:
    return bool(ev.payload.values & ~ev.payload.mask)


@REGISTRY.guard
def outputs_unchanged(ctx, ev) -> bool:
    mask, values = ev.payload.mask, ev.payload.values
    return (ctx["outputs"] & mask) == values


@REGISTRY.action
def apply_outputs(ctx, ev) -> dict:
    mask, values = ev.payload.mask, ev.payload.values
    return {"outputs": (ctx["outputs"] & ~mask & 0xFFFF) | values}


@REGISTRY.action
def input_change(ctx, ev) -> list | None:
    inputs = int(ev.payload) & 0xFFFF
    changed = inputs ^ ctx["inputs"]
    if not changed:
        return None
    return [{"inputs": inputs}, _emit("InputChange", inputs=inputs, changed=changed)]


# ------------------------------------------------------------------ command handling


def _stored(ctx, seq: int) -> bytes | None:
    for s, response in ctx["responses"]:
        if s == seq:
            return response
    return None


@REGISTRY.guard
def is_repeat(ctx, ev) -> bool:
    return _stored(ctx, ev.payload.seq) is not None


@REGISTRY.guard
def is_stale(ctx, ev) -> bool:
    newest = ctx["newest"]
    return newest is not None and not seq_newer(newest, ev.payload.seq)


@REGISTRY.guard
def needs_sync(ctx, ev) -> bool:
    return m.spec_for(ev.payload).needs_sync


@REGISTRY.action
def resend_stored(ctx, ev) -> Transmit:
    stored = _stored(ctx, ev.payload.seq)
    assert stored is not None  # guarded by is_repeat
    return Transmit(stored)


@REGISTRY.action
def execute(ctx, ev) -> Execute:
    return Execute(ev.payload)


@REGISTRY.action
def remember(ctx, ev) -> dict:
    """Store (seq, response frame) for retries and advance `newest` (SPEC 6.2 step 2)."""
    seq, response = ev.payload
    kept = tuple(p for p in ctx["responses"] if p[0] != seq)[-(DEDUP_WINDOW - 1) :]
    newest = ctx["newest"]
    if newest is None or seq_newer(newest, seq):
        newest = seq
    return {"responses": (*kept, (seq, response)), "newest": newest}


@REGISTRY.action
def rebase(ctx, ev) -> dict:
    """POWER_UP acknowledged: commands older than the controller's next seq are stale."""
    return {"responses": (), "newest": (int(ev.payload) - 1) & 0xFFFF}


@REGISTRY.guard
def is_reboot(ctx, ev) -> bool:
    return ev.payload.mode is m.ResetMode.REBOOT


@REGISTRY.action
def reboot_commanded(ctx, ev) -> Reboot:
    return Reboot(int(m.ResetCause.COMMANDED))


# CONFIGURE parameter -> (machine, context field); the ranges are the wire schema's.
PARAM_TARGETS: dict[m.ConfigParam, tuple[str, str]] = {
    m.ConfigParam.OPEN_TIME_MS: ("breaker", "open_time_ms"),
    m.ConfigParam.CLOSE_TIME_MS: ("breaker", "close_time_ms"),
    m.ConfigParam.SPRING_CHARGE_MS: ("spring", "spring_charge_ms"),
    m.ConfigParam.ANTI_PUMP: ("breaker", "anti_pump"),
    m.ConfigParam.TRIP_CIRCUIT_SUPERVISION: ("breaker", "tcs_enabled"),
    m.ConfigParam.ALARM_BLOCKS_CLOSE: ("breaker", "alarm_blocks_close"),
    m.ConfigParam.EVENT_RETRY_MS: ("events", "event_retry_ms"),
}


@REGISTRY.guard
def out_of_range(ctx, ev) -> bool:
    r = m.CONFIG_PARAMS[ev.payload.param]
    return not r.minimum <= ev.payload.value <= r.maximum


@REGISTRY.action
def route_configure(ctx, ev) -> Signal:
    target, field = PARAM_TARGETS[ev.payload.param]
    return Signal(target, "configure", {field: ev.payload.value})


# ------------------------------------------------------------------ event queue


@REGISTRY.guard
def queue_full(ctx, ev) -> bool:
    return len(ctx["queue"]) >= ctx["capacity"]


@REGISTRY.action
def overflow(ctx, ev) -> dict:
    return {"overflow": True, "overflow_pending": True}


def _queued(ctx, emit: Emit) -> tuple[dict, tuple]:
    seq = ctx["next_seq"]
    cls = getattr(m, emit.kind)
    msg = cls(seq, **dict(emit.fields))
    entry = (seq, int(m.spec_for(msg).code), frame(msg))
    updates = {
        "queue": (*ctx["queue"], entry),
        "next_seq": (seq + 1) & 0xFFFF,
        "latest_seq": seq,
    }
    return updates, entry


@REGISTRY.action
def enqueue(ctx, ev) -> list:
    """Number the event and queue it; if nothing was outstanding, send it now."""
    updates, entry = _queued(ctx, ev.payload)
    if ctx["queue"]:
        return [updates]
    return [updates, Transmit(entry[2])]


@REGISTRY.guard
def acks_head(ctx, ev) -> bool:
    return bool(ctx["queue"]) and ctx["queue"][0][0] == ev.payload.seq


@REGISTRY.action
def pop_acked(ctx, ev) -> list:
    """Head acknowledged: drop it; POWER_UP's ack syncs the board; send the next one."""
    head, rest = ctx["queue"][0], ctx["queue"][1:]
    out: list = []
    updates: dict = {"queue": rest}
    if ctx["overflow_pending"]:
        view = {**ctx, "queue": rest}
        more, _ = _queued(view, _emit("Alarm", alarm=m.AlarmId.EVENT_OVERFLOW, active=True))
        updates.update(more, overflow_pending=False)
        rest = more["queue"]
    out.append(updates)
    if head[1] == m.MsgType.POWER_UP:
        out.append(Signal("commands", "powerup_acked", ev.payload.next_command_seq))
    if rest:
        out.append(Raise("send_next"))
    return out


@REGISTRY.action
def transmit_head(ctx, ev) -> Transmit:
    return Transmit(ctx["queue"][0][2])
