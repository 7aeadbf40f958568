"""`goosectl run --config CFG`: the controller live (root for raw sockets)."""

from __future__ import annotations

import argparse
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from goosectl.controller.cli import EXIT_INTERRUPTED, CommandError, add_log_args
from goosectl.controller.commands import _prp
from goosectl.controller.commands._auth_args import add_keys_args, keys_for, with_profile
from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.config.validate import ConfigError
from goosectl.controller.engine.resources import shipped
from goosectl.controller.shell.assemble import AssemblyError, RunOptions, assemble
from goosectl.controller.shell.goose_live import require_raw_sockets
from goosectl.controller.shell.reflex_live import KEEP_WARM_MS

PROCEDURES = shipped("goosectl.controller.agent", "procedures")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run the bay controller live: GOOSE on raw Ethernet (A/B), "
        "the device on a serial port",
    )
    _add_source_args(p)
    add_keys_args(p)
    _add_journal_args(p)
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    _prp.add_arg(p)
    _add_output_args(p)
    _add_host_args(p)
    _add_agent_args(p)
    _add_mode_args(p)
    p.set_defaults(func=run)


def _add_source_args(p: argparse.ArgumentParser) -> None:
    """Where the controller's config, networks, device and journal are."""
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


def _add_journal_args(p: argparse.ArgumentParser) -> None:
    """How much the journals keep, and how the agent's reaches the disk."""
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


def _add_output_args(p: argparse.ArgumentParser) -> None:
    """What the controller says on stderr, and in which form."""
    add_log_args(p, quiet="no status line every second")
    p.add_argument(
        "--log-json",
        action="store_true",
        help="diagnostics on stderr as JSON, one object per line (time, level, logger, "
        "message; an event's name and fields: the status line's counters, an alarm's "
        "name, a limit's detail)",
    )


def _add_host_args(p: argparse.ArgumentParser) -> None:
    """How the controller uses the host's CPUs: polling, real-time priority, affinity."""
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


def _add_agent_args(p: argparse.ArgumentParser) -> None:
    """The device-and-agent side: no network, the state folder, procedures, control socket."""
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


def _add_mode_args(p: argparse.ArgumentParser) -> None:
    """The behaviour at start: mode, simulation, the trip reflex."""
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
    p.add_argument(
        "--reflex",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the trip reflex (on by default): a trip frame the engine armed for writes the "
        "TRIP before the engine handles it, the engine still deciding and checking it "
        "(docs/reflex.md); --no-reflex leaves every frame to the engine's path alone",
    )
    p.add_argument(
        "--keep-warm-ms",
        type=_keep_warm,
        default=KEEP_WARM_MS,
        metavar="MS",
        help="rehearse the trip reflex's armed path every MS milliseconds, nothing written "
        f"or sent, so a trip after a long quiet runs on warm caches (default {KEEP_WARM_MS:g}; "
        "0: never; "
        "docs/reflex.md, Keep-warm)",
    )


def _keep_warm(text: str) -> float:
    """`--keep-warm-ms`: 0 (off) or 0.1-1000 ms; epoll sleeps whole milliseconds, so a
    period under 1 ms rehearses at every wake, about once a millisecond."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of milliseconds") from None
    if v != 0 and not 0.1 <= v <= 1000:
        raise argparse.ArgumentTypeError(f"{v} ms: give 0 (never) or 0.1 to 1000 ms")
    return v


def run(args: argparse.Namespace) -> int:
    """Parse and check the options, have the controller assembled, serve it, report."""
    cfg, keys, options = _options(args)
    try:
        controller = assemble(cfg, keys, options)
    except AssemblyError as exc:
        raise CommandError(str(exc)) from exc
    interrupted: list[int] = []

    def on_sigint(*_: object) -> None:  # Ctrl-C: stop as on SIGTERM, then exit 130
        interrupted.append(signal.SIGINT)
        controller.stop()

    signal.signal(signal.SIGHUP, lambda *_: controller.keys.request())
    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, lambda *_: controller.stop())
    until = time.monotonic_ns() + int(args.duration * 1e9) if args.duration else None
    print(json.dumps(controller.running()), flush=True)
    controller.serve(until)
    print(json.dumps(controller.stopped()))
    return EXIT_INTERRUPTED if interrupted else 0


def _options(args: argparse.Namespace) -> tuple[ControllerConfig, Any, RunOptions]:
    """The config and what the command line adds to it, each mistake a CommandError."""
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
    iface_b = None if args.no_network else (args.iface_b if args.iface else cfg.goose.interface_b)
    options = RunOptions(
        iface=iface,
        iface_b=iface_b,
        port=port,
        procedures=args.procedures,
        state=args.state,
        journal=args.journal,
        control=args.control,
        keys=args.keys,
        prp=_prp.config_with(cfg.goose, args, iface, iface_b).prp,
        journal_max_mb=args.journal_max_mb,
        journal_max_days=args.journal_max_days,
        journal_queue=args.journal_queue,
        agent_fsync=args.agent_fsync,
        mode=args.mode,
        simulation=args.simulation,
        spin=args.spin,
        cpu_latency_us=args.cpu_latency_us,
        realtime=args.realtime,
        cpu=args.cpu,
        rt_priority=args.rt_priority,
        reflex=args.reflex,
        keep_warm_ms=args.keep_warm_ms,
        uplink_hold=_uplink_hold(args.state),
    )
    return cfg, keys, options


def _uplink_hold(state: Path | None) -> Callable[[], int | None] | None:
    """What retention must keep for a fleet uplink of this state folder: the rows its
    broker has not acknowledged (`goosectl uplink`, docs/fleet.md)."""
    if state is None:
        return None
    from goosectl.controller.fleet.source import held_from

    return lambda: held_from(state)
