"""A goosectl subscriber as a wire peer: classify each frame, then answer with a probe.

Run inside a namespace (`python -m benchmarks.goose_wire classify --iface X`): it runs the
real live shell (`LiveGoose`, observer mode) and, after each frame's classification, sends a
`probe_frame` carrying the frame's sqNum. The benchmark on the other end of the veth times
frame sent -> answer received, the same shape as `benchmarks.wire`'s echo floor, so the
difference between the two is what classification costs on the wire.
"""

from __future__ import annotations

import argparse
import sys

from goosectl.controller.goose.effects import FrameClassified
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.shell.goose_live import LiveGoose
from goosectl.lab.wire_floor import probe_frame


def classify(iface: str) -> int:
    hub = GooseHub()
    live = LiveGoose(hub, iface, promiscuous=True)
    sock = live.socks["A"]

    def on_frame(number, ts, frame, vlan, out) -> None:
        for e in out:
            if type(e) is FrameClassified:
                sock.send(probe_frame(e.sq_num))

    print("ready", flush=True)
    live.run(on_frame=on_frame)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.goose_wire")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("classify")
    c.add_argument("--iface", required=True)
    args = parser.parse_args(argv)
    try:
        return classify(args.iface)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
