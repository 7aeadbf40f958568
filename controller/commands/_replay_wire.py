"""`goosectl replay FILE --iface X [--iface-b Y]`: the capture put back on a wire.

Part of the `replay` command (its options and its run when ``--iface`` is given); the
leading underscore keeps it out of the command discovery of `controller.cli`. Without
``--iface`` `replay` runs the machines over the capture on the virtual clock, as before.

The tcpreplay user's line and this one: `tcpreplay -i eth0 f.pcap` is
`goosectl replay f.pcap --iface eth0`; `-x F` is `--speed F`, `-t` `--topspeed`, `-p N`
`--pps N`, `-l N` `--loop N` (0: forever), `tcprewrite --enet-smac=MAC` `--rewrite-src MAC`.
On top, the rewrites a relay tester needs (`controller.replay.wire_rewrite`):
`--rewrite-time now` and `--continue-stnum`.

stdout: a ``replayed`` JSON line at the end (frames, sends per side, rewrites, refused
sends). stderr: progress once a second (frames sent, rate, time left).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from goosectl.controller.cli import CommandError
from goosectl.controller.commands import _prp
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.prp import Lre, LreConfig
from goosectl.controller.replay.wire_rewrite import WireRewrite
from goosectl.controller.shell.goose_live import require_raw_sockets
from goosectl.controller.shell.wire_replay import (
    Progress,
    WireReplay,
    WireReplaySpec,
    WireReplayStats,
    capture_streams,
    listen_for_streams,
)
from goosectl.protocols.ethernet.mac import parse_mac
from goosectl.protocols.ethernet.pcap import CaptureError
from goosectl.protocols.ethernet.rawsock import RawSocket, RawSocketError
from goosectl.protocols.prp import ETHERTYPE as PRP_ETHERTYPE
from goosectl.protocols.prp import parse_rct, strip_rct


def add_args(p: argparse.ArgumentParser) -> None:
    """The options of replay onto a wire, on `replay`'s parser."""
    g = p.add_argument_group("onto a wire (tcpreplay's job; root)")
    g.add_argument("--iface", help="send the capture on this interface (network A)")
    g.add_argument("--iface-b", help="and on this one (network B): every frame on both")
    g.add_argument("--pps", type=float, help="with --iface: N frames a second, evenly")
    g.add_argument("--rewrite-src", metavar="MAC", help="with --iface: this source MAC")
    g.add_argument(
        "--rewrite-time",
        choices=["now"],
        help="with --iface: every t shifted so the first frame's is now (quality kept)",
    )
    g.add_argument(
        "--continue-stnum",
        action="store_true",
        help="with --iface: stNum/sqNum continued from the live stream heard on the "
        "interface (and across --loop), so a subscriber sees no rollback",
    )
    g.add_argument(
        "--continue-wait",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="with --continue-stnum: listen this long at most for the live streams "
        "(default 3; ends as soon as every stream of the capture was heard)",
    )


class PrpTrailers:
    """``--prp``: the capture's trailers replaced per LAN. A captured trailer carries the
    recording node's SeqNr and one LanId: replayed on both LANs a peer would count wrong
    LANs, and replayed twice within 400 ms drop the second pass as duplicates. So a valid
    trailer is stripped and (native) a fresh one appended from this node's own SeqNr
    counter, LanId A on --iface and B on --iface-b; the kernel's PRP device (kernel)
    appends its own. The capture's supervision frames (the recording node's) are not
    replayed."""

    def __init__(self, mode: str) -> None:
        self.native = mode == "native"
        self.lre = Lre(LreConfig())
        self._last: tuple[bytes, bytes, bytes] | None = None
        self.stripped = 0

    def __call__(self, frame: bytes, side: str) -> bytes | None:
        last = self._last
        if last is None or last[0] is not frame:
            et = frame[16:18] if frame[12:14] == b"\x81\x00" else frame[12:14]
            if int.from_bytes(et, "big") == PRP_ETHERTYPE:
                return None
            body = frame
            if parse_rct(frame) is not None:
                body = strip_rct(frame)
                self.stripped += 1
            a, b = self.lre.send(body) if self.native else (body, body)
            last = self._last = (frame, a, b)
        return last[1] if side == "A" else last[2]


def wanted(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "iface", None))


def _pace(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """(speed, pps): capture timing by default, as tcpreplay."""
    if args.pps is not None:
        if args.pps <= 0:
            raise CommandError("--pps must be > 0")
        if args.speed is not None or args.topspeed:
            raise CommandError("--pps: not with --speed or --topspeed (one pace at a time)")
        return None, args.pps
    if args.speed is not None:
        if args.speed <= 0:
            raise CommandError("--speed must be > 0")
        return args.speed, None
    return (None if args.topspeed else 1.0), None


def _progress(p: Progress) -> None:
    total = "" if p.total is None else f"/{p.total}"
    left = "" if p.left_s is None else f", {p.left_s:.0f} s left"
    print(f"replay: {p.sent}{total} frames sent, {p.rate_fps:.0f} frames/s{left}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    """Send the capture's frames on the wire, paced and rewritten as asked; one closing
    JSON line with what was sent, rewritten and refused."""
    speed, pps = _pace(args)
    if args.loop < 0:
        raise CommandError("--loop must be >= 0 (0: forever)")
    if args.iface_b is not None and args.iface_b == args.iface:
        raise CommandError(f"--iface-b: {args.iface_b} is already --iface")
    rewrite = _rewrite(args)
    reason = require_raw_sockets()
    if reason:
        raise CommandError(reason)
    ifaces = {"A": args.iface, **({"B": args.iface_b} if args.iface_b else {})}
    prp_mode = _prp.config_with(GooseConfig(), args).prp.mode
    trailers = PrpTrailers(prp_mode) if prp_mode != "off" else None
    socks: dict[str, RawSocket] = {}
    try:
        _open_sockets(ifaces, socks)
        try:
            heard = _continue_streams(args, socks, rewrite)
            spec = WireReplaySpec(
                path=args.file,
                ifaces=ifaces,
                speed=speed,
                pps=pps,
                loops=args.loop,
                rewrite=rewrite,
                per_side=trailers,
                rewrite_time_now=args.rewrite_time == "now",
            )
            stats = _send(spec, socks, args.quiet)
        except CaptureError as exc:
            raise CommandError(str(exc)) from exc
    finally:
        for sock in socks.values():
            sock.close()
    print(_replayed_line(stats, rewrite, trailers, heard), flush=True)
    return 0


def _rewrite(args: argparse.Namespace) -> WireRewrite:
    """The rewriting --continue-stnum and --rewrite-src ask for."""
    rewrite = WireRewrite(renumber=args.continue_stnum)
    if args.rewrite_src:
        try:
            rewrite.src = parse_mac(args.rewrite_src)
        except ValueError as exc:
            raise CommandError(f"--rewrite-src: {exc}") from exc
    return rewrite


def _open_sockets(ifaces: dict[str, str], socks: dict[str, RawSocket]) -> None:
    """A raw socket per side into `socks` (the caller closes them, also on an error)."""
    try:
        for side, iface in ifaces.items():
            socks[side] = RawSocket(iface, promiscuous=True, timestamps=False)
    except PermissionError as exc:
        raise CommandError(str(exc)) from exc
    except (RawSocketError, OSError) as exc:
        raise CommandError(f"cannot open raw sockets: {exc}") from exc


def _continue_streams(
    args: argparse.Namespace, socks: dict[str, RawSocket], rewrite: WireRewrite
) -> dict[tuple[str, int], tuple[int, int]]:
    """With --continue-stnum: the capture's streams heard on the wire, each renumbered
    to go on from the stNum/sqNum heard."""
    heard: dict[tuple[str, int], tuple[int, int]] = {}
    if args.continue_stnum:
        heard = listen_for_streams(socks, args.continue_wait, capture_streams(args.file))
        for (gocb, appid), (st, sq) in heard.items():
            rewrite.continue_from(gocb, appid, st, sq)
    return heard


def _send(spec: WireReplaySpec, socks: dict[str, RawSocket], quiet: bool) -> WireReplayStats:
    """The replay, until its end or a signal, with progress lines unless quiet."""
    replay = WireReplay(spec, socks, on_progress=None if quiet else _progress)
    signal.signal(signal.SIGINT, lambda *_: replay.stop())
    signal.signal(signal.SIGTERM, lambda *_: replay.stop())
    stats = replay.run()
    if not quiet:
        _progress(replay.progress(replay.elapsed_s))  # the closing line
    return stats


def _replayed_line(
    stats: WireReplayStats,
    rewrite: WireRewrite,
    trailers: PrpTrailers | None,
    heard: dict[tuple[str, int], tuple[int, int]],
) -> str:
    """The closing JSON line."""
    return json.dumps(
        {
            "event": "replayed",
            "frames": stats.frames,
            "loops": stats.loops,
            "sent": stats.per_side,
            "rewritten": rewrite.rewritten,
            "not_rewritten": rewrite.not_rewritten,
            **({"prp_trailers_replaced": trailers.stripped} if trailers else {}),
            "continued": sorted(f"{g} (APPID {a:#06x})" for g, a in heard),
            "tx_retries": stats.tx_retries,
            "link_down": stats.link_down,
            "send_errors": stats.send_errors,
            **({"last_error": stats.last_error} if stats.last_error else {}),
            **({"rewrite_error": rewrite.last_error} if rewrite.last_error else {}),
        }
    )
