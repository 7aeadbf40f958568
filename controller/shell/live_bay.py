"""`goosectl run`: the bay controller live — raw sockets for GOOSE (A/B), the device on a
serial port, a journal, a status view — in one selectors loop on the monotonic clock."""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from goosectl.controller import logs
from goosectl.controller.agent.effects import Respond, RunTool
from goosectl.controller.engine.effects import Alarm, Notify
from goosectl.controller.goose.auth import SecurityEvent
from goosectl.controller.goose.effects import (
    FrameClassified,
    LgosView,
    PublisherSides,
    RxDrops,
    SendFrame,
    StreamState,
)
from goosectl.controller.link.effects import LinkEvent
from goosectl.controller.link.registry import SEQ
from goosectl.controller.logic.core import BayController, BayStep
from goosectl.controller.logic.effects import (
    CommandWithheld,
    DeviceCommand,
    InputChanged,
    ModeChanged,
)
from goosectl.controller.ports import SerialEndpoint
from goosectl.controller.report.bay_report import describe
from goosectl.controller.shell.goose_live import LiveGoose
from goosectl.controller.shell.reflex_live import KEEP_WARM_MS, LiveReflex
from goosectl.controller.shell.serial_link import SerialLink
from goosectl.protocols.goose import Vlan

log = logging.getLogger(__package__)


class BayGooseCore:
    """The bay controller seen through the GOOSE hub's interface, for `LiveGoose`."""

    def __init__(self, bay: BayController, endpoint: SerialEndpoint | None = None) -> None:
        self.bay = bay
        self.bank = bay.hub.bank
        self.scheduler = bay.scheduler
        #: what owns the deadlines: the bay, or the bay with the agent layer (AgentBay)
        self.endpoint: SerialEndpoint = endpoint or bay
        #: frames sent while their input was being handled (`BayLive._urgent`), with the
        #: sides they still need: returned with the input's other outputs
        self.early: list[SendFrame] = []
        #: the trip reflex (`controller/shell/reflex_live.py`), None without one
        self.reflex: LiveReflex | None = None
        #: reads the serial port before `advance` fires the round's timers
        #: (`SerialLink.take_waiting`), None without a port
        self.read_waiting: Callable[[int], int] | None = None

    def _out(self) -> list[Any]:
        early = self.early
        if early:
            self.early = []
        return [*early, *self.bay.take_frames(), *self.bay.take_reports()]

    def start(self, now_ns: int, utc_ns: int) -> list[Any]:
        self.bay.utc_offset_ns = utc_ns - now_ns
        self.bay.start(now_ns)
        return self._out()

    def frame(self, buf: bytes, side: str, now_ns: int, vlan: Vlan | None = None) -> list[Any]:
        reflex = self.reflex
        if reflex is None:
            self.bay.frame(buf, side, now_ns, vlan)
            return self._out()
        reflex.before(buf, side, now_ns, vlan)
        self.bay.frame(buf, side, now_ns, vlan)
        return [*reflex.after(now_ns), *self._out()]

    def advance(self, now_ns: int) -> list[Any]:
        """The round's timers, after the serial input already waiting: an answer found
        there may have come before a timer that fell due while the loop was not running,
        and is taken first (docs/decisions/serial-input-before-timers.md)."""
        if self.read_waiting is not None:
            self.read_waiting(now_ns)
        self.bay.advance(now_ns)
        return self._out()

    def link(self, side: str, up: bool, now_ns: int) -> list[Any]:
        return [*self.bay.hub.link(side, up, now_ns), *self._out()]

    def set_source_mac(self, mac: bytes) -> None:
        self.bay.hub.set_source_mac(mac)

    def set_time_quality(self, quality: int) -> None:
        self.bay.hub.set_time_quality(quality)

    def next_deadline(self) -> int | None:
        return self.endpoint.next_deadline()

    def drain(self) -> list[Any]:
        return self._out()


#: the reports `run` logs as timeline records (alarms, drops and errors have events of
#: their own; frames are counted, a frame's refusal shows in the LGOS it changes)
TIMELINE_TYPES = frozenset(
    {
        BayStep,
        DeviceCommand,
        CommandWithheld,
        InputChanged,
        ModeChanged,
        LgosView,
        StreamState,
        PublisherSides,
        LinkEvent,
        Notify,
        RunTool,
        Respond,
    }
)


class Status:
    """Counters and the last latencies, logged every second and at the end (the status
    line, an INFO event of `controller.shell`); alarms raised and cleared, drops and
    errors as they come (WARNING, INFO, WARNING, ERROR events). With --log-json each is
    one JSON object with its fields; -q turns the status line off at its level check."""

    def __init__(self, bay: BayController, live: LiveGoose) -> None:
        self.bay, self.live = bay, live
        self.counts: Counter[str] = Counter()
        self.alarms: dict[str, bool] = {}
        self.next_ns = 0
        #: told of every drop report (`run` journals it as a limit crossed); without it the
        #: drop is logged here
        self.on_drops: Callable[[RxDrops], None] | None = None

    def note(self, effects: list[Any]) -> None:
        for e in effects:
            t = type(e)
            if t is FrameClassified:
                self.counts[f"frames.{e.cls}"] += 1
                if e.refused is not None:
                    self.counts[f"refused.{e.refused}"] += 1
            elif t is DeviceCommand:
                self.counts[f"device.{e.command}"] += 1
            elif t is CommandWithheld:
                self.counts[f"withheld.{e.command}"] += 1
            elif t is SendFrame:
                self.counts["frames.sent"] += 1
            elif t is Alarm:
                self.alarm(e.name, e.active, e.detail)
            elif t is StreamState:
                self.counts[f"stream.{e.state}"] += 1
            elif t is RxDrops:
                self.drops(e)
            elif t is SecurityEvent:  # rate-limited by the gate: at most one a second
                self.counts[f"security.{e.reason}"] += e.count
                logs.event(
                    log, logging.WARNING, "security",
                    "security %s: %d frame(s) refused (%s), last key id %s", e.stream,
                    e.count, e.reason, e.key_id,
                    stream=e.stream, reason=e.reason, count=e.count, key_id=e.key_id,
                )  # fmt: skip
            elif t is Notify and e.topic == "error":
                self.counts["errors"] += 1
                logs.event(log, logging.ERROR, "error", "%s", e.data)
            elif t is Notify and e.topic == "link_resync":
                self.counts["link.resyncs"] += 1
                d = e.data
                logs.event(
                    log, logging.WARNING, "link_resync",
                    "device link: command sequence resynchronised: the device had run "
                    "newer commands than seq %s (another controller before this one); "
                    "%s sent again as seq %s", d["refused"], d["command"], d["resent"],
                    **d,
                )  # fmt: skip
            # (an error Notify is logged as an error above)
            if (
                t in TIMELINE_TYPES
                and log.isEnabledFor(logging.INFO)
                and not (t is Notify and e.topic == "error")
            ):
                self.timeline(e)

    def agent_fault(self, why: str, exc: BaseException) -> None:
        """The agent layer turned itself off after an error inside it: the `agent` alarm
        (it stays raised until a restart) and the traceback once, for a bug report."""
        self.counts["errors"] += 1
        log.error("agent layer off after an internal error", exc_info=exc)
        self.alarm("agent", True, f"{why}: agent requests refused, protection unaffected")

    def timeline(self, e: Any) -> None:
        """What the controller did, as the demo's timeline says it (a trip, a close, a
        refusal, a withheld command, an input's validity, a mode change): an INFO event
        `timeline` naming the report's kind (`what`), so `run` tells what it does on
        stderr and with --log-json, not only in its journal."""
        text = describe(e)
        if text is not None:
            logs.event(log, logging.INFO, "timeline", "%s", text, what=type(e).__name__)

    def alarm(self, name: str, active: bool, detail: str = "") -> None:
        """An alarm's state for the status line; a change is logged (raised: WARNING,
        cleared: INFO); a repeat, or the all-clear of one never raised, is not."""
        was = self.alarms.get(name, False)
        self.alarms[name] = active
        if was == active:
            return
        if active:
            why = f": {detail}" if detail else ""
            logs.event(
                log, logging.WARNING, "alarm", "alarm %s%s", name, why,
                alarm=name, active=True, detail=detail,
            )  # fmt: skip
        else:
            logs.event(
                log, logging.INFO, "alarm", "alarm %s: cleared", name,
                alarm=name, active=False, detail=detail,
            )  # fmt: skip

    def drops(self, e: RxDrops) -> None:
        """Frames the kernel dropped: counted, handed to `on_drops` (or logged here), and
        the totals kept in the journal's meta (`rx_drops.<side>`, written with its next
        batch)."""
        self.counts["rx.drops"] += e.new
        if self.on_drops is not None:
            self.on_drops(e)
        else:
            logs.event(
                log, logging.WARNING, "rx_drops",
                "network %s (%s): the kernel dropped %d frame(s) (%d since start, "
                "ring freezes %d)", e.side, e.iface, e.new, e.drops, e.freeze,
                side=e.side, iface=e.iface, new=e.new, drops=e.drops, freeze=e.freeze,
            )  # fmt: skip
        journal = self.bay.scheduler.journal
        if journal is not None:
            journal.set_meta(
                f"rx_drops.{e.side}",
                {"iface": e.iface, "drops": e.drops, "packets": e.packets,
                 "freeze": e.freeze, "received": e.received},
            )  # fmt: skip

    def fields(self) -> dict[str, Any]:
        """What the status line shows, as values (the JSON record's keys): the bay's
        headline as `goosectl status` names it, the streams, the counters."""
        bay, live = self.bay, self.live
        lat = live.last_latency_ns
        headline = bay.status()
        return {
            **{k: headline[k] for k in ("mode", "simulation", "breaker", "position", "link")},
            "streams": {
                s.label: bay.scheduler.machines[s.id].state for s in bay.hub.bank.streams.values()
            },
            # LGOS: St, and why not (ErrSt); `sim` while a subscription takes its simulated
            # stream
            "lgos": {
                v.label: f"{'ok' if v.st else v.err}{':sim' if v.sim_st else ''}"
                for v in bay.hub.lgos()
            },
            "alarms": [a for a, on in sorted(self.alarms.items()) if on],
            "frames": live.frames,
            "drops": live.drops,
            "tx_refused": live.tx_refused,
            "last_us": round(lat / 1000) if lat else 0,
            "counts": dict(self.counts),
            # the PRP LRE's MIB counters (`--prp native`)
            **({"prp": live.prp.lre.counters()} if live.prp is not None else {}),
        }

    def line(self, f: dict[str, Any] | None = None) -> str:
        """The status line a person reads (of `fields`, gathered now unless given)."""
        f = f or self.fields()
        streams = " ".join(f"{k}:{v}" for k, v in f["streams"].items())
        lgos = " ".join(f"{k}:{v}" for k, v in f["lgos"].items())
        sim = ",simulation" if f["simulation"] else ""
        return (
            # no position before the device's first report: "unknown", as the breaker says
            f"mode={f['mode']}{sim} breaker={f['breaker']} pos={f['position'] or 'unknown'} "
            f"link={f['link']} "
            f"streams[{streams}] lgos[{lgos}] alarms[{','.join(f['alarms']) or '-'}] "
            f"frames={f['frames']} drops={f['drops']} "
            f"tx_refused={f['tx_refused']} last={f['last_us']}us"
        )

    def tick(self, now_ns: int) -> None:
        if now_ns >= self.next_ns:
            self.next_ns = now_ns + 1_000_000_000
            if log.isEnabledFor(logging.INFO):  # -q: nothing gathered, nothing formatted
                f = self.fields()
                logs.event(log, logging.INFO, "status", "%s", self.line(f), **f)


class BayLive:
    """The live shell: `LiveGoose` for the networks, `SerialLink` for the device."""

    def __init__(
        self,
        bay: BayController,
        iface_a: str | None,
        iface_b: str | None,
        port: str,
        status_every: bool = True,
        on_effects: Callable[[list[Any]], None] | None = None,
        endpoint: SerialEndpoint | None = None,
        reflex: bool = False,
        keep_warm_ms: float = KEEP_WARM_MS,
    ) -> None:
        """`endpoint` is what the serial port feeds: the bay, or `AgentBay` (bay + agent);
        `reflex`: fire the trip reflex (`controller/shell/reflex_live.py`), rehearsing
        its armed path every `keep_warm_ms` (0: never)."""
        self.bay = bay
        self.endpoint: SerialEndpoint = endpoint or bay
        self.core = BayGooseCore(bay, self.endpoint)
        self.live = LiveGoose(self.core, iface_a, iface_b, ring=bay.config.goose.rx_ring.spec(2))
        self.status = Status(bay, self.live)
        self.serial = SerialLink(port, core=self.endpoint)
        self.core.read_waiting = self.serial.take_waiting
        self.status_every = status_every
        self.on_effects = on_effects
        self._fd: int | None = None
        #: why reporting was turned off (an error inside it), or None
        self.reports_off: str | None = None
        self.live.on_output.append(self.serial.write_pending)
        self.live.on_round.append(self._serial_round)
        #: for each frame that made the controller write to the device: ns from the frame
        #: read to the command's bytes taken by the port, the last 100,000 (the stop report)
        self.device_latencies: deque[int] = deque(maxlen=100_000)
        #: of those, the TRIPs the reflex wrote (the trip's own share, without the CLOSEs
        #: and the other commands that take the engine's path)
        self.reflex_latencies: deque[int] = deque(maxlen=100_000)
        #: and how long the port's write call itself took for each (the kernel's share:
        #: on a pty, waking the device's reader)
        self.reflex_writes: deque[int] = deque(maxlen=100_000)
        #: a frame's command that could not go out at its urgent moment (stop-and-wait: a
        #: keep-alive on the wire, or a link resynchronising): seq -> the frame's read time,
        #: counted when the port takes it, so the report leaves no slow command out
        self._owed: dict[int, int] = {}
        self._command_seen = bay.command_seq
        self.live.on_output.append(self._settle_owed)
        bay.urgent = self._urgent
        if reflex:
            keep_warm_ns = int(keep_warm_ms * 1e6)
            self.core.reflex = LiveReflex(
                bay, self._write_reflex, self.live.send_early, keep_warm_ns
            )
            if keep_warm_ns:  # the idle loop wakes for the rehearsals alone
                self.live.loop.light_every = self.core.reflex.wake_within
                self.live.loop.light.append(self.core.reflex.rehearse)

    def _write_reflex(self, data: bytes) -> None:
        """The reflex's TRIP to the port now, as `write_early` writes the engine's."""
        serial = self.serial
        serial.unsent += data
        if serial.port is not None:
            t_write = time.monotonic_ns()
            serial._write_some()
            t_in = self.live.t_in
            if t_in is not None:
                done = time.monotonic_ns()
                self.device_latencies.append(done - t_in)
                self.reflex_latencies.append(done - t_in)
                self.reflex_writes.append(done - t_write)

    def _urgent(self) -> None:
        """A command or a frame is ready while its input is still being handled: the TRIP
        to the port first, then the frames, then the core goes on with its bookkeeping."""
        if self.core.reflex is not None:
            self.core.reflex.urgent()  # what the reflex already sent is not sent again
        wrote = self.serial.write_early()
        frames = self.bay.take_frames()
        if frames:
            self.core.early.extend(self.live.send_early(frames))
        t_in = self.live.t_in
        if wrote and t_in is not None:
            self.device_latencies.append(time.monotonic_ns() - t_in)
        seq = self.bay.command_seq
        if seq != self._command_seen:  # this moment is a new command's
            self._command_seen = seq
            if not wrote and t_in is not None:
                self._owed[seq] = t_in

    def _settle_owed(self, _t: object = None) -> None:
        """A command owed to a frame went out once it is the one on the wire, all taken."""
        owed = self._owed
        if not owed or self.serial.unsent:
            return
        pending = self.bay.link.commands.ctx["pending"]
        if pending is not None and pending[SEQ] in owed:
            self.device_latencies.append(time.monotonic_ns() - owed.pop(pending[SEQ]))
        if len(owed) > 64:  # commands refused or abandoned before they were sent
            owed.pop(next(iter(owed)))

    def _serial_round(self, now: int) -> None:
        serial, live = self.serial, self.live
        serial.poll(now)
        self._settle_owed()
        fd = serial.fileno()
        if fd != self._fd:
            if self._fd is not None:
                live.remove_reader(self._fd)
            if fd is not None:
                # wakes the loop; this round reads it
                live.add_reader(fd, lambda: None, "serial", "serial port")
            self._fd = fd
        more = self.core.drain()
        if more:
            more += live.execute(more, now)
            self._sink(more)
        if self.core.reflex is not None:
            self.core.reflex.rearm()  # off the frame path: after the round's outputs
            self.core.reflex.rehearse(now)
        if self.status_every:
            try:
                self.status.tick(now)
            except Exception as exc:  # isolation: see _reports_failed
                self._reports_failed(exc)

    def _sink(self, effects: list[Any]) -> None:
        if self.reports_off is None:
            try:
                self.status.note(effects)
            except Exception as exc:  # isolation: see _reports_failed
                self._reports_failed(exc)
        else:  # what must still be seen without the reports: alarms, plainly
            for e in effects:
                if type(e) is Alarm:
                    state = "raised" if e.active else "cleared"
                    log.warning("alarm %s %s %s", e.name, state, e.detail)
        if self.on_effects:
            self.on_effects(effects)

    def _reports_failed(self, exc: Exception) -> None:
        """An error while reporting (the status line, its counters) turns reporting off,
        once: the `reports` alarm and the traceback are logged, the loop, GOOSE, the logic
        and the device link go on. Alarms are still logged, plainly."""
        self.reports_off = f"{type(exc).__name__}: {exc}"
        self.status_every = False
        log.error("reports off after an internal error", exc_info=exc)
        log.warning("alarm reports: %s: status line off, control unaffected", self.reports_off)

    def open_port(self) -> str | None:
        """Open the device port now; None, or why it cannot be opened (a controller that
        starts without its device says so and stops, rather than run with link=down)."""
        if self.serial.open(time.monotonic_ns()):
            return None
        return self.serial.open_errors[-1] if self.serial.open_errors else "cannot open it"

    def run(self, until_ns: int | None = None) -> None:
        if self.serial.port is None:
            self.serial.open(time.monotonic_ns())
        try:
            self.live.run(
                on_frame=lambda n, ts, b, v, out: self._sink(out),
                on_effects=self._sink,
                until_ns=until_ns,
            )
        finally:
            self.serial.close()
            self.live.close()

    def stop(self) -> None:
        self.live.stop()
