"""`goosectl publish`: a GOOSE publisher on raw Ethernet; each stdin line is a new state."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any

from pydantic import ValidationError

from goosectl.controller.cli import EXIT_INTERRUPTED, CommandError
from goosectl.controller.commands import _prp
from goosectl.controller.commands._auth_args import add_keys_args, keys_for, with_profile
from goosectl.controller.commands.listen import open_live, stop_on_signals
from goosectl.controller.config.goose import GooseConfig, PublisherCfg, VlanCfg
from goosectl.controller.config.keys import KeyFile
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.goose.publisher_actions import PublishError
from goosectl.controller.report.goose_report import Reporter
from goosectl.controller.shell.goose_live import LiveGoose
from goosectl.controller.shell.keys import KeyService
from goosectl.controller.shell.prp_live import PrpLive
from goosectl.controller.shell.rgoose_live import RgoosePublisher, open_socket, parse_target
from goosectl.protocols.goose import GooseError, all_data_from_json, data_shape

log = logging.getLogger(__package__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "publish",
        help="publish GOOSE on raw Ethernet (root); each line on "
        "stdin holding a JSON value list is a state change",
    )
    _add_transport_args(p)
    _add_signing_args(p)
    _add_address_args(p)
    _add_state_args(p)
    _add_injection_args(p)
    p.add_argument("--json", action="store_true")
    _prp.add_arg(p)
    p.add_argument(
        "--duration",
        type=float,
        help="stop after this many seconds (default: until Ctrl-C); heartbeats go on "
        "whether or not stdin is still open",
    )
    p.set_defaults(func=run)


def _add_transport_args(p: argparse.ArgumentParser) -> None:
    """Where the frames go: raw Ethernet on one or two networks, or R-GOOSE over UDP."""
    p.add_argument("--iface", help="interface of network A (required without --rgoose)")
    p.add_argument("--iface-b")
    p.add_argument(
        "--rgoose",
        metavar="ADDR[:PORT]",
        help="publish R-GOOSE over UDP to this unicast or multicast IPv4 address (port "
        "102 by default) instead of raw Ethernet; --key-id signs (HMAC) or encrypts "
        "(aes-128-gcm) every SPDU",
    )
    p.add_argument(
        "--rgoose-iface", default="", metavar="IPV4", help="send multicast from this address"
    )


def _add_signing_args(p: argparse.ArgumentParser) -> None:
    """The key file and the key every frame is signed with."""
    add_keys_args(p)
    p.add_argument(
        "--key-id",
        type=int,
        help="sign every frame (IEC 62351-6) with this key of --keys (or its chain's successor)",
    )


def _add_address_args(p: argparse.ArgumentParser) -> None:
    """The publisher's identity and addresses: from a config, or one flag each."""
    p.add_argument(
        "--config",
        help="take the publisher from a config (YAML/TOML, or SCL with --ied) instead of the "
        "address flags; --gocbref picks one if it has several",
    )
    p.add_argument("--ied", help="with an SCL --config: the publishing IED")
    p.add_argument("--gocbref", help="the control block (required without --config)")
    p.add_argument("--datset", help="data set reference (default: derived from gocbRef)")
    p.add_argument("--goid")
    p.add_argument("--appid", type=lambda s: int(s, 0), help="(required without --config)")
    p.add_argument(
        "--dst", help="destination MAC, e.g. 01:0c:cd:01:00:01 (required without --config)"
    )
    p.add_argument("--src", help="source MAC (default: the interface's own)")
    p.add_argument("--vlan", type=int, help="802.1Q VLAN id (untagged without)")
    p.add_argument("--priority", type=int, default=4)
    p.add_argument("--conf-rev", type=int, default=1)


def _add_state_args(p: argparse.ArgumentParser) -> None:
    """The initial data set, the retransmission schedule, and the networks sent on."""
    p.add_argument(
        "--values",
        help="initial data set as JSON "
        '(the decode --json form, e.g. [{"type":"boolean","value":true}]); '
        "required without --config, whose initial values it replaces",
    )
    p.add_argument("--schedule", choices=["doubling", "fixed-burst"], default="doubling")
    p.add_argument("--min-time", type=float, default=4.0, help="MinTime, ms")
    p.add_argument("--max-time", type=float, default=1000.0, help="MaxTime, ms")
    p.add_argument("--burst", type=int, default=4, help="fixed-burst repeats at MinTime")
    p.add_argument("--sides", choices=["A", "B", "both"], default=None)


def _add_injection_args(p: argparse.ArgumentParser) -> None:
    """What a test set injects: simulation, ndsCom, missed states, the test bit."""
    p.add_argument("--simulation", action="store_true")
    p.add_argument(
        "--ndscom",
        action="store_true",
        help="send ndsCom TRUE (a test set's 'needs commissioning' injection: a subscriber "
        "must refuse the data)",
    )
    p.add_argument(
        "--stnum-jump",
        type=int,
        metavar="N",
        help="the first state change from stdin carries stNum + N instead of + 1 (a test "
        "set's missed-state injection: a subscriber must report N - 1 states missed)",
    )
    p.add_argument(
        "--test",
        action="store_true",
        help="set the test bit of every quality (13-bit bit-string) published (q.test: a "
        "subscriber not in test mode must not act on it)",
    )


#: IEC 61850 Quality: 13 bits, the test bit the twelfth (validity 2, details 8, source)
QUALITY_BITS, TEST_BIT = 13, 11


def test_flagged(values: Any) -> Any:
    """`values` (the JSON form of a data set) with q.test set in every 13-bit bit-string,
    structures included: what `--test` publishes."""
    if isinstance(values, list):
        return [test_flagged(v) for v in values]
    if isinstance(values, dict):
        v = values.get("value")
        if values.get("type") == "bit-string" and isinstance(v, str) and len(v) == QUALITY_BITS:
            return {**values, "value": v[:TEST_BIT] + "1" + v[TEST_BIT + 1 :]}
        if isinstance(v, list):
            return {**values, "value": test_flagged(v)}
    return values


def _values(text: str, where: str, test: bool = False):
    try:
        data = json.loads(text)
        return all_data_from_json(test_flagged(data) if test else data)
    except (json.JSONDecodeError, GooseError) as exc:
        raise CommandError(f"{where}: bad values: {exc}") from exc


def _from_config(args: argparse.Namespace) -> PublisherCfg:
    """The publisher of `--config` (an SCL file with --ied: one of the IED's GoCBs)."""
    from goosectl.controller.config.load import load_config
    from goosectl.controller.config.validate import ConfigError

    given = [f"--{k}" for k in ("datset", "goid", "appid", "dst", "vlan") if getattr(args, k)]
    if given:
        raise CommandError(f"{', '.join(given)}: the address comes from --config")
    try:
        pubs = load_config(args.config, GooseConfig, args.ied).publishers
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc
    refs = ", ".join(p.gocb_ref for p in pubs) or "none"
    chosen = [p for p in pubs if args.gocbref in (None, p.gocb_ref, p.name)]
    if len(chosen) != 1:
        which = f"no publisher {args.gocbref!r}" if args.gocbref else "several publishers"
        raise CommandError(f"{args.config}: {which} (publishers: {refs}); pick one with --gocbref")
    changes: dict = {"sides": args.sides or ("both" if args.iface_b else chosen[0].sides)}
    if args.values is not None:
        initial = _values(args.values, "--values")
        if chosen[0].members and data_shape(initial) != tuple(chosen[0].members):
            raise CommandError(
                f"--values: types {list(data_shape(initial))} are not the data set's "
                f"{list(chosen[0].members)}"
            )
        changes["initial"] = json.loads(args.values)
    if args.src:
        changes["src"] = args.src
    if args.simulation:
        changes["simulation"] = True
    if args.ndscom:
        changes["nds_com"] = True
    try:
        return PublisherCfg.model_validate(chosen[0].model_dump() | changes)
    except ValidationError as exc:
        raise CommandError(f"bad publisher settings: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    if args.config:
        return serve(args, _from_config(args))
    missing = [f"--{k}" for k in ("gocbref", "appid", "dst", "values") if getattr(args, k) is None]
    if missing:
        raise CommandError(f"{', '.join(missing)} needed (or --config)")
    initial = _values(args.values, "--values")
    datset = args.datset or args.gocbref.replace("$GO$", "$").rsplit("$", 1)[0] + "$DataSet"
    try:
        cfg = PublisherCfg(
            gocb_ref=args.gocbref,
            dat_set=datset,
            go_id=args.goid,
            conf_rev=args.conf_rev,
            appid=args.appid,
            dst=args.dst,
            src=args.src,
            vlan=VlanCfg(id=args.vlan, priority=args.priority) if args.vlan is not None else None,
            simulation=args.simulation,
            nds_com=args.ndscom,
            members=data_shape(initial),
            initial=json.loads(args.values),
            schedule=args.schedule,
            min_time_ms=args.min_time,
            max_time_ms=args.max_time,
            burst_count=args.burst,
            sides=args.sides or ("both" if args.iface_b else "A"),
        )
    except ValidationError as exc:
        raise CommandError(f"bad publisher settings: {exc}") from exc
    return serve(args, cfg)


def _rgoose_publisher(args: argparse.Namespace, keys: KeyFile | None) -> RgoosePublisher:
    """The R-GOOSE sender of `--rgoose`, with the key of `--key-id` (an HMAC or
    aes-128-gcm key of --keys)."""
    key = None
    if args.key_id is not None:
        key = keys.keys.get(args.key_id) if keys is not None else None
        if key is None:
            raise CommandError(f"--key-id {args.key_id}: not a key of --keys")
        if key.key.algorithm.gmac:
            raise CommandError(f"--key-id {args.key_id}: R-GOOSE signs with HMAC or aes-128-gcm")
    try:
        target = parse_target(args.rgoose)
        sock = open_socket("0.0.0.0", 0, (), args.rgoose_iface)
    except (OSError, ValueError) as exc:
        raise CommandError(f"--rgoose {args.rgoose}: {exc}") from None
    return RgoosePublisher(sock, target, key)


def serve(args: argparse.Namespace, cfg: PublisherCfg) -> int:
    """Publish `cfg` until the duration or a signal: stdin lines are its state changes."""
    cfg = _checked(args, cfg)
    goose = with_profile(args, _prp.config_with(GooseConfig(publishers=[cfg]), args))
    keys = keys_for(args, goose)
    hub = GooseHub(goose, keys=keys)
    live = open_live(hub, args.iface, args.iface_b)
    rgoose = _rgoose_publisher(args, keys) if args.rgoose else None
    if rgoose is not None:
        live.transports.append(rgoose)
    key_service = KeyService(hub, args.keys)
    key_service.start()
    live.on_round.append(key_service.tick)
    # its own stream only: other publishers on the wire are not what a test set reports
    reporter = Reporter(hub, args.json, sys.stdout, gocb_ref=cfg.gocb_ref, clock=time.time_ns)
    prp = _prp.start(live, goose)
    _StdinStates(live, hub, cfg, args).attach()
    interrupted = stop_on_signals(live)
    _publish_until(live, reporter, prp, args.duration)
    c = hub.counters()["publishers"][cfg.gocb_ref]
    print(
        json.dumps(
            {
                "event": "done",
                "gocbRef": cfg.gocb_ref,
                "stNum": c["st"],
                "sqNum": c["sq"],
                "sent": live.sent,
                **({"rgoose": rgoose.counters()} if rgoose is not None else {}),
                **({"prp": prp.lre.counters()} if prp is not None else {}),
            }
        )
    )
    return EXIT_INTERRUPTED if interrupted else 0


def _checked(args: argparse.Namespace, cfg: PublisherCfg) -> PublisherCfg:
    """The options checked against each other, and `cfg` as they change it (--test's
    qualities, --key-id's signing)."""
    if args.stnum_jump is not None and args.stnum_jump < 1:
        raise CommandError("--stnum-jump must be >= 1 (1 is an ordinary state change)")
    if args.test and cfg.initial:
        cfg = cfg.model_copy(update={"initial": test_flagged(cfg.model_dump()["initial"])})
    if args.duration is not None and not args.duration > 0:  # also refuses NaN
        raise CommandError("--duration must be > 0 seconds")
    if args.key_id is not None and not args.rgoose:
        cfg = cfg.model_copy(update={"auth": "sign", "key_id": args.key_id})
    if not args.iface and not args.rgoose:
        raise CommandError("--iface needed (or --rgoose)")
    return cfg


class _StdinStates:
    """Stdin read as lines, each a JSON value list published as the next state; a bad line
    is refused and logged, and the next one may be good."""

    def __init__(
        self, live: LiveGoose, hub: GooseHub, cfg: PublisherCfg, args: argparse.Namespace
    ) -> None:
        self.live = live
        self.hub = hub
        self.gocb_ref = cfg.gocb_ref
        self.test: bool = args.test
        self.buf = bytearray()
        #: the test set's missed states: once, on the first change
        self.jump: list[int] = [args.stnum_jump] if args.stnum_jump is not None else []

    def attach(self) -> None:
        try:
            self.live.add_reader(sys.stdin.fileno(), self.on_stdin)
        except PermissionError:  # a file or /dev/null, which no selector watches: read it now
            self.lines(sys.stdin.buffer.read() + b"\n")

    def on_stdin(self) -> None:
        chunk = os.read(sys.stdin.fileno(), 65536)
        if not chunk:  # closed: the publisher goes on with its heartbeats
            self.live.remove_reader(sys.stdin.fileno())
            return
        self.lines(chunk)

    def lines(self, chunk: bytes) -> None:
        buf = self.buf
        buf.extend(chunk)
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            if line.strip():
                self.publish(line)

    def publish(self, line: bytes) -> None:
        now = time.monotonic_ns()
        try:
            values = _values(line.decode(), "stdin", self.test)
            if self.jump:
                self.live.execute(self.hub.skip_states(self.gocb_ref, self.jump.pop(), now), now)
            out = self.hub.publish(self.gocb_ref, values, now, time.time_ns())
        except (CommandError, PublishError) as exc:
            log.error("refused: %s", exc)  # this line only: the next may be good
            return
        self.live.execute(out, now)


def _publish_until(
    live: LiveGoose, reporter: Reporter, prp: PrpLive | None, duration: float | None
) -> None:
    """The loop, reporting every effect as it happens, until `duration` seconds or a stop;
    the sockets closed after."""

    def on_effects(out) -> None:
        reporter.effects(out)
        sys.stdout.flush()

    until = time.monotonic_ns() + int(duration * 1e9) if duration else None
    try:
        live.run(on_effects=on_effects, until_ns=until)
    finally:
        live.close()
        if prp is not None:
            prp.close()
