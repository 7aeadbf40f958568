"""A listener never sends: `goosectl listen --config` with a config (or an IED of an SCL)
that has publishers used to put those control blocks on the wire with all-zero data, an
injection on a station bus. Proved on a veth pair: a capture on the far side counts the
frames whose source is the listener's interface. Needs root."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from goosectl.lab.netns import netlab
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import Boolean, GooseFrame, encode_frame
from tests.support.peers import REPO, require_root

pytestmark = pytest.mark.root

CONFIGS = {
    "yaml": ("examples/goose/subscriptions.yaml", None),
    "scl": ("examples/scl/bay1.scd", "GCTL1"),
}


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_listen_with_a_config_of_publishers_sends_nothing(kind: str) -> None:
    require_root()
    path, ied = CONFIGS[kind]
    argv = [sys.executable, "-u", "-m", "goosectl", "listen", "--iface", "rx0"]
    argv += ["--config", str(REPO / path), "--duration", "2", "--json"]
    if ied:
        argv += ["--ied", ied]
    with netlab() as lab:
        far, near = lab.namespace(), lab.namespace()
        lab.veth(far, near, a="tx0", b="rx0")
        listener_mac = near.mac("rx0")
        with far.entered():
            cap = RawSocket("tx0", promiscuous=True, timestamps=False)
        try:
            proc = near.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            first = proc.stdout.readline()
            assert json.loads(first or "{}").get("event") == "listening", proc.stderr.read()
            # a frame to a group the listener joined: proof the pair carries frames
            probe = GooseFrame(
                gocb_ref="PROBE/LLN0$GO$p",
                dat_set="PROBE/LLN0$ds",
                all_data=(Boolean(True),),
                dst=bytes.fromhex("010ccd010001"),
            )
            cap.send(encode_frame(probe))
            out, err = proc.communicate(timeout=60)
            time.sleep(0.2)  # frames still in flight on the pair reach the capture
            frames = cap.recv_batch(10_000)
        finally:
            cap.close()
    assert proc.returncode == 0, err + out
    from_listener = [f for f in frames if f.frame[6:12] == listener_mac]
    lines = [json.loads(x) for x in out.splitlines()]
    (stats,) = [x for x in lines if x.get("event") == "stats"]
    assert stats["received"] >= 1, out  # the listener heard the probe: the pair works
    assert from_listener == []
