"""`goosectl agent status` and `list` show each session's layers and host lifecycle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.agent.test_cli import agent
from tests.support.lines import Lines

REPO = Path(__file__).resolve().parents[2]


def test_status_and_list_show_the_host_pause_and_abort(tmp_path):
    sock = tmp_path / "demo.sock"
    demo = subprocess.Popen(
        [
            *(sys.executable, "-m", "goosectl", "demo", "--in-memory"),
            *("--out", str(tmp_path / "d"), "--serve", "600", "--control", str(sock)),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        Lines(demo.stderr).wait_for(
            lambda line: f"serving `goosectl agent --control {sock}`" in line,
            "the demo to serve its control socket",
            timeout=120,
        )
        # the demo's own session ended (its fallback reported the stuck breaker)
        first = json.loads(agent(sock, "status", "s1").stdout)["status"]
        assert first["host"] == "completed" and first["layers"]["phase"] == "ended", first
        assert json.loads(agent(sock, "run", "isolate", "bay=2").stdout)["session"] == "s2"
        st = json.loads(agent(sock, "status", "s2").stdout)
        assert st["status"]["host"] == "paused" and st["host"] == "paused", st
        assert st["status"]["layers"]["phase"] == "operating"
        assert st["status"]["layers"]["flow"] == "open_breaker"
        listed = json.loads(agent(sock, "list").stdout)["sessions"]
        assert {s["session"]: s["host"] for s in listed} == {"s1": "completed", "s2": "paused"}
        agent(sock, "abort", "s2")
        st = json.loads(agent(sock, "status", "s2").stdout)["status"]
        assert st["host"] == "completed" and st["layers"]["aborted"], st
        assert st["layers"]["flow"] == "stopped" and st["layers"]["phase"] == "ended"
    finally:
        demo.terminate()
        demo.communicate(timeout=30)  # drain its pipes: a writer blocked on one never exits
