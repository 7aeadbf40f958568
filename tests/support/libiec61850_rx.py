"""Start libiec61850's GOOSE receiver in a namespace and prove it listens before a test
sends what it must receive.

Observed (lab/iec61850_peer.py): frames arriving in the first ~10-20 ms
after its receiver starts are lost, and its `ready` line comes before that. The proof is a
first frame seen: primer frames go out until the receiver reports one (`primed`).
"""

from __future__ import annotations

import json
import selectors
import subprocess

from goosectl.lab.netns import Namespace
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose.frame import GooseFrame, encode_frame

PRIMER = "PRIMER/LLN0$GO$prime"


def start_primed_receiver(
    ns: Namespace, sock: RawSocket, iface: str, count: int, *, dst: bytes, timeout: float = 20
) -> subprocess.Popen:
    """`iec61850_peer receive` on `iface` (observer mode: primers must reach it) for
    `count` messages after the primers; `sock` sends the primers towards it."""
    proc = ns.python_module(
        "goosectl.lab.iec61850_peer", "receive", "--iface", iface, "--count", str(count),
        "--timeout", str(timeout), "--prime-gocb-ref", PRIMER, "--json",
    )  # fmt: skip
    line = proc.stdout.readline()
    assert json.loads(line or "{}").get("ready"), proc.stderr.read() if proc.poll() else line
    # stNum 0, which no publisher sends (it counts from 1 and wraps to 1): libiec61850's
    # observer is one subscriber for every stream and calls a message invalid when its
    # (stNum, sqNum) does not advance on the previous one's, so a primer at the default
    # (1, 0) made the first real frame (1, 0) invalid, without values.
    primer = encode_frame(GooseFrame(gocb_ref=PRIMER, dat_set="P/LLN0$ds", dst=dst, st_num=0))
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        for _ in range(2000):
            sock.send(primer)
            if sel.select(0.005):
                assert json.loads(proc.stdout.readline()).get("primed")
                return proc
    raise AssertionError("libiec61850 receiver never saw a primer frame")
