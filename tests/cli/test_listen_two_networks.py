"""`goosectl listen --iface A --iface-b B` with byte-identical frames on both networks:
each frame is classified once, its second copy is a `duplicate`, retransmissions included.
The two sockets are read batch by batch, so A's n and n+1 may come before B's n; on one
stream machine B's n was `out_of_order` and B's n+1 a second `retransmission`. The frames
here are sent in that order. On two veth pairs in namespaces the test makes. Needs root."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict

import pytest

from goosectl.lab.netns import netlab
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import Boolean, GooseFrame, encode_frame
from tests.support.peers import require_root

pytestmark = pytest.mark.root

FRAMES = 200


def frame(sq: int) -> bytes:
    return encode_frame(
        GooseFrame(
            gocb_ref="AB/LLN0$GO$twice",
            dat_set="AB/LLN0$ds",
            all_data=(Boolean(True),),
            dst=bytes.fromhex("010ccd010042"),
            src=bytes.fromhex("020000000042"),
            appid=0x0042,
            time_allowed_to_live=20_000,
            sq_num=sq,
        )
    )


def test_each_second_copy_of_a_retransmission_is_a_duplicate() -> None:
    require_root()
    argv = [sys.executable, "-u", "-m", "goosectl", "listen", "--iface", "rx0"]
    argv += ["--iface-b", "rx1", "--json", "--duration", "4"]
    with netlab() as lab:
        far, near = lab.namespace(), lab.namespace()
        lab.veth(far, near, a="tx0", b="rx0")
        lab.veth(far, near, a="tx1", b="rx1")
        with far.entered():
            a = RawSocket("tx0", promiscuous=False, timestamps=False)
            b = RawSocket("tx1", promiscuous=False, timestamps=False)
        try:
            proc = near.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            first = proc.stdout.readline()
            assert json.loads(first or "{}").get("event") == "listening", proc.stderr.read()
            for k in range(0, FRAMES, 2):  # A's n and n+1 before B's n and n+1
                a.send(frame(k))
                a.send(frame(k + 1))
                b.send(frame(k))
                b.send(frame(k + 1))
                time.sleep(0.001)
            out, err = proc.communicate(timeout=60)
        finally:
            a.close()
            b.close()
    assert proc.returncode in (0, 1), err
    copies: dict[int, list[str]] = defaultdict(list)
    for line in out.splitlines():
        rec = json.loads(line)
        if "frame" in rec:
            copies[rec["sqNum"]].append(rec["class"])
    assert sorted(copies) == list(range(FRAMES)), out[-2000:]
    # each sqNum: one copy classified (first, retransmission), the other a duplicate
    wrong = {sq: c for sq, c in copies.items() if sorted(c)[0] != "duplicate" or len(c) != 2}
    assert not wrong, wrong
    assert sum(c.count("retransmission") for c in copies.values()) == FRAMES - 1
