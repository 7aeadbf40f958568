"""`goosectl publish` as a tester uses it: it publishes until Ctrl-C or `--duration`,
heartbeats included, whether or not stdin is still open (a script's `echo ... |` closes it
at once), prints its own stream only, and ends with 130 on Ctrl-C. Proved on a veth pair
with a capture on the far side. Needs root."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from goosectl.lab.netns import Namespace, netlab
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import Boolean, GooseFrame, decode_frame, encode_frame, parse_header
from tests.support.peers import require_root

pytestmark = pytest.mark.root

GOCB = "TEST1LD0/LLN0$GO$gcb1"
ARGV = [
    sys.executable, "-u", "-m", "goosectl", "publish", "--iface", "tx0", "--gocbref", GOCB,
    "--appid", "0x1000", "--dst", "01:0c:cd:01:00:01", "--min-time", "10", "--max-time", "100",
    "--values", '[{"type":"boolean","value":true}]', "--json",
]  # fmt: skip


@contextlib.contextmanager
def wire() -> Iterator[tuple[Namespace, RawSocket]]:
    """A veth pair between two new namespaces: the publisher's end (tx0) and a capture
    socket on the far end (rx0)."""
    with netlab() as lab:
        near, far = lab.namespace(), lab.namespace()
        lab.veth(near, far, a="tx0", b="rx0")
        with far.entered():
            cap = RawSocket("rx0", promiscuous=True, timestamps=False)
        yield near, cap


def _mine(frames) -> list:
    return [parse_header(f.frame) for f in frames if GOCB.encode() in f.frame]


@pytest.mark.parametrize("stop", ["duration", "sigint"])
def test_publish_keeps_publishing_after_stdin_closes(stop: str) -> None:
    require_root()
    # with --duration, also the test set's ndsCom injection
    argv = [*ARGV, *(["--duration", "1.5", "--ndscom"] if stop == "duration" else [])]
    with wire() as (near, cap):
        try:
            proc = near.popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            # another publisher on the same wire: not publish's business to report
            other = GooseFrame(
                gocb_ref="OTHER/LLN0$GO$x",
                dat_set="OTHER/LLN0$ds",
                all_data=(Boolean(False),),
                dst=bytes.fromhex("010ccd010001"),
            )
            deadline = time.monotonic() + 30
            seen: list = []
            while len(seen) < 15 and time.monotonic() < deadline:
                cap.send(encode_frame(other))
                time.sleep(0.05)
                seen += _mine(cap.recv_batch(1000))
            if stop == "sigint":
                proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            cap.close()
    # stdin closed at once, yet the heartbeats went on: about 10 a second at MaxTime 100 ms
    assert len(seen) >= 15, (len(seen), err)
    assert {h.st_num for h in seen} == {1}
    assert {h.nds_com for h in seen} == {stop == "duration"}
    assert proc.returncode == (130 if stop == "sigint" else 0), err
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[-1]["event"] == "done" and lines[-1]["gocbRef"] == GOCB
    assert not [x for x in lines if x.get("gocbRef") not in (None, GOCB)], out


def test_publish_injects_a_stnum_jump_and_the_test_bit() -> None:
    """A test set's injections: `--stnum-jump 5` makes the first state change from stdin
    stNum 1 + 5 (a subscriber must see 4 states missed); `--test` sets q.test in every
    quality published, the initial state's and the changes' alike."""
    require_root()
    values = '[{"type":"boolean","value":false},{"type":"bit-string","value":"0000000000000"}]'
    change = b'[{"type":"boolean","value":true},{"type":"bit-string","value":"0000000000000"}]\n'
    argv = [*ARGV[: ARGV.index("--values")], "--values", values, "--json"]
    argv += ["--stnum-jump", "5", "--test", "--duration", "2"]
    with wire() as (near, cap):
        try:
            proc = near.popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=False,
            )  # fmt: skip
            frames: list = []
            deadline = time.monotonic() + 30
            while not frames and time.monotonic() < deadline:  # the initial state first
                frames += [f.frame for f in cap.recv_batch(1000) if GOCB.encode() in f.frame]
                time.sleep(0.02)
            proc.stdin.write(change)
            proc.stdin.flush()
            _, err = proc.communicate(timeout=60)
            frames += [f.frame for f in cap.recv_batch(10000) if GOCB.encode() in f.frame]
        finally:
            cap.close()
    assert proc.returncode == 0, err
    decoded = [decode_frame(f) for f in frames]
    assert sorted({d.st_num for d in decoded}) == [1, 6], {d.st_num for d in decoded}
    qualities = {d.all_data[1].bits for d in decoded}
    assert qualities == {"0000000000010"}, qualities  # q.test, bit 11, on every frame
    assert {d.all_data[0].value for d in decoded if d.st_num == 6} == {True}
