"""The one composition of a live controller: from a config and the run's options to a bay
controller wired to its sockets, serial port, journals, agent, control socket and keys.

Why one function: `goosectl run` used to build all of this inline, between argument checks
and reports, each failure undoing by hand what the lines above had opened. Here every
resource is pushed on one `ExitStack` the moment it exists, so a failure at any step closes
exactly what was opened, in reverse order, and the caller (the `run` command, a test, a
future `goosectl serve`) gets either a complete `LiveController` or an `AssemblyError` whose
text is the user's one line. The command parses and reports; this module assembles.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from goosectl.controller import logs
from goosectl.controller.agent.host import AgentBay
from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.service import AgentService
from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.prp import PrpCfg
from goosectl.controller.engine.journal import JournalIOError
from goosectl.controller.logic.core import BayController
from goosectl.controller.report.bay_report import percentiles
from goosectl.controller.shell.control import ControlServer, controller_ops, default_path
from goosectl.controller.shell.control_log import ControlLog
from goosectl.controller.shell.journal_writer import LiveJournals, Retention
from goosectl.controller.shell.keys import KeyService
from goosectl.controller.shell.live_bay import BayLive
from goosectl.controller.shell.locks import LockError, lock_file, lock_journal
from goosectl.controller.shell.output_pump import LinePump
from goosectl.controller.shell.prp_live import PrpLive
from goosectl.controller.shell.prp_live import attach as attach_prp
from goosectl.controller.shell.reflex_live import KEEP_WARM_MS
from goosectl.controller.shell.rgoose_live import attach_subscriptions
from goosectl.controller.shell.state_folder import StateFolderError, prepare_state_folder


class AssemblyError(Exception):
    """A live controller could not be put together; the text names what and why (the
    command shows it as its one line, exit 2). Everything opened before it is closed."""


@dataclass(frozen=True)
class RunOptions:
    """What the run's command line decides beyond the config (each None: the config's)."""

    iface: str | None
    iface_b: str | None
    port: str
    procedures: Path
    state: Path | None = None
    journal: Path | None = None
    control: Path | None = None
    keys: str | None = None  # --keys: the key file (None: goose.keys of the config)
    prp: PrpCfg | None = None  # goose.prp with --prp applied (None: the config's)
    journal_max_mb: float = 0
    journal_max_days: float = 0
    journal_queue: int = 65_536
    agent_fsync: str = "thread"
    mode: str | None = None
    simulation: bool = False
    spin: bool = False
    cpu_latency_us: int | None = None
    realtime: bool = False
    cpu: int | None = None
    rt_priority: int = 50
    uplink_hold: Callable[[], int | None] | None = None
    reflex: bool = True  # the trip reflex (docs/reflex.md); `run --no-reflex` turns it off
    keep_warm_ms: float = KEEP_WARM_MS  # the reflex rehearsed this often (docs/reflex.md)


@dataclass
class LiveController:
    """A bay controller with everything it drives, ready to `serve`."""

    bay: BayController
    agent: AgentBay
    live: BayLive
    prp: PrpLive | None  # goose.prp native: the LRE and its MIB counters
    control: ControlServer
    journals: LiveJournals
    keys: KeyService
    stderr: LinePump
    rgoose: list[Any]
    restored: int
    realtime_note: str | None
    options: RunOptions
    _stack: ExitStack = field(repr=False)

    def serve(self, until_ns: int | None) -> None:
        """Run the loop until `until_ns` or `stop()`, then close everything it holds."""
        self.stderr.defer_to(self.live.live.loop.idle)  # the loop's lines: after its round
        try:
            self.live.run(until_ns)
        finally:
            self._stack.close()

    def stop(self) -> None:
        self.live.stop()

    def running(self) -> dict[str, Any]:
        """The `running` line: where it listens and how it starts."""
        o = self.options
        return {
            "event": "running",
            "iface": o.iface,
            "iface_b": o.iface_b,
            "port": o.port,
            "control": str(self.control.path),
            "mode": self.bay.mode_name,
            "simulation": self.bay.simulation,
            "sessions_restored": self.restored,
            "rx": self.live.live.rx_modes,
            "realtime": self.realtime_note,
        }

    def stopped(self) -> dict[str, Any]:
        """The stop report: what the run did, counted."""
        live = self.live
        rgoose = {"rgoose": self.rgoose[0].receiver.counters()} if self.rgoose else {}
        return {
            "event": "stopped",
            "breaker": self.bay.bay.state,
            **rgoose,
            **({"prp": self.prp.status()} if self.prp is not None else {}),
            "mode": self.bay.mode_name,
            "frames_in": live.live.frames,
            "frames_out": live.live.sent,
            "rx": live.live.rx_stats(),
            "tx": {"refused": live.live.tx_refused, "superseded": live.live.tx_superseded},
            "counters": dict(live.status.counts),
            "frame_latency_us": percentiles(list(live.live.latencies)),
            "stamp_to_sent_us": percentiles(list(live.live.stamp_latencies)),
            "frame_to_device_us": percentiles(list(live.device_latencies)),
            **(
                {
                    "reflex": {
                        **live.core.reflex.counts(),
                        "frame_to_trip_us": percentiles(list(live.reflex_latencies)),
                        "trip_write_us": percentiles(list(live.reflex_writes)),
                    }
                }
                if live.core.reflex is not None
                else {}
            ),
            "goose": self.bay.hub.counters(),
            "journal": self.journals.report(),
            "stderr": self.stderr.status(),
            "control": {**self.control.counts, **self.control.log.counts()},
        }


def assemble(cfg: ControllerConfig, keys: Any, o: RunOptions) -> LiveController:
    """Build the live controller, or raise AssemblyError having closed what it opened."""
    stack = ExitStack()
    try:
        return _assemble(cfg, keys, o, stack)
    except BaseException:
        stack.close()
        raise


def _assemble(
    cfg: ControllerConfig,
    keys: Any,
    o: RunOptions,
    stack: ExitStack,
) -> LiveController:
    if o.state is not None:
        try:  # 0700 whatever the umask, and refused if another user could write it
            prepare_state_folder(o.state)
        except StateFolderError as exc:
            raise AssemblyError(str(exc)) from exc
    journal_path = o.journal or cfg.journal or (o.state / "bay.sqlite" if o.state else None)
    control = _claim(cfg, o, journal_path, stack)
    journals = _journals(o, journal_path, stack)
    now = time.monotonic_ns()
    bay = BayController(cfg, now, journals.bay, keys)
    bay.hub.bank.recall()  # a stream's first frame judged against what the journal knew
    control.log = ControlLog(journals.bay, now, quiet_s=cfg.control.alarm_quiet_s)
    if o.mode:
        bay.set_mode(o.mode, now, "command line")
    if o.simulation:
        bay.set_simulation(True, now, "command line")
    agent = _agent(cfg, o, bay, journals, control)
    restored = agent.restore(now)
    live, prp = _live(bay, agent, o, stack)
    note = _realtime(o, live, stack)
    stderr = _pump_logs(o, stack)
    live.live.on_round.append(journals.watch(live.status))
    why = live.open_port()
    if why is not None:
        raise AssemblyError(f"device port {o.port}: {why}")
    rgoose = _rgoose(cfg, live, keys, stack)
    key_service = KeyService(bay.hub, o.keys or cfg.goose.keys, control.log)
    key_service.start()
    live.live.on_round.append(key_service.tick)
    _serve_control(bay, agent, live, prp, control, key_service)
    return LiveController(
        bay, agent, live, prp, control, journals, key_service, stderr, rgoose, restored, note,
        o, stack,
    )  # fmt: skip


def _claim(
    cfg: ControllerConfig, o: RunOptions, journal: Path | None, stack: ExitStack
) -> ControlServer:
    """What this controller must own alone, taken before anything is opened: the state
    folder, the journal (by the file itself: any name or hard link meets the lock), the
    control socket. The serial device is locked where the link opens it."""
    try:
        if o.state is not None:
            stack.callback(lock_file(o.state / "lock", f"state folder {o.state}").release)
        if journal is not None:
            stack.callback(lock_journal(journal, f"journal {journal}").release)
        control = ControlServer(o.control or cfg.control.socket or default_path(), None,
                                cfg=cfg.control)  # fmt: skip
    except LockError as exc:
        raise AssemblyError(str(exc)) from exc
    stack.callback(control.close)
    return control


def _journals(o: RunOptions, journal: Path | None, stack: ExitStack) -> LiveJournals:
    retention = Retention(
        max_bytes=int(o.journal_max_mb * 1024 * 1024) or None,
        max_age_s=o.journal_max_days * 86400 or None,
        hold=o.uplink_hold,
    )
    try:
        journals = LiveJournals(
            journal, o.state / "agent.sqlite" if o.state else None, retention,
            o.journal_queue, o.agent_fsync,
        )  # fmt: skip
    except JournalIOError as exc:
        raise AssemblyError(str(exc)) from exc
    stack.callback(journals.close)
    return journals


def _agent(
    cfg: ControllerConfig,
    o: RunOptions,
    bay: BayController,
    journals: LiveJournals,
    control: ControlServer,
) -> AgentBay:
    service = AgentService(
        FolderPlanner(o.procedures),
        journals.agent,
        confirm_timeout_ms=cfg.agent.confirm_timeout_s * 1000,
        max_open=cfg.agent.max_open_sessions,
        keep_finished=cfg.agent.keep_finished_sessions,
    )
    agent = AgentBay(bay, service, resume_max_age_s=cfg.agent.resume_max_age_s)
    agent.responses = deque(maxlen=1024)  # nobody reads them here: the last ones, not all

    def expired(notice: Any, now_ns: int) -> None:
        if notice.topic == "expired":  # a confirmation nobody gave: counted, alarmed
            control.log.crossed("agent.confirm_timeout", notice.data["text"], now_ns)

    agent.on_notify = expired
    return agent


def _close_prp(prp: PrpLive) -> None:
    prp.close()
    prp.lre.settle()  # every duplicate-table entry counted (Unique, Duplicate, Multi)


def _live(
    bay: BayController, agent: AgentBay, o: RunOptions, stack: ExitStack
) -> tuple[BayLive, PrpLive | None]:
    """The sockets (and PRP's LRE between them and the hub) and the serial link."""
    try:
        live = BayLive(
            bay,
            o.iface,
            o.iface_b,
            o.port,
            endpoint=agent,
            reflex=o.reflex,
            keep_warm_ms=o.keep_warm_ms,
        )
    except PermissionError as exc:
        raise AssemblyError(str(exc)) from exc
    except OSError as exc:
        raise AssemblyError(f"cannot open the network interfaces: {exc}") from exc
    stack.callback(live.live.close)
    live.live.loop.spin = o.spin
    try:  # goose.prp native: the LRE between the sockets and the hub
        prp = attach_prp(live.live, o.prp or bay.config.goose.prp)
    except OSError as exc:
        raise AssemblyError(f"--prp native: cannot open the supervision sockets: {exc}") from exc
    if prp is not None:
        stack.callback(_close_prp, prp)
    agent.on_fault = live.status.agent_fault  # an error in the agent turns off only it
    if agent.fault is not None:  # the restore already failed
        live.status.agent_fault(agent.fault, RuntimeError(agent.fault))
    return live, prp


def _realtime(o: RunOptions, live: BayLive, stack: ExitStack) -> str | None:
    """CPU wake-up latency, scheduling class and affinity; the note the running line shows."""
    from goosectl.controller.shell.realtime import CpuLatency, Realtime, RealtimeError, apply

    latency = None
    if o.cpu_latency_us is not None:
        try:  # held like the locks: given back when the controller closes
            stack.callback(CpuLatency(o.cpu_latency_us).release)
        except RealtimeError as exc:
            raise AssemblyError(str(exc)) from exc
        latency = f"cpu wake-up latency {o.cpu_latency_us} us"
    applied = None
    if o.realtime or o.cpu is not None:
        try:
            applied = ", ".join(apply(Realtime(o.rt_priority, o.cpu, o.realtime, fifo=o.realtime)))
        except RealtimeError as exc:
            raise AssemblyError(f"--realtime: {exc}") from exc
        live.live.loop.idle_gc = o.realtime
    return ", ".join(n for n in (applied, latency) if n) or None


def _pump_logs(o: RunOptions, stack: ExitStack) -> LinePump:
    """Every diagnostic (status line, alarms, limits, errors) is a log record, queued on a
    line pump that never blocks the loop. Made after the real-time set-up: its thread
    inherits the loop's priority, and is put one below it."""
    stderr = LinePump(sys.stderr)
    stack.callback(stderr.close)
    if o.realtime:
        from goosectl.controller.shell.realtime import helper_threads

        helper_threads(o.rt_priority)
    logs.route(stderr)
    stack.callback(logs.unroute)
    return stderr


def _rgoose(cfg: ControllerConfig, live: BayLive, keys: Any, stack: ExitStack) -> list[Any]:
    """R-GOOSE: the `rgoose:` subscriptions' UDP sockets, served by the same loop."""
    try:
        listeners = attach_subscriptions(live.live, cfg.goose.subscriptions, keys)
    except OSError as exc:
        raise AssemblyError(f"rgoose: cannot open the UDP socket: {exc}") from exc
    for listener in listeners:
        stack.callback(listener.close)
    return listeners


def _serve_control(
    bay: BayController,
    agent: AgentBay,
    live: BayLive,
    prp: PrpLive | None,
    control: ControlServer,
    key_service: KeyService,
) -> None:
    """The control socket's requests, the limit alarms into the status line, and the
    kernel's receive drops as `limit:rx_ring.<side>` rows."""
    # the last trips' frame -> device latencies: `status --json` and the web page's histogram
    control.handler = key_service.ops(
        controller_ops(
            bay,
            agent.handle,
            lambda: {
                "trip_latency_ns": list(islice(reversed(live.device_latencies), 256))[::-1],
                **({"prp": prp.status()} if prp is not None else {}),  # the MIB counters
            },
        )
    )
    control.log.on_alarm = lambda name, on, _detail: live.status.alarms.__setitem__(
        f"limit:{name}", on
    )
    live.status.on_drops = lambda e: control.log.crossed(
        f"rx_ring.{e.side}",
        f"the kernel dropped {e.new} frame(s) on {e.iface}, {e.drops} since start",
        time.monotonic_ns(),
        {"side": e.side, "iface": e.iface, "new": e.new, "drops": e.drops, "freeze": e.freeze},
    )
    control.attach(live.live.add_reader, live.live.remove_reader)
    live.live.on_round.append(control.tick)
