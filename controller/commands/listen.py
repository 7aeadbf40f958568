"""`goosectl listen`: the live subscriber; every frame classified, every state change shown.

Frames arrive through a TPACKET_V3 ring (`goose.rx_ring` of the config; default 10,000
full-size frames deep), so a burst waits in memory while frames are printed. Nothing is
lost silently: a `stats` JSON line (frames read, the kernel's drops and ring freezes,
frames still unread at exit) is printed whenever the kernel's drop count grows and once at
exit, in both output modes.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from typing import Any

from goosectl.controller.cli import EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK, CommandError
from goosectl.controller.commands import _prp
from goosectl.controller.commands._auth_args import add_keys_args, keys_for, with_profile
from goosectl.controller.commands.replay import load_goose_config
from goosectl.controller.commands.scl import WireRun, add_check_args, wire_check
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import KeyFile
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.goose.rgoose import receiver_for
from goosectl.controller.report.prp_report import PrpReporter
from goosectl.controller.shell.goose_live import (
    CONTROLLER_RING,
    LiveGoose,
    RxDrops,
    require_raw_sockets,
)
from goosectl.controller.shell.keys import KeyService
from goosectl.controller.shell.prp_live import PrpLive
from goosectl.controller.shell.rgoose_live import RgooseListener
from goosectl.controller.shell.rgoose_live import listen as rgoose_listen
from goosectl.protocols.ethernet.rawsock import RawSocketError, RingSpec
from goosectl.protocols.goose import Vlan

log = logging.getLogger(__package__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("listen", help="live GOOSE subscriber on raw Ethernet (root)")
    p.add_argument("--iface", help="interface of network A (required without --rgoose)")
    p.add_argument(
        "--rgoose",
        metavar="ADDR[:PORT]",
        help="also receive R-GOOSE over UDP: a multicast group to join, or a unicast "
        "address to bind (port 102 by default)",
    )
    p.add_argument(
        "--rgoose-iface", default="", metavar="IPV4", help="join the group on this address"
    )
    p.add_argument("--iface-b", help="interface of network B (redundant A/B)")
    p.add_argument(
        "--config",
        help="subscriptions (YAML/TOML, or SCL with --ied); default: observe every stream",
    )
    p.add_argument("--ied", help="with an SCL --config: the IED to configure")
    add_check_args(p)
    add_keys_args(p)
    p.add_argument("--appid", type=lambda s: int(s, 0), help="print only this APPID")
    p.add_argument("--gocbref", help="print only this gocbRef")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument(
        "--simulation",
        action="store_true",
        help="simulation mode (LPHD.Sim): a subscription switches to its simulated stream "
        "at the first simulated frame (default: simulated frames are refused)",
    )
    _prp.add_arg(p)
    p.set_defaults(func=run)


def open_live(
    hub: GooseHub, iface: str | None, iface_b: str | None, ring: RingSpec | None = CONTROLLER_RING
) -> LiveGoose:
    reason = require_raw_sockets()
    if reason:
        raise CommandError(reason)
    try:
        live = LiveGoose(hub, iface, iface_b, ring=ring)
    except PermissionError as exc:
        raise CommandError(str(exc)) from exc
    except (RawSocketError, OSError) as exc:
        raise CommandError(f"cannot open raw sockets: {exc}") from exc
    for sock in live.socks.values():
        if sock.ring_error:
            log.warning(
                "%s: %s; receiving with recvmsg "
                "(a burst beyond the socket buffer is dropped, and counted)",
                sock.iface,
                sock.ring_error,
            )
    return live


def stats_line(live: LiveGoose) -> str:
    """``{"event": "stats", "received", "drops", "freeze", "unread", "rx", "sides"}``."""
    counters = live.rx_stats()
    return json.dumps(
        {
            "event": "stats",
            "received": counters["received"],
            "drops": counters["drops"],
            "freeze": counters["freeze"],
            "unread": counters["unread"],
            "rx": live.rx_modes,
            "sides": counters["sides"],
        }
    )


def listener_config(config: GooseConfig) -> GooseConfig:
    """The subscriptions of `config` without its publishers: a listener on a station bus
    never sends, since frames of the configured IED's control blocks would impersonate it
    (an injection). Saying so once tells a user why the publishers are not on the wire."""
    if config.publishers:
        names = ", ".join(p.gocb_ref for p in config.publishers)
        log.info("listen never publishes: the config's publishers are not sent (%s)", names)
    return config.model_copy(update={"publishers": []})


def run(args: argparse.Namespace) -> int:
    """Listen until the duration or a signal, printing every frame and event; then the
    counters and the summary (exit 1 when there were findings)."""
    config, keys, check, hub = _listener_hub(args)
    if not args.iface and not args.rgoose:
        raise CommandError("--iface needed (or --rgoose)")
    live = open_live(hub, args.iface, args.iface_b, config.rx_ring.spec(3))
    rgoose = _open_rgoose(args, live, hub, config, keys)
    key_service = KeyService(hub, args.keys or config.keys)
    key_service.start()
    live.on_round.append(key_service.tick)
    signal.signal(signal.SIGHUP, lambda *_: key_service.request())
    # events of timers (a TAL that ran out) are stamped with the host's clock
    reporter = PrpReporter(hub, args.json, sys.stdout, args.appid, args.gocbref, clock=time.time_ns)
    prp = _prp.start(live, config, reporter)
    if prp is not None:
        reporter.set_source(prp.last_trailer)
    interrupted = stop_on_signals(live)
    _print_listening(args, live)
    _listen_until(live, reporter, check, prp, args.duration)
    _print_closing(args, live, rgoose, prp, reporter, check)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FINDINGS if reporter.anomalies.count else EXIT_OK


def _listener_hub(
    args: argparse.Namespace,
) -> tuple[GooseConfig, KeyFile | None, WireRun | None, GooseHub]:
    """The subscriptions of --config (none: observe every stream), the keys, the SCL check
    of --scl, and the hub that receives with them."""
    config = with_profile(args, _prp.config_with(load_goose_config(args.config, args.ied), args))
    keys = keys_for(args, config)
    check = wire_check(args.scl, config)
    config = listener_config(config)
    hub = GooseHub(
        config,
        simulation=args.simulation,
        keys=keys,
        auth_default="optional" if keys is not None else "off",
    )
    return config, keys, check, hub


def _open_rgoose(
    args: argparse.Namespace,
    live: LiveGoose,
    hub: GooseHub,
    config: GooseConfig,
    keys: KeyFile | None,
) -> RgooseListener | None:
    """The R-GOOSE receiver of --rgoose on the same loop (None without it); a bad address
    closes the raw sockets and says why."""
    if not args.rgoose:
        return None
    try:
        receiver = receiver_for(hub, config.subscriptions, keys)
        return rgoose_listen(live, receiver, args.rgoose, args.rgoose_iface)
    except (OSError, ValueError) as exc:
        live.close()
        raise CommandError(f"--rgoose {args.rgoose}: {exc}") from None


def stop_on_signals(live: LiveGoose) -> list[int]:
    """SIGTERM and Ctrl-C stop the loop (the closing report still printed); the list
    returned holds SIGINT once Ctrl-C came, for exit 130."""
    interrupted: list[int] = []

    def on_sigint(*_: object) -> None:
        interrupted.append(signal.SIGINT)
        live.stop()

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, lambda *_: live.stop())
    return interrupted


def _print_listening(args: argparse.Namespace, live: LiveGoose) -> None:
    """The line that says the listener is ready, and on what."""
    ready = {
        "event": "listening",
        "ifaces": [i for i in (args.iface, args.iface_b) if i],
        **({"rgoose": args.rgoose} if args.rgoose else {}),
        "rx": live.rx_modes,
    }
    print(json.dumps(ready) if args.json else f"-- listening on {', '.join(ready['ifaces'])}")
    sys.stdout.flush()


def _listen_until(
    live: LiveGoose,
    reporter: PrpReporter,
    check: WireRun | None,
    prp: PrpLive | None,
    duration: float | None,
) -> None:
    """The loop, every frame reported (and checked against the SCL) as it comes, until
    `duration` seconds or a stop; the sockets closed and PRP's duplicates settled after."""

    def on_effects(out: list) -> None:
        reporter.effects(out)
        if any(type(e) is RxDrops for e in out):
            print(stats_line(live))
        sys.stdout.flush()

    def on_frame(n: int, ts: int, b: bytes, v: Vlan | None, out: list[Any]) -> None:
        if check is not None:
            check.frame(ts, b, v)
        reporter.frame(n, ts, b, v, out)
        sys.stdout.flush()

    until = time.monotonic_ns() + int(duration * 1e9) if duration else None
    try:
        live.run(
            on_frame=on_frame,
            on_effects=on_effects,
            until_ns=until,
        )
    finally:
        live.close()
        if prp is not None:
            prp.close()
            prp.lre.settle()  # every duplicate-table entry counted


def _print_closing(
    args: argparse.Namespace,
    live: LiveGoose,
    rgoose: RgooseListener | None,
    prp: PrpLive | None,
    reporter: PrpReporter,
    check: WireRun | None,
) -> None:
    """The closing report: receive counters, R-GOOSE's and PRP's, the SCL check, the
    summary, the frame counts."""
    print(stats_line(live))
    if rgoose is not None:
        rgoose.close()
        counts = {"datagrams": rgoose.datagrams, **rgoose.receiver.counters()}
        print(json.dumps({"event": "rgoose", "counts": counts}))
    if prp is not None:
        reporter.prp(prp.status())
    if check is not None and args.json:
        check.print(as_json=True)  # before the closing counters line
    reporter.summary()
    if check is not None and not args.json:
        check.print(as_json=False)
    if not args.json:
        print(json.dumps({"frames": live.frames, "sent": live.sent}))
