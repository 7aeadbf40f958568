"""`goosectl sim`: run the simulated breaker/IO board on a pty, a tty or a TCP port.

The first line of output is where to connect (a pty path or a socket:// URL), so a
script can start the simulator and read one line. Faults are seeded: the same --seed
and the same traffic give the same faults.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from goosectl.controller.cli import EXIT_OK, CommandError

log = logging.getLogger(__package__)


def _rate(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"rate {v} must be within 0..1 (e.g. 0.05 for 5%)")
    return v


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} must be >= 0")
    return v


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:7000)")
    return host or "127.0.0.1", int(port)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sim", help="run the simulated breaker/IO board (firmware_sim)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--pty", action="store_true", help="serve on a new pty; prints its path")
    where.add_argument("--port", metavar="PATH", help="serve on an existing tty")
    where.add_argument("--tcp", metavar="HOST:PORT", type=_host_port, help="serve TCP (socket://)")
    p.add_argument("--link", metavar="PATH", help="with --pty: the symlink path to print")
    p.add_argument("--seed", type=int, default=0, help="fault RNG seed (default 0)")
    p.add_argument("--corrupt", type=_rate, default=0.0, help="per-frame corruption rate")
    p.add_argument("--drop", type=_rate, default=0.0, help="per-frame loss rate")
    p.add_argument("--delay", type=float, default=0.0, metavar="MS", help="delivery delay")
    p.add_argument("--jitter", type=float, default=0.0, metavar="MS", help="+/- delay jitter")
    p.add_argument("--split", action="store_true", help="deliver frames in partial writes")
    p.add_argument(
        "--stall",
        type=_count,
        nargs="?",
        const=0,
        default=None,
        metavar="N",
        help="stop answering (after N frames; default at once)",
    )
    p.add_argument("--stuck", action="store_true", help="the mechanism does not move")
    p.add_argument("--disconnect-after", type=_count, metavar="N", help="pull the cable once")
    p.add_argument("--reset-after", type=_count, metavar="N", help="watchdog reset once")
    p.add_argument("--open-ms", type=int, help="boot-time open time (default 30)")
    p.add_argument("--close-ms", type=int, help="boot-time close time (default 60)")
    p.add_argument("--spring-ms", type=int, help="boot-time spring charge time (default 5000)")
    p.add_argument(
        "--anti-pump",
        type=int,
        choices=(0, 1),
        help="boot-time anti-pumping (default 1; 0 lets a bench cycle the breaker at once)",
    )
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.set_defaults(func=cmd_sim)


def build_faults(args: argparse.Namespace):
    from goosectl.firmware_sim.faults import FaultConfig
    from goosectl.firmware_sim.shell import ShellFaults

    try:
        line = FaultConfig(args.corrupt, args.drop, args.delay, args.jitter, args.split)
    except ValueError as exc:
        raise CommandError(f"sim: {exc}") from None
    return ShellFaults(
        line=line,
        seed=args.seed,
        stuck=args.stuck,
        stall_after=args.stall,
        disconnect_after=args.disconnect_after,
        reset_after=args.reset_after,
    )


def board_config(args: argparse.Namespace) -> dict:
    from goosectl.protocols.serial.messages import CONFIG_PARAMS, ConfigParam

    breaker: dict[str, int] = {}
    spring: dict[str, int] = {}
    for value, param, target, key in (
        (args.open_ms, ConfigParam.OPEN_TIME_MS, breaker, "open_time_ms"),
        (args.close_ms, ConfigParam.CLOSE_TIME_MS, breaker, "close_time_ms"),
        (args.spring_ms, ConfigParam.SPRING_CHARGE_MS, spring, "spring_charge_ms"),
        (args.anti_pump, ConfigParam.ANTI_PUMP, breaker, "anti_pump"),
    ):
        if value is None:
            continue
        r = CONFIG_PARAMS[param]
        if not r.minimum <= value <= r.maximum:
            raise CommandError(
                f"sim: {param.name}={value} is outside {r.minimum}..{r.maximum} {r.unit}"
            )
        target[key] = value
    return {"breaker": breaker, "spring": spring}


def cmd_sim(args: argparse.Namespace) -> int:
    from goosectl.firmware_sim.core import Firmware
    from goosectl.firmware_sim.shell import DeviceShell
    from goosectl.firmware_sim.transport import PtyTransport, SerialTransport, TcpTransport
    from goosectl.protocols.serial.port import PortError

    faults = build_faults(args)
    config = board_config(args)
    transport: PtyTransport | SerialTransport | TcpTransport
    try:
        if args.pty:
            transport = PtyTransport(args.link)
            where = transport.path
        elif args.port:
            transport = SerialTransport(args.port)
            where = args.port
        else:
            tcp = TcpTransport(*args.tcp)
            transport, where = tcp, tcp.url
    except (PortError, OSError) as exc:
        import os

        if args.port and not os.path.exists(args.port):
            raise CommandError(f"sim --port {args.port}: no such device or file") from None
        raise CommandError(f"sim: cannot open the board's port: {exc.strerror or exc}") from None
    print(where, flush=True)
    import time

    shell = DeviceShell(transport, Firmware(now_ns=time.monotonic_ns(), config=config), faults)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    until = None
    if args.duration is not None:
        until = shell.clock() + int(args.duration * 1e9)
    try:
        shell.run(stop, until)
    except KeyboardInterrupt:
        pass
    finally:
        transport.close()
        st = shell.fw.stats
        log.info(
            "sim: boots=%s operations=%s executed=%s answered=%s rx_errors=%s line_rx=%s "
            "line_tx=%s events=%s",
            st.boots,
            dict(st.operations),
            dict(st.executed),
            dict(st.answered),
            {k.value: v for k, v in shell.fw.decoder.errors.items()},
            dict(shell.rx.counts),
            dict(shell.tx.counts),
            shell.log,
        )
    return EXIT_OK
