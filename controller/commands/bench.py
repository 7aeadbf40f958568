"""`goosectl bench`: the transition-latency measurements outside pytest.

In process by default (no root): trip frame -> TRIP bytes and -> trip-ack frame, beside the
pty round-trip floor. `--live` (root) adds the wire: a peer in another namespace sends the
trip, `goosectl run` drives the simulator over a pty, the ack is captured back, beside the
raw-socket echo floor; with and without 50 other streams at 5,000 frames/s. Prints the
percentile table and writes a latency histogram (SVG) beside it.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from goosectl.controller.cli import CommandError
from goosectl.protocols.files import write_new

log = logging.getLogger(__package__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure transition latency (percentiles + histogram)")
    p.add_argument("--samples", type=int, default=2000, help="in-process trips (default 2000)")
    p.add_argument("--live", action="store_true", help="also on the wire, on veth (root)")
    p.add_argument("--wire-samples", type=int, default=200)
    p.add_argument(
        "--out",
        type=Path,
        default=Path("goosectl-bench.svg"),
        help="histogram image (SVG); the table goes beside it as .txt and .json",
    )
    p.set_defaults(func=run)


ECHO = "floor: raw-socket echo round trip"
ECHO_QUIET = "floor: raw-socket echo round trip, after the quiet each trip follows"


def run(args: argparse.Namespace) -> int:
    from goosectl.controller.report.bay_report import format_percentiles, percentiles
    from goosectl.controller.report.histogram import write_svg
    from goosectl.lab.floors import pty_round_trips
    from goosectl.lab.latency import TripBench

    if args.live:
        import os

        if os.geteuid() != 0:  # before any measuring: a refusal costs no wait
            raise CommandError("--live needs root (network namespaces, raw sockets)")
    series: dict[str, list[int]] = {}
    floors: dict[str, list[int]] = {}
    log.info("in process: %d trips of a closed breaker ...", args.samples)
    s = TripBench().sample(args.samples)
    series["in process: trip frame -> TRIP bytes"] = s.to_serial
    series["in process: trip frame -> trip-ack frame"] = s.to_ack_frame
    floors["floor: pty round trip"] = pty_round_trips(21, 5000)
    if args.live:
        from goosectl.lab.wire_floor import WireFloor
        from goosectl.lab.wire_latency import QUIET_S, WireTrip

        with WireFloor() as wf:
            floors[ECHO] = wf.sample(5000)
            # each trip follows a quiet: the echo measured the same way is the fair floor
            floors[ECHO_QUIET] = wf.sample(2000, quiet_s=QUIET_S)
        for load, spin in ((0, False), (0, True), (5000, False)):
            label = (
                "wire: trip sent -> trip-ack received"
                + (f" (+{load} frames/s)" if load else "")
                + (" (--spin)" if spin else "")
            )
            log.info("%s: %d trips ...", label, args.wire_samples)
            trip = WireTrip(load_fps=load, spin=spin)
            try:
                series[label] = [trip.sample() for _ in range(args.wire_samples)]
            finally:
                trip.close()
    table = {k: percentiles(v) for k, v in {**series, **floors}.items()}
    lines = format_percentiles(table)
    base = {"in process": ("floor: pty round trip",), "wire": (ECHO_QUIET, ECHO)}
    lines.append("")
    for k in series:
        for f in base["wire" if k.startswith("wire") else "in process"]:
            if f in table and table[f]["p50"] > 0:
                lines.append(
                    f"  {k}: p50 {table[k]['p50'] / table[f]['p50']:.2f}x, "
                    f"p99 {table[k]['p99'] / table[f]['p99']:.2f}x the {f[7:]}"
                )
    verdict = all(table[k]["p99"] <= 4000 for k in series)
    lines.append("")
    lines.append("within the 4 ms hard limit at p99: " + ("yes" if verdict else "NO"))
    text = "\n".join(lines)
    print(text)
    svg = write_svg(args.out, {**series, **floors}, "goosectl transition latency")
    write_new(args.out.with_suffix(".txt"), text + "\n")
    write_new(args.out.with_suffix(".json"), json.dumps(table, indent=2) + "\n")
    print(f"\nhistogram: {svg}  table: {args.out.with_suffix('.txt')}")
    return 0 if verdict else 1
