"""`goosectl run --config CFG`: the controller live (root for raw sockets)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections import deque
from collections.abc import Callable
from itertools import islice
from pathlib import Path

from goosectl.controller import logs
from goosectl.controller.cli import EXIT_INTERRUPTED, CommandError, add_log_args
from goosectl.controller.commands import _prp
from goosectl.controller.commands._auth_args import add_keys_args, keys_for, with_profile
from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.config.validate import ConfigError
from goosectl.controller.engine.journal import JournalIOError
from goosectl.controller.engine.resources import shipped
from goosectl.controller.report.bay_report import percentiles
from goosectl.controller.shell.goose_live import require_raw_sockets
from goosectl.controller.shell.journal_writer import LiveJournals, Retention
from goosectl.controller.shell.keys import KeyService
from goosectl.controller.shell.output_pump import LinePump
from goosectl.controller.shell.rgoose_live import attach_subscriptions

PROCEDURES = shipped("goosectl.controller.agent", "procedures")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run the bay controller live: GOOSE on raw Ethernet (A/B), "
        "the device on a serial port",
    )
    p.add_argument(
        "--config", type=Path, default=DEFAULT_CONFIG, help="YAML/TOML/JSON, or SCL with --ied"
    )
    p.add_argument("--ied", help="with an SCL --config: the IED this controller is")
    p.add_argument("--iface", help="network A (default: goose.interface_a of the config)")
    p.add_argument(
        "--iface-b", help="network B (default: goose.interface_b, unless --iface is given)"
    )
    p.add_argument("--port", help="serial port or URL of the device (default: device.port)")
    p.add_argument("--journal", type=Path, help="SQLite journal (default: config journal)")
    add_keys_args(p)
    p.add_argument(
        "--journal-max-mb",
        type=float,
        default=512,
        help="retention: the oldest journal rows are deleted above this size (0: no limit)",
    )
    p.add_argument(
        "--journal-max-days",
        type=float,
        default=30,
        help="retention: journal rows older than this are deleted (0: no limit)",
    )
    p.add_argument(
        "--journal-queue",
        type=int,
        default=65_536,
        help="rows the journal writer may hold; beyond, rows are dropped and counted",
    )
    p.add_argument(
        "--agent-fsync",
        choices=["thread", "inline"],
        default="thread",
        help="agent journal: commit before every effect, fsync on a thread right after "
        "(default), or inline before the effect (power-loss safe, an fsync on the loop)",
    )
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    _prp.add_arg(p)
    add_log_args(p, quiet="no status line every second")
    p.add_argument(
        "--log-json",
        action="store_true",
        help="diagnostics on stderr as JSON, one object per line (time, level, logger, "
        "message; an event's name and fields: the status line's counters, an alarm's "
        "name, a limit's detail)",
    )
    p.add_argument(
        "--spin",
        action="store_true",
        help="busy-poll instead of sleeping between "
        "frames: lower latency for a controller that owns a CPU core",
    )
    p.add_argument(
        "--realtime",
        action="store_true",
        help="SCHED_FIFO, memory locked, the garbage collector only when idle "
        "(needs root or CAP_SYS_NICE and CAP_IPC_LOCK; see the README's host tuning)",
    )
    p.add_argument(
        "--rt-priority",
        type=int,
        default=50,
        metavar="N",
        help="with --realtime: the SCHED_FIFO priority (1-99, default 50)",
    )
    p.add_argument("--cpu", type=int, metavar="N", help="run on this CPU only (affinity)")
    p.add_argument(
        "--cpu-latency-us",
        type=int,
        metavar="N",
        help="hold the host's CPU wake-up latency at N us while running (PM QoS, "
        "/dev/cpu_dma_latency; 0: idle CPUs poll instead of sleeping, the fastest wake-up "
        "for a frame, every CPU busy when idle; needs root; see the README's host tuning)",
    )
    p.add_argument(
        "--no-network",
        action="store_true",
        help="no GOOSE: the device and the agent only (no root needed)",
    )
    p.add_argument(
        "--state",
        type=Path,
        help="folder for the journals (bay.sqlite, "
        "agent.sqlite); an existing one is resumed: sessions continue where they were",
    )
    p.add_argument(
        "--procedures",
        type=Path,
        default=PROCEDURES,
        help="folder of procedure files (hot-reloaded)",
    )
    p.add_argument(
        "--control",
        type=Path,
        help="control socket for `goosectl agent`, `mode`, `status` "
        "(default: $GOOSECTL_CONTROL or a per-user path)",
    )
    p.add_argument(
        "--mode",
        choices=["on", "test", "test-blocked", "off"],
        help="behaviour mode at start (default: logic.mode of the config); "
        "`goosectl mode` switches it while running",
    )
    p.add_argument(
        "--simulation",
        action="store_true",
        help="simulation mode (LPHD.Sim) at start: subscriptions take simulated streams",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config, ControllerConfig, args.ied)
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc
    cfg = cfg.model_copy(update={"goose": with_profile(args, cfg.goose)})
    keys = keys_for(args, cfg.goose)
    iface = None if args.no_network else (args.iface or cfg.goose.interface_a)
    if not iface and not args.no_network:
        raise CommandError(f"{args.config}: goose.interface_a is not set and no --iface given")
    port = args.port or cfg.device.port
    if port == "sim":
        raise CommandError(
            "device.port is `sim`: start one with `goosectl sim --pty` and "
            "pass its path with --port"
        )
    reason = None if args.no_network else require_raw_sockets()
    if reason:
        raise CommandError(reason)
    prp_cfg = _prp.config_with(
        cfg.goose, args, iface,
        None if args.no_network else (args.iface_b if args.iface else cfg.goose.interface_b),
    )  # fmt: skip
    from goosectl.controller.agent.host import AgentBay
    from goosectl.controller.agent.planner import FolderPlanner
    from goosectl.controller.agent.service import AgentService
    from goosectl.controller.logic.core import BayController
    from goosectl.controller.shell.control import controller_ops
    from goosectl.controller.shell.control_log import ControlLog
    from goosectl.controller.shell.live_bay import BayLive
    from goosectl.controller.shell.locks import LockError

    if args.state is not None:
        from goosectl.controller.shell.state_folder import StateFolderError, prepare_state_folder

        try:
            prepare_state_folder(args.state)
        except StateFolderError as exc:
            raise CommandError(str(exc)) from exc
    journal_path = (
        args.journal or cfg.journal or (args.state / "bay.sqlite" if args.state else None)
    )
    try:
        held, control = _claim(args, cfg, journal_path)
    except LockError as exc:
        raise CommandError(str(exc)) from exc

    def abandon() -> None:
        """An exit before the loop: the socket and the locks go now, not at exit."""
        control.close()
        for lock in held:
            lock.release()

    try:
        journals = LiveJournals(
            journal_path,
            args.state / "agent.sqlite" if args.state else None,
            Retention(
                max_bytes=int(args.journal_max_mb * 1024 * 1024) or None,
                max_age_s=args.journal_max_days * 86400 or None,
                hold=_uplink_hold(args.state),
            ),
            args.journal_queue,
            args.agent_fsync,
        )
    except JournalIOError as exc:
        abandon()
        raise CommandError(str(exc)) from exc
    journal = journals.bay
    now = time.monotonic_ns()
    bay = BayController(cfg, now, journal, keys)
    control.log = ControlLog(journal, now, quiet_s=cfg.control.alarm_quiet_s)
    if args.mode:
        bay.set_mode(args.mode, now, "command line")
    if args.simulation:
        bay.set_simulation(True, now, "command line")
    service = AgentService(
        FolderPlanner(args.procedures),
        journals.agent,
        confirm_timeout_ms=cfg.agent.confirm_timeout_s * 1000,
        max_open=cfg.agent.max_open_sessions,
        keep_finished=cfg.agent.keep_finished_sessions,
    )
    agent = AgentBay(bay, service, resume_max_age_s=cfg.agent.resume_max_age_s)
    agent.responses = deque(maxlen=1024)  # nobody reads them here: the last ones, not all

    def expired(notice, now_ns: int) -> None:
        if notice.topic == "expired":  # a confirmation nobody gave: counted, alarmed
            control.log.crossed("agent.confirm_timeout", notice.data["text"], now_ns)

    agent.on_notify = expired
    restored = agent.restore(now)
    iface_b = None if args.no_network else (args.iface_b if args.iface else cfg.goose.interface_b)
    try:
        # -q: the status line (an INFO event) is off at its level check
        live = BayLive(bay, iface, iface_b, port, endpoint=agent)
    except PermissionError as exc:
        abandon()
        raise CommandError(str(exc)) from exc
    except OSError as exc:
        abandon()
        raise CommandError(f"cannot open the network interfaces: {exc}") from exc
    live.live.spin = args.spin
    try:
        _prp.start(live.live, prp_cfg)  # goose.prp native: the LRE between sockets and hub
    except OSError as exc:
        live.live.close()
        abandon()
        raise CommandError(f"--prp native: cannot open the supervision sockets: {exc}") from exc
    agent.on_fault = live.status.agent_fault  # an error in the agent turns off only it
    if agent.fault is not None:  # the restore already failed
        live.status.agent_fault(agent.fault, RuntimeError(agent.fault))
    latency_note = None
    if args.cpu_latency_us is not None:
        from goosectl.controller.shell.realtime import CpuLatency, RealtimeError

        try:
            # held like the locks: given back by abandon() or when the loop ends
            held.append(CpuLatency(args.cpu_latency_us))
        except RealtimeError as exc:
            live.live.close()
            abandon()
            raise CommandError(str(exc)) from exc
        latency_note = f"cpu wake-up latency {args.cpu_latency_us} us"
    if args.realtime or args.cpu is not None:
        from goosectl.controller.shell.realtime import Realtime, RealtimeError, apply

        try:
            rt = Realtime(args.rt_priority, args.cpu, args.realtime, fifo=args.realtime)
            applied = apply(rt)
        except RealtimeError as exc:
            live.live.close()
            abandon()
            raise CommandError(f"--realtime: {exc}") from exc
        live.live.idle_gc = args.realtime
        realtime_note = ", ".join(applied)
    else:
        realtime_note = None
    if latency_note is not None:
        realtime_note = f"{realtime_note}, {latency_note}" if realtime_note else latency_note
    stderr = LinePump(sys.stderr)  # never blocks the loop
    if args.realtime:  # the pump's thread inherited the loop's priority: one below it
        from goosectl.controller.shell.realtime import helper_threads

        helper_threads(args.rt_priority)
    # every diagnostic (status line, alarms, limits, errors) is a log record: queued there
    logs.route(stderr)
    live.live.on_round.append(journals.watch(live.status))
    why = live.open_port()
    if why is not None:
        live.live.close()
        abandon()
        raise CommandError(f"device port {port}: {why}")
    try:  # R-GOOSE: the `rgoose:` subscriptions' UDP sockets, served by the same loop
        rgoose_listeners = attach_subscriptions(live.live, cfg.goose.subscriptions, keys)
    except OSError as exc:
        live.live.close()
        abandon()
        raise CommandError(f"rgoose: cannot open the UDP socket: {exc}") from exc
    key_service = KeyService(bay.hub, args.keys or cfg.goose.keys, control.log)
    key_service.start()
    live.live.on_round.append(key_service.tick)
    signal.signal(signal.SIGHUP, lambda *_: key_service.request())
    # the last trips' frame -> device latencies: `status --json` and the web page's histogram
    control.handler = key_service.ops(
        controller_ops(
            bay,
            agent.handle,
            lambda: {"trip_latency_ns": list(islice(reversed(live.device_latencies), 256))[::-1]},
        )
    )
    control.log.on_alarm = lambda name, on, _detail: live.status.alarms.__setitem__(
        f"limit:{name}", on
    )
    # kernel drops (receive ring full): a `limit:rx_ring.<side>` row in the journal, its
    # alarm in the status line, beside the drops= count
    live.status.on_drops = lambda e: control.log.crossed(
        f"rx_ring.{e.side}",
        f"the kernel dropped {e.new} frame(s) on {e.iface}, {e.drops} since start",
        time.monotonic_ns(),
        {"side": e.side, "iface": e.iface, "new": e.new, "drops": e.drops, "freeze": e.freeze},
    )
    control.attach(live.live.add_reader, live.live.remove_reader)
    live.live.on_round.append(control.tick)
    interrupted: list[int] = []

    def on_sigint(*_: object) -> None:  # Ctrl-C: stop as on SIGTERM, then exit 130
        interrupted.append(signal.SIGINT)
        live.stop()

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, lambda *_: live.stop())
    until = time.monotonic_ns() + int(args.duration * 1e9) if args.duration else None
    print(
        json.dumps(
            {
                "event": "running",
                "iface": iface,
                "iface_b": iface_b,
                "port": port,
                "control": str(control.path),
                "mode": bay.mode_name,
                "simulation": bay.simulation,
                "sessions_restored": restored,
                "rx": live.live.rx_modes,
                "realtime": realtime_note,
            }
        ),
        flush=True,
    )
    try:
        live.run(until)
    finally:
        for listener in rgoose_listeners:
            listener.close()
        control.close()
        journals.close()
        logs.unroute()
        stderr.close()
        for lock in held:
            lock.release()
    print(
        json.dumps(
            {
                "event": "stopped",
                "breaker": bay.bay.state,
                **({"rgoose": rgoose_listeners[0].receiver.counters()} if rgoose_listeners else {}),
                "mode": bay.mode_name,
                "frames_in": live.live.frames,
                "frames_out": live.live.sent,
                "rx": live.live.rx_stats(),
                "tx": {"refused": live.live.tx_refused, "superseded": live.live.tx_superseded},
                "counters": dict(live.status.counts),
                "frame_latency_us": percentiles(list(live.live.latencies)),
                "stamp_to_sent_us": percentiles(list(live.live.stamp_latencies)),
                "frame_to_device_us": percentiles(list(live.device_latencies)),
                "goose": bay.hub.counters(),
                "journal": journals.report(),
                "stderr": stderr.status(),
                "control": {**control.counts, **control.log.counts()},
            }
        )
    )
    return EXIT_INTERRUPTED if interrupted else 0


def _claim(args: argparse.Namespace, cfg: ControllerConfig, journal: Path | None):
    """What this controller must own alone, taken before anything is opened: the state
    folder, the journal, the control socket (the serial device is locked where the link
    opens it). LockError (exit 2) names what and the pid that holds it; nothing taken is
    kept then."""
    from goosectl.controller.shell.control import ControlServer, default_path
    from goosectl.controller.shell.locks import lock_file, lock_journal

    held = []
    try:
        if args.state is not None:
            held.append(lock_file(args.state / "lock", f"state folder {args.state}"))
        if journal is not None:  # by the file itself: any name or hard link meets the lock
            held.append(lock_journal(journal, f"journal {journal}"))
        path = args.control or cfg.control.socket or default_path()
        return held, ControlServer(path, None, cfg=cfg.control)
    except BaseException:
        for lock in held:
            lock.release()
        raise


def _uplink_hold(state: Path | None) -> Callable[[], int | None] | None:
    """What retention must keep for a fleet uplink of this state folder: the rows its
    broker has not acknowledged (`goosectl uplink`, docs/fleet.md)."""
    if state is None:
        return None
    from goosectl.controller.fleet.source import held_from

    return lambda: held_from(state)
