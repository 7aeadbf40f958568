"""Guards and actions of the controller's link tables (`registry: controller.link.registry`).

Small pure functions over (ctx, event) returning context updates and effects; the tables
say when each one runs. Wire codes and counters come from `protocols.serial`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from goosectl.controller.engine.effects import Raise, StartTimer
from goosectl.controller.engine.registry import Registry
from goosectl.controller.link.effects import LinkEvent, Outcome, Reopen, Signal, Submit, Transmit
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.sequence import HALF, SEQ_MASK, seq_newer, seq_next
from goosectl.protocols.serial.stream import frame

REGISTRY = Registry("controller.link")
MS = 1_000_000

# command name -> (message class, body fields in order)
COMMANDS: dict[str, tuple[type[m.Message], tuple[str, ...]]] = {
    "ping": (m.Ping, ()),
    "read_status": (m.ReadStatus, ()),
    "trip": (m.Trip, ()),
    "close": (m.Close, ()),
    "set_output": (m.SetOutput, ("mask", "values")),
    "reset": (m.Reset, ("mode",)),
    "configure": (m.Configure, ("param", "value")),
}
_SPEC_OF = {spec.cls: spec for spec in m.SPECS.values()}
# command name -> its type code, which an ACK's `command` and a NACK's `rejected_type` echo
TYPE_CODE: dict[str, int] = {name: int(_SPEC_OF[cls].code) for name, (cls, _) in COMMANDS.items()}
TYPE_NAMES = frozenset(int(t) for t in m.MsgType)
# commands that move the breaker, and the POSITION_CHANGE that completes them
OPERATIONS: dict[str, tuple[m.PositionCause, m.Dbpos]] = {
    "trip": (m.PositionCause.TRIP_COMMAND, m.Dbpos.OFF),
    "close": (m.PositionCause.CLOSE_COMMAND, m.Dbpos.ON),
}
# reasons after which a command may still have run: its operation stays tracked
ABANDONED = frozenset({"link_down", "unreachable", "device_reset", "resync"})


def build(command: str, seq: int, fields: tuple[tuple[str, Any], ...]) -> bytes:
    """The wire frame of a command (raises KeyError/TypeError/EncodeError when wrong)."""
    cls, names = COMMANDS[command]
    values = dict(fields)
    return frame(cls(seq, *(values[n] for n in names)))


def _out(kind: str, seq=None, command=None, reason=None, **data: Any) -> Outcome:
    return Outcome(LinkEvent(kind, seq, command, reason, tuple(data.items())))


# ================================================================== command machine
# entries are (seq, command, tag, frame, fields, origin): `seq` is on the wire, `origin` is
# the number the caller knows (they differ for a command held through a resync or re-issued
# after a device reset), `fields` rebuild the frame under a new seq
# and are read by these positions, never by a bare index. They stay plain tuples: the
# queue is in the machine's context, whose repr the journal digests, and on the trip's
# path, where a NamedTuple's construction costs more than the rest of the entry
SEQ, COMMAND, TAG, FRAME, FIELDS, ORIGIN = range(6)


@REGISTRY.action
def enqueue(ctx, ev) -> dict:
    sub: Submit = ev.payload
    updates: dict[str, Any]
    if sub.seq is not None:  # a reconciling re-send keeps its number; next_seq is untouched
        seq, updates = sub.seq, {"pinned": (*ctx["pinned"], sub.seq)}
    else:
        seq = ctx["next_seq"]
        updates = {"next_seq": seq_next(seq)}
    origin = seq if sub.origin is None else sub.origin
    entry = (seq, sub.command, sub.tag, build(sub.command, seq, sub.fields), sub.fields, origin)
    return {**updates, "queue": (*ctx["queue"], entry)}


@REGISTRY.action
def skip_seq(ctx, ev) -> dict:
    return {"next_seq": seq_next(ctx["next_seq"])}


@REGISTRY.action
def send_head(ctx, ev) -> list:
    head, rest = ctx["queue"][0], ctx["queue"][1:]
    return [{"queue": rest, "pending": head, "tries": 0, "resequenced": 0}, Transmit(head[FRAME])]


def _answered_type(msg) -> int:
    return int(msg.command) if isinstance(msg, m.Ack) else int(msg.rejected_type)


@REGISTRY.guard
def answers_pending(ctx, ev) -> bool:
    pending = ctx["pending"]
    return (
        pending is not None
        and pending[SEQ] == ev.payload.seq
        and _answered_type(ev.payload) == TYPE_CODE[pending[COMMAND]]
    )


@REGISTRY.guard
def answers_pending_seq(ctx, ev) -> bool:
    return ctx["pending"] is not None and ctx["pending"][SEQ] == ev.payload.seq


@REGISTRY.action
def wrong_answer(ctx, ev) -> list:
    """Our seq, another command's type (SPEC 5.3): a protocol error, not an answer. The
    command stays pending; its retries decide (a device that keeps answering wrongly ends
    as unreachable, never as a command that ran)."""
    msg, (seq, command, *_rest) = ev.payload, ctx["pending"]
    got = m.MsgType(_answered_type(msg)).name if _answered_type(msg) in TYPE_NAMES else "?"
    return [
        {"protocol_errors": 1},
        _out(
            "protocol_error",
            seq,
            command,
            "wrong_command",
            answered=got,
            response=type(msg).__name__.upper(),
        ),
    ]


def _settled(ctx, outcome_kind: str, reason: str | None, msg, data: dict) -> list:
    seq, command, tag, _frame, _fields, origin = ctx["pending"]
    out: list = [{"pending": None, "tries": 0, "pinned": _unpinned(ctx, seq)}]
    if tag == "user":
        out.append(_out(outcome_kind, origin, command, reason, **data))
    # a command sent more than once may be answered from the device's store (an older
    # snapshot): the link must not read that snapshot as the device's present
    repeat = ctx["tries"] > 0
    out.append(Signal("link", "response", (msg, origin, command, tag, reason, repeat)))
    if ctx["queue"]:
        out.append(Raise("send_next"))
    return out


@REGISTRY.action
def settle(ctx, ev) -> list:
    msg = ev.payload
    if isinstance(msg, m.Ack):
        return _settled(ctx, "cmd_ok", None, msg, {"result": msg.result.name.lower()})
    reason = msg.reason.name.lower()
    return _settled(ctx, "cmd_failed", reason, msg, {"detail": msg.detail})


def _unpinned(ctx, seq: int) -> tuple:
    return tuple(p for p in ctx["pinned"] if p != seq)


@REGISTRY.guard
def stale_pending(ctx, ev) -> bool:
    """STALE_SEQUENCE for the command on the wire, which we numbered ourselves: the device
    executed a newer seq than ours, so its counter is ahead of ours (SPEC 6.2). A number
    the caller chose (a restarted controller's re-send) is the caller's to settle."""
    msg, pending = ev.payload, ctx["pending"]
    return (
        isinstance(msg, m.Nack)
        and msg.reason is m.NackReason.STALE_SEQUENCE
        and answers_pending(ctx, ev)
        and pending[SEQ] not in ctx["pinned"]
        and ctx["resequenced"] < ctx["max_resequence"]
    )


@REGISTRY.action
def resequence(ctx, ev) -> list:
    """Our counter is behind the device's newest (a controller that replaced another on a
    device that kept running; a new state folder). A NACK never actuates, so nothing ran:
    the device's newest is at most half the number space ahead of the refused seq, so our
    counter moves half the space ahead of it, the same command goes again under the new
    number at once, and what is queued behind it is renumbered after it (numbers the
    caller chose stay). Outcomes keep the caller's number. Said once per jump
    (`sequence_resync`), which the bay logs and journals."""
    seq, command, tag, _frame, fields, origin = ctx["pending"]
    new = (seq + HALF) & SEQ_MASK
    pending = (new, command, tag, build(command, new, fields), fields, origin)
    nxt, queue = seq_next(new), []
    for entry in ctx["queue"]:
        if entry[SEQ] in ctx["pinned"]:
            queue.append(entry)
            continue
        _s, c, t, _f, f, o = entry
        queue.append((nxt, c, t, build(c, nxt, f), f, o))
        nxt = seq_next(nxt)
    updates = {
        "pending": pending,
        "queue": tuple(queue),
        "next_seq": nxt,
        "tries": 0,
        "resequenced": ctx["resequenced"] + 1,
        "resequences": 1,
    }
    event = _out("sequence_resync", origin, command, "stale_sequence", refused=seq, resent=new)
    return [updates, Transmit(pending[FRAME]), event]


@REGISTRY.guard
def can_retry(ctx, ev) -> bool:
    return ctx["tries"] < ctx["max_retries"]


@REGISTRY.action
def resend(ctx, ev) -> list:
    """Same bytes, same seq: the device answers a repeat from its store (at-most-once)."""
    return [{"tries": ctx["tries"] + 1}, Transmit(ctx["pending"][FRAME]), Signal("link", "retry")]


@REGISTRY.action
def give_up(ctx, ev) -> list:
    out = _settled(ctx, "cmd_failed", "timeout", None, {"tries": ctx["tries"] + 1})
    out.append(Signal("link", "unreachable"))
    return out


def _entries(ctx) -> list:
    return ([ctx["pending"]] if ctx["pending"] else []) + list(ctx["queue"])


@REGISTRY.action
def abandon_all(ctx, ev) -> list:
    """Forget the pending and queued commands. After a device reset the caller's commands
    are in doubt, not failed: the link reconciles them once the device is read again
    (SPEC 6.4). For any other reason they fail with it (for the pending one that means:
    outcome unknown, it may or may not have run)."""
    reason = str(ev.payload)
    out: list = [{"queue": (), "pending": None, "tries": 0, "pinned": ()}]
    users = [e for e in _entries(ctx) if e[TAG] == "user"]
    if reason == "device_reset":
        if users:
            out.append(
                Signal("link", "in_doubt", tuple((e[ORIGIN], e[COMMAND], e[FIELDS]) for e in users))
            )
        return out
    for _seq, command, _tag, _frame, _fields, origin in users:
        out.append(_out("cmd_failed", origin, command, reason))
    return out


@REGISTRY.guard
def pending_is_resync(ctx, ev) -> bool:
    return ctx["pending"] is not None and ctx["pending"][TAG] == "resync"


@REGISTRY.action
def drop_resync(ctx, ev) -> list:
    """A new resync replaces the old one's commands; the caller's commands stay queued."""
    pending = ctx["pending"]
    queue = tuple(e for e in ctx["queue"] if e[TAG] != "resync")
    if pending is not None and pending[TAG] == "resync":
        out: list = [{"queue": queue, "pending": None, "tries": 0}]
        if queue:
            out.append(Raise("send_next"))
        return out
    return [{"queue": queue}]


# ================================================================== link machine

# A command of the caller's that was in flight when the device restarted has an unknown
# outcome (SPEC 6.4). Once the device has been read again the link settles it exactly once:
# in effect on the device -> it ran (cmd_ok, result "reconciled"); otherwise by this table:
#   resend  harmless, or the safe direction: issued again under a new number
#   fail    an actuation that must never run late (a close, an output): failed once, with
#           reason device_reset; the logic above decides from the fresh status
#   done    the restart itself did what was asked (a RESET in flight when the device rebooted)
RECONCILE: dict[str, str] = {
    "ping": "resend",
    "read_status": "resend",
    "configure": "resend",
    "trip": "resend",
    "close": "fail",
    "set_output": "fail",
    "reset": "done",
}
assert RECONCILE.keys() == COMMANDS.keys(), "every command needs a reconciliation rule"

# commands the device refuses until its POWER_UP is acknowledged: held while resyncing
NEEDS_SYNC = frozenset(name for name, (cls, _) in COMMANDS.items() if _SPEC_OF[cls].needs_sync)


def in_effect(command: str, fields, view) -> bool:
    """Does the device's status already show what `command` asks for? (reconciliation:
    after a device reset here, after a controller restart in the agent layer)"""
    values = dict(fields)
    position = view.get("position")
    if command in OPERATIONS:
        return position is not None and position == int(OPERATIONS[command][1])
    if command == "set_output":
        outputs, mask = view.get("outputs"), int(values.get("mask", 0))
        return outputs is not None and outputs & mask == int(values.get("values", 0)) & mask
    return False


def _fail_parked(ctx, reason: str) -> list:
    out: list = [{"held": (), "in_doubt": ()}]
    for origin, command, _fields in ctx["in_doubt"]:
        out.append(_out("cmd_failed", origin, command, reason))
    for sub in ctx["held"]:
        out.append(_out("cmd_failed", sub.origin, sub.command, reason))
    return out


@REGISTRY.action(factory=True)
def abandon(reason: str):
    """The link is gone: every command of the caller's fails once, with `reason`."""
    effect = Signal("commands", "abandon", reason)
    return lambda ctx, ev: [*_fail_parked(ctx, reason), effect]


@REGISTRY.action
def reopen(ctx, ev) -> Reopen:
    return Reopen()


def _port_alarm(reason: str, active: bool) -> Outcome:
    kind = reason.split(":", 1)[0]
    return _out("alarm", alarm=kind, active=active, detail=reason)


@REGISTRY.action
def port_fault(ctx, ev) -> list | None:
    """The shell gave the port up, or could not open it: an alarm naming the port, once
    per cause (a port missing for an hour is one alarm, not 7,200)."""
    reason = ev.payload
    if not reason or reason == ctx["port_fault"]:
        return None
    out: list = [{"port_fault": reason}]
    if ctx["port_fault"] and ctx["port_fault"].split(":", 1)[0] != reason.split(":", 1)[0]:
        out.append(_port_alarm(ctx["port_fault"], False))
    out.append(_port_alarm(reason, True))
    return out


@REGISTRY.action
def backoff(ctx, ev) -> dict | None:
    """Each failed reopen waits twice as long as the last, up to reconnect_max_ms."""
    if not ev.payload:
        return None
    return {"reconnect_ms": min(ctx["reconnect_ms"] * 2, ctx["reconnect_max_ms"])}


@REGISTRY.action
def port_restored(ctx, ev) -> list:
    out: list = [{"reconnect_ms": ctx["reconnect_base_ms"], "port_fault": None}]
    if ctx["port_fault"]:
        out.append(_port_alarm(ctx["port_fault"], False))
    return out


@REGISTRY.action
def begin_resync(ctx, ev) -> list:
    """Re-read the device and re-send our configuration (SPEC 6.4); a resync that is
    started again replaces the commands of the previous one, never the caller's."""
    out: list = [Signal("commands", "drop_resync"), Submit("read_status", tag="resync")]
    for param, value in sorted(ctx["config"].items()):
        out.append(
            Submit("configure", (("param", m.ConfigParam(param)), ("value", value)), "resync")
        )
    out.append({"resync_left": len(out) - 1, "resyncs": 1})
    return out


def _boot_of(msg) -> int | None:
    return getattr(msg, "boot_counter", None)


@REGISTRY.guard
def boot_changed(ctx, ev) -> bool:
    """A response from a boot other than the one we know: the device restarted."""
    boot = _boot_of(ev.payload[0])
    return boot is not None and ctx["boot_counter"] is not None and boot != ctx["boot_counter"]


def _looping(ctx, now: int) -> bool:
    """Would one more restart now make more than `reboot_max` within the window? (the
    same count `_reset` makes)"""
    return len(_burst(ctx["boots"], now, ctx["reboot_window_ms"])) > ctx["reboot_max"]


@REGISTRY.guard
def boot_changed_looping(ctx, ev) -> bool:
    """A restart, in a reboot loop: no resync for it (see `rebooting` in link.yaml)."""
    return boot_changed(ctx, ev) and _looping(ctx, ev.time_ns)


@REGISTRY.action
def reboot_settled(ctx, ev) -> list:
    """Quiet for `reboot_quiet_ms` after a reboot loop: the alarm clears and the one
    resync starts (entering `connecting`). A restart within the window raises it again."""
    detail = f"no restart for {ctx['reboot_quiet_ms']:g} ms"
    return [
        {"reboot_loop": False},
        _out("alarm", alarm="device_reboot_loop", active=False, detail=detail),
    ]


@REGISTRY.guard
def completes_resync(ctx, ev) -> bool:
    msg, _seq, _command, tag, reason, _repeat = ev.payload
    # an unsynced device has a POWER_UP on its way: stay connecting until it is handled
    synced = isinstance(msg, m.Ack) and bool(msg.flags & m.StatusFlag.SYNCED)
    return tag == "resync" and reason is None and ctx["resync_left"] == 1 and synced


@REGISTRY.action
def resync_step(ctx, ev) -> dict | None:
    _msg, _seq, _command, tag, reason, _repeat = ev.payload
    if tag == "resync" and reason is None:
        return {"resync_left": max(0, ctx["resync_left"] - 1)}
    return None


@REGISTRY.action
def learn_response(ctx, ev) -> list:
    """Refresh the device view from a response and settle an operation that never started."""
    msg, seq, command, _tag, reason, repeat = ev.payload
    updates: dict = {}
    out: list = [updates]
    boot = _boot_of(msg)
    if boot is not None:
        updates["boot_counter"] = boot
    ops = ctx["ops"]
    if command in OPERATIONS and ops.get(command) == seq:
        started = isinstance(msg, m.Ack) and msg.result is m.AckResult.STARTED
        if not started and reason not in ABANDONED:  # refused, no change, or timed out
            ops = updates["ops"] = {k: v for k, v in ops.items() if k != command}
    if isinstance(msg, m.Ack):
        updates.update(flags=msg.flags, inputs=msg.inputs, outputs=msg.outputs)
        if ctx["synced_boot"] is None and msg.flags & m.StatusFlag.SYNCED:
            updates["synced_boot"] = boot  # a device another session already synced
        _learn_event_seq(ctx, msg, out, updates)
        last = updates.get("last_event_seq", ctx["last_event_seq"])
        if last is not None and seq_newer(msg.event_seq, last) and repeat:
            pass  # a snapshot older than events we processed (a reply from the dedup store)
        elif last is not None and seq_newer(msg.event_seq, last):
            # a fresh answer of this boot counts fewer events than we took: the ones past
            # its count were never generated by it (replayed): its snapshot is the truth
            updates.update(last_event_seq=msg.event_seq, replayed_events=1)
            out.append(_replayed(last, msg.event_seq))
            _position(ctx, ops, msg.position, "status", None, out, updates, ev.time_ns)
        elif ctx["position"] is None:
            updates["position"] = int(msg.position)  # learnt; `up` tells the logic
        else:
            _position(ctx, ops, msg.position, "status", None, out, updates, ev.time_ns)
    return out


def _learn_event_seq(ctx, msg: m.Ack, out: list, updates: dict) -> None:
    """This boot's own count of the events it generated (every ACK's event_seq) settles an
    event that came past the next one (`gap_seq`): generated by this boot -> a real gap,
    the snapshot tells what it changed; not generated (an event of an earlier boot, replayed) ->
    refused, counted, reported once."""
    if ctx["boot_counter"] is not None and msg.boot_counter != ctx["boot_counter"]:
        return  # another boot's count: the reset it reveals starts the view again
    known = ctx["device_event_seq"]
    if known is None or seq_newer(known, msg.event_seq):
        updates["device_event_seq"] = known = msg.event_seq
    gap = ctx["gap_seq"]
    if gap is None:
        return
    updates["gap_seq"] = None
    if not seq_newer(known, gap):
        # a real gap: acknowledged already (the device will not send it again); this
        # ACK's snapshot carries what it changed
        updates["last_event_seq"] = gap
    else:
        updates["replayed_events"] = 1
        out.append(_replayed(gap, known))


def _replayed(event_seq: int, device_event_seq: int) -> Outcome:
    return _out(
        "protocol_error",
        reason="event_not_of_this_boot",
        event_seq=event_seq,
        device_event_seq=device_event_seq,
    )


@REGISTRY.action
def device_reset(ctx, ev) -> list:
    msg = ev.payload[0]
    return _reset(ctx, _boot_of(msg), "boot_counter_changed", ev.time_ns)


def _reset(ctx, boot: int | None, why: str, now: int) -> list:
    """One restart of the device, whichever message revealed it first: the view is
    unknown until re-read; commands in flight are handed back as in doubt (see RECONCILE);
    operations under way are settled from the fresh status (`resume`). More than
    `reboot_max` restarts within `reboot_window_ms` is a reboot loop: one alarm."""
    boots = _burst(ctx["boots"], now, ctx["reboot_window_ms"])
    out: list = [
        {
            "position": None,
            "last_event_seq": None,
            "device_event_seq": None,
            "gap_seq": None,
            "resets": 1,
            "boots": boots[-(ctx["reboot_max"] + 1) :],
        },
        _out("device_reset", reason=why, boot_counter=boot),
        Signal("commands", "abandon", "device_reset"),
    ]
    looping = len(boots) > ctx["reboot_max"]
    if looping != ctx["reboot_loop"]:
        out.append({"reboot_loop": looping})
        detail = f"{len(boots)} restarts within {ctx['reboot_window_ms']} ms"
        out.append(_out("alarm", alarm="device_reboot_loop", active=looping, detail=detail))
    return out


@REGISTRY.action
def park_in_doubt(ctx, ev) -> dict:
    return {"in_doubt": (*ctx["in_doubt"], *ev.payload)}


@REGISTRY.guard
def needs_sync(ctx, ev) -> bool:
    return ev.payload[0].command in NEEDS_SYNC


@REGISTRY.action
def hold(ctx, ev) -> list:
    """Resyncing: the device would refuse this (NOT_SYNCED), so it waits for `up`. A new
    command's number is used up now (the caller's number names only this command) and it
    goes out under a fresh one; a reconciling re-send keeps its earlier number, so the
    device still answers it from its store instead of running it twice."""
    sub, seq = ev.payload
    origin = seq if sub.origin is None else sub.origin
    out: list = [{"held": (*ctx["held"], replace(sub, origin=origin))}]
    if sub.command in OPERATIONS:
        out.append({"ops": {**ctx["ops"], sub.command: origin}})
    if sub.seq is None:
        out.append(Signal("commands", "skip"))
    return out


def _moving(ctx) -> bool:
    return ctx["position"] == int(m.Dbpos.INTERMEDIATE)


def _reconcile(ctx, ops: dict, out: list) -> None:
    for origin, command, fields in ctx["in_doubt"]:
        operation = command in OPERATIONS and ops.get(command) == origin
        if in_effect(command, fields, ctx) or RECONCILE[command] == "done":
            out.append(_out("cmd_ok", origin, command, result="reconciled"))
            if operation:
                del ops[command]
                out.append(_out("operation_complete", origin, command, reconciled=True))
        elif RECONCILE[command] == "resend" and operation and _moving(ctx):
            # the new boot already runs it (a retry reached it): its end position settles it
            out.append(_out("cmd_ok", origin, command, result="reconciled"))
        elif RECONCILE[command] == "resend":
            out.append(Submit(command, fields, origin=origin))
        else:
            position = m.Dbpos(ctx["position"]).name if ctx["position"] is not None else None
            out.append(_out("cmd_failed", origin, command, "device_reset", position=position))
            if operation:
                del ops[command]
                out.append(_out("operation_failed", origin, command, "device_reset"))


@REGISTRY.action
def resume(ctx, ev) -> list:
    """The device is read again after a connect or a restart: settle what was in doubt,
    settle operations the restart interrupted from the position, send what was held."""
    ops = dict(ctx["ops"])
    out: list = [{"held": (), "in_doubt": ()}]
    _reconcile(ctx, ops, out)
    resent = {c for _, c, _ in ctx["in_doubt"] if RECONCILE[c] == "resend"}
    if ctx["resets"]:
        for command, origin in list(ops.items()):
            if command in resent or any(h.origin == origin for h in ctx["held"]):
                continue
            if _moving(ctx):
                continue  # under way: its POSITION_CHANGE settles it
            del ops[command]
            if in_effect(command, (), ctx):
                out.append(_out("operation_complete", origin, command, reconciled=True))
            else:
                out.append(_out("operation_failed", origin, command, "device_reset"))
    out.extend(ctx["held"])
    out.append({"ops": ops})
    return out


@REGISTRY.action
def ack_event(ctx, ev) -> Transmit:
    msg, next_seq = ev.payload
    return Transmit(frame(m.EventAck(msg.seq, next_seq)))


@REGISTRY.guard
def power_up_new_boot(ctx, ev) -> bool:
    """POWER_UP of a boot other than the one we know: the device restarted."""
    msg = ev.payload[0]
    known = ctx["boot_counter"]
    return isinstance(msg, m.PowerUp) and known is not None and msg.boot_counter != known


@REGISTRY.guard
def power_up_new_boot_looping(ctx, ev) -> bool:
    return power_up_new_boot(ctx, ev) and _looping(ctx, ev.time_ns)


@REGISTRY.guard
def power_up_unsynced(ctx, ev) -> bool:
    """POWER_UP of the boot we know (a response revealed it first) or of the first boot we
    see: not a second reset; acknowledging it syncs the device, so the resync starts over."""
    msg = ev.payload[0]
    return isinstance(msg, m.PowerUp) and msg.boot_counter != ctx["synced_boot"]


@REGISTRY.action
def power_up(ctx, ev) -> list:
    msg: m.PowerUp = ev.payload[0]
    out = _reset(ctx, msg.boot_counter, msg.cause.name.lower(), ev.time_ns)
    out.append(_synced(msg))
    return out


@REGISTRY.action
def power_up_sync(ctx, ev) -> dict:
    return _synced(ev.payload[0])


def _synced(msg: m.PowerUp) -> dict:
    return {
        "boot_counter": msg.boot_counter,
        "synced_boot": msg.boot_counter,
        "last_event_seq": msg.seq,
        "device_event_seq": msg.seq,
        "gap_seq": None,
    }


@REGISTRY.guard
def fresh_event(ctx, ev) -> bool:
    msg = ev.payload[0]
    last = ctx["last_event_seq"]
    return not isinstance(msg, m.PowerUp) and (last is None or seq_newer(last, msg.seq))


# position changes the controller's own commands explain; the rest can be chatter
COMMANDED = frozenset(cause.name.lower() for cause, _end in OPERATIONS.values())


def _burst(times: tuple, now: int, window_ms: float) -> tuple:
    """The instants within the last `window_ms` before `now`, and now."""
    window = int(window_ms * MS)
    return (*(t for t in times if now - t < window), now)


def _position(ctx, ops: dict, position: m.Dbpos, cause: str, operate_ms, out, updates, now):
    """The one place the device's position changes in the controller's view: every change
    is a position_changed outcome, whichever message showed it (an event, or the status
    snapshot of any ACK), and an operation whose end position is reached is complete. So
    the bay, its published XCBR Pos and the agent never disagree about the breaker.

    A position that changes more than `chatter_max` times within `chatter_window_ms`, for
    no command of ours, is chatter (a bouncing contact, a failing board): one alarm, the
    view follows the device but the logic hears nothing more until the position has been
    still for a window, then
    the settled position once (chatter_settled) - so a bad contact cannot flood the
    station bus with XCBR Pos publications."""
    if int(position) == ctx["position"]:
        return
    updates["position"] = int(position)
    moves = ctx["moves"]
    if cause not in COMMANDED and not ops:  # an operation of ours moves it: not chatter
        moves = _burst(moves, now, ctx["chatter_window_ms"])
        updates["moves"] = moves[-(ctx["chatter_max"] + 1) :]
    if ctx["chatter"] or len(moves) > ctx["chatter_max"]:
        if not ctx["chatter"]:
            updates["chatter"] = True
            updates["chatter_alarms"] = 1
            detail = f"{len(moves)} position changes within {ctx['chatter_window_ms']} ms"
            out.append(_out("alarm", alarm="position_chatter", active=True, detail=detail))
        updates["chatter_suppressed"] = 1
        out.append(StartTimer("chatter", int(ctx["chatter_window_ms"] * MS), "chatter_quiet"))
    else:
        previous = m.Dbpos(ctx["position"]).name if ctx["position"] is not None else "UNKNOWN"
        out.append(
            _out(
                "position_changed",
                position=position.name,
                previous=previous,
                cause=cause,
                operate_ms=operate_ms,
            )
        )
    for command, (_cause, end) in OPERATIONS.items():
        if position is end and command in ops:
            out.append(
                _out(
                    "operation_complete",
                    ops[command],
                    command,
                    position=end.name,
                    operate_ms=operate_ms,
                )
            )
            ops = updates["ops"] = {k: v for k, v in ops.items() if k != command}


def _position_change(ctx, msg: m.PositionChange, out: list, updates: dict, now: int) -> None:
    """A change is taken from where the view is: an event that moves the breaker from a
    position other than the one we hold (an old event, or one a status snapshot already
    overtook) is not acted on; the device is re-read and its snapshot decides."""
    view = ctx["position"]
    if view is not None and int(msg.position) != view and int(msg.previous) != view:
        updates["unexplained_events"] = 1
        out.append(Submit("read_status", tag="resync"))
        return
    cause = msg.cause.name.lower()
    _position(ctx, ctx["ops"], msg.position, cause, msg.operate_ms, out, updates, now)


@REGISTRY.action
def chatter_settled(ctx, ev) -> list | None:
    """Still for a whole window: the alarm clears and the logic hears where it settled."""
    if not ctx["chatter"]:
        return None
    position = m.Dbpos(ctx["position"]).name if ctx["position"] is not None else "UNKNOWN"
    return [
        {"chatter": False, "moves": ()},
        _out("alarm", alarm="position_chatter", active=False, detail=f"settled {position}"),
        _out("position_changed", position=position, previous="CHATTER", cause="settled"),
    ]


def _alarm(ctx, msg: m.Alarm, out: list, updates: dict) -> None:
    out.append(_out("alarm", alarm=msg.alarm.name.lower(), active=msg.active))
    if msg.alarm is m.AlarmId.MECHANISM_TIMEOUT and msg.active:
        for command, seq in ctx["ops"].items():
            out.append(_out("operation_failed", seq, command, "mechanism_timeout"))
        updates["ops"] = {}
    if msg.alarm is m.AlarmId.EVENT_OVERFLOW and msg.active:
        out.append(Submit("read_status", tag="resync"))  # events were lost: re-read


def _expected(ctx, seq: int) -> bool:
    """Could `seq` be this boot's next event? The one after the last processed; with none
    processed yet, any not past the one after the newest an ACK counted (unknown: any)."""
    last, known = ctx["last_event_seq"], ctx["device_event_seq"]
    if last is not None:
        return seq == seq_next(last)
    return known is None or not seq_newer(seq_next(known), seq)


@REGISTRY.action
def process_event(ctx, ev) -> list | None:
    """Act on an event newer than the last one. The device sends its events one at a time,
    in order, each until it is acknowledged (SPEC 6.3), so a genuine event is the next one;
    the first after a start may be up to one past the newest this boot's ACKs counted. An
    event past that is not acted on: the device is re-read, and its ACK's event_seq says
    whether this boot generated it (a gap: its snapshot is taken) or not (an event of an
    earlier boot replayed onto the line: refused). So a replay never moves the view."""
    msg = ev.payload[0]
    if not _expected(ctx, msg.seq):
        if ctx["gap_seq"] == msg.seq:
            return None  # the same one again: its re-read is on its way
        return [{"gap_seq": msg.seq}, Submit("read_status", tag="resync")]
    updates: dict = {"last_event_seq": msg.seq}
    out: list = [updates]
    if isinstance(msg, m.PositionChange):
        _position_change(ctx, msg, out, updates, ev.time_ns)
    elif isinstance(msg, m.Alarm):
        _alarm(ctx, msg, out, updates)
    elif isinstance(msg, m.SpringCharged):
        flags = ctx["flags"] | m.StatusFlag.SPRING_CHARGED
        if not msg.charged:
            flags &= ~m.StatusFlag.SPRING_CHARGED
        updates["flags"] = int(flags)
        out.append(_out("spring", charged=msg.charged))
    elif isinstance(msg, m.InputChange):
        updates["inputs"] = msg.inputs
        out.append(_out("inputs_changed", inputs=msg.inputs, changed=msg.changed))
    return out


@REGISTRY.action
def keepalive(ctx, ev) -> Submit:
    return Submit("ping", tag="keepalive")


@REGISTRY.action
def submit_user(ctx, ev) -> list:
    """Queue the command; a trip/close is tracked until its end position is reported."""
    sub, seq = ev.payload
    if sub.command in OPERATIONS:
        return [sub, {"ops": {**ctx["ops"], sub.command: seq}}]
    return [sub]


@REGISTRY.action
def refuse_link_down(ctx, ev) -> list:
    sub, seq = ev.payload  # the seq is consumed anyway, so it names this outcome only
    out: list[Outcome | Signal] = [
        _out("cmd_failed", seq if sub.origin is None else sub.origin, sub.command, "link_down")
    ]
    if sub.seq is None:
        out.append(Signal("commands", "skip"))
    return out


@REGISTRY.action
def remember_config(ctx, ev) -> dict:
    param, value = ev.payload
    return {"config": {**ctx["config"], int(param): value}}
