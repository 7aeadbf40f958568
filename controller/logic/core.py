"""The bay controller, whole and pure: GOOSE hub + bay table + device link, no I/O.

Inputs carry one time, `now_ns` (monotonic live, capture time in replay), which drives the
timers; `t` on the wire is `now_ns + utc_offset_ns` (0 in replay, where capture time is UTC;
the live shell sets it from the system clock). The serial side has the `Endpoint` shape
(receive/advance/take_output/next_deadline) so the firmware simulator can be wired to it
on a virtual clock (`controller.replay.virtual_wire`). Outputs are collected and taken by the shell:
frames to send, bytes for the serial port, and reports for people (verdicts, stream
states, bay transitions, alarms). Effects chain inside one call — a trip frame becomes a
TRIP command and a trip-acknowledged frame before `frame()` returns — which is the
product's "transition latency" in process.

What may act is decided before the bay sees anything: the GOOSE machines' receive rules
(controller/goose/gate.py, per subscription, LGOS), then each input's quality and its
fail-safe value (input machines, controller/logic/mapping.py). The controller's mode
(tables/mode.yaml) decides whether test-flagged data acts, whether commands reach the
device and whether anything is published.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import cache
from typing import Any

from goosectl.controller.config.bay import MODES, TABLES, ControllerConfig
from goosectl.controller.config.keys import KeyFile
from goosectl.controller.config.link import DeviceLimits, LinkConfig
from goosectl.controller.engine import Journal, Scheduler, Table
from goosectl.controller.engine.machine import Machine
from goosectl.controller.goose.effects import FrameClassified, LgosView, SendFrame, StreamState
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.link.core import LinkCore
from goosectl.controller.link.effects import LinkEvent
from goosectl.controller.logic.effects import (
    DeviceCommand,
    InputChanged,
    PublishTopic,
)
from goosectl.controller.logic.mapping import (
    CONFLICT,
    CONFLICT_DELIVERS,
    NO_DATA,
    Inputs,
    Rule,
    publication_values,
    reason_of,
)
from goosectl.controller.logic.mode_actions import MODE_OF, STATE_OF, TEST_STATES, WITHHOLDING
from goosectl.protocols.goose import Dbpos, Vlan

BAY = "bay"
MODE = "mode"
LINK_SEQ_KEY = "link.next_seq"
SEQ_MARGIN = 64


@cache
def package_table(name: str) -> Table:
    """A table of this package that configs do not replace (mode, input), loaded once."""
    return Table.load(TABLES / f"{name}.yaml")


def _link_core(config: ControllerConfig, journal: Journal | None, now_ns: int) -> LinkCore:
    """The device link's core. A restarted controller continues the link's sequence
    numbers above what it last recorded (plus a margin for commands sent after that
    record): below them the device would answer STALE_SEQUENCE."""
    last = journal.get_meta(LINK_SEQ_KEY) if journal is not None else None
    first = ((last + SEQ_MARGIN) & 0xFFFF) if last is not None else 1
    limits = {k: getattr(config.device, k) for k in DeviceLimits.model_fields}
    return LinkCore(LinkConfig(**limits, first_seq=first), now_ns)


class BayController:
    def __init__(
        self,
        config: ControllerConfig,
        now_ns: int = 0,
        journal: Journal | None = None,
        keys: KeyFile | None = None,
    ) -> None:
        """`keys`: the loaded IEC 62351-6 key file (`goose.keys`), for `auth:` policies."""
        self.config = config
        self.scheduler = Scheduler(journal)
        self.hub = GooseHub(config.goose, scheduler=self.scheduler, keys=keys)
        self.link = _link_core(config, journal, now_ns)
        #: called with every report (verdicts, link events): the agent's tools watch these
        self.observers: list = []
        self._seq_recorded: int | None = None
        self.table = Table.shared(config.logic.table)
        self.inputs = Inputs(config, self._names_of)
        self.pubs_by_topic: dict[str, list] = {}
        for pub in config.publications:
            self.pubs_by_topic.setdefault(pub.topic, []).append(pub)
        self.frames: list[SendFrame] = []
        self.reports: list[Any] = []
        #: told the moment a device command or a GOOSE frame is ready to leave, while the
        #: input that caused it is still being handled (the input machine's store, the
        #: settle loop, the reports come after): the live shell writes the TRIP and sends
        #: the trip-acknowledged frame then, bookkeeping after. The core does no I/O; it
        #: only says that outputs wait (`take_output`, `take_frames`). None: outputs are
        #: taken when the input returns, as replay and the demo do.
        self.urgent: Callable[[], None] | None = None
        #: the link seq of the logic's newest device command (its `urgent` moment's command)
        self.command_seq = 0
        self._now = now_ns
        self._start_machines(config, now_ns)
        self.reports.extend(self.hub.drain())

    def _start_machines(self, config: ControllerConfig, now_ns: int) -> None:
        """The bay, mode and input machines, started on the hub's scheduler (one timer heap,
        one journal; their effects arrive through the hub's sink like the GOOSE
        machines' do), in that order."""
        # every interlock blocks until its input has delivered a valid value
        interlocks = {r.interlock: NO_DATA for r in self.inputs.all if r.interlock is not None}
        self.bay: Machine = self.table.new(
            BAY,
            bf_ms=config.logic.breaker_failure_ms,
            close_ms=config.logic.close_timeout_ms,
            interlocks=interlocks,
        )
        self.utc_offset_ns = 0
        self.scheduler.on_step = self._note_step
        self.scheduler.start(self.bay, now_ns)
        self.mode: Machine = package_table("mode").new(MODE, simulation=config.logic.simulation)
        self.scheduler.start(self.mode, now_ns)
        if config.logic.mode != "on":
            self.scheduler.feed(MODE, f"set_{STATE_OF[config.logic.mode]}", now_ns, "config")
        input_table = package_table("input")
        self.input_machines: dict[str, Machine] = {}
        for rule in self.inputs.all:
            m = input_table.new(
                rule.machine_id,
                input=rule.name,
                stream=rule.stream,
                kind=rule.event,
                failsafe=rule.failsafe,
                permit_when=list(rule.permit_when) if rule.interlock is not None else None,
                value=rule.failsafe,
            )
            self.scheduler.start(m, now_ns)
            self.input_machines[rule.name] = m

    def _note_step(self, machine: Machine, step, now_ns: int) -> None:
        if machine is self.bay:
            self.reports.append(
                BayStep(now_ns, step.transitions[0][1], tuple(step.transitions), step.state)
            )

    # -- inputs ---------------------------------------------------------------------------

    @property
    def _utc(self) -> int:
        return self._now + self.utc_offset_ns

    def start(self, now_ns: int) -> None:
        self._now = now_ns
        muted = self.mode.state == "off"
        self._settle(self.hub.start(now_ns, self._utc, muted=muted), now_ns)

    def _names_of(self, stream_id: str) -> tuple[str, ...]:
        stream = self.hub.bank.by_id.get(stream_id)
        return (stream.label, stream.gocb_ref) if stream is not None else ()

    # -- modes ----------------------------------------------------------------------------

    @property
    def mode_name(self) -> str:
        """The behaviour mode as written: on, test, test-blocked, off."""
        return MODE_OF[self.mode.state]

    @property
    def simulation(self) -> bool:
        return bool(self.mode.ctx["simulation"])

    def set_mode(self, mode: str, now_ns: int, origin: str = "operator") -> bool:
        """Switch the behaviour mode (journaled); False if it already was `mode`.

        Leaving or entering `off` silences or resumes the publishers; a change of test-ness
        re-reads every input (test-flagged data acts only in test) and republishes every
        data set, so the quality test bit on the wire says what the controller is in."""
        mode = mode.strip().lower().replace("/", "-").replace("_", "-")
        if mode not in STATE_OF:
            raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
        before = self.mode.state
        if STATE_OF[mode] == before:
            return False
        self._now = now_ns
        self.scheduler.feed(MODE, f"set_{STATE_OF[mode]}", now_ns, origin)
        effects = self.hub.drain()
        after = self.mode.state
        if (before == "off") != (after == "off"):
            effects += self.hub.mute(after == "off", now_ns)
        self._settle(effects, now_ns)
        test_changed = (before in TEST_STATES) != (after in TEST_STATES)
        if test_changed:
            self._reread_inputs(now_ns)
        if after != "off" and self.hub.started:
            # back from off: every data set afresh; test-ness changed: those with a quality
            # (before `start` there is nothing to republish: start publishes as the mode says)
            topics = [
                t
                for t, pubs in self.pubs_by_topic.items()
                if before == "off" or (test_changed and any("quality" in p.members for p in pubs))
            ]
            self._settle([PublishTopic(t) for t in topics], now_ns)
        return True

    def set_simulation(self, on: bool, now_ns: int, origin: str = "operator") -> bool:
        """Switch simulation mode (LPHD.Sim, journaled); False if it already was `on`."""
        if bool(on) == self.simulation:
            return False
        self._now = now_ns
        self.scheduler.feed(MODE, "sim_on" if on else "sim_off", now_ns, origin)
        effects = self.hub.drain()
        effects += self.hub.set_simulation(bool(on), now_ns)
        self._settle(effects, now_ns)
        return True

    def withholds(self, command: str, reason: str, now_ns: int) -> bool:
        """True if the mode (test-blocked, off) keeps `command` from the device; the
        withheld command is journaled and reported. For commands from outside the bay
        logic (the agent's device tool); the logic's own go through `_handle`."""
        if self.mode.state not in WITHHOLDING:
            return False
        self._now = now_ns
        self.scheduler.feed(MODE, "withhold", now_ns, DeviceCommand(command, reason))
        self._settle(self.hub.drain(), now_ns)
        return True

    def _reread_inputs(self, now_ns: int) -> None:
        """Read every input again from the state its stream acts on now."""
        test = self.mode.state in TEST_STATES
        bank = self.hub.bank
        for rule in self.inputs.all:
            stream = next(
                (s for s in bank.streams.values() if rule.stream in (s.label, s.gocb_ref)), None
            )
            current = bank.current_values(stream.id) if stream is not None else None
            if current is not None:
                self._input(rule, *rule.read(current[1], test), now_ns)

    def status(self, now_ns: int | None = None) -> dict[str, Any]:
        """What `goosectl status` shows: modes, the bay, its inputs, every LGOS; and each
        stream's tracker row (`streams`, with the TAL left at `now_ns` when given), which
        `goosectl web` draws."""
        return {
            "mode": self.mode_name,
            "simulation": self.simulation,
            "breaker": self.bay.state,
            "position": self.bay.ctx["position"],
            # the device's time of that position (UTC ns, 0 before the first report)
            "position_utc_ns": self.bay.ctx["position_t_ns"],
            "device_alarms": {k: bool(v) for k, v in self.bay.ctx["device_alarms"].items()},
            "link": self.link.state,
            "interlocks": dict(self.bay.ctx["interlocks"]),
            "inputs": {
                name: {
                    "state": m.state,
                    "value": m.ctx["value"],
                    **({"reason": m.ctx["reason"]} if m.state != "valid" else {}),
                }
                for name, m in self.input_machines.items()
            },
            "lgos": [v.as_json() for v in self.hub.lgos()],
            "streams": self.hub.bank.rows(now_ns),
        } | ({"auth": self.hub.bank.auth.counters()} if self.hub.bank.auth is not None else {})

    def frame(self, buf: bytes, side: str, now_ns: int, vlan: Vlan | None = None) -> None:
        self._now = now_ns
        self._settle(self.hub.frame(buf, side, now_ns, vlan), now_ns)

    def receive(self, data: bytes, now_ns: int) -> None:
        """Bytes from the serial port."""
        self._now = now_ns
        self.link.receive(data, now_ns)
        self._settle([], now_ns)

    # the serial port's shell (`SerialLink`) drives these, as it drives a bare `LinkCore`

    def opened(self, now_ns: int) -> None:
        """The shell (re)opened the serial port."""
        self.link.opened(now_ns)
        self._settle([], now_ns)

    def closed(self, now_ns: int, reason: str | None = None) -> None:
        """The serial port went away (`reason`: why the shell gave it up, see LinkCore)."""
        self.link.closed(now_ns, reason)
        self._settle([], now_ns)

    @property
    def reopen_wanted(self) -> bool:
        return self.link.reopen_wanted

    @reopen_wanted.setter
    def reopen_wanted(self, value: bool) -> None:
        self.link.reopen_wanted = value

    def take_events(self) -> list:
        """Link outcomes are consumed here (they become bay events), none are left over."""
        return []

    @property
    def state(self) -> str:
        return self.link.state

    @property
    def view(self) -> dict[str, Any]:
        return self.link.view

    def close_request(self, now_ns: int, origin: str = "operator") -> None:
        self._now = now_ns
        self._bay("close_request", now_ns, {"stream": origin, "value": True})

    def publish(self, topic: str, now_ns: int) -> None:
        """Publish `topic`'s data sets now (an operator or an agent procedure asks)."""
        self._now = now_ns
        self._settle([PublishTopic(topic)], now_ns)

    def advance(self, now_ns: int) -> None:
        self._now = now_ns
        self.link.advance(now_ns)
        self._settle(self.hub.advance(now_ns), now_ns)

    def next_deadline(self) -> int | None:
        ds = [d for d in (self.hub.next_deadline(), self.link.next_deadline()) if d is not None]
        return min(ds) if ds else None

    # -- outputs --------------------------------------------------------------------------

    def take_frames(self) -> list[SendFrame]:
        out, self.frames = self.frames, []
        return out

    def take_output(self) -> bytes:
        """Bytes for the serial port."""
        return self.link.take_output()

    def take_reports(self) -> list[Any]:
        out, self.reports = self.reports, []
        return out

    # -- the chain ------------------------------------------------------------------------

    def _bay(self, event: str, now_ns: int, payload: Any = None) -> None:
        self.scheduler.feed(BAY, event, now_ns, payload)
        self._settle(self.hub.drain(), now_ns)

    def _settle(self, effects: list[Any], now_ns: int) -> None:
        """Handle `effects` in order, then what the link answered, until both are quiet.

        One input: the scheduler's guard stays entered throughout, so a bay and a link
        that keep answering each other end in `RunawayError` (the link's events count
        as steps of machine "link") instead of running forever."""
        guard = self.scheduler.guard
        guard.enter()
        try:
            queue = deque(effects)
            while True:
                while queue:
                    self._handle(queue.popleft(), now_ns, queue)
                events = self.link.take_events()
                if not events:
                    break
                for le in events:
                    guard.step("link", le.kind)
                    self.reports.append(le)
                    for obs in self.observers:
                        obs(le)
                    for ev, payload in self._link_events(le):
                        self._bay(ev, now_ns, payload)
        finally:
            guard.exit()
        journal = self.scheduler.journal
        if journal is not None and self.link.next_seq != self._seq_recorded:
            self._seq_recorded = self.link.next_seq
            journal.set_meta(LINK_SEQ_KEY, self._seq_recorded)

    def _handle(self, e: Any, now_ns: int, queue: deque) -> None:
        t = type(e)
        if t is SendFrame:
            self.frames.append(e)
            if self.urgent is not None:
                self.urgent()
        elif t is FrameClassified:
            self.reports.append(e)
            for obs in self.observers:
                obs(e)
            if e.deliver:
                rules = self.inputs.rules_for(e.stream)
                if rules:
                    test = self.mode.state in TEST_STATES
                    conflict = CONFLICT in e.flags
                    for rule in rules:
                        if conflict and not CONFLICT_DELIVERS[rule.event]:
                            self._input(rule, False, CONFLICT, now_ns, queue)
                        else:
                            self._input(rule, *rule.read(e.values, test), now_ns, queue)
        elif t is InputChanged:
            self.reports.append(e)
            for ev, payload in self.inputs.bay_events(e):
                self._bay(ev, now_ns, payload)
        elif t is LgosView:
            self.reports.append(e)
            # the subscription as it is now (a view may be overtaken by the next one)
            lgos = self.hub.bank.by_id[e.stream].lgos
            if not e.st and lgos.state != "valid":
                err = lgos.ctx["err"]
                reason = reason_of(err)
                for rule in self.inputs.rules_for(e.stream):
                    if err == CONFLICT and CONFLICT_DELIVERS[rule.event]:
                        continue  # it keeps its value and takes either sequence's next
                    self._input(rule, False, reason, now_ns, queue)
        elif t is StreamState:
            self.reports.append(e)
            events = self.inputs.stream_events(e, self._names_of(e.stream))
            for ev, payload in events:
                self._bay(ev, now_ns, payload)
        elif t is DeviceCommand:
            if self.mode.state in WITHHOLDING:
                self.scheduler.feed(MODE, "withhold", now_ns, e)
                queue.extend(self.hub.drain())
            else:
                self.reports.append(e)
                self.command_seq = self.link.send_command(e.command, now_ns)
                if self.urgent is not None:
                    self.urgent()
        elif t is PublishTopic:
            self.reports.append(e)
            test = self.mode.state in TEST_STATES
            for pub in self.pubs_by_topic.get(e.topic, ()):
                values = publication_values(pub, self.bay.state, self.bay.ctx, self._utc, test)
                queue.extend(self.hub.publish(pub.gocb_ref, values, now_ns, self._utc))
        else:
            self.reports.append(e)

    def _input(
        self, rule: Rule, valid: bool, value: Any, now_ns: int, queue: deque | None = None
    ) -> None:
        """One input read: its machine moves only if validity, value or reason changed;
        what that means for the bay joins `queue` (or is settled at once without one)."""
        m = self.input_machines[rule.name]
        if valid:
            if m.state == "valid":
                old = m.ctx["value"]
                if old == value:
                    return
                # a valid input's new value: the edge taken here and acted on first (a TRIP
                # is what the breaker waits for), then the value stored by its machine
                for ev, payload in self.inputs.edge_events(rule, old, value):
                    self._bay(ev, now_ns, payload)
                self.scheduler.feed(m.id, "valid", now_ns, value)
                return
            self.scheduler.feed(m.id, "valid", now_ns, value)
        else:
            if m.state != "valid" and m.ctx["reason"] == value:
                return
            self.scheduler.feed(m.id, "invalid", now_ns, value)
        if queue is None:
            self._settle(self.hub.drain(), now_ns)
        else:
            queue.extend(self.hub.drain())

    def _link_events(self, le: LinkEvent) -> list[tuple[str, Any]]:
        kind = le.kind
        if kind == "position_changed":
            return [("position", {"pos": le.get("position").lower(), "utc_ns": self._utc})]
        if kind == "operation_failed":
            return [("op_failed", {"command": le.command, "reason": le.reason})]
        if kind == "spring":
            return [("spring", bool(le.get("charged")))]
        if kind == "alarm":
            return [("device_alarm", {"name": le.get("alarm"), "active": le.get("active")})]
        if kind == "sequence_resync":
            data = {"refused": le.get("refused"), "resent": le.get("resent"), "command": le.command}
            return [("link_resync", data)]
        if kind == "link_state":
            out = [("link", le.get("state"))]
            pos = self.link.view.get("position")
            if le.get("state") == "up" and pos is not None:
                out.append(("position", {"pos": Dbpos(pos).name.lower(), "utc_ns": self._utc}))
            return out
        return []


class BayStep:
    """A report of what the bay did with one event (for the timeline)."""

    __slots__ = ("event", "state", "time_ns", "transitions")

    def __init__(self, time_ns: int, event: str, transitions: tuple, state: str) -> None:
        self.time_ns, self.event, self.transitions, self.state = time_ns, event, transitions, state

    def __repr__(self) -> str:
        return f"BayStep({self.event} -> {self.state}, {self.transitions})"
