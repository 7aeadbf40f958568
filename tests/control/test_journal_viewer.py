"""`goosectl journal STATE --follow` beside a running controller: the viewer reads the
journal read-only while the controller writes it, and shows each new row as it is
committed, in UTC, filtered by machine."""

from __future__ import annotations

import json
import signal
import subprocess

from tests.support.lines import Lines
from tests.support.peers import REPO
from tests.support.procs import goosectl_argv


def test_the_viewer_follows_a_running_controllers_journal(controllers) -> None:
    c = controllers(name="viewed")
    assert c.request({"op": "run", "procedure": "hello", "params": {"n": 1}})["ok"]
    argv = goosectl_argv("journal", str(c.state), "--follow", "--machine", "control", "--json")
    viewer = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        out = Lines(viewer.stdout)
        first = json.loads(out.wait_for(lambda x: '"control"' in x, "the first request", 30))
        assert first["utc"].endswith("Z") and first["machine"] == "control"
        assert c.request({"op": "run", "procedure": "hello", "params": {"n": 2}})["ok"]
        later = out.wait_for(
            lambda x: json.loads(x)["seq"] > first["seq"] and "session=s2" in x, "the new row", 30
        )
        assert json.loads(later)["machine"] == "control"
        assert c.alive()  # a reader beside it changes nothing for the controller
    finally:
        viewer.send_signal(signal.SIGINT)
        assert viewer.wait(10) == 130
    assert c.stop()["journal"]["bay"]["errors"] == 0
