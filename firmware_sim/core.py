"""The board's firmware, sans-IO: bytes and time in, bytes and deadlines out.

    fw = Firmware()                 # boots at time 0: POWER_UP is queued
    fw.receive(data, now_ns)        # whatever the UART delivered
    fw.advance(now_ns)              # fire due timers (operating times, spring, retries)
    fw.take_output() -> bytes       # what to write to the UART
    fw.next_deadline() -> int|None  # when to call advance() next

All behaviour is in the tables under `firmware_sim/tables/` (breaker, spring, io,
commands, events); this module only routes decoded frames to them and executes their
effects. The boot counter is the board's non-volatile memory, so it lives here and
survives `reboot()`, which rebuilds every machine from its table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from goosectl.controller.engine import Table
from goosectl.controller.engine.effects import Effect
from goosectl.controller.engine.resources import shipped
from goosectl.controller.engine.scheduler import Scheduler
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
from goosectl.protocols.serial.errors import LinkProtocolError
from goosectl.protocols.serial.stream import StreamDecoder, frame

TABLES = shipped("firmware_sim", "tables")
MACHINES = ("breaker", "spring", "io", "commands", "events")
# breaker states in travel -> the operation that completes if the board restarts meanwhile
TRAVEL: Mapping[str, str] = {"closing": "close", "opening": "open"}

# command type -> (machine, event) that executes it
COMMAND_EVENTS: Mapping[m.MsgType, tuple[str, str]] = {
    m.MsgType.PING: ("commands", "ping"),
    m.MsgType.READ_STATUS: ("commands", "read_status"),
    m.MsgType.TRIP: ("breaker", "cmd_trip"),
    m.MsgType.CLOSE: ("breaker", "cmd_close"),
    m.MsgType.SET_OUTPUT: ("io", "set_output"),
    m.MsgType.RESET: ("commands", "reset"),
    m.MsgType.CONFIGURE: ("commands", "configure"),
}

# status flag -> predicate over the board's machines (see SPEC 5.3 `flags`)
FLAG_RULES: tuple[tuple[m.StatusFlag, Any], ...] = (
    (m.StatusFlag.SPRING_CHARGED, lambda b: b["spring"].state == "charged"),
    (m.StatusFlag.TRIP_CIRCUIT_HEALTHY, lambda b: b["breaker"].ctx["tcs_ok"]),
    (m.StatusFlag.GAS_PRESSURE_LOW, lambda b: b["breaker"].ctx["gas_low"]),
    (m.StatusFlag.CLOSE_BLOCKED, lambda b: _close_blocked(b["breaker"])),
    (m.StatusFlag.ANTI_PUMP_LOCKOUT, lambda b: b["breaker"].ctx["lockout"]),
    (m.StatusFlag.OPERATING, lambda b: b["breaker"].state in ("opening", "closing")),
    (m.StatusFlag.TRIP_COIL, lambda b: b["breaker"].state == "opening"),
    (m.StatusFlag.CLOSE_COIL, lambda b: b["breaker"].state == "closing"),
    (m.StatusFlag.EVENT_OVERFLOW, lambda b: b["events"].ctx["overflow"]),
    (m.StatusFlag.SYNCED, lambda b: b["commands"].state == "synced"),
)


def _close_blocked(breaker) -> bool:
    c = breaker.ctx
    return bool(
        c["lockout"]
        or (c["gas_low"] and c["alarm_blocks_close"])
        or not c["spring_charged"]
        or breaker.state == "bad"
    )


@cache
def load_tables(directory: str = str(TABLES)) -> dict[str, Table]:
    """The five firmware tables, validated and compiled once per process."""
    return {name: Table.load(Path(directory) / f"{name}.yaml") for name in MACHINES}


@dataclass
class Stats:
    """The board's own books: what it executed and what it refused to parse."""

    operations: Counter = field(default_factory=Counter)  # "open"/"close" -> mechanism moves
    executed: Counter = field(default_factory=Counter)  # command name -> times executed
    answered: Counter = field(default_factory=Counter)  # "ack"/"nack"/"bad_frame"
    boots: int = 0


class Firmware:
    """One board. `config` holds initial context overrides per machine, e.g.
    ``{"breaker": {"open_time_ms": 10}, "spring": {"spring_charge_ms": 50}}`` (the
    simulator's defaults at boot; CONFIGURE changes them until the next boot)."""

    def __init__(
        self,
        *,
        now_ns: int = 0,
        boot_counter: int = 0,
        config: Mapping[str, Mapping[str, Any]] | None = None,
        cause: m.ResetCause = m.ResetCause.POWER_ON,
    ) -> None:
        self.tables = load_tables()
        self.config = {k: dict(v) for k, v in (config or {}).items()}
        unknown = set(self.config) - set(MACHINES)
        if unknown:
            raise ValueError(f"firmware config names unknown machines {sorted(unknown)}")
        self.boot_counter = boot_counter & 0xFFFF  # non-volatile: incremented at each boot
        self.stats = Stats()
        self.decoder = StreamDecoder(m.SENT_BY_CONTROLLER)
        self._out = bytearray()
        self._current: m.Message | None = None
        # the answer to the command being executed, built once the command has run in full
        self._answer: Respond | None = None
        self._answer_at = 0
        self._after_answer: list[AfterAnswer] = []
        self._reboot: int | None = None
        self.stuck = False
        self.boot(now_ns, cause)

    # ------------------------------------------------------------------ lifecycle

    def boot(self, now_ns: int, cause: m.ResetCause = m.ResetCause.POWER_ON) -> None:
        """(Re)start: boot counter + 1, fresh machines, unsynced, POWER_UP queued. The
        breaker is hardware: a closed breaker is still closed when the board comes back."""
        was_closed = self._breaker_closed()
        self.boot_counter = (self.boot_counter + 1) & 0xFFFF
        self.stats.boots += 1
        self.bus = Scheduler(
            handlers={
                Respond: self._respond,
                AfterAnswer: lambda _src, e, _now: self._after_answer.append(e),
                Emit: self._emit,
                Signal: self._signal,
                Transmit: self._transmit,
                Execute: self._execute,
                Operated: self._operated,
                Reboot: self._schedule_reboot,
            }
        )
        for name in MACHINES:
            ctx = dict(self.config.get(name, {}))
            if name == "breaker":
                ctx = _with_supervision(ctx, self.tables[name])
                ctx["stuck"] = self.stuck
            self.bus.start(self.tables[name].new(name, **ctx), now_ns)
        if was_closed:
            self.bus.send("breaker", "powered_closed", now_ns)
        self.decoder.reset()
        self._current = None
        self._reboot = None
        self._emit(
            "boot", Emit("PowerUp", (("boot_counter", self.boot_counter), ("cause", cause))), now_ns
        )

    def _breaker_closed(self) -> bool:
        """Is the breaker closed as the board restarts? A mechanism in travel finishes it
        (its spring is released; the board's restart does not stop it) unless stuck."""
        bus = getattr(self, "bus", None)
        if bus is None:
            return False
        state = bus.machines["breaker"].state
        if state in TRAVEL and not self.stuck:
            self.stats.operations[TRAVEL[state]] += 1
            return TRAVEL[state] == "close"
        return state == "closed"

    def machine(self, name: str):
        return self.bus.machines[name]

    # ------------------------------------------------------------------ sans-IO surface

    def receive(self, data: bytes, now_ns: int) -> None:
        """Bytes from the UART. Timers due before `now_ns` fire first."""
        self.bus.advance(now_ns)
        for item in self.decoder.feed(data):
            if isinstance(item, LinkProtocolError):
                self._bad_frame(item, now_ns)
            elif isinstance(item, m.EventAck):
                self.bus.send("events", "ack", now_ns, item)
            else:
                self._current, self._answer, self._answer_at = item, None, len(self._out)
                self.bus.send("commands", "command", now_ns, item)
                self._answered(item, now_ns)
                self._current = None
            if self._reboot is not None:
                cause, self._reboot = self._reboot, None
                self.boot(now_ns, m.ResetCause(cause))

    def advance(self, now_ns: int) -> None:
        self.bus.advance(now_ns)

    def next_deadline(self) -> int | None:
        return self.bus.next_deadline()

    def take_output(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    @property
    def pending_output(self) -> int:
        return len(self._out)

    # ------------------------------------------------------------------ field inputs

    def inject(self, what: str, value: Any, now_ns: int) -> None:
        """The outside world acting on the board (tests, `goosectl sim` faults):
        ``stuck`` (bool), ``gas_low`` (bool), ``trip_circuit_ok`` (bool), ``inputs``
        (u16), ``contacts_bad`` (None), ``contacts_ok`` ({"closed": bool})."""
        self.bus.advance(now_ns)
        route = INJECTIONS.get(what)
        if route is None:
            raise ValueError(f"unknown injection {what!r}; known: {sorted(INJECTIONS)}")
        if what == "stuck":
            self.stuck = bool(value)  # survives a reboot: it is the hardware
        self.bus.send(route[0], route[1], now_ns, value)

    def status(self) -> m.Ack:
        """The status snapshot every ACK carries (command PING, result DONE, seq 0)."""
        return self._ack(0, m.MsgType.PING, m.AckResult.DONE)

    # ------------------------------------------------------------------ effect handlers

    def _bad_frame(self, err: LinkProtocolError, now_ns: int) -> None:
        self.stats.answered["bad_frame"] += 1
        nack = m.nack_for(err, self.boot_counter)
        if nack is not None:  # trusted header: NACK, neither stored nor executed (SPEC 3)
            self._out += frame(nack)
            self.stats.answered["nack"] += 1

    def _ack(self, seq: int, command: m.MsgType, result: m.AckResult) -> m.Ack:
        b = self.bus.machines
        flags = 0
        for flag, rule in FLAG_RULES:
            if rule(b):
                flags |= flag
        return m.Ack(
            seq,
            command,
            result,
            m.Dbpos(b["breaker"].ctx["position"]),
            flags,
            b["io"].ctx["inputs"],
            b["io"].ctx["outputs"],
            self.boot_counter,
            b["events"].ctx["latest_seq"],
        )

    def _respond(self, _src: str, e: Respond, now_ns: int) -> None:
        """A table answered the command: kept until the command has run in full."""
        if self._current is None:  # a Respond outside a command (cannot happen with these tables)
            raise RuntimeError("firmware table answered without a command being executed")
        if self._answer is not None:
            raise RuntimeError(f"firmware tables answered {self._current!r} twice")
        self._answer = e

    def _answered(self, cmd: m.Message, now_ns: int) -> None:
        """Send the answer of a command that has run in full (SPEC 5.3): the ACK's snapshot
        shows everything the command did, its events counted in `event_seq`, yet the
        answer goes on the wire before those events."""
        e, after = self._answer, self._after_answer
        self._answer, self._after_answer = None, []
        if e is None:  # a repeat answered from the store (a Transmit), or nothing to say
            return
        code = m.spec_for(cmd).code
        if e.reason is None:
            assert e.result is not None  # a Respond sets exactly one of result and reason
            msg: m.Message = self._ack(cmd.seq, code, m.AckResult(e.result))
            self.stats.answered["ack"] += 1
            self.stats.executed[code.name] += 1
        else:
            msg = m.Nack(cmd.seq, m.NackReason(e.reason), int(code), e.detail, self.boot_counter)
            self.stats.answered["nack"] += 1
        wire = frame(msg)
        self._out[self._answer_at : self._answer_at] = wire
        if e.reason != m.NackReason.STALE_SEQUENCE:  # SPEC 6.2: a stale NACK is not stored
            self.bus.send("commands", "responded", now_ns, (cmd.seq, wire))
        for a in after:
            self.bus.send(a.target, a.event, now_ns)

    def _emit(self, _src: str, e: Emit, now_ns: int) -> None:
        self.bus.send("events", "emit", now_ns, e)

    def _signal(self, _src: str, e: Signal, now_ns: int) -> None:
        self.bus.send(e.target, e.event, now_ns, e.payload)

    def _transmit(self, _src: str, e: Transmit, now_ns: int) -> None:
        self._out += e.frame

    def _execute(self, _src: str, e: Execute, now_ns: int) -> None:
        machine, event = COMMAND_EVENTS[m.spec_for(e.command).code]
        self.bus.send(machine, event, now_ns, e.command)

    def _operated(self, _src: str, e: Operated, now_ns: int) -> None:
        self.stats.operations[e.direction] += 1

    def _schedule_reboot(self, _src: str, e: Reboot, now_ns: int) -> None:
        self._reboot = e.cause


INJECTIONS: Mapping[str, tuple[str, str]] = {
    "stuck": ("breaker", "set_stuck"),
    "gas_low": ("breaker", "gas"),
    "trip_circuit_ok": ("breaker", "trip_circuit"),
    "inputs": ("io", "inputs"),
    "contacts_bad": ("breaker", "contacts_bad"),
    "contacts_ok": ("breaker", "contacts_ok"),
}


def _with_supervision(ctx: dict[str, Any], table: Table) -> dict[str, Any]:
    """Boot-time operating times given in config also move their supervision times."""
    fields = table.spec.context
    get = lambda k: ctx.get(k, fields[k].default)  # noqa: E731
    return {
        **ctx,
        "open_supervision_ms": get("open_time_ms") + get("margin_ms"),
        "close_supervision_ms": get("close_time_ms") + get("margin_ms"),
    }


def effect_types() -> tuple[type[Effect], ...]:
    """Effect classes the firmware tables may produce (for documentation and tests)."""
    return (Respond, AfterAnswer, Emit, Signal, Transmit, Execute, Operated, Reboot)
