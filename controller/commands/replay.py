"""`goosectl replay FILE`: the subscriber (and any configured publishers) over a capture."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from goosectl.controller.cli import EXIT_FINDINGS, CommandError, add_log_args
from goosectl.controller.commands import _prp, _replay_wire
from goosectl.controller.commands._auth_args import add_keys_args, keys_for, with_profile
from goosectl.controller.commands.scl import WireRun, add_check_args, wire_check
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.config.validate import ConfigError
from goosectl.controller.engine.effects import Notify
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.goose.rgoose import RgooseReceiver, receiver_for
from goosectl.controller.replay.capture_clock import (
    DEFAULT_MAX_GAP_NS,
    CaptureClock,
    CaptureTimeError,
    TimeJump,
)
from goosectl.controller.replay.goose_replay import Replay, capture_frames
from goosectl.controller.report.goose_report import Reporter
from goosectl.controller.shell.journal_clock import anchor as anchor_clock
from goosectl.controller.shell.journal_store import open_journal
from goosectl.controller.shell.journal_writer import journal_key
from goosectl.protocols.ethernet.pcap import CaptureError

if TYPE_CHECKING:  # loaded by the --device sim run only
    from goosectl.controller.config.bay import ControllerConfig
    from goosectl.controller.config.keys import KeyFile
    from goosectl.controller.engine.journal import Journal
    from goosectl.controller.logic.core import BayController
    from goosectl.controller.replay.bay_replay import BayReplay
    from goosectl.controller.report.bay_report import Timeline


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay", help="run the GOOSE machines over a pcap/pcapng on the virtual clock"
    )
    p.add_argument("file", type=Path)
    p.add_argument(
        "--config",
        type=Path,
        help="subscriptions/publishers (YAML or TOML, or SCL with --ied); "
        "without it every stream seen is supervised (observer mode)",
    )
    p.add_argument("--ied", help="with an SCL --config: the IED to configure")
    add_check_args(p)
    add_keys_args(p)
    p.add_argument("--out", type=Path, help="write frames the publishers send to this pcap")
    p.add_argument("--journal", type=Path, help="SQLite journal of every transition")
    pace = p.add_mutually_exclusive_group()
    pace.add_argument("--speed", type=float, help="pace against the wall clock (1 = real time)")
    pace.add_argument("--topspeed", action="store_true", help="as fast as possible (default)")
    p.add_argument("--loop", type=int, default=1, help="replay the capture N times")
    p.add_argument(
        "--max-gap",
        type=float,
        default=DEFAULT_MAX_GAP_NS / 1e9,
        metavar="SECONDS",
        help="a forward step of the capture's clock beyond this (or any step back) is a "
        "time jump: reported, counted and not replayed, timers re-anchored "
        f"(default {DEFAULT_MAX_GAP_NS / 1e9:g})",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--appid", type=lambda s: int(s, 0), help="print only this APPID")
    p.add_argument("--gocbref", help="print only this gocbRef")
    add_log_args(p, quiet="print only the per-stream report")
    p.add_argument(
        "--device",
        choices=["sim"],
        help="run the bay controller of --config "
        "(default: the packaged bay) against the capture, driving the breaker "
        "simulator in the same virtual time",
    )
    p.add_argument(
        "--pty",
        action="store_true",
        help="with --device sim: connect the simulator over a real pty instead of in memory",
    )
    p.add_argument(
        "--simulation",
        action="store_true",
        help="simulation mode (LPHD.Sim): subscriptions switch to their simulated streams "
        "(default: simulated frames are refused)",
    )
    p.add_argument(
        "--mode",
        choices=["on", "test", "test-blocked", "off"],
        help="with --device sim: the controller's behaviour mode (default: logic.mode)",
    )
    _replay_wire.add_args(p)
    _prp.add_arg(p)
    p.set_defaults(func=run)


def load_goose_config(path: Path | None, ied: str | None = None) -> GooseConfig:
    if path is None:
        if ied is not None:
            raise CommandError("--ied needs an SCL --config")
        return GooseConfig()
    try:
        return load_config(path, GooseConfig, ied)
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc


def run(args: argparse.Namespace) -> int:
    """Replay a capture: on the wire (--wire), into the bay controller (--device sim), or
    through the subscriptions alone."""
    if _replay_wire.wanted(args):
        return _replay_wire.run(args)
    if args.device:
        if args.speed is not None:  # it runs in virtual time only: refused, not ignored
            raise CommandError(
                "--speed: replay --device sim runs in virtual time only (as fast as possible)"
            )
        return run_controller(args)
    return _run_subscriptions(args)


def _run_subscriptions(args: argparse.Namespace) -> int:
    """The subscriptions (and publishers) of --config over the capture, every frame and
    event reported; exit 1 when there were findings."""
    config = with_profile(args, load_goose_config(args.config, args.ied))
    keys = keys_for(args, config)
    check = wire_check(args.scl, config)
    if args.speed is not None and args.speed <= 0:
        raise CommandError("--speed must be > 0")
    if args.loop < 1:
        raise CommandError("--loop must be >= 1")
    max_gap = _max_gap(args)
    hub = GooseHub(
        config,
        _replay_journal(args.journal),
        simulation=args.simulation,
        keys=keys,
        auth_default="optional" if keys is not None else "off",
    )
    replay: Replay | None = None
    reporter = Reporter(
        hub,
        args.json,
        sys.stdout,
        args.appid,
        args.gocbref,
        clock=lambda: replay.now_ns if replay is not None else 0,
        quiet=bool(args.quiet),
    )
    clock = CaptureClock(max_gap, reporter.time_jump)

    def on_frame(number, ts, data, effects):
        if check is not None:
            check.frame(ts, data)
        reporter.frame(number, ts, data, None, effects)

    rgoose = receiver_for(hub, config.subscriptions, keys)  # UDP 102 frames of the pcap
    replay = Replay(hub, args.out, args.speed, on_frame, reporter.effects, rgoose)
    try:
        replay.run(capture_frames(args.file, args.loop, clock))
    except (CaptureError, CaptureTimeError) as exc:
        raise CommandError(str(exc)) from exc
    finally:
        replay.close()
    _print_closing(rgoose, check, reporter, args.json)
    return EXIT_FINDINGS if reporter.anomalies.count else 0


def _replay_journal(path: Path | None) -> Journal | None:
    """The journal of --journal (None without it), its time the capture's (UTC)."""
    journal = open_journal(path, durability="group", key=journal_key()) if path else None
    anchor_clock(journal, "virtual")  # time_ns is capture time (UTC): the journal_utc view
    return journal


def _print_closing(
    rgoose: RgooseReceiver, check: WireRun | None, reporter: Reporter, as_json: bool
) -> None:
    """R-GOOSE's refusals (if any), the SCL check and the per-stream summary."""
    if rgoose.counts:  # SPDUs refused before any subscription (malformed, replayed ...)
        counts = rgoose.counters()
        sys.stdout.write(
            (json.dumps({"event": "rgoose", "counts": counts}) if as_json else f"rgoose: {counts}")
            + "\n"
        )
    if check is not None and as_json:
        check.print(as_json=True)  # before the closing counters line
    reporter.summary()
    if check is not None and not as_json:
        check.print(as_json=False)


def run_controller(args: argparse.Namespace) -> int:
    """The bay controller against a capture, the simulator on the same virtual clock."""
    from goosectl.controller.demo.offline import make_wire
    from goosectl.controller.replay.bay_replay import BayReplay
    from goosectl.controller.report.bay_report import Timeline
    from goosectl.firmware_sim.core import Firmware

    cfg, keys = _bay_config(args)
    jumps: list[TimeJump] = []
    clock = CaptureClock(_max_gap(args), jumps.append)
    # streamed: the first frame gives the start time, the rest is read as the run goes
    stream = capture_frames(args.file, args.loop, clock)
    try:
        first = next(stream, None)
    except (CaptureError, CaptureTimeError) as exc:
        raise CommandError(str(exc)) from exc
    if first is None:
        raise CommandError(f"{args.file}: no GOOSE frames")
    check = wire_check(args.scl, cfg.goose)
    t0 = first[1]
    bay = _bay_at(args, cfg, keys, t0)
    fw = Firmware(now_ns=t0)
    timeline = Timeline(t0)
    wire, close_wire = make_wire(bay, fw, t0, args.pty)
    replay = BayReplay(bay, fw, args.out, timeline.add, wire=wire)
    try:
        replay.run(_noted(itertools.chain([first], stream), jumps, timeline, check))
    except (CaptureError, CaptureTimeError) as exc:
        raise CommandError(str(exc)) from exc
    finally:
        replay.close()
        close_wire()
    print("\n".join(_bay_report(timeline, clock, replay, bay)))
    if check is not None:
        check.print(args.json)
    return 0


def _bay_config(args: argparse.Namespace) -> tuple[ControllerConfig, KeyFile | None]:
    """The bay of --config (the packaged one without), with --auth-profile, and its keys."""
    from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig

    path = args.config or DEFAULT_CONFIG
    try:
        cfg = load_config(path, ControllerConfig, args.ied)
    except ConfigError as exc:
        raise CommandError(f"bad config:\n{exc}") from exc
    cfg = cfg.model_copy(update={"goose": with_profile(args, cfg.goose)})
    return cfg, keys_for(args, cfg.goose)


def _bay_at(
    args: argparse.Namespace, cfg: ControllerConfig, keys: KeyFile | None, t0: int
) -> BayController:
    """The bay controller at the capture's first frame, in the mode the options ask for."""
    from goosectl.controller.logic.core import BayController

    bay = BayController(cfg, t0, _replay_journal(args.journal), keys)
    if args.mode:
        bay.set_mode(args.mode, t0, "command line")
    if args.simulation:
        bay.set_simulation(True, t0, "command line")
    return bay


def _noted(
    frames: Iterator[tuple[int, int, bytes]],
    jumps: list[TimeJump],
    timeline: Timeline,
    check: WireRun | None,
) -> Iterator[tuple[int, bytes]]:
    """The capture's frames as the bay replays them, each time jump noted on the timeline
    when its frame comes, every frame checked against the SCL."""
    for _, ts, data in frames:
        for jump in jumps:  # a jump is noted at the time its frame is replayed
            timeline.add(jump.replay_ns, Notify("capture time jump", jump.text()))
        jumps.clear()
        if check is not None:
            check.frame(ts, data)
        yield ts, data


def _bay_report(
    timeline: Timeline, clock: CaptureClock, replay: BayReplay, bay: BayController
) -> list[str]:
    """The report's lines: the timeline, anomalies (time jumps too), in-process latency,
    the LGOS, and the bay's final state."""
    from goosectl.controller.report.bay_report import percentiles, report_block

    anomalies = timeline.anomalies()
    if clock.total_jumps:
        kinds = ", ".join(f"{n} {k}" for k, n in clock.jumps.items() if n)
        anomalies.append(f"  {clock.total_jumps} capture time jump(s) ({kinds}): gaps not replayed")
    return [
        *report_block(
            "virtual time",
            timeline.lines(),
            anomalies,
            "wall clock, in process",
            {
                "frame in -> effects out": percentiles(replay.frame_ns),
                "actuating frames": percentiles(replay.actuating_ns),
            },
            bay.hub.lgos(),
        ),
        "",
        f"final bay state: {bay.bay.state}; mode {bay.mode_name}"
        f"{', simulation' if bay.simulation else ''}; "
        f"frames in {replay.frames_in}, out {replay.sent}",
    ]


def _max_gap(args: argparse.Namespace) -> int:
    if not args.max_gap >= 0:  # also refuses NaN
        raise CommandError("--max-gap must be >= 0 seconds")
    return round(args.max_gap * 1e9)
