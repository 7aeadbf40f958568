"""`LinkCore`: the controller's side of the device link, sans-IO.

    core = LinkCore(LinkConfig(), now_ns)   # link starts `down`
    core.opened(now_ns)                     # the shell opened the port -> connecting
    seq = core.send_command("trip", now_ns)
    core.receive(data, now_ns)              # bytes read from the port, before due timers
    core.advance(now_ns)                    # timers: response timeout, resync, keepalive
    core.take_output() -> bytes             # bytes to write
    core.take_events() -> [LinkEvent]       # outcomes for the control logic
    core.next_deadline(); core.reopen_wanted

Behaviour lives in two tables (`link.yaml`: connecting/up/degraded/down, resync, event
handling; `commands.yaml`: seq, stop-and-wait, retry with the same seq); this class only
decodes bytes, routes them, and executes the tables' effects. Outcomes are queued, never
called back from inside a step, so a caller may send the next command from its handler.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from goosectl.controller.config.link import LinkConfig
from goosectl.controller.config.link import check_config_param as _check_config
from goosectl.controller.engine import Table
from goosectl.controller.engine.names import Fields, States
from goosectl.controller.engine.resources import shipped
from goosectl.controller.engine.scheduler import Scheduler
from goosectl.controller.link.effects import LinkEvent, Outcome, Reopen, Signal, Submit, Transmit
from goosectl.controller.link.registry import COMMANDS, build
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.errors import LinkProtocolError
from goosectl.protocols.serial.stream import StreamDecoder

HERE = shipped("goosectl.controller.link")


class LinkStates(States):
    """The link machine's states that code outside its table compares against."""

    table = "link"
    DOWN = "down"
    CONNECTING = "connecting"
    UP = "up"
    DEGRADED = "degraded"
    REBOOTING = "rebooting"


#: the states in which the device answers commands
WORKING = frozenset({LinkStates.UP, LinkStates.DEGRADED})


class CommandFields(Fields):
    """The command machine's context read from outside it (by `LinkCore`, tests, views)."""

    table = "link_commands"
    NEXT_SEQ = "next_seq"
    RETRANSMISSIONS = "retransmissions"
    PROTOCOL_ERRORS = "protocol_errors"


@cache
def load_tables() -> dict[str, Table]:
    """The link's two tables, each checked against the names the code reads it by."""
    return {
        "link": Table.load(HERE / "link.yaml", names=(LinkStates,)),
        "commands": Table.load(HERE / "commands.yaml", names=(CommandFields,)),
    }


class LinkCore:
    def __init__(self, config: LinkConfig | None = None, now_ns: int = 0) -> None:
        self.config = config or LinkConfig()
        tables = load_tables()
        self.decoder = StreamDecoder(m.SENT_BY_DEVICE)
        self._out = bytearray()
        self._events: list[LinkEvent] = []
        self.reopen_wanted = False
        self.bus = Scheduler(
            handlers={
                Transmit: self._transmit,
                Submit: self._submit,
                Outcome: self._outcome,
                Signal: self._signal,
                Reopen: self._reopen,
            }
        )
        c = self.config
        self.bus.start(
            tables["commands"].new(
                "commands",
                next_seq=c.first_seq,
                max_retries=c.max_retries,
                response_timeout_ms=c.response_timeout_ms,
            ),
            now_ns,
        )
        self.bus.start(
            tables["link"].new(
                "link",
                reconnect_ms=c.reconnect_ms,
                reconnect_base_ms=c.reconnect_ms,
                reconnect_max_ms=max(c.reconnect_ms, c.reconnect_max_ms),
                chatter_max=c.chatter_max,
                chatter_window_ms=c.chatter_window_ms,
                reboot_max=c.reboot_max,
                reboot_window_ms=c.reboot_window_ms,
                reboot_quiet_ms=c.reboot_quiet_ms,
                resync_retry_ms=c.resync_retry_ms,
                idle_ms=c.idle_ms,
                config={int(_check_config(p, v)): v for p, v in c.device_config.items()},
            ),
            now_ns,
        )
        self._last_state = self.state

    # ------------------------------------------------------------------ views

    @property
    def state(self) -> str:
        return self.bus.machines["link"].state

    @property
    def view(self) -> dict[str, Any]:
        """The controller's view of the device (position is a Dbpos code or None)."""
        return dict(self.bus.machines["link"].ctx)

    @property
    def commands(self):
        return self.bus.machines["commands"]

    # ------------------------------------------------------------------ inputs

    def opened(self, now_ns: int) -> None:
        """The shell (re)opened the port."""
        self.reopen_wanted = False
        self.decoder.reset()
        self._send("link", "opened", now_ns)

    def closed(self, now_ns: int, reason: str | None = None) -> None:
        """The port went away (EOF, EIO, socket reset), or the shell gave it up or could not
        open it: `reason` ("port_stalled: ...", "port_unavailable: ...") raises an alarm
        that clears when the port is open again."""
        self.decoder.reset()
        self._send("link", "closed", now_ns, reason)

    def receive(self, data: bytes, now_ns: int) -> None:
        """Bytes read from the port at `now_ns`: taken before the timers that came due
        since the caller last advanced, then those timers (docs/decisions/
        serial-input-before-timers.md).

        A serial port stamps no byte, so the order of bytes found waiting against a timer
        that came due while the loop was not running is unknown; the bytes cannot have
        arrived before the port was last seen empty, and the shell advances right after
        every read (`SerialLink.poll`), so the timers that fire after them here are only
        the ones whose order is unknown. A device that answered while the controller was
        descheduled is judged on time; one that answered after a timeout the running
        controller had fired is still late; a silent one times out as before."""
        for item in self.decoder.feed(data):
            if isinstance(item, LinkProtocolError):
                continue  # counted by the decoder; the device's retransmission covers it
            if isinstance(item, (m.Ack, m.Nack)):
                self._send("commands", "response", now_ns, item)
            else:
                nxt = self.commands.ctx[CommandFields.NEXT_SEQ]
                self._send("link", "event", now_ns, (item, nxt))
        self.bus.advance(now_ns)
        self._note_state()

    def advance(self, now_ns: int) -> None:
        self.bus.advance(now_ns)
        self._note_state()

    def send_command(
        self, command: str, now_ns: int, *, seq: int | None = None, **fields: Any
    ) -> int:
        """Queue `command` (see COMMANDS); returns its seq. Its outcome arrives later as a
        cmd_ok / cmd_failed LinkEvent with this seq (and, for trip/close, an
        operation_complete / operation_failed). `seq` re-sends under an earlier number
        (reconciliation after a controller restart: the device answers it from its store
        if it ran it, so it never runs twice)."""
        if command not in COMMANDS:
            raise ValueError(f"unknown command {command!r}; known: {', '.join(COMMANDS)}")
        names = COMMANDS[command][1]
        if set(fields) != set(names):
            raise ValueError(f"{command} takes fields {list(names)}, got {sorted(fields)}")
        if command == "configure":
            fields["param"] = _check_config(fields["param"], fields["value"])
        elif command == "reset":
            fields["mode"] = m.ResetMode(fields["mode"])
        items = tuple((n, fields[n]) for n in names)
        if items:
            build(command, 0, items)  # encodable? raises a clear EncodeError here, not later
        if seq is None:
            seq = self.commands.ctx[CommandFields.NEXT_SEQ]
            self._send("link", "user_command", now_ns, (Submit(command, items), seq))
        else:
            sub = Submit(command, items, seq=seq)
            self._send("link", "user_command", now_ns, (sub, seq))
        return seq

    @property
    def next_seq(self) -> int:
        """The sequence number the next new command will carry (persist it: a restarted
        controller must continue above it, or the device answers STALE_SEQUENCE)."""
        return self.commands.ctx[CommandFields.NEXT_SEQ]

    def configure(self, param: int, value: int, now_ns: int) -> int:
        """Set a device parameter now and after every resync."""
        p = _check_config(param, value)
        self._send("link", "set_config", now_ns, (p, value))
        return self.send_command("configure", now_ns, param=p, value=value)

    # ------------------------------------------------------------------ outputs

    def take_output(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out

    def take_events(self) -> list[LinkEvent]:
        out, self._events = self._events, []
        return out

    def next_deadline(self) -> int | None:
        return self.bus.next_deadline()

    # ------------------------------------------------------------------ effects

    def _send(self, machine: str, event: str, now_ns: int, payload: Any = None) -> None:
        self.bus.send(machine, event, now_ns, payload)
        self._note_state()

    def _note_state(self) -> None:
        state = self.state
        if state != self._last_state:
            self._events.append(
                LinkEvent("link_state", data=(("state", state), ("previous", self._last_state)))
            )
            self._last_state = state

    def _transmit(self, _src: str, e: Transmit, now_ns: int) -> None:
        self._out += e.frame

    def _submit(self, _src: str, e: Submit, now_ns: int) -> None:
        self.bus.send("commands", "submit", now_ns, e)

    def _outcome(self, _src: str, e: Outcome, now_ns: int) -> None:
        self._note_state()
        self._events.append(e.event)

    def _signal(self, _src: str, e: Signal, now_ns: int) -> None:
        self.bus.send(e.target, e.event, now_ns, e.payload)

    def _reopen(self, _src: str, e: Reopen, now_ns: int) -> None:
        self.reopen_wanted = True
