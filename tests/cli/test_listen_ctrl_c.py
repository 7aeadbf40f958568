"""Ctrl-C ends `goosectl listen` with 130, as the README's exit codes say (the shell's own
code for SIGINT, so a script can tell "stopped" from "done"), after its summary: what it
heard is not lost. On a veth pair in namespaces the test makes. Needs root."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from goosectl.lab.netns import netlab
from tests.support.peers import require_root

pytestmark = pytest.mark.root


def test_ctrl_c_ends_listen_with_130_after_its_summary() -> None:
    require_root()
    argv = [sys.executable, "-u", "-m", "goosectl", "listen", "--iface", "rx0", "--json"]
    with netlab() as lab:
        far, near = lab.namespace(), lab.namespace()
        lab.veth(far, near, a="tx0", b="rx0")
        proc = near.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = proc.stdout.readline()
        assert json.loads(first or "{}").get("event") == "listening", proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err + out
    events = [json.loads(x).get("event") for x in out.splitlines()]
    assert "stats" in events, out
    assert "Traceback" not in err, err
