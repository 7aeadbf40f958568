"""`goosectl capture`: live frames from A (and B) into a pcapng file, nothing lost silently.

The command a tcpdump or dumpcap user reaches for (`tcpdump -i eth0 -w f.pcap ether proto
0x88b8`, `dumpcap -i a -i b -w f.pcapng`), with what a GOOSE engineer needs on top: one
file for both LANs of a redundant pair (one interface block each), the VLAN tag the
kernel strips put back, the kernel's drop counts in the file, and a ring deep enough for a
burst at line rate. It opens its own sockets, so it runs beside `goosectl run` without
touching the controller's path.

stdout: a ``capturing`` JSON line once the sockets are open, and a ``capture`` line at the
end (frames written, files kept, per side the kernel's counters). stderr: tcpdump's three
closing lines.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from goosectl.controller.cli import CommandError
from goosectl.controller.commands import _prp
from goosectl.controller.commands.replay import load_goose_config
from goosectl.controller.shell.capture import FILTERS, Capture, CaptureSpec
from goosectl.controller.shell.goose_live import require_raw_sockets
from goosectl.protocols.ethernet.rawsock import RawSocketError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capture", help="record live frames to pcapng, A and B in one file (root)")
    p.add_argument("--iface", "-i", required=True, help="interface of network A")
    p.add_argument("--iface-b", help="interface of network B (a second interface block)")
    p.add_argument("-w", "--write", dest="write", required=True, type=Path, help="pcapng file")
    p.add_argument("-c", "--count", type=int, help="stop after this many frames")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument(
        "--rotate-mb",
        type=float,
        help="start a new file (NAME_00001.pcapng, NAME_00002.pcapng ...) past this size",
    )
    p.add_argument("--keep", type=int, default=0, help="with --rotate-mb: keep the newest K")
    p.add_argument(
        "--filter",
        choices=sorted(FILTERS),
        help="goose: EtherType 0x88B8; prp: GOOSE and PRP supervision (0x88FB); all: every "
        "frame (default goose, prp with --prp native or kernel)",
    )
    _prp.add_arg(p)
    p.add_argument(
        "--config", help="the receive ring (`goose.rx_ring`) from this config; default 10,000"
    )
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> None:
    if args.count is not None and args.count < 1:
        raise CommandError(f"-c/--count: {args.count} is not a positive number of frames")
    if args.duration is not None and args.duration <= 0:
        raise CommandError(f"--duration: {args.duration} is not a positive number of seconds")
    if args.rotate_mb is not None and args.rotate_mb <= 0:
        raise CommandError(f"--rotate-mb: {args.rotate_mb} is not a positive size")
    if args.keep < 0 or (args.keep and args.rotate_mb is None):
        raise CommandError("--keep: needs --rotate-mb and a count of files of 1 or more")
    if args.iface_b is not None and args.iface_b == args.iface:
        raise CommandError(f"--iface-b: {args.iface_b} is already --iface")


def run(args: argparse.Namespace) -> int:
    _check(args)
    config = _prp.config_with(load_goose_config(Path(args.config) if args.config else None), args)
    if args.filter is None:
        args.filter = "goose" if config.prp.mode == "off" else "prp"
    reason = require_raw_sockets()
    if reason:
        raise CommandError(reason)
    ifaces = {"A": args.iface, **({"B": args.iface_b} if args.iface_b else {})}
    spec = CaptureSpec(
        path=args.write,
        ifaces=ifaces,
        filter=args.filter,
        count=args.count,
        duration_s=args.duration,
        rotate_bytes=int(args.rotate_mb * 1_000_000) if args.rotate_mb else None,
        keep=args.keep,
        ring=config.rx_ring.spec(3),
    )
    try:
        cap = Capture(spec)
    except PermissionError as exc:
        raise CommandError(str(exc)) from exc
    except (RawSocketError, OSError) as exc:
        raise CommandError(f"cannot open raw sockets: {exc}") from exc
    signal.signal(signal.SIGINT, lambda *_: cap.stop())
    signal.signal(signal.SIGTERM, lambda *_: cap.stop())
    ready = {
        "event": "capturing",
        "ifaces": list(ifaces.values()),
        "file": str(args.write),
        "filter": args.filter,
        "rx": {s: sock.rx_mode for s, sock in cap.socks.items()},
    }
    print(json.dumps(ready), flush=True)
    try:
        try:
            cap.run()
        except OSError as exc:
            raise CommandError(f"capture stopped: {exc}") from exc
    finally:
        summary = cap.summary()
        cap.close_sockets()
    print(json.dumps(summary), flush=True)
    sides = summary["sides"]
    assert isinstance(sides, dict)
    seen = sum(s["kernel_packets"] for s in sides.values())
    drops = sum(s["drops"] for s in sides.values())
    print(
        f"{summary['frames']} packets captured\n{seen} packets received by filter\n"
        f"{drops} packets dropped by kernel",
        file=sys.stderr,
    )
    return 0
